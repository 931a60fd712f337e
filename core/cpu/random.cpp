// CPU random kernels. Element i of the output depends only on (seed, offset, i), so results are the
// same for any thread count (and match the CUDA kernels, which use the same mapping).
#include <cmath>

#include "core/cpu/kernels.h"
#include "core/generator.h"
#include "core/parallel.h"

namespace nabla::cpu::NABLA_CPU_ISA {

namespace {
// Box-Muller on two uniforms in [0, 1): returns the cosine (which=0) or sine (which=1) branch.
inline double box_muller(double u1, double u2, int which) {
  double r = std::sqrt(-2.0 * std::log1p(-u1));
  double t = 6.283185307179586 * u2;
  return which ? r * std::sin(t) : r * std::cos(t);
}

// Calls f(i, uniform_float_or_double) etc. over a contiguous buffer in parallel.
template <class T, class F>
void fill_contiguous(T* p, int64_t n, const F& f) {
  parallel_for(0, n, 16384, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) p[i] = f(i);
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
      fill_contiguous(out.data_ptr<double>(), n, [&](int64_t i) {
        uint32_t w[4];
        word(i / 2, w);
        double u1 = Philox::to_double(w[0], w[1]), u2 = Philox::to_double(w[2], w[3]);
        return p0 + p1 * box_muller(u1, u2, static_cast<int>(i % 2));
      });
    } else {
      check<DTypeError>(dt == DType::f32, "normal_: CPU kernel supports float32/float64, got ", dt);
      fill_contiguous(out.data_ptr<float>(), n, [&](int64_t i) {
        uint32_t w[4];
        word(i / 4, w);
        int pair = static_cast<int>((i % 4) / 2);
        double u1 = Philox::to_float(w[2 * pair]), u2 = Philox::to_float(w[2 * pair + 1]);
        return static_cast<float>(p0 + p1 * box_muller(u1, u2, static_cast<int>(i % 2)));
      });
    }
  } else {
    auto uniform = [&](int64_t i) -> double {
      uint32_t w[4];
      if (dbl) {
        word(i / 2, w);
        return i % 2 ? Philox::to_double(w[2], w[3]) : Philox::to_double(w[0], w[1]);
      }
      word(i / 4, w);
      return Philox::to_float(w[i % 4]);
    };
    if (op == RandomOp::uniform) {
      if (dbl) {
        fill_contiguous(out.data_ptr<double>(), n, [&](int64_t i) { return p0 + (p1 - p0) * uniform(i); });
      } else {
        check<DTypeError>(dt == DType::f32, "uniform_: CPU kernel supports float32/float64, got ", dt);
        fill_contiguous(out.data_ptr<float>(), n, [&](int64_t i) {
          float v = static_cast<float>(p0 + (p1 - p0) * uniform(i));
          // Rounding can land on the excluded upper bound; keep [from, to).
          return v >= static_cast<float>(p1) && p1 > p0 ? std::nextafter(static_cast<float>(p1), -INFINITY) : v;
        });
      }
    } else {  // bernoulli(p0)
      visit_compute_dtype(dt, "bernoulli_", [&](auto tag) {
        using T = typename decltype(tag)::type;
        fill_contiguous(static_cast<T*>(out.data_ptr()), n, [&](int64_t i) { return static_cast<T>(uniform(i) < p0); });
      });
    }
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
    fill_contiguous(static_cast<T*>(out.data_ptr()), n, [&](int64_t i) {
      uint32_t w[4];
      Philox::block(key, first + static_cast<uint64_t>(i / 2), w);
      uint64_t r = i % 2 ? (static_cast<uint64_t>(w[2]) << 32 | w[3]) : (static_cast<uint64_t>(w[0]) << 32 | w[1]);
      return static_cast<T>(low + static_cast<int64_t>(r % range));
    });
  });
  if (!out.is_same(out_in)) copy(out, out_in);
}

}  // namespace nabla::cpu::NABLA_CPU_ISA
