// The device abstraction. An op's front-end (core/*.cpp) checks its arguments, allocates the output
// and calls one kernel of the Backend for the tensors' device: one indirect call per op, never per
// element. Every kernel is one line of NABLA_KERNELS below (its name, return type and parameters);
// a Backend is a table of function pointers generated from that list (core/device_table.h), which
// the CPU backend (core/cpu/backend.cpp) and the CUDA backend (cuda/backend.cpp) fill from the same
// list: every kernel, or for CUDA those not on its list of what it lacks on purpose (NABLA_CUDA_LACKS
// in cuda/kernels.h, each with the reason). A kernel without a CUDA function that is not on that
// list is a compile error of cuda/backend.cpp. Calling an entry a device lacks throws NotImplemented
// naming the kernel and the device (or answers false, for the optional fused kernels).
//
// Adding a kernel: a line here, the CPU function of that name and signature in core/cpu/ (its
// declaration is generated in core/cpu/kernels.h), the CUDA one declared in cuda/kernels.h (or a
// NABLA_CUDA_LACKS line with the reason CUDA goes without it).
//
// Kernel conventions: outputs are allocated by the caller with the right shape and dtype (usually
// contiguous); inputs may have any strides (broadcast dims have stride 0). Binary and ternary
// kernels receive inputs already expanded to the output's shape and converted to one dtype.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "allocator.h"
#include "device_table.h"
#include "elementwise_ops.h"
#include "reduce_dims.h"
#include "tensor.h"

