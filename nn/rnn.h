// Recurrent layers with PyTorch's semantics, parameter names, shapes and initialization, so a
// PyTorch state_dict loads 1:1: the cells RNNCell, LSTMCell, GRUCell (one time step) and the
// sequence modules RNN, LSTM, GRU (stacked layers, optionally bidirectional).
//
//   auto lstm = std::make_shared<nn::LSTM>(10, 20, nn::LSTMOptions{.num_layers = 2, .batch_first = true});
//   Tensor x = randn({8, 5, 10});                                // (N, L, H_in) with batch_first
//   auto [out, h_n, c_n] = lstm->forward_with_state(x);          // zero initial state
//   // out: (8, 5, 20), h_n and c_n: (num_layers, 8, 20)
//   auto [out2, h2, c2] = lstm->forward_with_state(x, {h_n, c_n}); // carry the state on
//   Tensor y = (*lstm)(x);                                       // the output sequence only
//
//   auto gru = std::make_shared<nn::GRU>(10, 20);
//   auto [seq, h] = gru->forward_with_state(randn({5, 8, 10}), h0);  // h0: (1, 8, 20) or undefined
//
//   // Variable-length sequences (nn/rnn_utils.h): a PackedSequence in, a PackedSequence out.
//   using namespace nn::utils::rnn;
//   PackedSequence packed = pack_padded_sequence(x_padded, {3, 5, 2}, false, /*enforce_sorted=*/false);
//   auto [packed_out, h, c] = lstm->forward_with_state(packed);  // PackedLSTMOutput
//   auto [y, lengths] = pad_packed_sequence(packed_out);         // y: (5, 3, 20), zeros past each end
//
//   nn::LSTMCell cell(10, 20);
//   nn::LSTMState s;                                             // undefined h, c: zeros
//   for (const Tensor& x_t : xs) s = cell.forward_with_state(x_t, s);
//
// Calling conventions. Module's virtual forward takes and returns tensors, so the full call of a
// recurrent module, with its state in and out, is `forward_with_state`, returning a struct that
// binds with structured bindings. `forward(x)` (and so (*m)(x), hooks and Sequential) returns the
// output sequence of RNN/LSTM/GRU, h' of RNNCell/GRUCell and h' (not c') of LSTMCell;
// RNNCell/GRUCell also take `forward(x, h)`.
//
// Packed input (PyTorch's forward with a PackedSequence; libtorch's forward_with_packed_input):
// `forward_with_state(const PackedSequence&, state)` of RNN/LSTM/GRU returns PackedRNNOutput /
// PackedLSTMOutput, whose `output` is a PackedSequence with the input's batch_sizes and indices and
// data (sum of lengths, D * H_out). At time step t only the first batch_sizes[t] sequences (sorted by
// decreasing length) are updated, so h_n and c_n hold each sequence's state after its own last
// element, and the backward direction of a bidirectional module starts each sequence at its own
// last element from h0. h0/c0 and h_n/c_n are in the user's batch order (permuted by the packed
// sequence's sorted_indices / unsorted_indices, as PyTorch does); batch_first does not apply.
//
// Shapes (D = 2 if bidirectional else 1, H_out = proj_size if proj_size > 0 else hidden_size):
//   input   (L, N, H_in), (N, L, H_in) with batch_first, or unbatched (L, H_in)
//   h0, h_n (D * num_layers, N, H_out), unbatched (D * num_layers, H_out); never batch-first
//   c0, c_n (D * num_layers, N, hidden_size)                      (LSTM)
//   output  (L, N, D * H_out) (batch_first: (N, L, D * H_out)), unbatched (L, D * H_out); for a
//           bidirectional module the forward direction's features come first.
// Cells: input (N, H_in) or (H_in), h and c (N, hidden_size) or (hidden_size).
//
// Equations (PyTorch's gate order; W x means x W^T):
//   RNN   h' = act(W_ih x + b_ih + W_hh h + b_hh), act tanh or relu
//   LSTM  i, f, g, o = sigmoid, sigmoid, tanh, sigmoid of the four chunks of W_ih x + b_ih + W_hh h + b_hh
//         c' = f * c + i * g;  h' = o * tanh(c');  with proj_size: h' = W_hr (o * tanh(c'))
//   GRU   r, z = sigmoid of the first two chunks of W_ih x + b_ih + W_hh h + b_hh
//         n = tanh(W_in x + b_in + r * (W_hn h + b_hn));  h' = (1 - z) * n + z * h
// Dropout (sequence modules, training mode only) applies to every layer's output but the last.
//
// Parameters (every one U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)), as PyTorch's
// reset_parameters), registered in PyTorch's order: per layer k and direction, weight_ih_l{k},
// weight_hh_l{k}, bias_ih_l{k}, bias_hh_l{k} (bias only), weight_hr_l{k} (proj_size only), the
// backward direction with the suffix _reverse. With G gates (RNN 1, LSTM 4, GRU 3):
//   weight_ih (G * hidden_size, layer input size: input_size, then D * H_out)
//   weight_hh (G * hidden_size, H_out);  bias_ih, bias_hh (G * hidden_size);  weight_hr (proj_size, hidden_size)
// Cells register weight_ih (G * hidden_size, input_size), weight_hh, bias_ih, bias_hh.
// The forward passes read the public tensor members below (as Linear's `weight`), so assigning
// another tensor to a member swaps the parameter the computation uses.
//
// Speed: per layer and direction, the input projection of all time steps is one matrix product
// ((L * N, H_in) x W_ih^T, with b_ih and, where it may be folded, b_hh); each step then costs one
// (N, H_out) x W_hh^T product and the elementwise gates, and each layer's outputs are stacked once.
#pragma once

