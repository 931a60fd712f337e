// CPU indexing kernels: index_select, index_add, gather, scatter, nonzero.
#include <cstring>
#include <limits>

#include "core/cpu/kernels.h"
#include "core/cpu/loops.h"
#include "core/impl.h"

namespace nabla::cpu::NABLA_CPU_ISA {

namespace {

void check_index(const char* op, int64_t v, int64_t n, int64_t dim) {
  if (v < -n || v >= n) [[unlikely]]
    throw IndexError(internal::str(op, ": index ", v, " is out of range for dim ", dim, " of size ", n));
}

// A view of `t` over `index`'s shape whose stride along `dim` is 0: its pointer at each position of
// the index tensor is the start of the line the index selects into.
Tensor line_view(const Tensor& t, const Tensor& index, int64_t dim) {
  Shape strides = t.strides();
  strides[dim] = 0;
  return internal::make_view(t, index.sizes(), strides, t.storage_offset());
}

}  // namespace

void index_select(const Tensor& x_in, int64_t dim, const Tensor& index_in, const Tensor& out) {
  Tensor x = contig(x_in), index = contig(index_in);
  if (x.dim() == 0) {
    const int64_t* ip = index.data_ptr<int64_t>();
    for (int64_t j = 0; j < index.numel(); ++j) check_index("index_select", ip[j], 1, 0);
    // Every selected element is the one value: read it through a stride-0 view.
    copy(internal::make_view(x, out.sizes(), Shape(out.dim(), 0), x.storage_offset()), out);
    return;
  }
  // Plain variables, not a structured binding: the lambdas below capture them (clang < 16 cannot).
  const internal::Lines lines = internal::lines_of(x, dim);
  const int64_t outer = lines.outer, n = lines.len, inner = lines.inner;
  const int64_t m = index.numel();
  const int64_t* ip = index.data_ptr<int64_t>();
  for (int64_t j = 0; j < m; ++j) check_index("index_select", ip[j], n, dim);
  Tensor oc = out.is_contiguous() ? out : internal::make_empty(out.sizes(), out.dtype(), out.device());
  size_t es = x.element_size();
  const char* xp = static_cast<const char*>(x.data_ptr());
  char* op = static_cast<char*>(oc.data_ptr());
  size_t row = static_cast<size_t>(inner) * es;
  parallel_for(0, outer * m, std::max<int64_t>(1, 65536 / std::max<int64_t>(inner, 1)), [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      int64_t o = k / m, j = k % m, src = ip[j] < 0 ? ip[j] + n : ip[j];
      std::memcpy(op + static_cast<size_t>(k) * row, xp + static_cast<size_t>(o * n + src) * row, row);
    }
  });
  if (!oc.is_same(out)) copy(oc, out);
}

void index_add(const Tensor& out, int64_t dim, const Tensor& index_in, const Tensor& src_in) {
  if (lowp::is_lowp(out.dtype())) {  // duplicate indices sum in float32, each element rounded once
    NABLA_CHECK(ValueError, out.is_contiguous(), "index_add: destination must be contiguous");
    Tensor acc = as_f32(out);
    cpu::NABLA_CPU_ISA::index_add(acc, dim, index_in, as_f32(src_in));
    return store_out(acc, out);
  }
  Tensor index = contig(index_in), src = contig(src_in);
  NABLA_CHECK(ValueError, out.is_contiguous(), "index_add: destination must be contiguous");
  if (out.dim() == 0) {  // as a 1-element 1-D tensor
    cpu::NABLA_CPU_ISA::index_add(internal::make_view(out, {1}, {1}, out.storage_offset()), 0, index,
                                  internal::make_view(src, {src.numel()}, {1}, src.storage_offset()));
    return;
  }
  const internal::Lines lines = internal::lines_of(out, dim);
  const int64_t outer = lines.outer, n = lines.len, inner = lines.inner;
  const int64_t m = index.numel();
  const int64_t* ip = index.data_ptr<int64_t>();
  for (int64_t j = 0; j < m; ++j) check_index("index_add", ip[j], n, dim);
  visit_compute_dtype(out.dtype(), "index_add", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* op = static_cast<T*>(out.data_ptr());
    const T* sp = static_cast<const T*>(src.data_ptr());
    auto add_rows = [&](int64_t o, int64_t i0, int64_t i1) {
      for (int64_t j = 0; j < m; ++j) {
        int64_t dst = ip[j] < 0 ? ip[j] + n : ip[j];
        T* d = op + (o * n + dst) * inner;
        const T* s = sp + (o * m + j) * inner;
        if constexpr (std::is_same_v<T, bool>) {
          for (int64_t i = i0; i < i1; ++i) d[i] = d[i] || s[i];
        } else {
          for (int64_t i = i0; i < i1; ++i) d[i] += s[i];
        }
      }
    };
    if (outer > 1) {
      parallel_for(0, outer, 1, [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o) add_rows(o, 0, inner);
      });
    } else {
      parallel_for(0, inner, 4096, [&](int64_t b, int64_t e) { add_rows(0, b, e); });
    }
  });
}

