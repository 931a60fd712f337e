// Printing and counting a captured graph (compiler/graph.h).
#include "compiler/graph.h"

#include <sstream>
#include <type_traits>

namespace nabla::compiler {

std::vector<int> Graph::use_counts() const {
  std::vector<int> uses(values.size(), 0);
  for (const Node& n : nodes)
    for (int v : n.inputs)
      if (v >= 0) ++uses[v];
  for (int v : outputs) ++uses[v];
  return uses;
}

std::string describe_value(const Graph& g, int v) {
  const Value& val = g.values[v];
  return internal::str("%", v, " ", val.sizes, " ", val.dtype);
}

namespace {

template <class V>
void list(std::ostream& os, const char* name, const std::vector<V>& v) {
  os << name << " [";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << "]";
}

// The attribute fields that tell nodes apart in a dump.
void print_attrs(std::ostream& os, const OpAttrs& attrs) {
  std::visit(
      [&](const auto& a) {
        using A = std::decay_t<decltype(a)>;
        if constexpr (std::is_same_v<A, UnaryAttrs>) {
          if (a.p0 != 0 || a.p1 != 0) os << " {" << a.p0 << ", " << a.p1 << "}";
        } else if constexpr (std::is_same_v<A, BinaryAttrs>) {
          if (a.alpha != 1) os << " {alpha " << a.alpha << "}";
        } else if constexpr (std::is_same_v<A, ScalarAttrs>) {
          os << " {" << a.value << "}";
        } else if constexpr (std::is_same_v<A, ShapeAttrs>) {
          os << " {", list(os, "shape", a.shape), os << "}";
        } else if constexpr (std::is_same_v<A, DimsAttrs>) {
          os << " {", list(os, "dims", a.dims), os << "}";
        } else if constexpr (std::is_same_v<A, DimAttrs>) {
          os << " {dim " << a.dim << "}";
        } else if constexpr (std::is_same_v<A, ReduceAttrs>) {
          os << " {", list(os, "dims", a.dims), os << (a.keepdim ? ", keepdim}" : "}");
        } else if constexpr (std::is_same_v<A, ConvAttrs>) {
          os << " {", list(os, "stride", a.stride), os << ", ", list(os, "padding", a.padding);
          if (a.groups != 1) os << ", groups " << a.groups;
          os << "}";
        } else if constexpr (std::is_same_v<A, MaxPoolAttrs> || std::is_same_v<A, AvgPoolAttrs>) {
          os << " {", list(os, "kernel", a.kernel), os << ", ", list(os, "stride", a.stride), os << "}";
        } else if constexpr (std::is_same_v<A, BatchNormAttrs>) {
          os << " {" << (a.training ? "training, " : "") << "eps " << a.eps << "}";
        } else if constexpr (std::is_same_v<A, FlattenAttrs>) {
          os << " {" << a.start << ", " << a.end << "}";
        }
      },
      attrs);
}

const char* kind_name(Value::Kind k) {
  switch (k) {
    case Value::input: return "input";
    case Value::param: return "param";
    case Value::constant: return "constant";
    case Value::computed: return "computed";
  }
  return "?";
}

}  // namespace

std::string Graph::dump() const {
  std::ostringstream os;
  auto name = [&](int v) -> std::string {
    if (v < 0) return "none";
    const Value& val = values[v];
    if (!val.name.empty()) return val.name;
    return internal::str("%", v);
  };
  for (size_t i = 0; i < values.size(); ++i) {
    const Value& v = values[i];
    if (v.kind == Value::computed) continue;
    os << name(static_cast<int>(i)) << ": " << kind_name(v.kind) << " " << v.sizes << " " << v.dtype << "\n";
  }
  for (const Node& n : nodes) {
    if (n.kind == Node::value_check) {
      os << "check(" << name(n.inputs[0]) << ")\n";
      continue;
    }
    for (size_t j = 0; j < n.outputs.size(); ++j) os << (j ? ", " : "") << name(n.outputs[j]);
    os << " = ";
    if (n.kind == Node::fused) {
      os << "fused[";
      for (size_t j = 0; j < n.program->ops.size(); ++j) os << (j ? ", " : "") << op_name(n.program->ops[j]);
      os << "]";
    } else {
      os << op_name(n.id);
    }
    os << "(";
    for (size_t j = 0; j < n.inputs.size(); ++j) os << (j ? ", " : "") << name(n.inputs[j]);
    os << ")";
    if (n.kind == Node::op) print_attrs(os, n.attrs);
    const Value& out = values[n.outputs[0]];
    os << " -> " << out.sizes << " " << out.dtype << "\n";
  }
  os << "return ";
  for (size_t j = 0; j < outputs.size(); ++j) os << (j ? ", " : "") << name(outputs[j]);
  os << "\n";
  return os.str();
}

}  // namespace nabla::compiler
