#include "nn/rnn.h"

#include <cmath>

#include "core/autocast.h"
#include "core/trace.h"
#include "nn/functional.h"
#include "nn/init.h"

namespace nabla::nn {

namespace {

// ---- one time step, shared by the cells and the sequence modules ----------------------------------
// xp: the input projection W_ih x + b_ih (N, G * H), to which the sequence modules fold b_hh where the
// equations allow it (RNN, LSTM); b_hh here is then undefined. h: (N, H_out), c: (N, H).

Tensor rnn_step(const Tensor& xp, const Tensor& h, const Tensor& w_hh, const Tensor& b_hh, bool relu) {
  Tensor pre = xp + linear(h, w_hh, b_hh);
  return relu ? nabla::relu(pre) : nabla::tanh(pre);
}

LSTMState lstm_step(const Tensor& xp, const Tensor& h, const Tensor& c, const Tensor& w_hh, const Tensor& b_hh,
                    const Tensor& w_hr) {
  std::vector<Tensor> gates = (xp + linear(h, w_hh, b_hh)).chunk(4, -1);  // 4 x (N, H): i, f, g, o
  Tensor i = sigmoid(gates[0]), f = sigmoid(gates[1]), g = tanh(gates[2]), o = sigmoid(gates[3]);
  Tensor c1 = addcmul(f * c, i, g);  // f * c + i * g
  Tensor h1 = o * tanh(c1);
  if (w_hr.defined()) h1 = linear(h1, w_hr);  // (N, proj_size)
  return {h1, c1};
}

Tensor gru_step(const Tensor& xp, const Tensor& h, const Tensor& w_hh, const Tensor& b_hh) {
  std::vector<Tensor> x3 = xp.chunk(3, -1);                     // W_ir x + b_ir, W_iz x + b_iz, W_in x + b_in
  std::vector<Tensor> h3 = linear(h, w_hh, b_hh).chunk(3, -1);  // W_hr h + b_hr, W_hz h + b_hz, W_hn h + b_hn
  Tensor r = sigmoid(x3[0] + h3[0]), z = sigmoid(x3[1] + h3[1]);
  Tensor n = tanh(addcmul(x3[2], r, h3[2]));
  return n + z * (h - n);  // (1 - z) * n + z * h
}

int64_t gate_count(RNNBase::Mode mode) {
  switch (mode) {
    case RNNBase::Mode::lstm: return 4;
    case RNNBase::Mode::gru: return 3;
    default: return 1;
  }
}

bool is_relu(const std::string& module, const std::string& nonlinearity) {
  NABLA_CHECK(ValueError, nonlinearity == "tanh" || nonlinearity == "relu", module, ": unknown nonlinearity '",
              nonlinearity, "' (expected 'tanh' or 'relu')");
  return nonlinearity == "relu";
}

void check_sizes(const std::string& module, int64_t input_size, int64_t hidden_size) {
  NABLA_CHECK(ValueError, input_size >= 0, module, ": input_size must be non-negative, got ", input_size);
  NABLA_CHECK(ValueError, hidden_size > 0, module, ": hidden_size must be positive, got ", hidden_size);
}

void init_uniform(Tensor& t, int64_t hidden_size) {
  if (!t.defined()) return;
  double bound = 1.0 / std::sqrt(static_cast<double>(hidden_size));
  init::uniform_(t, -bound, bound);
}

// An initial state: the given one, checked against `want`, or zeros. `state` belongs to input x
// (already made batched: `batched` says whether it was), so a batched x needs a batched state.
Tensor initial_state(const std::string& module, const char* what, const Tensor& state, const Tensor& x,
                     const Tensor& x_given, bool batched, Shape want) {
  if (!state.defined()) return zeros(want, dtype(x.dtype()).device(x.device()));
  const int64_t want_dim = batched ? static_cast<int64_t>(want.size()) : static_cast<int64_t>(want.size()) - 1;
  NABLA_CHECK(ShapeError, state.dim() == want_dim, module, ": ", batched ? "a batched" : "an unbatched", " input ",
              x_given.sizes(), " needs a ", want_dim, "-D ", what, ", got shape ", state.sizes());
  Tensor s = batched ? state : state.unsqueeze(-2);
  if (s.sizes() != want) {
    Shape shown = want;
    if (!batched) shown.erase(shown.end() - 2);
    NABLA_CHECK(ShapeError, false, module, ": expected ", what, " of shape ", shown, ", got ", state.sizes());
  }
  NABLA_CHECK(DTypeError, s.dtype() == x.dtype(), module, ": ", what, " has dtype ", s.dtype(), " but the input has ",
              x.dtype());
  return s;
}

}  // namespace

// ---- cells ------------------------------------------------------------------------------------------

RNNCellBase::RNNCellBase(std::string name, int64_t in, int64_t hidden, bool with_bias, int64_t gates)
    : Module(name), input_size(in), hidden_size(hidden), bias(with_bias) {
  check_sizes(name, in, hidden);
  weight_ih = register_parameter("weight_ih", empty({gates * hidden, in}));
  weight_hh = register_parameter("weight_hh", empty({gates * hidden, hidden}));
  if (bias) {
    bias_ih = register_parameter("bias_ih", empty({gates * hidden}));
    bias_hh = register_parameter("bias_hh", empty({gates * hidden}));
  }
  reset_parameters();
}

void RNNCellBase::reset_parameters() {
  for (Tensor* t : {&weight_ih, &weight_hh, &bias_ih, &bias_hh}) init_uniform(*t, hidden_size);
}

std::string RNNCellBase::extra_repr() const {
  std::string s = internal::str(input_size, ", ", hidden_size);
  if (!bias) s += ", bias=False";
  return s;
}

void RNNCellBase::check_input(const Tensor& x) const {
  NABLA_CHECK(ShapeError, x.dim() == 1 || x.dim() == 2, name(), ": expected input of 2 dims (N, input_size) or 1 dim ",
              "(input_size), got ", x.sizes());
  NABLA_CHECK(ShapeError, x.size(-1) == input_size, name(), ": expected input with last dim ", input_size,
              " (input_size), got ", x.sizes());
}

Tensor RNNCellBase::check_state(const Tensor& x, const Tensor& state, const char* what) const {
  const bool batched = x.dim() == 2;
  Tensor x2 = batched ? x : x.unsqueeze(0);
  return initial_state(name(), what, state, x2, x, batched, {x2.size(0), hidden_size});
}

RNNCell::RNNCell(int64_t in, int64_t hidden, RNNCellOptions o)
    : RNNCellBase("RNNCell", in, hidden, o.bias, 1), nonlinearity(o.nonlinearity) {
  is_relu("RNNCell", nonlinearity);
}

Tensor RNNCell::forward(Tensor x) { return forward(std::move(x), Tensor()); }

Tensor RNNCell::forward(Tensor x, Tensor h) {
  check_input(x);
  Tensor h2 = check_state(x, h, "h");
  Tensor x2 = x.dim() == 2 ? x : x.unsqueeze(0);
  Tensor h1 = rnn_step(linear(x2, weight_ih, bias_ih), h2, weight_hh, bias_hh, is_relu(name(), nonlinearity));
  return x.dim() == 2 ? h1 : h1.squeeze(0);
}

std::string RNNCell::extra_repr() const {
  std::string s = RNNCellBase::extra_repr();
  if (nonlinearity != "tanh") s += ", nonlinearity=" + nonlinearity;
  return s;
}

LSTMCell::LSTMCell(int64_t in, int64_t hidden, LSTMCellOptions o) : RNNCellBase("LSTMCell", in, hidden, o.bias, 4) {}

LSTMState LSTMCell::forward_with_state(Tensor x, LSTMState state) {
  check_input(x);
  Tensor h = check_state(x, state.h, "h"), c = check_state(x, state.c, "c");
  Tensor x2 = x.dim() == 2 ? x : x.unsqueeze(0);
  LSTMState out = lstm_step(linear(x2, weight_ih, bias_ih), h, c, weight_hh, bias_hh, Tensor());
  if (x.dim() == 1) out = {out.h.squeeze(0), out.c.squeeze(0)};
  return out;
}

Tensor LSTMCell::forward(Tensor x) { return forward_with_state(std::move(x)).h; }

GRUCell::GRUCell(int64_t in, int64_t hidden, GRUCellOptions o) : RNNCellBase("GRUCell", in, hidden, o.bias, 3) {}

Tensor GRUCell::forward(Tensor x) { return forward(std::move(x), Tensor()); }

Tensor GRUCell::forward(Tensor x, Tensor h) {
  check_input(x);
  Tensor h2 = check_state(x, h, "h");
  Tensor x2 = x.dim() == 2 ? x : x.unsqueeze(0);
  Tensor h1 = gru_step(linear(x2, weight_ih, bias_ih), h2, weight_hh, bias_hh);
  return x.dim() == 2 ? h1 : h1.squeeze(0);
}

// ---- sequence modules -------------------------------------------------------------------------------

RNNBase::RNNBase(std::string name, Mode m, int64_t in, int64_t hidden, const LSTMOptions& o)
    : Module(name),
      mode(m),
      input_size(in),
      hidden_size(hidden),
      num_layers(o.num_layers),
      bias(o.bias),
      batch_first(o.batch_first),
      dropout(o.dropout),
      bidirectional(o.bidirectional),
      proj_size(o.proj_size) {
  check_sizes(name, in, hidden);
  NABLA_CHECK(ValueError, num_layers >= 1, name, ": num_layers must be at least 1, got ", num_layers);
  NABLA_CHECK(ValueError, dropout >= 0 && dropout <= 1, name, ": dropout must be in [0, 1], got ", dropout);
  NABLA_CHECK(ValueError, proj_size >= 0, name, ": proj_size must be non-negative, got ", proj_size);
  NABLA_CHECK(ValueError, proj_size < hidden_size, name,
              ": proj_size must be smaller than hidden_size, got proj_size=", proj_size,
              " and hidden_size=", hidden_size);
  const int64_t G = gate_count(mode), D = num_directions(), H_out = output_hidden_size();
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    const int64_t layer_in = layer == 0 ? input_size : D * H_out;
    for (int64_t d = 0; d < D; ++d) {
      const std::string suffix = internal::str("_l", layer, d == 1 ? "_reverse" : "");
      RNNLayerWeights w;
      w.weight_ih = register_parameter("weight_ih" + suffix, empty({G * hidden_size, layer_in}));
      w.weight_hh = register_parameter("weight_hh" + suffix, empty({G * hidden_size, H_out}));
      if (bias) {
        w.bias_ih = register_parameter("bias_ih" + suffix, empty({G * hidden_size}));
        w.bias_hh = register_parameter("bias_hh" + suffix, empty({G * hidden_size}));
      }
      if (proj_size > 0) w.weight_hr = register_parameter("weight_hr" + suffix, empty({proj_size, hidden_size}));
      weights.push_back(std::move(w));
    }
  }
  reset_parameters();
}

