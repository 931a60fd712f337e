// Fused attention (nabla::flash_attention, the flash path of scaled_dot_product_attention) against
// the math path: forward and gradients in float64 and float32 over lengths that cross the 128-row
// tiles unevenly (1, 7, 129, 300, 1000), L != S, causal, masks, grouped-query attention and dropout
// (the same mask from the same seed); bfloat16/float16; the memory it keeps; determinism across
// thread counts; MultiheadAttention on both paths; the errors. Against PyTorch: the registry's
// flash_attention and sdpa entries (tests/ops/opinfo_attention.cpp) and SdpaLongSequencesMatchTorch.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <string>

#include <unistd.h>

#include "io/npy.h"
#include "nabla.h"
#include "tests/common/python_torch.h"
#include "tests/common/value_helpers.h"

using namespace nabla;
using namespace nabla::testing;
namespace F = nn::functional;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Result {
  Tensor out, gq, gk, gv;
};

// Output and the gradients of q, k and v for the output gradient `gout`, on `backend`.
Result run(F::SdpBackend backend, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& gout,
           F::ScaledDotProductAttentionOptions o = {}, uint64_t seed = 0) {
  auto guard = F::sdpa_kernel(backend);
  Tensor qq = q.detach().clone().requires_grad_(), kk = k.detach().clone().requires_grad_(),
         vv = v.detach().clone().requires_grad_();
  if (seed) manual_seed(seed);
  Tensor out = F::scaled_dot_product_attention(qq, kk, vv, o);
  out.backward(gout);
  return {out.detach(), qq.grad(), kk.grad(), vv.grad()};
}

::testing::AssertionResult runs_agree(const Result& a, const Result& b, double tol) {
  const char* names[] = {"output", "grad q", "grad k", "grad v"};
  const Tensor* x[] = {&a.out, &a.gq, &a.gk, &a.gv};
  const Tensor* y[] = {&b.out, &b.gq, &b.gk, &b.gv};
  for (int i = 0; i < 4; ++i) {
    auto r = tensor_near(x[i]->to(kFloat64), y[i]->to(kFloat64), tol, tol);
    if (!r) return ::testing::AssertionFailure() << names[i] << ": " << r.message();
  }
  return ::testing::AssertionSuccess();
}

// Fused and math paths on the same inputs (seeded), float64.
::testing::AssertionResult paths_agree(Shape qs, Shape ks, Shape vs, F::ScaledDotProductAttentionOptions o = {},
                                       DType dt = kFloat64, double tol = 1e-10, uint64_t seed = 0) {
  manual_seed(7);
  Tensor q = randn(qs, dtype(dt)), k = randn(ks, dtype(dt)), v = randn(vs, dtype(dt));
  Shape gs = qs;
  gs.back() = vs.back();
  if (o.enable_gqa) gs[gs.size() - 3] = qs[qs.size() - 3];
  Tensor gout = randn(gs, dtype(dt));
  Result fused = run(F::SdpBackend::flash, q, k, v, gout, o, seed);
  Result math = run(F::SdpBackend::math, q, k, v, gout, o, seed);
  return runs_agree(fused, math, tol);
}

}  // namespace

TEST(FlashAttention, MatchesMathPathOverTileEdges) {
  for (int64_t L : {1, 7, 129, 300}) {
    for (int64_t S : {1, 7, 128, 260}) {
      SCOPED_TRACE("L " + std::to_string(L) + " S " + std::to_string(S));
      EXPECT_TRUE(paths_agree({2, 3, L, 8}, {2, 3, S, 8}, {2, 3, S, 5}));
      EXPECT_TRUE(paths_agree({2, 3, L, 8}, {2, 3, S, 8}, {2, 3, S, 5}, {.is_causal = true}));
    }
  }
  // float32: the fused kernel's float32 accumulation against the math path's.
  EXPECT_TRUE(paths_agree({2, 2, 300, 64}, {2, 2, 300, 64}, {2, 2, 300, 64}, {.is_causal = true}, kFloat32, 2e-5));
  EXPECT_TRUE(paths_agree({1, 4, 1000, 16}, {1, 4, 700, 16}, {1, 4, 700, 16}, {}, kFloat32, 2e-5));
}

