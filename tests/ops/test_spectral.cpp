// Complex tensors and the spectral ops beyond the registry's samples: the FFT kernels against a
// float64 DFT over every kind of length (powers of two, mixed radix, primes by Bluestein), the
// real transforms' halving, norms, strided dims, windows against PyTorch's values, stft/istft
// round trips, printing, type promotion, and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <numbers>

#include "tests/common/value_helpers.h"

namespace nabla::testing {
namespace {

using cd = std::complex<double>;

template <class F>
::testing::AssertionResult throws_with(F&& f, const char* fragment) {
  return testing::throws_with<Error>(std::forward<F>(f), {fragment});
}

std::vector<cd> to_vec(const Tensor& c) {
  Tensor r = view_as_real(c.to(kComplex128).contiguous()).contiguous();
  const double* p = r.data_ptr<double>();
  std::vector<cd> out(static_cast<size_t>(c.numel()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = {p[2 * i], p[2 * i + 1]};
  return out;
}

// The DFT by its definition, in float64 (angles reduced exactly).
std::vector<cd> dft(const std::vector<cd>& x, bool inverse) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<cd> y(x.size());
  for (int64_t k = 0; k < n; ++k) {
    cd acc = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double a =
          (inverse ? 2 : -2) * std::numbers::pi * static_cast<double>((j * k) % n) / static_cast<double>(n);
      acc += x[j] * cd(std::cos(a), std::sin(a));
    }
    y[k] = acc;
  }
  return y;
}

double max_rel_err(const std::vector<cd>& a, const std::vector<cd>& b) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return err / std::max(scale, 1e-300);
}

Tensor random_complex(int64_t n, DType dt, uint64_t seed = 1) {
  manual_seed(seed);
  return view_as_complex(randn({n, 2}, dtype(to_real_dtype(dt))));
}

// Lengths of every kind: powers of 2 and 4, 3/5/7 and generic primes up to 31 (direct stages),
// primes and products with a prime factor above 31 (Bluestein), and 1.
const int64_t kLengths[] = {1,   2,   3,   4,   5,   6,   7,    8,    9,      11,   12,     13,   15,
                            16,  17,  25,  27,  29,  31,  32,   37,   49,     60,   64,     97,   100,
                            121, 128, 243, 256, 343, 512, 1000, 1024, 2 * 37, 4097, 6 * 53, 10007};

TEST(Fft, ComplexMatchesTheDefinitionForEveryKindOfLength) {
  for (int64_t n : kLengths) {
    Tensor x = random_complex(n, kComplex128, static_cast<uint64_t>(n));
    std::vector<cd> xv = to_vec(x);
    if (n <= 4097) {
      EXPECT_LT(max_rel_err(to_vec(fft::fft(x)), dft(xv, false)), 1e-12) << "fft n=" << n;
      EXPECT_LT(max_rel_err(to_vec(fft::ifft(x, std::nullopt, -1, "forward")), dft(xv, true)), 1e-12) << "ifft n=" << n;
    }
    // Round trips, in both precisions.
    EXPECT_LT(max_rel_err(to_vec(fft::ifft(fft::fft(x))), xv), 1e-12) << "round trip n=" << n;
    Tensor xf = x.to(kComplex64);
    EXPECT_LT(max_rel_err(to_vec(fft::fft(xf)), to_vec(fft::fft(x))), 2e-6 * std::max(1.0, std::log2(n)))
        << "c64 n=" << n;
  }
}

TEST(Fft, RealTransformsMatchTheComplexOnes) {
  for (int64_t n : kLengths) {
    manual_seed(static_cast<uint64_t>(n));
    Tensor x = randn({2, n}, kFloat64);
    Tensor full = fft::fft(x);
    Tensor half = fft::rfft(x);
    ASSERT_EQ(half.sizes(), (Shape{2, n / 2 + 1})) << n;
    EXPECT_LT(max_rel_err(to_vec(half), to_vec(full.narrow(1, 0, n / 2 + 1))), 1e-12) << "rfft n=" << n;
    Tensor back = fft::irfft(half, n);
    EXPECT_TRUE(allclose(back, x, 1e-10, 1e-10)) << "irfft n=" << n;
    // float32: the halved path against float64.
    EXPECT_LT(max_rel_err(to_vec(fft::rfft(x.to(kFloat32))), to_vec(half)), 2e-6 * std::max(1.0, std::log2(n)))
        << "rfft float32 n=" << n;
  }
}

TEST(Fft, TransformsAnyDimOfABatch) {
  manual_seed(3);
  Tensor x = view_as_complex(randn({6, 5, 7, 2}, kFloat64));
  // dim 0 (inner stride 35) and dim 1 (inner stride 7) against the same transform on the last dim.
  Tensor a = fft::fft(x, std::nullopt, 0);
  Tensor b = fft::fft(x.movedim(0, -1)).movedim(-1, 0);
  EXPECT_LT(max_rel_err(to_vec(a), to_vec(b)), 1e-13);
  Tensor c = fft::fftn(x);
  Tensor d = fft::fft(fft::fft(fft::fft(x, std::nullopt, 0), std::nullopt, 1), std::nullopt, 2);
  EXPECT_LT(max_rel_err(to_vec(c), to_vec(d)), 1e-13);
  Tensor r = randn({4, 6, 9}, kFloat64);
  EXPECT_LT(max_rel_err(to_vec(fft::rfftn(r)), to_vec(fft::fftn(r).narrow(2, 0, 5))), 1e-13);
  EXPECT_TRUE(allclose(fft::irfftn(fft::rfftn(r), {4, 6, 9}), r, 1e-12, 1e-12));
  EXPECT_TRUE(allclose(fft::irfft2(fft::rfft2(r), {6, 9}), r, 1e-12, 1e-12));
  EXPECT_EQ(fft::irfft2(fft::rfft2(r)).sizes(), (Shape{4, 6, 8}));  // odd lengths need s
}

// The kernel transforms blocks of 8 (float32) or 4 (float64) lines together in SIMD lanes and the
// lines left over one at a time: every line of a batch, along the last dim or a strided one, must
// be what the line alone gives.
TEST(Fft, BlocksOfLinesMatchEachLineAlone) {
  for (DType real : {kFloat32, kFloat64}) {
    const double tol = real == kFloat32 ? 1e-6 : 1e-14;
    for (int64_t n : {1, 2, 7, 16, 60, 97, 1000, 4097}) {
      for (int64_t lines : {3, 4, 8, 19}) {
        manual_seed(static_cast<uint64_t>(n * 100 + lines));
        Tensor r = randn({lines, n}, dtype(real));
        Tensor c = view_as_complex(randn({lines, n, 2}, dtype(real)));
        Tensor batch_r = fft::rfft(r), batch_c = fft::fft(c), batch_i = fft::irfft(batch_r, n);
        // The same along dim 0 of the transposed (strided) layout.
        Tensor strided_c = fft::fft(c.t().contiguous(), std::nullopt, 0).t();
        for (int64_t l = 0; l < lines; ++l) {
          const std::string at = "n=" + std::to_string(n) + " lines=" + std::to_string(lines) + " line " +
                                 std::to_string(l) + " " + std::string(dtype_name(real));
          Tensor one_r = fft::rfft(r.select(0, l)), one_c = fft::fft(c.select(0, l));
          EXPECT_LT(max_rel_err(to_vec(batch_r.select(0, l)), to_vec(one_r)), tol) << "rfft " << at;
          EXPECT_LT(max_rel_err(to_vec(batch_c.select(0, l)), to_vec(one_c)), tol) << "fft " << at;
          EXPECT_LT(max_rel_err(to_vec(strided_c.select(0, l)), to_vec(one_c)), tol) << "fft dim 0 " << at;
          const double diff = (batch_i.select(0, l) - fft::irfft(one_r, n)).abs().max().item<double>();
          EXPECT_LT(diff, 4 * tol * std::sqrt(static_cast<double>(n))) << "irfft " << at;
        }
      }
    }
  }
}

TEST(Fft, NormModesAndLengths) {
  Tensor x = random_complex(12, kComplex128, 5);
  std::vector<cd> f = to_vec(fft::fft(x));
  auto scaled = [](std::vector<cd> v, double s) {
    for (auto& e : v) e *= s;
    return v;
  };
  EXPECT_LT(max_rel_err(to_vec(fft::fft(x, std::nullopt, -1, "ortho")), scaled(f, 1 / std::sqrt(12.0))), 1e-14);
  EXPECT_LT(max_rel_err(to_vec(fft::fft(x, std::nullopt, -1, "forward")), scaled(f, 1 / 12.0)), 1e-14);
  // n pads with zeros or crops.
  Tensor padded = fft::fft(x, 16);
  EXPECT_LT(
      max_rel_err(to_vec(padded), to_vec(fft::fft(view_as_complex(cat({view_as_real(x), zeros({4, 2}, kFloat64)}))))),
      1e-14);
  EXPECT_LT(max_rel_err(to_vec(fft::fft(x, 5)), to_vec(fft::fft(x.narrow(0, 0, 5)))), 1e-14);
  // hfft/ihfft: the Hermitian pair (hfft(ihfft(x)) == x for a real x).
  Tensor r = randn({10}, kFloat64);
  EXPECT_TRUE(allclose(fft::hfft(fft::ihfft(r), 10), r, 1e-12, 1e-12));
  EXPECT_TRUE(allclose(fft::hfft(fft::ihfft(r.narrow(0, 0, 9)), 9), r.narrow(0, 0, 9), 1e-12, 1e-12));
}

TEST(Fft, ParsevalGradient) {
  // L = sum |fft(x)|^2 = n sum x^2 for a real x: dL/dx = 2 n x; through rfft the halved bins count
  // twice, which the backward of the real transform must know.
  Tensor x = randn({8}, kFloat64).requires_grad_();
  fft::fft(x).abs().square().sum().backward();
  EXPECT_TRUE(allclose(x.grad(), x.detach() * 16, 1e-12, 1e-12));
  Tensor z = random_complex(6, kComplex128).detach().requires_grad_();
  fft::fft(z).abs().square().sum().backward();
  EXPECT_TRUE(allclose(view_as_real(z.grad()), view_as_real(z.detach()) * 12, 1e-12, 1e-12));
}

TEST(Fft, FrequenciesAndShifts) {
  EXPECT_TRUE(tensor_is(fft::fftfreq(5), {5}, {0.0, 0.2, 0.4, -0.4, -0.2}, 1e-7));
  EXPECT_TRUE(tensor_is(fft::rfftfreq(6, 0.5), {4}, {0.0, 1 / 3.0, 2 / 3.0, 1.0}, 1e-7));
  Tensor a = arange(5, kFloat64);
  EXPECT_TRUE(tensor_is(fft::fftshift(a), {5}, {3, 4, 0, 1, 2}));
  EXPECT_TRUE(tensor_is(fft::ifftshift(fft::fftshift(a)), {5}, {0, 1, 2, 3, 4}));
}

TEST(Fft, Errors) {
  EXPECT_TRUE(throws_with([] { fft::fft(zeros({0})); }, "invalid number of data points (0)"));
  EXPECT_TRUE(throws_with([] { fft::fft(zeros({4}), std::nullopt, -1, "sideways"); }, "invalid normalization mode"));
  EXPECT_TRUE(throws_with([] { fft::rfft(zeros({4}, kComplex64)); }, "rfft expects a real input tensor"));
  EXPECT_TRUE(throws_with([] { fft::fft(zeros({4}), 0); }, "invalid number of data points (0)"));
  EXPECT_TRUE(throws_with([] { fft::fft(zeros({4}), std::nullopt, 2); }, "dim"));
  EXPECT_TRUE(throws_with([] { fft::fftn(zeros({4, 4}), {4, 4, 4}); }, "got shape s of 3 dims"));
}

// ---- windows ----------------------------------------------------------------------------------------
TEST(Windows, MatchPyTorch) {
  // PyTorch 1.13's values (float32).
  EXPECT_TRUE(tensor_is(hann_window(4), {4}, {0, 0.5, 1, 0.5}, 1e-7));
  EXPECT_TRUE(tensor_is(hann_window(4, false), {4}, {0, 0.75, 0.75, 0}, 1e-7));
  EXPECT_TRUE(tensor_is(hamming_window(4), {4}, {0.08, 0.54, 1.0, 0.54}, 1e-6));
  EXPECT_TRUE(tensor_is(blackman_window(5), {5}, {0, 0.20077014, 0.84922993, 0.84922981, 0.20077008}, 1e-6));
  EXPECT_TRUE(tensor_is(bartlett_window(5), {5}, {0, 0.4, 0.8, 0.8, 0.4}, 1e-6));
  EXPECT_TRUE(tensor_is(kaiser_window(5), {5}, {5.2773437e-05, 0.10171971, 0.79293942, 0.79293942, 0.10171971}, 1e-6));
  EXPECT_TRUE(tensor_is(kaiser_window(6, false, 5.0), {6},
                        {0.036710888, 0.41490358, 0.91381228, 0.91381228, 0.41490358, 0.036710888}, 1e-6));
  EXPECT_TRUE(tensor_is(hann_window(1), {1}, {1}));
  EXPECT_EQ(hann_window(0).numel(), 0);
  EXPECT_EQ(hann_window(3, true, kFloat64).dtype(), kFloat64);
  EXPECT_TRUE(throws_with([] { hann_window(3, true, kInt64); }, "floating dtype"));
}

// ---- stft / istft -----------------------------------------------------------------------------------
TEST(Stft, ShapesAndRoundTrip) {
  manual_seed(7);
  Tensor x = randn({3, 1000}, kFloat64);
  Tensor w = hann_window(400, true, kFloat64);
  Tensor S = stft(x, 400, {.hop_length = 160, .window = w});
  EXPECT_EQ(S.sizes(), (Shape{3, 201, 7}));
  EXPECT_EQ(S.dtype(), kComplex128);
  Tensor y = istft(S, 400, {.hop_length = 160, .window = w, .length = 1000});
  EXPECT_TRUE(allclose(y, x, 1e-10, 1e-10));
  // One frame is the rfft of the windowed, reflect-padded signal.
  Tensor x0 = x.select(0, 0);
  Tensor padded = cat({x0.narrow(0, 1, 200).flip({0}), x0, x0.narrow(0, 799, 200).flip({0})});
  Tensor frame = fft::rfft(padded.narrow(0, 160, 400) * w);
  EXPECT_LT(max_rel_err(to_vec(S.select(0, 0).select(1, 1)), to_vec(frame)), 1e-13);
  // Every pad mode, real and complex, against the signal padded by nn::functional::pad first.
  for (const char* mode : {"reflect", "replicate", "circular", "constant"}) {
    for (Tensor sig : {x, x.to(kComplex128) * Scalar(0.5)}) {
      Tensor by_hand = sig.is_complex()
                           ? view_as_complex(nn::functional::pad(view_as_real(sig).transpose(1, 2), {200, 200}, mode)
                                                 .transpose(1, 2)
                                                 .contiguous())
                           : nn::functional::pad(sig, {200, 200}, mode);
      Tensor want = stft(by_hand, 400, {.hop_length = 160, .window = w, .center = false});
      Tensor got = stft(sig, 400, {.hop_length = 160, .window = w, .pad_mode = mode});
      EXPECT_LT(max_rel_err(to_vec(got), to_vec(want)), 1e-14) << mode << (sig.is_complex() ? " complex" : " real");
    }
  }
  EXPECT_EQ(stft(x.select(0, 0), 64).sizes(), (Shape{33, 63}));
  EXPECT_EQ(view_as_complex(stft(x, 64, {.return_complex = false})).sizes(), (Shape{3, 33, 63}));
  EXPECT_TRUE(throws_with([&] { stft(x, 64, {.window = hann_window(32)}); }, "size equal to win_length=64"));
  EXPECT_TRUE(throws_with([&] { stft(x, 4000, {.center = false}); }, "n_fft <= 1000"));
  EXPECT_TRUE(throws_with([&] { istft(S, 400, {.hop_length = 160, .window = zeros({400}, kFloat64)}); },
                          "window overlap add min"));
}

// ---- complex tensors --------------------------------------------------------------------------------
TEST(Complex, DtypesAndPromotion) {
  EXPECT_EQ(element_size(kComplex64), 8u);
  EXPECT_EQ(element_size(kComplex128), 16u);
  EXPECT_STREQ(dtype_name(kComplex64), "complex64");
  EXPECT_EQ(promote_types(kComplex64, kFloat64), kComplex128);
  EXPECT_EQ(promote_types(kInt64, kComplex64), kComplex64);
  EXPECT_EQ((ones({2}) + zeros(Shape{}, kComplex128)).dtype(), kComplex64);  // PyTorch's combine_categories
  EXPECT_EQ((ones({2}, kComplex64) + ones(Shape{}, kFloat64)).dtype(), kComplex64);
  EXPECT_EQ((ones({2}, kComplex64) * 2.5).dtype(), kComplex64);
  EXPECT_FALSE(zeros({1}, kComplex64).is_floating_point());
  EXPECT_TRUE(zeros({1}, kComplex64).is_complex());
  // Conversions: real to complex has zero imaginary parts; complex to real keeps the real part.
  Tensor c = tensor({1.5, -2.0}).to(kComplex64);
  EXPECT_TRUE(tensor_is(view_as_real(c), {2, 2}, {1.5, 0, -2, 0}));
  Tensor z = nabla::complex(tensor({1.0, 2.0}), tensor({3.0, -4.0}));
  EXPECT_TRUE(tensor_is(z.to(kFloat32), {2}, {1, 2}));
  EXPECT_TRUE(tensor_is(view_as_real(full({2}, 3, kComplex128)), {2, 2}, {3, 0, 3, 0}));
  EXPECT_TRUE(tensor_is(z.abs(), {2}, {std::sqrt(10.0), std::sqrt(20.0)}, 1e-6));
}

TEST(Complex, ArithmeticMatchesStdComplex) {
  Tensor a = nabla::complex(tensor({1.0, -2.0, 0.5}, kFloat64), tensor({2.0, 0.25, -3.0}, kFloat64));
  Tensor b = nabla::complex(tensor({-1.0, 4.0, 2.0}, kFloat64), tensor({0.5, -1.0, 1.0}, kFloat64));
  std::vector<cd> av = to_vec(a), bv = to_vec(b);
  auto each = [&](auto f) {
    std::vector<cd> r;
    for (size_t i = 0; i < av.size(); ++i) r.push_back(f(av[i], bv[i]));
    return r;
  };
  EXPECT_LT(max_rel_err(to_vec(a * b), each([](cd x, cd y) { return x * y; })), 1e-15);
  EXPECT_LT(max_rel_err(to_vec(a / b), each([](cd x, cd y) { return x / y; })), 1e-15);
  EXPECT_LT(max_rel_err(to_vec(a - b), each([](cd x, cd y) { return x - y; })), 1e-15);
  EXPECT_LT(max_rel_err(to_vec(exp(a)), each([](cd x, cd) { return std::exp(x); })), 1e-15);
  EXPECT_LT(max_rel_err(to_vec(log(a)), each([](cd x, cd) { return std::log(x); })), 1e-15);
  EXPECT_LT(max_rel_err(to_vec(sqrt(a)), each([](cd x, cd) { return std::sqrt(x); })), 1e-15);
  EXPECT_LT(max_rel_err(to_vec(pow(a, b)), each([](cd x, cd y) { return std::pow(x, y); })), 1e-14);
  EXPECT_LT(max_rel_err(to_vec(conj(a)), each([](cd x, cd) { return std::conj(x); })), 1e-15);
  EXPECT_TRUE(tensor_is(angle(a), {3}, {std::arg(av[0]), std::arg(av[1]), std::arg(av[2])}, 1e-15));
  EXPECT_TRUE(tensor_is(eq(a, a.clone()), {3}, {1, 1, 1}));
  EXPECT_TRUE(tensor_is(ne(a, b), {3}, {1, 1, 1}));
  // In place, and a sum.
  Tensor c = a.clone();
  c.mul_(b);
  EXPECT_LT(max_rel_err(to_vec(c), to_vec(a * b)), 1e-15);
  EXPECT_LT(std::abs(to_vec(a.sum())[0] - (av[0] + av[1] + av[2])), 1e-15);
  EXPECT_TRUE(throws_with([&] { maximum(a, b); }, "maximum: not implemented for complex tensors"));
  EXPECT_TRUE(throws_with([&] { tanh(a); }, "tanh: not implemented for complex tensors"));
  EXPECT_TRUE(throws_with([&] { ones({2}).add_(a.narrow(0, 0, 2)); }, "cannot be stored in a tensor of dtype float32"));
}

// matmul / mm / bmm / mv / dot of complex operands against sums of std::complex products, and
// the gradient PyTorch's complex autograd gives: for C = A @ B, A.grad = dL/dC @ B^H.
TEST(Complex, MatrixProductsMatchStdComplex) {
  manual_seed(11);
  auto rand_c = [](Shape s, DType real) {
    s.push_back(2);
    return view_as_complex(randn(s, dtype(real)));
  };
  auto reference = [](const Tensor& a, const Tensor& b) {  // (m, k) @ (k, n) in std::complex<double>
    const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
    std::vector<cd> av = to_vec(a), bv = to_vec(b), out(static_cast<size_t>(m * n));
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t l = 0; l < k; ++l) out[i * n + j] += av[i * k + l] * bv[l * n + j];
    return out;
  };
  for (DType real : {kFloat64, kFloat32}) {
    const double tol = real == kFloat64 ? 1e-14 : 1e-5;
    Tensor a = rand_c({5, 7}, real), b = rand_c({7, 3}, real);
    EXPECT_LT(max_rel_err(to_vec(matmul(a, b)), reference(a, b)), tol);
    EXPECT_LT(max_rel_err(to_vec(mm(a, b)), reference(a, b)), tol);
    EXPECT_LT(max_rel_err(to_vec(mv(a, b.select(1, 0))), reference(a, b.narrow(1, 0, 1))), tol);
    EXPECT_LT(
        max_rel_err(to_vec(dot(a.select(0, 0), b.select(1, 2))), {reference(a.narrow(0, 0, 1), b.narrow(1, 2, 1))[0]}),
        tol);
    Tensor ba = rand_c({2, 5, 7}, real), bb = rand_c({2, 7, 3}, real);
    Tensor batched = matmul(ba, bb), broadcast = matmul(ba, b),
           strided = matmul(a.t().contiguous().t(), bb.transpose(1, 2).contiguous().transpose(1, 2));
    for (int64_t i = 0; i < 2; ++i) {
      EXPECT_LT(max_rel_err(to_vec(batched.select(0, i)), reference(ba.select(0, i), bb.select(0, i))), tol);
      EXPECT_LT(max_rel_err(to_vec(broadcast.select(0, i)), reference(ba.select(0, i), b)), tol);
      EXPECT_LT(max_rel_err(to_vec(strided.select(0, i)), reference(a, bb.select(0, i))), tol);
    }
  }
  Tensor a = rand_c({4, 6}, kFloat64).requires_grad_(), b = rand_c({6, 2}, kFloat64).requires_grad_();
  Tensor w = rand_c({4, 2}, kFloat64);
  (view_as_real(matmul(a, b)) * view_as_real(w)).sum().backward();  // dL/dC = w (Wirtinger, as PyTorch)
  EXPECT_LT(max_rel_err(to_vec(a.grad()), to_vec(matmul(w, conj(b.detach()).t()))), 1e-14);
  EXPECT_LT(max_rel_err(to_vec(b.grad()), to_vec(matmul(conj(a.detach()).t(), w))), 1e-14);
  EXPECT_TRUE(throws_with([&] { matmul(a.detach(), ones({6, 2}, kFloat64)); }, "same dtype"));
}

