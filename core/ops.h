// The ops of nabla's Tensor core, as free functions (most are also Tensor methods).
// Semantics follow PyTorch: broadcasting, type promotion, negative dims, keepdim, views.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "tensor.h"

namespace nabla {

// ---- creation -----------------------------------------------------------------------------------
// Nested lists of numbers: tensor({{1., 2.}, {3., 4.}}). Integers give int64, any floating value
// gives float32, bools give bool, unless options name a dtype.
class TensorData {
 public:
  TensorData(double v) : scalar_(v) {}
  TensorData(float v) : scalar_(v) {}
  TensorData(int v) : scalar_(v) {}
  TensorData(int64_t v) : scalar_(v) {}
  TensorData(bool v) : scalar_(v) {}
  TensorData(std::initializer_list<TensorData> list) : list_(list), is_list_(true) {}

  bool is_list() const { return is_list_; }
  const Scalar& scalar() const { return scalar_; }
  const std::vector<TensorData>& list() const { return list_; }

 private:
  Scalar scalar_;
  std::vector<TensorData> list_;
  bool is_list_ = false;
};

Tensor tensor(const TensorData& data, const TensorOptions& options = {});
// From a flat vector and a shape (the shape defaults to 1-D).
template <class T>
Tensor tensor(const std::vector<T>& data, IntArrayRef shape, const TensorOptions& options = {});
template <class T>
Tensor tensor(const std::vector<T>& data, const TensorOptions& options = {}) {
  int64_t n = static_cast<int64_t>(data.size());
  return tensor(data, IntArrayRef(&n, 1), options);
}
// A 0-dim tensor holding `value`.
Tensor scalar_tensor(Scalar value, const TensorOptions& options = {});

// Wraps caller-owned memory without copying; writes through either side are visible to the other.
// The memory must outlive the tensor (or pass a deleter that frees it when the tensor dies).
Tensor from_blob(void* data, IntArrayRef sizes, const TensorOptions& options = {});
Tensor from_blob(void* data, IntArrayRef sizes, IntArrayRef strides, const TensorOptions& options = {});
Tensor from_blob(void* data, IntArrayRef sizes, std::function<void(void*)> deleter, const TensorOptions& options = {});

Tensor empty(IntArrayRef shape, const TensorOptions& options = {});
Tensor zeros(IntArrayRef shape, const TensorOptions& options = {});
Tensor ones(IntArrayRef shape, const TensorOptions& options = {});
Tensor full(IntArrayRef shape, Scalar value, const TensorOptions& options = {});
Tensor empty_like(const Tensor& t, const TensorOptions& options = {});
Tensor zeros_like(const Tensor& t, const TensorOptions& options = {});
Tensor ones_like(const Tensor& t, const TensorOptions& options = {});
Tensor full_like(const Tensor& t, Scalar value, const TensorOptions& options = {});
Tensor rand_like(const Tensor& t, const TensorOptions& options = {});
Tensor randn_like(const Tensor& t, const TensorOptions& options = {});
// [0, end) / [start, end) with step. Integer arguments give int64, floating ones float32. In
// float16/bfloat16 the points are the float32 ones rounded once.
Tensor arange(Scalar end, const TensorOptions& options = {});
Tensor arange(Scalar start, Scalar end, Scalar step = 1, const TensorOptions& options = {});
// `steps` points from start to end, filled from both ends as PyTorch's (the last is exactly end);
// float16/bfloat16 points are the float32 ones rounded once.
Tensor linspace(double start, double end, int64_t steps, const TensorOptions& options = {});
Tensor eye(int64_t n, std::optional<int64_t> m = std::nullopt, const TensorOptions& options = {});
// Random draws in float16/bfloat16 are the float32 draws of the same seed rounded once (a uniform
// draw that would round up onto the upper bound takes the largest value below it).
Tensor rand(IntArrayRef shape, const TensorOptions& options = {});   // uniform [0, 1)
Tensor randn(IntArrayRef shape, const TensorOptions& options = {});  // standard normal
Tensor randint(int64_t low, int64_t high, IntArrayRef shape, const TensorOptions& options = {});
Tensor randint(int64_t high, IntArrayRef shape, const TensorOptions& options = {});
Tensor randperm(int64_t n, const TensorOptions& options = {});
Tensor bernoulli(const Tensor& p);  // 1 with probability p
Tensor multinomial(const Tensor& weights, int64_t num_samples, bool replacement = false);

// ---- elementwise (broadcasting, type promotion) ------------------------------------------------
// The two-tensor forms are generated from NABLA_BINARY_ARITH_OPS (core/elementwise_ops.h).
Tensor add(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, const Tensor& b, Scalar alpha);  // a + alpha * b
Tensor add(const Tensor& a, Scalar b, Scalar alpha = 1);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha);
Tensor sub(const Tensor& a, Scalar b, Scalar alpha = 1);
Tensor sub(Scalar a, const Tensor& b);  // a - b
Tensor mul(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, Scalar b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, Scalar b);
Tensor div(Scalar a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, Scalar exponent);
Tensor pow(Scalar base, const Tensor& exponent);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor atan2(const Tensor& a, const Tensor& b);
Tensor hypot(const Tensor& a, const Tensor& b);  // sqrt(a^2 + b^2) without overflow
Tensor remainder(const Tensor& a, const Tensor& b);
Tensor remainder(const Tensor& a, Scalar b);
Tensor fmod(const Tensor& a, const Tensor& b);  // the sign of a (remainder: the sign of b)
Tensor fmod(const Tensor& a, Scalar b);
// a * log(b), 0 where a == 0 (unless b is NaN). Its gradient in a is log(b) also at a == 0, but 0
// where a == 0 and b <= 0 (PyTorch's xlogy(grad, b) masked there); in b, a / b.
Tensor xlogy(const Tensor& a, const Tensor& b);
Tensor logaddexp(const Tensor& a, const Tensor& b);  // log(exp(a) + exp(b)) without overflow
// div with rounding_mode "trunc" (toward zero) or "floor" (toward -inf; floor_divide) or none
// (true division). Integer operands keep their dtype under "trunc"/"floor", as PyTorch; the gradient of
// a rounded quotient is zero (PyTorch's too).
Tensor div(const Tensor& a, const Tensor& b, std::optional<std::string_view> rounding_mode);
Tensor div(const Tensor& a, Scalar b, std::optional<std::string_view> rounding_mode);
// floor(a / b), computed from fmod as Python does (1.0 // 0.1 is 9). Differs from PyTorch: the
// gradient is zero (as for floor and for div with rounding_mode "floor"); PyTorch has none and
// raises in backward.
Tensor floor_divide(const Tensor& a, const Tensor& b);
// 0 where y <= 0, else grad: the gradient of relu (y its output or input), in one pass.
Tensor threshold_backward(const Tensor& grad, const Tensor& y);

Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor exp2(const Tensor& x);
Tensor log(const Tensor& x);
Tensor log2(const Tensor& x);
Tensor log10(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor expm1(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor square(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tan(const Tensor& x);
Tensor asin(const Tensor& x);
Tensor acos(const Tensor& x);
Tensor atan(const Tensor& x);
Tensor sinh(const Tensor& x);
Tensor cosh(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor erf(const Tensor& x);
Tensor erfc(const Tensor& x);
Tensor erfinv(const Tensor& x);
Tensor asinh(const Tensor& x);
Tensor acosh(const Tensor& x);
Tensor atanh(const Tensor& x);
Tensor lgamma(const Tensor& x);                // log|Gamma(x)|
Tensor digamma(const Tensor& x);               // d/dx lgamma(x); -inf at +0, NaN at negative integers, as PyTorch
Tensor polygamma(int64_t n, const Tensor& x);  // the n-th derivative of digamma, n >= 0
// NaN, +inf and -inf replaced by nan, posinf and neginf (the dtype's largest and lowest finite values
// when not given); integer and bool tensors come back unchanged (a copy). Gradient: g where x is finite.
Tensor nan_to_num(const Tensor& x, std::optional<double> nan = 0.0, std::optional<double> posinf = std::nullopt,
                  std::optional<double> neginf = std::nullopt);
Tensor sigmoid(const Tensor& x);
Tensor logsigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor relu6(const Tensor& x);
Tensor gelu(const Tensor& x);
Tensor gelu(const Tensor& x, const std::string& approximate);  // "none" or "tanh"
Tensor gelu_tanh(const Tensor& x);
Tensor silu(const Tensor& x);
Tensor mish(const Tensor& x);
Tensor softplus(const Tensor& x, double beta = 1, double threshold = 20);
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
Tensor elu(const Tensor& x, double alpha = 1);
Tensor selu(const Tensor& x);
Tensor hardtanh(const Tensor& x, double min_val = -1, double max_val = 1);
Tensor hardsigmoid(const Tensor& x);
Tensor hardswish(const Tensor& x);
Tensor softsign(const Tensor& x);  // x / (1 + |x|); integers in float32, as PyTorch's
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
Tensor clamp_min(const Tensor& x, Scalar min);
Tensor clamp_max(const Tensor& x, Scalar max);
// Tensor bounds, broadcast with x (torch.clamp(x, min=tensor, max=tensor)): min(max(x, min), max), so
// where min > max the result is max; a NaN in x, min or max gives NaN. Gradients as PyTorch's: x's
// where min <= x <= max, min's where x < min < max, max's where x > max or max < min.
Tensor clamp(const Tensor& x, const std::optional<Tensor>& min, const std::optional<Tensor>& max);
Tensor clamp_min(const Tensor& x, const Tensor& min);
Tensor clamp_max(const Tensor& x, const Tensor& max);
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor round(const Tensor& x);
Tensor trunc(const Tensor& x);
Tensor frac(const Tensor& x);
Tensor reciprocal(const Tensor& x);
// x + weight * (y - x)
Tensor lerp(const Tensor& x, const Tensor& y, Scalar weight);
Tensor addcmul(const Tensor& x, const Tensor& a, const Tensor& b, Scalar value = 1);
Tensor addcdiv(const Tensor& x, const Tensor& a, const Tensor& b, Scalar value = 1);

Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, Scalar b);
Tensor ne(const Tensor& a, Scalar b);
Tensor lt(const Tensor& a, Scalar b);
Tensor le(const Tensor& a, Scalar b);
Tensor gt(const Tensor& a, Scalar b);
Tensor ge(const Tensor& a, Scalar b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& x);
Tensor isnan(const Tensor& x);
Tensor isinf(const Tensor& x);
Tensor isfinite(const Tensor& x);
// |a - b| <= atol + rtol * |b| with |a - b| finite, or a == b (equal infinities), elementwise.
// Differs from PyTorch: a and b may have different dtypes (compared in the promoted dtype);
// PyTorch requires equal dtypes.
Tensor isclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false);
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false);
// Same shape and the same values (dtypes may differ).
bool equal(const Tensor& a, const Tensor& b);

// cond ? a : b, broadcasting all three.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, Scalar b);
Tensor where(const Tensor& cond, Scalar a, const Tensor& b);
Tensor where(const Tensor& cond, Scalar a, Scalar b);

// ---- views and shape ops ------------------------------------------------------------------------
Tensor view(const Tensor& x, IntArrayRef shape);
Tensor reshape(const Tensor& x, IntArrayRef shape);
Tensor permute(const Tensor& x, IntArrayRef dims);
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
Tensor squeeze(const Tensor& x);
Tensor squeeze(const Tensor& x, int64_t dim);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor unflatten(const Tensor& x, int64_t dim, IntArrayRef sizes);
Tensor expand(const Tensor& x, IntArrayRef shape);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
Tensor slice(const Tensor& x, int64_t dim, std::optional<int64_t> start = std::nullopt,
             std::optional<int64_t> end = std::nullopt, int64_t step = 1);
Tensor select(const Tensor& x, int64_t dim, int64_t index);
Tensor diagonal(const Tensor& x, int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1);
Tensor as_strided(const Tensor& x, IntArrayRef sizes, IntArrayRef strides,
                  std::optional<int64_t> storage_offset = std::nullopt);
Tensor movedim(const Tensor& x, int64_t source, int64_t destination);
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split_with_sizes(const Tensor& x, IntArrayRef sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
std::vector<Tensor> unbind(const Tensor& x, int64_t dim = 0);
std::vector<Tensor> broadcast_tensors(const std::vector<Tensor>& tensors);

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor repeat(const Tensor& x, IntArrayRef repeats);
Tensor flip(const Tensor& x, IntArrayRef dims);
Tensor roll(const Tensor& x, IntArrayRef shifts, IntArrayRef dims = {});
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);
Tensor pad(const Tensor& x, IntArrayRef padding, Scalar value = 0);  // constant padding, last dims first

// ---- indexing -----------------------------------------------------------------------------------
// Indices are int64. An index in [-n, 0) counts from the end of its dimension, as in Python and in
// PyTorch's x[idx]. Differs from PyTorch: its index_select, index_add, gather and scatter reject
// negative indices (code valid there behaves the same here). Anything outside [-n, n) is an
// IndexError naming the index. scatter/scatter_add with a src larger than the index give src a
// gradient of its own shape, zero where the index does not reach (PyTorch's backward raises).
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, Scalar value);
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value);
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Tensor& value);
Tensor masked_select(const Tensor& x, const Tensor& mask);
Tensor nonzero(const Tensor& x);  // (n, dim) int64 indices of the nonzero elements
Tensor one_hot(const Tensor& labels, int64_t num_classes = -1);
Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx = std::nullopt);

