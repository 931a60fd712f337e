// Every op's typed identity: one row per op, by family, giving its OpId, the attribute struct its
// trace record carries (core/op_attrs.h), its variants and its ONNX lowering (or why it has none).
// The elementwise ops' rows are the lists of core/elementwise_ops.h (their last column is the ONNX
// one); the rows here are every other op. From the rows come the `OpId` enum, `op_name`, the
// attribute type a trace hook must pass (`trace::traced<OpId::conv2d>(..., ConvAttrs{...})` does
// not compile with another struct), the registry's coverage (every differentiable op has samples:
// tests/ops/test_opinfo.cpp), the ONNX coverage (onnx/: every op marked `to_onnx()` has a lowering, no
// other op has one) and the Tensor-method check (an op marked `method` is a Tensor method:
// tests/ops/test_op_schema.cpp).
//
// A row: X(name, Attrs, variants, onnx)
//   Attrs     the struct of its trace record (NoAttrs: none, or the op is not traced)
//   variants  `fn` (a free function only), `method` (also x.name(...), as PyTorch's Tensor.name),
//             `method_only` (a Tensor method only), `inplace` (also x.name_(...)), `inplace_only`;
//             `| nograd`: not differentiable (no gradcheck samples required)
//   onnx      `to_onnx()` (a lowering in onnx/; `to_onnx("Exp")` for an elementwise op that is one node), `parts()` (exported as the traced ops it is made
//             of), `constant()` (a tensor made without inputs: an initializer of the graph), or
//             `no_onnx("why")`
// Adding an op: its row here (or in elementwise_ops.h), its declaration, its registry entry.
#pragma once

#include <array>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string_view>

#include "elementwise_ops.h"
#include "op_attrs.h"