TEST(Complex, ViewsShareMemory) {
  Tensor z = zeros({2, 3}, kComplex64);
  Tensor r = view_as_real(z);
  EXPECT_EQ(r.sizes(), (Shape{2, 3, 2}));
  r.select(-1, 1).fill_(2);
  real(z).fill_(1);
  EXPECT_TRUE(tensor_is(view_as_real(z).flatten(), {12}, {1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2}));
  EXPECT_TRUE(throws_with([] { view_as_complex(zeros({3, 3})); }, "last dim must have size 2"));
  EXPECT_TRUE(throws_with([] { view_as_complex(zeros({2, 4}).t()); }, "stride 1"));
  EXPECT_TRUE(throws_with([] { imag(zeros({2})); }, "imag: not defined for tensors of a real dtype"));
  // Transposed complex views copy right.
  Tensor m = nabla::complex(arange(6, kFloat64).view({2, 3}), -arange(6, kFloat64).view({2, 3}));
  EXPECT_TRUE(tensor_is(view_as_real(m.t().contiguous()).flatten(), {12}, {0, 0, 3, -3, 1, -1, 4, -4, 2, -2, 5, -5}));
  // Under autograd, in-place writes through a reinterpreting view are refused, not lost.
  Tensor leaf = zeros({2}, kComplex128).requires_grad_();
  Tensor v = leaf * 1;
  Tensor re = real(v);
  re.mul_(2);  // recorded on the float pairs v is itself a view of; v's history cannot follow
  EXPECT_TRUE(throws_with([&] { (v * 1).abs().sum().backward(); }, "view of another dtype"));
}

TEST(Complex, PrintsAsPyTorch) {
  EXPECT_EQ(nabla::complex(tensor({1.0, 3.0}), tensor({2.0, -1.0})).str(), "tensor([1.+2.j, 3.-1.j])");
  EXPECT_EQ(nabla::complex(tensor({{0.5, -1.5}, {100.0, 0.0}}), tensor({{0.25, -2.0}, {0.0, -0.001}})).str(),
            "tensor([[  0.5000+2.5000e-01j,  -1.5000-2.0000e+00j],\n"
            "        [100.0000+0.0000e+00j,   0.0000-1.0000e-03j]])");
}

}  // namespace
}  // namespace nabla::testing