TEST(FlashAttention, MasksScaleBroadcastAndUnbatched) {
  manual_seed(1);
  // A bool mask broadcast over the batch, a float mask per head, a custom scale.
  Tensor allowed = rand({70, 90}) > 0.3;
  EXPECT_TRUE(paths_agree({2, 3, 70, 8}, {2, 3, 90, 8}, {2, 3, 90, 4}, {.attn_mask = allowed, .scale = 0.3}));
  Tensor fmask = randn({3, 1, 90});
  EXPECT_TRUE(paths_agree({2, 3, 70, 8}, {2, 3, 90, 8}, {2, 3, 90, 4}, {.attn_mask = fmask}));
  // Batch dims that broadcast (key/value shared over the heads), and unbatched 2-D inputs.
  EXPECT_TRUE(paths_agree({2, 3, 70, 8}, {2, 1, 90, 8}, {1, 1, 90, 4}, {.is_causal = true}));
  EXPECT_TRUE(paths_agree({70, 8}, {90, 8}, {90, 6}));
  EXPECT_TRUE(paths_agree({5, 2, 3, 20, 8}, {5, 2, 3, 20, 8}, {5, 2, 3, 20, 8}, {.is_causal = true}));
}

TEST(FlashAttention, GroupedQueryAttention) {
  // 8 query heads on 2 key/value heads: gradients of k and v sum over each group of 4.
  EXPECT_TRUE(paths_agree({2, 8, 70, 8}, {2, 2, 90, 8}, {2, 2, 90, 8}, {.enable_gqa = true}));
  EXPECT_TRUE(paths_agree({2, 8, 70, 8}, {2, 2, 70, 8}, {2, 2, 70, 8}, {.is_causal = true, .enable_gqa = true}));
  // The same as repeating the heads by hand.
  manual_seed(2);
  Tensor q = randn({1, 6, 9, 4}), k = randn({1, 3, 9, 4}), v = randn({1, 3, 9, 4});
  EXPECT_TRUE(allclose(F::scaled_dot_product_attention(q, k, v, {.enable_gqa = true}),
                       F::scaled_dot_product_attention(q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1)), 1e-5,
                       1e-6));
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        F::scaled_dot_product_attention(q, k.repeat({1, 2, 1, 1}).narrow(1, 0, 4),
                                        v.repeat({1, 2, 1, 1}).narrow(1, 0, 4), {.enable_gqa = true});
      },
      {"enable_gqa", "[1, 6, 9, 4]", "[1, 4, 9, 4]"}));
}

TEST(FlashAttention, DropoutDrawsTheMathPathsMask) {
  // The same seed gives the same mask on both paths, so outputs and gradients agree.
  EXPECT_TRUE(paths_agree({2, 3, 70, 8}, {2, 3, 90, 8}, {2, 3, 90, 8}, {.dropout_p = 0.3}, kFloat64, 1e-10, 11));
  EXPECT_TRUE(paths_agree({1, 2, 130, 8}, {1, 2, 130, 8}, {1, 2, 130, 8}, {.dropout_p = 0.5, .is_causal = true},
                          kFloat32, 2e-5, 12));
  // Statistics: with v the identity the output rows are the dropped-out weights, 1 / (1 - p) where
  // kept: E[out] = softmax weight and the kept fraction is 1 - p.
  const int64_t S = 64, L = 512;
  Tensor q = zeros({1, 1, L, 8}), k = zeros({1, 1, S, 8}), v = eye(S).reshape({1, 1, S, S});
  manual_seed(5);
  Tensor w;
  {
    auto g = F::sdpa_kernel(F::SdpBackend::flash);
    w = F::scaled_dot_product_attention(q, k, v, {.dropout_p = 0.25});  // uniform weights 1/64, scaled by 4/3
  }
  const double kept = (w > 0).to(kFloat64).mean().item<double>();
  EXPECT_NEAR(kept, 0.75, 0.01);  // 32768 draws: 4 standard deviations
  EXPECT_NEAR(w.to(kFloat64).mean().item<double>(), 1.0 / S, 0.02 / S);
  EXPECT_NEAR((w.masked_select(w > 0) - 1.0 / S / 0.75).abs().max().item<double>(), 0.0, 1e-7);
}

