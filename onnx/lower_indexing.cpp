// Lowerings of the indexing ops: Gather, GatherElements, ScatterElements, NonZero.
#include "onnx/exporter.h"

namespace nabla::onnx::internal {

namespace {

void lower_index_select(Exporter& e, Call& c, const DimAttrs& a) {
  const int64_t d = wrap(a.dim, c.rank());
  e.node("Gather", {c.x().name, c.iv[1]->name}, {ai("axis", d)}, c.y().name);
  c.y().sym = c.x().sym;
  c.y().sym[d].clear();
}

// torch.gather is GatherElements (negative indices count from the end in both).
void lower_gather(Exporter& e, Call& c, const DimAttrs& a) {
  const int64_t d = wrap(a.dim, c.rank());
  e.node("GatherElements", {c.x().name, e.cast(*c.iv[1], DType::i64)}, {ai("axis", d)}, c.y().name);
  Exporter::sym_broadcast(c.y(), {c.iv[1]});
}

// in: x, index, src -> ScatterElements (scatter_add: reduction 'add', from opset 16).
void lower_scatter(Exporter& e, Call& c, const DimAttrs& a) {
  const Value& x = c.x();
  const int64_t d = wrap(a.dim, c.rank());
  const Value& idx = *c.iv[1];
  const Value& src = *c.iv[2];
  const bool add = c.op == OpId::scatter_add;
  std::string sn = src.name;
  if (src.shape != idx.shape) {  // scatter reads the window of src that the index covers
    NABLA_CHECK(NotImplemented, !Exporter::has_sym(idx) && !Exporter::has_sym(src), "onnx::export_model: op '",
                e.op_label(), "' (", e.where(), ") with a source ", src.shape, " larger than the index ", idx.shape,
                " on a dynamic axis");
    std::vector<int64_t> starts(idx.shape.size(), 0), ends(idx.shape.begin(), idx.shape.end()), axes;
    for (size_t j = 0; j < idx.shape.size(); ++j) axes.push_back(static_cast<int64_t>(j));
    sn = e.node("Slice", {sn, e.const_i64(starts), e.const_i64(ends), e.const_i64(axes)});
  }
  std::vector<OAttr> at{ai("axis", d)};
  if (add) at.push_back(astr("reduction", "add"));
  e.node("ScatterElements", {x.name, e.cast(idx, DType::i64), sn}, at, c.y().name);
  c.y().sym = x.sym;
}

// in: x, index (1-D), src -> ScatterElements with reduction='add' (from opset 16).
void lower_index_add(Exporter& e, Call& c, const DimAttrs& a) {
  const Value& x = c.x();
  const int64_t rank = c.rank();
  if (rank == 0) e.no_mapping("on a 0-dim tensor");
  const int64_t d = wrap(a.dim, rank);
  const Value& src = *c.iv[2];
  // The index along dim d, broadcast to src's shape: index[k] for every src element with k on dim d.
  std::vector<int64_t> col(static_cast<size_t>(rank), 1);
  col[static_cast<size_t>(d)] = -1;
  std::string idx = e.node("Reshape", {e.cast(*c.iv[1], DType::i64), e.const_i64(col)});
  idx = e.node("Expand", {idx, e.node("Shape", {src.name})});
  e.node("ScatterElements", {x.name, idx, e.cast(src, x.dtype)}, {ai("axis", d), astr("reduction", "add")}, c.y().name);
  c.y().sym = x.sym;
}

// NonZero is (rank, n); PyTorch's nonzero (n, rank).
void lower_nonzero(Exporter& e, Call& c, const NoAttrs&) {
  if (c.rank() == 0) e.no_mapping("on a 0-dim tensor");
  e.node("Transpose", {e.node("NonZero", {c.x().name})}, {aints("perm", {1, 0})}, c.y().name);
  c.y().sym[0] = e.fresh("nonzero_");  // how many: known when the model runs
}

// in: weight, indices.
void lower_embedding(Exporter& e, Call& c, const NoAttrs&) {
  e.node("Gather", {c.iv[0]->name, c.iv[1]->name}, {ai("axis", 0)}, c.y().name);
  for (size_t j = 0; j < c.iv[1]->sym.size(); ++j) c.y().sym[j] = c.iv[1]->sym[j];
}

}  // namespace

void add_indexing_lowerings(LoweringTable& t) {
  lower<lower_index_select, OpId::index_select>(t);
  lower<lower_gather, OpId::gather>(t);
  lower<lower_scatter, OpId::scatter>(t);
  lower<lower_scatter, OpId::scatter_add>(t, 16);  // ScatterElements' reduction='add'
  lower<lower_index_add, OpId::index_add>(t, 16);
  lower<lower_nonzero, OpId::nonzero>(t);
  lower<lower_embedding, OpId::embedding>(t);
}

}  // namespace nabla::onnx::internal
