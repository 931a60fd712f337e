// Registry entries for the recurrent layers (see opinfo.h): each call builds the module, replaces
// its parameter members by the sample's inputs and runs it, so gradcheck differentiates with respect
// to the input, the initial state and every weight and bias.
//
// A sample's inputs are: x, then the state if the sample gives one (h, or h and c for LSTM), then
// the weights of every layer and direction in registration order (weight_ih, weight_hh, bias_ih,
// bias_hh, weight_hr), then one int64 scalar that encodes the module's options (RnnConfig), so one
// entry covers several configurations and still has samples small enough for gradgradcheck.
//
// The *_packed entries run the same modules on x packed by pack_padded_sequence (lengths from
// packed_lengths, unsorted) and return the output padded again by pad_packed_sequence, so they also
// cover nn::utils::rnn; nn.utils.pad_sequence and nn.utils.pack_padded_sequence cover the utilities alone.
#include <gtest/gtest.h>

#include <type_traits>

#include "opinfo.h"

namespace nabla::testing {
namespace {

using I = const Inputs&;

struct RnnConfig {
  int64_t num_layers = 1;
  bool bidirectional = false;
  int64_t proj_size = 0;
  bool bias = true;
  bool batch_first = false;
  bool dropout = false;  // dropout 0.5 between layers (training mode, a fixed seed per call)
  bool state = true;     // the sample gives h0 (and c0)
};

// One decimal digit per field.
int64_t encode(const RnnConfig& c) {
  return c.num_layers + 10 * c.bidirectional + 100 * c.proj_size + 1000 * c.bias + 10000 * c.batch_first +
         100000 * c.dropout + 1000000 * c.state;
}
RnnConfig decode(const Tensor& t) {
  int64_t v = t.item<int64_t>();
  auto digit = [&](int64_t k) { return (v / k) % 10; };
  return {.num_layers = digit(1),
          .bidirectional = digit(10) != 0,
          .proj_size = digit(100),
          .bias = digit(1000) != 0,
          .batch_first = digit(10000) != 0,
          .dropout = digit(100000) != 0,
          .state = digit(1000000) != 0};
}

constexpr int64_t kUnbatched = -1;

// A sequence-module sample: x (L, N, H_in) (or (N, L, H_in), or (L, H_in) for N = kUnbatched), the
// state if c.state, every layer's weights, the config. `noncontiguous`: x and the weight matrices
// are built transposed.
Sample seq_sample(std::string desc, int64_t gates, bool lstm, RnnConfig c, int64_t L, int64_t N, int64_t H_in,
                  int64_t H, bool noncontiguous = false) {
  const int64_t D = c.bidirectional ? 2 : 1, H_out = c.proj_size > 0 ? c.proj_size : H;
  auto mat = [&](Shape s) { return noncontiguous ? arg_t(s) : arg(s); };
  auto batch = [&](Shape s) {  // inserts N as the second-to-last dim unless unbatched
    if (N != kUnbatched) s.insert(s.end() - 1, N);
    return s;
  };
  Sample smp{{}, std::move(desc)};
  Shape x_shape = N == kUnbatched ? Shape{L, H_in} : c.batch_first ? Shape{N, L, H_in} : Shape{L, N, H_in};
  smp.args.push_back(mat(x_shape));
  if (c.state) {
    smp.args.push_back(arg(batch({D * c.num_layers, H_out})));
    if (lstm) smp.args.push_back(arg(batch({D * c.num_layers, H})));
  }
  for (int64_t layer = 0; layer < c.num_layers; ++layer)
    for (int64_t d = 0; d < D; ++d) {
      smp.args.push_back(mat({gates * H, layer == 0 ? H_in : D * H_out}));
      smp.args.push_back(mat({gates * H, H_out}));
      if (c.bias) {
        smp.args.push_back(arg({gates * H}));
        smp.args.push_back(arg({gates * H}));
      }
      if (c.proj_size > 0) smp.args.push_back(mat({c.proj_size, H}));
    }
  smp.args.push_back(fixed_index({}, {static_cast<double>(encode(c))}));
  return smp;
}

// A cell sample: x (N, H_in) or (H_in), the state (h, or h and c) if c.state, weight_ih,
// weight_hh, the biases if c.bias, the config.
Sample cell_sample(std::string desc, int64_t gates, bool lstm, RnnConfig c, int64_t N, int64_t H_in, int64_t H,
                   bool noncontiguous = false) {
  auto mat = [&](Shape s) { return noncontiguous ? arg_t(s) : arg(s); };
  Sample smp{{}, std::move(desc)};
  smp.args.push_back(N == kUnbatched ? arg({H_in}) : mat({N, H_in}));
  if (c.state)
    for (int k = 0; k < (lstm ? 2 : 1); ++k) smp.args.push_back(N == kUnbatched ? arg({H}) : arg({N, H}));
  smp.args.push_back(mat({gates * H, H_in}));
  smp.args.push_back(mat({gates * H, H}));
  if (c.bias) {
    smp.args.push_back(arg({gates * H}));
    smp.args.push_back(arg({gates * H}));
  }
  smp.args.push_back(fixed_index({}, {static_cast<double>(encode(c))}));
  return smp;
}

// The parts of a sample's inputs.
struct Parts {
  RnnConfig c;
  Tensor x, h, c0;
  size_t first_weight;
  int64_t hidden_size;
};
Parts split(I in, int64_t gates, bool lstm) {
  Parts p;
  p.c = decode(in.back());
  p.x = in[0];
  size_t states = p.c.state ? (lstm ? 2 : 1) : 0;
  if (states >= 1) p.h = in[1];
  if (states == 2) p.c0 = in[2];
  p.first_weight = 1 + states;
  p.hidden_size = in[p.first_weight].size(0) / gates;
  return p;
}

// Replaces the module's parameter members, in registration order, by in[first...].
void set_weights(std::vector<nn::RNNLayerWeights>& weights, I in, size_t first) {
  size_t k = first;
  for (nn::RNNLayerWeights& w : weights)
    for (Tensor* t : {&w.weight_ih, &w.weight_hh, &w.bias_ih, &w.bias_hh, &w.weight_hr})
      if (t->defined()) *t = in.at(k++);
  check<ValueError>(k + 1 == in.size(), "opinfo_rnn: ", in.size() - 1 - k, " inputs left over after the weights");
}
void set_weights(nn::RNNCellBase& m, I in, size_t first) {
  m.weight_ih = in.at(first);
  m.weight_hh = in.at(first + 1);
  if (m.bias) {
    m.bias_ih = in.at(first + 2);
    m.bias_hh = in.at(first + 3);
  }
}

double dropout_p(const RnnConfig& c) { return c.dropout ? 0.5 : 0.0; }

// The lengths the *_packed entries pack a batch of N sequences of L steps with: increasing
// (1, 2, ..., L, cycling), so pack_padded_sequence sorts them and the module permutes the state.
std::vector<int64_t> packed_lengths(int64_t L, int64_t N) {
  std::vector<int64_t> lengths;
  for (int64_t b = 0; b < N; ++b) lengths.push_back(L - (N - 1 - b) % L);
  return lengths;
}

// Runs module m (an RNN, LSTM or GRU) on the sample's x, padded or, with `packed`, packed and padded
// again; `state` is h0 (RNN, GRU) or the LSTMState.
template <class M, class State>
Outputs run_module(M& m, const Parts& p, const State& state, bool packed) {
  manual_seed(1234);
  if (!packed) {
    auto r = m.forward_with_state(p.x, state);
    if constexpr (std::is_same_v<State, nn::LSTMState>) return {r.output, r.h_n, r.c_n};
    else return {r.output, r.h_n};
  }
  const int64_t L = p.x.size(p.c.batch_first ? 1 : 0), N = p.x.size(p.c.batch_first ? 0 : 1);
  auto r = m.forward_with_state(nn::utils::rnn::pack_padded_sequence(p.x, packed_lengths(L, N), p.c.batch_first, false),
                                state);
  Tensor out = nn::utils::rnn::pad_packed_sequence(r.output, p.c.batch_first).padded;
  if constexpr (std::is_same_v<State, nn::LSTMState>) return {out, r.h_n, r.c_n};
  else return {out, r.h_n};
}

std::function<Outputs(I)> rnn_fn(const std::string& nonlinearity, bool packed = false) {
  return [nonlinearity, packed](I in) {
    Parts p = split(in, 1, false);
    nn::RNN m(p.x.size(-1), p.hidden_size,
              {.num_layers = p.c.num_layers,
               .nonlinearity = nonlinearity,
               .bias = p.c.bias,
               .batch_first = p.c.batch_first,
               .dropout = dropout_p(p.c),
               .bidirectional = p.c.bidirectional});
    set_weights(m.weights, in, p.first_weight);
    return run_module(m, p, p.h, packed);
  };
}

std::function<Outputs(I)> lstm_fn(bool packed = false) {
  return [packed](I in) {
    Parts p = split(in, 4, true);
    nn::LSTM m(p.x.size(-1), p.hidden_size,
               {.num_layers = p.c.num_layers,
                .bias = p.c.bias,
                .batch_first = p.c.batch_first,
                .dropout = dropout_p(p.c),
                .bidirectional = p.c.bidirectional,
                .proj_size = p.c.proj_size});
    set_weights(m.weights, in, p.first_weight);
    return run_module(m, p, nn::LSTMState{p.h, p.c0}, packed);
  };
}

std::function<Outputs(I)> gru_fn(bool packed = false) {
  return [packed](I in) {
    Parts p = split(in, 3, false);
    nn::GRU m(p.x.size(-1), p.hidden_size,
              {.num_layers = p.c.num_layers,
               .bias = p.c.bias,
               .batch_first = p.c.batch_first,
               .dropout = dropout_p(p.c),
               .bidirectional = p.c.bidirectional});
    set_weights(m.weights, in, p.first_weight);
    return run_module(m, p, p.h, packed);
  };
}

std::vector<Sample> rnn_samples(bool relu) {
  // Element counts for gradgradcheck (<= 40): "small" 19, "bidirectional_2layer_small" 25.
  std::vector<Sample> s = {
      seq_sample("small", 1, false, {}, 2, 2, 1, 2),
      seq_sample("bidirectional_2layer_small", 1, false, {.num_layers = 2, .bidirectional = true}, 2, 1, 1, 1),
      seq_sample("batched", 1, false, {}, 3, 2, 3, 4),
      seq_sample("unbatched_no_h0", 1, false, {.state = false}, 3, kUnbatched, 3, 2),
      seq_sample("batch_first_no_bias", 1, false, {.bias = false, .batch_first = true}, 3, 2, 2, 3),
      seq_sample("noncontiguous", 1, false, {}, 3, 2, 3, 2, true),
  };
  if (relu) s.push_back(seq_sample("2layer_dropout", 1, false, {.num_layers = 2, .dropout = true}, 3, 2, 2, 3));
  return s;
}

std::vector<OpInfo> rnn_ops() {
  std::vector<OpInfo> ops;
  ops.push_back({.name = "nn.RNN",
                 .ops = {OpId::rnn},
                 .torch = "T.rnn(x, 'RNN')",
                 .fn = rnn_fn("tanh"),
                 .samples = rnn_samples(false)});
  ops.push_back({.name = "nn.RNN_relu",
                 .ops = {OpId::rnn},
                 .torch = "T.rnn(x, 'RNN', 'relu')",
                 .fn = rnn_fn("relu"),
                 .samples = rnn_samples(true)});
  ops.push_back({.name = "nn.LSTM",
                 .ops = {OpId::lstm},
                 .torch = "T.rnn(x, 'LSTM')",
                 .fn = lstm_fn(),
                 .samples = {
                     // gradgradcheck sizes: "small" 21, "bidirectional_small" 19, "proj_small" 24
                     seq_sample("small", 4, true, {}, 2, 1, 1, 1),
                     seq_sample("bidirectional_small", 4, true, {.bidirectional = true, .bias = false, .state = false},
                                2, 1, 1, 1),
                     seq_sample("proj_small", 4, true, {.proj_size = 1, .bias = false}, 2, 1, 1, 2),
                     seq_sample("batched", 4, true, {}, 3, 2, 3, 2),
                     seq_sample("bidirectional_2layer_proj", 4, true,
                                {.num_layers = 2, .bidirectional = true, .proj_size = 1}, 3, 2, 2, 2),
                     seq_sample("unbatched_batch_first_no_state", 4, true, {.batch_first = true, .state = false}, 3,
                                kUnbatched, 2, 2),
                     seq_sample("batch_first", 4, true, {.batch_first = true}, 3, 2, 2, 2),
                     seq_sample("2layer_dropout", 4, true, {.num_layers = 2, .dropout = true}, 3, 2, 2, 2),
                     seq_sample("noncontiguous", 4, true, {}, 3, 2, 3, 2, true),
                 }});
  ops.push_back({.name = "nn.GRU",
                 .ops = {OpId::gru},
                 .torch = "T.rnn(x, 'GRU')",
                 .fn = gru_fn(),
                 .samples = {
                     // gradgradcheck sizes: "small" 19, "bidirectional_small" 27
                     seq_sample("small", 3, false, {}, 2, 2, 1, 1),
                     seq_sample("bidirectional_small", 3, false, {.bidirectional = true, .state = false}, 2, 1, 1, 1),
                     seq_sample("batched", 3, false, {}, 3, 2, 3, 2),
                     seq_sample("bidirectional_2layer", 3, false, {.num_layers = 2, .bidirectional = true}, 3, 2, 2, 2),
                     seq_sample("unbatched", 3, false, {}, 3, kUnbatched, 2, 2),
                     seq_sample("batch_first_no_bias", 3, false, {.bias = false, .batch_first = true}, 3, 2, 2, 2),
                     seq_sample("2layer_dropout", 3, false, {.num_layers = 2, .dropout = true}, 3, 2, 2, 2),
                     seq_sample("noncontiguous", 3, false, {}, 3, 2, 3, 2, true),
                 }});

  // ---- packed input (every sample batched, N >= 2 so the lengths differ) ----
  ops.push_back({.name = "nn.RNN_packed",
                 .torch = "T.rnn(x, 'RNN', packed=True)",
                 .fn = rnn_fn("tanh", true),
                 .samples = {
                     seq_sample("small", 1, false, {}, 2, 2, 1, 2),  // 19 elements
                     seq_sample("bidirectional_2layer", 1, false, {.num_layers = 2, .bidirectional = true}, 3, 3, 2, 2),
                     seq_sample("batch_first_no_bias_no_h0", 1, false,
                                {.bias = false, .batch_first = true, .state = false}, 3, 3, 2, 3),
                     seq_sample("noncontiguous", 1, false, {}, 3, 3, 3, 2, true),
                 }});
  ops.push_back({.name = "nn.LSTM_packed",
                 .torch = "T.rnn(x, 'LSTM', packed=True)",
                 .fn = lstm_fn(true),
                 .samples = {
                     seq_sample("small", 4, true, {}, 2, 2, 1, 1),  // 28 elements
                     seq_sample("bidirectional_2layer_proj", 4, true,
                                {.num_layers = 2, .bidirectional = true, .proj_size = 1}, 3, 3, 2, 2),
                     seq_sample("batch_first_no_state", 4, true, {.batch_first = true, .state = false}, 3, 3, 2, 2),
                     seq_sample("2layer_dropout", 4, true, {.num_layers = 2, .dropout = true}, 3, 3, 2, 2),
                 }});
  ops.push_back(
      {.name = "nn.GRU_packed",
       .torch = "T.rnn(x, 'GRU', packed=True)",
       .fn = gru_fn(true),
       .samples = {
           seq_sample("bidirectional_small", 3, false, {.bidirectional = true}, 2, 2, 1, 1),  // 32 elements
           seq_sample("2layer", 3, false, {.num_layers = 2}, 3, 3, 2, 2),
           seq_sample("batch_first_bidirectional", 3, false, {.bidirectional = true, .batch_first = true}, 3, 3, 2, 2),
       }});
  // pad_sequence of three sequences (3, F), (1, F), (2, F); with F = 1 also batch_first and padding 0.5.
  ops.push_back({.name = "nn.utils.pad_sequence",
                 .torch = "T.pad_sequence(x)",
                 .fn =
                     [](I in) {
                       const bool small = in[0].size(-1) == 1;
                       return Outputs{nn::utils::rnn::pad_sequence({in[0], in[1], in[2]}, small, small ? 0.5 : 0.0)};
                     },
                 .samples = {
                     {{arg({3, 1}), arg({1, 1}), arg({2, 1})}, "batch_first"},
                     {{arg({3, 2}), arg({1, 2}), arg({2, 2})}, "features"},
                     {{arg_t({3, 2}), arg({1, 2}), arg_t({2, 2})}, "noncontiguous"},
                 }});
  // pack_padded_sequence of x (T, B, *) with lengths packed_lengths(T, B); outputs the packed data
  // and pad_packed_sequence's padding of it (padding 0.5, total_length T + 1).
  ops.push_back(
      {.name = "nn.utils.pack_padded_sequence",
       .torch = "T.pack_padded_sequence(x)",
       .fn =
           [](I in) {
             auto p = nn::utils::rnn::pack_padded_sequence(in[0], packed_lengths(in[0].size(0), in[0].size(1)), false,
                                                           false);
             return Outputs{p.data, nn::utils::rnn::pad_packed_sequence(p, false, 0.5, in[0].size(0) + 1).padded};
           },
       .samples = {
           {{arg({3, 3})}, "2d"},
           {{arg({3, 4, 2})}, "features"},
           {{arg_t({2, 3})}, "noncontiguous"},
       }});

  // ---- cells ----
  auto rnn_cell = [](const std::string& nonlinearity) {
    return [nonlinearity](I in) {
      Parts p = split(in, 1, false);
      nn::RNNCell m(p.x.size(-1), p.hidden_size, {.bias = p.c.bias, .nonlinearity = nonlinearity});
      set_weights(m, in, p.first_weight);
      return Outputs{m(p.x, p.h)};
    };
  };
  std::vector<Sample> rnn_cell_samples = {
      cell_sample("small", 1, false, {}, 2, 3, 2),  // 25 elements
      cell_sample("unbatched_no_h", 1, false, {.state = false}, kUnbatched, 3, 4),
      cell_sample("no_bias", 1, false, {.bias = false}, 3, 2, 3),
      cell_sample("noncontiguous", 1, false, {}, 3, 2, 3, true),
  };
  ops.push_back(
      {.name = "nn.RNNCell", .torch = "T.rnn_cell(x, 'RNN')", .fn = rnn_cell("tanh"), .samples = rnn_cell_samples});
  ops.push_back({.name = "nn.RNNCell_relu",
                 .torch = "T.rnn_cell(x, 'RNN', 'relu')",
                 .fn = rnn_cell("relu"),
                 .samples = rnn_cell_samples});
  ops.push_back({.name = "nn.LSTMCell",
                 .torch = "T.rnn_cell(x, 'LSTM')",
                 .fn =
                     [](I in) {
                       Parts p = split(in, 4, true);
                       nn::LSTMCell m(p.x.size(-1), p.hidden_size, {.bias = p.c.bias});
                       set_weights(m, in, p.first_weight);
                       nn::LSTMState s = m.forward_with_state(p.x, {p.h, p.c0});
                       return Outputs{s.h, s.c};
                     },
                 .samples = {
                     cell_sample("small", 4, true, {}, 2, 2, 1),  // 29 elements
                     cell_sample("batched", 4, true, {}, 3, 3, 2),
                     cell_sample("unbatched_no_state", 4, true, {.state = false}, kUnbatched, 3, 2),
                     cell_sample("no_bias_noncontiguous", 4, true, {.bias = false}, 3, 2, 2, true),
                 }});
  ops.push_back({.name = "nn.GRUCell",
                 .torch = "T.rnn_cell(x, 'GRU')",
                 .fn =
                     [](I in) {
                       Parts p = split(in, 3, false);
                       nn::GRUCell m(p.x.size(-1), p.hidden_size, {.bias = p.c.bias});
                       set_weights(m, in, p.first_weight);
                       return Outputs{m(p.x, p.h)};
                     },
                 .samples = {
                     cell_sample("small", 3, false, {}, 2, 2, 1),  // 22 elements
                     cell_sample("batched", 3, false, {}, 3, 3, 2),
                     cell_sample("unbatched", 3, false, {}, kUnbatched, 3, 2),
                     cell_sample("no_bias_noncontiguous", 3, false, {.bias = false}, 3, 2, 2, true),
                 }});
  return ops;
}

Registrar rnn_registrar(rnn_ops());

}  // namespace
}  // namespace nabla::testing
