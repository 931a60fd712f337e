// Tensor methods that forward to the free functions of core/ops.h (and linalg.h, math_ops.h,
// indexing_ops.h); the elementwise ops' one-tensor forms come from their lists.
#include "core/elementwise_ops.h"
#include "core/indexing_ops.h"
#include "core/linalg.h"
#include "core/math_ops.h"
#include "core/ops.h"

namespace nabla {

Tensor Tensor::view(IntArrayRef s) const { return nabla::view(*this, s); }
Tensor Tensor::reshape(IntArrayRef s) const { return nabla::reshape(*this, s); }
Tensor Tensor::permute(IntArrayRef d) const { return nabla::permute(*this, d); }
Tensor Tensor::transpose(int64_t a, int64_t b) const { return nabla::transpose(*this, a, b); }
Tensor Tensor::t() const {
  NABLA_CHECK(ShapeError, dim() <= 2, "t: expects a tensor with at most 2 dims, got shape ", sizes(),
              " (use transpose or mT for batches)");
  return dim() < 2 ? nabla::view(*this, sizes()) : nabla::transpose(*this, 0, 1);
}
Tensor Tensor::mT() const {
  NABLA_CHECK(ShapeError, dim() >= 2, "mT: expects a tensor with at least 2 dims, got shape ", sizes());
  return nabla::transpose(*this, -2, -1);
}
Tensor Tensor::squeeze() const { return nabla::squeeze(*this); }
Tensor Tensor::squeeze(int64_t d) const { return nabla::squeeze(*this, d); }
Tensor Tensor::unsqueeze(int64_t d) const { return nabla::unsqueeze(*this, d); }
Tensor Tensor::flatten(int64_t s, int64_t e) const { return nabla::flatten(*this, s, e); }
Tensor Tensor::unflatten(int64_t d, IntArrayRef s) const { return nabla::unflatten(*this, d, s); }
Tensor Tensor::expand(IntArrayRef s) const { return nabla::expand(*this, s); }
Tensor Tensor::narrow(int64_t d, int64_t s, int64_t l) const { return nabla::narrow(*this, d, s, l); }
Tensor Tensor::slice(int64_t d, std::optional<int64_t> s, std::optional<int64_t> e, int64_t st) const {
  return nabla::slice(*this, d, s, e, st);
}
Tensor Tensor::select(int64_t d, int64_t i) const { return nabla::select(*this, d, i); }
std::vector<Tensor> Tensor::split(int64_t s, int64_t d) const { return nabla::split(*this, s, d); }
std::vector<Tensor> Tensor::split_with_sizes(IntArrayRef s, int64_t d) const {
  return nabla::split_with_sizes(*this, s, d);
}
std::vector<Tensor> Tensor::chunk(int64_t c, int64_t d) const { return nabla::chunk(*this, c, d); }
std::vector<Tensor> Tensor::unbind(int64_t d) const { return nabla::unbind(*this, d); }
Tensor Tensor::diagonal(int64_t o, int64_t a, int64_t b) const { return nabla::diagonal(*this, o, a, b); }
Tensor Tensor::as_strided(IntArrayRef s, IntArrayRef st, std::optional<int64_t> o) const {
  return nabla::as_strided(*this, s, st, o);
}
Tensor Tensor::movedim(int64_t s, int64_t d) const { return nabla::movedim(*this, s, d); }

Tensor Tensor::repeat(IntArrayRef r) const { return nabla::repeat(*this, r); }
Tensor Tensor::flip(IntArrayRef d) const { return nabla::flip(*this, d); }
Tensor Tensor::roll(IntArrayRef s, IntArrayRef d) const { return nabla::roll(*this, s, d); }
Tensor Tensor::index_select(int64_t d, const Tensor& i) const { return nabla::index_select(*this, d, i); }
Tensor Tensor::gather(int64_t d, const Tensor& i) const { return nabla::gather(*this, d, i); }
Tensor Tensor::scatter(int64_t d, const Tensor& i, const Tensor& s) const { return nabla::scatter(*this, d, i, s); }
Tensor Tensor::scatter(int64_t d, const Tensor& i, Scalar v) const { return nabla::scatter(*this, d, i, v); }
Tensor Tensor::scatter_add(int64_t d, const Tensor& i, const Tensor& s) const {
  return nabla::scatter_add(*this, d, i, s);
}
Tensor Tensor::masked_fill(const Tensor& m, Scalar v) const { return nabla::masked_fill(*this, m, v); }
Tensor Tensor::masked_fill(const Tensor& m, const Tensor& v) const { return nabla::masked_fill(*this, m, v); }
Tensor Tensor::masked_select(const Tensor& m) const { return nabla::masked_select(*this, m); }
Tensor Tensor::tril(int64_t k) const { return nabla::tril(*this, k); }
Tensor Tensor::triu(int64_t k) const { return nabla::triu(*this, k); }

Tensor Tensor::add(const Tensor& o, Scalar a) const { return nabla::add(*this, o, a); }
Tensor Tensor::add(Scalar o, Scalar a) const { return nabla::add(*this, o, a); }
Tensor Tensor::sub(const Tensor& o, Scalar a) const { return nabla::sub(*this, o, a); }
Tensor Tensor::sub(Scalar o, Scalar a) const { return nabla::sub(*this, o, a); }
Tensor Tensor::mul(Scalar o) const { return nabla::mul(*this, o); }
Tensor Tensor::div(Scalar o) const { return nabla::div(*this, o); }
Tensor Tensor::pow(Scalar e) const { return nabla::pow(*this, e); }

Tensor Tensor::softplus(double b, double t) const { return nabla::softplus(*this, b, t); }
Tensor Tensor::leaky_relu(double s) const { return nabla::leaky_relu(*this, s); }
Tensor Tensor::elu(double a) const { return nabla::elu(*this, a); }
Tensor Tensor::clamp(std::optional<Scalar> lo, std::optional<Scalar> hi) const { return nabla::clamp(*this, lo, hi); }
Tensor Tensor::clamp_min(Scalar lo) const { return nabla::clamp_min(*this, lo); }
Tensor Tensor::clamp_max(Scalar hi) const { return nabla::clamp_max(*this, hi); }

Tensor Tensor::eq(Scalar o) const { return nabla::eq(*this, o); }
Tensor Tensor::ne(Scalar o) const { return nabla::ne(*this, o); }
Tensor Tensor::lt(Scalar o) const { return nabla::lt(*this, o); }
Tensor Tensor::le(Scalar o) const { return nabla::le(*this, o); }
Tensor Tensor::gt(Scalar o) const { return nabla::gt(*this, o); }
Tensor Tensor::ge(Scalar o) const { return nabla::ge(*this, o); }
bool Tensor::allclose(const Tensor& o, double r, double a, bool n) const { return nabla::allclose(*this, o, r, a, n); }
bool Tensor::equal(const Tensor& o) const { return nabla::equal(*this, o); }

Tensor Tensor::sum(std::optional<DType> d) const { return nabla::sum(*this, d); }
Tensor Tensor::sum(IntArrayRef dims, bool k, std::optional<DType> d) const { return nabla::sum(*this, dims, k, d); }
Tensor Tensor::mean() const { return nabla::mean(*this); }
Tensor Tensor::mean(IntArrayRef dims, bool k) const { return nabla::mean(*this, dims, k); }
Tensor Tensor::prod() const { return nabla::prod(*this); }
Tensor Tensor::prod(int64_t d, bool k) const { return nabla::prod(*this, d, k); }
Tensor Tensor::max() const { return nabla::max(*this); }
std::tuple<Tensor, Tensor> Tensor::max(int64_t d, bool k) const { return nabla::max(*this, d, k); }
Tensor Tensor::min() const { return nabla::min(*this); }
std::tuple<Tensor, Tensor> Tensor::min(int64_t d, bool k) const { return nabla::min(*this, d, k); }
Tensor Tensor::amax(IntArrayRef d, bool k) const { return nabla::amax(*this, d, k); }
Tensor Tensor::amin(IntArrayRef d, bool k) const { return nabla::amin(*this, d, k); }
Tensor Tensor::argmax(std::optional<int64_t> d, bool k) const { return nabla::argmax(*this, d, k); }
Tensor Tensor::argmin(std::optional<int64_t> d, bool k) const { return nabla::argmin(*this, d, k); }
Tensor Tensor::var(bool unbiased) const { return nabla::var(*this, {}, unbiased ? 1 : 0, false); }
Tensor Tensor::var(IntArrayRef d, bool unbiased, bool k) const { return nabla::var(*this, d, unbiased ? 1 : 0, k); }
Tensor Tensor::std(bool unbiased) const { return nabla::std(*this, {}, unbiased ? 1 : 0, false); }
Tensor Tensor::std(IntArrayRef d, bool unbiased, bool k) const { return nabla::std(*this, d, unbiased ? 1 : 0, k); }
Tensor Tensor::norm(double p) const { return nabla::norm(*this, p); }
Tensor Tensor::norm(double p, IntArrayRef d, bool k) const { return nabla::norm(*this, p, d, k); }
Tensor Tensor::logsumexp(IntArrayRef d, bool k) const { return nabla::logsumexp(*this, d, k); }
Tensor Tensor::any() const { return nabla::any(*this); }
Tensor Tensor::any(int64_t d, bool k) const { return nabla::any(*this, d, k); }
Tensor Tensor::all() const { return nabla::all(*this); }
Tensor Tensor::all(int64_t d, bool k) const { return nabla::all(*this, d, k); }
Tensor Tensor::cumsum(int64_t d) const { return nabla::cumsum(*this, d); }
std::tuple<Tensor, Tensor> Tensor::topk(int64_t k, int64_t d, bool l, bool s) const {
  return nabla::topk(*this, k, d, l, s);
}
std::tuple<Tensor, Tensor> Tensor::sort(int64_t d, bool desc) const { return nabla::sort(*this, d, desc); }
Tensor Tensor::argsort(int64_t d, bool desc) const { return nabla::argsort(*this, d, desc); }
Tensor Tensor::softmax(int64_t d) const { return nabla::softmax(*this, d); }
Tensor Tensor::log_softmax(int64_t d) const { return nabla::log_softmax(*this, d); }

Tensor Tensor::matmul(const Tensor& o) const { return nabla::matmul(*this, o); }
Tensor Tensor::mm(const Tensor& o) const { return nabla::mm(*this, o); }
Tensor Tensor::bmm(const Tensor& o) const { return nabla::bmm(*this, o); }
Tensor Tensor::dot(const Tensor& o) const { return nabla::dot(*this, o); }
Tensor Tensor::outer(const Tensor& o) const { return nabla::outer(*this, o); }

// The elementwise lists' one-tensor forms: x.exp(), x.isnan(), x.atan2(y), x.eq(y).
#define NABLA_UNARY_METHOD(name, ...) \
  Tensor Tensor::name() const { return nabla::name(*this); }
#define NABLA_BINARY_METHOD(name, ...) \
  Tensor Tensor::name(const Tensor& other) const { return nabla::name(*this, other); }
NABLA_UNARY_FLOAT_OPS(NABLA_UNARY_METHOD)
NABLA_UNARY_SAME_OPS(NABLA_UNARY_METHOD)
NABLA_UNARY_BOOL_OPS(NABLA_UNARY_METHOD)
NABLA_BINARY_ARITH_OPS(NABLA_BINARY_METHOD)
NABLA_BINARY_BOOL_OPS(NABLA_BINARY_METHOD)
#undef NABLA_UNARY_METHOD
#undef NABLA_BINARY_METHOD

Tensor Tensor::polygamma(int64_t n) const { return nabla::polygamma(n, *this); }
Tensor Tensor::hardtanh(double lo, double hi) const { return nabla::hardtanh(*this, lo, hi); }
Tensor Tensor::nan_to_num(std::optional<double> nan, std::optional<double> posinf, std::optional<double> neginf) const {
  return nabla::nan_to_num(*this, nan, posinf, neginf);
}
Tensor Tensor::lerp(const Tensor& end, Scalar w) const { return nabla::lerp(*this, end, w); }
Tensor Tensor::addcmul(const Tensor& a, const Tensor& b, Scalar v) const { return nabla::addcmul(*this, a, b, v); }
Tensor Tensor::addcdiv(const Tensor& a, const Tensor& b, Scalar v) const { return nabla::addcdiv(*this, a, b, v); }
Tensor Tensor::where(const Tensor& condition, const Tensor& other) const {
  return nabla::where(condition, *this, other);
}
Tensor Tensor::isclose(const Tensor& o, double r, double a, bool n) const { return nabla::isclose(*this, o, r, a, n); }

Tensor Tensor::index_add(int64_t d, const Tensor& i, const Tensor& s) const { return nabla::index_add(*this, d, i, s); }
Tensor Tensor::scatter_reduce(int64_t d, const Tensor& i, const Tensor& s, std::string_view r, bool self) const {
  return nabla::scatter_reduce(*this, d, i, s, r, self);
}
Tensor Tensor::nonzero() const { return nabla::nonzero(*this); }
Tensor Tensor::index_put(const std::vector<std::optional<Tensor>>& i, const Tensor& v, bool acc) const {
  return nabla::index_put(*this, i, v, acc);
}
Tensor Tensor::take_along_dim(const Tensor& i, std::optional<int64_t> d) const {
  return nabla::take_along_dim(*this, i, d);
}
Tensor Tensor::repeat_interleave(int64_t r, std::optional<int64_t> d, std::optional<int64_t> n) const {
  return nabla::repeat_interleave(*this, r, d, n);
}
Tensor Tensor::repeat_interleave(const Tensor& r, std::optional<int64_t> d, std::optional<int64_t> n) const {
  return nabla::repeat_interleave(*this, r, d, n);
}

Tensor Tensor::count_nonzero(IntArrayRef d) const { return nabla::count_nonzero(*this, d); }
Tensor Tensor::cumprod(int64_t d) const { return nabla::cumprod(*this, d); }
std::tuple<Tensor, Tensor> Tensor::cummax(int64_t d) const { return nabla::cummax(*this, d); }
std::tuple<Tensor, Tensor> Tensor::cummin(int64_t d) const { return nabla::cummin(*this, d); }
Tensor Tensor::logcumsumexp(int64_t d) const { return nabla::logcumsumexp(*this, d); }

Tensor Tensor::median() const { return nabla::median(*this); }
std::tuple<Tensor, Tensor> Tensor::median(int64_t d, bool k) const { return nabla::median(*this, d, k); }
Tensor Tensor::nanmedian() const { return nabla::nanmedian(*this); }
std::tuple<Tensor, Tensor> Tensor::nanmedian(int64_t d, bool k) const { return nabla::nanmedian(*this, d, k); }
std::tuple<Tensor, Tensor> Tensor::kthvalue(int64_t n, int64_t d, bool k) const {
  return nabla::kthvalue(*this, n, d, k);
}
std::tuple<Tensor, Tensor> Tensor::mode(int64_t d, bool k) const { return nabla::mode(*this, d, k); }
Tensor Tensor::quantile(double q, std::optional<int64_t> d, bool k, std::string_view i) const {
  return nabla::quantile(*this, q, d, k, i);
}
Tensor Tensor::quantile(const Tensor& q, std::optional<int64_t> d, bool k, std::string_view i) const {
  return nabla::quantile(*this, q, d, k, i);
}
Tensor Tensor::nanquantile(double q, std::optional<int64_t> d, bool k, std::string_view i) const {
  return nabla::nanquantile(*this, q, d, k, i);
}
Tensor Tensor::nanquantile(const Tensor& q, std::optional<int64_t> d, bool k, std::string_view i) const {
  return nabla::nanquantile(*this, q, d, k, i);
}
Tensor Tensor::histc(int64_t bins, double lo, double hi) const { return nabla::histc(*this, bins, lo, hi); }
Tensor Tensor::bincount(const Tensor& w, int64_t n) const { return nabla::bincount(*this, w, n); }
UniqueResult Tensor::unique(bool s, bool inv, bool counts, std::optional<int64_t> d) const {
  return nabla::unique(*this, s, inv, counts, d);
}
UniqueResult Tensor::unique_consecutive(bool inv, bool counts, std::optional<int64_t> d) const {
  return nabla::unique_consecutive(*this, inv, counts, d);
}

Tensor Tensor::mv(const Tensor& v) const { return nabla::mv(*this, v); }
Tensor Tensor::addmm(const Tensor& a, const Tensor& b, Scalar beta, Scalar alpha) const {
  return nabla::addmm(*this, a, b, beta, alpha);
}
Tensor Tensor::baddbmm(const Tensor& a, const Tensor& b, Scalar beta, Scalar alpha) const {
  return nabla::baddbmm(*this, a, b, beta, alpha);
}
Tensor Tensor::diag(int64_t d) const { return nabla::diag(*this, d); }

}  // namespace nabla
