// Lowerings of the views and shape ops: Reshape, Transpose, Squeeze/Unsqueeze, Expand, Slice,
// Gather, Split, Concat, Pad, Cast, Identity; each keeps the dynamic dims it can follow.
#include <algorithm>

#include "onnx/exporter.h"

namespace nabla::onnx::internal {

namespace {

void lower_reshape(Exporter& e, Call& c, const ShapeAttrs& a) { e.reshape_to(c.x(), c.y(), a.shape); }

void lower_flatten(Exporter& e, Call& c, const FlattenAttrs& a) {
  const Value& x = c.x();
  Value& y = c.y();
  const int64_t rank = c.rank();
  const int64_t s = rank == 0 ? 0 : wrap(a.start, rank), end = rank == 0 ? 0 : wrap(a.end, rank);
  if (rank >= 2 && s == 1 && end == rank - 1) {
    e.node("Flatten", {x.name}, {ai("axis", 1)}, y.name);
    Exporter::sym_prefix(y, x, 1);
    return;
  }
  std::vector<int64_t> req(y.shape.begin(), y.shape.end());
  if (static_cast<int64_t>(req.size()) > s) req[s] = -1;  // the merged dim
  e.reshape_to(x, y, req);
}

void lower_permute(Exporter& e, Call& c, const DimsAttrs& a) {
  std::vector<int64_t> perm = a.dims;
  for (auto& p : perm) p = wrap(p, c.rank());
  e.node("Transpose", {c.x().name}, {aints("perm", perm)}, c.y().name);
  for (size_t j = 0; j < perm.size(); ++j) c.y().sym[j] = c.x().sym[perm[j]];
}

void lower_squeeze(Exporter& e, Call& c, const SqueezeAttrs& a) {
  const Value& x = c.x();
  Value& y = c.y();
  const int64_t rank = c.rank();
  std::vector<int64_t> axes;
  for (int64_t d = 0; d < rank; ++d)
    if (x.shape[d] == 1 && (!a.dim || d == wrap(*a.dim, rank))) axes.push_back(d);
  if (axes.empty()) e.node("Identity", {x.name}, {}, y.name);
  else e.node("Squeeze", {x.name, e.axes_input(axes)}, {}, y.name);
  for (int64_t d = 0, j = 0; d < rank; ++d)
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) y.sym[j++] = x.sym[d];
}

void lower_unsqueeze(Exporter& e, Call& c, const DimAttrs& a) {
  const int64_t rank = c.rank(), d = wrap(a.dim, rank + 1);
  e.node("Unsqueeze", {c.x().name, e.axes_input({d})}, {}, c.y().name);
  for (int64_t k = 0, j = 0; j <= rank; ++j)
    if (j != d) c.y().sym[j] = c.x().sym[k++];
}

void lower_expand(Exporter& e, Call& c, const ShapeAttrs&) {
  const Value& x = c.x();
  Value& y = c.y();
  std::vector<int64_t> shape(y.shape.begin(), y.shape.end());
  const int64_t r = y.rank();
  for (int64_t j = 0; j < r; ++j) {
    int64_t k = j - (r - x.rank());
    if (k >= 0 && x.shape[k] == shape[j]) shape[j] = 1;  // 1: keeps the input's size (dynamic or not)
  }
  e.node("Expand", {x.name, e.const_i64(shape)}, {}, y.name);
  Exporter::sym_broadcast(y, {&x});
}

void lower_slice(Exporter& e, Call& c, const SliceAttrs& a) {
  const Value& x = c.x();
  Value& y = c.y();
  const int64_t d = wrap(a.dim, c.rank());
  NABLA_CHECK(NotImplemented, x.sym[d].empty() || (a.start == 0 && a.end == std::numeric_limits<int64_t>::max()),
              "onnx::export_model: op 'slice' (", e.where(), ") slices the dynamic axis '", x.sym[d], "' of ", x.shape,
              "; slicing a dynamic axis is not exported");
  e.node("Slice", {x.name, e.const_i64({a.start}), e.const_i64({a.end}), e.const_i64({d}), e.const_i64({a.step})}, {},
         y.name);
  y.sym = x.sym;
  if (y.shape[d] != x.shape[d]) y.sym[d].clear();
}

void lower_select(Exporter& e, Call& c, const SelectAttrs& a) {
  const int64_t rank = c.rank(), d = wrap(a.dim, rank);
  e.node("Gather", {c.x().name, e.const_i64_scalar(a.index)}, {ai("axis", d)}, c.y().name);
  for (int64_t k = 0, j = 0; k < rank; ++k)
    if (k != d) c.y().sym[j++] = c.x().sym[k];
}

// The diagonal of dims d1, d2 as a new last dim: those two dims moved last and merged (they must be
// static), then a Gather of the flat positions (i + max(0, -offset), i + max(0, offset)).
void lower_diagonal(Exporter& e, Call& c, const DiagonalAttrs& a) {
  const Value& x = c.x();
  Value& y = c.y();
  const int64_t rank = c.rank(), d1 = wrap(a.dim1, rank), d2 = wrap(a.dim2, rank);
  NABLA_CHECK(NotImplemented, x.sym[d1].empty() && x.sym[d2].empty(), "onnx::export_model: op 'diagonal' (", e.where(),
              ") takes the diagonal of the dynamic axis '", x.sym[d1].empty() ? x.sym[d2] : x.sym[d1], "' of ",
              x.shape);
  std::vector<int64_t> perm, merged;
  for (int64_t k = 0; k < rank; ++k)
    if (k != d1 && k != d2) {
      perm.push_back(k);
      merged.push_back(0);  // Reshape's 0: the dim as it is (dynamic ones too)
    }
  perm.insert(perm.end(), {d1, d2});
  const int64_t n1 = x.shape[d1], n2 = x.shape[d2], len = y.shape.back();
  merged.push_back(n1 * n2);
  std::vector<int64_t> at;
  for (int64_t i = 0; i < len; ++i)
    at.push_back((i + std::max<int64_t>(0, -a.offset)) * n2 + i + std::max<int64_t>(0, a.offset));
  const std::string flat =
      e.node("Reshape", {e.node("Transpose", {x.name}, {aints("perm", perm)}), e.const_i64(merged)});
  e.node("Gather", {flat, e.const_i64(at)}, {ai("axis", rank - 2)}, y.name);
  for (size_t j = 0; j + 2 < perm.size(); ++j) y.sym[j] = x.sym[perm[j]];
}

void lower_split(Exporter& e, Call& c, const SplitAttrs& a) {
  const Value& x = c.x();
  const int64_t d = wrap(a.dim, c.rank());
  std::vector<std::string> names;
  for (Value& o : c.ov) {
    names.push_back(o.name);
    o.sym = x.sym;
    if (o.shape[d] != x.shape[d]) o.sym[d].clear();
  }
  NABLA_CHECK(NotImplemented, x.sym[d].empty() || c.ov.size() == 1, "onnx::export_model: op 'split' (", e.where(),
              ") splits the dynamic axis '", x.sym[d], "' of ", x.shape);
  e.node_multi("Split", {x.name, e.const_i64(a.sizes)}, {ai("axis", d)}, names);
}

void lower_unbind(Exporter& e, Call& c, const DimAttrs& a) {
  const int64_t rank = c.rank(), d = wrap(a.dim, rank);
  for (size_t i = 0; i < c.ov.size(); ++i) {
    e.node("Gather", {c.x().name, e.const_i64_scalar(static_cast<int64_t>(i))}, {ai("axis", d)}, c.ov[i].name);
    for (int64_t k = 0, j = 0; k < rank; ++k)
      if (k != d) c.ov[i].sym[j++] = c.x().sym[k];
  }
}

void lower_cat(Exporter& e, Call& c, const DimAttrs& a) {
  Value& y = c.y();
  const int64_t d = wrap(a.dim, y.rank());
  std::vector<std::string> parts;
  std::vector<const Value*> used;
  for (const Value* v : c.iv)
    if (!(v->shape.size() == 1 && v->shape[0] == 0 && y.shape.size() != 1)) {  // cat skips 1-D empty tensors
      parts.push_back(e.cast(*v, y.dtype));
      used.push_back(v);
    }
  e.node("Concat", parts, {ai("axis", d)}, y.name);
  for (size_t j = 0; j < y.sym.size(); ++j)
    if (static_cast<int64_t>(j) != d) y.sym[j] = used[0]->sym[j];
}

// (before, after) pairs from the last dim -> Pad's [begins, ends]. constant: Pad (negative padding
// crops: a Slice first); reflect: Pad mode reflect; replicate: Pad mode edge; circular (Pad's wrap
// is opset 19): Concat of the wrapped-around slices, per dim.
void lower_pad(Exporter& e, Call& c, const PadAttrs& a) {
  const Value& x = c.x();
  Value& y = c.y();
  const int64_t rank = c.rank();
  const std::vector<int64_t>& p = a.padding;
  y.sym = x.sym;
  for (int64_t d = 0; d < rank; ++d)
    if (y.shape[d] != x.shape[d]) y.sym[d].clear();
  if (a.mode != "constant") {
    NABLA_CHECK(NotImplemented, std::all_of(p.begin(), p.end(), [](int64_t v) { return v >= 0; }),
                "onnx::export_model: op 'pad' (", e.where(), ") with mode '", a.mode, "' and negative padding ",
                IntArrayRef(p));
    if (a.mode == "reflect" || a.mode == "replicate") {
      std::vector<int64_t> pads(static_cast<size_t>(2 * rank), 0);
      for (size_t i = 0; i < p.size() / 2; ++i) {
        pads[static_cast<size_t>(rank - 1 - static_cast<int64_t>(i))] = p[2 * i];
        pads[static_cast<size_t>(2 * rank - 1 - static_cast<int64_t>(i))] = p[2 * i + 1];
      }
      e.node("Pad", {x.name, e.const_i64(pads)}, {astr("mode", a.mode == "reflect" ? "reflect" : "edge")}, y.name);
      return;
    }
    NABLA_CHECK(NotImplemented, a.mode == "circular", "onnx::export_model: op 'pad' (", e.where(),
                ") has no ONNX mapping for mode '", a.mode, "'");
    std::string cur = x.name;
    const int64_t big = std::numeric_limits<int64_t>::max();
    for (size_t i = 0; i < p.size() / 2; ++i) {
      const int64_t d = rank - 1 - static_cast<int64_t>(i), before = p[2 * i], after = p[2 * i + 1];
      if (before == 0 && after == 0) continue;
      std::vector<std::string> parts;
      // [x[n - before:], x, x[:after]] (the slices of the input as padded so far along other dims)
      if (before > 0)
        parts.push_back(e.node("Slice", {cur, e.const_i64({-before}), e.const_i64({big}), e.const_i64({d})}));
      parts.push_back(cur);
      if (after > 0) parts.push_back(e.node("Slice", {cur, e.const_i64({0}), e.const_i64({after}), e.const_i64({d})}));
      cur = e.node("Concat", parts, {ai("axis", d)});
    }
    e.node("Identity", {cur}, {}, y.name);
    return;
  }
  std::vector<int64_t> pads(static_cast<size_t>(2 * rank), 0), starts, ends, axes;
  for (size_t i = 0; i < p.size() / 2; ++i) {
    const int64_t d = rank - 1 - static_cast<int64_t>(i);
    int64_t& lo = pads[static_cast<size_t>(d)];
    int64_t& hi = pads[static_cast<size_t>(rank + d)];
    lo = p[2 * i];
    hi = p[2 * i + 1];
    if (lo < 0 || hi < 0) {  // negative padding crops: a Slice first
      NABLA_CHECK(NotImplemented, x.sym[d].empty(), "onnx::export_model: op 'pad' (", e.where(),
                  ") crops the dynamic axis '", x.sym[d], "' of ", x.shape);
      starts.push_back(std::max<int64_t>(-lo, 0));
      ends.push_back(x.shape[d] - std::max<int64_t>(-hi, 0));
      axes.push_back(d);
      lo = std::max<int64_t>(lo, 0);
      hi = std::max<int64_t>(hi, 0);
    }
  }
  std::string cur = x.name;
  if (!axes.empty()) cur = e.node("Slice", {cur, e.const_i64(starts), e.const_i64(ends), e.const_i64(axes)});
  e.node("Pad", {cur, e.const_i64(pads), e.const_scalar(a.value, x.dtype)}, {}, y.name);
}

void lower_to(Exporter& e, Call& c, const NoAttrs&) {
  e.node("Cast", {c.x().name}, {ai("to", onnx_dtype(c.y().dtype))}, c.y().name);
  c.y().sym = c.x().sym;
}

void lower_clone(Exporter& e, Call& c, const NoAttrs&) {
  e.node("Identity", {c.x().name}, {}, c.y().name);
  c.y().sym = c.x().sym;
}

}  // namespace

void add_shape_lowerings(LoweringTable& t) {
  lower<lower_reshape, OpId::view, OpId::reshape>(t);
  lower<lower_flatten, OpId::flatten>(t);
  lower<lower_permute, OpId::permute>(t);
  lower<lower_squeeze, OpId::squeeze>(t);
  lower<lower_unsqueeze, OpId::unsqueeze>(t);
  lower<lower_expand, OpId::expand>(t);
  lower<lower_slice, OpId::slice>(t);
  lower<lower_select, OpId::select>(t);
  lower<lower_diagonal, OpId::diagonal>(t);
  lower<lower_split, OpId::split_with_sizes>(t);
  lower<lower_unbind, OpId::unbind>(t);
  lower<lower_cat, OpId::cat>(t);
  lower<lower_pad, OpId::pad>(t);
  lower<lower_to, OpId::to>(t);
  lower<lower_clone, OpId::clone>(t);
}

}  // namespace nabla::onnx::internal