// ---- reductions ---------------------------------------------------------------------------------
Tensor sum(const Tensor& x, std::optional<DType> dtype = std::nullopt);
Tensor sum(const Tensor& x, IntArrayRef dims, bool keepdim = false, std::optional<DType> dtype = std::nullopt);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, IntArrayRef dims, bool keepdim = false);
Tensor prod(const Tensor& x);
Tensor prod(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor max(const Tensor& x);
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor min(const Tensor& x);
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor amax(const Tensor& x, IntArrayRef dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, IntArrayRef dims = {}, bool keepdim = false);
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
// Variance with `correction` subtracted from the count (1: unbiased, 0: population).
Tensor var(const Tensor& x, IntArrayRef dims = {}, int64_t correction = 1, bool keepdim = false);
Tensor std(const Tensor& x, IntArrayRef dims = {}, int64_t correction = 1, bool keepdim = false);
std::tuple<Tensor, Tensor> var_mean(const Tensor& x, IntArrayRef dims = {}, int64_t correction = 1,
                                    bool keepdim = false);
Tensor norm(const Tensor& x, double p = 2, IntArrayRef dims = {}, bool keepdim = false);
Tensor logsumexp(const Tensor& x, IntArrayRef dims, bool keepdim = false);
Tensor any(const Tensor& x);
Tensor any(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor all(const Tensor& x);
Tensor all(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor count_nonzero(const Tensor& x, IntArrayRef dims = {});
Tensor cumsum(const Tensor& x, int64_t dim);
Tensor cumprod(const Tensor& x, int64_t dim);
std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true);
std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim = -1, bool descending = false);
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false);
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

