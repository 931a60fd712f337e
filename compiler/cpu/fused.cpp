// The CPU's fused elementwise programs (compiler/fused.h), compiled into each CPU kernel build
// (base, AVX2) as core/cpu/ is. Each op's formula is its row's in core/elementwise_ops.h, computed
// in float32 exactly as the eager kernel (core/cpu/elementwise.cpp) computes it, including the
// vectorized exp, tanh and sigmoid of vmath.h, so a fused chain gives the eager chain's bits.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "compiler/fused.h"
#include "core/cpu/vmath.h"
#include "core/error.h"
#include "core/parallel.h"
#include "core/scalar_math.h"

#ifndef NABLA_CPU_ISA
#define NABLA_CPU_ISA base
#endif

namespace nabla::compiler::cpu::NABLA_CPU_ISA {
namespace {

using namespace nabla::scalar;
namespace vmath = nabla::cpu::vmath;

constexpr int64_t kBlock = 256;  // elements per block

template <class F>
[[gnu::always_inline]] inline void map1(float* __restrict d, const float* a, int64_t n, const F& f) {
  for (int64_t i = 0; i < n; ++i) d[i] = f(a[i]);
}
template <class F>
[[gnu::always_inline]] inline void map2(float* __restrict d, const float* a, const float* b, int64_t n, const F& f) {
  for (int64_t i = 0; i < n; ++i) d[i] = f(a[i], b[i]);
}

void unary_block(const FusedInstr& in, float* d, const float* a, int64_t n) {
  const double p0 = in.p0, p1 = in.p1;
  switch (in.uop) {  // the eager kernel's vectorized forms first
    case UnaryOp::exp: return map1(d, a, n, [](float v) { return vmath::exp_f32(v); });
    case UnaryOp::tanh: return map1(d, a, n, [](float v) { return vmath::tanh_f32(v); });
    case UnaryOp::sigmoid: return map1(d, a, n, [](float v) { return vmath::sigmoid_f32(v); });
    case UnaryOp::silu: return map1(d, a, n, [](float v) { return v * vmath::sigmoid_f32(v); });
    default: break;
  }
  switch (in.uop) {
#define NABLA_FUSED_UNARY(name, fwd, ...) \
  case UnaryOp::name:                     \
    return map1(d, a, n, [=](float x) {   \
      using T = float;                    \
      (void)p0;                           \
      (void)p1;                           \
      return static_cast<T>(fwd);         \
    });
    NABLA_UNARY_FLOAT_OPS(NABLA_FUSED_UNARY)
    NABLA_UNARY_PARAM_OPS(NABLA_FUSED_UNARY)
    NABLA_UNARY_SAME_OPS(NABLA_FUSED_UNARY)
#undef NABLA_FUSED_UNARY
    case UnaryOp::clamp: {
      const float lo = saturate<float>(p0), hi = saturate<float>(p1);
      return map1(d, a, n, [=](float v) { return scalar::clamp(v, lo, hi); });
    }
    default: break;
  }
  throw Error(internal::str("compile: internal: unary op '", op_name(in.uop), "' in a fused program"));
}

void binary_block(const FusedInstr& in, float* d, const float* a, const float* b, int64_t n) {
  [[maybe_unused]] const float alpha = static_cast<float>(in.alpha);
  switch (in.bop) {
#define NABLA_FUSED_BINARY(name, kind, fwd, ...)    \
  case BinaryOp::name:                              \
    return map2(d, a, b, n, [=](float a, float b) { \
      using T = float;                              \
      return static_cast<T>(fwd);                   \
    });
    NABLA_BINARY_ARITH_OPS(NABLA_FUSED_BINARY)
#undef NABLA_FUSED_BINARY
    default: break;
  }
  throw Error(internal::str("compile: internal: binary op '", op_name(in.bop), "' in a fused program"));
}

// One block of n elements starting at element `start`. regs: n_regs blocks of scratch.
void run_block(const FusedProgram& p, const float* const* in, float* const* out, int64_t start, int64_t n, float* regs,
               const float** src) {
  const int n_in = static_cast<int>(p.inputs.size());
  for (int i = 0; i < n_in; ++i) {
    const FusedInput& fi = p.inputs[i];
    float* r = regs + i * kBlock;
    switch (fi.read) {
      case FusedInput::whole: src[i] = in[i] + start; break;
      case FusedInput::one: std::fill(r, r + n, in[i][0]), src[i] = r; break;
      case FusedInput::periodic: {
        int64_t j = start % fi.period;
        for (int64_t k = 0; k < n; ++k) {
          r[k] = in[i][j];
          if (++j == fi.period) j = 0;
        }
        src[i] = r;
        break;
      }
    }
  }
  const size_t last = p.code.size() - 1;
  for (size_t k = 0; k < p.code.size(); ++k) {
    const FusedInstr& c = p.code[k];
    // The last instruction writes the first output directly (it may be an input's buffer, reused:
    // each element is read before it is written, and no later instruction reads it).
    float* d = (k == last && c.dst == p.outs[0]) ? out[0] + start : regs + c.dst * kBlock;
    switch (c.kind) {
      case FusedInstr::unary: unary_block(c, d, src[c.a], n); break;
      case FusedInstr::binary: binary_block(c, d, src[c.a], src[c.b], n); break;
      case FusedInstr::pow_scalar: {
        const float e = static_cast<float>(c.p0);
        map1(d, src[c.a], n, [=](float v) { return scalar::pow(v, e); });
        break;
      }
    }
    src[c.dst] = d;
  }
  for (size_t j = 0; j < p.outs.size(); ++j)
    if (src[p.outs[j]] != out[j] + start) std::memcpy(out[j] + start, src[p.outs[j]], n * sizeof(float));
}

}  // namespace

void run_fused(const FusedProgram& p, const float* const* in, float* const* out, int64_t n) {
  if (n == 0) return;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  // Threads split the blocks when there are enough (the eager elementwise grain: 32K elements).
  parallel_for(0, blocks, 128, [&](int64_t b0, int64_t b1) {
    alignas(64) float regs[kMaxFusedRegs * kBlock];  // 48 KiB of stack: no allocation per call
    const float* src[kMaxFusedRegs];
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t start = b * kBlock;
      run_block(p, in, out, start, std::min(kBlock, n - start), regs, src);
    }
  });
}

}  // namespace nabla::compiler::cpu::NABLA_CPU_ISA
