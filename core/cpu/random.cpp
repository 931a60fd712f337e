// CPU random kernels. Element i of the output depends only on (seed, offset, i), so results are the
// same for any thread count (and match the CUDA kernels, which use the same mapping).
#include <algorithm>
#include <cmath>

#include "core/cpu/kernels.h"
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

// Fills a contiguous buffer in parallel, K elements per Philox block: g(blk, vals) writes the K
// values of block blk (elements K*blk ..), so each block's four words are computed once.
template <int K, class T, class G>
void fill_blocks(T* p, int64_t n, const G& g) {
  int64_t blocks = (n + K - 1) / K;
  parallel_for(0, blocks, 16384 / K, [&](int64_t b, int64_t e) {
    T vals[K];
    for (int64_t blk = b; blk < e; ++blk) {
      g(blk, vals);
      int64_t base = blk * K, m = std::min<int64_t>(K, n - base);
      for (int64_t j = 0; j < m; ++j) p[base + j] = vals[j];
    }
  });
}
}  // namespace

void random(RandomOp op, const Tensor& out_in, double p0, double p1, Generator& gen) {
  int64_t n = out_in.numel();
  if (n == 0) return;
  Tensor out = out_in.is_contiguous() ? out_in : empty(out_in.sizes(), dtype(out_in.dtype()));
  DType dt = out.dtype();
  bool dbl = dt == DType::f64;
  // Blocks of 4 words: floats use one word per element, doubles two.
  int64_t per_block = dbl ? 2 : 4;
  auto [key, first] = gen.reserve(static_cast<uint64_t>((n + per_block - 1) / per_block));
  auto word = [key = key, first = first](int64_t blk, uint32_t w[4]) { Philox::block(key, first + blk, w); };

  if (op == RandomOp::normal) {
    if (dbl) {
      // One Box-Muller pair per block: elements 2b and 2b+1 take its cosine and sine branches.
      fill_blocks<2>(out.data_ptr<double>(), n, [&](int64_t blk, double v[2]) {
        uint32_t w[4];
        word(blk, w);
        double c, s;
        box_muller(Philox::to_double(w[0], w[1]), Philox::to_double(w[2], w[3]), &c, &s);
        v[0] = p0 + p1 * c;
        v[1] = p0 + p1 * s;
      });
    } else {
      check<DTypeError>(dt == DType::f32, "normal_: CPU kernel supports float32/float64, got ", dt);
      // Two pairs per block: elements 4b..4b+1 from words 0-1, 4b+2..4b+3 from words 2-3.
      fill_blocks<4>(out.data_ptr<float>(), n, [&](int64_t blk, float v[4]) {
        uint32_t w[4];
        word(blk, w);
        for (int pair = 0; pair < 2; ++pair) {
          double c, s;
          box_muller(Philox::to_float(w[2 * pair]), Philox::to_float(w[2 * pair + 1]), &c, &s);
          v[2 * pair] = static_cast<float>(p0 + p1 * c);
          v[2 * pair + 1] = static_cast<float>(p0 + p1 * s);
        }
      });
    }
    if (!out.is_same(out_in)) copy(out, out_in);
    return;
  }
  // Uniforms in [0, 1): a float per word, a double per two words. map(u) gives the element.
  auto uniform_fill = [&](auto* ptr, const auto& map) {
    if (dbl) {
      fill_blocks<2>(ptr, n, [&](int64_t blk, auto* v) {
        uint32_t w[4];
        word(blk, w);
        v[0] = map(Philox::to_double(w[0], w[1]));
        v[1] = map(Philox::to_double(w[2], w[3]));
      });
    } else {
      fill_blocks<4>(ptr, n, [&](int64_t blk, auto* v) {
        uint32_t w[4];
        word(blk, w);
        for (int j = 0; j < 4; ++j) v[j] = map(static_cast<double>(Philox::to_float(w[j])));
      });
    }
  };
  if (op == RandomOp::uniform) {
    if (dbl) {
      uniform_fill(out.data_ptr<double>(), [&](double u) { return p0 + (p1 - p0) * u; });
    } else {
      check<DTypeError>(dt == DType::f32, "uniform_: CPU kernel supports float32/float64, got ", dt);
      uniform_fill(out.data_ptr<float>(), [&](double u) {
        float v = static_cast<float>(p0 + (p1 - p0) * u);
        // Rounding can land on the excluded upper bound; keep [from, to).
        return v >= static_cast<float>(p1) && p1 > p0 ? std::nextafter(static_cast<float>(p1), -INFINITY) : v;
      });
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
  Tensor out = out_in.is_contiguous() ? out_in : empty(out_in.sizes(), dtype(out_in.dtype()));
  auto [key, first] = gen.reserve(static_cast<uint64_t>((n + 1) / 2));
  uint64_t range = static_cast<uint64_t>(high - low);
  visit_compute_dtype(out.dtype(), "randint", [&](auto tag) {
    using T = typename decltype(tag)::type;
    fill_blocks<2>(static_cast<T*>(out.data_ptr()), n, [&](int64_t blk, T v[2]) {
      uint32_t w[4];
      Philox::block(key, first + static_cast<uint64_t>(blk), w);
      v[0] = static_cast<T>(low + static_cast<int64_t>(((static_cast<uint64_t>(w[0]) << 32) | w[1]) % range));
      v[1] = static_cast<T>(low + static_cast<int64_t>(((static_cast<uint64_t>(w[2]) << 32) | w[3]) % range));
    });
  });
  if (!out.is_same(out_in)) copy(out, out_in);
}

}  // namespace nabla::cpu::NABLA_CPU_ISA