// ---- linear algebra -----------------------------------------------------------------------------
// matmul follows PyTorch: 1-D x 1-D is a dot product, 2-D x 2-D a matrix product, 1-D operands
// get a dim prepended/appended and removed after, and leading (batch) dims broadcast.
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor mm(const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
Tensor mv(const Tensor& a, const Tensor& v);
Tensor addmm(const Tensor& bias, const Tensor& a, const Tensor& b, Scalar beta = 1, Scalar alpha = 1);
Tensor dot(const Tensor& a, const Tensor& b);
Tensor outer(const Tensor& a, const Tensor& b);
// Einstein summation, as torch.einsum: einsum("ij,jk->ik", {a, b}), einsum("bij,bjk->bik", {x, y}),
// einsum("ii->i", {m}) (a diagonal), einsum("...ij->...ji", {t}), einsum("i,i", {u, v}) (implicit
// output: the labels that appear once, in alphabetical order). Labels of size 1 and the ellipsis
// dims broadcast; labels absent from the output are summed. Differentiable to any order.
Tensor einsum(std::string_view equation, const std::vector<Tensor>& operands);
// x @ weight^T + bias, the op behind nn::Linear (bias may be undefined).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});

// ---- convolution and pooling (NCHW) -------------------------------------------------------------
// A convolution over `ndim` spatial dims (1, 2 or 3): per-dim stride, padding and dilation (the
// first ndim values count), and groups. One set of kernels serves conv1d, conv2d and conv3d.
struct ConvParams {
  std::array<int64_t, 3> stride{1, 1, 1}, padding{0, 0, 0}, dilation{1, 1, 1};
  int64_t groups = 1;
  int64_t ndim = 2;
};
using Conv2dParams = ConvParams;
// x: (N, C_in, H, W), weight: (C_out, C_in / groups, kH, kW), bias: (C_out) or undefined
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, IntArrayRef stride = 1,
              IntArrayRef padding = 0, IntArrayRef dilation = 1, int64_t groups = 1);