TEST(FlashAttention, FullyMaskedRowsAreNaNAsOnTheMathPath) {
  manual_seed(3);
  Tensor q = randn({1, 1, 4, 8}), k = randn({1, 1, 5, 8}), v = randn({1, 1, 5, 8});
  Tensor mask = ones({4, 5}, dtype(kBool));
  mask.select(0, 2).fill_(false);  // query 2 sees nothing
  Tensor a, b;
  {
    auto g = F::sdpa_kernel(F::SdpBackend::flash);
    a = F::scaled_dot_product_attention(q, k, v, {.attn_mask = mask});
  }
  {
    auto g = F::sdpa_kernel(F::SdpBackend::math);
    b = F::scaled_dot_product_attention(q, k, v, {.attn_mask = mask});
  }
  EXPECT_TRUE(isnan(a.select(2, 2)).all().item<bool>());
  EXPECT_TRUE(isnan(b.select(2, 2)).all().item<bool>());
  EXPECT_TRUE(allclose(a.index_select(2, tensor({0, 1, 3}, dtype(kInt64))),
                       b.index_select(2, tensor({0, 1, 3}, dtype(kInt64))), 1e-5, 1e-6));
  // No keys at all: an empty softmax, output 0 (as the math path's empty matmul).
  Tensor none = flash_attention(q, k.narrow(2, 0, 0), v.narrow(2, 0, 0), {}, {.scale = 1.0});
  EXPECT_TRUE(equal(none, zeros({1, 1, 4, 8})));
}

