// Tensor creation: from data, filled, ranges, identity, random.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/generator.h"
#include "core/impl.h"
#include "core/trace.h"

namespace nabla {

namespace {

Tensor finish(Tensor t, const TensorOptions& o) {
  if (o.requires_grad()) t.requires_grad_(true);
  return t;
}

Tensor alloc(IntArrayRef shape, DType dt, const TensorOptions& o) {
  return internal::make_empty(shape, dt, o.device(), o.pinned_memory());
}

// Shape and dtype of nested TensorData; throws on ragged lists.
void infer(const TensorData& d, size_t depth, Shape& shape, bool& any_float, bool& any_int, bool& first) {
  if (!d.is_list()) {
    if (first) { first = false; }
    NABLA_CHECK(ShapeError, depth == shape.size(), "tensor: nested lists have inconsistent depth");
    any_float |= d.scalar().is_floating();
    any_int |= d.scalar().is_integral();
    return;
  }
  int64_t n = static_cast<int64_t>(d.list().size());
  if (first && depth == shape.size()) shape.push_back(n);
  NABLA_CHECK(ShapeError, depth < shape.size() && shape[depth] == n, "tensor: nested lists are ragged (a list of ", n,
              " elements where ", depth < shape.size() ? shape[depth] : 0, " were expected at depth ", depth, ")");
  if (n == 0 && first) first = false;
  for (const TensorData& e : d.list()) infer(e, depth + 1, shape, any_float, any_int, first);
}

template <class T>
void flatten_into(const TensorData& d, T*& out) {
  if (!d.is_list()) {
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      *out++ = T(static_cast<float>(d.scalar().to_double()));
    } else {
      *out++ = d.scalar().to<T>();
    }
    return;
  }
  for (const TensorData& e : d.list()) flatten_into(e, out);
}

}  // namespace

Tensor tensor(const TensorData& data, const TensorOptions& o) {
  Shape shape;
  bool any_float = false, any_int = false, first = true;
  infer(data, 0, shape, any_float, any_int, first);
  DType dt = o.dtype_or(any_float ? DType::f32
                        : any_int ? DType::i64
                                  : (shape_numel(shape) == 0 ? DType::f32 : DType::boolean));
  Tensor cpu = internal::make_empty(shape, dt, kCPU);
  visit_dtype(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(cpu.data_ptr());
    flatten_into(data, p);
  });
  return finish(o.device().is_cpu() ? cpu : cpu.to(o.device()), o);
}

template <class T>
Tensor tensor(const std::vector<T>& data, IntArrayRef shape, const TensorOptions& o) {
  int64_t n = shape_numel(shape, "tensor");
  NABLA_CHECK(ShapeError, n == static_cast<int64_t>(data.size()), "tensor: ", data.size(), " values cannot fill shape ",
              shape, " (", n, " elements)");
  Tensor cpu = internal::make_empty(shape, dtype_of<T>(), kCPU);
  T* p = static_cast<T*>(cpu.data_ptr());
  for (size_t i = 0; i < data.size(); ++i) p[i] = data[i];
  Tensor t = o.dtype_opt() ? cpu.to(*o.dtype_opt()) : cpu;
  return finish(o.device().is_cpu() ? t : t.to(o.device()), o);
}
template Tensor tensor(const std::vector<float>&, IntArrayRef, const TensorOptions&);
template Tensor tensor(const std::vector<double>&, IntArrayRef, const TensorOptions&);
template Tensor tensor(const std::vector<int64_t>&, IntArrayRef, const TensorOptions&);
template Tensor tensor(const std::vector<int32_t>&, IntArrayRef, const TensorOptions&);
template Tensor tensor(const std::vector<uint8_t>&, IntArrayRef, const TensorOptions&);
template Tensor tensor(const std::vector<bool>&, IntArrayRef, const TensorOptions&);

Tensor scalar_tensor(Scalar v, const TensorOptions& o) { return full({}, v, o); }

Tensor from_blob(void* data, IntArrayRef sizes, IntArrayRef strides, const TensorOptions& o) {
  backend_for(o.device());  // throws DeviceError when the device is not usable here
  NABLA_CHECK(ShapeError, sizes.size() == strides.size(), "from_blob: sizes ", sizes, " and strides ", strides,
              " have different lengths");
  DType dt = o.dtype_or(DType::f32);
  int64_t span = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    NABLA_CHECK(ShapeError, sizes[i] >= 0 && strides[i] >= 0, "from_blob: negative size or stride");
    if (sizes[i] == 0) span = 0;
    else if (span > 0) span += (sizes[i] - 1) * strides[i];
  }
  auto impl = make_intrusive<TensorImpl>();
  impl->storage = make_intrusive<StorageImpl>(data, static_cast<size_t>(span) * element_size(dt), o.device(), nullptr);
  impl->sizes = sizes.vec();
  impl->strides = strides.vec();
  impl->dtype = dt;
  impl->refresh();
  return finish(Tensor(std::move(impl)), o);
}

