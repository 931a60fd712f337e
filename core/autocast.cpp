// Autocast's state, lists and casts (core/autocast.h).
#include "core/autocast.h"

#include <unordered_map>

#include "core/error.h"
#include "core/graph.h"
#include "core/impl.h"

namespace nabla {

const char* cast_policy_name(CastPolicy p) {
  switch (p) {
    case CastPolicy::none: return "none";
    case CastPolicy::lower: return "lower";
    case CastPolicy::fp32: return "fp32";
    case CastPolicy::promote: return "promote";
    case CastPolicy::banned: return "banned";
  }
  return "?";
}

CastPolicy autocast_policy(OpId op, DeviceType device) {
  using enum OpId;
  const bool cuda = device == DeviceType::cuda;
  switch (op) {
    // lower precision, both devices
    case conv1d:
    case conv2d:
    case conv3d:
    case conv_transpose1d:
    case conv_transpose2d:
    case conv_transpose3d:
    case mm:
    case bmm:
    case matmul:
    case addmm:
    case baddbmm:
    case linear:
    case prelu:
    case scaled_dot_product_attention:
    case flash_attention:
    case rnn:
    case lstm:
    case gru: return CastPolicy::lower;
    case mv:
    case einsum: return cuda ? CastPolicy::lower : CastPolicy::none;
    // float32, both devices: the losses
    case cross_entropy:
    case nll_loss:
    case mse_loss:
    case l1_loss:
    case smooth_l1_loss:
    case huber_loss:
    case kl_div:
    case binary_cross_entropy_with_logits:
    case margin_ranking_loss:
    case hinge_embedding_loss:
    case cosine_embedding_loss:
    case triplet_margin_loss:
    case soft_margin_loss:
    case multi_margin_loss:
    case poisson_nll_loss:
    case ctc_loss: return CastPolicy::fp32;
    case binary_cross_entropy: return cuda ? CastPolicy::banned : CastPolicy::fp32;
    // float32 on the CPU
    case linalg_inv:
    case linalg_solve:
    case linalg_cholesky:
    case linalg_qr:
    case linalg_svd:
    case linalg_svdvals:
    case linalg_eigh:
    case linalg_eigvalsh:
    case linalg_lstsq:
    case linalg_trace:
    case quantile:
    case nanquantile:
    case max_unpool1d:  // PyTorch's max_unpool1d is its max_unpool2d
    case max_unpool2d: return cuda ? CastPolicy::none : CastPolicy::fp32;
    case view_as_complex:
    case polar:
    case stft:
    case istft:
    case fft_c2c:
    case fft_r2c:
    case fft_c2r: return cuda ? CastPolicy::none : CastPolicy::fp32;
    case grid_sample: return cuda ? CastPolicy::promote : CastPolicy::fp32;
    case prod: return CastPolicy::fp32;
    // float32 on CUDA
    case exp:
    case expm1:
    case log:
    case log10:
    case log2:
    case log1p:
    case reciprocal:
    case rsqrt:
    case sinh:
    case cosh:
    case tan:
    case acos:
    case asin:
    case erfinv:
    case pow:
    case pow_scalar:
    case softplus:
    case layer_norm:
    case group_norm:
    case softmax:
    case log_softmax:
    case sum:
    case cumsum:
    case cumprod:
    case logsumexp:
    case norm:
    case linalg_vector_norm:
    case linalg_matrix_norm:
    case cosine_similarity:
    case interpolate: return cuda ? CastPolicy::fp32 : CastPolicy::none;
    // promote
    case cat:
    case stack: return cuda ? CastPolicy::none : CastPolicy::promote;
    case addcmul:
    case addcdiv:
    case atan2:
    case bilinear:
    case linalg_cross:
    case dot:
    case index_put:
    case tensordot:
    case scatter_add: return cuda ? CastPolicy::promote : CastPolicy::none;
    default: return CastPolicy::none;
  }
}

namespace {
struct DeviceState {
  bool enabled = false;
  DType dtype;
};
struct ThreadState {
  DeviceState dev[kNumDeviceTypes] = {{false, DType::bf16}, {false, DType::f16}};
  bool cache = true;
  int nesting = 0;
};
thread_local ThreadState tl_state;

struct CacheEntry {
  Tensor source, cast;
  uint32_t version;
  bool with_grad;
};
thread_local std::unordered_map<const void*, CacheEntry> tl_cache;

uint8_t enabled_mask() {
  uint8_t m = 0;
  for (int d = 0; d < kNumDeviceTypes; ++d)
    if (tl_state.dev[d].enabled) m |= static_cast<uint8_t>(1u << d);
  return m;
}
}  // namespace

namespace autocast_internal {
thread_local uint8_t tl_active = 0;
namespace {
thread_local DeviceType tl_cpu_lists = DeviceType::cpu;
// The device whose lists an op on `device` follows.
DeviceType lists_for(DeviceType device) { return device == DeviceType::cpu ? tl_cpu_lists : device; }
}  // namespace
ListsOf::ListsOf(DeviceType lists) : saved_(tl_cpu_lists) { tl_cpu_lists = lists; }
ListsOf::~ListsOf() { tl_cpu_lists = saved_; }
}  // namespace autocast_internal

AutocastGuard::AutocastGuard(DeviceType device, bool enabled, DType dtype, bool cache) : device_(device), owns_(true) {
  DeviceState& d = tl_state.dev[static_cast<int>(device)];
  prev_enabled_ = d.enabled;
  prev_dtype_ = d.dtype;
  prev_cache_ = tl_state.cache;
  d.enabled = enabled;
  d.dtype = dtype;
  tl_state.cache = cache;
  ++tl_state.nesting;
  autocast_internal::tl_active = enabled_mask();
}

AutocastGuard::AutocastGuard(AutocastGuard&& o) noexcept
    : device_(o.device_),
      prev_enabled_(o.prev_enabled_),
      prev_cache_(o.prev_cache_),
      owns_(o.owns_),
      prev_dtype_(o.prev_dtype_) {
  o.owns_ = false;
}

AutocastGuard::~AutocastGuard() {
  if (!owns_) return;
  DeviceState& d = tl_state.dev[static_cast<int>(device_)];
  d.enabled = prev_enabled_;
  d.dtype = prev_dtype_;
  tl_state.cache = prev_cache_;
  if (--tl_state.nesting == 0) clear_autocast_cache();
  autocast_internal::tl_active = enabled_mask();
}

AutocastGuard autocast(Device device, DType dtype, bool enabled, bool cache_enabled) {
  NABLA_CHECK(ValueError, device.is_cpu() || device.is_cuda(), "autocast: device ", device,
              " has no autocast; use kCPU or kCUDA");
  NABLA_CHECK(ValueError, dtype == DType::bf16 || dtype == DType::f16, "autocast: ", dtype,
              " is not a lower-precision dtype for ", device,
              "; use kBFloat16 or kHalf (or enabled = false to turn autocast off)");
  return AutocastGuard(device.type, enabled, dtype, cache_enabled);
}

AutocastGuard autocast(Device device, bool enabled) {
  return autocast(device, device.is_cuda() ? DType::f16 : DType::bf16, enabled);
}

bool is_autocast_enabled(DeviceType device) { return tl_state.dev[static_cast<int>(device)].enabled; }
DType autocast_dtype(DeviceType device) { return tl_state.dev[static_cast<int>(device)].dtype; }
bool is_autocast_cache_enabled() { return tl_state.cache; }
void clear_autocast_cache() { tl_cache.clear(); }

namespace autocast_internal {
namespace {
bool eligible(const Tensor& t, DeviceType device) {
  return t.defined() && is_floating(t.dtype()) && t.dtype() != DType::f64 && t.device().type == device;
}

// t in `to` (through autograd), a weight's cast from the region's cache.
Tensor cast_to(const Tensor& t, DType to, bool lower) {
  if (t.dtype() == to) return t;
  const bool cacheable = lower && tl_state.cache && t.dtype() == DType::f32 && t.requires_grad() && t.is_leaf();
  if (!cacheable) return t.to(to);
  const bool with_grad = autograd::GradMode::is_enabled();
  auto it = tl_cache.find(t.impl());
  if (it != tl_cache.end() && it->second.cast.dtype() == to && it->second.version == t.version() &&
      it->second.with_grad == with_grad)
    return it->second.cast;
  Tensor c = t.to(to);
  tl_cache[t.impl()] = CacheEntry{t, c, t.version(), with_grad};
  return c;
}

}  // namespace

// The casts of one call, the device from its first defined input. policy_of(DeviceType) gives the
// list the op is on there; get(i) reads input i.
struct CastMaker {
  template <class Policy, class Get>
  static Cast make(OpId op, Policy policy_of, size_t n, Get get) {
    Cast c;
    const Tensor* first = nullptr;
    for (size_t i = 0; i < n && !first; ++i)
      if (get(i).defined()) first = &get(i);
    if (!first) return c;
    const DeviceType device = first->device().type;
    if (!(tl_active & (1u << static_cast<int>(device)))) return c;
    const CastPolicy policy = policy_of(device);
    if (policy == CastPolicy::none) return c;
    NABLA_CHECK(ValueError, policy != CastPolicy::banned, op_name(op), ": unsafe to autocast on ", first->device(),
                " (its float16 gradients overflow); use binary_cross_entropy_with_logits (nn::BCEWithLogitsLoss), "
                "which is safe, or run it outside the autocast region");
    DType to = tl_state.dev[static_cast<int>(device)].dtype;
    if (policy == CastPolicy::fp32) {
      to = DType::f32;
    } else if (policy == CastPolicy::promote) {
      std::optional<DType> widest;
      for (size_t i = 0; i < n; ++i)
        if (eligible(get(i), device)) widest = widest ? promote_types(*widest, get(i).dtype()) : get(i).dtype();
      if (!widest) return c;
      to = *widest;
    }
    // Autocast is suspended from here: the casts and the op itself run without it.
    c.saved_ = tl_active;
    tl_active = 0;
    c.engaged_ = true;
    c.t_.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      const Tensor& t = get(i);
      c.t_.push_back(eligible(t, device) ? cast_to(t, to, policy == CastPolicy::lower) : t);
    }
    return c;
  }
};

namespace {
// The lists `op` is on, for the device of its inputs.
auto listed(OpId op) {
  return [op](DeviceType d) { return autocast_policy(op, lists_for(d)); };
}
auto pointees(std::initializer_list<const Tensor*> inputs) {
  return [p = inputs.begin()](size_t i) -> const Tensor& { return *p[i]; };
}
}  // namespace

Cast cast_inputs(OpId op, std::initializer_list<const Tensor*> inputs) {
  return CastMaker::make(op, listed(op), inputs.size(), pointees(inputs));
}

Cast cast_inputs_as(OpId op, CastPolicy cpu, CastPolicy cuda, std::initializer_list<const Tensor*> inputs) {
  auto policy = [=](DeviceType d) { return lists_for(d) == DeviceType::cuda ? cuda : cpu; };
  return CastMaker::make(op, policy, inputs.size(), pointees(inputs));
}

Cast cast_list(OpId op, const std::vector<Tensor>& inputs) {
  return CastMaker::make(op, listed(op), inputs.size(), [&](size_t i) -> const Tensor& { return inputs[i]; });
}

namespace {
void apply(const State& s) {
  for (int d = 0; d < kNumDeviceTypes; ++d) {
    tl_state.dev[d].enabled = (s.enabled >> d) & 1u;
    tl_state.dev[d].dtype = s.dtype[d];
  }
  tl_state.cache = s.cache;
}
}  // namespace

State capture() {
  State s;
  s.enabled = enabled_mask();
  for (int d = 0; d < kNumDeviceTypes; ++d) s.dtype[d] = tl_state.dev[d].dtype;
  s.cache = tl_state.cache;
  return s;
}

Restore::Restore(const State& s) : saved_(capture()), saved_active_(tl_active) {
  apply(s);
  ++tl_state.nesting;
  tl_active = enabled_mask();
}

Restore::~Restore() {
  apply(saved_);
  if (--tl_state.nesting == 0) clear_autocast_cache();
  tl_active = saved_active_;
}
}  // namespace autocast_internal

}  // namespace nabla
