// einsum: Einstein summation over any number of operands, as torch.einsum and numpy.einsum.
//
// Built from differentiable ops (diagonal, permute, sum, mul, bmm), so it has gradients of every
// order on every device without a backward of its own. Each operand is first brought to one
// canonical layout: the ellipsis dims, then every label in order of first appearance, with size-1
// dims for the labels it lacks; a label repeated inside one operand takes its diagonal. Labels no
// later operand and not the output needs are summed as early as possible, and each pair of operands
// is contracted with one batched matrix product (or multiplied, when no label is summed between them).
#include <algorithm>
#include <array>
#include <numeric>

#include "core/impl.h"

namespace nabla {

namespace {

constexpr int kNoLabel = -1;
constexpr int kLabels = 52;  // A-Z, a-z

// One operand's subscripts: labels (0..51) and, at most once, the ellipsis (kEllipsis).
constexpr int kEllipsis = -2;
using Term = std::vector<int>;

int label_of(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return 26 + (c - 'a');
  return kNoLabel;
}

char label_char(int l) { return static_cast<char>(l < 26 ? 'A' + l : 'a' + (l - 26)); }

Term parse_term(std::string_view s, std::string_view equation) {
  Term t;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '.') {
      check<ValueError>(s.substr(i, 3) == "...", "einsum: '.' must come as an ellipsis '...' in \"", equation, "\"");
      check<ValueError>(std::find(t.begin(), t.end(), kEllipsis) == t.end(),
                        "einsum: more than one ellipsis in one operand of \"", equation, "\"");
      t.push_back(kEllipsis);
      i += 2;
      continue;
    }
    int l = label_of(s[i]);
    check<ValueError>(l != kNoLabel, "einsum: invalid subscript '", s[i], "' in \"", equation,
                      "\" (subscripts are letters A-Z and a-z)");
    t.push_back(l);
  }
  return t;
}

std::string strip_spaces(std::string_view s) {
  std::string out;
  for (char c : s)
    if (c != ' ') out += c;
  return out;
}

}  // namespace

