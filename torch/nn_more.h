// More of libtorch's layer handles: group and instance normalization, the recurrent cells, more
// activations, and torch::nn::init's tags (kFanIn, kFanOut, kReLU, kLeakyReLU, ...).
//
//   torch::nn::GroupNorm gn(torch::nn::GroupNormOptions(4, 16).eps(1e-3));
//   torch::nn::LSTMCell cell(torch::nn::LSTMCellOptions(10, 20));
//   auto [h, c] = cell(x, std::make_tuple(h0, c0));        // libtorch's (h', c')
//   torch::nn::init::kaiming_normal_(conv->weight, 0.0, torch::kFanOut, torch::kReLU);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <variant>

#include "../nn/activation.h"
#include "../nn/init.h"
#include "../nn/normalization.h"
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

// ---- normalization ----------------------------------------------------------------------------------
struct GroupNormOptions {
  GroupNormOptions(int64_t num_groups, int64_t num_channels) : num_groups_(num_groups), num_channels_(num_channels) {}
  TORCH_ARG(int64_t, num_groups);
  TORCH_ARG(int64_t, num_channels);
  TORCH_ARG(double, eps) = 1e-5;
  TORCH_ARG(bool, affine) = true;
};
class GroupNormImpl : public nabla::nn::GroupNorm {
 public:
  GroupNormImpl(int64_t num_groups, int64_t num_channels) : GroupNormImpl(GroupNormOptions(num_groups, num_channels)) {}
  explicit GroupNormImpl(const GroupNormOptions& o)
      : nabla::nn::GroupNorm(o.num_groups(), o.num_channels(), {.eps = o.eps(), .affine = o.affine()}), options(o) {}
  GroupNormOptions options;
};
TORCH_MODULE(GroupNorm);

struct InstanceNormOptions {
  InstanceNormOptions(int64_t num_features) : num_features_(num_features) {}  // NOLINT: InstanceNorm2d(8)
  TORCH_ARG(int64_t, num_features);
  TORCH_ARG(double, eps) = 1e-5;
  TORCH_ARG(double, momentum) = 0.1;
  TORCH_ARG(bool, affine) = false;
  TORCH_ARG(bool, track_running_stats) = false;

 public:
  nabla::nn::InstanceNormOptions to_nabla() const {
    return {.eps = eps(), .momentum = momentum(), .affine = affine(), .track_running_stats = track_running_stats()};
  }
};
using InstanceNorm1dOptions = InstanceNormOptions;
using InstanceNorm2dOptions = InstanceNormOptions;
class InstanceNorm1dImpl : public nabla::nn::InstanceNorm1d {
 public:
  explicit InstanceNorm1dImpl(const InstanceNormOptions& o)
      : nabla::nn::InstanceNorm1d(o.num_features(), o.to_nabla()), options(o) {}
  InstanceNormOptions options;
};
TORCH_MODULE(InstanceNorm1d);
class InstanceNorm2dImpl : public nabla::nn::InstanceNorm2d {
 public:
  explicit InstanceNorm2dImpl(const InstanceNormOptions& o)
      : nabla::nn::InstanceNorm2d(o.num_features(), o.to_nabla()), options(o) {}
  InstanceNormOptions options;
};
TORCH_MODULE(InstanceNorm2d);

// ---- recurrent cells ----------------------------------------------------------------------------------
struct RNNCellOptions {
  RNNCellOptions(int64_t input_size, int64_t hidden_size) : input_size_(input_size), hidden_size_(hidden_size) {}
  TORCH_ARG(int64_t, input_size);
  TORCH_ARG(int64_t, hidden_size);
  TORCH_ARG(bool, bias) = true;
  TORCH_ARG(enumtype::nonlinearity_t, nonlinearity) = torch::kTanh;
};
// LSTMCellOptions and GRUCellOptions: input_size, hidden_size, bias.
struct LSTMCellOptions {
  LSTMCellOptions(int64_t input_size, int64_t hidden_size) : input_size_(input_size), hidden_size_(hidden_size) {}
  TORCH_ARG(int64_t, input_size);
  TORCH_ARG(int64_t, hidden_size);
  TORCH_ARG(bool, bias) = true;
};
using GRUCellOptions = LSTMCellOptions;

class RNNCellImpl : public nabla::nn::RNNCell {
 public:
  RNNCellImpl(int64_t input_size, int64_t hidden_size) : RNNCellImpl(RNNCellOptions(input_size, hidden_size)) {}
  explicit RNNCellImpl(const RNNCellOptions& o)
      : nabla::nn::RNNCell(o.input_size(), o.hidden_size(),
                           {.bias = o.bias(), .nonlinearity = enumtype::to_nabla(o.nonlinearity())}),
        options(o) {}
  // h' (N, H); hx: h, zeros when undefined.
  Tensor forward(const Tensor& input, Tensor hx = {}) { return nabla::nn::RNNCell::forward(input, std::move(hx)); }
  RNNCellOptions options;
};
TORCH_MODULE(RNNCell);

