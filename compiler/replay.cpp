// How each traced op runs again in a replay (compiler/replay.h): one rule per OpId, calling the op's
// own front-end with the recorded attributes, so a replayed op computes what the eager op computes.
// An op without a rule makes the capture fall back to eager, naming the op (compiler/capture.cpp).
#include "compiler/replay.h"

#include <array>

#include "core/linalg.h"
#include "core/math_ops.h"
#include "core/ops.h"
#include "nn/functional.h"

namespace nabla::compiler {

namespace {

using Ins = std::vector<Tensor>;
using Outs = std::vector<Tensor>;

template <class A>
const A& at(const Node& n) {
  return std::get<A>(n.attrs);
}
Outs one(Tensor t) { return {std::move(t)}; }
// add's and sub's alpha as the caller passed it: an integer for an integer result.
Scalar alpha_of(const Node& n, const Value* out) {
  const double a = std::get<BinaryAttrs>(n.attrs).alpha;
  if (!is_floating(out->dtype) && a == static_cast<double>(static_cast<int64_t>(a)))
    return Scalar(static_cast<int64_t>(a));
  return Scalar(a);
}
Outs two(std::tuple<Tensor, Tensor> t) { return {std::get<0>(t), std::get<1>(t)}; }

using Table = std::array<ReplayFn, kOpCount>;

void add_elementwise(Table& t) {
  auto set = [&](OpId op, ReplayFn f) { t[static_cast<size_t>(op)] = f; };
  // ---- elementwise ----------------------------------------------------------------------------
#define NABLA_REPLAY_UNARY(name, ...) \
  set(OpId::name, [](const Node&, const Ins& in, const Value*) { return one(nabla::name(in[0])); });
  NABLA_UNARY_FLOAT_OPS(NABLA_REPLAY_UNARY)
  NABLA_UNARY_SAME_OPS(NABLA_REPLAY_UNARY)
  NABLA_UNARY_BOOL_OPS(NABLA_REPLAY_UNARY)
#undef NABLA_REPLAY_UNARY
  set(OpId::leaky_relu,
      [](const Node& n, const Ins& in, const Value*) { return one(leaky_relu(in[0], at<UnaryAttrs>(n).p0)); });
  set(OpId::elu, [](const Node& n, const Ins& in, const Value*) { return one(elu(in[0], at<UnaryAttrs>(n).p0)); });
  set(OpId::softplus, [](const Node& n, const Ins& in, const Value*) {
    return one(softplus(in[0], at<UnaryAttrs>(n).p0, at<UnaryAttrs>(n).p1));
  });
  set(OpId::hardtanh, [](const Node& n, const Ins& in, const Value*) {
    return one(hardtanh(in[0], at<UnaryAttrs>(n).p0, at<UnaryAttrs>(n).p1));
  });
  set(OpId::polygamma, [](const Node& n, const Ins& in, const Value*) {
    return one(polygamma(static_cast<int64_t>(at<UnaryAttrs>(n).p0), in[0]));
  });
  set(OpId::clamp, [](const Node& n, const Ins& in, const Value*) {
    return one(clamp(in[0], Scalar(at<UnaryAttrs>(n).p0), Scalar(at<UnaryAttrs>(n).p1)));
  });
  set(OpId::add,
      [](const Node& n, const Ins& in, const Value* out) { return one(add(in[0], in[1], alpha_of(n, out))); });
  set(OpId::sub,
      [](const Node& n, const Ins& in, const Value* out) { return one(sub(in[0], in[1], alpha_of(n, out))); });
#define NABLA_REPLAY_BINARY(name, ...) \
  set(OpId::name, [](const Node&, const Ins& in, const Value*) { return one(nabla::name(in[0], in[1])); });
  NABLA_REPLAY_BINARY(mul)
  NABLA_REPLAY_BINARY(div)
  NABLA_REPLAY_BINARY(pow)
  NABLA_REPLAY_BINARY(maximum)
  NABLA_REPLAY_BINARY(minimum)
  NABLA_REPLAY_BINARY(atan2)
  NABLA_REPLAY_BINARY(hypot)
  NABLA_REPLAY_BINARY(remainder)
  NABLA_REPLAY_BINARY(floor_divide)
  NABLA_REPLAY_BINARY(fmod)
  NABLA_REPLAY_BINARY(xlogy)
  NABLA_REPLAY_BINARY(logaddexp)
  NABLA_REPLAY_BINARY(threshold_backward)
  NABLA_BINARY_BOOL_OPS(NABLA_REPLAY_BINARY)
#undef NABLA_REPLAY_BINARY
  set(OpId::pow_scalar, [](const Node& n, const Ins& in, const Value* out) {
    // An integer base keeps its dtype only with an integral exponent (as recorded: the output's).
    const double e = at<ScalarAttrs>(n).value;
    const bool integral = is_integral(out[0].dtype) && e == static_cast<double>(static_cast<int64_t>(e));
    return one(pow(in[0], integral ? Scalar(static_cast<int64_t>(e)) : Scalar(e)));
  });
  set(OpId::where, [](const Node&, const Ins& in, const Value*) { return one(where(in[0], in[1], in[2])); });
}

// Products, scans, sorts, order statistics and scatters.
void add_orderings(Table& t) {
  auto set = [&](OpId op, ReplayFn f) { t[static_cast<size_t>(op)] = f; };
  set(OpId::prod, [](const Node& n, const Ins& in, const Value*) {
    const auto& a = at<ReduceAttrs>(n);
    return one(a.dims.empty() ? prod(in[0]) : prod(in[0], a.dims[0], a.keepdim));
  });
  set(OpId::cumprod,
      [](const Node& n, const Ins& in, const Value*) { return one(cumprod(in[0], at<DimAttrs>(n).dim)); });
  set(OpId::logcumsumexp,
      [](const Node& n, const Ins& in, const Value*) { return one(logcumsumexp(in[0], at<DimAttrs>(n).dim)); });
  set(OpId::cummax, [](const Node& n, const Ins& in, const Value*) { return two(cummax(in[0], at<DimAttrs>(n).dim)); });
  set(OpId::cummin, [](const Node& n, const Ins& in, const Value*) { return two(cummin(in[0], at<DimAttrs>(n).dim)); });
  set(OpId::sort, [](const Node& n, const Ins& in, const Value*) {
    return two(sort(in[0], at<SortAttrs>(n).dim, at<SortAttrs>(n).descending));
  });
  set(OpId::topk, [](const Node& n, const Ins& in, const Value*) {
    const auto& a = at<TopkAttrs>(n);
    return two(topk(in[0], a.k, a.dim, a.largest, a.sorted));
  });
  set(OpId::kthvalue, [](const Node& n, const Ins& in, const Value*) {
    const auto& a = at<KthvalueAttrs>(n);
    return two(kthvalue(in[0], a.k, a.dim, a.keepdim));
  });
  set(OpId::mode, [](const Node& n, const Ins& in, const Value*) {
    return two(mode(in[0], at<DimKeepAttrs>(n).dim, at<DimKeepAttrs>(n).keepdim));
  });
  set(OpId::median, [](const Node& n, const Ins& in, const Value*) {
    const auto& a = at<OptionalDimAttrs>(n);
    return a.dim ? two(median(in[0], *a.dim, a.keepdim)) : one(median(in[0]));
  });
  set(OpId::nanmedian, [](const Node& n, const Ins& in, const Value*) {
    const auto& a = at<OptionalDimAttrs>(n);
    return a.dim ? two(nanmedian(in[0], *a.dim, a.keepdim)) : one(nanmedian(in[0]));
  });
  set(OpId::quantile, [](const Node& n, const Ins& in, const Value*) {
    const auto& a = at<QuantileAttrs>(n);
    return one(quantile(in[0], in[1], a.dim, a.keepdim, a.interpolation));
  });
  set(OpId::nanquantile, [](const Node& n, const Ins& in, const Value*) {
    const auto& a = at<QuantileAttrs>(n);
    return one(nanquantile(in[0], in[1], a.dim, a.keepdim, a.interpolation));
  });
  set(OpId::histc, [](const Node& n, const Ins& in, const Value*) {
    const auto& a = at<HistcAttrs>(n);
    return one(histc(in[0], a.bins, a.min, a.max));
  });
  set(OpId::searchsorted, [](const Node& n, const Ins& in, const Value* out) {
    return one(
        searchsorted(in[0], in[1], out->dtype == DType::i32, at<SearchsortedAttrs>(n).right, std::nullopt, in[2]));
  });
  set(OpId::scatter, [](const Node& n, const Ins& in, const Value*) {
    return one(scatter(in[0], at<DimAttrs>(n).dim, in[1], in[2]));
  });
  set(OpId::scatter_add, [](const Node& n, const Ins& in, const Value*) {
    return one(scatter_add(in[0], at<DimAttrs>(n).dim, in[1], in[2]));
  });
  set(OpId::index_add, [](const Node& n, const Ins& in, const Value*) {
    return one(index_add(in[0], at<DimAttrs>(n).dim, in[1], in[2]));
  });
}

void add_shapes_and_reductions(Table& t) {
  auto set = [&](OpId op, ReplayFn f) { t[static_cast<size_t>(op)] = f; };
  // ---- shapes and views -----------------------------------------------------------------------
  set(OpId::view, [](const Node& n, const Ins& in, const Value*) { return one(view(in[0], at<ShapeAttrs>(n).shape)); });
  set(OpId::reshape,
      [](const Node& n, const Ins& in, const Value*) { return one(reshape(in[0], at<ShapeAttrs>(n).shape)); });
  set(OpId::expand,
      [](const Node& n, const Ins& in, const Value*) { return one(expand(in[0], at<ShapeAttrs>(n).shape)); });
  set(OpId::permute,
      [](const Node& n, const Ins& in, const Value*) { return one(permute(in[0], at<DimsAttrs>(n).dims)); });
  set(OpId::squeeze, [](const Node& n, const Ins& in, const Value*) {
    const auto& d = at<SqueezeAttrs>(n).dim;
    return one(d ? squeeze(in[0], *d) : squeeze(in[0]));
  });
  set(OpId::unsqueeze,
      [](const Node& n, const Ins& in, const Value*) { return one(unsqueeze(in[0], at<DimAttrs>(n).dim)); });
  set(OpId::flatten, [](const Node& n, const Ins& in, const Value*) {
    return one(flatten(in[0], at<FlattenAttrs>(n).start, at<FlattenAttrs>(n).end));
  });
  set(OpId::slice, [](const Node& n, const Ins& in, const Value*) {
    const auto& a = at<SliceAttrs>(n);
    return one(slice(in[0], a.dim, a.start, a.end, a.step));
  });
  set(OpId::select, [](const Node& n, const Ins& in, const Value*) {
    return one(select(in[0], at<SelectAttrs>(n).dim, at<SelectAttrs>(n).index));
  });
  set(OpId::diagonal, [](const Node& n, const Ins& in, const Value*) {
    const auto& a = at<DiagonalAttrs>(n);
    return one(diagonal(in[0], a.offset, a.dim1, a.dim2));
  });
  set(OpId::split_with_sizes, [](const Node& n, const Ins& in, const Value*) {
    return split_with_sizes(in[0], at<SplitAttrs>(n).sizes, at<SplitAttrs>(n).dim);
  });
  set(OpId::unbind, [](const Node& n, const Ins& in, const Value*) { return unbind(in[0], at<DimAttrs>(n).dim); });
  set(OpId::cat, [](const Node& n, const Ins& in, const Value*) { return one(cat(in, at<DimAttrs>(n).dim)); });
  set(OpId::pad, [](const Node& n, const Ins& in, const Value*) {
    const auto& a = at<PadAttrs>(n);
    return one(nn::functional::pad(in[0], a.padding, a.mode, a.value));
  });
  set(OpId::clone, [](const Node&, const Ins& in, const Value*) { return one(in[0].clone()); });
  set(OpId::to,
      [](const Node&, const Ins& in, const Value* out) { return one(in[0].to(out[0].device).to(out[0].dtype)); });

  // ---- indexing -------------------------------------------------------------------------------
  set(OpId::index_select,
      [](const Node& n, const Ins& in, const Value*) { return one(index_select(in[0], at<DimAttrs>(n).dim, in[1])); });
  set(OpId::gather,
      [](const Node& n, const Ins& in, const Value*) { return one(gather(in[0], at<DimAttrs>(n).dim, in[1])); });
  set(OpId::embedding, [](const Node&, const Ins& in, const Value*) { return one(embedding(in[0], in[1])); });

  // ---- reductions -----------------------------------------------------------------------------
  set(OpId::sum, [](const Node& n, const Ins& in, const Value* out) {
    return one(sum(in[0], at<ReduceAttrs>(n).dims, at<ReduceAttrs>(n).keepdim, out[0].dtype));
  });
  set(OpId::mean, [](const Node& n, const Ins& in, const Value*) {
    return one(mean(in[0], at<ReduceAttrs>(n).dims, at<ReduceAttrs>(n).keepdim));
  });
  set(OpId::amax, [](const Node& n, const Ins& in, const Value*) {
    return one(amax(in[0], at<ReduceAttrs>(n).dims, at<ReduceAttrs>(n).keepdim));
  });
  set(OpId::amin, [](const Node& n, const Ins& in, const Value*) {
    return one(amin(in[0], at<ReduceAttrs>(n).dims, at<ReduceAttrs>(n).keepdim));
  });
  set(OpId::max_dim, [](const Node& n, const Ins& in, const Value*) {
    return two(max(in[0], at<DimKeepAttrs>(n).dim, at<DimKeepAttrs>(n).keepdim));
  });
  set(OpId::min_dim, [](const Node& n, const Ins& in, const Value*) {
    return two(min(in[0], at<DimKeepAttrs>(n).dim, at<DimKeepAttrs>(n).keepdim));
  });
  set(OpId::softmax,
      [](const Node& n, const Ins& in, const Value*) { return one(softmax(in[0], at<DimAttrs>(n).dim)); });
  set(OpId::log_softmax,
      [](const Node& n, const Ins& in, const Value*) { return one(log_softmax(in[0], at<DimAttrs>(n).dim)); });
  set(OpId::cumsum, [](const Node& n, const Ins& in, const Value*) { return one(cumsum(in[0], at<DimAttrs>(n).dim)); });
  add_orderings(t);
}

void add_nn(Table& t) {
  auto set = [&](OpId op, ReplayFn f) { t[static_cast<size_t>(op)] = f; };
  // ---- products, convolutions, pooling, normalization ----------------------------------------
  set(OpId::matmul, [](const Node&, const Ins& in, const Value*) { return one(matmul(in[0], in[1])); });
  set(OpId::mm, [](const Node&, const Ins& in, const Value*) { return one(mm(in[0], in[1])); });
  set(OpId::bmm, [](const Node&, const Ins& in, const Value*) { return one(bmm(in[0], in[1])); });
  set(OpId::linear, [](const Node&, const Ins& in, const Value*) { return one(linear(in[0], in[1], in[2])); });
  auto conv = [](const Node& n, const Ins& in, const Value*) {
    const auto& a = at<ConvAttrs>(n);
    const size_t nd = a.stride.size();
    if (nd == 1) return one(conv1d(in[0], in[1], in[2], a.stride[0], a.padding[0], a.dilation[0], a.groups));
    if (nd == 2) return one(conv2d(in[0], in[1], in[2], a.stride, a.padding, a.dilation, a.groups));
    return one(conv3d(in[0], in[1], in[2], a.stride, a.padding, a.dilation, a.groups));
  };
  set(OpId::conv1d, conv);
  set(OpId::conv2d, conv);
  set(OpId::conv3d, conv);
  set(OpId::conv_transpose2d, [](const Node& n, const Ins& in, const Value*) {
    const auto& a = at<ConvTransposeAttrs>(n);
    return one(conv_transpose2d(in[0], in[1], in[2], a.stride, a.padding, a.output_padding, a.groups, a.dilation));
  });
  set(OpId::max_pool2d, [](const Node& n, const Ins& in, const Value*) {
    const auto& a = at<MaxPoolAttrs>(n);
    return one(max_pool2d(in[0], a.kernel, a.stride, a.padding, a.dilation, a.ceil_mode));
  });
  set(OpId::avg_pool2d, [](const Node& n, const Ins& in, const Value*) {
    const auto& a = at<AvgPoolAttrs>(n);
    return one(avg_pool2d(in[0], a.kernel, a.stride, a.padding, a.ceil_mode, a.count_include_pad));
  });
  set(OpId::adaptive_avg_pool2d, [](const Node& n, const Ins& in, const Value*) {
    return one(adaptive_avg_pool2d(in[0], at<AdaptivePoolAttrs>(n).output_size));
  });
  set(OpId::adaptive_max_pool2d, [](const Node& n, const Ins& in, const Value*) {
    return one(adaptive_max_pool2d(in[0], at<AdaptivePoolAttrs>(n).output_size));
  });
  set(OpId::batch_norm, [](const Node& n, const Ins& in, const Value*) {
    const auto& a = at<BatchNormAttrs>(n);
    return one(batch_norm(in[0], in[1], in[2], in[3], in[4], a.training, a.momentum, a.eps));
  });
  set(OpId::instance_norm, [](const Node& n, const Ins& in, const Value*) {
    const auto& a = at<InstanceNormAttrs>(n);
    return one(nn::functional::instance_norm(in[0], in[1], in[2], in[3], in[4], a.use_input_stats, 0.1, a.eps));
  });
  set(OpId::interpolate, [](const Node& n, const Ins& in, const Value*) {
    const auto& a = at<InterpolateAttrs>(n);
    nn::functional::InterpolateOptions o{.size = a.size, .scale_factor = a.scale_factor, .mode = a.mode};
    if (a.mode == "linear" || a.mode == "bilinear" || a.mode == "bicubic" || a.mode == "trilinear")
      o.align_corners = a.align_corners;
    return one(nn::functional::interpolate(in[0], o));
  });
  set(OpId::grid_sample, [](const Node& n, const Ins& in, const Value*) {
    const auto& a = at<GridSampleAttrs>(n);
    return one(nn::functional::grid_sample(in[0], in[1], {a.mode, a.padding_mode, a.align_corners}));
  });
}

Table make_table() {
  Table t{};
  add_elementwise(t);
  add_shapes_and_reductions(t);
  add_nn(t);
  return t;
}

}  // namespace

const std::array<ReplayFn, kOpCount>& replay_table() {
  static const std::array<ReplayFn, kOpCount> table = make_table();
  return table;
}

}  // namespace nabla::compiler

