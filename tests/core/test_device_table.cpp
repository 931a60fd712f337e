// core/device_table.h: the tables of what each device provides per op (the Backend's kernels, the
// linalg solver, the fused optimizer steps), their fills from the lists, registration and lookup.
#include <gtest/gtest.h>

#include <string>

#include "core/backend.h"
#include "core/linalg/solver.h"
#include "nabla.h"
#include "optim/fused.h"

using namespace nabla;

namespace {

// A small list of the tables' shape: one entry that raises when missing, one that answers false.
#define TEST_ENTRIES(X)                          \
  X(scale, double, (double x, double by), raise) \
  X(try_fast, bool, (const Tensor& x), no)

struct TestTable {
  NABLA_DEVICE_ENTRIES(TEST_ENTRIES)
};

namespace full_impl {
double scale(double x, double by) { return x * by; }
bool try_fast(const Tensor&) { return true; }
}  // namespace full_impl

namespace lacking_impl {
double scale(double x, double by) { return x * by + 1; }
NABLA_DECLARE_LACKING(try_fast, "no fast path on this test device")
}  // namespace lacking_impl

TestTable full_table() {
  TestTable table;
  name_entries(table, "cpu");
  namespace impl = full_impl;
  TEST_ENTRIES(NABLA_FILL_ENTRY)
  return table;
}

TestTable lacking_table() {
  TestTable table;
  name_entries(table, "cuda");
  namespace impl = lacking_impl;
  TEST_ENTRIES(NABLA_FILL_ENTRY)
  return table;
}

std::string not_implemented_message(const TestTable& t) {
  try {
    t.scale(1, 2);
  } catch (const NotImplemented& e) { return e.what(); }
  return "no error";
}

}  // namespace

TEST(DeviceTable, FillPointsEveryEntryAtTheFunctionOfItsName) {
  const TestTable t = full_table();
  EXPECT_TRUE(static_cast<bool>(t.scale));
  EXPECT_DOUBLE_EQ(t.scale(3, 4), 12);
  EXPECT_TRUE(t.try_fast(Tensor()));
  EXPECT_STREQ(t.scale.name, "scale");
  EXPECT_STREQ(t.try_fast.device, "cpu");
}

TEST(DeviceTable, LackingOnPurposeLeavesTheEntryEmptyWithItsReason) {
  const TestTable t = lacking_table();
  EXPECT_DOUBLE_EQ(t.scale(3, 4), 13);
  EXPECT_FALSE(static_cast<bool>(t.try_fast));
  EXPECT_FALSE(t.try_fast(Tensor()));  // optional: answers false
  EXPECT_STREQ(t.try_fast.lacking, "no fast path on this test device");
  EXPECT_EQ(t.scale.lacking, nullptr);
}

TEST(DeviceTable, AMissingEntryRaisesNotImplementedNamingEntryDeviceAndReason) {
  TestTable t;
  name_entries(t, "cuda");
  EXPECT_EQ(not_implemented_message(t), "scale: not implemented for device type 'cuda'");
  t.scale.lacking = "the reason";
  EXPECT_EQ(not_implemented_message(t), "scale: not implemented for device type 'cuda': the reason");
}

TEST(DeviceTable, RegistersPerDeviceTypeAndFallsBackToAnEmptyNamedTable) {
  DeviceTable<const TestTable> tables;
  EXPECT_EQ(tables.find(DeviceType::cpu), nullptr);
  EXPECT_EQ(tables.find(DeviceType::cuda), nullptr);
  // Nothing registered: get() answers an empty table of that device, whose entries raise or answer false.
  const TestTable& none = tables.get(DeviceType::cuda);
  EXPECT_EQ(not_implemented_message(none), "scale: not implemented for device type 'cuda'");
  EXPECT_FALSE(none.try_fast(Tensor()));
  EXPECT_EQ(not_implemented_message(tables.get(DeviceType::cpu)), "scale: not implemented for device type 'cpu'");

  static const TestTable cuda_table = lacking_table();
  tables.set(DeviceType::cuda, &cuda_table);
  EXPECT_EQ(tables.find(DeviceType::cuda), &cuda_table);
  EXPECT_EQ(&tables.get(DeviceType::cuda), &cuda_table);
  EXPECT_EQ(tables.find(DeviceType::cpu), nullptr);
  EXPECT_DOUBLE_EQ(tables.get(DeviceType::cuda).scale(1, 1), 2);
  tables.set(DeviceType::cuda, nullptr);
  EXPECT_EQ(tables.find(DeviceType::cuda), nullptr);
}

