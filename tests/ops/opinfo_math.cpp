// Registry entries for the math ops: lgamma, digamma, polygamma, nan_to_num, div with a
// rounding mode (core/ops.h) and the statistics, scans and counting ops of core/math_ops.h. See
// opinfo.h. Samples that pick elements (median, kthvalue, mode, cummax) draw distinct values, so the
// chosen indices (and gradients) are PyTorch's; ties are tested by value in test_math_ops.cpp.
#include <gtest/gtest.h>

#include <cmath>

#include "opinfo.h"

namespace nabla::testing {
namespace {

using I = const Inputs&;

Outputs one(Tensor t) { return {std::move(t)}; }
template <class A, class B>
void push2(Outputs& o, const std::tuple<A, B>& t) {
  o.push_back(std::get<0>(t));
  o.push_back(std::get<1>(t));
}

// ---- scalar references, independent of core/scalar_math.h ----------------------------------------
// sum_{k>=0} (x + k)^-(s) by 40 terms and the Euler-Maclaurin tail (x > 0).
double hurwitz_ref(double s, double x) {
  const int N = 40;
  double sum = 0;
  for (int k = 0; k < N; ++k) sum += std::pow(x + k, -s);
  const double a = x + N;
  sum += std::pow(a, 1 - s) / (s - 1) + 0.5 * std::pow(a, -s) + s / 12 * std::pow(a, -s - 1) -
         s * (s + 1) * (s + 2) / 720 * std::pow(a, -s - 3) +
         s * (s + 1) * (s + 2) * (s + 3) * (s + 4) / 30240 * std::pow(a, -s - 5);
  return sum;
}
// digamma by the recurrence up to x >= 30 and the asymptotic series; reflection below 0.
double digamma_ref(double x) {
  const double pi = 3.14159265358979323846;
  if (x < 0) return digamma_ref(1 - x) - pi / std::tan(pi * x);
  double r = 0;
  while (x < 30) {
    r -= 1 / x;
    x += 1;
  }
  const double z = 1 / (x * x);
  return r + std::log(x) - 0.5 / x - z * (1. / 12 - z * (1. / 120 - z * (1. / 252 - z * (1. / 240 - z / 132))));
}
double polygamma2_ref(double x) { return -2 * hurwitz_ref(3, x); }

std::vector<Sample> distinct_red() {
  return {{{arg({3, 4})}, "2d"}, {{arg({2, 3, 4})}, "3d"}, {{arg_t({4, 3})}, "noncontiguous"}, {{arg({})}, "scalar"}};
}

std::vector<OpInfo> math_ops() {
  const double nan = std::nan(""), inf = INFINITY;
  std::vector<OpInfo> ops;
  // ---- elementwise ----
  ops.push_back({.name = "lgamma",
                 .torch = "torch.lgamma(x[0])",
                 .fn = [](I x) { return one(lgamma(x[0])); },
                 .samples = unary_samples(0.2, 4),
                 .ref = scalar_ref([](double v) { return std::lgamma(v); }),
                 .sweep_dtypes = true});
  ops.push_back({.name = "lgamma_negative",
                 .ops = {OpId::lgamma},
                 .torch = "torch.lgamma(x[0])",
                 .fn = [](I x) { return one(lgamma(x[0])); },
                 .samples = {{{arg({2, 3}, -2.9, -2.1)}, "between_poles"}},
                 .ref = scalar_ref([](double v) { return std::lgamma(v); })});
  ops.push_back({.name = "digamma",
                 .torch = "torch.digamma(x[0])",
                 .fn = [](I x) { return one(digamma(x[0])); },
                 .samples = unary_samples(0.3, 4),
                 .ref = scalar_ref(digamma_ref),
                 .sweep_dtypes = true});
  ops.push_back({.name = "digamma_negative",
                 .ops = {OpId::digamma},
                 .torch = "torch.digamma(x[0])",
                 .fn = [](I x) { return one(digamma(x[0])); },
                 .samples = {{{arg({2, 3}, -1.8, -1.2)}, "reflection"}, {{arg({3}, 11, 30)}, "asymptotic"}},
                 .ref = scalar_ref(digamma_ref)});
  ops.push_back({.name = "polygamma",
                 .torch = "torch.polygamma(2, x[0])",
                 .fn = [](I x) { return one(polygamma(2, x[0])); },
                 .samples = unary_samples(0.5, 4),
                 .f32_tol = 1e-3,
                 .ref = scalar_ref(polygamma2_ref)});
  ops.push_back({.name = "polygamma_n",
                 .ops = {OpId::polygamma},
                 .torch = "(torch.polygamma(0, x[0]), torch.polygamma(1, x[0]), torch.polygamma(3, x[0]))",
                 .fn =
                     [](I x) {
                       return Outputs{polygamma(0, x[0]), polygamma(1, x[0]), polygamma(3, x[0])};
                     },
                 .samples = {{{arg({2, 3}, 0.5, 4)}, "2d"}, {{arg({4}, -1.7, -1.3)}, "negative"}},
                 .f32_tol = 1e-3});
  ops.push_back({.name = "nan_to_num",
                 .torch = "(torch.nan_to_num(x[0]), torch.nan_to_num(x[0], nan=1.5, posinf=2.0, neginf=-3.0))",
                 .fn =
                     [](I x) {
                       return Outputs{nan_to_num(x[0]), nan_to_num(x[0], 1.5, 2.0, -3.0)};
                     },
                 .samples = {{{arg({2, 3})}, "2d"},
                             {{arg_t({3, 2})}, "noncontiguous"},
                             {{arg({})}, "scalar"},
                             {{arg({0, 3})}, "empty"}},
                 .sweep_dtypes = true});
  // The default replacements are the dtype's extremes, so float32 and float64 results differ.
  ops.push_back({.name = "nan_to_num_nonfinite",
                 .ops = {OpId::nan_to_num},
                 .torch = "(torch.nan_to_num(x[0]), torch.nan_to_num(x[0], nan=1.5, posinf=2.0, neginf=-3.0))",
                 .fn =
                     [](I x) {
                       return Outputs{nan_to_num(x[0]), nan_to_num(x[0], 1.5, 2.0, -3.0)};
                     },
                 .samples = {{{fixed_arg({2, 3}, {nan, inf, -inf, 1, -2, 0.5}, false)}, "nan_inf"}},
                 .differentiable = false,
                 .supports_float32 = false});
  ops.push_back(
      {.name = "div_rounding",
       .ops = {OpId::div},
       .torch = "(torch.div(x[0], x[1], rounding_mode='trunc'), torch.div(x[0], x[1], rounding_mode='floor'), "
                "torch.div(x[0], x[1], rounding_mode=None))",
       .fn =
           [](I x) {
             return Outputs{div(x[0], x[1], "trunc"), div(x[0], x[1], "floor"), div(x[0], x[1], std::nullopt)};
           },
       .samples = binary_samples(-5, 5, 0.3, 2),
       .sweep_dtypes = true});
  ops.push_back({.name = "div_rounding_scalar",
                 .ops = {OpId::div},
                 .torch = "(torch.div(x[0], -1.5, rounding_mode='trunc'), torch.div(x[0], 0.7, rounding_mode='floor'))",
                 .fn =
                     [](I x) {
                       return Outputs{div(x[0], -1.5, "trunc"), div(x[0], 0.7, "floor")};
                     },
                 .samples = unary_samples(-5, 5)});

  // ---- sorting-based ----
  ops.push_back({.name = "median",
                 .torch = "x[0].median()",
                 .fn = [](I x) { return one(median(x[0])); },
                 .samples = distinct_red()});
  ops.push_back({.name = "median_dim",
                 .ops = {OpId::median},
                 .torch = "(*x[0].median(-1), *x[0].median(0, keepdim=True))",
                 .fn =
                     [](I x) {
                       Outputs o;
                       push2(o, median(x[0], -1));
                       push2(o, median(x[0], 0, true));
                       return o;
                     },
                 .samples = distinct_red()});
  ops.push_back(
      {.name = "median_nan",
       .ops = {OpId::median},
       .torch = "(x[0].median(), *x[0].median(-1), *x[0].median(0))",
       .fn =
           [](I x) {
             Outputs o{median(x[0])};
             push2(o, median(x[0], -1));
             push2(o, median(x[0], 0));
             return o;
           },
       .samples = {{{fixed_arg({3, 4}, {0.3, nan, -0.2, 0.8, 0.1, 0.5, -0.7, 0.9, 0.4, -0.1, nan, 0.2}, false)},
                    "nan"}},
       .differentiable = false});
  std::vector<Sample> with_nan = {
      {{fixed_arg({3, 4}, {0.3, nan, -0.2, 0.8, 0.1, 0.5, -0.7, 0.9, nan, nan, nan, 0.2})}, "nan"},
      {{arg({3, 4})}, "2d"},
      {{arg_t({4, 3})}, "noncontiguous"}};
  ops.push_back({.name = "nanmedian",
                 .torch = "x[0].nanmedian()",
                 .fn = [](I x) { return one(nanmedian(x[0])); },
                 .samples = with_nan});
  ops.push_back({.name = "nanmedian_dim",
                 .ops = {OpId::nanmedian},
                 .torch = "(*x[0].nanmedian(-1), *x[0].nanmedian(0, keepdim=True))",
                 .fn =
                     [](I x) {
                       Outputs o;
                       push2(o, nanmedian(x[0], -1));
                       push2(o, nanmedian(x[0], 0, true));
                       return o;
                     },
                 .samples = with_nan});
  ops.push_back({.name = "kthvalue",
                 .torch = "(*torch.kthvalue(x[0], 2), *torch.kthvalue(x[0], 1, 0, keepdim=True))",
                 .fn =
                     [](I x) {
                       Outputs o;
                       push2(o, kthvalue(x[0], 2));
                       push2(o, kthvalue(x[0], 1, 0, true));
                       return o;
                     },
                 .samples = {{{arg({3, 4})}, "2d"}, {{arg({2, 3, 4})}, "3d"}, {{arg_t({4, 3})}, "noncontiguous"}}});
  ops.push_back({.name = "mode",
                 .torch = "(*torch.mode(x[0]), *torch.mode(x[0], 0, keepdim=True))",
                 .fn =
                     [](I x) {
                       Outputs o;
                       push2(o, mode(x[0]));
                       push2(o, mode(x[0], 0, true));
                       return o;
                     },
                 .samples = distinct_red()});
  ops.push_back({.name = "mode_ties",
                 .ops = {OpId::mode},
                 .torch = "torch.mode(x[0])",
                 .fn =
                     [](I x) {
                       Outputs o;
                       push2(o, mode(x[0]));
                       return o;
                     },
                 .samples = {{{fixed_index({2, 6}, {3, 1, 3, 1, 2, 0, 4, 4, 4, 0, 0, 5})}, "int_ties"}},
                 .differentiable = false});
  const std::string qt = "torch.tensor([0.0, 0.25, 0.6, 1.0], dtype=x[0].dtype)";
  auto qfn = [](bool nanq) {
    return [nanq](I x) {
      auto Q = [&](const Tensor& a, auto q, std::optional<int64_t> d, bool k, const char* it) {
        return nanq ? nanquantile(a, q, d, k, it) : quantile(a, q, d, k, it);
      };
      Tensor q = tensor({0.0, 0.25, 0.6, 1.0}).to(x[0].device(), x[0].dtype());
      return Outputs{Q(x[0], 0.3, std::nullopt, false, "linear"),
                     Q(x[0], q, -1, true, "linear"),
                     Q(x[0], q, 0, false, "lower"),
                     Q(x[0], q, 0, false, "higher"),
                     Q(x[0], q, 0, false, "nearest"),
                     Q(x[0], q, 0, false, "midpoint"),
                     Q(x[0], 0.5, std::nullopt, true, "linear")};
    };
  };
  auto qtwin = [&](const char* f) {
    std::string s = std::string("(") + f + "(x[0], 0.3), " + f + "(x[0], " + qt + ", -1, keepdim=True), ";
    for (const char* it : {"lower", "higher", "nearest", "midpoint"})
      s += std::string(f) + "(x[0], " + qt + ", 0, interpolation='" + it + "'), ";
    return s + f + "(x[0], 0.5, keepdim=True))";
  };
  ops.push_back({.name = "quantile", .torch = qtwin("torch.quantile"), .fn = qfn(false), .samples = distinct_red()});
  ops.push_back({.name = "nanquantile", .torch = qtwin("torch.nanquantile"), .fn = qfn(true), .samples = with_nan});
  ops.push_back(
      {.name = "quantile_nan",
       .ops = {OpId::quantile},
       .torch = qtwin("torch.quantile"),
       .fn = qfn(false),
       .samples = {{{fixed_arg({3, 4}, {0.3, nan, -0.2, 0.8, 0.1, 0.5, -0.7, 0.9, 0.4, -0.1, 0.6, 0.2}, false)},
                    "nan"}},
       .differentiable = false});

  // ---- scans ----
  ops.push_back({.name = "cummax",
                 .torch = "(*torch.cummax(x[0], -1), *torch.cummax(x[0], 0))",
                 .fn =
                     [](I x) {
                       Outputs o;
                       push2(o, cummax(x[0], -1));
                       push2(o, cummax(x[0], 0));
                       return o;
                     },
                 .samples = distinct_red()});
  ops.push_back({.name = "cummin",
                 .torch = "(*torch.cummin(x[0], -1), *torch.cummin(x[0], 0))",
                 .fn =
                     [](I x) {
                       Outputs o;
                       push2(o, cummin(x[0], -1));
                       push2(o, cummin(x[0], 0));
                       return o;
                     },
                 .samples = distinct_red()});
  ops.push_back({.name = "cummax_ties",
                 .ops = {OpId::cummax},
                 .torch = "(*torch.cummax(x[0], -1), *torch.cummin(x[0], -1))",
                 .fn =
                     [](I x) {
                       Outputs o;
                       push2(o, cummax(x[0], -1));
                       push2(o, cummin(x[0], -1));
                       return o;
                     },
                 .samples = {{{fixed_arg({2, 5}, {1, 3, 3, nan, 2, 2, 2, 1, 1, 3}, false)}, "ties_nan"},
                             {{fixed_index({2, 4}, {2, 2, 1, 2, 0, 5, 5, 0})}, "int_ties"}},
                 .differentiable = false});
  ops.push_back({.name = "logcumsumexp",
                 .torch = "(torch.logcumsumexp(x[0], -1), torch.logcumsumexp(x[0], 0))",
                 .fn =
                     [](I x) {
                       return Outputs{logcumsumexp(x[0], -1), logcumsumexp(x[0], 0)};
                     },
                 .samples = {{{arg({3, 5})}, "2d"},
                             {{arg({2, 3, 4})}, "3d"},
                             {{arg_t({4, 3})}, "noncontiguous"},
                             {{arg({})}, "scalar"},
                             {{arg({9}, -3, 3)}, "length_9"},
                             {{fixed_arg({6}, {-800, 0.5, 700, -1, 701, -900})}, "wide_range"}}});

  // Empty inputs (reduced over the non-empty dim; PyTorch's results and errors on the empty one).
  ops.push_back({.name = "math_empty",
                 .torch =
                     "(*x[0].median(-1), *x[0].nanmedian(-1), *torch.kthvalue(x[0], 1, -1), *torch.mode(x[0], -1), "
                     "*torch.cummax(x[0], 0), *torch.cummin(x[0], -1), torch.logcumsumexp(x[0], 0), x[0].median())",
                 .fn =
                     [](I x) {
                       Outputs o;
                       push2(o, median(x[0], -1));
                       push2(o, nanmedian(x[0], -1));
                       push2(o, kthvalue(x[0], 1, -1));
                       push2(o, mode(x[0], -1));
                       push2(o, cummax(x[0], 0));
                       push2(o, cummin(x[0], -1));
                       o.push_back(logcumsumexp(x[0], 0));
                       o.push_back(median(x[0]));
                       return o;
                     },
                 .samples = {{{arg({0, 3})}, "empty"}},
                 .differentiable = false});

  // ---- counting and searching (no gradient) ----
  ops.push_back({.name = "histc",
                 .torch = "(torch.histc(x[0], 5, -1, 1), torch.histc(x[0], 4), torch.histc(x[0], 3, -0.5, 0.5))",
                 .fn =
                     [](I x) {
                       return Outputs{histc(x[0], 5, -1, 1), histc(x[0], 4), histc(x[0], 3, -0.5, 0.5)};
                     },
                 .samples = {{{arg({3, 4})}, "2d"},
                             {{arg_t({4, 3})}, "noncontiguous"},
                             {{arg({})}, "scalar"},
                             {{arg({0, 3})}, "empty"},
                             {{fixed_arg({6}, {-1, 1, 0, 0.5, 0.2, 1}, false)}, "edges"}},
                 .differentiable = false});
  ops.push_back({.name = "bincount",
                 .torch = "(torch.bincount(x[0]), torch.bincount(x[0], x[1]), torch.bincount(x[0], minlength=9))",
                 .fn =
                     [](I x) {
                       return Outputs{bincount(x[0]), bincount(x[0], x[1]), bincount(x[0], {}, 9)};
                     },
                 .samples = {{{index_arg({7}, 5), const_arg({7})}, "1d"},
                             {{fixed_index({4}, {0, 3, 3, 10}), fixed_arg({4}, {0.5, 1, 2, -1}, false)}, "gaps"},
                             {{index_arg({0}, 5), const_arg({0})}, "empty"}},
                 .differentiable = false});
  const std::string sorted6 = "[-0.8, -0.3, 0.0, 0.0, 0.4, 0.9]";
  ops.push_back({.name = "searchsorted",
                 .torch = "(torch.searchsorted(x[0], x[1]), torch.searchsorted(x[0], x[1], right=True), "
                          "torch.searchsorted(x[0], x[1], side='right', out_int32=True), torch.bucketize(x[1], x[0]), "
                          "torch.bucketize(x[1], x[0], right=True))",
                 .fn =
                     [](I x) {
                       return Outputs{searchsorted(x[0], x[1]), searchsorted(x[0], x[1], false, true),
                                      searchsorted(x[0], x[1], true, false, "right"), bucketize(x[1], x[0]),
                                      bucketize(x[1], x[0], false, true)};
                     },
                 .samples = {{{fixed_arg({6}, {-0.8, -0.3, 0.0, 0.0, 0.4, 0.9}, false), arg({3, 4})}, "1d"},
                             {{fixed_arg({6}, {-0.8, -0.3, 0.0, 0.0, 0.4, 0.9}, false),
                               fixed_arg({5}, {-0.3, 0.0, 0.9, -2, 2}, false)},
                              "on_boundaries"},
                             {{fixed_arg({6}, {-0.8, -0.3, 0.0, 0.0, 0.4, 0.9}, false), arg({})}, "scalar"},
                             {{fixed_arg({6}, {-0.8, -0.3, 0.0, 0.0, 0.4, 0.9}, false), arg({0})}, "empty"}},
                 .differentiable = false});
  ops.push_back({.name = "searchsorted_nd",
                 .ops = {OpId::searchsorted},
                 .torch = "(torch.searchsorted(x[0], x[1]), torch.searchsorted(x[0], x[1], right=True), "
                          "torch.searchsorted(x[2], x[1], sorter=torch.argsort(x[2])))",
                 .fn =
                     [](I x) {
                       return Outputs{searchsorted(x[0], x[1]), searchsorted(x[0], x[1], false, true),
                                      searchsorted(x[2], x[1], false, false, std::nullopt, argsort(x[2]))};
                     },
                 .samples = {{{fixed_arg({2, 4}, {-1, 0, 0.5, 1, -0.5, -0.2, 0.2, 0.6}, false), arg({2, 3}),
                               fixed_arg({2, 4}, {0.5, -1, 1, 0, 0.6, 0.2, -0.5, -0.2}, false)},
                              "2d"}},
                 .differentiable = false});
  ops.push_back({.name = "unique",
                 .torch = "(*torch.unique(x[0], sorted=True, return_inverse=True, return_counts=True), "
                          "*torch.unique_consecutive(x[0], return_inverse=True, return_counts=True))",
                 .fn =
                     [](I x) {
                       UniqueResult u = unique(x[0], true, true, true);
                       UniqueResult c = unique_consecutive(x[0], true, true);
                       return Outputs{u.values, u.inverse, u.counts, c.values, c.inverse, c.counts};
                     },
                 .samples = {{{fixed_index({2, 5}, {3, 1, 1, 2, 3, 3, 0, 0, 7, 1})}, "int"},
                             {{fixed_arg({7}, {0.5, -1, 0.5, 0.5, 2, -1, -0.0}, false)}, "float"},
                             {{index_arg({0}, 3)}, "empty"},
                             {{fixed_index({}, {4})}, "scalar"}},
                 .differentiable = false});
  ops.push_back(
      {.name = "unique_dim",
       .ops = {OpId::unique},
       .torch = "(*torch.unique(x[0], dim=0, return_inverse=True, return_counts=True), "
                "*torch.unique(x[0], dim=-1, return_inverse=True, return_counts=True), "
                "*torch.unique_consecutive(x[0], return_inverse=True, return_counts=True, dim=0))",
       .fn =
           [](I x) {
             UniqueResult a = unique(x[0], true, true, true, 0), b = unique(x[0], true, true, true, -1);
             UniqueResult c = unique_consecutive(x[0], true, true, 0);
             return Outputs{a.values, a.inverse, a.counts,  b.values, b.inverse,
                            b.counts, c.values,  c.inverse, c.counts};
           },
       .samples = {{{fixed_index({5, 4}, {1, 2, 3, 1, 0, 5, 1, 0, 1, 2, 3, 1, 1, 2, 3, 1, 0, 5, 0, 0})}, "int_rows"},
                   {{fixed_arg({3, 2, 2}, {0.5, -1, 2, 0.5, 0.5, -1, 2, 0.5, 0.5, -1, 2, -0.0}, false)}, "float_3d"},
                   {{fixed_index({1, 3}, {2, 2, 1})}, "one_row"}},
       .differentiable = false});
  return ops;
}

Registrar reg(math_ops());

}  // namespace
}  // namespace nabla::testing
