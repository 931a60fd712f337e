#include "optim/grad_scaler.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <utility>

#include "core/graph.h"
#include "core/ops.h"
#include "core/parallel.h"

namespace nabla::amp {

namespace internal {

// x *= inv over n contiguous elements (skipped when inv is 1, as PyTorch's kernel skips it), in one
// pass that also notes whether any element was inf or NaN before the multiply: an element is
// non-finite when its exponent bits are all ones, an integer test that vectorizes with the multiply.
template <class T, class Bits>
bool unscale_contiguous(T* x, int64_t n, T inv) {
  constexpr Bits kExp = sizeof(T) == 4 ? Bits(0x7f800000u) : Bits(0x7ff0000000000000ull);
  constexpr int64_t kGrain = int64_t{1} << 15;
  std::atomic<bool> found{false};
  auto run = [&]<bool kMultiply>(int64_t b, int64_t e) {
    Bits bad = 0;
    for (int64_t i = b; i < e; ++i) {
      T v = x[i];
      Bits u;
      std::memcpy(&u, &v, sizeof u);
      bad |= Bits((u & kExp) == kExp);
      if constexpr (kMultiply) x[i] = v * inv;
    }
    if (bad) found.store(true, std::memory_order_relaxed);
  };
  if (inv == T(1)) parallel_for(0, n, kGrain, [&](int64_t b, int64_t e) { run.template operator()<false>(b, e); });
  else parallel_for(0, n, kGrain, [&](int64_t b, int64_t e) { run.template operator()<true>(b, e); });
  return found.load();
}

// Unscales the gradients in place; returns whether any was inf/NaN. CPU float32/float64
// contiguous gradients take the fused loop, the others Tensor ops (one flag tensor per gradient,
// combined per device and read once).
bool unscale_grads(const std::vector<Tensor>& grads, float inv_scale) {
  bool found = false;
  std::vector<std::pair<Device, std::vector<Tensor>>> flags;  // "all finite" per gradient, by device
  for (Tensor g : grads) {                                    // (a handle: g.mul_ changes the gradient itself)
    if (g.device().is_cpu() && g.is_contiguous() && g.dtype() == kFloat32) {
      found |= unscale_contiguous<float, uint32_t>(g.data_ptr<float>(), g.numel(), inv_scale);
    } else if (g.device().is_cpu() && g.is_contiguous() && g.dtype() == kFloat64) {
      found |= unscale_contiguous<double, uint64_t>(g.data_ptr<double>(), g.numel(), static_cast<double>(inv_scale));
    } else {
      Tensor finite = isfinite(g).all();
      auto it = flags.begin();
      while (it != flags.end() && !(it->first == g.device())) ++it;
      if (it == flags.end()) it = flags.insert(flags.end(), {g.device(), {}});
      it->second.push_back(finite);
      if (inv_scale != 1.0f) g.mul_(Scalar(inv_scale));
    }
  }
  for (const auto& [device, f] : flags)
    if (!stack(f).all().to(kCPU).item<bool>()) found = true;
  return found;
}

}  // namespace internal

GradScaler::GradScaler(GradScalerOptions o)
    : enabled_(o.enabled),
      init_scale_(o.init_scale),
      growth_factor_(o.growth_factor),
      backoff_factor_(o.backoff_factor),
      growth_interval_(o.growth_interval) {
  if (enabled_) {
    NABLA_CHECK(ValueError, o.growth_factor > 1.0, "GradScaler: the growth factor must be > 1.0, got ",
                o.growth_factor);
    NABLA_CHECK(ValueError, o.backoff_factor < 1.0, "GradScaler: the backoff factor must be < 1.0, got ",
                o.backoff_factor);
  }
}

void GradScaler::check_started(const char* what) const {
  NABLA_CHECK(ValueError, started_, "GradScaler: attempted ", what,
              " but the scale was never set: this may indicate your script did not use scaler.scale(loss or outputs) "
              "earlier in the iteration");
}

Tensor GradScaler::scale(const Tensor& outputs) {
  if (!enabled_) return outputs;
  if (!started_) {
    scale_ = static_cast<float>(init_scale_);
    growth_tracker_ = init_growth_tracker_;
    started_ = true;
  }
  // A float16/bfloat16 output times PyTorch's float32 scale tensor promotes to float32 (2^16 itself
  // overflows float16).
  const DType d = outputs.dtype();
  const Tensor& x = is_reduced_float(d) ? outputs.to(kFloat32) : outputs;
  return x * Scalar(static_cast<double>(scale_));
}

std::vector<Tensor> GradScaler::scale(const std::vector<Tensor>& outputs) {
  std::vector<Tensor> out;
  out.reserve(outputs.size());
  for (const Tensor& t : outputs) out.push_back(scale(t));
  return out;
}

void GradScaler::unscale_(optim::Optimizer& optimizer) {
  if (!enabled_) return;
  check_started("unscale_");
  OptState& st = per_optimizer_[&optimizer];
  NABLA_CHECK(ValueError, st.stage != Stage::unscaled,
              "GradScaler::unscale_: unscale_() has already been called on this optimizer since the last update() (",
              optimizer.name(),
              "); call it once per optimizer per iteration, after the last backward, "
              "and call scaler.update() before the next one");
  NABLA_CHECK(ValueError, st.stage != Stage::stepped, "GradScaler::unscale_: unscale_() is being called after step() (",
              optimizer.name(), "); unscale_ before step, or call scaler.update() first");

  // Every gradient is checked before any is changed, so a refusal leaves them all as they were.
  std::vector<Tensor> grads;
  size_t index = 0;
  for (size_t g = 0; g < optimizer.num_param_groups(); ++g)
    for (const Tensor& p : optimizer.params(g)) {
      const Tensor& grad = p.grad();
      if (grad.defined()) {
        NABLA_CHECK(ValueError, grad.dtype() != kFloat16,
                    "GradScaler::unscale_: Attempting to unscale FP16 gradients (", optimizer.name(), " parameter ",
                    index, ", shape ", p.sizes(),
                    ", has a float16 gradient). Keep the parameters in float32 and run the float16 compute under "
                    "autocast, which casts per op; or use bfloat16 parameters, which the scaler unscales");
        grads.push_back(grad);
      }
      ++index;
    }
  // FP32 division can be imprecise for some compile options, so PyTorch takes the reciprocal in FP64.
  const float inv_scale = static_cast<float>(1.0 / static_cast<double>(scale_));
  autograd::NoGradGuard no_grad;
  st.found_inf = internal::unscale_grads(grads, inv_scale);
  st.checked = !grads.empty();
  st.stage = Stage::unscaled;
}

bool GradScaler::step(optim::Optimizer& optimizer) {
  if (!enabled_) {
    optimizer.step();
    return true;
  }
  check_started("step");
  OptState& st = per_optimizer_[&optimizer];
  NABLA_CHECK(ValueError, st.stage != Stage::stepped,
              "GradScaler::step: step() has already been called on this optimizer (", optimizer.name(),
              ") since the last update(); call scaler.update() once per iteration");
  if (st.stage == Stage::ready) unscale_(optimizer);
  NABLA_CHECK(ValueError, st.checked, "GradScaler::step: no inf checks were recorded for this optimizer (",
              optimizer.name(),
              "): none of its parameters has a gradient; call scaler.scale(loss).backward() before step()");
  st.stage = Stage::stepped;
  if (st.found_inf) return false;
  optimizer.step();
  return true;
}

void GradScaler::update() {
  if (!enabled_) return;
  check_started("update");
  bool any_checked = false, found = false;
  for (const auto& [opt, st] : per_optimizer_) {
    any_checked |= st.checked;
    found |= st.checked && st.found_inf;
  }
  NABLA_CHECK(ValueError, any_checked,
              "GradScaler::update: no inf checks were recorded prior to update(); call scaler.step(optimizer) (or "
              "unscale_) after backward, before update()");
  // torch._amp_update_scale_: the scale is float32, the factors double.
  if (found) {
    scale_ = static_cast<float>(static_cast<double>(scale_) * backoff_factor_);
    growth_tracker_ = 0;
  } else {
    const int64_t successful = growth_tracker_ + 1;
    if (successful == growth_interval_) {
      const float grown = static_cast<float>(static_cast<double>(scale_) * growth_factor_);
      if (std::isfinite(grown)) scale_ = grown;  // never grow past float32's range to inf
      growth_tracker_ = 0;
    } else {
      growth_tracker_ = successful;
    }
  }
  per_optimizer_.clear();
}

void GradScaler::update(double new_scale) {
  if (!enabled_) return;
  check_started("update");
  scale_ = static_cast<float>(new_scale);
  per_optimizer_.clear();
}

double GradScaler::get_scale() const {
  if (!enabled_) return 1.0;
  return started_ ? static_cast<double>(scale_) : init_scale_;
}

int64_t GradScaler::get_growth_tracker() const {
  if (!enabled_) return 0;
  return started_ ? growth_tracker_ : init_growth_tracker_;
}

bool GradScaler::found_inf(const optim::Optimizer& optimizer) const {
  auto it = per_optimizer_.find(&optimizer);
  return it != per_optimizer_.end() && it->second.checked && it->second.found_inf;
}

nn::StateDict GradScaler::state_dict() const {
  nn::StateDict sd;
  if (!enabled_) return sd;
  sd.insert("scale", scalar_tensor(get_scale(), dtype(kFloat64)));
  sd.insert("growth_factor", scalar_tensor(growth_factor_, dtype(kFloat64)));
  sd.insert("backoff_factor", scalar_tensor(backoff_factor_, dtype(kFloat64)));
  sd.insert("growth_interval", scalar_tensor(growth_interval_, dtype(kInt64)));
  sd.insert("_growth_tracker", scalar_tensor(get_growth_tracker(), dtype(kInt64)));
  return sd;
}

namespace {

// A number from a state dict (which may come from a damaged file): one element, finite.
double read_number(const nn::StateDict& sd, const char* key) {
  const Tensor* t = sd.find(key);
  NABLA_CHECK(ValueError, t != nullptr, "GradScaler.load_state_dict: missing key '", key, "'");
  NABLA_CHECK(ValueError, t->numel() == 1, "GradScaler.load_state_dict: '", key, "' must hold one number, got shape ",
              t->sizes());
  const double v = t->to(kCPU, kFloat64).item<double>();
  NABLA_CHECK(ValueError, std::isfinite(v), "GradScaler.load_state_dict: '", key, "' must be finite, got ", v);
  return v;
}

int64_t read_count(const nn::StateDict& sd, const char* key, int64_t lo) {
  constexpr double kMax = 9007199254740992.0;  // 2^53
  const double v = read_number(sd, key);
  NABLA_CHECK(ValueError, v >= static_cast<double>(lo) && v <= kMax && v == std::floor(v),
              "GradScaler.load_state_dict: '", key, "' must be a whole number from ", lo, " to 2^53, got ", v);
  return static_cast<int64_t>(v);
}

}  // namespace

void GradScaler::load_state_dict(const nn::StateDict& sd) {
  if (!enabled_) return;
  NABLA_CHECK(
      ValueError, sd.size() != 0,
      "GradScaler.load_state_dict: the source state dict is empty, possibly because it was saved from a disabled "
      "instance of GradScaler");
  const double scale = read_number(sd, "scale");
  const double growth = read_number(sd, "growth_factor");
  const double backoff = read_number(sd, "backoff_factor");
  const int64_t interval = read_count(sd, "growth_interval", 0);
  const int64_t tracker = read_count(sd, "_growth_tracker", 0);
  NABLA_CHECK(ValueError, scale > 0.0 && std::isfinite(static_cast<float>(scale)),
              "GradScaler.load_state_dict: 'scale' must be positive and finite in float32, got ", scale);
  NABLA_CHECK(ValueError, growth > 1.0, "GradScaler.load_state_dict: 'growth_factor' must be > 1.0, got ", growth);
  NABLA_CHECK(ValueError, backoff > 0.0 && backoff < 1.0,
              "GradScaler.load_state_dict: 'backoff_factor' must be in (0, 1), got ", backoff);
  init_scale_ = scale;
  growth_factor_ = growth;
  backoff_factor_ = backoff;
  growth_interval_ = interval;
  init_growth_tracker_ = tracker;
  if (started_) {
    scale_ = static_cast<float>(scale);
    growth_tracker_ = tracker;
  }
}

}  // namespace nabla::amp
