// CPU random kernels. Element i of the output depends only on (seed, offset, i), so results are the
// same for any thread count (and match the CUDA kernels, which use the same mapping).
#include <algorithm>
#include <cmath>

#include "core/cpu/kernels.h"
#include "core/cpu/philox.h"
#include "core/generator.h"
#include "core/parallel.h"

namespace nabla::cpu::NABLA_CPU_ISA {

namespace {
// Box-Muller on two uniforms in [0, 1): two independent normals, the cosine and the sine branch.
inline void box_muller(double u1, double u2, double* cos_branch, double* sin_branch) {
  double r = std::sqrt(-2.0 * std::log1p(-u1));
  double t = 6.283185307179586 * u2;
  *cos_branch = r * std::cos(t);
  *sin_branch = r * std::sin(t);
}

// Fills a contiguous buffer in parallel, K elements per Philox block: block blk (counter
// first + blk) gives elements K*blk .. K*blk + K - 1. g(w, v) maps a batch of kLanes blocks at
// once, w[word][lane] to v[element][lane], so simple maps vectorize across the lanes (and have
// no branch per element).
template <int K, class T, class G>
void fill_blocks(T* p, int64_t n, uint64_t key, uint64_t first, const G& g) {
  int64_t blocks = (n + K - 1) / K;
  parallel_for(0, blocks, 16384 / K, [&](int64_t b, int64_t e) {
    uint32_t words[4][kLanes];
    T vals[K][kLanes];
    for (int64_t blk0 = b; blk0 < e; blk0 += kLanes) {
      philox_lanes(key, first + static_cast<uint64_t>(blk0), words);
      g(words, vals);
      const int64_t lanes = std::min<int64_t>(kLanes, e - blk0);
      T* out = p + blk0 * K;
      const int64_t m = std::min<int64_t>(lanes * K, n - blk0 * K);  // the last block may be partial
      for (int64_t i = 0; i < m; ++i) out[i] = vals[i % K][i / K];
    }
  });
}
}  // namespace

// float16/bfloat16: float32 draws (the same stream as a float32 tensor of this size), rounded
// once. A uniform draw that rounds up onto `to` becomes the largest value below it, so the range
// stays [from, to) as it does for float32.
namespace {
template <class H>
void round_draws(const Tensor& f, const Tensor& out, double to, bool keep_below_to) {
  const float* src = f.data_ptr<float>();
  H* dst = static_cast<H*>(out.data_ptr());
  H below{};
  if (keep_below_to) {  // the 16-bit value just below `to`: one step towards -inf when `to` rounds up
    below = H(static_cast<float>(to));
    if (static_cast<double>(static_cast<float>(below)) >= to) {
      const uint16_t b = below.bits;
      below.bits = (b & 0x7fff) == 0 ? uint16_t{0x8001} : static_cast<uint16_t>((b & 0x8000) ? b + 1 : b - 1);
    }
  }
  parallel_for(0, f.numel(), 1 << 14, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      H h(src[i]);
      if (keep_below_to && static_cast<double>(static_cast<float>(h)) >= to) h = below;
      dst[i] = h;
    }
  });
}
}  // namespace

