// Tensor: a cheap, shared handle to a TensorImpl. Copying a Tensor never copies data; views share
// storage. Most methods forward to the free functions declared in core/ops.h.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <ostream>
#include <string_view>
#include <tuple>
#include <variant>
#include <vector>

#include "device.h"
#include "dtype.h"
#include "intrusive_ptr.h"
#include "scalar.h"
#include "shape.h"
#include "tensor_impl.h"

namespace nabla {

// Options for creating tensors, in libtorch's style:
//   zeros({2, 3}, kFloat64)   zeros({2, 3}, kCUDA)   zeros({2, 3}, dtype(kInt64).device(kCUDA))
class TensorOptions {
 public:
  TensorOptions() = default;
  TensorOptions(DType d) : dtype_(d) {}
  TensorOptions(Device d) : device_(d) {}
  TensorOptions(DeviceType t) : device_(t) {}

  TensorOptions dtype(DType d) const {
    auto o = *this;
    o.dtype_ = d;
    return o;
  }
  TensorOptions device(Device d) const {
    auto o = *this;
    o.device_ = d;
    return o;
  }
  TensorOptions requires_grad(bool r) const {
    auto o = *this;
    o.requires_grad_ = r;
    return o;
  }
  TensorOptions pinned_memory(bool p) const {
    auto o = *this;
    o.pinned_ = p;
    return o;
  }

  std::optional<DType> dtype_opt() const { return dtype_; }
  DType dtype_or(DType d) const { return dtype_.value_or(d); }
  Device device() const { return device_; }
  bool requires_grad() const { return requires_grad_; }
  bool pinned_memory() const { return pinned_; }

 private:
  std::optional<DType> dtype_;
  Device device_ = kCPU;
  bool requires_grad_ = false;
  bool pinned_ = false;
};

inline TensorOptions dtype(DType d) { return TensorOptions(d); }
inline TensorOptions device(Device d) { return TensorOptions(d); }
inline TensorOptions requires_grad(bool r = true) { return TensorOptions().requires_grad(r); }

class Tensor;
struct UniqueResult;  // core/math_ops.h
namespace autograd {
class Node;
}

// Indexing in libtorch's style: x.index({0, Slice(1, None), None, Ellipsis, idx_tensor})
namespace indexing {
inline constexpr std::nullopt_t None = std::nullopt;
struct EllipsisType {};
inline constexpr EllipsisType Ellipsis{};
struct Slice {
  Slice(std::optional<int64_t> start = std::nullopt, std::optional<int64_t> stop = std::nullopt, int64_t step = 1)
      : start(start), stop(stop), step(step) {}
  std::optional<int64_t> start, stop;
  int64_t step;
};
}  // namespace indexing

class TensorIndex;

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(intrusive_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}
  Tensor(const Tensor&) = default;
  Tensor(Tensor&&) noexcept = default;
  // Assigning to a named tensor rebinds the handle (a = b shares b's data), as in libtorch...
  Tensor& operator=(const Tensor&) & = default;
  Tensor& operator=(Tensor&&) & noexcept = default;
  // ...while assigning to a temporary view writes into it: x[0] = y, x.index({Slice(), 1}) = 0.
  Tensor& operator=(const Tensor& src) && { return copy_(src); }
  Tensor& operator=(Scalar value) && { return fill_(value); }

  // ---- identity and layout -------------------------------------------------------------------
  bool defined() const { return impl_.get() != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const intrusive_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }
  int32_t use_count() const { return impl_ ? impl_->use_count() : 0; }