void gather(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out) {
  if (out.numel() == 0) return;
  Tensor xv = x.dim() == 0 ? x : line_view(x, index, dim);
  int64_t n = x.dim() == 0 ? 1 : x.sizes()[dim];
  int64_t xs = x.dim() == 0 ? 0 : x.strides()[dim] * static_cast<int64_t>(x.element_size());
  Loop L = make_loop({&out, &index, &xv});
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    for_each(L, [&](char** p, const int64_t* s, int64_t cnt) {
      for (int64_t i = 0; i < cnt; ++i) {
        int64_t v = *reinterpret_cast<const int64_t*>(p[1] + i * s[1]);
        check_index("gather", v, n, dim);
        if (v < 0) v += n;
        *reinterpret_cast<T*>(p[0] + i * s[0]) = *reinterpret_cast<const T*>(p[2] + i * s[2] + v * xs);
      }
    });
  });
}

void scatter(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src, bool accumulate) {
  if (index.numel() == 0) return;
  Tensor ov = out.dim() == 0 ? out : line_view(out, index, dim);
  int64_t n = out.dim() == 0 ? 1 : out.sizes()[dim];
  int64_t os = out.dim() == 0 ? 0 : out.strides()[dim] * static_cast<int64_t>(out.element_size());
  Loop L = make_loop({&index, &src, &ov});
  constexpr int64_t kSerial = std::numeric_limits<int64_t>::max();  // duplicates: stay on one thread
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    for_each(
        L,
        [&](char** p, const int64_t* s, int64_t cnt) {
          for (int64_t i = 0; i < cnt; ++i) {
            int64_t v = *reinterpret_cast<const int64_t*>(p[0] + i * s[0]);
            check_index("scatter", v, n, dim);
            if (v < 0) v += n;
            T* d = reinterpret_cast<T*>(p[2] + i * s[2] + v * os);
            T sv = *reinterpret_cast<const T*>(p[1] + i * s[1]);
            if (accumulate) {
              if constexpr (std::is_same_v<T, bool>) *d = *d || sv;
              else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) *d = T(float(*d) + float(sv));
              else *d = static_cast<T>(*d + sv);
            } else {
              *d = sv;
            }
          }
        },
        kSerial);
  });
}

Tensor nonzero(const Tensor& x_in) {
  Tensor x = contig(x_in);
  int64_t nd = x.dim(), n = x.numel();
  std::vector<int64_t> hits;
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = static_cast<const T*>(x.data_ptr());
    for (int64_t i = 0; i < n; ++i) {
      bool nz;
      if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) nz = static_cast<float>(p[i]) != 0.0f;
      else nz = p[i] != T(0);
      if (nz) hits.push_back(i);
    }
  });
  Tensor out = internal::make_empty({static_cast<int64_t>(hits.size()), nd}, DType::i64, kCPU);
  int64_t* op = out.data_ptr<int64_t>();
  for (size_t k = 0; k < hits.size(); ++k) {
    int64_t r = hits[k];
    for (int64_t d = nd - 1; d >= 0; --d) {
      op[k * nd + d] = r % x.sizes()[d];
      r /= x.sizes()[d];
    }
  }
  return out;
}

}  // namespace nabla::cpu::NABLA_CPU_ISA
