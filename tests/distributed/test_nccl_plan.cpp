// The nccl backend's host-side pieces, checked on every machine (no GPU, no NCCL needed): which NCCL
// data type and reduction carry each dtype and ReduceOp, and the errors for what NCCL cannot do.
// The multi-process NCCL tests are in test_distributed.cpp (they skip without GPUs).
#include <gtest/gtest.h>

#include <string>

#include "distributed/nccl_plan.h"

using namespace nabla;
namespace dist = nabla::distributed;
namespace plan = nabla::distributed::nccl_plan;
using plan::NcclOp;
using plan::NcclType;

namespace {

const DType kAll[] = {kFloat32, kFloat64, kInt64, kInt32, kUInt8, kBool, kFloat16, kBFloat16};
const dist::ReduceOp kOps[] = {dist::ReduceOp::sum, dist::ReduceOp::avg, dist::ReduceOp::min, dist::ReduceOp::max,
                               dist::ReduceOp::product};

TEST(NcclPlan, EveryDTypeHasAnNcclType) {
  EXPECT_EQ(plan::data_type(kFloat32, "x"), NcclType::float32);
  EXPECT_EQ(plan::data_type(kFloat64, "x"), NcclType::float64);
  EXPECT_EQ(plan::data_type(kInt64, "x"), NcclType::int64);
  EXPECT_EQ(plan::data_type(kInt32, "x"), NcclType::int32);
  EXPECT_EQ(plan::data_type(kUInt8, "x"), NcclType::uint8);
  EXPECT_EQ(plan::data_type(kBool, "x"), NcclType::uint8);  // its 0/1 bytes
  EXPECT_EQ(plan::data_type(kFloat16, "x"), NcclType::float16);
  EXPECT_EQ(plan::data_type(kBFloat16, "x"), NcclType::bfloat16);
  // NCCL's own enum values (nccl.h), which process_group_nccl.cpp also static_asserts.
  EXPECT_EQ(static_cast<int>(NcclType::uint8), 1);
  EXPECT_EQ(static_cast<int>(NcclType::int64), 4);
  EXPECT_EQ(static_cast<int>(NcclType::float32), 7);
  EXPECT_EQ(static_cast<int>(NcclType::bfloat16), 9);
  EXPECT_EQ(static_cast<int>(NcclOp::avg), 4);
  EXPECT_STREQ(plan::type_name(NcclType::bfloat16), "ncclBfloat16");
  EXPECT_STREQ(plan::op_name(NcclOp::prod), "ncclProd");
}

TEST(NcclPlan, ReductionsKeepTheGlooBackendsMeaning) {
  using R = plan::Reduction;
  // Numbers: the op itself; avg is ncclAvg.
  for (DType d : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kUInt8}) {
    NcclType t = plan::data_type(d, "all_reduce");
    EXPECT_EQ(plan::reduction(dist::ReduceOp::sum, d, "all_reduce"), (R{t, NcclOp::sum})) << dtype_name(d);
    EXPECT_EQ(plan::reduction(dist::ReduceOp::product, d, "all_reduce"), (R{t, NcclOp::prod})) << dtype_name(d);
    EXPECT_EQ(plan::reduction(dist::ReduceOp::min, d, "all_reduce"), (R{t, NcclOp::min})) << dtype_name(d);
    EXPECT_EQ(plan::reduction(dist::ReduceOp::max, d, "all_reduce"), (R{t, NcclOp::max})) << dtype_name(d);
  }
  for (DType d : {kFloat32, kFloat64, kFloat16, kBFloat16})
    EXPECT_EQ(plan::reduction(dist::ReduceOp::avg, d, "all_reduce"), (R{plan::data_type(d, ""), NcclOp::avg}));
  // bool: sum and max are or (max of 0/1 bytes), product and min are and (min).
  EXPECT_EQ(plan::reduction(dist::ReduceOp::sum, kBool, "all_reduce"), (R{NcclType::uint8, NcclOp::max}));
  EXPECT_EQ(plan::reduction(dist::ReduceOp::max, kBool, "all_reduce"), (R{NcclType::uint8, NcclOp::max}));
  EXPECT_EQ(plan::reduction(dist::ReduceOp::product, kBool, "all_reduce"), (R{NcclType::uint8, NcclOp::min}));
  EXPECT_EQ(plan::reduction(dist::ReduceOp::min, kBool, "all_reduce"), (R{NcclType::uint8, NcclOp::min}));
  // Every (op, dtype) either maps or throws DTypeError for avg on a non-floating dtype.
  int mapped = 0;
  for (DType d : kAll)
    for (auto op : kOps) {
      if (op == dist::ReduceOp::avg && !is_floating(d)) continue;
      EXPECT_NO_THROW(plan::reduction(op, d, "reduce_scatter"));
      ++mapped;
    }
  EXPECT_EQ(mapped, 8 * 5 - 4);
}

TEST(NcclPlan, AvgOnIntegersAndBoolIsADTypeErrorNamingTheCollective) {
  for (DType d : {kInt64, kInt32, kUInt8, kBool}) {
    try {
      plan::reduction(dist::ReduceOp::avg, d, "reduce_scatter");
      ADD_FAILURE() << "avg on " << dtype_name(d) << " should throw";
    } catch (const DTypeError& e) {
      std::string m = e.what();
      EXPECT_NE(m.find("reduce_scatter"), std::string::npos) << m;
      EXPECT_NE(m.find("avg"), std::string::npos) << m;
      EXPECT_NE(m.find(dtype_name(d)), std::string::npos) << m;
    }
  }
}

}  // namespace