// The gradient of conv2d with respect to its input, i.e. a transposed convolution: given
// grad_out (N, C_out, H_out, W_out) and weight, returns (N, C_in, input_size).
Tensor conv2d_input_grad(const Tensor& grad_out, const Tensor& weight, IntArrayRef input_hw, const Conv2dParams& p);
// The gradient of conv2d with respect to its weight: returns (C_out, C_in/groups, kernel_hw).
Tensor conv2d_weight_grad(const Tensor& x, const Tensor& grad_out, IntArrayRef kernel_hw, const Conv2dParams& p);
// x: (N, C_in, D, H, W) or (C_in, D, H, W), weight: (C_out, C_in / groups, kD, kH, kW), bias: (C_out)
// or undefined. stride, padding and dilation take 1 or 3 values.
Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, IntArrayRef stride = 1,
              IntArrayRef padding = 0, IntArrayRef dilation = 1, int64_t groups = 1);
// The gradients of a convolution over p.ndim spatial dims with respect to its input (given the
// input's spatial size) and its weight (given the kernel's spatial size).
Tensor conv_input_grad(const Tensor& grad_out, const Tensor& weight, IntArrayRef input_size, const ConvParams& p);
Tensor conv_weight_grad(const Tensor& x, const Tensor& grad_out, IntArrayRef kernel_size, const ConvParams& p);
// x: (N, C_in, H, W), weight: (C_in, C_out / groups, kH, kW)
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, IntArrayRef stride = 1,
                        IntArrayRef padding = 0, IntArrayRef output_padding = 0, int64_t groups = 1,
                        IntArrayRef dilation = 1);