#include <string>
#include <vector>

#include "module.h"
#include "rnn_utils.h"

namespace nabla::nn {

// ---- cells ------------------------------------------------------------------------------------------

// What RNNCell, LSTMCell and GRUCell share: sizes, the four parameters and their initialization.
class RNNCellBase : public Module {
 public:
  void reset_parameters() override;
  std::string extra_repr() const override;

  int64_t input_size, hidden_size;
  bool bias;
  Tensor weight_ih, weight_hh, bias_ih, bias_hh;  // biases undefined when bias = false

 protected:
  RNNCellBase(std::string name, int64_t input_size, int64_t hidden_size, bool bias, int64_t gates);
  // Checks x (N, H_in) or (H_in) and a state tensor (h or c) of the matching batch; an undefined
  // state becomes zeros. Returns the state, made 2-D.
  Tensor check_state(const Tensor& x, const Tensor& state, const char* what) const;
  void check_input(const Tensor& x) const;
};

struct RNNCellOptions {
  bool bias = true;
  std::string nonlinearity = "tanh";  // or "relu"
};

// h' = act(W_ih x + b_ih + W_hh h + b_hh).
class RNNCell : public RNNCellBase {
 public:
  RNNCell(int64_t input_size, int64_t hidden_size, RNNCellOptions options = {});
  Tensor forward(Tensor x) override;            // h = zeros
  Tensor forward(Tensor x, Tensor h) override;  // h may be undefined (zeros)
  std::string extra_repr() const override;

  std::string nonlinearity;
};

struct LSTMCellOptions {
  bool bias = true;
};

// The (h, c) state of an LSTM cell or layer stack; undefined members mean zeros.
struct LSTMState {
  Tensor h, c;
};

class LSTMCell : public RNNCellBase {
 public:
  LSTMCell(int64_t input_size, int64_t hidden_size, LSTMCellOptions options = {});
  // (h', c') from x and (h, c).
  LSTMState forward_with_state(Tensor x, LSTMState state = {});
  // h' from a zero state (c' is dropped; use forward_with_state to keep it).
  Tensor forward(Tensor x) override;
};

struct GRUCellOptions {
  bool bias = true;
};

class GRUCell : public RNNCellBase {
 public:
  GRUCell(int64_t input_size, int64_t hidden_size, GRUCellOptions options = {});
  Tensor forward(Tensor x) override;            // h = zeros
  Tensor forward(Tensor x, Tensor h) override;  // h may be undefined (zeros)
};

// ---- sequence modules -------------------------------------------------------------------------------

// The parameters of one layer and direction (PyTorch's names: weight_ih_l{k}[_reverse], ...).
// Undefined tensors are absent parameters (no bias, no projection).
struct RNNLayerWeights {
  Tensor weight_ih, weight_hh, bias_ih, bias_hh, weight_hr;
};

struct LSTMOptions {
  int64_t num_layers = 1;
  bool bias = true;
  bool batch_first = false;
  double dropout = 0;
  bool bidirectional = false;
  int64_t proj_size = 0;  // > 0: h is projected to this size by weight_hr
};

// What RNN, LSTM and GRU share: options, parameters, the checks and the layer loop.
class RNNBase : public Module {
 public:
  enum class Mode { rnn_tanh, rnn_relu, lstm, gru };

