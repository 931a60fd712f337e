// Automatic mixed precision: inside an autocast region, the ops on the device's lower-precision list
// run in float16/bfloat16, the ops on its float32 list run in float32, and the ops on its promote
// list run in the widest floating dtype of their inputs; every other op runs in its inputs' dtype.
// As PyTorch 2.x's `torch.autocast` (aten/src/ATen/autocast_mode.cpp):
//
//   with torch.autocast("cpu", dtype=torch.bfloat16):     auto guard = nabla::autocast(kCPU, kBFloat16);
//       loss = F.cross_entropy(model(x), y)              Tensor loss = F::cross_entropy(model->forward(x), y);
//   loss.backward()  # outside the region                (guard leaves scope)  loss.backward();
//
// The lists (autocast_policy below, one switch over core/op_schema.h's OpIds):
//   CPU  lower:   conv1d conv2d conv3d conv_transpose1d/2d/3d mm bmm matmul addmm baddbmm linear prelu
//                 scaled_dot_product_attention flash_attention rnn lstm gru
//        float32: the losses (cross_entropy nll_loss mse_loss l1_loss smooth_l1_loss huber_loss kl_div
//                 binary_cross_entropy(_with_logits) margin_ranking hinge_embedding cosine_embedding
//                 triplet_margin soft_margin multi_margin poisson_nll ctc_loss), the linear algebra
//                 (inv solve cholesky qr svd svdvals eigh eigvalsh lstsq trace), grid_sample, prod,
//                 quantile, nanquantile, max_unpool1d/2d, pad in 'reflect' mode over 1-2 dims and in
//                 'replicate' mode, the FFTs (fft_c2c fft_r2c fft_c2r stft istft), view_as_complex, polar
//        promote: cat stack
//   CUDA lower:   as the CPU's, and mv einsum
//        float32: exp expm1 log log10 log2 log1p reciprocal rsqrt sinh cosh tan acos asin erfinv pow
//                 softplus, layer_norm group_norm, softmax log_softmax, sum prod cumsum cumprod
//                 logsumexp, norm linalg_vector_norm linalg_matrix_norm, cosine_similarity, interpolate,
//                 the losses as on the CPU (binary_cross_entropy excepted)
//        promote: addcmul addcdiv atan2 bilinear linalg_cross dot grid_sample index_put tensordot
//                 scatter_add
//        banned:  binary_cross_entropy (an error naming binary_cross_entropy_with_logits, as PyTorch)
//
// Rules, as PyTorch's:
// - Only floating tensors on the region's device are cast; float64 tensors never are (and promote
//   ignores them).
// - An op on a list runs with autocast off: the ops it is made of are not cast again.
// - With cache_enabled, the lower-precision cast of a float32 leaf tensor that requires grad (a
//   weight) is made once per region and reused; the cache is emptied when the outermost region ends.
//   (nabla also re-casts a weight modified in place since its cast, where PyTorch reuses the stale
//   cast, and keeps one cache per thread, where PyTorch's is shared.)
// - The state is per thread: a region opened on one thread does not apply to others.
// - Deliberate difference: autocast is off while the autograd engine runs (PyTorch keeps the state
//   of the thread that called backward). Backward formulas therefore run in the dtypes of the forward,
//   the outcome PyTorch recommends ("backward passes under autocast are not recommended").
//   Activation checkpointing recomputes its segment under the autocast state of the forward.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "device.h"
#include "dtype.h"
#include "op_schema.h"
#include "small_vector.h"
#include "tensor.h"

namespace nabla {

enum class CastPolicy : uint8_t { none, lower, fp32, promote, banned };
const char* cast_policy_name(CastPolicy p);  // "none", "lower", "fp32", "promote", "banned"

// The list `op` is on for `device` (CastPolicy::none: on no list).
CastPolicy autocast_policy(OpId op, DeviceType device);

// An open autocast region; leaving its scope restores the previous state of the device.
class [[nodiscard]] AutocastGuard {
 public:
  AutocastGuard(AutocastGuard&& o) noexcept;
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;
  AutocastGuard& operator=(AutocastGuard&&) = delete;
  ~AutocastGuard();