Tensor from_blob(void* data, IntArrayRef sizes, const TensorOptions& o) {
  return from_blob(data, sizes, contiguous_strides(sizes), o);
}

Tensor from_blob(void* data, IntArrayRef sizes, std::function<void(void*)> deleter, const TensorOptions& o) {
  Tensor t = from_blob(data, sizes, o);
  t.impl()->storage->deleter = std::move(deleter);
  return t;
}

Tensor empty(IntArrayRef shape, const TensorOptions& o) { return finish(alloc(shape, o.dtype_or(DType::f32), o), o); }
Tensor full(IntArrayRef shape, Scalar v, const TensorOptions& o) {
  DType dt = o.dtype_or(v.is_bool() ? DType::boolean : v.is_integral() ? DType::i64 : DType::f32);
  Tensor t = alloc(shape, dt, o);
  backend_for(t.device()).fill(t, v);
  return finish(t, o);
}
Tensor zeros(IntArrayRef shape, const TensorOptions& o) { return full(shape, 0, o.dtype(o.dtype_or(DType::f32))); }
Tensor ones(IntArrayRef shape, const TensorOptions& o) { return full(shape, 1, o.dtype(o.dtype_or(DType::f32))); }

namespace {
TensorOptions like(const Tensor& t, const TensorOptions& o) {
  TensorOptions r = o.dtype(o.dtype_or(t.dtype()));
  // A device given explicitly wins; otherwise stay on t's device.
  if (o.device() == kCPU && t.device() != kCPU) r = r.device(t.device());
  return r;
}
}  // namespace

Tensor empty_like(const Tensor& t, const TensorOptions& o) { return empty(t.sizes(), like(t, o)); }
Tensor zeros_like(const Tensor& t, const TensorOptions& o) { return zeros(t.sizes(), like(t, o)); }
Tensor ones_like(const Tensor& t, const TensorOptions& o) { return ones(t.sizes(), like(t, o)); }
Tensor full_like(const Tensor& t, Scalar v, const TensorOptions& o) { return full(t.sizes(), v, like(t, o)); }
Tensor rand_like(const Tensor& t, const TensorOptions& o) { return rand(t.sizes(), like(t, o)); }
Tensor randn_like(const Tensor& t, const TensorOptions& o) { return randn(t.sizes(), like(t, o)); }

// float16/bfloat16 ranges are filled as float32 points and rounded once.
static DType float32_fill(DType dt) { return is_reduced_float(dt) ? DType::f32 : dt; }

Tensor arange(Scalar end, const TensorOptions& o) { return arange(0, end, 1, o); }

Tensor arange(Scalar start, Scalar end, Scalar step, const TensorOptions& o) {
  bool floating = start.is_floating() || end.is_floating() || step.is_floating();
  DType dt = o.dtype_or(floating ? DType::f32 : DType::i64);
  double s = start.to_double(), e = end.to_double(), st = step.to_double();
  NABLA_CHECK(ValueError, st != 0, "arange: step must be nonzero");
  NABLA_CHECK(ValueError, (st > 0 && e >= s) || (st < 0 && e <= s), "arange: the range [", start, ", ", end,
              ") and step ", step, " have inconsistent signs");
  int64_t n;
  if (!floating) {
    int64_t si = start.to_int(), ei = end.to_int(), sti = step.to_int();
    n = sti > 0 ? (ei - si + sti - 1) / sti : (si - ei + (-sti) - 1) / (-sti);
  } else {
    n = static_cast<int64_t>(std::ceil((e - s) / st));
  }
  n = std::max<int64_t>(n, 0);
  const DType fill = float32_fill(dt);
  Tensor cpu = internal::make_empty({n}, fill, kCPU);
  visit_compute_dtype(fill, "arange", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(cpu.data_ptr());
    if constexpr (std::is_integral_v<T>) {
      int64_t si = start.to_int(), sti = floating ? 1 : step.to_int();
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(floating ? s + st * i : si + sti * i);
    } else {
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(s + st * static_cast<double>(i));
    }
  });
  if (fill != dt) cpu = cpu.to(dt);
  return finish(o.device().is_cpu() ? cpu : cpu.to(o.device()), o);
}