namespace nabla::compiler {

Schedule plan(const Graph& g) {
  Schedule s;
  s.last_use.assign(g.values.size(), -1);
  s.output.assign(g.values.size(), false);
  for (size_t k = 0; k < g.nodes.size(); ++k)
    for (int v : g.nodes[k].inputs)
      if (v >= 0) s.last_use[v] = static_cast<int>(k);
  for (int v : g.outputs) s.output[v] = true;
  // The planned peak: computed values from their node to their last read (outputs to the end).
  int64_t live = 0;
  std::vector<int64_t> bytes(g.values.size(), 0);
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    for (int v : g.nodes[k].outputs) {
      const Value& val = g.values[v];
      int64_t n = 1;
      for (int64_t d : val.sizes) n *= d;
      bytes[v] = n * static_cast<int64_t>(element_size(val.dtype));
      live += bytes[v];
    }
    s.peak_bytes = std::max(s.peak_bytes, live);
    for (int v : g.nodes[k].inputs)
      if (v >= 0 && s.last_use[v] == static_cast<int>(k) && !s.output[v]) live -= bytes[v];
    for (int v : g.nodes[k].outputs)
      if (s.last_use[v] < 0 && !s.output[v]) live -= bytes[v];  // never read
  }
  return s;
}

namespace {

// The error of a replayed op, its type kept, its message prefixed with where it happened.
[[noreturn]] void rethrow_in(const std::string& where) {
  try {
    throw;
  } catch (const ShapeError& e) { throw ShapeError(where + e.what()); } catch (const DTypeError& e) {
    throw DTypeError(where + e.what());
  } catch (const DeviceError& e) { throw DeviceError(where + e.what()); } catch (const IndexError& e) {
    throw IndexError(where + e.what());
  } catch (const ValueError& e) { throw ValueError(where + e.what()); } catch (const NotImplemented& e) {
    throw NotImplemented(where + e.what());
  } catch (const Error& e) { throw Error(where + e.what()); }
}

// A fused node: float32 outputs written in one pass (the first into an input's buffer when that
// input dies here and nothing else holds it).
std::vector<Tensor> run_fused_node(const Graph& g, const Node& n, std::vector<Tensor>& vals, const Schedule& s, int k) {
  const FusedProgram& p = *n.program;
  const Value& ov = g.values[n.outputs[0]];
  int64_t numel = 1;
  for (int64_t d : ov.sizes) numel *= d;
  std::array<const float*, kMaxFusedRegs> ptrs{};
  std::array<Tensor, kMaxFusedRegs> keep;
  std::vector<Tensor> out(n.outputs.size());
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const int id = n.inputs[i];
    Tensor& t = vals[id];
    if (!t.is_contiguous()) keep[i] = t.contiguous();
    const Tensor& c = keep[i].defined() ? keep[i] : t;
    ptrs[i] = static_cast<const float*>(c.data_ptr());
    if (!out[0].defined() && p.inputs[i].read == FusedInput::whole && g.values[id].kind == Value::computed &&
        s.last_use[id] == k && !s.output[id] && !keep[i].defined() && t.use_count() == 1 &&
        t.impl()->storage->use_count() == 1 && std::count(n.inputs.begin(), n.inputs.end(), id) == 1)
      out[0] = t;  // reuse: each element is read before it is written
  }
  std::array<float*, kMaxFusedRegs> optr{};
  for (size_t j = 0; j < out.size(); ++j) {
    if (!out[j].defined()) out[j] = empty(ov.sizes, TensorOptions().dtype(DType::f32).device(ov.device));
    optr[j] = static_cast<float*>(out[j].data_ptr());
  }
  run_fused_cpu(p, ptrs.data(), optr.data(), numel);
  return out;
}

}  // namespace