namespace nabla {

class Generator;
struct ConvParams;
struct Pool2dParams;
struct AttentionParams;

enum class ScanOp : uint8_t { cumsum, cumprod };
enum class RandomOp : uint8_t { uniform, normal, bernoulli };
// The three discrete Fourier transforms of the fft kernel: complex to complex, real to the first
// n / 2 + 1 complex coefficients (the rest are their conjugates), and back.
enum class FftKind : uint8_t { c2c, r2c, c2r };

// Every kernel: X(name, return type, (parameters), when missing). `when missing` is `raise`
// (NotImplemented) or `no` (the entry answers false: the caller has a composed fallback).
#define NABLA_KERNELS(X)                                                                                               \
  /* dst = src, same shape, any strides, converting dtype; for CUDA either side may be on the host */                  \
  X(copy, void, (const Tensor& src, const Tensor& dst, bool non_blocking), raise)                                      \
  X(fill, void, (const Tensor& dst, Scalar value), raise)                                                              \
  /* out = op(x); x already has out's compute dtype unless op is a bool predicate */                                   \
  X(unary, void, (UnaryOp op, const Tensor& x, const Tensor& out, double p0, double p1), raise)                        \
  /* out = op(a, b); a and b are expanded to out's shape and share one dtype */                                        \
  X(binary, void, (BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out, Scalar alpha), raise)             \
  /* out = cond ? a : b; all expanded to out's shape, a and b in out's dtype, cond bool */                             \
  X(where, void, (const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out), raise)                     \
  /* out (x's shape with `dims` reduced to size 1) = reduction of x over dims; float sums accumulate */                \
  /* in at least double precision per output element block */                                                          \
  X(reduce, void, (ReduceOp op, const Tensor& x, IntArrayRef dims, const Tensor& out), raise)                          \
  /* max/min over one dim with the index of the first extreme element (keepdim shapes) */                              \
  X(arg_reduce, void, (ReduceOp op, const Tensor& x, int64_t dim, const Tensor& values, const Tensor& indices), raise) \
  X(scan, void, (ScanOp op, const Tensor& x, int64_t dim, const Tensor& out), raise)                                   \
  X(sort, void, (const Tensor& x, int64_t dim, bool descending, const Tensor& values, const Tensor& indices), raise)   \
  X(topk, void, (const Tensor& x, int64_t k, int64_t dim, bool largest, const Tensor& values, const Tensor& indices),  \
    raise)                                                                                                             \
  /* numerically stable softmax (or log-softmax) along dim, and its backward given y = output */                       \
  X(softmax, void, (const Tensor& x, int64_t dim, bool log, const Tensor& out), raise)                                 \
  X(softmax_backward, void, (const Tensor& grad, const Tensor& y, int64_t dim, bool log, const Tensor& out), raise)    \
  /* out = x.index_select(dim, index) (index: 1-D int64, checked in range by the front-end) */                         \
  X(index_select, void, (const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out), raise)                 \
  /* out[.., index[i], ..] += src[.., i, ..] along dim (out is modified in place) */                                   \
  X(index_add, void, (const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src), raise)                  \
  X(gather, void, (const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out), raise)                       \
  /* in place on `out`: out[index] = src (accumulate=false) or += src; src may be expanded */                          \
  X(scatter, void, (const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src, bool accumulate), raise)   \
  /* indices (n, ndim) of the nonzero elements of x */                                                                 \
  X(nonzero, Tensor, (const Tensor& x), raise)                                                                         \
  X(random, void, (RandomOp op, const Tensor& out, double p0, double p1, Generator& gen), raise)                       \
  /* unnormalized DFT along `dim` of contiguous x into contiguous out (complex64/128 or their float */                 \
  /* parts): c2c (same shape; forward: exp(-2 pi i jk / n), else +), r2c (out's dim n / 2 + 1), c2r */                 \
  /* (out's dim n: x's dim holds n / 2 + 1 coefficients, imaginary parts of the self-conjugate ones ignored) */        \
  X(fft, void, (const Tensor& x, int64_t dim, FftKind kind, bool forward, const Tensor& out), raise)                   \
  /* integers uniformly in [low, high) */                                                                              \
  X(random_int, void, (const Tensor& out, int64_t low, int64_t high, Generator& gen), raise)                           \
  /* out = alpha * a @ b + beta * out for 3-D (batch, m, k) x (batch, k, n) -> (batch, m, n); any */                   \
  /* strides (stride-0 batch dims allowed in a and b); beta == 0 ignores out's old contents, even NaN */               \
  X(matmul, void, (const Tensor& a, const Tensor& b, const Tensor& out, double alpha, double beta), raise)             \
  /* convolution over p.ndim spatial dims: x (N, C_in, *spatial), weight (C_out, C_in / groups, *k) */                 \
  X(conv, void, (const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvParams& p, const Tensor& out),   \
    raise)                                                                                                             \
  X(conv_input_grad, void, (const Tensor& grad_out, const Tensor& weight, const ConvParams& p, const Tensor& grad_in), \
    raise)                                                                                                             \
  X(conv_weight_grad, void, (const Tensor& x, const Tensor& grad_out, const ConvParams& p, const Tensor& grad_weight), \
    raise)                                                                                                             \
  /* indices (int64) hold each max's flat position within its (H, W) input plane */                                    \
  X(max_pool2d, void, (const Tensor& x, const Pool2dParams& p, const Tensor& out, const Tensor& indices), raise)       \
  X(max_pool2d_backward, void, (const Tensor& grad_out, const Tensor& indices, const Tensor& grad_in), raise)          \
  X(avg_pool2d, void, (const Tensor& x, const Pool2dParams& p, const Tensor& out), raise)                              \
  X(avg_pool2d_backward, void, (const Tensor& grad_out, const Pool2dParams& p, const Tensor& grad_in), raise)          \
  /* Fused batch normalization of x (N, C, ...) over every dim but 1, with per-channel weight and */                   \
  /* bias (either may be undefined: 1 and 0). training: normalizes with the batch mean and biased */                   \
  /* variance, writes them as save_mean and save_invstd = 1 / sqrt(var + eps) (C), and updates */                      \
  /* running_mean/running_var in place when defined (running = (1 - momentum) * running + momentum */                  \
  /* * batch statistic, with the unbiased variance); otherwise normalizes with the running */                          \
  /* statistics. Only where has_fused_batch_norm says so (for this input, mode and eps): elsewhere the */              \
  /* front-end composes batch norm */                                                                                  \
  X(has_fused_batch_norm, bool, (const Tensor& x, bool training, double eps), no)                                      \
  X(batch_norm, void,                                                                                                  \
    (const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean, const Tensor& running_var, \
     bool training, double momentum, double eps, const Tensor& out, const Tensor& save_mean,                           \
     const Tensor& save_invstd),                                                                                       \
    raise)                                                                                                             \
  /* training-mode gradients from the saved statistics; grad_weight and grad_bias may be undefined */                  \
  X(batch_norm_backward, void,                                                                                         \
    (const Tensor& grad_out, const Tensor& x, const Tensor& weight, const Tensor& save_mean,                           \
     const Tensor& save_invstd, double eps, const Tensor& grad_x, const Tensor& grad_weight, const Tensor& grad_bias), \
    raise)                                                                                                             \
  /* Fused attention (flash_attention in core/ops.h): q (B, Hq, L, E), k (B, Hkv, S, E), v (B, Hkv, S, Ev), last */    \
  /* dims contiguous, the others any strides; bias undefined or (B, Hq, L, S) any strides, in q's compute dtype; */    \
  /* out (B, Hq, L, Ev) contiguous in q's dtype, lse (B, Hq, L) contiguous float32 (float64 for float64) */            \
  X(has_flash_attention, bool, (const Tensor& q), no)                                                                  \
  X(flash_attention, void,                                                                                             \
    (const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias, const AttentionParams& p,                  \
     const Tensor& out, const Tensor& lse),                                                                            \
    raise)                                                                                                             \
  /* grad_q, grad_k, grad_v contiguous, shaped as q, k and v, in their dtype */                                        \
  X(flash_attention_backward, void,                                                                                    \
    (const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias, const Tensor& out, \
     const Tensor& lse, const AttentionParams& p, const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v),   \
    raise)

// A device's kernels: one entry per NABLA_KERNELS line (backend.unary(op, x, out, p0, p1), ...),
// filled by the device's backend.
struct Backend {
  explicit Backend(const char* device_name);
  const char* name() const { return name_; }
  Allocator& allocator(Device device) const { return allocator_(device); }