 private:
  friend AutocastGuard autocast(Device device, DType dtype, bool enabled, bool cache_enabled);
  AutocastGuard(DeviceType device, bool enabled, DType dtype, bool cache);
  DeviceType device_;
  bool prev_enabled_ = false, prev_cache_ = true, owns_ = false;
  DType prev_dtype_ = DType::bf16;
};

// Opens a region on `device`'s type (kCPU, kCUDA) computing in `dtype` (kBFloat16 or kHalf on
// either). enabled = false opens a region with autocast off (nested inside an enabled one, it turns
// autocast off until it ends). Throws ValueError for another dtype or device.
AutocastGuard autocast(Device device, DType dtype, bool enabled = true, bool cache_enabled = true);
// The device's default dtype: bfloat16 on the CPU, float16 on CUDA (as PyTorch).
AutocastGuard autocast(Device device, bool enabled = true);

bool is_autocast_enabled(DeviceType device);
DType autocast_dtype(DeviceType device);
bool is_autocast_cache_enabled();
// Drops the cached weight casts of this thread (done when the outermost region ends).
void clear_autocast_cache();

namespace autocast_internal {
// Bit per device type: autocast is on there and not suspended. Zero outside regions.
extern thread_local uint8_t tl_active;
inline bool active() { return tl_active != 0; }

// Turns autocast off on this thread for its lifetime (the autograd engine, an op on a list).
class Suspend {
 public:
  Suspend() : saved_(tl_active) { tl_active = 0; }
  Suspend(const Suspend&) = delete;
  Suspend& operator=(const Suspend&) = delete;
  ~Suspend() { tl_active = saved_; }

 private:
  uint8_t saved_;
};

// The inputs of one op call, cast by its policy, with autocast suspended while the object lives.
// False (and nothing cast or suspended) when autocast is off for the inputs' device or the op is
// on none of its lists.
class Cast {
 public:
  Cast() = default;
  Cast(Cast&& o) noexcept : t_(std::move(o.t_)), engaged_(o.engaged_), saved_(o.saved_) { o.engaged_ = false; }
  Cast(const Cast&) = delete;
  ~Cast() {
    if (engaged_) tl_active = saved_;
  }
  explicit operator bool() const { return engaged_; }
  const Tensor& operator[](size_t i) const { return t_[i]; }
  const std::vector<Tensor>& list() const { return t_; }

 private:
  friend struct CastMaker;  // core/autocast.cpp
  std::vector<Tensor> t_;
  bool engaged_ = false;
  uint8_t saved_ = 0;
};
Cast cast_inputs(OpId op, std::initializer_list<const Tensor*> inputs);
Cast cast_list(OpId op, const std::vector<Tensor>& inputs);
// For an op whose list depends on its arguments (pad: its reflect and replicate modes are on the
// CPU's float32 list, its other modes on none): the policy for each device given by the caller.
Cast cast_inputs_as(OpId op, CastPolicy cpu, CastPolicy cuda, std::initializer_list<const Tensor*> inputs);

// In a front-end:  if (auto ac = autocast_internal::cast<OpId::mm>(a, b)) [[unlikely]] return mm(ac[0], ac[1]);
template <OpId Op, class... T>
Cast cast(const T&... inputs) {
  if (!active()) [[likely]]
    return {};
  return cast_inputs(Op, {&inputs...});
}
template <OpId Op>
Cast cast(const std::vector<Tensor>& inputs) {
  if (!active()) [[likely]]
    return {};
  return cast_list(Op, inputs);
}

// Tests only: while it lives, CPU tensors on this thread follow the lists of `lists` (kCUDA: a host
// without a GPU checks that every op on CUDA's lists casts its inputs).
class ListsOf {
 public:
  explicit ListsOf(DeviceType lists);
  ListsOf(const ListsOf&) = delete;
  ListsOf& operator=(const ListsOf&) = delete;
  ~ListsOf();

 private:
  DeviceType saved_;
};

// The whole autocast state of this thread, for activation checkpointing's recomputation.
struct State {
  uint8_t enabled = 0;
  DType dtype[kNumDeviceTypes] = {DType::bf16, DType::f16};
  bool cache = true;
};
State capture();
class Restore {
 public:
  explicit Restore(const State& s);
  Restore(const Restore&) = delete;
  Restore& operator=(const Restore&) = delete;
  ~Restore();

 private:
  State saved_;
  uint8_t saved_active_;
};
}  // namespace autocast_internal

}  // namespace nabla
