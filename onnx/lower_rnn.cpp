// nn::RNN, LSTM and GRU as ONNX's RNN, LSTM and GRU (an LSTM with a projection as Scans).
#include <algorithm>

#include "onnx/exporter.h"

namespace nabla::onnx::internal {

namespace {

// One layer of an LSTM with proj_size (ONNX's LSTM has no projection): each direction a Scan over
// X's steps (backwards for the reverse direction, its outputs then stacked in input order), the body
// one step as nabla's LSTM computes it (gates i, f, g, o):
//   gates = x_t W_ih^T + b_ih + h W_hh^T + b_hh;  c = f c + i g;  h = (o tanh(c)) W_hr^T
// The body reads the weights from the outer graph. Returns the layer's output (L, N, D * P); its
// last states go to hs and cs.
std::string projected_lstm_layer(Exporter& e, Call& c, const RnnAttrs& a, int64_t layer, const std::string& X,
                                 const std::string& h0, const std::string& c0, std::vector<std::string>& hs,
                                 std::vector<std::string>& cs) {
  const std::vector<const Value*>& iv = c.iv;
  const Value& x = *iv[0];
  const int64_t H = a.hidden_size, P = a.proj_size, D = a.bidirectional ? 2 : 1;
  std::vector<std::string> dir_outs;
  for (int64_t dd = 0; dd < D; ++dd) {
    auto w = [&](int64_t k) {
      const Value* v = iv[static_cast<size_t>(3 + 5 * (layer * D + dd) + k)];
      return v ? v->name : std::string();
    };
    auto gemm = [&](const std::string& lhs, const std::string& wt, const std::string& bias) {
      std::vector<std::string> ins{lhs, wt};
      if (!bias.empty()) ins.push_back(bias);
      return e.node("Gemm", ins, {ai("transB", 1)});
    };
    auto initial = [&](const std::string& given, int64_t size) {  // (N, size)
      if (!given.empty()) return e.node("Gather", {given, e.const_i64_scalar(layer * D + dd)}, {ai("axis", 0)});
      return e.node("Expand", {e.const_scalar(0, x.dtype),
                               e.node("Concat", {e.shape_of(X, 1, 2), e.const_i64({size})}, {ai("axis", 0)})});
    };
    const std::string h_init = initial(h0, P), c_init = initial(c0, H);
    const std::string h_in = e.fresh("scan_h"), c_in = e.fresh("scan_c"), x_in = e.fresh("scan_x");
    std::string h_out, c_out, y_out;
    auto body = e.subgraph(e.fresh("/scan"), [&] {
      const std::string g = e.node("Add", {gemm(x_in, w(0), w(2)), gemm(h_in, w(1), w(3))});  // (N, 4H)
      std::vector<std::string> q{e.fresh("t"), e.fresh("t"), e.fresh("t"), e.fresh("t")};
      e.node_multi("Split", {g, e.const_i64({H, H, H, H})}, {ai("axis", 1)}, q);
      c_out = e.node("Add", {e.node("Mul", {e.node("Sigmoid", {q[1]}), c_in}),
                             e.node("Mul", {e.node("Sigmoid", {q[0]}), e.node("Tanh", {q[2]})})});
      h_out = gemm(e.node("Mul", {e.node("Sigmoid", {q[3]}), e.node("Tanh", {c_out})}), w(4), "");  // (N, P)
      y_out = e.node("Identity", {h_out});  // the step's output (a graph output once)
    });
    body->inputs = {{h_in, x.dtype, 2}, {c_in, x.dtype, 2}, {x_in, x.dtype, 2}};
    body->outputs = {{h_out, x.dtype, 2}, {c_out, x.dtype, 2}, {y_out, x.dtype, 2}};
    const std::string h_last = e.fresh("t"), c_last = e.fresh("t"), ys = e.fresh("t");  // ys: (L, N, P)
    e.node_multi("Scan", {h_init, c_init, X},
                 {agraph("body", body), ai("num_scan_inputs", 1), aints("scan_input_directions", {dd}),
                  aints("scan_output_directions", {dd})},
                 {h_last, c_last, ys});
    dir_outs.push_back(ys);
    hs.push_back(e.node("Unsqueeze", {h_last, e.axes_input({0})}));
    cs.push_back(e.node("Unsqueeze", {c_last, e.axes_input({0})}));
  }
  return D == 1 ? dir_outs[0] : e.node("Concat", dir_outs, {ai("axis", 2)});  // (L, N, D * P)
}

// nn::RNN / LSTM / GRU as ONNX's RNN / LSTM / GRU, one node per layer (both directions in it).
// in: x, h0, c0 (undefined: zeros), then per layer and direction weight_ih, weight_hh, bias_ih,
// bias_hh, weight_hr. ONNX wants X as (L, N, I) (batch_first and unbatched inputs are transposed /
// unsqueezed around the nodes), W (D, G*H, I), R (D, G*H, H), B (D, 2*G*H) = [Wb, Rb], with the
// gates in its own order: LSTM i, o, f, c (PyTorch i, f, g, o), GRU z, r, h (PyTorch r, z, n; PyTorch
// applies r after the hidden projection: linear_before_reset=1). The weights are reordered here
// into new initializers.
void lower_rnn(Exporter& e, Call& c, const RnnAttrs& a) {
  const std::vector<Tensor>& in = c.in;
  const std::vector<const Value*>& iv = c.iv;
  std::vector<Value>& ov = c.ov;
  const Value& x = *iv[0];
  const int64_t layers = a.num_layers, H = a.hidden_size;
  const int64_t D = a.bidirectional ? 2 : 1;
  const bool batch_first = a.batch_first, lstm = c.op == OpId::lstm, gru = c.op == OpId::gru;
  const bool batched = x.shape.size() == 3;
  const std::string onnx_op = lstm ? "LSTM" : gru ? "GRU" : "RNN";
  // LSTM with proj_size: ONNX's LSTM has no projection, so each direction is a Scan over the
  // sequence (projected_lstm_layer), whatever its length.
  const int64_t P = a.proj_size;
  const std::vector<int64_t> order = lstm  ? std::vector<int64_t>{0, 3, 1, 2}
                                     : gru ? std::vector<int64_t>{1, 0, 2}
                                           : std::vector<int64_t>{0};
  const int64_t G = static_cast<int64_t>(order.size());
  auto weight = [&](int64_t layer, int64_t d, int64_t k) -> const Tensor& { return in[3 + 5 * (layer * D + d) + k]; };
  for (int64_t layer = 0; layer < layers; ++layer)
    for (int64_t d = 0; d < D; ++d)
      for (int64_t k = 0; k < 4; ++k) {
        NABLA_CHECK(
            NotImplemented,
            !iv[3 + 5 * (layer * D + d) + k] ||
                std::any_of(e.inits.begin(), e.inits.end(),
                            [&](const Initializer& i) { return i.name == iv[3 + 5 * (layer * D + d) + k]->name; }),
            "onnx::export_model: op '", e.op_label(), "' (", e.where(),
            ") reads a weight computed in the graph; only parameters and constants export as ONNX's ", onnx_op,
            " weights");
      }
  // A parameter's name with its layer suffix replaced: "lstm.weight_ih_l1" -> "lstm.onnx_W_l1".
  auto init_name = [&](const Tensor& w, const std::string& what, int64_t layer) {
    auto it = e.named.find(w.impl());
    if (it == e.named.end()) return e.fresh("const");
    std::string prefix = it->second.substr(0, it->second.rfind('.') + 1);
    return internal::str(prefix, "onnx_", what, "_l", layer);
  };
  std::string X = x.name;  // (L, N, I)
  if (!batched) X = e.node("Unsqueeze", {X, e.axes_input({1})});
  else if (batch_first) X = e.node("Transpose", {X}, {aints("perm", {1, 0, 2})});
  auto state = [&](const Value* s) {  // (D * layers, N, H)
    if (!s) return std::string();
    return batched ? s->name : e.node("Unsqueeze", {s->name, e.axes_input({1})});
  };
  const std::string h0 = state(iv[1]), c0 = lstm ? state(iv[2]) : std::string();
  std::vector<std::string> hs, cs;
  for (int64_t layer = 0; layer < layers; ++layer) {
    if (P > 0) {  // each direction a Scan (projected_lstm_layer)
      X = projected_lstm_layer(e, c, a, layer, X, h0, c0, hs, cs);
      continue;
    }
    std::string W, R, B;
    {
      trace::Suspend s;  // the reordering is not part of the model
      auto reorder = [&](const Tensor& t) {
        std::vector<Tensor> chunks = t.detach().to(kCPU).chunk(G, 0), parts;
        for (int64_t g : order) parts.push_back(chunks[static_cast<size_t>(g)]);
        return cat(parts, 0);
      };
      std::vector<Tensor> ws, rs, bs;
      for (int64_t d = 0; d < D; ++d) {
        ws.push_back(reorder(weight(layer, d, 0)));
        rs.push_back(reorder(weight(layer, d, 1)));
        if (weight(layer, d, 2).defined() || weight(layer, d, 3).defined()) {
          Tensor bi = weight(layer, d, 2).defined() ? reorder(weight(layer, d, 2)) : zeros({G * H}, dtype(x.dtype));
          Tensor bh = weight(layer, d, 3).defined() ? reorder(weight(layer, d, 3)) : zeros({G * H}, dtype(x.dtype));
          bs.push_back(cat({bi, bh}, 0));
        }
      }
      W = init_name(weight(layer, 0, 0), "W", layer);
      R = init_name(weight(layer, 0, 0), "R", layer);
      e.inits.push_back({W, stack(ws, 0).contiguous()});
      e.inits.push_back({R, stack(rs, 0).contiguous()});
      if (!bs.empty()) {
        B = init_name(weight(layer, 0, 0), "B", layer);
        e.inits.push_back({B, stack(bs, 0).contiguous()});
      }
    }
    auto slice_state = [&](const std::string& s) {
      if (s.empty() || layers == 1) return s;
      return e.node("Slice", {s, e.const_i64({layer * D}), e.const_i64({(layer + 1) * D}), e.const_i64({0})});
    };
    std::vector<std::string> ins{X, W, R, B, "", slice_state(h0)};
    if (lstm) ins.push_back(slice_state(c0));
    while (ins.back().empty()) ins.pop_back();  // absent optional inputs at the end are left out
    std::vector<OAttr> at{ai("hidden_size", H), astr("direction", D == 2 ? "bidirectional" : "forward")};
    if (gru) at.push_back(ai("linear_before_reset", 1));
    if (c.op == OpId::rnn)
      at.push_back(astrings("activations", std::vector<std::string>(static_cast<size_t>(D), a.relu ? "Relu" : "Tanh")));
    std::string Y = e.fresh("t"), Yh = e.fresh("t"), Yc = lstm ? e.fresh("t") : std::string();
    std::vector<std::string> outs{Y, Yh};
    if (lstm) outs.push_back(Yc);
    e.node_multi(onnx_op, ins, at, outs);
    hs.push_back(Yh);
    if (lstm) cs.push_back(Yc);
    // Y: (L, D, N, H) -> (L, N, D * H), the next layer's input
    if (D == 1) X = e.node("Squeeze", {Y, e.axes_input({1})});
    else X = e.node("Reshape", {e.node("Transpose", {Y}, {aints("perm", {0, 2, 1, 3})}), e.const_i64({0, 0, -1})});
  }
  Value& out = ov[0];
  if (!batched) e.node("Squeeze", {X, e.axes_input({1})}, {}, out.name);
  else if (batch_first) e.node("Transpose", {X}, {aints("perm", {1, 0, 2})}, out.name);
  else e.node("Identity", {X}, {}, out.name);
  auto states_out = [&](const std::vector<std::string>& parts, Value& v) {  // (D * layers, N, H)
    std::string s = parts.size() == 1 ? parts[0] : e.node("Concat", parts, {ai("axis", 0)});
    if (!batched) e.node("Squeeze", {s, e.axes_input({1})}, {}, v.name);
    else e.node("Identity", {s}, {}, v.name);
  };
  states_out(hs, ov[1]);
  if (lstm) states_out(cs, ov[2]);
  // Dynamic dims: the output's (L, N) or (N, L) are the input's; the states' N is the input's batch.
  out.sym[0] = x.sym[0];
  if (batched) {
    out.sym[1] = x.sym[1];
    for (size_t i = 1; i < ov.size(); ++i) ov[i].sym[1] = x.sym[batch_first ? 0 : 1];
  }
}

}  // namespace

void add_rnn_lowerings(LoweringTable& t) { lower<lower_rnn, OpId::rnn, OpId::lstm, OpId::gru>(t); }

}  // namespace nabla::onnx::internal