void RNNBase::reset_parameters() {
  for (RNNLayerWeights& w : weights)
    for (Tensor* t : {&w.weight_ih, &w.weight_hh, &w.bias_ih, &w.bias_hh, &w.weight_hr}) init_uniform(*t, hidden_size);
}

std::string RNNBase::extra_repr() const {
  // As PyTorch's RNNBase.extra_repr (which leaves out RNN's nonlinearity).
  std::string s = internal::str(input_size, ", ", hidden_size);
  if (proj_size != 0) s += internal::str(", proj_size=", proj_size);
  if (num_layers != 1) s += internal::str(", num_layers=", num_layers);
  if (!bias) s += ", bias=False";
  if (batch_first) s += ", batch_first=True";
  if (dropout != 0) s += ", dropout=" + repr_double(dropout);
  if (bidirectional) s += ", bidirectional=True";
  return s;
}

Tensor RNNBase::forward(Tensor x) { return run(x, Tensor(), Tensor()).output; }

RNNBase::Result RNNBase::run(const Tensor& x_given, const Tensor& h0_given, const Tensor& c0_given) {
  // ONNX export sees the whole module as one op ("rnn", "lstm" or "gru": ONNX's RNN, LSTM, GRU);
  // inputs: x, h0, c0, then per layer and direction weight_ih, weight_hh, bias_ih, bias_hh, weight_hr.
  if (trace::Tracer* t = trace::active()) [[unlikely]] {
    std::vector<Tensor> ins{x_given, h0_given, c0_given};
    for (const RNNLayerWeights& w : weights)
      ins.insert(ins.end(), {w.weight_ih, w.weight_hh, w.bias_ih, w.bias_hh, w.weight_hr});
    const bool lstm = mode == Mode::lstm;
    std::vector<Tensor> outs = trace::traced(
        t,
        lstm                ? OpId::lstm
        : mode == Mode::gru ? OpId::gru
                            : OpId::rnn,
        ins, RnnAttrs{num_layers, hidden_size, proj_size, bidirectional, batch_first, mode == Mode::rnn_relu}, [&] {
          Result r = run(x_given, h0_given, c0_given);
          return lstm ? std::vector<Tensor>{r.output, r.h_n, r.c_n} : std::vector<Tensor>{r.output, r.h_n};
        });
    return {outs[0], outs[1], lstm ? outs[2] : Tensor()};
  }
  const std::string who = name();
  NABLA_CHECK(ShapeError, x_given.dim() == 2 || x_given.dim() == 3, who, ": expected input of 3 dims (",
              batch_first ? "N, L, input_size" : "L, N, input_size", ") or 2 dims (L, input_size), got ",
              x_given.sizes());
  NABLA_CHECK(ShapeError, x_given.size(-1) == input_size, who, ": expected input with last dim ", input_size,
              " (input_size), got ", x_given.sizes());
  const bool batched = x_given.dim() == 3;
  // x: (L, N, H_in)
  Tensor x = !batched ? x_given.unsqueeze(1) : batch_first ? x_given.transpose(0, 1) : x_given;
  const int64_t L = x.size(0), N = x.size(1);
  NABLA_CHECK(ShapeError, L > 0, who, ": expected a sequence of at least one step, got input ", x_given.sizes());
  const int64_t D = num_directions(), H_out = output_hidden_size();
  const bool lstm = mode == Mode::lstm;
  Tensor h0 = initial_state(who, "h0", h0_given, x, x_given, batched, {D * num_layers, N, H_out});
  Tensor c0 =
      lstm ? initial_state(who, "c0", c0_given, x, x_given, batched, {D * num_layers, N, hidden_size}) : Tensor();

  // Every step runs the whole batch.
  Result r = run_layers(x.reshape({L * N, input_size}), std::vector<int64_t>(static_cast<size_t>(L), N), h0, c0);
  r.output = r.output.view({L, N, D * H_out});
  if (!batched) {
    r.output = r.output.squeeze(1);
    r.h_n = r.h_n.squeeze(1);
    if (lstm) r.c_n = r.c_n.squeeze(1);
  } else if (batch_first) {
    r.output = r.output.transpose(0, 1);
  }
  return r;
}

