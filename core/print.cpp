// Printing tensors the way PyTorch does (the layout, widths, modes, line breaks and summarization
// follow torch/_tensor_str.py exactly; the names are nabla's: dtype=float64, size=[0, 3]; grad_fn
// is PyTorch's name of the node, grad_fn=<MulBackward0>, as Node::torch_name gives it):
//   tensor([[1., 2.],
//           [3., 4.]], dtype=float64, requires_grad=True)
// Floats print as integers with a dot when they all are whole numbers, with 4 decimals otherwise,
// and in scientific notation when their magnitudes span too wide a range. Large tensors are
// summarized with "..." (threshold 1000 elements, 3 items at each end).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <mutex>
#include <sstream>

#include "core/graph.h"
#include "core/impl.h"
#include "core/spectral.h"

namespace nabla {

namespace {

std::mutex g_print_mu;
PrintOptions g_opts;

PrintOptions options() {
  std::lock_guard lock(g_print_mu);
  return g_opts;
}

enum class Mode { integer, fixed, sci, int_like_float, boolean };

struct Formatter {
  Mode mode = Mode::fixed;
  int precision = 4;
  size_t width = 1;

  std::string raw(double v) const {
    char buf[64];
    if (mode == Mode::boolean) return v != 0 ? "True" : "False";
    if (mode == Mode::integer) {
      std::snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(v));
      return buf;
    }
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (mode == Mode::int_like_float) {
      std::snprintf(buf, sizeof(buf), "%.0f.", v);
      return buf;
    }
    if (mode == Mode::sci) {
      std::snprintf(buf, sizeof(buf), "%.*e", precision, v);
      return buf;
    }
    std::snprintf(buf, sizeof(buf), "%.*f", precision, v);
    return buf;
  }
  std::string operator()(double v) const {
    std::string s = raw(v);
    return s.size() < width ? std::string(width - s.size(), ' ') + s : s;
  }
};

// The values that will be shown (respecting summarization), as doubles, in row-major order.
void collect(const Tensor& t, bool summarize, int64_t edge, std::vector<double>& out) {
  if (t.dim() == 0) {
    out.push_back(t.item().to_double());
    return;
  }
  int64_t n = t.sizes()[0];
  auto visit = [&](int64_t i) { collect(t.select(0, i), summarize, edge, out); };
  if (summarize && n > 2 * edge) {
    for (int64_t i = 0; i < edge; ++i) visit(i);
    for (int64_t i = n - edge; i < n; ++i) visit(i);
  } else {
    for (int64_t i = 0; i < n; ++i) visit(i);
  }
}

Formatter make_formatter(const Tensor& t, const std::vector<double>& vals, int precision) {
  Formatter f;
  f.precision = precision;
  if (!is_floating(t.dtype())) {
    f.mode = t.dtype() == DType::boolean ? Mode::boolean : Mode::integer;
    for (double v : vals) f.width = std::max(f.width, f.raw(v).size());
    return f;
  }
  // As PyTorch's _Formatter: the mode and the width come from the nonzero finite values only
  // (zeros, nan and inf are padded to that width, or overflow it).
  std::vector<double> nz;
  for (double v : vals)
    if (std::isfinite(v) && v != 0) nz.push_back(v);
  f.mode = Mode::int_like_float;
  if (nz.empty()) return f;
  bool int_mode = std::all_of(nz.begin(), nz.end(), [](double v) { return std::ceil(v) == v; });
  double mx = 0, mn = std::numeric_limits<double>::infinity();
  for (double v : nz) {
    mx = std::max(mx, std::fabs(v));
    mn = std::min(mn, std::fabs(v));
  }
  if (int_mode) f.mode = (mx / mn > 1000.0 || mx > 1e8) ? Mode::sci : Mode::int_like_float;
  else f.mode = (mx / mn > 1000.0 || mx > 1e8 || mn < 1e-4) ? Mode::sci : Mode::fixed;
  for (double v : nz) f.width = std::max(f.width, f.raw(v).size());
  return f;
}

// One element's text: a real value through its formatter, or a complex one as PyTorch writes it,
// the real and imaginary parts each through their own formatter: "1.5000-2.0000j".
struct ElementFormatter {
  Formatter re, im;
  bool complex = false;
  size_t width = 1;
  std::string operator()(const Tensor& t0) const {
    if (!complex) return re(t0.item().to_double());
    Tensor p = view_as_real(t0);
    std::string r = re(p.select(0, 0).item().to_double());
    std::string i = im(p.select(0, 1).item().to_double()) + "j";
    i.erase(0, i.find_first_not_of(' '));
    return i[0] == '-' || i[0] == '+' ? r + i : r + "+" + i;
  }
};

void format_rec(std::ostream& os, const Tensor& t, const ElementFormatter& f, size_t indent, bool summarize,
                const PrintOptions& o) {
  if (t.dim() == 0) {
    os << f(t);
    return;
  }
  int64_t n = t.sizes()[0];
  bool cut = summarize && n > 2 * o.edgeitems;
  os << '[';
  if (t.dim() == 1) {
    // Wrap long rows at linewidth.
    size_t per_line = std::max<size_t>(1, (o.linewidth - indent) / (f.width + 2));
    size_t col = 0;
    auto emit = [&](const std::string& s, bool last) {
      os << s;
      if (!last) {
        os << ',';
        if (++col % per_line == 0) os << '\n' << std::string(indent + 1, ' ');
        else os << ' ';
      }
    };
    for (int64_t i = 0; i < n; ++i) {
      if (cut && i == o.edgeitems) {
        emit(" ...", false);  // with a leading space, as PyTorch
        i = n - o.edgeitems;
      }
      emit(f(t.select(0, i)), i == n - 1);
    }
  } else {
    // Built by appends: GCC 12 warns (-Wrestrict, a false positive) on "," + std::string(...).
    std::string sep(1, ',');
    sep.append(static_cast<size_t>(t.dim() - 1), '\n').append(static_cast<size_t>(indent + 1), ' ');
    for (int64_t i = 0; i < n; ++i) {
      if (cut && i == o.edgeitems) {
        os << "..." << sep;
        i = n - o.edgeitems;
      }
      format_rec(os, t.select(0, i), f, indent + 1, summarize, o);
      if (i != n - 1) os << sep;
    }
  }
  os << ']';
}

}  // namespace