// x: (N, C_in, L), weight: (C_out, C_in / groups, k)
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, int64_t stride = 1, int64_t padding = 0,
              int64_t dilation = 1, int64_t groups = 1);

struct Pool2dParams {
  std::array<int64_t, 2> kernel{1, 1}, stride{1, 1}, padding{0, 0}, dilation{1, 1};
  bool ceil_mode = false;
  bool count_include_pad = true;  // avg_pool2d only
};
// stride defaults to kernel_size (pass {} for that).
Tensor max_pool2d(const Tensor& x, IntArrayRef kernel_size, IntArrayRef stride = {}, IntArrayRef padding = 0,
                  IntArrayRef dilation = 1, bool ceil_mode = false);
std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, IntArrayRef kernel_size, IntArrayRef stride = {},
                                                   IntArrayRef padding = 0, IntArrayRef dilation = 1,
                                                   bool ceil_mode = false);
Tensor avg_pool2d(const Tensor& x, IntArrayRef kernel_size, IntArrayRef stride = {}, IntArrayRef padding = 0,
                  bool ceil_mode = false, bool count_include_pad = true);
Tensor adaptive_avg_pool2d(const Tensor& x, IntArrayRef output_size);
// Batch normalization of x (N, C), (N, C, L) or (N, C, H, W) over every dim but the channels (1).
// training: normalizes with the batch statistics and, when running_mean/running_var (C) are
// given, updates them in place (running = (1 - momentum) * running + momentum * batch, with the
// unbiased variance); otherwise normalizes with the running statistics. weight and bias (C) may be
// undefined. On CUDA this is one cuDNN kernel each way; elsewhere a composite of Tensor ops.
Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                  const Tensor& running_var, bool training, double momentum = 0.1, double eps = 1e-5);
Tensor adaptive_max_pool2d(const Tensor& x, IntArrayRef output_size);