RNNBase::Result RNNBase::run(const utils::rnn::PackedSequence& x, const Tensor& h0_given, const Tensor& c0_given) {
  const std::string who = name();
  const std::vector<int64_t> batch_sizes = x.checked_batch_sizes(who);
  NABLA_CHECK(ShapeError, x.data.dim() == 2 && x.data.size(1) == input_size, who, ": expected packed data of shape (",
              "sum of lengths, ", input_size, "), got ", x.data.sizes());
  const int64_t N = batch_sizes[0], D = num_directions();
  const bool lstm = mode == Mode::lstm;
  // The states in the packed (sorted) batch order.
  auto sorted = [&](Tensor s) { return x.sorted_indices.defined() ? s.index_select(1, x.sorted_indices) : s; };
  auto unsorted = [&](Tensor s) { return x.unsorted_indices.defined() ? s.index_select(1, x.unsorted_indices) : s; };
  Tensor h0 =
      sorted(initial_state(who, "h0", h0_given, x.data, x.data, true, {D * num_layers, N, output_hidden_size()}));
  Tensor c0 = lstm ? sorted(initial_state(who, "c0", c0_given, x.data, x.data, true, {D * num_layers, N, hidden_size}))
                   : Tensor();
  Result r = run_layers(x.data, batch_sizes, h0, c0);
  r.h_n = unsorted(r.h_n);
  if (lstm) r.c_n = unsorted(r.c_n);
  return r;
}