TEST(FlashAttention, SixteenBitInputsComputeInFloat32) {
  manual_seed(4);
  Tensor q = randn({2, 4, 100, 32}), k = randn({2, 4, 100, 32}), v = randn({2, 4, 100, 32});
  Tensor g = randn({2, 4, 100, 32});
  for (DType dt : {kBFloat16, kFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor q16 = q.to(dt), k16 = k.to(dt), v16 = v.to(dt), g16 = g.to(dt);
    Result low = run(F::SdpBackend::flash, q16, k16, v16, g16, {.is_causal = true});
    // The float32 result of the same 16-bit inputs, rounded once: what the fused kernel computes.
    Result ref = run(F::SdpBackend::math, q16.to(kFloat32), k16.to(kFloat32), v16.to(kFloat32), g16.to(kFloat32),
                     {.is_causal = true});
    EXPECT_EQ(low.out.dtype(), dt);
    EXPECT_EQ(low.gq.dtype(), dt);
    EXPECT_TRUE(runs_agree(low, Result{ref.out.to(dt), ref.gq.to(dt), ref.gk.to(dt), ref.gv.to(dt)},
                           dt == kBFloat16 ? 2e-2 : 3e-3));
  }
}

TEST(FlashAttention, KeepsNoScoreMatrix) {
  // What a forward leaves alive for backward: the output and the log-sum-exp (B * H * L floats),
  // not the (L, S) weights: 2 heads x 2048 x 2048 floats would be 32 MB.
  Tensor q = randn({1, 2, 2048, 32}).requires_grad_(), k = randn({1, 2, 2048, 32}).requires_grad_(),
         v = randn({1, 2, 2048, 32}).requires_grad_();
  const size_t before = cpu_memory_stats().allocated_bytes;
  Tensor out = flash_attention(q, k, v, {}, {.scale = 0.2, .causal = true});
  const size_t kept = cpu_memory_stats().allocated_bytes - before;
  EXPECT_LE(kept, size_t{1} << 20);  // the output (512 KB) and the lse (16 KB)
  out.sum().backward();
  EXPECT_TRUE(q.grad().defined() && k.grad().defined() && v.grad().defined());
}

TEST(FlashAttention, SameResultsOnOneAndTwoThreads) {
  // One head and many key tiles: the backward splits the key tiles into groups with their own dq
  // buffers, summed in a fixed order, so the thread count does not change a bit.
  manual_seed(6);
  Tensor q = randn({1, 1, 700, 16}), k = randn({1, 1, 900, 16}), v = randn({1, 1, 900, 16}), g = randn({1, 1, 700, 16});
  const int saved = get_num_threads();
  set_num_threads(1);
  Result one = run(F::SdpBackend::flash, q, k, v, g, {.dropout_p = 0.1}, 9);
  set_num_threads(2);
  Result two = run(F::SdpBackend::flash, q, k, v, g, {.dropout_p = 0.1}, 9);
  set_num_threads(saved);
  EXPECT_TRUE(equal(one.out, two.out));
  EXPECT_TRUE(equal(one.gq, two.gq));
  EXPECT_TRUE(equal(one.gk, two.gk));
  EXPECT_TRUE(equal(one.gv, two.gv));
}

TEST(FlashAttention, SecondOrderGradientsUnderCreateGraph) {
  // Backward under create_graph is written with differentiable ops: its gradients match the math
  // path's second derivatives.
  manual_seed(8);
  Tensor q0 = randn({1, 2, 5, 3}, dtype(kFloat64)), k0 = randn({1, 2, 6, 3}, dtype(kFloat64)),
         v0 = randn({1, 2, 6, 3}, dtype(kFloat64));
  auto second = [&](F::SdpBackend b) {
    auto g = F::sdpa_kernel(b);
    Tensor q = q0.clone().requires_grad_(), k = k0.clone().requires_grad_(), v = v0.clone().requires_grad_();
    Tensor out = F::scaled_dot_product_attention(q, k, v, {.is_causal = true});
    auto grads = autograd::grad({out.pow(2).sum()}, {q, k, v}, {}, /*retain_graph=*/true, /*create_graph=*/true);
    (grads[0].sum() + grads[1].pow(2).sum() + grads[2].sum()).backward();
    return std::vector<Tensor>{q.grad(), k.grad(), v.grad()};
  };
  auto a = second(F::SdpBackend::flash), b = second(F::SdpBackend::math);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(tensor_near(a[i], b[i], 1e-10, 1e-10)) << i;
}

TEST(FlashAttention, MultiheadAttentionTakesItWithoutWeights) {
  manual_seed(9);
  nn::MultiheadAttention mha(16, 4, {.batch_first = true});
  Tensor x = randn({2, 70, 16}), pad = zeros({2, 70}, dtype(kBool));
  pad.select(0, 1).narrow(0, 60, 10).fill_(true);  // the second sequence is 60 long
  for (bool causal : {false, true}) {
    nn::MultiheadAttentionForwardOptions o{.key_padding_mask = pad, .need_weights = false, .is_causal = causal};
    Tensor fused = mha.forward_attention(x, x, x, o).output;  // need_weights = false: the fused kernel
    o.need_weights = true;                                    // weights asked for: the math path
    EXPECT_TRUE(allclose(fused, mha.forward_attention(x, x, x, o).output, 1e-5, 1e-6)) << causal;
  }
  // bias_k / bias_v and a zero position under causal masking: the extra positions stay visible.
  nn::MultiheadAttention extra(8, 2, {.add_bias_kv = true, .add_zero_attn = true});
  Tensor y = randn({9, 3, 8});
  nn::MultiheadAttentionForwardOptions o{.need_weights = false, .is_causal = true};
  Tensor fused = extra.forward_attention(y, y, y, o).output;
  o.need_weights = true;
  EXPECT_TRUE(allclose(fused, extra.forward_attention(y, y, y, o).output, 1e-5, 1e-6));
}

TEST(FlashAttention, BackendGuardAndErrors) {
  Tensor q = randn({1, 2, 4, 8}), k = randn({1, 2, 5, 8}), v = randn({1, 2, 5, 8});
  EXPECT_EQ(F::current_sdp_backend(), F::SdpBackend::automatic);
  {
    auto g = F::sdpa_kernel(F::SdpBackend::math);
    EXPECT_EQ(F::current_sdp_backend(), F::SdpBackend::math);
    {
      auto g2 = F::sdpa_kernel(F::SdpBackend::flash);
      EXPECT_EQ(F::current_sdp_backend(), F::SdpBackend::flash);
      // A mask that requires grad: the fused kernel does not differentiate masks.
      Tensor m = zeros({4, 5}).requires_grad_();
      EXPECT_TRUE(throws_with<NotImplemented>([&] { F::scaled_dot_product_attention(q, k, v, {.attn_mask = m}); },
                                              {"scaled_dot_product_attention", "sdpa_kernel", "requires grad"}));
    }
    EXPECT_EQ(F::current_sdp_backend(), F::SdpBackend::math);
  }
  EXPECT_EQ(F::current_sdp_backend(), F::SdpBackend::automatic);
  EXPECT_TRUE(throws_with<ShapeError>([&] { flash_attention(q, k, v.narrow(2, 0, 4)); },
                                      {"flash_attention", "[1, 2, 4, 8]", "[1, 2, 5, 8]", "[1, 2, 4, 8]"}));
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        flash_attention(q, k, v, zeros({3, 5}));
      },
      {"flash_attention", "bias of shape [3, 5]", "[1, 2, 4, 5]"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { flash_attention(q, k, v, {}, {.dropout_p = 1.0}); },
                                      {"flash_attention", "dropout_p", "[0, 1)"}));
  EXPECT_TRUE(throws_with<DTypeError>([&] { flash_attention(q, k.to(kFloat64), v); },
                                      {"flash_attention", "float32", "float64"}));
}

