// Complex numbers and spectral transforms, as PyTorch spells them: view_as_real / view_as_complex,
// real / imag / conj / angle / polar / complex, the window functions, torch.fft's functions in
// nabla::fft, and stft / istft. Complex tensors (complex64, complex128) hold (real, imaginary)
// pairs of float32 / float64 next to each other, as std::complex does.
//
//   Tensor x = randn({4, 1000});
//   Tensor X = fft::rfft(x);                                   // complex64 (4, 501)
//   Tensor power = X.abs().square();                           // float32 (4, 501)
//   Tensor S = stft(x, 400, {.hop_length = 160, .window = hann_window(400)});  // (4, 201, 7)
//
// What complex tensors can do: be created (zeros/ones/full/empty with a complex dtype, `to`,
// `complex`, `polar`, view_as_complex), be viewed (every view op, view_as_real), be copied and
// converted (complex to real keeps the real part), take part in add/sub/mul/div/pow and eq/ne
// with real or complex operands (type promotion as PyTorch: complex64 with float64 is
// complex128), neg/abs/square/reciprocal/exp/log/sqrt/sin/cos/rsqrt/sgn-like sign and the
// isnan/isinf/isfinite predicates, sum/mean, matmul/mm/bmm/mv/dot (four real products of the
// parts), the FFTs, printing and the tensor file formats.
// Their gradients follow PyTorch's convention (the conjugate Wirtinger derivative: for a real
// loss L of z = x + iy, z.grad = dL/dx + i dL/dy).
//
// Deliberate differences from PyTorch:
// - conj(z) is a new tensor, not a lazy view with a conjugate bit (is_conj() does not exist).
// - view_as_real / view_as_complex / real / imag views share memory with their base, but in-place
//   writes into them (or into the base while the view is used afterwards) are refused under
//   autograd (NotImplemented); without autograd they write through as in PyTorch.
// - There is no complex32: complex ops on float16/bfloat16 parts compute in complex64.
// - The FFTs run on the CPU (nabla's own kernels: mixed radix 2/3/4/5/7, any other length by
//   Bluestein's algorithm); on CUDA they throw NotImplemented until cuFFT is wired in.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "tensor.h"