  Allocator& (*allocator_)(Device device) = nullptr;
  NABLA_DEVICE_ENTRIES(NABLA_KERNELS)

 private:
  const char* name_;
};

// The backend that owns `device`'s memory and kernels; throws DeviceError when it is not there
// (e.g. a CUDA tensor requested from a build without CUDA or a machine without a GPU).
Backend& backend_for(Device device);
// Called by backends at load time.
void register_backend(DeviceType type, Backend* backend);
// Whether the backend of `type` is there. For CUDA this first loads the backend where it is a
// plugin (internal::load_cuda_backend): false on a machine without an NVIDIA driver.
bool has_backend(DeviceType type);

namespace internal {
// In a shared build the CUDA backend is a plugin, libnabla_cuda.so next to libnabla.so (or the file
// NABLA_CUDA_PLUGIN names), so that a program that never uses CUDA maps none of CUDA's libraries
// (cuBLASLt alone: 200 MB resident and most of a second to load) and one build runs on machines
// with and without them. It is loaded once, on the first CUDA query (is_available, a CUDA tensor,
// pinned memory), and only where an NVIDIA driver (libcuda.so.1) is installed; skip_driver_check
// loads it without one (tests). Returns whether the CUDA backend is registered (a static build
// links it in). cuda_backend_missing_reason() says why it is not, in words.
bool load_cuda_backend(bool skip_driver_check = false);
std::string cuda_backend_missing_reason();
// The Backend registered for `type` (nullptr if none), without backend_for's checks that a device
// is there: for tests of the table on machines without a GPU.
Backend* registered_backend(DeviceType type);
}  // namespace internal

}  // namespace nabla
