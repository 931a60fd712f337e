// nabla::autocast over the op registry: every entry whose op is on one of a device's lists runs its
// samples inside a region and gives the list's dtype, with values that agree with the op run
// outside it; every op on the lists has such an entry. CUDA's lists are checked on CPU tensors (the
// test seam autocast_internal::ListsOf), so a host without a GPU finds an op whose hook is missing.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "core/autocast.h"
#include "opinfo.h"
#include "tests/common/value_helpers.h"

namespace nabla::testing {
namespace {

// The one list an entry's ops are on for `lists`' device, or none (no list, or different lists).
CastPolicy entry_policy(const OpInfo& op, DeviceType lists) {
  std::optional<CastPolicy> p;
  for (OpId id : op.ops) {
    CastPolicy q = autocast_policy(id, lists);
    if (p && *p != q) return CastPolicy::none;
    p = q;
  }
  return p.value_or(CastPolicy::none);
}

double scale_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v)
    if (std::isfinite(x)) s = std::max(s, std::fabs(x));
  return s;
}

// Runs every registry entry on `lists`' lists under autocast(kCPU, low) and returns the ops checked.
std::set<OpId> check_lists(DeviceType lists, DType low) {
  std::set<OpId> covered;
  std::optional<autocast_internal::ListsOf> seam;
  if (lists != DeviceType::cpu) seam.emplace(lists);
  for (const OpInfo& op : registry()) {
    const CastPolicy policy = entry_policy(op, lists);
    if (policy == CastPolicy::none || policy == CastPolicy::banned || !op.supports_float32) continue;
    for (size_t i = 0; i < op.samples.size(); ++i) {
      SCOPED_TRACE(op.name + " sample " + op.samples[i].desc + " on " +
                   std::string(lists == DeviceType::cuda ? "cuda" : "cpu") + "'s " + cast_policy_name(policy) +
                   " list, " + dtype_name(low));
      // lower: float32 inputs, which the region lowers. fp32: inputs in the low dtype, which it
      // raises. promote: the first floating input in the low dtype and the others in float32.
      Inputs in = make_inputs(op.samples[i], policy == CastPolicy::lower ? kFloat32 : low, kCPU, false, i + 1);
      std::optional<DType> widest;
      bool first = true;
      for (Tensor& t : in) {
        if (!t.defined() || !is_floating(t.dtype())) continue;
        if (policy == CastPolicy::promote && !first) t = t.to(kFloat32);
        first = false;
        widest = widest ? promote_types(*widest, t.dtype()) : t.dtype();
      }
      if (!widest) continue;
      const DType want_dtype = policy == CastPolicy::lower ? low : policy == CastPolicy::fp32 ? kFloat32 : *widest;
      Inputs ref;  // the same values in float32, run outside a region
      for (const Tensor& t : in) ref.push_back(t.defined() && is_floating(t.dtype()) ? t.to(kFloat32) : t);
      Outputs got, want;
      try {
        auto guard = autocast(kCPU, low);
        manual_seed(7);
        got = op.fn(in);
      } catch (const Error& e) {
        ADD_FAILURE() << "raised under autocast: " << e.what();
        continue;
      }
      manual_seed(7);
      want = op.fn(ref);
      EXPECT_EQ(got.size(), want.size());
      if (got.size() != want.size()) continue;
      for (size_t k = 0; k < got.size(); ++k) {
        if (!got[k].defined() || !is_floating(want[k].dtype())) continue;
        // An entry's first output is its op on all of the sample's inputs; the others may come from
        // other ops (linalg.svd's U S^2 Vh check, a matmul) or from fewer inputs (cat({x0, x0})).
        if (k == 0) EXPECT_EQ(got[k].dtype(), want_dtype);
        if (want[k].numel() == 0) continue;
        std::vector<double> w = values(want[k]);
        // The low dtype's rounding: of the inputs and outputs (lower), or of the intermediate results of
        // an entry that builds its op's input from its samples (a linear-algebra entry's A A^T + n I).
        const double tol = low == kBFloat16 ? 3e-2 : 4e-3;
        EXPECT_TRUE(values_near(values(got[k]), w, tol * scale_of(w) + tol, tol)) << "output " << k;
      }
      covered.insert(op.ops.begin(), op.ops.end());
    }
  }
  return covered;
}

// The ops on `lists`' lists that no registry entry of a single list reaches.
std::vector<std::string> uncovered(DeviceType lists, const std::set<OpId>& covered) {
  std::vector<std::string> out;
  for (size_t i = 0; i < kOpCount; ++i) {
    const OpId id = static_cast<OpId>(i);
    const CastPolicy p = autocast_policy(id, lists);
    if (p != CastPolicy::none && p != CastPolicy::banned && !covered.count(id)) out.push_back(op_name(id));
  }
  return out;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

// Every op on `lists`' lists casts as its list says, under autocast(kCPU, low), and has a registry
// entry that shows it.
void expect_every_listed_op_casts(DeviceType lists, DType low) {
  std::set<OpId> covered = check_lists(lists, low);
  std::vector<std::string> missing = uncovered(lists, covered);
  std::cout << covered.size() << " ops on the lists of " << (lists == DeviceType::cuda ? "cuda" : "cpu")
            << " checked in " << dtype_name(low) << "; without an entry: " << joined(missing) << "\n";
  EXPECT_TRUE(missing.empty()) << "on a list but in no registry entry of one list: " << joined(missing);
}

TEST(AutocastOps, EveryOpOnTheCpuListsCastsAsItsList) { expect_every_listed_op_casts(DeviceType::cpu, kBFloat16); }
TEST(AutocastOps, CpuFloat16) { expect_every_listed_op_casts(DeviceType::cpu, kFloat16); }
TEST(AutocastOps, EveryOpOnTheCudaListsCastsAsItsList) { expect_every_listed_op_casts(DeviceType::cuda, kFloat16); }

// binary_cross_entropy is banned on CUDA, as PyTorch: the error names the safe op.
TEST(AutocastOps, BannedOpNamesTheSafeOne) {
  autocast_internal::ListsOf seam(DeviceType::cuda);
  auto guard = autocast(kCPU, kHalf);
  EXPECT_TRUE(
      throws_with<ValueError>([] { (void)nn::functional::binary_cross_entropy(rand({4}), rand({4})); },
                              {"binary_cross_entropy", "unsafe to autocast", "binary_cross_entropy_with_logits"}));
}

}  // namespace
}  // namespace nabla::testing