namespace nabla {

// ---- complex tensors ----------------------------------------------------------------------------
// z complex (...) -> float (..., 2) sharing z's memory: [..., 0] the real parts, [..., 1] the
// imaginary parts.
Tensor view_as_real(const Tensor& z);
// x float32/float64 (..., 2) with a last stride of 1 (and even other strides and offset) -> complex
// (...), sharing x's memory.
Tensor view_as_complex(const Tensor& x);
// The real / imaginary parts of a complex tensor as float views; real(x) of a real tensor is x,
// imag(x) of one throws (as PyTorch).
Tensor real(const Tensor& z);
Tensor imag(const Tensor& z);
// The complex conjugate (a new tensor); a real tensor's conj is itself.
Tensor conj(const Tensor& z);
// The argument atan2(imag, real) in (-pi, pi]; for a real x: 0 where x >= 0, pi where x < 0, NaN
// where x is NaN (float32 for integer inputs). Its gradient is zero for real inputs.
Tensor angle(const Tensor& z);
// abs * (cos(angle) + i sin(angle)); abs and angle float32 or float64 of one dtype, broadcast.
Tensor polar(const Tensor& abs, const Tensor& angle);
// real + i imag; both float32 or float64 of one dtype, broadcast.
Tensor complex(const Tensor& real, const Tensor& imag);

// ---- window functions (torch.hann_window, ...) ----------------------------------------------------
// A window of `n` points; periodic = true drops the last point of the symmetric window of n + 1
// points (what a spectrogram wants). The default dtype is float32.
Tensor hann_window(int64_t n, bool periodic = true, const TensorOptions& options = {});
Tensor hamming_window(int64_t n, bool periodic = true, double alpha = 0.54, double beta = 0.46,
                      const TensorOptions& options = {});
Tensor blackman_window(int64_t n, bool periodic = true, const TensorOptions& options = {});
Tensor bartlett_window(int64_t n, bool periodic = true, const TensorOptions& options = {});
Tensor kaiser_window(int64_t n, bool periodic = true, double beta = 12.0, const TensorOptions& options = {});

// ---- the FFT primitives (what nabla::fft's functions are made of, as ATen's _fft_*) -----------
// Each transforms the wrapped `dims` of x (in order) and scales by `norm`: 0 none, 1 by 1/sqrt(n),
// 2 by 1/n (n the product of the transformed lengths).
Tensor fft_c2c(const Tensor& x, IntArrayRef dims, int64_t norm, bool forward);
// Real x: the last of `dims` keeps n / 2 + 1 coefficients when onesided, else all n.
Tensor fft_r2c(const Tensor& x, IntArrayRef dims, int64_t norm, bool onesided);
// Complex x whose last dim of `dims` holds the first last_dim_size / 2 + 1 coefficients of a
// Hermitian signal: the real signal, last_dim_size long along that dim.
Tensor fft_c2r(const Tensor& x, IntArrayRef dims, int64_t norm, int64_t last_dim_size);

namespace fft {
// torch.fft, by the same names and arguments. `n` / `s` crop or zero-pad the input along the
// transformed dims first (for the inverse real transforms: the output's lengths); `norm` is
// "backward" (the default: the forward transform unscaled, the inverse by 1/n), "ortho" (both by
// 1/sqrt(n)) or "forward" (the forward by 1/n). Real inputs to fft/ifft/hfft are promoted to
// complex; integer inputs to float32. An empty `s` / `dim` of the n-dimensional forms means "not
// given" (all dims, or the last len(s) dims), as None in Python.
using Norm = std::optional<std::string_view>;
Tensor fft(const Tensor& x, std::optional<int64_t> n = std::nullopt, int64_t dim = -1, Norm norm = std::nullopt);
Tensor ifft(const Tensor& x, std::optional<int64_t> n = std::nullopt, int64_t dim = -1, Norm norm = std::nullopt);
Tensor rfft(const Tensor& x, std::optional<int64_t> n = std::nullopt, int64_t dim = -1, Norm norm = std::nullopt);
Tensor irfft(const Tensor& x, std::optional<int64_t> n = std::nullopt, int64_t dim = -1, Norm norm = std::nullopt);
// The FFT of a Hermitian signal given by its first half (real output), and the inverse.
Tensor hfft(const Tensor& x, std::optional<int64_t> n = std::nullopt, int64_t dim = -1, Norm norm = std::nullopt);
Tensor ihfft(const Tensor& x, std::optional<int64_t> n = std::nullopt, int64_t dim = -1, Norm norm = std::nullopt);

Tensor fft2(const Tensor& x, std::vector<int64_t> s = {}, std::vector<int64_t> dim = {-2, -1},
            Norm norm = std::nullopt);
Tensor ifft2(const Tensor& x, std::vector<int64_t> s = {}, std::vector<int64_t> dim = {-2, -1},
             Norm norm = std::nullopt);
Tensor rfft2(const Tensor& x, std::vector<int64_t> s = {}, std::vector<int64_t> dim = {-2, -1},
             Norm norm = std::nullopt);
Tensor irfft2(const Tensor& x, std::vector<int64_t> s = {}, std::vector<int64_t> dim = {-2, -1},
              Norm norm = std::nullopt);
Tensor fftn(const Tensor& x, std::vector<int64_t> s = {}, std::vector<int64_t> dim = {}, Norm norm = std::nullopt);
Tensor ifftn(const Tensor& x, std::vector<int64_t> s = {}, std::vector<int64_t> dim = {}, Norm norm = std::nullopt);
Tensor rfftn(const Tensor& x, std::vector<int64_t> s = {}, std::vector<int64_t> dim = {}, Norm norm = std::nullopt);
Tensor irfftn(const Tensor& x, std::vector<int64_t> s = {}, std::vector<int64_t> dim = {}, Norm norm = std::nullopt);

// The sample frequencies of an n-point FFT with sample spacing d: [0, 1, ..., -1] / (d * n), and
// the n / 2 + 1 non-negative ones of rfft. float32 unless options say otherwise.
Tensor fftfreq(int64_t n, double d = 1.0, const TensorOptions& options = {});
Tensor rfftfreq(int64_t n, double d = 1.0, const TensorOptions& options = {});
// Moves the zero frequency to the centre (a roll by n / 2 along each of dims; all dims if empty),
// and back.
Tensor fftshift(const Tensor& x, std::vector<int64_t> dim = {});
Tensor ifftshift(const Tensor& x, std::vector<int64_t> dim = {});
}  // namespace fft

// ---- short-time Fourier transforms (torch.stft / torch.istft) -------------------------------------
struct StftOptions {
  std::optional<int64_t> hop_length;      // default n_fft / 4
  std::optional<int64_t> win_length;      // default n_fft; a shorter window is zero-padded to n_fft, centred
  Tensor window;                          // default: ones (a rectangular window) of win_length
  bool center = true;                     // pad n_fft / 2 on both sides so that frame t is centred at t * hop
  std::string_view pad_mode = "reflect";  // "reflect", "constant", "replicate" or "circular"
  bool normalized = false;                // multiply by 1 / sqrt(n_fft)
  std::optional<bool> onesided;           // default true for real input and window, false otherwise
  bool return_complex = true;             // false: the real view (..., 2), which PyTorch deprecates
};
// x (L) or (B, L) -> (n_freq, n_frames) or (B, n_freq, n_frames), complex; n_freq = n_fft / 2 + 1
// when onesided, else n_fft; n_frames = 1 + (L' - n_fft) / hop with L' the (padded) length.
Tensor stft(const Tensor& x, int64_t n_fft, const StftOptions& options = {});

struct IstftOptions {
  std::optional<int64_t> hop_length;
  std::optional<int64_t> win_length;
  Tensor window;
  bool center = true;
  bool normalized = false;
  std::optional<bool> onesided;   // default: whether the input has n_fft / 2 + 1 frequencies
  std::optional<int64_t> length;  // trim or zero-pad the output to this length
  bool return_complex = false;
};
// The inverse by overlap-add, with the window's squared sum normalized out; throws where that sum
// is (nearly) zero inside the output, as PyTorch (the window must satisfy NOLA).
Tensor istft(const Tensor& x, int64_t n_fft, const IstftOptions& options = {});

}  // namespace nabla