  // The output sequence (the full call is the subclass's forward_with_state).
  Tensor forward(Tensor x) override;
  void reset_parameters() override;
  std::string extra_repr() const override;

  int64_t num_directions() const { return bidirectional ? 2 : 1; }
  // The size of h: proj_size if set, else hidden_size.
  int64_t output_hidden_size() const { return proj_size > 0 ? proj_size : hidden_size; }
  // The parameters of a layer and direction (0 forward, 1 backward).
  RNNLayerWeights& layer_weights(int64_t layer, int64_t direction) {
    return weights.at(static_cast<size_t>(layer * num_directions() + direction));
  }
  const RNNLayerWeights& layer_weights(int64_t layer, int64_t direction) const {
    return weights.at(static_cast<size_t>(layer * num_directions() + direction));
  }

  Mode mode;
  int64_t input_size, hidden_size, num_layers;
  bool bias, batch_first;
  double dropout;
  bool bidirectional;
  int64_t proj_size;
  // weights[layer * num_directions() + direction], read by forward.
  std::vector<RNNLayerWeights> weights;

 protected:
  // LSTMOptions holds every sequence-module option (RNN and GRU pass proj_size 0).
  RNNBase(std::string name, Mode mode, int64_t input_size, int64_t hidden_size, const LSTMOptions& options);

  struct Result {
    Tensor output, h_n, c_n;  // c_n for LSTM only
  };
  // Runs every layer and direction; h0 and c0 may be undefined (zeros).
  Result run(const Tensor& x, const Tensor& h0, const Tensor& c0 = {});
  // The same on a packed sequence: output is the packed output's data.
  Result run(const utils::rnn::PackedSequence& x, const Tensor& h0, const Tensor& c0 = {});

 private:
  // The layer loop both run()s share: rows (S, input_size) are the steps' inputs one after another,
  // step t holding batch_sizes[t] rows (the first ones of the batch); h0, c0 (D * num_layers, B, *).
  // Returns the last layer's rows (S, D * H_out) and the final states (D * num_layers, B, *).
  // Under autocast (rnn, lstm and gru are on the lower-precision lists) the inputs, states and
  // weights are cast first, and every step runs in the region's dtype.
  Result run_layers(Tensor rows, const std::vector<int64_t>& batch_sizes, const Tensor& h0, const Tensor& c0);
  Result run_layers(Tensor rows, const std::vector<int64_t>& batch_sizes, const Tensor& h0, const Tensor& c0,
                    const std::vector<RNNLayerWeights>& ws);
};

struct RNNOptions {
  int64_t num_layers = 1;
  std::string nonlinearity = "tanh";  // or "relu"
  bool bias = true;
  bool batch_first = false;
  double dropout = 0;  // between layers, in training mode
  bool bidirectional = false;
};

// What RNN::forward_with_state and GRU::forward_with_state return.
struct RNNOutput {
  Tensor output, h_n;
};
// The same for a packed input: output is packed as the input.
struct PackedRNNOutput {
  utils::rnn::PackedSequence output;
  Tensor h_n;
};

// Elman RNN: h_t = act(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh), act tanh or relu.
class RNN : public RNNBase {
 public:
  RNN(int64_t input_size, int64_t hidden_size, RNNOptions options = {});
  RNNOutput forward_with_state(Tensor x, Tensor h0 = {});
  PackedRNNOutput forward_with_state(const utils::rnn::PackedSequence& x, Tensor h0 = {});

  std::string nonlinearity;
};

struct LSTMOutput {
  Tensor output, h_n, c_n;
};
struct PackedLSTMOutput {
  utils::rnn::PackedSequence output;
  Tensor h_n, c_n;
};

class LSTM : public RNNBase {
 public:
  LSTM(int64_t input_size, int64_t hidden_size, LSTMOptions options = {});
  // state.h: h0, state.c: c0 (each may be undefined: zeros).
  LSTMOutput forward_with_state(Tensor x, LSTMState state = {});
  PackedLSTMOutput forward_with_state(const utils::rnn::PackedSequence& x, LSTMState state = {});
};

struct GRUOptions {
  int64_t num_layers = 1;
  bool bias = true;
  bool batch_first = false;
  double dropout = 0;
  bool bidirectional = false;
};

class GRU : public RNNBase {
 public:
  GRU(int64_t input_size, int64_t hidden_size, GRUOptions options = {});
  RNNOutput forward_with_state(Tensor x, Tensor h0 = {});
  PackedRNNOutput forward_with_state(const utils::rnn::PackedSequence& x, Tensor h0 = {});
};

}  // namespace nabla::nn