std::vector<Tensor> run(const Graph& g, const Schedule& s, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> vals(g.values.size());
  for (size_t i = 0; i < g.values.size(); ++i) {
    const Value& v = g.values[i];
    if (v.kind == Value::input) vals[i] = inputs[v.index];
    else if (v.kind != Value::computed) vals[i] = v.tensor;
  }
  std::vector<Tensor> in;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& n = g.nodes[k];
    std::vector<Tensor> out;
    try {
      if (n.kind == Node::value_check) {
        n.check(vals[n.inputs[0]]);
      } else if (n.kind == Node::fused) {
        out = run_fused_node(g, n, vals, s, static_cast<int>(k));
      } else {
        in.clear();
        for (int id : n.inputs) in.push_back(id < 0 ? Tensor() : vals[id]);
        out = replay_table()[static_cast<size_t>(n.id)](n, in, &g.values[n.outputs[0]]);
      }
    } catch (const Error&) {
      rethrow_in(internal::str("compile: replaying op '", n.kind == Node::fused ? "fused" : op_name(n.id), "' (node ",
                               k, " of the compiled graph): "));
    }
    NABLA_CHECK(Error, out.size() == n.outputs.size(), "compile: internal: op '", op_name(n.id), "' gave ", out.size(),
                " outputs, the capture recorded ", n.outputs.size());
    for (size_t j = 0; j < out.size(); ++j) vals[n.outputs[j]] = std::move(out[j]);
    for (int id : n.inputs)  // free what no later node reads
      if (id >= 0 && s.last_use[id] == static_cast<int>(k) && !s.output[id] && g.values[id].kind == Value::computed)
        vals[id] = Tensor();
  }
  std::vector<Tensor> result;
  for (int v : g.outputs) result.push_back(vals[v]);
  return result;
}

}  // namespace nabla::compiler