class LSTMCellImpl : public nabla::nn::LSTMCell {
 public:
  LSTMCellImpl(int64_t input_size, int64_t hidden_size) : LSTMCellImpl(LSTMCellOptions(input_size, hidden_size)) {}
  explicit LSTMCellImpl(const LSTMCellOptions& o)
      : nabla::nn::LSTMCell(o.input_size(), o.hidden_size(), {.bias = o.bias()}), options(o) {}
  // (h', c'); hx: (h, c), zeros when absent.
  std::tuple<Tensor, Tensor> forward(const Tensor& input, std::optional<std::tuple<Tensor, Tensor>> hx = {}) {
    nabla::nn::LSTMState state;
    if (hx) state = {std::get<0>(*hx), std::get<1>(*hx)};
    nabla::nn::LSTMState r = forward_with_state(input, state);
    return {r.h, r.c};
  }
  LSTMCellOptions options;
};
TORCH_MODULE(LSTMCell);

class GRUCellImpl : public nabla::nn::GRUCell {
 public:
  GRUCellImpl(int64_t input_size, int64_t hidden_size) : GRUCellImpl(GRUCellOptions(input_size, hidden_size)) {}
  explicit GRUCellImpl(const GRUCellOptions& o)
      : nabla::nn::GRUCell(o.input_size(), o.hidden_size(), {.bias = o.bias()}), options(o) {}
  Tensor forward(const Tensor& input, Tensor hx = {}) { return nabla::nn::GRUCell::forward(input, std::move(hx)); }
  GRUCellOptions options;
};
TORCH_MODULE(GRUCell);

// ---- more activations ---------------------------------------------------------------------------------
struct ELUOptions {
  TORCH_ARG(double, alpha) = 1.0;
  TORCH_ARG(bool, inplace) = false;  // accepted; the result is the same out of place
};
class ELUImpl : public nabla::nn::ELU {
 public:
  explicit ELUImpl(const ELUOptions& o = {}) : nabla::nn::ELU(o.alpha()), options(o) {}
  ELUOptions options;
};
TORCH_MODULE(ELU);

struct GELUOptions {
  TORCH_ARG(std::string, approximate) = "none";
};
class GELUImpl : public nabla::nn::GELU {
 public:
  explicit GELUImpl(const GELUOptions& o = {}) : nabla::nn::GELU(o.approximate()), options(o) {}
  GELUOptions options;
};
TORCH_MODULE(GELU);

class SiLUImpl : public nabla::nn::SiLU {};
TORCH_MODULE(SiLU);

struct SoftplusOptions {
  TORCH_ARG(double, beta) = 1.0;
  TORCH_ARG(double, threshold) = 20.0;
};
class SoftplusImpl : public nabla::nn::Softplus {
 public:
  explicit SoftplusImpl(const SoftplusOptions& o = {}) : nabla::nn::Softplus(o.beta(), o.threshold()), options(o) {}
  SoftplusOptions options;
};
TORCH_MODULE(Softplus);

struct PReLUOptions {
  TORCH_ARG(int64_t, num_parameters) = 1;
  TORCH_ARG(double, init) = 0.25;
};
class PReLUImpl : public nabla::nn::PReLU {
 public:
  explicit PReLUImpl(const PReLUOptions& o = {}) : nabla::nn::PReLU(o.num_parameters(), o.init()), options(o) {}
  PReLUOptions options;
};
TORCH_MODULE(PReLU);

// ---- init with libtorch's tags ----------------------------------------------------------------------
namespace init {
using FanModeType = std::variant<enumtype::kFanIn, enumtype::kFanOut>;
using NonlinearityType = std::variant<enumtype::kLinear, enumtype::kConv2D, enumtype::kSigmoid, enumtype::kTanh,
                                      enumtype::kReLU, enumtype::kLeakyReLU>;
namespace detail {
inline nabla::nn::init::FanMode fan_mode(const FanModeType& m) {
  return m.index() == 0 ? nabla::nn::init::FanMode::fan_in : nabla::nn::init::FanMode::fan_out;
}
inline nabla::nn::init::Nonlinearity nonlinearity(const NonlinearityType& n) {
  using N = nabla::nn::init::Nonlinearity;
  static constexpr N kinds[] = {N::linear, N::conv2d, N::sigmoid, N::tanh, N::relu, N::leaky_relu};
  return kinds[n.index()];
}
}  // namespace detail
// kaiming_*_(w, a, torch::kFanOut, torch::kReLU): the same formulas as nabla's, from libtorch's tags.
inline Tensor kaiming_uniform_(Tensor t, double a, FanModeType mode,
                               NonlinearityType nonlinearity = torch::kLeakyReLU) {
  return nabla::nn::init::kaiming_uniform_(std::move(t), a, detail::fan_mode(mode), detail::nonlinearity(nonlinearity));
}
inline Tensor kaiming_normal_(Tensor t, double a, FanModeType mode, NonlinearityType nonlinearity = torch::kLeakyReLU) {
  return nabla::nn::init::kaiming_normal_(std::move(t), a, detail::fan_mode(mode), detail::nonlinearity(nonlinearity));
}
inline double calculate_gain(NonlinearityType nonlinearity, double param = 0.01) {
  return nabla::nn::init::calculate_gain(detail::nonlinearity(nonlinearity), param);
}
}  // namespace init

}  // namespace torch::nn

#pragma GCC diagnostic pop