Tensor linspace(double start, double end, int64_t steps, const TensorOptions& o) {
  NABLA_CHECK(ValueError, steps >= 0, "linspace: number of steps must be non-negative, got ", steps);
  const DType dt = o.dtype_or(DType::f32);
  const DType fill = float32_fill(dt);
  Tensor cpu = internal::make_empty({steps}, fill, kCPU);
  visit_compute_dtype(fill, "linspace", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(cpu.data_ptr());
    double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0;
    // Fill from both ends, as PyTorch, so the last value is exactly `end` (one step gives `start`).
    int64_t half = steps == 1 ? 1 : steps / 2;
    for (int64_t i = 0; i < steps; ++i)
      p[i] = static_cast<T>(i < half ? start + step * static_cast<double>(i)
                                     : end - step * static_cast<double>(steps - 1 - i));
  });
  if (fill != dt) cpu = cpu.to(dt);
  return finish(o.device().is_cpu() ? cpu : cpu.to(o.device()), o);
}

Tensor eye(int64_t n, std::optional<int64_t> m_opt, const TensorOptions& o) {
  int64_t m = m_opt.value_or(n);
  NABLA_CHECK(ValueError, n >= 0 && m >= 0, "eye: sizes must be non-negative, got ", n, " x ", m);
  Tensor t = zeros({n, m}, o.requires_grad(false));
  if (std::min(n, m) > 0) {
    trace::Suspend s;  // a constant: the view it writes through is no op of a traced graph
    t.diagonal().fill_(1);
  }
  return finish(t, o);
}

// ---- random -------------------------------------------------------------------------------------

Generator& default_generator(Device device) {
  static Generator gens[kNumDeviceTypes];
  return gens[static_cast<int>(device.type)];
}

void manual_seed(uint64_t seed) {
  for (int i = 0; i < kNumDeviceTypes; ++i) default_generator(Device(static_cast<DeviceType>(i))).manual_seed(seed);
}

Tensor rand(IntArrayRef shape, const TensorOptions& o) {
  DType dt = o.dtype_or(DType::f32);
  NABLA_CHECK(DTypeError, is_floating(dt), "rand: dtype must be floating, got ", dt);
  Tensor t = alloc(shape, dt, o);
  backend_for(t.device()).random(RandomOp::uniform, t, 0, 1, default_generator(t.device()));
  return finish(t, o);
}

Tensor randn(IntArrayRef shape, const TensorOptions& o) {
  DType dt = o.dtype_or(DType::f32);
  NABLA_CHECK(DTypeError, is_floating(dt), "randn: dtype must be floating, got ", dt);
  Tensor t = alloc(shape, dt, o);
  backend_for(t.device()).random(RandomOp::normal, t, 0, 1, default_generator(t.device()));
  return finish(t, o);
}

Tensor randint(int64_t low, int64_t high, IntArrayRef shape, const TensorOptions& o) {
  NABLA_CHECK(ValueError, high > low, "randint: high (", high, ") must be greater than low (", low, ")");
  Tensor t = alloc(shape, o.dtype_or(DType::i64), o);
  backend_for(t.device()).random_int(t, low, high, default_generator(t.device()));
  return finish(t, o);
}
Tensor randint(int64_t high, IntArrayRef shape, const TensorOptions& o) { return randint(0, high, shape, o); }

Tensor randperm(int64_t n, const TensorOptions& o) {
  NABLA_CHECK(ValueError, n >= 0, "randperm: n must be non-negative, got ", n);
  Tensor perm = internal::make_empty({n}, DType::i64, kCPU);
  int64_t* p = perm.data_ptr<int64_t>();
  std::iota(p, p + n, int64_t(0));
  auto [key, first] = default_generator(kCPU).reserve(static_cast<uint64_t>((n + 1) / 2));
  // Fisher-Yates with 64-bit draws (modulo bias below 2^-30 for n < 2^34).
  for (int64_t i = n - 1; i > 0; --i) {
    uint32_t w[4];
    Philox::block(key, first + static_cast<uint64_t>(i / 2), w);
    uint64_t r = (i % 2) ? (static_cast<uint64_t>(w[2]) << 32 | w[3]) : (static_cast<uint64_t>(w[0]) << 32 | w[1]);
    std::swap(p[i], p[r % static_cast<uint64_t>(i + 1)]);
  }
  Tensor t = o.dtype_opt() ? perm.to(*o.dtype_opt()) : perm;
  return finish(o.device().is_cpu() ? t : t.to(o.device()), o);
}