TEST(DeviceTable, TheCpuBackendFillsEveryKernelOfTheList) {
  const Backend& cpu = backend_for(kCPU);
  int entries = 0;
  cpu.for_each_entry([&](const auto& k) {
    ++entries;
    EXPECT_TRUE(static_cast<bool>(k)) << k.name;
    EXPECT_STREQ(k.device, "cpu") << k.name;
    EXPECT_EQ(k.lacking, nullptr) << k.name;
  });
#define COUNT_KERNEL(...) +1
  EXPECT_EQ(entries, 0 NABLA_KERNELS(COUNT_KERNEL));
#undef COUNT_KERNEL
  EXPECT_STREQ(cpu.matmul.name, "matmul");
}

TEST(DeviceTable, TheCpuFusedStepsFillEveryUpdateOfTheList) {
  const optim::FusedSteps& cpu = optim::fused_steps(kCPU);
  int entries = 0;
  cpu.for_each_entry([&](const auto& k) {
    ++entries;
    EXPECT_TRUE(static_cast<bool>(k)) << k.name;
    EXPECT_STREQ(k.device, "cpu") << k.name;
  });
  EXPECT_EQ(entries, 5);
}

TEST(DeviceTable, TheCpuRegistersNoLinalgSolver) {
  // CPU tensors call LAPACK directly; tests/cuda/test_solver.cpp registers one for the scope of its tests.
  EXPECT_EQ(linalg_device::solver_for(DeviceType::cpu), nullptr);
}

// The CUDA plugin's tables, loaded without a driver: every entry of the three lists is filled, or
// (kernels only) lacking with its reason. On a GPU machine the same tables serve the CUDA tensors.
TEST(DeviceTable, TheCudaBackendFillsItsTablesFromTheLists) {
  if (!internal::load_cuda_backend(/*skip_driver_check=*/true)) {
    const std::string why = internal::cuda_backend_missing_reason();
    if (why.find("no CUDA backend") != std::string::npos || why.find("NABLA_DISABLE_CUDA") != std::string::npos)
      GTEST_SKIP() << why;
    FAIL() << "the CUDA plugin did not load: " << why;
  }
  const Backend* cuda = internal::registered_backend(DeviceType::cuda);
  ASSERT_NE(cuda, nullptr);
  int kernels = 0;
  cuda->for_each_entry([&](const auto& k) {
    ++kernels;
    EXPECT_TRUE(static_cast<bool>(k) || k.lacking) << k.name << " has neither a CUDA kernel nor a reason";
    EXPECT_STREQ(k.device, "cuda") << k.name;
  });
#define COUNT_KERNEL(...) +1
  EXPECT_EQ(kernels, 0 NABLA_KERNELS(COUNT_KERNEL));
#undef COUNT_KERNEL
  const linalg_device::Solver* solver = linalg_device::solver_for(DeviceType::cuda);
  ASSERT_NE(solver, nullptr);
  solver->for_each_entry([&](const auto& k) {
    EXPECT_TRUE(static_cast<bool>(k)) << k.name;
    EXPECT_STREQ(k.device, "cuda") << k.name;
  });
  optim::fused_steps(Device::cuda()).for_each_entry([&](const auto& k) {
    EXPECT_TRUE(static_cast<bool>(k)) << k.name;
    EXPECT_STREQ(k.device, "cuda") << k.name;
  });
}
