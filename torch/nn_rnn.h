// libtorch's recurrent layers and containers, over nabla's.
//
//   torch::nn::LSTM lstm(torch::nn::LSTMOptions(10, 20).num_layers(2).batch_first(true));
//   auto [out, state] = lstm(x);                  // libtorch's shape: (output, (h_n, c_n))
//   torch::Tensor h_n = std::get<0>(state);
//   torch::nn::Sequential seq(torch::nn::Linear(3, 4), torch::nn::ReLU(), torch::nn::Linear(4, 1));
//
// forward returns what libtorch's does: LSTM std::tuple<Tensor, std::tuple<Tensor, Tensor>>, GRU
// and RNN std::tuple<Tensor, Tensor>. Inside a Sequential (which calls each child with one Tensor)
// a recurrent layer gives its output sequence alone, as nabla's does.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "../nn/container.h"
#include "../nn/rnn.h"
#include "arg.h"
#include "enum.h"
#include "nn_holder.h"
#include "types.h"

// Some XImpl classes give forward libtorch's signature (LSTM's tuple, GRU's state argument), which
// hides nabla's virtual forward(Tensor) on purpose: a Sequential still reaches that one.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverloaded-virtual"

namespace torch::nn {

// ---- LSTM, GRU, RNN ---------------------------------------------------------------------------------
struct LSTMOptions {
  LSTMOptions(int64_t input_size, int64_t hidden_size) : input_size_(input_size), hidden_size_(hidden_size) {}
  TORCH_ARG(int64_t, input_size);
  TORCH_ARG(int64_t, hidden_size);
  TORCH_ARG(int64_t, num_layers) = 1;
  TORCH_ARG(bool, bias) = true;
  TORCH_ARG(bool, batch_first) = false;
  TORCH_ARG(double, dropout) = 0.0;
  TORCH_ARG(bool, bidirectional) = false;
  TORCH_ARG(int64_t, proj_size) = 0;
};
class LSTMImpl : public nabla::nn::LSTM {
 public:
  LSTMImpl(int64_t input_size, int64_t hidden_size) : LSTMImpl(LSTMOptions(input_size, hidden_size)) {}
  explicit LSTMImpl(const LSTMOptions& o)
      : nabla::nn::LSTM(o.input_size(), o.hidden_size(),
                        {.num_layers = o.num_layers(),
                         .bias = o.bias(),
                         .batch_first = o.batch_first(),
                         .dropout = o.dropout(),
                         .bidirectional = o.bidirectional(),
                         .proj_size = o.proj_size()}),
        options(o) {}
  // input: (L, N, H_in) or (N, L, H_in) with batch_first; hx: (h_0, c_0), zeros when absent.
  std::tuple<Tensor, std::tuple<Tensor, Tensor>> forward(const Tensor& input,
                                                         std::optional<std::tuple<Tensor, Tensor>> hx = {}) {
    nabla::nn::LSTMState state;
    if (hx) state = {std::get<0>(*hx), std::get<1>(*hx)};
    nabla::nn::LSTMOutput r = forward_with_state(input, state);
    return {r.output, {r.h_n, r.c_n}};
  }
  LSTMOptions options;
};
TORCH_MODULE(LSTM);

struct GRUOptions {
  GRUOptions(int64_t input_size, int64_t hidden_size) : input_size_(input_size), hidden_size_(hidden_size) {}
  TORCH_ARG(int64_t, input_size);
  TORCH_ARG(int64_t, hidden_size);
  TORCH_ARG(int64_t, num_layers) = 1;
  TORCH_ARG(bool, bias) = true;
  TORCH_ARG(bool, batch_first) = false;
  TORCH_ARG(double, dropout) = 0.0;
  TORCH_ARG(bool, bidirectional) = false;
};
class GRUImpl : public nabla::nn::GRU {
 public:
  GRUImpl(int64_t input_size, int64_t hidden_size) : GRUImpl(GRUOptions(input_size, hidden_size)) {}
  explicit GRUImpl(const GRUOptions& o)
      : nabla::nn::GRU(o.input_size(), o.hidden_size(),
                       {.num_layers = o.num_layers(),
                        .bias = o.bias(),
                        .batch_first = o.batch_first(),
                        .dropout = o.dropout(),
                        .bidirectional = o.bidirectional()}),
        options(o) {}
  // (output, h_n); hx: h_0, zeros when undefined.
  std::tuple<Tensor, Tensor> forward(const Tensor& input, Tensor hx = {}) {
    nabla::nn::RNNOutput r = forward_with_state(input, std::move(hx));
    return {r.output, r.h_n};
  }
  GRUOptions options;
};
TORCH_MODULE(GRU);

struct RNNOptions {
  RNNOptions(int64_t input_size, int64_t hidden_size) : input_size_(input_size), hidden_size_(hidden_size) {}
  TORCH_ARG(int64_t, input_size);
  TORCH_ARG(int64_t, hidden_size);
  TORCH_ARG(int64_t, num_layers) = 1;
  TORCH_ARG(enumtype::nonlinearity_t, nonlinearity) = torch::kTanh;
  TORCH_ARG(bool, bias) = true;
  TORCH_ARG(bool, batch_first) = false;
  TORCH_ARG(double, dropout) = 0.0;
  TORCH_ARG(bool, bidirectional) = false;
};
class RNNImpl : public nabla::nn::RNN {
 public:
  RNNImpl(int64_t input_size, int64_t hidden_size) : RNNImpl(RNNOptions(input_size, hidden_size)) {}
  explicit RNNImpl(const RNNOptions& o)
      : nabla::nn::RNN(o.input_size(), o.hidden_size(),
                       {.num_layers = o.num_layers(),
                        .nonlinearity = enumtype::to_nabla(o.nonlinearity()),
                        .bias = o.bias(),
                        .batch_first = o.batch_first(),
                        .dropout = o.dropout(),
                        .bidirectional = o.bidirectional()}),
        options(o) {}
  std::tuple<Tensor, Tensor> forward(const Tensor& input, Tensor hx = {}) {
    nabla::nn::RNNOutput r = forward_with_state(input, std::move(hx));
    return {r.output, r.h_n};
  }
  RNNOptions options;
};
TORCH_MODULE(RNN);

// ---- containers -------------------------------------------------------------------------------------
class SequentialImpl : public nabla::nn::Sequential {
 public:
  using nabla::nn::Sequential::Sequential;
};
TORCH_MODULE(Sequential);

class ModuleListImpl : public nabla::nn::ModuleList {
 public:
  using nabla::nn::ModuleList::ModuleList;
  // libtorch's list->ptr(i) and list->ptr<LinearImpl>(i).
  std::shared_ptr<Module> ptr(int64_t i) const { return (*this)[i]; }
  template <class T>
  std::shared_ptr<T> ptr(int64_t i) const {
    return at<T>(i);
  }
};
TORCH_MODULE(ModuleList);

class ModuleDictImpl : public nabla::nn::ModuleDict {
 public:
  ModuleDictImpl() = default;
  explicit ModuleDictImpl(const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& modules) {
    for (const auto& [key, module] : modules) insert(key, module);
  }
  explicit ModuleDictImpl(const nabla::OrderedDict<std::shared_ptr<Module>>& modules)
      : nabla::nn::ModuleDict(modules) {}
};
TORCH_MODULE(ModuleDict);

}  // namespace torch::nn

#pragma GCC diagnostic pop