  DType dtype() const { return checked()->dtype; }
  Device device() const { return checked()->device(); }
  const Shape& sizes() const { return checked()->sizes; }
  const Shape& shape() const { return sizes(); }
  int64_t size(int64_t dim) const;
  const Shape& strides() const { return checked()->strides; }
  int64_t stride(int64_t dim) const;
  int64_t dim() const { return checked()->dim(); }
  int64_t ndimension() const { return dim(); }
  int64_t numel() const { return checked()->numel; }
  bool is_contiguous() const { return checked()->is_contiguous; }
  bool is_cuda() const { return device().is_cuda(); }
  bool is_cpu() const { return device().is_cpu(); }
  bool is_floating_point() const { return is_floating(dtype()); }
  bool is_complex() const { return nabla::is_complex(dtype()); }
  size_t element_size() const { return nabla::element_size(dtype()); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
  int64_t storage_offset() const { return checked()->offset; }
  bool is_pinned() const { return checked()->storage->pinned; }

  // Pointer to the first element. data_ptr<T>() checks that T matches the dtype.
  void* data_ptr() const { return checked()->data(); }
  template <class T>
  T* data_ptr() const {
    NABLA_CHECK(DTypeError, dtype_of<T>() == dtype(), "data_ptr: tensor has dtype ", dtype(), " but data_ptr<",
                dtype_name(dtype_of<T>()), "> was requested");
    return static_cast<T*>(data_ptr());
  }
  // The value of a one-element tensor (copied from the GPU if needed).
  Scalar item() const;
  template <class T>
  T item() const {
    return item().to<T>();
  }

  // ---- conversion and copies -----------------------------------------------------------------
  Tensor to(DType dtype, bool copy = false) const;
  Tensor to(Device device, bool non_blocking = false, bool copy = false) const;
  Tensor to(Device device, DType dtype) const;
  Tensor to(const TensorOptions& options) const;
  // x.to("cuda:0"), x.to("cpu"): a device by name (as Device("cuda:0")).
  Tensor to(const std::string& device, bool non_blocking = false, bool copy = false) const {
    return to(Device(device), non_blocking, copy);
  }
  Tensor cpu() const { return to(kCPU); }
  Tensor cuda(int16_t index = 0) const { return to(Device::cuda(index)); }
  Tensor pin_memory() const;
  Tensor clone() const;
  Tensor contiguous() const;
  Tensor& copy_(const Tensor& src);
  Tensor detach() const;
  Tensor& detach_();

  // ---- autograd ------------------------------------------------------------------------------
  bool requires_grad() const;
  Tensor& requires_grad_(bool r = true);
  const Tensor& grad() const;  // undefined Tensor when no gradient has been accumulated
  Tensor& mutable_grad();      // assignable: x.mutable_grad() = zeros_like(x)
  void set_grad(const Tensor& g);
  autograd::Node* grad_fn() const;  // a view whose base was modified in place since: rebuilt from the base
  bool is_leaf() const { return grad_fn() == nullptr; }
  uint32_t output_nr() const { return checked()->output_nr; }
  uint32_t version() const { return checked()->storage->version; }
  void retain_grad() const;
  bool retains_grad() const;
  // Accumulates d(this)/d(leaves) into the leaves' .grad(). `gradient` may be omitted for a
  // one-element tensor (it is then 1). The graph is freed unless retain_graph is true.
  void backward(const Tensor& gradient = {}, bool retain_graph = false, bool create_graph = false) const;
  // Calls `hook(grad)` when this tensor's gradient is computed; a defined return value replaces
  // the gradient. Returns a handle for remove_hook.
  size_t register_hook(std::function<Tensor(const Tensor&)> hook) const;
  // Leaves only (as torch.Tensor.register_post_accumulate_grad_hook): calls `hook(grad)` after a
  // backward accumulated into .grad(), with .grad() itself, which the hook may read, change or
  // reset (grad = Tensor() frees it: FSDP moves each gradient into its flat buffer this way).
  // Returns a handle for remove_hook.
  size_t register_post_accumulate_grad_hook(std::function<void(Tensor& grad)> hook) const;
  void remove_hook(size_t handle) const;
  // Sets .grad() to undefined (set_to_none) or to zeros.
  void zero_grad(bool set_to_none = true);

  // ---- views (share storage) -----------------------------------------------------------------
  Tensor view(IntArrayRef shape) const;
  Tensor view_as(const Tensor& other) const { return view(other.sizes()); }
  Tensor reshape(IntArrayRef shape) const;
  Tensor reshape_as(const Tensor& other) const { return reshape(other.sizes()); }
  Tensor permute(IntArrayRef dims) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;
  Tensor mT() const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor unflatten(int64_t dim, IntArrayRef sizes) const;
  Tensor expand(IntArrayRef shape) const;
  Tensor expand_as(const Tensor& other) const { return expand(other.sizes()); }
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, std::optional<int64_t> start = std::nullopt, std::optional<int64_t> end = std::nullopt,
               int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor operator[](int64_t index) const { return select(0, index); }
  Tensor index(std::initializer_list<TensorIndex> indices) const;
  Tensor index(const std::vector<TensorIndex>& indices) const;
  Tensor& index_put_(std::initializer_list<TensorIndex> indices, const Tensor& value);
  Tensor& index_put_(std::initializer_list<TensorIndex> indices, Scalar value);
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;
  std::vector<Tensor> split_with_sizes(IntArrayRef sizes, int64_t dim = 0) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;
  std::vector<Tensor> unbind(int64_t dim = 0) const;
  Tensor diagonal(int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1) const;
  Tensor as_strided(IntArrayRef sizes, IntArrayRef strides, std::optional<int64_t> offset = std::nullopt) const;
  Tensor movedim(int64_t source, int64_t destination) const;
  // torch.Tensor.unfold: the windows of `size` elements, `step` apart, along `dim` as a view: dim
  // becomes the (L - size) / step + 1 windows and a new last dim of `size` holds each window (strides
  // from this tensor's: step * stride(dim), stride(dim)). Windows overlap where step < size; their
  // gradients add up. A 0-dim tensor unfolds as if it were (1). (nn::functional::unfold is im2col.)
  Tensor unfold(int64_t dim, int64_t size, int64_t step) const;

  // ---- copying shape ops ---------------------------------------------------------------------
  Tensor repeat(IntArrayRef repeats) const;
  Tensor flip(IntArrayRef dims) const;
  Tensor roll(IntArrayRef shifts, IntArrayRef dims = {}) const;
  Tensor index_select(int64_t dim, const Tensor& index) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  Tensor scatter(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor scatter(int64_t dim, const Tensor& index, Scalar value) const;
  Tensor scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor masked_fill(const Tensor& mask, Scalar value) const;
  Tensor masked_fill(const Tensor& mask, const Tensor& value) const;
  Tensor masked_select(const Tensor& mask) const;
  Tensor tril(int64_t diagonal = 0) const;
  Tensor triu(int64_t diagonal = 0) const;
  Tensor& masked_fill_(const Tensor& mask, Scalar value);
  Tensor& masked_fill_(const Tensor& mask, const Tensor& value);  // value: 0-dim (may require grad)
  Tensor& scatter_(int64_t dim, const Tensor& index, const Tensor& src);
  Tensor& scatter_add_(int64_t dim, const Tensor& index, const Tensor& src);
  Tensor& index_add_(int64_t dim, const Tensor& index, const Tensor& src);
  Tensor index_add(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor scatter_reduce(int64_t dim, const Tensor& index, const Tensor& src, std::string_view reduce,
                        bool include_self = true) const;
  Tensor nonzero() const;
  Tensor index_put(const std::vector<std::optional<Tensor>>& indices, const Tensor& values,
                   bool accumulate = false) const;
  Tensor take_along_dim(const Tensor& indices, std::optional<int64_t> dim = std::nullopt) const;
  Tensor repeat_interleave(int64_t repeats, std::optional<int64_t> dim = std::nullopt,
                           std::optional<int64_t> output_size = std::nullopt) const;
  Tensor repeat_interleave(const Tensor& repeats, std::optional<int64_t> dim = std::nullopt,
                           std::optional<int64_t> output_size = std::nullopt) const;

  // ---- elementwise ---------------------------------------------------------------------------
  // Every op of the elementwise lists (core/elementwise_ops.h) is a method, x.exp(), x.atan2(y):
  // the one-tensor forms below are defined from the lists (tensor_methods.cpp).
  Tensor add(const Tensor& other) const;
  Tensor add(const Tensor& other, Scalar alpha) const;
  Tensor add(Scalar other, Scalar alpha = 1) const;
  Tensor sub(const Tensor& other) const;
  Tensor sub(const Tensor& other, Scalar alpha) const;
  Tensor sub(Scalar other, Scalar alpha = 1) const;
  Tensor mul(const Tensor& other) const;
  Tensor mul(Scalar other) const;
  Tensor div(const Tensor& other) const;
  Tensor div(Scalar other) const;
  Tensor pow(const Tensor& exponent) const;
  Tensor pow(Scalar exponent) const;
  Tensor maximum(const Tensor& other) const;
  Tensor minimum(const Tensor& other) const;
  Tensor atan2(const Tensor& other) const;
  Tensor hypot(const Tensor& other) const;
  Tensor remainder(const Tensor& other) const;
  Tensor floor_divide(const Tensor& other) const;
  Tensor fmod(const Tensor& other) const;
  Tensor xlogy(const Tensor& other) const;
  Tensor logaddexp(const Tensor& other) const;
  Tensor threshold_backward(const Tensor& y) const;  // this is the gradient; 0 where y <= 0
  Tensor& add_(const Tensor& other, Scalar alpha = 1);
  Tensor& add_(Scalar other, Scalar alpha = 1);
  Tensor& sub_(const Tensor& other, Scalar alpha = 1);
  Tensor& sub_(Scalar other, Scalar alpha = 1);
  Tensor& mul_(const Tensor& other);
  Tensor& mul_(Scalar other);
  Tensor& div_(const Tensor& other);
  Tensor& div_(Scalar other);
  Tensor& pow_(Scalar exponent);
  Tensor& zero_();
  Tensor& fill_(Scalar value);
  Tensor& fill_(const Tensor& value);
  // Differs from PyTorch: under autograd these in-place ops keep a copy of what their backward
  // needs, so changing their result in place again later is allowed (PyTorch raises).
  Tensor& clamp_(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
  Tensor& relu_();
  Tensor& neg_();
  Tensor& exp_();
  Tensor& sqrt_();
  Tensor& uniform_(double from = 0, double to = 1);
  Tensor& normal_(double mean = 0, double std = 1);
  Tensor& bernoulli_(double p);

  Tensor neg() const;
  Tensor abs() const;
  // Complex tensors (core/spectral.h): the real and imaginary parts as float views (a real tensor's
  // real() is itself; its imag() throws, as PyTorch), the complex conjugate and the argument.
  Tensor real() const;
  Tensor imag() const;
  Tensor conj() const;
  Tensor angle() const;
  Tensor sign() const;
  Tensor exp() const;
  Tensor exp2() const;
  Tensor log() const;
  Tensor log2() const;
  Tensor log10() const;
  Tensor log1p() const;
  Tensor expm1() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor square() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor tan() const;
  Tensor asin() const;
  Tensor acos() const;
  Tensor atan() const;
  Tensor sinh() const;
  Tensor cosh() const;
  Tensor tanh() const;
  Tensor asinh() const;
  Tensor acosh() const;
  Tensor atanh() const;
  Tensor erf() const;
  Tensor erfc() const;
  Tensor erfinv() const;
  Tensor lgamma() const;
  Tensor digamma() const;
  Tensor polygamma(int64_t n) const;  // the n-th derivative of digamma (torch's x.polygamma(n))
  Tensor sigmoid() const;
  Tensor logsigmoid() const;
  Tensor relu() const;
  Tensor gelu() const;
  Tensor gelu_tanh() const;
  Tensor silu() const;
  Tensor mish() const;
  Tensor selu() const;
  Tensor hardsigmoid() const;
  Tensor hardswish() const;
  Tensor softsign() const;
  Tensor hardtanh(double min_val = -1, double max_val = 1) const;
  Tensor softplus(double beta = 1, double threshold = 20) const;
  Tensor leaky_relu(double negative_slope = 0.01) const;
  Tensor elu(double alpha = 1) const;
  Tensor clamp(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt) const;
  Tensor clamp_min(Scalar min) const;
  Tensor clamp_max(Scalar max) const;
  Tensor floor() const;
  Tensor ceil() const;
  Tensor round() const;
  Tensor trunc() const;
  Tensor frac() const;
  Tensor reciprocal() const;
  Tensor nan_to_num(std::optional<double> nan = 0.0, std::optional<double> posinf = std::nullopt,
                    std::optional<double> neginf = std::nullopt) const;
  Tensor lerp(const Tensor& end, Scalar weight) const;
  Tensor addcmul(const Tensor& a, const Tensor& b, Scalar value = 1) const;
  Tensor addcdiv(const Tensor& a, const Tensor& b, Scalar value = 1) const;
  // torch's x.where(condition, y): x where condition holds, else y.
  Tensor where(const Tensor& condition, const Tensor& other) const;

  Tensor eq(const Tensor& o) const;
  Tensor ne(const Tensor& o) const;
  Tensor lt(const Tensor& o) const;
  Tensor le(const Tensor& o) const;
  Tensor gt(const Tensor& o) const;
  Tensor ge(const Tensor& o) const;
  Tensor eq(Scalar o) const;
  Tensor ne(Scalar o) const;
  Tensor lt(Scalar o) const;
  Tensor le(Scalar o) const;
  Tensor gt(Scalar o) const;
  Tensor ge(Scalar o) const;
  Tensor logical_and(const Tensor& o) const;
  Tensor logical_or(const Tensor& o) const;
  Tensor logical_xor(const Tensor& o) const;
  Tensor logical_not() const;
  Tensor isnan() const;
  Tensor isinf() const;
  Tensor isfinite() const;
  Tensor isclose(const Tensor& other, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false) const;
  bool allclose(const Tensor& other, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false) const;
  bool equal(const Tensor& other) const;

  // ---- reductions ----------------------------------------------------------------------------
  Tensor sum(std::optional<DType> dtype = std::nullopt) const;
  Tensor sum(IntArrayRef dims, bool keepdim = false, std::optional<DType> dtype = std::nullopt) const;
  Tensor mean() const;
  Tensor mean(IntArrayRef dims, bool keepdim = false) const;
  Tensor prod() const;
  Tensor prod(int64_t dim, bool keepdim = false) const;
  Tensor max() const;
  std::tuple<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;
  Tensor min() const;
  std::tuple<Tensor, Tensor> min(int64_t dim, bool keepdim = false) const;
  Tensor amax(IntArrayRef dims = {}, bool keepdim = false) const;
  Tensor amin(IntArrayRef dims = {}, bool keepdim = false) const;
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor argmin(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor var(bool unbiased = true) const;
  Tensor var(IntArrayRef dims, bool unbiased = true, bool keepdim = false) const;
  Tensor std(bool unbiased = true) const;
  Tensor std(IntArrayRef dims, bool unbiased = true, bool keepdim = false) const;
  Tensor norm(double p = 2) const;
  Tensor norm(double p, IntArrayRef dims, bool keepdim = false) const;
  Tensor logsumexp(IntArrayRef dims, bool keepdim = false) const;
  Tensor any() const;
  Tensor any(int64_t dim, bool keepdim = false) const;
  Tensor all() const;
  Tensor all(int64_t dim, bool keepdim = false) const;
  Tensor count_nonzero(IntArrayRef dims = {}) const;
  Tensor cumsum(int64_t dim) const;
  Tensor cumprod(int64_t dim) const;
  std::tuple<Tensor, Tensor> cummax(int64_t dim) const;
  std::tuple<Tensor, Tensor> cummin(int64_t dim) const;
  Tensor logcumsumexp(int64_t dim) const;
  std::tuple<Tensor, Tensor> topk(int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true) const;
  std::tuple<Tensor, Tensor> sort(int64_t dim = -1, bool descending = false) const;
  Tensor argsort(int64_t dim = -1, bool descending = false) const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;

  // ---- statistics and counting (core/math_ops.h) ---------------------------------------------
  Tensor median() const;
  std::tuple<Tensor, Tensor> median(int64_t dim, bool keepdim = false) const;
  Tensor nanmedian() const;
  std::tuple<Tensor, Tensor> nanmedian(int64_t dim, bool keepdim = false) const;
  std::tuple<Tensor, Tensor> kthvalue(int64_t k, int64_t dim = -1, bool keepdim = false) const;
  std::tuple<Tensor, Tensor> mode(int64_t dim = -1, bool keepdim = false) const;
  Tensor quantile(double q, std::optional<int64_t> dim = std::nullopt, bool keepdim = false,
                  std::string_view interpolation = "linear") const;
  Tensor quantile(const Tensor& q, std::optional<int64_t> dim = std::nullopt, bool keepdim = false,
                  std::string_view interpolation = "linear") const;
  Tensor nanquantile(double q, std::optional<int64_t> dim = std::nullopt, bool keepdim = false,
                     std::string_view interpolation = "linear") const;
  Tensor nanquantile(const Tensor& q, std::optional<int64_t> dim = std::nullopt, bool keepdim = false,
                     std::string_view interpolation = "linear") const;
  Tensor histc(int64_t bins = 100, double min = 0, double max = 0) const;
  Tensor bincount(const Tensor& weights = {}, int64_t minlength = 0) const;
  UniqueResult unique(bool sorted = true, bool return_inverse = false, bool return_counts = false,
                      std::optional<int64_t> dim = std::nullopt) const;
  UniqueResult unique_consecutive(bool return_inverse = false, bool return_counts = false,
                                  std::optional<int64_t> dim = std::nullopt) const;

  // ---- linear algebra ------------------------------------------------------------------------
  Tensor matmul(const Tensor& other) const;
  Tensor mm(const Tensor& other) const;
  Tensor bmm(const Tensor& other) const;
  Tensor dot(const Tensor& other) const;
  Tensor outer(const Tensor& other) const;
  Tensor mv(const Tensor& vec) const;
  Tensor addmm(const Tensor& mat1, const Tensor& mat2, Scalar beta = 1, Scalar alpha = 1) const;
  Tensor baddbmm(const Tensor& batch1, const Tensor& batch2, Scalar beta = 1, Scalar alpha = 1) const;
  Tensor diag(int64_t diagonal = 0) const;

  // ---- in-place compound operators -----------------------------------------------------------
  Tensor& operator+=(const Tensor& o) { return add_(o); }
  Tensor& operator+=(Scalar o) { return add_(o); }
  Tensor& operator-=(const Tensor& o) { return sub_(o); }
  Tensor& operator-=(Scalar o) { return sub_(o); }
  Tensor& operator*=(const Tensor& o) { return mul_(o); }
  Tensor& operator*=(Scalar o) { return mul_(o); }
  Tensor& operator/=(const Tensor& o) { return div_(o); }
  Tensor& operator/=(Scalar o) { return div_(o); }

  std::string str() const;  // what operator<< prints

 private:
  TensorImpl* checked() const {
    if (!impl_) [[unlikely]]
      throw_undefined();
    return impl_.get();
  }
  [[noreturn]] static void throw_undefined();

  intrusive_ptr<TensorImpl> impl_;
};

// One entry of x.index({...}): an integer, a Slice, None (new axis), Ellipsis, or a tensor of
// indices (int64) or a mask (bool).
class TensorIndex {
 public:
  TensorIndex(int64_t i) : v_(i) {}
  TensorIndex(int i) : v_(static_cast<int64_t>(i)) {}
  TensorIndex(indexing::Slice s) : v_(s) {}
  TensorIndex(std::nullopt_t) : v_(std::monostate{}) {}
  TensorIndex(indexing::EllipsisType e) : v_(e) {}
  TensorIndex(Tensor t) : v_(std::move(t)) {}
  // "..." is Ellipsis, as libtorch accepts it ({"...", -1}); any other string is a ValueError.
  TensorIndex(const char* s);

  bool is_integer() const { return std::holds_alternative<int64_t>(v_); }
  bool is_slice() const { return std::holds_alternative<indexing::Slice>(v_); }
  bool is_none() const { return std::holds_alternative<std::monostate>(v_); }
  bool is_ellipsis() const { return std::holds_alternative<indexing::EllipsisType>(v_); }
  bool is_tensor() const { return std::holds_alternative<Tensor>(v_); }
  int64_t integer() const { return std::get<int64_t>(v_); }
  const indexing::Slice& slice() const { return std::get<indexing::Slice>(v_); }
  const Tensor& tensor() const { return std::get<Tensor>(v_); }

 private:
  std::variant<std::monostate, int64_t, indexing::Slice, indexing::EllipsisType, Tensor> v_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace nabla