// ---- fused attention -----------------------------------------------------------------------------
struct AttentionParams {
  double scale = 1.0;      // the scores are q k^T * scale
  bool causal = false;     // key j is visible to query i only when j <= i (top-left aligned)
  double dropout_p = 0.0;  // dropout on the attention weights, in [0, 1)
  // The dropout mask's Philox key and first counter, drawn by flash_attention from the default
  // generator of q's device (callers leave them 0).
  uint64_t seed = 0, offset = 0;
};
// softmax(q k^T * scale + bias) v by FlashAttention-2's algorithm (Dao, 2023): key/value tiles
// stream past each tile of queries with an online softmax, so the (L, S) matrix is never stored;
// what backward keeps is the output and one log-sum-exp per query row, and it recomputes the
// scores tile by tile. Causal attention skips the tiles above the diagonal.
//   q (B, Hq, L, E), k (B, Hkv, S, E), v (B, Hkv, S, Ev), with Hq a multiple of Hkv: query head h
//   reads key/value head h / (Hq / Hkv) (grouped-query attention); -> (B, Hq, L, Ev).
//   bias: undefined, or an additive mask broadcast to (B, Hq, L, S) (-inf forbids), never
//   differentiated.
// Dropout keeps weight (b, h, i, j) when the Philox draw for element ((b * Hq + h) * L + i) * S + j
// of a float32 tensor (B, Hq, L, S) is below 1 - dropout_p: the mask Tensor::bernoulli_ would
// draw there from the same generator state, so that a seed gives the math path's mask. Backward
// regenerates it from the counters. A query row with every key masked gives NaN, as softmax does.
// Computed in float32 (float64 for float64) whatever the dtype; float16/bfloat16 outputs are
// rounded once. Differentiable in q, k and v (to any order: under create_graph the backward is
// written with differentiable ops). On autocast's lower-precision list (as scaled_dot_product_attention).
// Where has_flash_attention is false (CUDA today) the same formulation runs as matmul, softmax and
// matmul: equal results, but the (L, S) weights are stored.
Tensor flash_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias = {},
                       AttentionParams p = {});
// Whether flash_attention runs on q's device for q's dtype (the CPU: float32, float64, bfloat16, float16).
bool has_flash_attention(const Tensor& q);

// ---- random state -------------------------------------------------------------------------------
// Seeds the default generators (CPU and CUDA) so random results are reproducible.
void manual_seed(uint64_t seed);

// ---- operators ----------------------------------------------------------------------------------
inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator+(const Tensor& a, Scalar b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, Scalar b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, Scalar b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, Scalar b) { return div(a, b); }
inline Tensor operator+(Scalar a, const Tensor& b) { return add(b, a); }
inline Tensor operator-(Scalar a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(Scalar a, const Tensor& b) { return mul(b, a); }
inline Tensor operator/(Scalar a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& a) { return neg(a); }
inline Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
inline Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
inline Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
inline Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
inline Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
inline Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
inline Tensor operator==(const Tensor& a, Scalar b) { return eq(a, b); }
inline Tensor operator!=(const Tensor& a, Scalar b) { return ne(a, b); }
inline Tensor operator<(const Tensor& a, Scalar b) { return lt(a, b); }
inline Tensor operator<=(const Tensor& a, Scalar b) { return le(a, b); }
inline Tensor operator>(const Tensor& a, Scalar b) { return gt(a, b); }
inline Tensor operator>=(const Tensor& a, Scalar b) { return ge(a, b); }
// On bool tensors (masks): elementwise and, or, xor, not.
Tensor operator&(const Tensor& a, const Tensor& b);
Tensor operator|(const Tensor& a, const Tensor& b);
Tensor operator^(const Tensor& a, const Tensor& b);
Tensor operator~(const Tensor& a);

// ---- printing -----------------------------------------------------------------------------------
struct PrintOptions {
  int precision = 4;
  int64_t threshold = 1000;  // summarize tensors with more elements than this
  int64_t edgeitems = 3;     // items shown at each end of a summarized dim
  int64_t linewidth = 80;
};
void set_print_options(const PrintOptions& opts);

}  // namespace nabla