Tensor einsum(std::string_view equation, const std::vector<Tensor>& operands) {
  const std::string eq = strip_spaces(equation);
  check<ValueError>(!operands.empty(), "einsum: needs at least one operand");
  for (const Tensor& t : operands) check<ValueError>(t.defined(), "einsum: an operand is undefined");
  for (const Tensor& t : operands) {
    check<DeviceError>(t.device() == operands[0].device(), "einsum: expected all operands on the same device, got ",
                       operands[0].device(), " and ", t.device(), " (move one with .to(device))");
    check<DTypeError>(t.dtype() == operands[0].dtype(), "einsum: expected all operands of the same dtype, got ",
                      operands[0].dtype(), " and ", t.dtype(), " (convert one with .to(dtype))");
  }
  // ---- parse ----
  const size_t arrow = eq.find("->");
  const std::string_view lhs = std::string_view(eq).substr(0, arrow);
  std::vector<Term> terms;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    terms.push_back(parse_term(lhs.substr(start, comma == std::string_view::npos ? lhs.npos : comma - start), equation));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  check<ValueError>(terms.size() == operands.size(), "einsum: \"", equation, "\" has ", terms.size(),
                    " operand subscripts but ", operands.size(), " operands were given");

  // ---- sizes: every label one size (or 1, which broadcasts), the ellipsis dims broadcast ----
  std::array<int64_t, kLabels> size;
  size.fill(1);
  std::array<int, kLabels> count{};  // appearances over all operands
  std::array<int, kLabels> first{};  // order of first appearance
  first.fill(kLabels);
  int order = 0;
  int64_t ell_rank = 0;
  std::vector<int64_t> ell_dims(operands.size(), 0);
  for (size_t k = 0; k < terms.size(); ++k) {
    const Term& t = terms[k];
    const Tensor& x = operands[k];
    const bool has_ell = std::find(t.begin(), t.end(), kEllipsis) != t.end();
    const int64_t nlabels = static_cast<int64_t>(t.size()) - (has_ell ? 1 : 0);
    check<ShapeError>(has_ell ? x.dim() >= nlabels : x.dim() == nlabels, "einsum: operand ", k, " of shape ",
                      x.sizes(), " has ", x.dim(), " dims but its subscripts in \"", equation, "\" name ", nlabels);
    ell_dims[k] = x.dim() - nlabels;
    ell_rank = std::max(ell_rank, ell_dims[k]);
    int64_t d = 0;
    for (int l : t) {
      if (l == kEllipsis) {
        d += ell_dims[k];
        continue;
      }
      const int64_t s = x.sizes()[d++];
      if (first[l] == kLabels) first[l] = order++;
      ++count[l];
      check<ShapeError>(size[l] == 1 || s == 1 || size[l] == s, "einsum: subscript '",
                        label_char(l), "' has size ", s, " in operand ", k, " (shape ",
                        x.sizes(), ") but ", size[l], " elsewhere");
      if (s != 1) size[l] = s;
    }
  }

  // ---- the output's subscripts ----
  Term out;
  if (arrow != std::string::npos) {
    out = parse_term(std::string_view(eq).substr(arrow + 2), equation);
    std::array<bool, kLabels> seen{};
    for (int l : out) {
      if (l == kEllipsis) continue;
      check<ValueError>(count[l] > 0, "einsum: output subscript '", label_char(l),
                        "' of \"", equation, "\" appears in no operand");
      check<ValueError>(!seen[l], "einsum: output subscript '", label_char(l),
                        "' appears twice in \"", equation, "\"");
      seen[l] = true;
    }
    check<ValueError>(ell_rank == 0 || std::find(out.begin(), out.end(), kEllipsis) != out.end(), "einsum: \"",
                      equation, "\" has an ellipsis covering ", ell_rank,
                      " dims in its operands but none in its output; add '...' to the output");
  } else {
    // Implicit output: the ellipsis dims, then the labels that appear once, in alphabetical order.
    if (ell_rank > 0) out.push_back(kEllipsis);
    for (int l = 0; l < kLabels; ++l)
      if (count[l] == 1) out.push_back(l);
  }
  std::array<bool, kLabels> in_output{};
  for (int l : out)
    if (l != kEllipsis) in_output[l] = true;

  // ---- canonical layout: ellipsis dims, then labels by first appearance ----
  std::vector<int> labels;  // canonical dim ell_rank + i holds labels[i]
  for (int l = 0; l < kLabels; ++l)
    if (count[l] > 0) labels.push_back(l);
  std::sort(labels.begin(), labels.end(), [&](int a, int b) { return first[a] < first[b]; });
  std::array<int64_t, kLabels> canon{};  // label -> canonical dim
  for (size_t i = 0; i < labels.size(); ++i) canon[labels[i]] = ell_rank + static_cast<int64_t>(i);
  const int64_t rank = ell_rank + static_cast<int64_t>(labels.size());

  // remaining[l]: appearances of l in operands not yet folded into the running result.
  std::array<int, kLabels> remaining = count;
  auto to_canonical = [&](size_t k) {
    Tensor x = operands[k];
    // Dim labels of x: kEllipsis for ellipsis dims (right-aligned into the canonical ones).
    std::vector<int> dl;
    for (int l : terms[k]) {
      if (l == kEllipsis) dl.insert(dl.end(), ell_dims[k], kEllipsis);
      else dl.push_back(l);
    }
    // A label repeated in one operand: its diagonal (appended last by diagonal()).
    for (size_t i = 0; i < dl.size(); ++i) {
      if (dl[i] == kEllipsis) continue;
      for (size_t j = i + 1; j < dl.size(); ++j) {
        if (dl[j] != dl[i]) continue;
        check<ShapeError>(x.sizes()[i] == x.sizes()[j], "einsum: subscript '",
                          label_char(dl[i]), "' repeated in operand ", k,
                          " needs equal sizes, got shape ", x.sizes());
        int l = dl[i];
        x = x.diagonal(0, static_cast<int64_t>(i), static_cast<int64_t>(j));
        dl.erase(dl.begin() + static_cast<std::ptrdiff_t>(j));
        dl.erase(dl.begin() + static_cast<std::ptrdiff_t>(i));
        dl.push_back(l);
        i = static_cast<size_t>(-1);  // rescan from the start
        break;
      }
    }
    // Permute into canonical order and insert size-1 dims for what x lacks.
    const int64_t ell_offset = ell_rank - ell_dims[k];
    int64_t e = 0;
    std::vector<int64_t> where(dl.size());  // canonical position of each dim of x
    Shape shape(rank, 1);
    for (size_t i = 0; i < dl.size(); ++i) {
      where[i] = dl[i] == kEllipsis ? ell_offset + e++ : canon[dl[i]];
      shape[where[i]] = x.sizes()[i];
    }
    std::vector<int64_t> perm(dl.size());
    std::iota(perm.begin(), perm.end(), int64_t{0});
    std::sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) { return where[a] < where[b]; });
    return x.permute(perm).reshape(shape);
  };

  auto needed = [&](int64_t d) {  // by the output or an operand not yet folded in
    return d < ell_rank || in_output[labels[d - ell_rank]] || remaining[labels[d - ell_rank]] > 0;
  };
  // Sums the dims of x that nothing later needs and `other` lacks (size 1 there), keeping them as
  // size-1 dims. Without `other`, every dim nothing later needs.
  auto sum_unneeded = [&](const Tensor& x, const Tensor* other) {
    std::vector<int64_t> dims;
    for (int64_t d = ell_rank; d < rank; ++d)
      if (!needed(d) && x.sizes()[d] != 1 && (!other || other->sizes()[d] == 1)) dims.push_back(d);
    return dims.empty() ? x : x.sum(dims, /*keepdim=*/true);
  };
  auto fold = [&](size_t k) {
    for (int l : terms[k])
      if (l != kEllipsis) --remaining[l];
  };

  fold(0);
  Tensor result = sum_unneeded(to_canonical(0), nullptr);
  for (size_t k = 1; k < operands.size(); ++k) {
    Tensor b = to_canonical(k);
    fold(k);
    // Dims one side has and the other lacks, and that nothing later needs: summed first.
    Tensor a = sum_unneeded(result, &b);
    b = sum_unneeded(b, &a);
    // Classify the canonical dims for one batched matrix product a[batch, m, k] @ b[batch, k, n].
    std::vector<int64_t> batch, m, n, contract;
    for (int64_t d = 0; d < rank; ++d) {
      const int64_t sa = a.sizes()[d], sb = b.sizes()[d];
      check<ShapeError>(sa == 1 || sb == 1 || sa == sb, "einsum: the dims the ellipsis covers cannot be broadcast: ",
                        sa, " against ", sb, " in \"", equation, "\"");
      if (!needed(d) && sa != 1 && sb != 1) contract.push_back(d);
      else if (sa != 1 && sb != 1) batch.push_back(d);
      else if (sa != 1) m.push_back(d);
      else if (sb != 1) n.push_back(d);
      else batch.push_back(d);  // size 1 on both sides
    }
    if (contract.empty()) {  // nothing to sum over: a broadcast product (outer or elementwise)
      result = a * b;
      continue;
    }
    auto prod = [](const Tensor& t, const std::vector<int64_t>& dims) {
      int64_t p = 1;
      for (int64_t d : dims) p *= t.sizes()[d];
      return p;
    };
    auto cat_dims = [](std::initializer_list<const std::vector<int64_t>*> parts) {
      std::vector<int64_t> v;
      for (const auto* p : parts) v.insert(v.end(), p->begin(), p->end());
      return v;
    };
    const int64_t nb = prod(a, batch), nm = prod(a, m), nk = prod(a, contract), nn = prod(b, n);
    Tensor a3 = a.permute(cat_dims({&batch, &m, &n, &contract})).reshape({nb, nm, nk});
    Tensor b3 = b.permute(cat_dims({&batch, &contract, &m, &n})).reshape({nb, nk, nn});
    Tensor r = bmm(a3, b3);
    // Back to the canonical layout: batch, m, n sizes, and size 1 where contracted.
    Shape rshape;
    for (int64_t d : batch) rshape.push_back(a.sizes()[d]);
    for (int64_t d : m) rshape.push_back(a.sizes()[d]);
    for (int64_t d : n) rshape.push_back(b.sizes()[d]);
    for (size_t i = 0; i < contract.size(); ++i) rshape.push_back(1);
    const std::vector<int64_t> order_now = cat_dims({&batch, &m, &n, &contract});
    std::vector<int64_t> inverse(static_cast<size_t>(rank));
    for (size_t i = 0; i < order_now.size(); ++i) inverse[static_cast<size_t>(order_now[i])] = static_cast<int64_t>(i);
    result = r.reshape(rshape).permute(inverse);
  }

  // ---- to the output's order: drop the (size-1) dims of summed labels ----
  std::vector<int64_t> perm;
  Shape out_shape;
  for (int l : out) {
    if (l == kEllipsis) {
      for (int64_t d = 0; d < ell_rank; ++d) {
        perm.push_back(d);
        out_shape.push_back(result.sizes()[d]);
      }
    } else {
      perm.push_back(canon[l]);
      out_shape.push_back(result.sizes()[canon[l]]);
    }
  }
  for (int64_t d = 0; d < rank; ++d)
    if (std::find(perm.begin(), perm.end(), d) == perm.end()) perm.push_back(d);  // size 1 by now
  return result.permute(perm).reshape(out_shape);
}

}  // namespace nabla