namespace nabla {

// ---- the columns ----------------------------------------------------------------------------------
namespace op_variants {
inline constexpr uint32_t fn = 0, method = 1, method_only = 2 | 1, inplace = 4, inplace_only = 8 | 4, nograd = 16;
}  // namespace op_variants

// The ONNX column.
struct OnnxRule {
  enum Kind : uint8_t { lowered, parts, constant, none } kind = none;
  const char* op_type = nullptr;  // elementwise ops mapped to one ONNX node of this type
  const char* reason = nullptr;   // none: why
};
constexpr OnnxRule to_onnx(const char* op_type = nullptr) { return {OnnxRule::lowered, op_type, nullptr}; }
constexpr OnnxRule parts() { return {OnnxRule::parts, nullptr, nullptr}; }
constexpr OnnxRule constant() { return {OnnxRule::constant, nullptr, nullptr}; }
constexpr OnnxRule no_onnx(const char* reason) { return {OnnxRule::none, nullptr, reason}; }

// ---- the rows ---------------------------------------------------------------------------------------
// Elementwise ops outside the lists of elementwise_ops.h.
#define NABLA_ELEMENTWISE_EXTRA_OPS(X)                                               \
  X(clamp, UnaryAttrs, method | inplace, to_onnx())                                  \
  X(clamp_min, NoAttrs, method, parts())                                             \
  X(clamp_max, NoAttrs, method, parts())                                             \
  X(pow_scalar, ScalarAttrs, fn, to_onnx())                                          \
  X(where, NoAttrs, method, to_onnx())                                               \
  X(lerp, NoAttrs, method, parts())                                                  \
  X(addcmul, NoAttrs, method, parts())                                               \
  X(addcdiv, NoAttrs, method, parts())                                               \
  X(nan_to_num, NoAttrs, method, parts())                                            \
  X(relu6, NoAttrs, fn, parts())                                                     \
  X(isclose, NoAttrs, method | nograd, parts())                                      \
  X(allclose, NoAttrs, method | nograd, no_onnx("returns a C++ bool, not a tensor")) \
  X(equal, NoAttrs, method | nograd, no_onnx("returns a C++ bool, not a tensor"))

// Views and shape ops.
#define NABLA_SHAPE_OPS(X)                                                                               \
  X(view, ShapeAttrs, method, to_onnx())                                                                 \
  X(reshape, ShapeAttrs, method, to_onnx())                                                              \
  X(view_as, NoAttrs, method_only, parts())                                                              \
  X(reshape_as, NoAttrs, method_only, parts())                                                           \
  X(permute, DimsAttrs, method, to_onnx())                                                               \
  X(transpose, NoAttrs, method, parts())                                                                 \
  X(t, NoAttrs, method, parts())                                                                         \
  X(squeeze, SqueezeAttrs, method, to_onnx())                                                            \
  X(unsqueeze, DimAttrs, method, to_onnx())                                                              \
  X(flatten, FlattenAttrs, method, to_onnx())                                                            \
  X(unflatten, NoAttrs, method, parts())                                                                 \
  X(expand, ShapeAttrs, method_only, to_onnx())                                                          \
  X(expand_as, NoAttrs, method_only, parts())                                                            \
  X(narrow, NoAttrs, method, parts())                                                                    \
  X(slice, SliceAttrs, method, to_onnx())                                                                \
  X(select, SelectAttrs, method, to_onnx())                                                              \
  X(diagonal, DiagonalAttrs, method, to_onnx())                                                          \
  X(as_strided, NoAttrs, method, no_onnx("a view of storage by strides: ONNX values have no storage"))   \
  X(unfold, NoAttrs, method_only,                                                                        \
    no_onnx("overlapping windows of a view: not lowered yet (a Gather of the window indices would do)")) \
  X(movedim, NoAttrs, method, parts())                                                                   \
  X(split, NoAttrs, method, parts())                                                                     \
  X(split_with_sizes, SplitAttrs, method, to_onnx())                                                     \
  X(chunk, NoAttrs, method, parts())                                                                     \
  X(unbind, DimAttrs, method, to_onnx())                                                                 \
  X(broadcast_tensors, NoAttrs, fn, parts())                                                             \
  X(cat, DimAttrs, fn, to_onnx())                                                                        \
  X(stack, NoAttrs, fn, parts())                                                                         \
  X(repeat, NoAttrs, method_only, parts())                                                               \
  X(flip, NoAttrs, method, parts())                                                                      \
  X(roll, NoAttrs, method, parts())                                                                      \
  X(tril, NoAttrs, method | inplace, parts())                                                            \
  X(triu, NoAttrs, method | inplace, parts())                                                            \
  X(pad, PadAttrs, fn, to_onnx())                                                                        \
  X(contiguous, NoAttrs, method_only, parts())                                                           \
  X(clone, NoAttrs, method, to_onnx())                                                                   \
  X(to, NoAttrs, method_only, to_onnx())

// Indexing.
#define NABLA_INDEXING_OPS(X)                           \
  X(index_select, DimAttrs, method, to_onnx())          \
  X(gather, DimAttrs, method, to_onnx())                \
  X(scatter, DimAttrs, method | inplace, to_onnx())     \
  X(scatter_add, DimAttrs, method | inplace, to_onnx()) \
  X(scatter_reduce, NoAttrs, method, parts())           \
  X(index_add, DimAttrs, method | inplace, to_onnx())   \
  X(masked_fill, NoAttrs, method | inplace, parts())    \
  X(masked_select, NoAttrs, method, parts())            \
  X(nonzero, NoAttrs, method | nograd, to_onnx())       \
  X(index, NoAttrs, method_only, parts())               \
  X(index_put, NoAttrs, method | inplace, parts())      \
  X(take_along_dim, NoAttrs, method, parts())           \
  X(repeat_interleave, NoAttrs, method, parts())        \
  X(one_hot, NoAttrs, fn | nograd, parts())             \
  X(embedding, NoAttrs, fn, to_onnx())

// Reductions, scans and sorting.
#define NABLA_REDUCTION_OPS(X)                        \
  X(sum, ReduceAttrs, method, to_onnx())              \
  X(mean, ReduceAttrs, method, to_onnx())             \
  X(prod, ReduceAttrs, method, to_onnx())             \
  X(max, NoAttrs, method, parts())                    \
  X(max_dim, DimKeepAttrs, fn, to_onnx())             \
  X(min, NoAttrs, method, parts())                    \
  X(min_dim, DimKeepAttrs, fn, to_onnx())             \
  X(amax, ReduceAttrs, method, to_onnx())             \
  X(amin, ReduceAttrs, method, to_onnx())             \
  X(argmax, NoAttrs, method | nograd, parts())        \
  X(argmin, NoAttrs, method | nograd, parts())        \
  X(var, NoAttrs, method, parts())                    \
  X(std, NoAttrs, method, parts())                    \
  X(var_mean, NoAttrs, fn, parts())                   \
  X(norm, NoAttrs, method, parts())                   \
  X(logsumexp, NoAttrs, method, parts())              \
  X(any, ReduceAttrs, method | nograd, to_onnx())     \
  X(all, ReduceAttrs, method | nograd, to_onnx())     \
  X(count_nonzero, NoAttrs, method | nograd, parts()) \
  X(cumsum, DimAttrs, method, to_onnx())              \
  X(cumprod, DimAttrs, method, to_onnx())             \
  X(sort, SortAttrs, method, to_onnx())               \
  X(argsort, NoAttrs, method | nograd, parts())       \
  X(topk, TopkAttrs, method, to_onnx())               \
  X(softmax, DimAttrs, method, to_onnx())             \
  X(log_softmax, DimAttrs, method, to_onnx())

// Statistics, scans and counting (core/math_ops.h).
#define NABLA_STATS_OPS(X)                                   \
  X(median, OptionalDimAttrs, method, to_onnx())             \
  X(nanmedian, OptionalDimAttrs, method, to_onnx())          \
  X(kthvalue, KthvalueAttrs, method, to_onnx())              \
  X(mode, DimKeepAttrs, method, to_onnx())                   \
  X(quantile, QuantileAttrs, method, to_onnx())              \
  X(nanquantile, QuantileAttrs, method, to_onnx())           \
  X(cummax, DimAttrs, method, to_onnx())                     \
  X(cummin, DimAttrs, method, to_onnx())                     \
  X(logcumsumexp, DimAttrs, method, to_onnx())               \
  X(histc, HistcAttrs, method | nograd, to_onnx())           \
  X(bincount, BincountAttrs, method | nograd, to_onnx())     \
  X(searchsorted, SearchsortedAttrs, fn | nograd, to_onnx()) \
  X(bucketize, NoAttrs, fn | nograd, parts())                \
  X(unique, UniqueAttrs, method | nograd, to_onnx())         \
  X(unique_consecutive, UniqueAttrs, method | nograd, to_onnx())

// Matrix products and linear algebra (core/ops.h, core/linalg.h).
#define NABLA_LINALG_OPS(X)                                                                    \
  X(matmul, NoAttrs, method, to_onnx())                                                        \
  X(mm, NoAttrs, method, to_onnx())                                                            \
  X(bmm, NoAttrs, method, to_onnx())                                                           \
  X(mv, NoAttrs, method, parts())                                                              \
  X(dot, NoAttrs, method, parts())                                                             \
  X(outer, NoAttrs, method, parts())                                                           \
  X(addmm, NoAttrs, method, parts())                                                           \
  X(baddbmm, NoAttrs, method, parts())                                                         \
  X(einsum, NoAttrs, fn, parts())                                                              \
  X(tensordot, NoAttrs, fn, parts())                                                           \
  X(linear, NoAttrs, fn, to_onnx())                                                            \
  X(diag, NoAttrs, method, parts())                                                            \
  X(linalg_trace, NoAttrs, fn, parts())                                                        \
  X(linalg_cross, NoAttrs, fn, parts())                                                        \
  X(linalg_inv, NoAttrs, fn, no_onnx("ONNX has no matrix inverse"))                            \
  X(linalg_solve, NoAttrs, fn, no_onnx("ONNX has no linear solve"))                            \
  X(linalg_det, NoAttrs, fn, no_onnx("not lowered yet: ONNX's Det computes it in float only")) \
  X(linalg_slogdet, NoAttrs, fn, no_onnx("ONNX has no log-determinant"))                       \
  X(linalg_cholesky, NoAttrs, fn, no_onnx("ONNX has no Cholesky factorization"))               \
  X(linalg_qr, NoAttrs, fn, no_onnx("ONNX has no QR factorization"))                           \
  X(linalg_svd, NoAttrs, fn, no_onnx("ONNX has no singular value decomposition"))              \
  X(linalg_svdvals, NoAttrs, fn, no_onnx("ONNX has no singular value decomposition"))          \
  X(linalg_eigh, NoAttrs, fn, no_onnx("ONNX has no eigendecomposition"))                       \
  X(linalg_eigvalsh, NoAttrs, fn, no_onnx("ONNX has no eigendecomposition"))                   \
  X(linalg_lstsq, NoAttrs, fn, no_onnx("ONNX has no least-squares solver"))                    \
  X(linalg_vector_norm, NoAttrs, fn, parts())                                                  \
  X(linalg_matrix_norm, NoAttrs, fn, parts())                                                  \
  X(linalg_norm, NoAttrs, fn, parts())

// Convolution, pooling and normalization (core/nn_ops.cpp).
#define NABLA_CONV_POOL_OPS(X)                                                                           \
  X(conv1d, ConvAttrs, fn, to_onnx())                                                                    \
  X(conv2d, ConvAttrs, fn, to_onnx())                                                                    \
  X(conv3d, ConvAttrs, fn, to_onnx())                                                                    \
  X(conv2d_input_grad, NoAttrs, fn, no_onnx("a convolution's input gradient, which backward calls"))     \
  X(conv2d_weight_grad, NoAttrs, fn, no_onnx("a convolution's weight gradient, which backward calls"))   \
  X(conv_input_grad, NoAttrs, fn, no_onnx("a convolution's input gradient, which backward calls"))       \
  X(conv_weight_grad, NoAttrs, fn, no_onnx("a convolution's weight gradient, which backward calls"))     \
  X(conv_transpose1d, NoAttrs, fn, parts())                                                              \
  X(conv_transpose2d, ConvTransposeAttrs, fn, to_onnx())                                                 \
  X(conv_transpose3d, NoAttrs, fn, parts())                                                              \
  X(max_pool1d, NoAttrs, fn, parts())                                                                    \
  X(max_pool2d, MaxPoolAttrs, fn, to_onnx())                                                             \
  X(max_pool2d_with_indices, NoAttrs, fn,                                                                \
    no_onnx("not lowered yet: ONNX MaxPool's indices count over the whole tensor, PyTorch's per plane")) \
  X(avg_pool1d, NoAttrs, fn, parts())                                                                    \
  X(avg_pool2d, AvgPoolAttrs, fn, to_onnx())                                                             \
  X(adaptive_avg_pool1d, NoAttrs, fn, parts())                                                           \
  X(adaptive_avg_pool2d, AdaptivePoolAttrs, fn, to_onnx())                                               \
  X(adaptive_max_pool1d, NoAttrs, fn, parts())                                                           \
  X(adaptive_max_pool2d, AdaptivePoolAttrs, fn, to_onnx())                                               \
  X(max_unpool1d, NoAttrs, fn, parts())                                                                  \
  X(max_unpool2d, NoAttrs, fn, parts())                                                                  \
  X(batch_norm, BatchNormAttrs, fn, to_onnx())                                                           \
  X(layer_norm, NoAttrs, fn, parts())                                                                    \
  X(group_norm, NoAttrs, fn, parts())                                                                    \
  X(instance_norm, InstanceNormAttrs, fn, to_onnx())

// nn::functional's other ops: spatial, activations, dropout, attention, recurrent layers.
#define NABLA_NN_OPS(X)                                 \
  X(bilinear, NoAttrs, fn, parts())                     \
  X(normalize, NoAttrs, fn, parts())                    \
  X(pixel_shuffle, NoAttrs, fn, parts())                \
  X(pixel_unshuffle, NoAttrs, fn, parts())              \
  X(affine_grid, NoAttrs, fn, parts())                  \
  X(interpolate, InterpolateAttrs, fn, to_onnx())       \
  X(grid_sample, GridSampleAttrs, fn, to_onnx())        \
  X(im2col, NoAttrs, fn, parts())                       \
  X(col2im, NoAttrs, fn, parts())                       \
  X(embedding_bag, NoAttrs, fn, parts())                \
  X(cosine_similarity, NoAttrs, fn, parts())            \
  X(pairwise_distance, NoAttrs, fn, parts())            \
  X(celu, NoAttrs, fn, parts())                         \
  X(tanhshrink, NoAttrs, fn, parts())                   \
  X(threshold, NoAttrs, fn, parts())                    \
  X(glu, NoAttrs, fn, parts())                          \
  X(prelu, NoAttrs, fn, parts())                        \
  X(softmin, NoAttrs, fn, parts())                      \
  X(dropout, NoAttrs, fn, parts())                      \
  X(dropout2d, NoAttrs, fn, parts())                    \
  X(scaled_dot_product_attention, NoAttrs, fn, parts()) \
  X(flash_attention, NoAttrs, fn, parts())              \
  X(rnn, RnnAttrs, fn, to_onnx())                       \
  X(lstm, RnnAttrs, fn, to_onnx())                      \
  X(gru, RnnAttrs, fn, to_onnx())

// Losses (nn::functional).
#define NABLA_LOSS_OPS(X)                                    \
  X(cross_entropy, NoAttrs, fn, parts())                     \
  X(nll_loss, NoAttrs, fn, parts())                          \
  X(mse_loss, NoAttrs, fn, parts())                          \
  X(l1_loss, NoAttrs, fn, parts())                           \
  X(smooth_l1_loss, NoAttrs, fn, parts())                    \
  X(huber_loss, NoAttrs, fn, parts())                        \
  X(binary_cross_entropy, NoAttrs, fn, parts())              \
  X(binary_cross_entropy_with_logits, NoAttrs, fn, parts())  \
  X(kl_div, NoAttrs, fn, parts())                            \
  X(margin_ranking_loss, NoAttrs, fn, parts())               \
  X(hinge_embedding_loss, NoAttrs, fn, parts())              \
  X(cosine_embedding_loss, NoAttrs, fn, parts())             \
  X(triplet_margin_loss, NoAttrs, fn, parts())               \
  X(triplet_margin_with_distance_loss, NoAttrs, fn, parts()) \
  X(soft_margin_loss, NoAttrs, fn, parts())                  \
  X(multilabel_soft_margin_loss, NoAttrs, fn, parts())       \
  X(multi_margin_loss, NoAttrs, fn, parts())                 \
  X(poisson_nll_loss, NoAttrs, fn, parts())                  \
  X(gaussian_nll_loss, NoAttrs, fn, parts())                 \
  X(ctc_loss, NoAttrs, fn, no_onnx("ONNX has no CTC loss"))

// Tensors made from nothing (constants of a traced graph), random ones, and in-place writes.
#define NABLA_CREATION_OPS(X)                                                                   \
  X(tensor, NoAttrs, fn | nograd, constant())                                                   \
  X(scalar_tensor, NoAttrs, fn | nograd, constant())                                            \
  X(from_blob, NoAttrs, fn | nograd, constant())                                                \
  X(empty, NoAttrs, fn | nograd, constant())                                                    \
  X(zeros, NoAttrs, fn | nograd, constant())                                                    \
  X(ones, NoAttrs, fn | nograd, constant())                                                     \
  X(full, NoAttrs, fn | nograd, constant())                                                     \
  X(empty_like, NoAttrs, fn | nograd, constant())                                               \
  X(zeros_like, NoAttrs, fn | nograd, constant())                                               \
  X(ones_like, NoAttrs, fn | nograd, constant())                                                \
  X(full_like, NoAttrs, fn | nograd, constant())                                                \
  X(arange, NoAttrs, fn | nograd, constant())                                                   \
  X(linspace, NoAttrs, fn | nograd, constant())                                                 \
  X(eye, NoAttrs, fn | nograd, constant())                                                      \
  X(rand, NoAttrs, fn | nograd, no_onnx("random: ONNX's generators draw other numbers"))        \
  X(randn, NoAttrs, fn | nograd, no_onnx("random: ONNX's generators draw other numbers"))       \
  X(randint, NoAttrs, fn | nograd, no_onnx("random: ONNX's generators draw other numbers"))     \
  X(randperm, NoAttrs, fn | nograd, no_onnx("random: ONNX's generators draw other numbers"))    \
  X(rand_like, NoAttrs, fn | nograd, no_onnx("random: ONNX's generators draw other numbers"))   \
  X(randn_like, NoAttrs, fn | nograd, no_onnx("random: ONNX's generators draw other numbers"))  \
  X(bernoulli, NoAttrs, fn | nograd, no_onnx("random: ONNX's generators draw other numbers"))   \
  X(multinomial, NoAttrs, fn | nograd, no_onnx("random: ONNX's generators draw other numbers")) \
  X(fill, NoAttrs, inplace_only, no_onnx("in-place: a traced graph refuses in-place writes"))   \
  X(zero, NoAttrs, inplace_only, no_onnx("in-place: a traced graph refuses in-place writes"))   \
  X(copy, NoAttrs, inplace_only, no_onnx("in-place: a traced graph refuses in-place writes"))   \
  X(custom_function, NoAttrs, fn, parts())

// Complex numbers and spectral transforms (core/spectral.h). ONNX has no complex element types in
// its operators' signatures (its DFT takes and returns the float pairs).
#define NABLA_SPECTRAL_OPS(X)                                                                             \
  X(view_as_real, NoAttrs, fn, no_onnx("complex tensors: ONNX operators have no complex dtypes"))         \
  X(view_as_complex, NoAttrs, fn, no_onnx("complex tensors: ONNX operators have no complex dtypes"))      \
  X(real, NoAttrs, method, no_onnx("complex tensors: ONNX operators have no complex dtypes"))             \
  X(imag, NoAttrs, method, no_onnx("complex tensors: ONNX operators have no complex dtypes"))             \
  X(conj, NoAttrs, method, no_onnx("complex tensors: ONNX operators have no complex dtypes"))             \
  X(angle, NoAttrs, method, no_onnx("complex tensors: ONNX operators have no complex dtypes"))            \
  X(polar, NoAttrs, fn, no_onnx("complex tensors: ONNX operators have no complex dtypes"))                \
  X(complex, NoAttrs, fn, no_onnx("complex tensors: ONNX operators have no complex dtypes"))              \
  X(fft_c2c, FftAttrs, fn, no_onnx("not lowered yet: ONNX's DFT (opset 17) on the float pairs would do")) \
  X(fft_r2c, FftAttrs, fn, no_onnx("not lowered yet: ONNX's DFT (opset 17) on the float pairs would do")) \
  X(fft_c2r, FftAttrs, fn, no_onnx("not lowered yet: ONNX's DFT (opset 17) on the float pairs would do")) \
  X(stft, NoAttrs, fn, no_onnx("complex tensors: ONNX operators have no complex dtypes"))                 \
  X(istft, NoAttrs, fn, no_onnx("complex tensors: ONNX operators have no complex dtypes"))                \
  X(hann_window, NoAttrs, fn | nograd, constant())                                                        \
  X(hamming_window, NoAttrs, fn | nograd, constant())                                                     \
  X(blackman_window, NoAttrs, fn | nograd, constant())                                                    \
  X(bartlett_window, NoAttrs, fn | nograd, constant())                                                    \
  X(kaiser_window, NoAttrs, fn | nograd, constant())

// One family a line: clang-format 14 does not settle on one layout for this list packed.
#define NABLA_OP_FAMILIES(X)     \
  NABLA_ELEMENTWISE_EXTRA_OPS(X) \
  NABLA_SHAPE_OPS(X)             \
  NABLA_INDEXING_OPS(X)          \
  NABLA_REDUCTION_OPS(X)         \
  NABLA_STATS_OPS(X)             \
  NABLA_LINALG_OPS(X)            \
  NABLA_CONV_POOL_OPS(X)         \
  NABLA_NN_OPS(X)                \
  NABLA_LOSS_OPS(X)              \
  NABLA_SPECTRAL_OPS(X)          \
  NABLA_CREATION_OPS(X)

// ---- the identity -----------------------------------------------------------------------------------
#define NABLA_OPID_ENTRY(name, ...) name,
enum class OpId : uint16_t {
  NABLA_UNARY_FLOAT_OPS(NABLA_OPID_ENTRY) NABLA_UNARY_SAME_OPS(NABLA_OPID_ENTRY) NABLA_UNARY_PARAM_OPS(NABLA_OPID_ENTRY)
      NABLA_UNARY_BOOL_OPS(NABLA_OPID_ENTRY) NABLA_BINARY_ARITH_OPS(NABLA_OPID_ENTRY)
          NABLA_BINARY_BOOL_OPS(NABLA_OPID_ENTRY) NABLA_OP_FAMILIES(NABLA_OPID_ENTRY) count_
};
#undef NABLA_OPID_ENTRY
inline constexpr size_t kOpCount = static_cast<size_t>(OpId::count_);

// What one row says.
struct OpRow {
  const char* name;
  uint32_t variants;
  OnnxRule onnx;
  constexpr bool has_method() const { return variants & op_variants::method; }
  constexpr bool differentiable() const { return !(variants & op_variants::nograd); }
};

namespace schema_internal {
using namespace op_variants;
// The elementwise lists' rows as schema rows: each op is a Tensor method (predicates are not
// differentiable); the last column is the ONNX rule.
#define NABLA_UNARY_ROW(name, fwd, saves, bwd, rule, onnx_rule) OpRow{#name, method, onnx_rule},
#define NABLA_PREDICATE_ROW(name, fwd, onnx_rule) OpRow{#name, method | nograd, onnx_rule},
#define NABLA_BINARY_ROW(name, kind, fwd, rule, reads_a, reads_b, grad_a, grad_b, onnx_rule) \
  OpRow{#name, method, onnx_rule},
#define NABLA_FAMILY_ROW(name, attrs, variants, onnx_rule) OpRow{#name, (variants), onnx_rule},
inline constexpr OpRow kRows[] = {
    NABLA_UNARY_FLOAT_OPS(NABLA_UNARY_ROW) NABLA_UNARY_SAME_OPS(NABLA_UNARY_ROW) NABLA_UNARY_PARAM_OPS(NABLA_UNARY_ROW)
        NABLA_UNARY_BOOL_OPS(NABLA_PREDICATE_ROW) NABLA_BINARY_ARITH_OPS(NABLA_BINARY_ROW)
            NABLA_BINARY_BOOL_OPS(NABLA_PREDICATE_ROW) NABLA_OP_FAMILIES(NABLA_FAMILY_ROW)};
#undef NABLA_UNARY_ROW
#undef NABLA_PREDICATE_ROW
#undef NABLA_BINARY_ROW
#undef NABLA_FAMILY_ROW
static_assert(std::size(kRows) == kOpCount, "one row per OpId");
}  // namespace schema_internal

constexpr const OpRow& op_row(OpId op) { return schema_internal::kRows[static_cast<size_t>(op)]; }
constexpr const char* op_name(OpId op) { return op_row(op).name; }
constexpr bool op_row_is_lowered(OpId op) { return op_row(op).onnx.kind == OnnxRule::lowered; }
// The op of this name ("conv2d", "linalg_inv"), if there is one.
std::optional<OpId> op_from_name(std::string_view name);

// The elementwise kernels' ops as OpIds (the lists name both the same way).
constexpr OpId op_id(UnaryOp op) {
  if (op == UnaryOp::clamp) return OpId::clamp;
  return static_cast<OpId>(static_cast<uint16_t>(op));
}
constexpr OpId op_id(BinaryOp op) {
  constexpr uint16_t first = static_cast<uint16_t>(UnaryOp::clamp);  // the unary lists end where clamp is
  return static_cast<OpId>(first + static_cast<uint16_t>(op));
}

// The mapping of the elementwise kernels' enums onto OpIds relies on the lists' order.
static_assert(op_id(UnaryOp::exp) == OpId::exp && op_id(UnaryOp::isfinite) == OpId::isfinite &&
              op_id(UnaryOp::polygamma) == OpId::polygamma && op_id(UnaryOp::clamp) == OpId::clamp);
static_assert(op_id(BinaryOp::add) == OpId::add && op_id(BinaryOp::threshold_backward) == OpId::threshold_backward &&
              op_id(BinaryOp::logical_xor) == OpId::logical_xor);

// The attribute struct of an op's trace record.
template <OpId op>
struct OpAttrsOf {
  using type = NoAttrs;
};
#define NABLA_OP_ATTRS(name, attrs, ...) \
  template <>                            \
  struct OpAttrsOf<OpId::name> {         \
    using type = attrs;                  \
  };
#define NABLA_UNARY_ATTRS(name, ...) NABLA_OP_ATTRS(name, UnaryAttrs)
#define NABLA_BINARY_ATTRS(name, ...) NABLA_OP_ATTRS(name, BinaryAttrs)
NABLA_UNARY_FLOAT_OPS(NABLA_UNARY_ATTRS)
NABLA_UNARY_SAME_OPS(NABLA_UNARY_ATTRS)
NABLA_UNARY_PARAM_OPS(NABLA_UNARY_ATTRS)
NABLA_UNARY_BOOL_OPS(NABLA_UNARY_ATTRS)
NABLA_BINARY_ARITH_OPS(NABLA_BINARY_ATTRS)
NABLA_BINARY_BOOL_OPS(NABLA_BINARY_ATTRS)
NABLA_OP_FAMILIES(NABLA_OP_ATTRS)
#undef NABLA_UNARY_ATTRS
#undef NABLA_BINARY_ATTRS
#undef NABLA_OP_ATTRS
template <OpId op>
using op_attrs_t = typename OpAttrsOf<op>::type;

}  // namespace nabla
