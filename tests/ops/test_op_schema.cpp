// The op schema (core/op_schema.h, core/elementwise_ops.h): every row's name round-trips through
// op_from_name, every op whose row says `method` is a Tensor method, every `no_onnx` row gives its
// reason, and the ONNX exporter has a lowering exactly for the rows that say to_onnx().
#include <gtest/gtest.h>

#include <set>

#include "core/op_schema.h"
#include "nabla.h"
#include "onnx/exporter.h"

namespace nabla {
namespace {

// Whether Tensor has a member of each row's name, overloaded or not: beside a base holding a data
// member of that name, naming it through the derived class is ambiguous exactly when Tensor has
// one too.
#define NABLA_HAS_MEMBER(name, ...)               \
  namespace has_##name {                          \
    struct Other {                                \
      int name;                                   \
    };                                            \
    struct Probe : Tensor, Other {};              \
    template <class P>                            \
    constexpr bool check() {                      \
      return !requires { &P::name; };             \
    }                                             \
    inline constexpr bool value = check<Probe>(); \
  }
NABLA_UNARY_FLOAT_OPS(NABLA_HAS_MEMBER)
NABLA_UNARY_SAME_OPS(NABLA_HAS_MEMBER)
NABLA_UNARY_PARAM_OPS(NABLA_HAS_MEMBER)
NABLA_UNARY_BOOL_OPS(NABLA_HAS_MEMBER)
NABLA_BINARY_ARITH_OPS(NABLA_HAS_MEMBER)
NABLA_BINARY_BOOL_OPS(NABLA_HAS_MEMBER)
NABLA_OP_FAMILIES(NABLA_HAS_MEMBER)
#undef NABLA_HAS_MEMBER

#define NABLA_MEMBER_VALUE(name, ...) has_##name::value,
constexpr bool kHasMember[] = {NABLA_UNARY_FLOAT_OPS(NABLA_MEMBER_VALUE) NABLA_UNARY_SAME_OPS(NABLA_MEMBER_VALUE)
                                   NABLA_UNARY_PARAM_OPS(NABLA_MEMBER_VALUE) NABLA_UNARY_BOOL_OPS(NABLA_MEMBER_VALUE)
                                       NABLA_BINARY_ARITH_OPS(NABLA_MEMBER_VALUE)
                                           NABLA_BINARY_BOOL_OPS(NABLA_MEMBER_VALUE)
                                               NABLA_OP_FAMILIES(NABLA_MEMBER_VALUE)};
#undef NABLA_MEMBER_VALUE
static_assert(std::size(kHasMember) == kOpCount);
// The detection itself: a member Tensor has, an overloaded one, one it lacks.
static_assert(has_exp::value && has_sum::value && !has_conv2d::value && !has_cat::value);

OpId id(size_t i) { return static_cast<OpId>(i); }

TEST(OpSchema, NamesAreUniqueAndRoundTrip) {
  std::set<std::string> seen;
  for (size_t i = 0; i < kOpCount; ++i) {
    EXPECT_TRUE(seen.insert(op_name(id(i))).second) << "two rows named " << op_name(id(i));
    EXPECT_EQ(op_from_name(op_name(id(i))), id(i)) << op_name(id(i));
  }
  EXPECT_FALSE(op_from_name("no_such_op"));
  EXPECT_EQ(op_id(UnaryOp::tanh), OpId::tanh);
  EXPECT_EQ(op_id(BinaryOp::hypot), OpId::hypot);
  EXPECT_STREQ(op_name(OpId::conv3d), "conv3d");
}

TEST(OpSchema, EveryOpMarkedMethodIsATensorMethod) {
  std::string missing;
  for (size_t i = 0; i < kOpCount; ++i)
    if (op_row(id(i)).has_method() && !kHasMember[i]) missing += std::string(" ") + op_name(id(i));
  EXPECT_TRUE(missing.empty()) << "ops whose schema row says `method` (PyTorch has Tensor.<name>) but Tensor has "
                                  "no such method (declare it in core/tensor.h):"
                               << missing;
}

TEST(OpSchema, OnnxLoweringsAreWhatTheRowsSay) {
  const auto& table = onnx::internal::lowerings();
  std::string unlowered, extra, no_reason;
  for (size_t i = 0; i < kOpCount; ++i) {
    const OnnxRule& r = op_row(id(i)).onnx;
    const bool has = !table[i].empty();
    if (r.kind == OnnxRule::lowered && !has) unlowered += std::string(" ") + op_name(id(i));
    if (r.kind != OnnxRule::lowered && has) extra += std::string(" ") + op_name(id(i));
    if (r.kind == OnnxRule::none && (!r.reason || !*r.reason)) no_reason += std::string(" ") + op_name(id(i));
  }
  EXPECT_TRUE(unlowered.empty()) << "rows saying to_onnx() without a lowering in onnx/lower_*.cpp:" << unlowered;
  EXPECT_TRUE(extra.empty()) << "lowerings of ops whose row does not say to_onnx():" << extra;
  EXPECT_TRUE(no_reason.empty()) << "no_onnx rows without a reason:" << no_reason;
}

// Opset differences are entries of their own: the highest `since` at or below the graph's opset.
TEST(OpSchema, OnnxLoweringsByOpset) {
  const auto& table = onnx::internal::lowerings();
  const auto& hardswish = table[static_cast<size_t>(OpId::hardswish)];
  ASSERT_NE(hardswish.find(13), nullptr);
  ASSERT_NE(hardswish.find(14), nullptr);
  EXPECT_EQ(hardswish.find(13)->since, 13);
  EXPECT_EQ(hardswish.find(17)->since, 14);
  const auto& scatter_add = table[static_cast<size_t>(OpId::scatter_add)];
  EXPECT_EQ(scatter_add.find(15), nullptr);  // refused, naming opset 16
  EXPECT_EQ(scatter_add.find(16)->since, 16);
  EXPECT_EQ(table[static_cast<size_t>(OpId::grid_sample)].find(15)->since, 13);
}

// Every traced op's record carries its row's attribute struct (trace::attrs_index at run time is
// what the compile-time OpAttrsOf says).
TEST(OpSchema, AttributeStructsOfTracedOps) {
  EXPECT_EQ(trace::attrs_index(OpId::conv2d), (trace::VariantIndex<ConvAttrs, OpAttrs>::value));
  EXPECT_EQ(trace::attrs_index(OpId::exp), (trace::VariantIndex<UnaryAttrs, OpAttrs>::value));
  EXPECT_EQ(trace::attrs_index(OpId::add), (trace::VariantIndex<BinaryAttrs, OpAttrs>::value));
  EXPECT_EQ(trace::attrs_index(OpId::cat), (trace::VariantIndex<DimAttrs, OpAttrs>::value));
  EXPECT_EQ(trace::attrs_index(OpId::ctc_loss), (trace::VariantIndex<NoAttrs, OpAttrs>::value));
}

}  // namespace
}  // namespace nabla