void random(RandomOp op, const Tensor& out_in, double p0, double p1, Generator& gen) {
  int64_t n = out_in.numel();
  if (n == 0) return;
  if (is_reduced_float(out_in.dtype())) {
    Tensor f = empty(out_in.sizes(), dtype(DType::f32));
    random(op, f, p0, p1, gen);
    Tensor out = out_in.is_contiguous() ? out_in : empty(out_in.sizes(), dtype(out_in.dtype()));
    const bool keep_below_to = op == RandomOp::uniform && p1 > p0;
    if (out.dtype() == DType::f16) round_draws<Half>(f, out, p1, keep_below_to);
    else round_draws<BFloat16>(f, out, p1, keep_below_to);
    if (!out.is_same(out_in)) copy(out, out_in);
    return;
  }
  Tensor out = out_in.is_contiguous() ? out_in : empty(out_in.sizes(), dtype(out_in.dtype()));
  DType dt = out.dtype();
  bool dbl = dt == DType::f64;
  // Blocks of 4 words: floats use one word per element, doubles two.
  int64_t per_block = dbl ? 2 : 4;
  // Plain variables, not a structured binding: lambdas capture them (clang < 16 cannot).
  const auto range = gen.reserve(static_cast<uint64_t>((n + per_block - 1) / per_block));
  const uint64_t key = range.first, first = range.second;

  if (op == RandomOp::normal) {
    if (dbl) {
      // One Box-Muller pair per block: elements 2b and 2b+1 take its cosine and sine branches.
      fill_blocks<2>(out.data_ptr<double>(), n, key, first, [&](const auto& w, auto& v) {
        for (int l = 0; l < kLanes; ++l) {
          double c, s;
          box_muller(Philox::to_double(w[0][l], w[1][l]), Philox::to_double(w[2][l], w[3][l]), &c, &s);
          v[0][l] = p0 + p1 * c;
          v[1][l] = p0 + p1 * s;
        }
      });
    } else {
      NABLA_CHECK(DTypeError, dt == DType::f32, "normal_: CPU kernel supports float32/float64, got ", dt);
      // Two pairs per block: elements 4b..4b+1 from words 0-1, 4b+2..4b+3 from words 2-3.
      fill_blocks<4>(out.data_ptr<float>(), n, key, first, [&](const auto& w, auto& v) {
        for (int l = 0; l < kLanes; ++l) {
          for (int pair = 0; pair < 2; ++pair) {
            double c, s;
            box_muller(Philox::to_float(w[2 * pair][l]), Philox::to_float(w[2 * pair + 1][l]), &c, &s);
            v[2 * pair][l] = static_cast<float>(p0 + p1 * c);
            v[2 * pair + 1][l] = static_cast<float>(p0 + p1 * s);
          }
        }
      });
    }
    if (!out.is_same(out_in)) copy(out, out_in);
    return;
  }
  // Uniforms in [0, 1): a float per word, a double per two words. map(u) gives the element.
  auto uniform_fill = [&](auto* ptr, const auto& map) {
    if (dbl) {
      fill_blocks<2>(ptr, n, key, first, [&](const auto& w, auto& v) {
        for (int l = 0; l < kLanes; ++l) {
          v[0][l] = map(Philox::to_double(w[0][l], w[1][l]));
          v[1][l] = map(Philox::to_double(w[2][l], w[3][l]));
        }
      });
    } else {
      fill_blocks<4>(ptr, n, key, first, [&](const auto& w, auto& v) {
        for (int j = 0; j < 4; ++j)
          for (int l = 0; l < kLanes; ++l) v[j][l] = map(static_cast<double>(Philox::to_float(w[j][l])));
      });
    }
  };
  if (op == RandomOp::uniform) {
    if (dbl) {
      uniform_fill(out.data_ptr<double>(), [&](double u) { return p0 + (p1 - p0) * u; });
    } else {
      NABLA_CHECK(DTypeError, dt == DType::f32, "uniform_: CPU kernel supports float32/float64, got ", dt);
      // Rounding can land on the excluded upper bound; keep [from, to) by clamping to the float
      // below it (a min, not a branch, so the map vectorizes).
      const float below_to = p1 > p0 ? std::nextafter(static_cast<float>(p1), -INFINITY) : INFINITY;
      uniform_fill(out.data_ptr<float>(),
                   [&](double u) { return std::min(static_cast<float>(p0 + (p1 - p0) * u), below_to); });
    }
  } else {  // bernoulli(p0)
    visit_compute_dtype(dt, "bernoulli_", [&](auto tag) {
      using T = typename decltype(tag)::type;
      uniform_fill(static_cast<T*>(out.data_ptr()), [&](double u) { return static_cast<T>(u < p0); });
    });
  }
  if (!out.is_same(out_in)) copy(out, out_in);
}

void random_int(const Tensor& out_in, int64_t low, int64_t high, Generator& gen) {
  int64_t n = out_in.numel();
  if (n == 0) return;
  if (is_reduced_float(out_in.dtype())) {  // integers drawn as float32, rounded
    Tensor f = empty(out_in.sizes(), dtype(DType::f32));
    random_int(f, low, high, gen);
    copy(f, out_in);
    return;
  }
  Tensor out = out_in.is_contiguous() ? out_in : empty(out_in.sizes(), dtype(out_in.dtype()));
  const auto reserved = gen.reserve(static_cast<uint64_t>((n + 1) / 2));  // (not a structured binding: see random)
  const uint64_t key = reserved.first, first = reserved.second;
  uint64_t range = static_cast<uint64_t>(high - low);
  visit_compute_dtype(out.dtype(), "randint", [&](auto tag) {
    using T = typename decltype(tag)::type;
    fill_blocks<2>(static_cast<T*>(out.data_ptr()), n, key, first, [&](const auto& w, auto& v) {
      for (int l = 0; l < kLanes; ++l) {
        v[0][l] =
            static_cast<T>(low + static_cast<int64_t>(((static_cast<uint64_t>(w[0][l]) << 32) | w[1][l]) % range));
        v[1][l] =
            static_cast<T>(low + static_cast<int64_t>(((static_cast<uint64_t>(w[2][l]) << 32) | w[3][l]) % range));
      }
    });
  });
  if (!out.is_same(out_in)) copy(out, out_in);
}

}  // namespace nabla::cpu::NABLA_CPU_ISA
