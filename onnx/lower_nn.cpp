// Lowerings of the matrix products and the nn ops: MatMul and Gemm, Conv and ConvTranspose, the
// pools, BatchNormalization and InstanceNormalization, Resize, GridSample.
#include <algorithm>

#include "nn/functional.h"
#include "onnx/exporter.h"

namespace nabla::onnx::internal {

namespace {

void lower_matmul(Exporter& e, Call& c, const NoAttrs&) {
  const Value& x = c.x();
  const Value& b = *c.iv[1];
  Value& y = c.y();
  e.node("MatMul", {x.name, b.name}, {}, y.name);
  const int64_t ra = x.rank(), rb = b.rank(), ry = y.rank();
  // Batch dims broadcast; the row dim of a comes along.
  for (int64_t j = 0; j < ry; ++j) {
    int64_t ka = ra >= 2 ? j - (ry - ra) : -1;  // a's dims sit at the front (minus its column dim)
    if (ra >= 2 && ka >= 0 && ka < ra - 1 && x.shape[ka] == y.shape[j] && !x.sym[ka].empty()) y.sym[j] = x.sym[ka];
    int64_t kb = rb >= 2 ? j - (ry - rb) : -1;
    if (rb >= 3 && kb >= 0 && kb < rb - 2 && b.shape[kb] == y.shape[j] && !b.sym[kb].empty()) y.sym[j] = b.sym[kb];
  }
}

void lower_linear(Exporter& e, Call& c, const NoAttrs&) {
  const Value& x = c.x();
  const Value& w = *c.iv[1];
  const Value* b = c.iv[2];
  Value& y = c.y();
  if (c.rank() == 2) {
    std::vector<std::string> ins{x.name, w.name};
    if (b) ins.push_back(b->name);
    e.node("Gemm", ins, {ai("transB", 1)}, y.name);
  } else {
    std::string wt = e.node("Transpose", {w.name}, {aints("perm", {1, 0})});
    if (b) e.node("Add", {e.node("MatMul", {x.name, wt}), b->name}, {}, y.name);
    else e.node("MatMul", {x.name, wt}, {}, y.name);
  }
  Exporter::sym_prefix(y, x, c.rank() - 1);
}

void lower_conv(Exporter& e, Call& c, const ConvAttrs& a) {
  const Value& x = c.x();
  const Value& w = *c.iv[1];
  const Value* b = c.iv[2];
  Value& y = c.y();
  const int64_t nd = static_cast<int64_t>(a.stride.size());
  std::vector<int64_t> pads = a.padding;
  pads.insert(pads.end(), a.padding.begin(), a.padding.end());
  std::vector<int64_t> kernel(w.shape.begin() + 2, w.shape.end());
  e.batched(x, nd + 2, y, [&](const std::string& xin, const std::string& yout) {
    std::vector<std::string> ins{xin, w.name};
    if (b) ins.push_back(b->name);
    e.node("Conv", ins,
           {aints("kernel_shape", kernel), aints("strides", a.stride), aints("pads", pads),
            aints("dilations", a.dilation), ai("group", a.groups)},
           yout);
  });
  if (c.rank() == nd + 2) Exporter::sym_prefix(y, x, 1);
}

void lower_conv_transpose2d(Exporter& e, Call& c, const ConvTransposeAttrs& a) {
  const Value& x = c.x();
  const Value& w = *c.iv[1];
  const Value* b = c.iv[2];
  Value& y = c.y();
  auto s = pair2(a.stride, 1), p = pair2(a.padding, 0), op = pair2(a.output_padding, 0), d = pair2(a.dilation, 1);
  e.batched(x, 4, y, [&](const std::string& xin, const std::string& yout) {
    std::vector<std::string> ins{xin, w.name};
    if (b) ins.push_back(b->name);
    e.node("ConvTranspose", ins,
           {aints("kernel_shape", {w.shape[2], w.shape[3]}), aints("strides", {s[0], s[1]}),
            aints("pads", {p[0], p[1], p[0], p[1]}), aints("output_padding", {op[0], op[1]}),
            aints("dilations", {d[0], d[1]}), ai("group", a.groups)},
           yout);
  });
  if (c.rank() == 4) Exporter::sym_prefix(y, x, 1);
}

// MaxPool / AveragePool (stride defaults to the kernel).
void lower_pool(Exporter& e, Call& c, const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
                const std::vector<int64_t>& padding, bool ceil_mode, OAttr extra) {
  auto k = pair2(kernel, 1), s = stride.empty() ? k : pair2(stride, 0), p = pair2(padding, 0);
  std::vector<OAttr> at{aints("kernel_shape", {k[0], k[1]}), aints("strides", {s[0], s[1]}),
                        aints("pads", {p[0], p[1], p[0], p[1]}), ai("ceil_mode", ceil_mode), std::move(extra)};
  const bool is_max = c.op == OpId::max_pool2d;
  e.batched(c.x(), 4, c.y(), [&](const std::string& xin, const std::string& yout) {
    e.node(is_max ? "MaxPool" : "AveragePool", {xin}, at, yout);
  });
  if (c.rank() == 4) Exporter::sym_prefix(c.y(), c.x(), 1);
}
void lower_max_pool(Exporter& e, Call& c, const MaxPoolAttrs& a) {
  auto d = pair2(a.dilation, 1);
  lower_pool(e, c, a.kernel, a.stride, a.padding, a.ceil_mode, aints("dilations", {d[0], d[1]}));
}
void lower_avg_pool(Exporter& e, Call& c, const AvgPoolAttrs& a) {
  lower_pool(e, c, a.kernel, a.stride, a.padding, a.ceil_mode, ai("count_include_pad", a.count_include_pad));
}

// Adaptive pooling's windows (as area interpolation's): output cell j of a dim of n_in covers
// [floor(j n_in / n_out), ceil((j + 1) n_in / n_out)). Each resized spatial dim in turn (static
// sizes): averages as a MatMul with the averaging matrix, maxima as one ReduceMax per window,
// concatenated. x is `x_name` with x's shape (batched: N and C first).
void adaptive_windows(Exporter& e, const std::string& x_name, const Value& x, const Value& y, bool is_max) {
  const int64_t rank = x.rank();
  std::string cur = x_name;
  std::vector<int64_t> resized;
  for (int64_t d = 2; d < rank; ++d)
    if (x.shape[d] != y.shape[d]) resized.push_back(d);
  if (resized.empty()) {
    e.node("Identity", {cur}, {}, y.name);
    return;
  }
  for (int64_t d : resized) {
    NABLA_CHECK(NotImplemented, x.sym[d].empty(), "onnx::export_model: op '", e.op_label(), "' (", e.where(),
                ") resizes the dynamic axis '", x.sym[d], "' of ", x.shape, " by adaptive windows");
    const int64_t n_in = x.shape[d], n_out = y.shape[d];
    auto start = [&](int64_t j) { return (j * n_in) / n_out; };
    auto end = [&](int64_t j) { return ((j + 1) * n_in + n_out - 1) / n_out; };
    const std::string out = d == resized.back() ? y.name : e.fresh("t");
    if (is_max) {
      std::vector<std::string> parts;
      for (int64_t j = 0; j < n_out; ++j)
        parts.push_back(e.node(
            "ReduceMax", {e.node("Slice", {cur, e.const_i64({start(j)}), e.const_i64({end(j)}), e.const_i64({d})})},
            {aints("axes", {d}), ai("keepdims", 1)}));
      e.node("Concat", parts, {ai("axis", d)}, out);
      cur = out;
      continue;
    }
    // W: (n_out, n_in), row j averages window j; Wt: its transpose (n_in, n_out), for the last dim.
    std::vector<double> w(static_cast<size_t>(n_out * n_in), 0.0), wt(w.size(), 0.0);
    for (int64_t j = 0; j < n_out; ++j)
      for (int64_t i = start(j); i < end(j); ++i) {
        w[static_cast<size_t>(j * n_in + i)] = 1.0 / static_cast<double>(end(j) - start(j));
        wt[static_cast<size_t>(i * n_out + j)] = 1.0 / static_cast<double>(end(j) - start(j));
      }
    Tensor W, Wt;
    {
      trace::Suspend s;  // the matrices are constants, not part of the trace
      W = tensor(w, {n_out, n_in}, dtype(x.dtype));
      Wt = tensor(wt, {n_in, n_out}, dtype(x.dtype));
    }
    if (d == rank - 1) {
      e.node("MatMul", {cur, e.const_tensor(Wt)}, {}, out);
    } else if (d == rank - 2) {
      e.node("MatMul", {e.const_tensor(W), cur}, {}, out);
    } else {  // D of (N, C, D, H, W): swap it with H around the product
      std::vector<int64_t> perm;
      for (int64_t k = 0; k < rank; ++k) perm.push_back(k);
      std::swap(perm[d], perm[rank - 2]);
      std::string t = e.node("MatMul", {e.const_tensor(W), e.node("Transpose", {cur}, {aints("perm", perm)})});
      e.node("Transpose", {t}, {aints("perm", perm)}, out);
    }
    cur = out;
  }
}

// Adaptive pooling: ONNX's global pools for a 1x1 output, its pools where the output divides the
// input, else adaptive_windows (the same windows as nabla's kernels).
void lower_adaptive_pool(Exporter& e, Call& c, const AdaptivePoolAttrs&) {
  const Value& x = c.x();
  Value& y = c.y();
  const int64_t rank = c.rank();
  const bool is_max = c.op == OpId::adaptive_max_pool2d;
  const int64_t H = x.shape[rank - 2], W = x.shape[rank - 1], oh = y.shape[rank - 2], ow = y.shape[rank - 1];
  e.batched(x, 4, y, [&](const std::string& xin, const std::string& yout) {
    if (oh == 1 && ow == 1) {
      e.node(is_max ? "GlobalMaxPool" : "GlobalAveragePool", {xin}, {}, yout);
    } else if (H % oh == 0 && W % ow == 0) {
      e.node(is_max ? "MaxPool" : "AveragePool", {xin},
             {aints("kernel_shape", {H / oh, W / ow}), aints("strides", {H / oh, W / ow})}, yout);
    } else {
      Value x4 = x, y4 = y;  // as batched (N, C, H, W)
      if (rank == 3) {
        x4.shape.insert(x4.shape.begin(), 1);
        x4.sym.insert(x4.sym.begin(), "");
        y4.shape.insert(y4.shape.begin(), 1);
        y4.sym.insert(y4.sym.begin(), "");
      }
      y4.name = yout;
      adaptive_windows(e, xin, x4, y4, is_max);
    }
  });
  if (rank == 4) Exporter::sym_prefix(y, x, 1);
}

// in: x, weight, bias, running_mean, running_var (eval mode: the running statistics).
void lower_batch_norm(Exporter& e, Call& c, const BatchNormAttrs& a) {
  const Value& x = c.x();
  Value& y = c.y();
  const int64_t rank = c.rank();
  NABLA_CHECK(NotImplemented, !a.training, "onnx::export_model: op 'batch_norm' (", e.where(),
              ") runs in training mode (batch statistics); export runs modules in eval mode, so this "
              "call passes training=true itself");
  const int64_t C = x.shape[1];
  std::string scale = c.iv[1] ? c.iv[1]->name : e.const_tensor(ones({C}, dtype(x.dtype)));
  std::string bias = c.iv[2] ? c.iv[2]->name : e.const_tensor(zeros({C}, dtype(x.dtype)));
  std::vector<OAttr> at{af("epsilon", a.eps), af("momentum", 1 - a.momentum)};
  std::string xn = x.name;
  if (rank == 2) xn = e.node("Unsqueeze", {xn, e.axes_input({2})});  // (N, C): BatchNormalization wants (N, C, D...)
  std::string yo = rank == 2 ? e.fresh("t") : y.name;
  e.node("BatchNormalization", {xn, scale, bias, c.iv[3]->name, c.iv[4]->name}, at, yo);
  if (rank == 2) e.node("Squeeze", {yo, e.axes_input({2})}, {}, y.name);
  y.sym = x.sym;
}

// The value of `r`, traced just now as the ops it is made of, as the output.
void take_parts(Exporter& e, Call& c, const Tensor& r) {
  const Value& rv = e.value_of(r);
  e.node("Identity", {rv.name}, {}, c.y().name);
  c.y().sym = rv.sym;
}

// in: x, running_mean, running_var, weight, bias.
void lower_instance_norm(Exporter& e, Call& c, const InstanceNormAttrs& a) {
  const Value& x = c.x();
  Value& y = c.y();
  if (!a.use_input_stats) {
    // The running statistics (InstanceNorm with track_running_stats, in eval): batch norm's
    // formula, traced as the ops instance_norm is made of.
    Tensor r;
    {
      trace::StepAside parts;
      r = nn::functional::instance_norm(c.in[0], c.in[1], c.in[2], c.in[3], c.in[4], false, 0.1, a.eps);
    }
    take_parts(e, c, r);
    return;
  }
  const int64_t C = x.shape[1];
  std::string scale = c.iv[3] ? e.cast(*c.iv[3], x.dtype) : e.const_tensor(ones({C}, dtype(x.dtype)));
  std::string bias = c.iv[4] ? e.cast(*c.iv[4], x.dtype) : e.const_tensor(zeros({C}, dtype(x.dtype)));
  e.node("InstanceNormalization", {x.name, scale, bias}, {af("epsilon", a.eps)}, y.name);
  y.sym = x.sym;
}

// Below opset 16 (and for 5-D inputs: GridSample is N-D only from opset 20) the ops grid_sample is
// made of, traced now (the batch then stays static: the composition builds batch-shaped constants).
void lower_grid_sample(Exporter& e, Call& c, const GridSampleAttrs& a) {
  const nn::functional::GridSampleOptions o{
      .mode = a.mode, .padding_mode = a.padding_mode, .align_corners = a.align_corners};
  Tensor r;
  {
    trace::StepAside parts;
    r = nn::functional::grid_sample(c.in[0], c.in[1], o);
  }
  take_parts(e, c, r);
}

// in: input (N, C, H, W), grid (N, H_out, W_out, 2): GridSample.
void lower_grid_sample16(Exporter& e, Call& c, const GridSampleAttrs& a) {
  if (c.rank() != 4) return lower_grid_sample(e, c, a);
  const Value& x = c.x();
  Value& y = c.y();
  e.node("GridSample", {x.name, e.cast(*c.iv[1], x.dtype)},
         {astr("mode", a.mode), astr("padding_mode", a.padding_mode), ai("align_corners", a.align_corners)}, y.name);
  y.sym[0] = !x.sym[0].empty() ? x.sym[0] : c.iv[1]->sym[0];
}

// nn::functional::interpolate (and nn::Upsample) as ONNX's Resize, with the coordinate rules that
// reproduce PyTorch's (nn/functional.cpp):
//   nearest        asymmetric + floor: in[floor(j / scale)]
//   nearest-exact  half_pixel + round_prefer_ceil: in[floor((j + 0.5) / scale)]
//   linear modes   linear, half_pixel (ONNX Runtime clamps the source position to [0, n - 1] as
//                  PyTorch does; pytorch_half_pixel would differ for an output of size 1) or align_corners
//   bicubic        cubic with cubic_coeff_a = -0.75, half_pixel or align_corners, border repeated
// A scale factor goes in as Resize's scales (the positions then use 1 / scale, as PyTorch's do), an
// output size as its sizes (N and C from Shape, so a dynamic batch stays dynamic). Mode area
// (adaptive average pooling) is a MatMul per spatial dim with the averaging matrix.
void lower_interpolate(Exporter& e, Call& c, const InterpolateAttrs& a) {
  const Value& x = c.x();
  Value& y = c.y();
  const std::string& mode = a.mode;
  const std::vector<double>& scale = a.scale_factor;
  const bool corners = a.align_corners;
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  y.sym = x.sym;
  for (int64_t d = 2; d < rank; ++d)
    if (y.shape[d] != x.shape[d] || !scale.empty()) y.sym[d].clear();
  if (mode == "area") {
    adaptive_windows(e, x.name, x, y, false);
    return;
  }
  std::vector<OAttr> at;
  if (mode == "nearest" || mode == "nearest-exact") {
    const bool exact = mode == "nearest-exact";
    at = {astr("mode", "nearest"), astr("coordinate_transformation_mode", exact ? "half_pixel" : "asymmetric"),
          astr("nearest_mode", exact ? "round_prefer_ceil" : "floor")};
  } else if (mode == "linear" || mode == "bilinear" || mode == "trilinear" || mode == "bicubic") {
    at = {astr("mode", mode == "bicubic" ? "cubic" : "linear"),
          astr("coordinate_transformation_mode", corners ? "align_corners" : "half_pixel")};
    if (mode == "bicubic") at.push_back(af("cubic_coeff_a", -0.75));
  } else {
    throw NotImplemented(internal::str("onnx::export_model: op 'interpolate' (", e.where(),
                                       ") has no ONNX mapping for mode '", mode, "'"));
  }
  std::vector<std::string> ins{x.name, ""};
  if (!scale.empty() && !corners) {
    std::vector<float> s(static_cast<size_t>(rank), 1.0f);
    for (int64_t d = 2; d < rank; ++d) s[d] = static_cast<float>(scale.size() == 1 ? scale[0] : scale[d - 2]);
    ins.push_back(e.const_tensor(tensor(std::vector<double>(s.begin(), s.end()), dtype(kFloat32))));
  } else {
    std::vector<int64_t> spatial(y.shape.begin() + 2, y.shape.end());
    ins.push_back("");
    if (Exporter::has_sym(x))
      ins.push_back(e.node("Concat", {e.shape_of(x.name, 0, 2), e.const_i64(spatial)}, {ai("axis", 0)}));
    else ins.push_back(e.const_i64(std::vector<int64_t>(y.shape.begin(), y.shape.end())));
  }
  e.node("Resize", ins, at, y.name);
  if (!scale.empty())
    for (int64_t d = 2; d < rank; ++d)
      if (!x.sym[d].empty()) y.sym[d] = internal::str(x.sym[d], "_resized");
}

}  // namespace

void add_nn_lowerings(LoweringTable& t) {
  lower<lower_matmul, OpId::matmul, OpId::mm, OpId::bmm>(t);
  lower<lower_linear, OpId::linear>(t);
  lower<lower_conv, OpId::conv1d, OpId::conv2d, OpId::conv3d>(t);
  lower<lower_conv_transpose2d, OpId::conv_transpose2d>(t);
  lower<lower_max_pool, OpId::max_pool2d>(t);
  lower<lower_avg_pool, OpId::avg_pool2d>(t);
  lower<lower_adaptive_pool, OpId::adaptive_avg_pool2d, OpId::adaptive_max_pool2d>(t);
  lower<lower_batch_norm, OpId::batch_norm>(t);
  lower<lower_instance_norm, OpId::instance_norm>(t);
  lower<lower_interpolate, OpId::interpolate>(t);
  lower<lower_grid_sample, OpId::grid_sample>(t);
  lower<lower_grid_sample16, OpId::grid_sample>(t, 16);
}

}  // namespace nabla::onnx::internal
