// Registry entries for complex tensors and the spectral ops (core/spectral.h). The registry's
// inputs and outputs are real, so a complex input is a float (..., 2) tensor viewed as complex
// (z(x) below, torch.view_as_complex in the twins) and a complex output is returned as its float
// pairs: the gradients the suites check are then PyTorch's complex gradients as pairs.
#include "opinfo.h"

namespace nabla::testing {
namespace {

using I = const Inputs&;

Tensor z(const Tensor& x) { return view_as_complex(x.contiguous()); }
Tensor pairs(const Tensor& c) { return view_as_real(c); }
// The twins' spelling of the same.
const std::string Z0 = "torch.view_as_complex(x[0].contiguous())", Z1 = "torch.view_as_complex(x[1].contiguous())";
std::string R(const std::string& e) { return "torch.view_as_real(" + e + ")"; }

std::vector<Sample> complex_samples() {
  return {{{arg({3, 2})}, "vector"}, {{arg({2, 3, 2})}, "matrix"}, {{arg({2})}, "scalar"}};
}

const char* kCpuOnly = "complex tensors and the FFTs run on the CPU only for now (cuFFT is not wired in)";

std::vector<OpInfo> cpu_only(std::vector<OpInfo> ops) {
  for (OpInfo& op : ops) op.no_cuda = kCpuOnly;
  return ops;
}

static Registrar reg(cpu_only({
    // view_as_complex alone (on autocast's float32 list, unlike view_as_real).
    {.name = "view_as_complex",
     .torch = "torch.view_as_complex(x[0].contiguous()).real * 1",
     .fn = [](I x) { return Outputs{real(view_as_complex(x[0].contiguous())) * 1}; },
     .samples = {{{arg({3, 2})}, "vector"}}},
    {.name = "view_as_real",
     .torch = R("torch.view_as_complex(x[0].contiguous()) * 1"),
     .fn = [](I x) { return Outputs{pairs(z(x[0]) * 1)}; },
     .samples = complex_samples()},
    {.name = "real",
     .ops = {OpId::real, OpId::imag},
     .torch = "(" + Z0 + ".real * 1, " + Z0 + ".imag * 1, x[1].real * 1)",
     .fn =
         [](I x) {
           return Outputs{real(z(x[0])) * 1, imag(z(x[0])) * 1, real(x[1]) * 1};
         },
     .samples = {{{arg({3, 2}), arg({3})}, "vector"}, {{arg({2, 2, 2}), arg({})}, "matrix"}}},
    {.name = "conj",
     .torch = "(" + R(Z0 + ".conj().resolve_conj()") + ", x[1].conj() * 1)",
     .fn =
         [](I x) {
           return Outputs{pairs(conj(z(x[0]))), conj(x[1]) * 1};
         },
     .samples = {{{arg({3, 2}), arg({3})}, "vector"}}},
    // angle of complex values away from the branch cut, and of real values (zero gradient).
    {.name = "angle",
     .torch = "(" + Z0 + ".angle(), x[1].angle())",
     .fn =
         [](I x) {
           return Outputs{angle(z(x[0])), angle(x[1])};
         },
     .samples = {{{arg({4, 2}, 0.2, 1), arg({3}, 0.2, 1)}, "positive"}}},
    {.name = "polar",
     .torch = R("torch.polar(x[0], x[1])"),
     .fn = [](I x) { return Outputs{pairs(polar(x[0], x[1]))}; },
     .samples = {{{arg({3}, 0.5, 2), arg({3}, -3, 3)}, "vector"},
                 {{arg({2, 1}, 0.5, 2), arg({3}, -3, 3)}, "broadcast"}}},
    {.name = "complex",
     .torch = R("torch.complex(x[0], x[1])"),
     .fn = [](I x) { return Outputs{pairs(nabla::complex(x[0], x[1]))}; },
     .samples = {{{arg({3}), arg({3})}, "vector"}, {{arg({2, 1}), arg({3})}, "broadcast"}}},
    // Arithmetic with complex operands: both complex, complex with real (broadcast), real scalars.
    {.name = "complex_arithmetic",
     .ops = {OpId::add, OpId::sub, OpId::mul, OpId::div},
     .torch = "(" + R(Z0 + " + " + Z1) + ", " + R(Z0 + " - 2 * " + Z1) + ", " + R(Z0 + " * " + Z1) + ", " +
              R(Z0 + " / " + Z1) + ", " + R(Z0 + " * x[2]") + ", " + R("x[2] / " + Z0) + ", " + R(Z0 + " * 0.5 - 1") +
              ")",
     .fn =
         [](I x) {
           Tensor a = z(x[0]), b = z(x[1]);
           return Outputs{pairs(a + b),    pairs(a - b * 2), pairs(a * b),      pairs(a / b),
                          pairs(a * x[2]), pairs(x[2] / a),  pairs(a * 0.5 - 1)};
         },
     .samples = {{{arg({3, 2}, 0.3, 1), arg({3, 2}, 0.3, 1), arg({3})}, "vector"},
                 {{arg({2, 3, 2}, 0.3, 1), arg({3, 2}, 0.3, 1), arg({2, 1})}, "broadcast"}}},
    {.name = "complex_unary",
     .ops = {OpId::exp, OpId::log, OpId::sqrt, OpId::abs, OpId::neg, OpId::square, OpId::reciprocal},
     .torch = "(" + R(Z0 + ".exp()") + ", " + R(Z0 + ".log()") + ", " + R(Z0 + ".sqrt()") + ", " + Z0 + ".abs(), " +
              R("-" + Z0) + ", " + R(Z0 + ".square()") + ", " + R(Z0 + ".reciprocal()") + ", " + R(Z0 + ".sin()") +
              ", " + R(Z0 + ".cos()") + ", " + R(Z0 + " ** 2.5") + ", " + R(Z0 + ".sum()") + ", " + R(Z0 + ".mean(0)") +
              ")",
     .fn =
         [](I x) {
           Tensor a = z(x[0]);
           return Outputs{pairs(exp(a)), pairs(log(a)),      pairs(sqrt(a)),       abs(a),
                          pairs(-a),     pairs(a.square()),  pairs(reciprocal(a)), pairs(sin(a)),
                          pairs(cos(a)), pairs(pow(a, 2.5)), pairs(a.sum()),       pairs(a.mean({0}))};
         },
     .samples = {{{arg({3, 2}, 0.2, 1)}, "vector"}, {{arg({2, 2, 2}, 0.2, 1)}, "matrix"}}},
    // ---- torch.fft ----
    {.name = "fft_c2c",
     .torch = "(" + R("torch.fft.fft(" + Z0 + ")") + ", " + R("torch.fft.ifft(" + Z0 + ", n=7, norm='ortho')") + ", " +
              R("torch.fft.fft(x[1], n=4)") + ", " + R("torch.fft.fftn(" + Z0 + ", s=(3, 5))") + ", " +
              R("torch.fft.ifft2(" + Z0 + ", norm='forward')") + ")",
     .fn =
         [](I x) {
           Tensor a = z(x[0]);
           return Outputs{pairs(fft::fft(a)), pairs(fft::ifft(a, 7, -1, "ortho")), pairs(fft::fft(x[1], 4)),
                          pairs(fft::fftn(a, {3, 5})), pairs(fft::ifft2(a, {}, {-2, -1}, "forward"))};
         },
     .samples = {{{arg({2, 5, 2}), arg({2, 3})}, "small"}, {{arg({3, 6, 2}), arg({11})}, "prime"}}},
    {.name = "fft_r2c",
     .torch = "(" + R("torch.fft.rfft(x[0])") + ", " + R("torch.fft.rfft(x[0], n=7, dim=0)") + ", " +
              R("torch.fft.rfft2(x[0], norm='ortho')") + ", " + R("torch.fft.ihfft(x[0]).resolve_conj()") + ", " +
              R("torch.fft.rfftn(x[0], s=(4, 3))") + ")",
     .fn =
         [](I x) {
           return Outputs{pairs(fft::rfft(x[0])), pairs(fft::rfft(x[0], 7, 0)),
                          pairs(fft::rfft2(x[0], {}, {-2, -1}, "ortho")), pairs(fft::ihfft(x[0])),
                          pairs(fft::rfftn(x[0], {4, 3}))};
         },
     .samples = {{{arg({3, 6})}, "even"}, {{arg({4, 5})}, "odd"}, {{arg_t({5, 4})}, "noncontiguous"}}},
    // The inverse real FFTs read only the Hermitian half: the imaginary parts of the zero (and
    // Nyquist) frequency get no gradient, as in PyTorch.
    {.name = "fft_c2r",
     .torch = "(torch.fft.irfft(" + Z0 + "), torch.fft.irfft(" + Z0 + ", n=5), torch.fft.irfft2(" + Z0 +
              ", norm='ortho'), torch.fft.hfft(" + Z0 + ", n=6), torch.fft.irfftn(" + Z0 + ", s=(2, 3)))",
     .fn =
         [](I x) {
           Tensor a = z(x[0]);
           return Outputs{fft::irfft(a), fft::irfft(a, 5), fft::irfft2(a, {}, {-2, -1}, "ortho"), fft::hfft(a, 6),
                          fft::irfftn(a, {2, 3})};
         },
     .samples = {{{arg({3, 4, 2})}, "small"}, {{arg({2, 5, 2})}, "odd"}}},
    {.name = "fftshift",
     .ops = {},
     .torch = "(torch.fft.fftshift(x[0]), torch.fft.ifftshift(x[0], dim=1), " + R("torch.fft.fftshift(" + Z0 + ")") +
              ")",
     .fn =
         [](I x) {
           return Outputs{fft::fftshift(x[0]), fft::ifftshift(x[0], {1}), pairs(fft::fftshift(z(x[0])))};
         },
     .samples = {{{arg({3, 5, 2})}, "3d"}}},
    // ---- windows and sample frequencies (made from nothing: the input only gives the dtype) ----
    {.name = "windows",
     .ops = {OpId::hann_window, OpId::hamming_window, OpId::blackman_window, OpId::bartlett_window,
             OpId::kaiser_window},
     .torch = "(torch.hann_window(5, dtype=x[0].dtype), torch.hamming_window(6, periodic=False, alpha=0.5, "
              "beta=0.4, dtype=x[0].dtype), torch.blackman_window(7, dtype=x[0].dtype), torch.bartlett_window(5, "
              "periodic=False, dtype=x[0].dtype), torch.kaiser_window(6, True, 5.0, dtype=x[0].dtype), "
              "torch.hann_window(1, dtype=x[0].dtype), torch.fft.fftfreq(5, 0.5, dtype=x[0].dtype), "
              "torch.fft.rfftfreq(6, dtype=x[0].dtype))",
     .fn =
         [](I x) {
           const TensorOptions o = dtype(x[0].dtype());
           return Outputs{hann_window(5, true, o),        hamming_window(6, false, 0.5, 0.4, o),
                          blackman_window(7, true, o),    bartlett_window(5, false, o),
                          kaiser_window(6, true, 5.0, o), hann_window(1, true, o),
                          fft::fftfreq(5, 0.5, o),        fft::rfftfreq(6, 1.0, o)};
         },
     .samples = {{{arg({1})}, "dtype"}},
     .differentiable = false},
    // ---- stft / istft ----
    {.name = "stft",
     .torch = "(" +
              R("torch.stft(x[0], 8, hop_length=2, window=torch.hann_window(8, dtype=x[0].dtype), "
                "return_complex=True)") +
              ", " +
              R("torch.stft(x[0], 6, hop_length=3, win_length=4, center=False, normalized=True, onesided=False, "
                "return_complex=True)") +
              ")",
     .fn =
         [](I x) {
           return Outputs{
               pairs(stft(x[0], 8, {.hop_length = 2, .window = hann_window(8, true, dtype(x[0].dtype()))})),
               pairs(stft(x[0], 6,
                          {.hop_length = 3, .win_length = 4, .center = false, .normalized = true, .onesided = false}))};
         },
     .samples = {{{arg({20})}, "signal"}, {{arg({2, 16})}, "batch"}}},
    {.name = "istft",
     .torch = "(torch.istft(" + Z0 + ", 6, hop_length=2, window=torch.hann_window(6, dtype=x[0].dtype)), torch.istft(" +
              Z0 + ", 6, hop_length=3, center=False, length=9))",
     .fn =
         [](I x) {
           Tensor a = z(x[0]);
           return Outputs{istft(a, 6, {.hop_length = 2, .window = hann_window(6, true, dtype(x[0].dtype()))}),
                          istft(a, 6, {.hop_length = 3, .center = false, .length = 9})};
         },
     .samples = {{{arg({4, 5, 2})}, "frames"}, {{arg({2, 4, 4, 2})}, "batch"}}},
}));

}  // namespace
}  // namespace nabla::testing
