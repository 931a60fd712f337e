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

#include "core/autocast.h"
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
      NABLA_CHECK(ValueError, s.substr(i, 3) == "...", "einsum: '.' must come as an ellipsis '...' in \"", equation,
                  "\"");
      NABLA_CHECK(ValueError, std::find(t.begin(), t.end(), kEllipsis) == t.end(),
                  "einsum: more than one ellipsis in one operand of \"", equation, "\"");
      t.push_back(kEllipsis);
      i += 2;
      continue;
    }
    int l = label_of(s[i]);
    NABLA_CHECK(ValueError, l != kNoLabel, "einsum: invalid subscript '", s[i], "' in \"", equation,
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

// One einsum call, in named steps: parse the equation, size the labels, choose the output's
// subscripts and the canonical layout, then fold the operands into the result one at a time.
class Einsum {
 public:
  Einsum(std::string_view equation, const std::vector<Tensor>& operands)
      : equation_(equation), eq_(strip_spaces(equation)), operands_(operands) {
    check_operands();
    parse_operand_terms();
    size_labels();
    choose_output();
    choose_canonical_layout();
  }

  Tensor run() {
    remaining_ = count_;
    fold(0);
    Tensor result = sum_unneeded(to_canonical(0), nullptr);
    for (size_t k = 1; k < operands_.size(); ++k) {
      Tensor b = to_canonical(k);
      fold(k);
      // Dims one side has and the other lacks, and that nothing later needs: summed first.
      Tensor a = sum_unneeded(result, &b);
      b = sum_unneeded(b, &a);
      result = contract(a, b);
    }
    return to_output(result);
  }

 private:
  void check_operands() const {
    NABLA_CHECK(ValueError, !operands_.empty(), "einsum: needs at least one operand");
    for (const Tensor& t : operands_) NABLA_CHECK(ValueError, t.defined(), "einsum: an operand is undefined");
    for (const Tensor& t : operands_) {
      NABLA_CHECK(DeviceError, t.device() == operands_[0].device(),
                  "einsum: expected all operands on the same device, got ", operands_[0].device(), " and ", t.device(),
                  " (move one with .to(device))");
      NABLA_CHECK(DTypeError, t.dtype() == operands_[0].dtype(),
                  "einsum: expected all operands of the same dtype, got ", operands_[0].dtype(), " and ", t.dtype(),
                  " (convert one with .to(dtype))");
    }
  }

  void parse_operand_terms() {
    arrow_ = eq_.find("->");
    const std::string_view lhs = std::string_view(eq_).substr(0, arrow_);
    for (size_t start = 0;;) {
      size_t comma = lhs.find(',', start);
      terms_.push_back(
          parse_term(lhs.substr(start, comma == std::string_view::npos ? lhs.npos : comma - start), equation_));
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    NABLA_CHECK(ValueError, terms_.size() == operands_.size(), "einsum: \"", equation_, "\" has ", terms_.size(),
                " operand subscripts but ", operands_.size(), " operands were given");
  }

  // Every label one size (or 1, which broadcasts); the ellipsis dims broadcast.
  void size_labels() {
    size_.fill(1);
    first_.fill(kLabels);
    int order = 0;
    ell_dims_.assign(operands_.size(), 0);
    for (size_t k = 0; k < terms_.size(); ++k) {
      const Term& t = terms_[k];
      const Tensor& x = operands_[k];
      const bool has_ell = std::find(t.begin(), t.end(), kEllipsis) != t.end();
      const int64_t nlabels = static_cast<int64_t>(t.size()) - (has_ell ? 1 : 0);
      NABLA_CHECK(ShapeError, has_ell ? x.dim() >= nlabels : x.dim() == nlabels, "einsum: operand ", k, " of shape ",
                  x.sizes(), " has ", x.dim(), " dims but its subscripts in \"", equation_, "\" name ", nlabels);
      ell_dims_[k] = x.dim() - nlabels;
      ell_rank_ = std::max(ell_rank_, ell_dims_[k]);
      int64_t d = 0;
      for (int l : t) {
        if (l == kEllipsis) {
          d += ell_dims_[k];
          continue;
        }
        const int64_t s = x.sizes()[d++];
        if (first_[l] == kLabels) first_[l] = order++;
        ++count_[l];
        NABLA_CHECK(ShapeError, size_[l] == 1 || s == 1 || size_[l] == s, "einsum: subscript '", label_char(l),
                    "' has size ", s, " in operand ", k, " (shape ", x.sizes(), ") but ", size_[l], " elsewhere");
        if (s != 1) size_[l] = s;
      }
    }
  }

  // The output's subscripts: given after "->", or implicit (the ellipsis dims, then the labels that
  // appear once, in alphabetical order).
  void choose_output() {
    if (arrow_ != std::string::npos) {
      out_ = parse_term(std::string_view(eq_).substr(arrow_ + 2), equation_);
      std::array<bool, kLabels> seen{};
      for (int l : out_) {
        if (l == kEllipsis) continue;
        NABLA_CHECK(ValueError, count_[l] > 0, "einsum: output subscript '", label_char(l), "' of \"", equation_,
                    "\" appears in no operand");
        NABLA_CHECK(ValueError, !seen[l], "einsum: output subscript '", label_char(l), "' appears twice in \"",
                    equation_, "\"");
        seen[l] = true;
      }
      NABLA_CHECK(ValueError, ell_rank_ == 0 || std::find(out_.begin(), out_.end(), kEllipsis) != out_.end(),
                  "einsum: \"", equation_, "\" has an ellipsis covering ", ell_rank_,
                  " dims in its operands but none in its output; add '...' to the output");
    } else {
      if (ell_rank_ > 0) out_.push_back(kEllipsis);
      for (int l = 0; l < kLabels; ++l)
        if (count_[l] == 1) out_.push_back(l);
    }
    for (int l : out_)
      if (l != kEllipsis) in_output_[l] = true;
  }

  // Canonical layout: the ellipsis dims, then the labels by first appearance.
  void choose_canonical_layout() {
    for (int l = 0; l < kLabels; ++l)
      if (count_[l] > 0) labels_.push_back(l);
    std::sort(labels_.begin(), labels_.end(), [&](int a, int b) { return first_[a] < first_[b]; });
    for (size_t i = 0; i < labels_.size(); ++i) canon_[labels_[i]] = ell_rank_ + static_cast<int64_t>(i);
    rank_ = ell_rank_ + static_cast<int64_t>(labels_.size());
  }

  // Operand k in the canonical layout: repeated labels taken as diagonals, dims permuted into
  // canonical order, size-1 dims inserted for the labels it lacks.
  Tensor to_canonical(size_t k) const {
    Tensor x = operands_[k];
    // Dim labels of x: kEllipsis for ellipsis dims (right-aligned into the canonical ones).
    std::vector<int> dl;
    for (int l : terms_[k]) {
      if (l == kEllipsis) dl.insert(dl.end(), ell_dims_[k], kEllipsis);
      else dl.push_back(l);
    }
    // A label repeated in one operand: its diagonal (appended last by diagonal()).
    for (size_t i = 0; i < dl.size(); ++i) {
      if (dl[i] == kEllipsis) continue;
      for (size_t j = i + 1; j < dl.size(); ++j) {
        if (dl[j] != dl[i]) continue;
        NABLA_CHECK(ShapeError, x.sizes()[i] == x.sizes()[j], "einsum: subscript '", label_char(dl[i]),
                    "' repeated in operand ", k, " needs equal sizes, got shape ", x.sizes());
        int l = dl[i];
        x = x.diagonal(0, static_cast<int64_t>(i), static_cast<int64_t>(j));
        dl.erase(dl.begin() + static_cast<std::ptrdiff_t>(j));
        dl.erase(dl.begin() + static_cast<std::ptrdiff_t>(i));
        dl.push_back(l);
        i = static_cast<size_t>(-1);  // rescan from the start
        break;
      }
    }
    const int64_t ell_offset = ell_rank_ - ell_dims_[k];
    int64_t e = 0;
    std::vector<int64_t> where(dl.size());  // canonical position of each dim of x
    Shape shape(rank_, 1);
    for (size_t i = 0; i < dl.size(); ++i) {
      where[i] = dl[i] == kEllipsis ? ell_offset + e++ : canon_[dl[i]];
      shape[where[i]] = x.sizes()[i];
    }
    std::vector<int64_t> perm(dl.size());
    std::iota(perm.begin(), perm.end(), int64_t{0});
    std::sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) { return where[a] < where[b]; });
    return x.permute(perm).reshape(shape);
  }

  // Operand k is folded into the running result: its labels are no longer pending.
  void fold(size_t k) {
    for (int l : terms_[k])
      if (l != kEllipsis) --remaining_[l];
  }

  // Whether canonical dim d is needed by the output or by an operand not yet folded in.
  bool needed(int64_t d) const {
    return d < ell_rank_ || in_output_[labels_[d - ell_rank_]] || remaining_[labels_[d - ell_rank_]] > 0;
  }

  // Sums the dims of x that nothing later needs and `other` lacks (size 1 there), keeping them as
  // size-1 dims. Without `other`, every dim nothing later needs.
  Tensor sum_unneeded(const Tensor& x, const Tensor* other) const {
    std::vector<int64_t> dims;
    for (int64_t d = ell_rank_; d < rank_; ++d)
      if (!needed(d) && x.sizes()[d] != 1 && (!other || other->sizes()[d] == 1)) dims.push_back(d);
    return dims.empty() ? x : x.sum(dims, /*keepdim=*/true);
  }

  // a and b (canonical layout) contracted over the dims both have and nothing later needs: one
  // batched matrix product a[batch, m, k] @ b[batch, k, n], or a broadcast product when no dim is
  // summed. The result is in the canonical layout, with size 1 where a dim was contracted.
  Tensor contract(const Tensor& a, const Tensor& b) const {
    std::vector<int64_t> batch, m, n, summed;
    for (int64_t d = 0; d < rank_; ++d) {
      const int64_t sa = a.sizes()[d], sb = b.sizes()[d];
      NABLA_CHECK(ShapeError, sa == 1 || sb == 1 || sa == sb,
                  "einsum: the dims the ellipsis covers cannot be broadcast: ", sa, " against ", sb, " in \"",
                  equation_, "\"");
      if (!needed(d) && sa != 1 && sb != 1) summed.push_back(d);
      else if (sa != 1 && sb != 1) batch.push_back(d);
      else if (sa != 1) m.push_back(d);
      else if (sb != 1) n.push_back(d);
      else batch.push_back(d);  // size 1 on both sides
    }
    if (summed.empty()) return a * b;  // an outer or elementwise product
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
    const int64_t nb = prod(a, batch), nm = prod(a, m), nk = prod(a, summed), nn = prod(b, n);
    Tensor a3 = a.permute(cat_dims({&batch, &m, &n, &summed})).reshape({nb, nm, nk});
    Tensor b3 = b.permute(cat_dims({&batch, &summed, &m, &n})).reshape({nb, nk, nn});
    Tensor r = bmm(a3, b3);
    // Back to the canonical layout: batch, m, n sizes, and size 1 where contracted.
    Shape rshape;
    for (int64_t d : batch) rshape.push_back(a.sizes()[d]);
    for (int64_t d : m) rshape.push_back(a.sizes()[d]);
    for (int64_t d : n) rshape.push_back(b.sizes()[d]);
    for (size_t i = 0; i < summed.size(); ++i) rshape.push_back(1);
    const std::vector<int64_t> order_now = cat_dims({&batch, &m, &n, &summed});
    std::vector<int64_t> inverse(static_cast<size_t>(rank_));
    for (size_t i = 0; i < order_now.size(); ++i) inverse[static_cast<size_t>(order_now[i])] = static_cast<int64_t>(i);
    return r.reshape(rshape).permute(inverse);
  }

  // The result in the output's order, without the (size-1 by now) dims of the summed labels.
  Tensor to_output(const Tensor& result) const {
    std::vector<int64_t> perm;
    Shape out_shape;
    for (int l : out_) {
      if (l == kEllipsis) {
        for (int64_t d = 0; d < ell_rank_; ++d) {
          perm.push_back(d);
          out_shape.push_back(result.sizes()[d]);
        }
      } else {
        perm.push_back(canon_[l]);
        out_shape.push_back(result.sizes()[canon_[l]]);
      }
    }
    for (int64_t d = 0; d < rank_; ++d)
      if (std::find(perm.begin(), perm.end(), d) == perm.end()) perm.push_back(d);
    return result.permute(perm).reshape(out_shape);
  }

  std::string_view equation_;  // as given, for messages
  std::string eq_;             // without spaces
  const std::vector<Tensor>& operands_;
  size_t arrow_ = std::string::npos;
  std::vector<Term> terms_;               // each operand's subscripts
  Term out_;                              // the output's subscripts
  std::array<int64_t, kLabels> size_{};   // each label's size
  std::array<int, kLabels> count_{};      // appearances over all operands
  std::array<int, kLabels> first_{};      // order of first appearance
  std::array<int, kLabels> remaining_{};  // appearances in operands not yet folded in
  std::array<bool, kLabels> in_output_{};
  std::vector<int64_t> ell_dims_;         // ellipsis dims of each operand
  int64_t ell_rank_ = 0;                  // the most ellipsis dims of any operand
  std::vector<int> labels_;               // canonical dim ell_rank_ + i holds labels_[i]
  std::array<int64_t, kLabels> canon_{};  // label -> canonical dim
  int64_t rank_ = 0;                      // canonical rank
};

}  // namespace

Tensor einsum(std::string_view equation, const std::vector<Tensor>& operands) {
  if (auto ac = autocast_internal::cast<OpId::einsum>(operands)) [[unlikely]]
    return einsum(equation, ac.list());
  return Einsum(equation, operands).run();
}

}  // namespace nabla