TEST(FlashAttention, SdpaLongSequencesMatchTorch) {
  // Odd lengths past the tiles (1000 queries on 4097 keys, causal; 4097 on 1000 with a mask; a
  // single query): nabla's fused forward and gradients against PyTorch's attention formula in
  // float64, computed by Debian's torch from the same inputs (saved as .npy).
  NABLA_NEEDS_PYTHON_MODULES("torch, numpy");
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("nabla_flash_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  struct Case {
    int64_t L, S;
    bool causal, mask;
  };
  for (const Case c : {Case{1000, 4097, true, false}, Case{4097, 1000, false, true}, Case{1, 4097, false, false}}) {
    SCOPED_TRACE(std::to_string(c.L) + " x " + std::to_string(c.S));
    manual_seed(static_cast<uint64_t>(c.L + c.S));
    Tensor q = randn({1, 2, c.L, 16}, dtype(kFloat64)), k = randn({1, 2, c.S, 16}, dtype(kFloat64)),
           v = randn({1, 2, c.S, 8}, dtype(kFloat64)), g = randn({1, 2, c.L, 8}, dtype(kFloat64));
    Tensor mask = rand({c.L, c.S}) > 0.2;
    F::ScaledDotProductAttentionOptions o{.is_causal = c.causal};
    if (c.mask) o.attn_mask = mask;
    Result r = run(F::SdpBackend::flash, q, k, v, g, o);
    for (auto [name, t] : {std::pair{"q", q}, {"k", k}, {"v", v}, {"g", g}})
      save_npy(t, (dir / name).string() + ".npy");
    save_npy(mask.to(kFloat64), (dir / "mask.npy").string());
    const std::string script = (dir / "ref.py").string();
    {
      FILE* f = std::fopen(script.c_str(), "w");
      ASSERT_TRUE(f);
      std::fprintf(f,
                   "import numpy as np, torch, sys\n"
                   "d = sys.argv[1]\n"
                   "ld = lambda n: torch.from_numpy(np.load(d + '/' + n + '.npy'))\n"
                   "q, k, v, g = (ld(n).requires_grad_(n != 'g') for n in 'qkvg')\n"
                   "s = q @ k.transpose(-2, -1) / 4.0\n"
                   "L, S = s.shape[-2:]\n"
                   "if %d: s = s.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float('-inf'))\n"
                   "if %d: s = s.masked_fill(ld('mask') == 0, float('-inf'))\n"
                   "out = torch.softmax(s, -1) @ v\n"
                   "out.backward(g)\n"
                   "for n, t in (('out', out), ('gq', q.grad), ('gk', k.grad), ('gv', v.grad)):\n"
                   "    np.save(d + '/t_' + n + '.npy', t.detach().numpy())\n",
                   c.causal ? 1 : 0, c.mask ? 1 : 0);
      std::fclose(f);
    }
    ASSERT_EQ(std::system((nabla_test::test_python() + " " + script + " " + dir.string()).c_str()), 0);
    auto ref = [&](const char* n) { return load_npy((dir / ("t_" + std::string(n) + ".npy")).string()); };
    EXPECT_TRUE(runs_agree(r, Result{ref("out"), ref("gq"), ref("gk"), ref("gv")}, 1e-9));
  }
  fs::remove_all(dir);
}