void set_print_options(const PrintOptions& opts) {
  std::lock_guard lock(g_print_mu);
  g_opts = opts;
}

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  PrintOptions o = options();
  autograd::NoGradGuard ng;
  Tensor t = is_cpu() ? detach() : detach().to(kCPU);
  if (!is_floating(t.dtype()) && !t.is_complex() && t.dtype() != DType::boolean && t.dtype() != DType::i64 &&
      t.dtype() != DType::i32 && t.dtype() != DType::u8)
    t = t.to(DType::f32);
  if (is_reduced_float(t.dtype())) t = t.to(DType::f32);
  std::ostringstream os;
  os << "tensor(";
  bool empty = t.numel() == 0;
  if (empty) {
    os << "[]";
  } else {
    bool summarize = t.numel() > o.threshold;
    ElementFormatter f;
    if (t.is_complex()) {
      Tensor r = view_as_real(t);
      std::vector<double> re_vals, im_vals;
      collect(r.select(-1, 0), summarize, o.edgeitems, re_vals);
      collect(r.select(-1, 1), summarize, o.edgeitems, im_vals);
      f.re = make_formatter(r, re_vals, o.precision);
      f.im = make_formatter(r, im_vals, o.precision);
      f.complex = true;
      f.width = f.re.width + f.im.width + 1;
    } else {
      std::vector<double> vals;
      collect(t, summarize, o.edgeitems, vals);
      f.re = make_formatter(t, vals, o.precision);
      f.width = f.re.width;
    }
    format_rec(os, t, f, 7, summarize, o);
  }
  // Suffixes as PyTorch's _add_suffixes: on the same line while it fits in linewidth, else on a
  // new line indented under the opening parenthesis.
  std::vector<std::string> suffixes;
  if (empty && !(dim() == 1)) suffixes.push_back(internal::str("size=", sizes()));
  bool default_dtype = dtype() == DType::f32 || dtype() == DType::i64 || dtype() == DType::boolean ||
                       dtype() == DType::c64;  // PyTorch's default complex dtype
  if (!default_dtype || (empty && dtype() != DType::f32)) suffixes.push_back(internal::str("dtype=", dtype()));
  if (is_cuda()) suffixes.push_back(internal::str("device='", device(), "'"));
  if (grad_fn()) suffixes.push_back(internal::str("grad_fn=<", grad_fn()->torch_name(), ">"));
  else if (requires_grad()) suffixes.push_back("requires_grad=True");
  std::string body = os.str();
  size_t nl = body.rfind('\n');
  int64_t last_line = static_cast<int64_t>(body.size()) - (nl == std::string::npos ? -1 : static_cast<int64_t>(nl)) + 1;
  const int64_t indent = 7;  // strlen("tensor(")
  for (const std::string& sfx : suffixes) {
    int64_t len = static_cast<int64_t>(sfx.size());
    if (last_line + len + 2 > o.linewidth) {
      os << ",\n" << std::string(indent, ' ') << sfx;
      last_line = indent + len;
    } else {
      os << ", " << sfx;
      last_line += len + 2;
    }
  }
  os << ')';
  return os.str();
}

}  // namespace nabla