RNNBase::Result RNNBase::run_layers(Tensor rows, const std::vector<int64_t>& batch_sizes, const Tensor& h0,
                                    const Tensor& c0) {
  if (autocast_internal::active()) [[unlikely]] {
    std::vector<Tensor> ins{rows, h0, c0};
    for (const RNNLayerWeights& w : weights)
      ins.insert(ins.end(), {w.weight_ih, w.weight_hh, w.bias_ih, w.bias_hh, w.weight_hr});
    const OpId id = mode == Mode::lstm ? OpId::lstm : mode == Mode::gru ? OpId::gru : OpId::rnn;
    if (auto ac = autocast_internal::cast_list(id, ins)) {
      std::vector<RNNLayerWeights> ws(weights.size());
      for (size_t i = 0; i < ws.size(); ++i) {
        const size_t k = 3 + 5 * i;
        ws[i] = {ac[k], ac[k + 1], ac[k + 2], ac[k + 3], ac[k + 4]};
      }
      return run_layers(ac[0], batch_sizes, ac[1], ac[2], ws);
    }
  }
  return run_layers(std::move(rows), batch_sizes, h0, c0, weights);
}

RNNBase::Result RNNBase::run_layers(Tensor rows, const std::vector<int64_t>& batch_sizes, const Tensor& h0,
                                    const Tensor& c0, const std::vector<RNNLayerWeights>& ws) {
  const int64_t D = num_directions(), L = static_cast<int64_t>(batch_sizes.size());
  const int64_t B = h0.size(1);
  const bool lstm = mode == Mode::lstm;
  std::vector<Tensor> h_n, c_n;
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    if (layer > 0 && dropout > 0 && training_) rows = functional::dropout(rows, dropout, true);
    std::vector<Tensor> dir_out;
    for (int64_t d = 0; d < D; ++d) {
      const RNNLayerWeights& w = ws.at(static_cast<size_t>(layer * D + d));
      // All steps' input projections at once; RNN and LSTM fold b_hh in here, GRU keeps b_hn apart.
      Tensor b_hh_step = w.bias_hh;
      Tensor b_in = w.bias_ih;
      if (mode != Mode::gru && w.bias_ih.defined()) {
        b_in = w.bias_ih + w.bias_hh;
        b_hh_step = Tensor();
      }
      // L x (batch_sizes[t], G * H); split's one backward node concatenates the steps' gradients once.
      std::vector<Tensor> xp = linear(rows, w.weight_ih, b_in).split_with_sizes(batch_sizes, 0);
      Tensor h = h0.select(0, layer * D + d), c = lstm ? c0.select(0, layer * D + d) : Tensor();
      std::vector<Tensor> outs(static_cast<size_t>(L));
      for (int64_t s = 0; s < L; ++s) {
        const int64_t t = d == 0 ? s : L - 1 - s;
        const Tensor& xp_t = xp[static_cast<size_t>(t)];
        // Only the first n sequences run at this step (all of them unless the input is packed); the
        // others keep their state: in the forward direction their final one, in the backward
        // direction h0 / c0 until their last element comes.
        const int64_t n = xp_t.size(0);
        auto running = [&](const Tensor& state) { return n < B ? state.narrow(0, 0, n) : state; };
        auto update = [&](const Tensor& state, const Tensor& next) {
          return n < B ? cat({next, state.narrow(0, n, B - n)}, 0) : next;
        };
        Tensor h_next;
        switch (mode) {
          case Mode::rnn_tanh:
          case Mode::rnn_relu:
            h_next = rnn_step(xp_t, running(h), w.weight_hh, b_hh_step, mode == Mode::rnn_relu);
            break;
          case Mode::lstm: {
            LSTMState st = lstm_step(xp_t, running(h), running(c), w.weight_hh, b_hh_step, w.weight_hr);
            h_next = st.h;
            c = update(c, st.c);
            break;
          }
          case Mode::gru: h_next = gru_step(xp_t, running(h), w.weight_hh, b_hh_step); break;
        }
        h = update(h, h_next);
        outs[static_cast<size_t>(t)] = h_next;
      }
      dir_out.push_back(cat(outs, 0));  // (S, H_out)
      h_n.push_back(h);
      if (lstm) c_n.push_back(c);
    }
    rows = D == 1 ? dir_out[0] : cat(dir_out, 1);  // (S, D * H_out)
  }
  return {rows, stack(h_n, 0), lstm ? stack(c_n, 0) : Tensor()};
}