Tensor bernoulli(const Tensor& p) {
  autograd::NoGradGuard ng;
  Tensor r = rand_like(p, dtype(is_floating(p.dtype()) ? p.dtype() : DType::f32));
  return lt(r, p).to(p.dtype());
}

Tensor multinomial(const Tensor& weights, int64_t num_samples, bool replacement) {
  autograd::NoGradGuard ng;
  NABLA_CHECK(ShapeError, weights.dim() == 1 || weights.dim() == 2,
              "multinomial: weights must be 1-D or 2-D, got shape ", weights.sizes());
  Tensor w2 = (weights.dim() == 1 ? weights.unsqueeze(0) : weights).to(kCPU, DType::f64).contiguous();
  int64_t rows = w2.sizes()[0], n = w2.sizes()[1];
  NABLA_CHECK(ValueError, n > 0, "multinomial: there are no categories to sample from");
  NABLA_CHECK(ValueError, replacement || num_samples <= n, "multinomial: cannot draw ", num_samples,
              " samples without replacement from ", n, " categories");
  Tensor out = internal::make_empty({rows, num_samples}, DType::i64, kCPU);
  const double* w = w2.data_ptr<double>();
  int64_t* o = out.data_ptr<int64_t>();
  Generator& gen = default_generator(kCPU);
  for (int64_t r = 0; r < rows; ++r) {
    const double* wr = w + r * n;
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
      NABLA_CHECK(ValueError, wr[i] >= 0 && std::isfinite(wr[i]),
                  "multinomial: weights must be finite and non-negative");
      total += wr[i];
    }
    NABLA_CHECK(ValueError, total > 0, "multinomial: the weights of row ", r, " sum to zero");
    auto [key, first] = gen.reserve(static_cast<uint64_t>(replacement ? num_samples : n));
    if (replacement) {
      std::vector<double> cdf(n);
      std::partial_sum(wr, wr + n, cdf.begin());
      for (int64_t s = 0; s < num_samples; ++s) {
        uint32_t b[4];
        Philox::block(key, first + s, b);
        double u = Philox::to_double(b[0], b[1]) * total;
        int64_t idx = std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin();
        while (idx < n - 1 && wr[idx] == 0) ++idx;  // never pick a zero-weight category
        o[r * num_samples + s] = std::min(idx, n - 1);
      }
    } else {
      // Exponential race: the k smallest of E_i / w_i are a weighted sample without replacement.
      std::vector<std::pair<double, int64_t>> keys;
      for (int64_t i = 0; i < n; ++i) {
        uint32_t b[4];
        Philox::block(key, first + i, b);
        double u = Philox::to_double(b[0], b[1]);
        double k = wr[i] > 0 ? -std::log1p(-u) / wr[i] : std::numeric_limits<double>::infinity();
        keys.emplace_back(k, i);
      }
      std::partial_sort(keys.begin(), keys.begin() + num_samples, keys.end());
      for (int64_t s = 0; s < num_samples; ++s) o[r * num_samples + s] = keys[s].second;
    }
  }
  Tensor res = weights.dim() == 1 ? out.squeeze(0) : out;
  return weights.is_cpu() ? res : res.to(weights.device());
}

Tensor& Tensor::uniform_(double from, double to) {
  internal::check_inplace(*this, "uniform_");
  NABLA_CHECK(DTypeError, is_floating(dtype()), "uniform_: dtype must be floating, got ", dtype());
  backend_for(device()).random(RandomOp::uniform, *this, from, to, default_generator(device()));
  internal::bump_version(*this);
  return *this;
}
Tensor& Tensor::normal_(double mean, double std) {
  internal::check_inplace(*this, "normal_");
  NABLA_CHECK(DTypeError, is_floating(dtype()), "normal_: dtype must be floating, got ", dtype());
  NABLA_CHECK(ValueError, std >= 0, "normal_: std must be non-negative, got ", std);
  backend_for(device()).random(RandomOp::normal, *this, mean, std, default_generator(device()));
  internal::bump_version(*this);
  return *this;
}
Tensor& Tensor::bernoulli_(double p) {
  internal::check_inplace(*this, "bernoulli_");
  NABLA_CHECK(ValueError, p >= 0 && p <= 1, "bernoulli_: p must be in [0, 1], got ", p);
  backend_for(device()).random(RandomOp::bernoulli, *this, p, 0, default_generator(device()));
  internal::bump_version(*this);
  return *this;
}

}  // namespace nabla