namespace {
RNNBase::Mode rnn_mode(const std::string& nonlinearity) {
  return is_relu("RNN", nonlinearity) ? RNNBase::Mode::rnn_relu : RNNBase::Mode::rnn_tanh;
}

// The output data of a module packed as its input.
utils::rnn::PackedSequence packed_like(const utils::rnn::PackedSequence& x, const Tensor& data) {
  return {data, x.batch_sizes, x.sorted_indices, x.unsorted_indices};
}
}  // namespace

RNN::RNN(int64_t in, int64_t hidden, RNNOptions o)
    : RNNBase("RNN", rnn_mode(o.nonlinearity), in, hidden,
              {.num_layers = o.num_layers,
               .bias = o.bias,
               .batch_first = o.batch_first,
               .dropout = o.dropout,
               .bidirectional = o.bidirectional}),
      nonlinearity(o.nonlinearity) {}

RNNOutput RNN::forward_with_state(Tensor x, Tensor h0) {
  Result r = run(x, h0);
  return {r.output, r.h_n};
}

PackedRNNOutput RNN::forward_with_state(const utils::rnn::PackedSequence& x, Tensor h0) {
  Result r = run(x, h0);
  return {packed_like(x, r.output), r.h_n};
}

LSTM::LSTM(int64_t in, int64_t hidden, LSTMOptions o) : RNNBase("LSTM", Mode::lstm, in, hidden, o) {}

LSTMOutput LSTM::forward_with_state(Tensor x, LSTMState state) {
  Result r = run(x, state.h, state.c);
  return {r.output, r.h_n, r.c_n};
}

PackedLSTMOutput LSTM::forward_with_state(const utils::rnn::PackedSequence& x, LSTMState state) {
  Result r = run(x, state.h, state.c);
  return {packed_like(x, r.output), r.h_n, r.c_n};
}

GRU::GRU(int64_t in, int64_t hidden, GRUOptions o)
    : RNNBase("GRU", Mode::gru, in, hidden,
              {.num_layers = o.num_layers,
               .bias = o.bias,
               .batch_first = o.batch_first,
               .dropout = o.dropout,
               .bidirectional = o.bidirectional}) {}

RNNOutput GRU::forward_with_state(Tensor x, Tensor h0) {
  Result r = run(x, h0);
  return {r.output, r.h_n};
}

PackedRNNOutput GRU::forward_with_state(const utils::rnn::PackedSequence& x, Tensor h0) {
  Result r = run(x, h0);
  return {packed_like(x, r.output), r.h_n};
}

}  // namespace nabla::nn
