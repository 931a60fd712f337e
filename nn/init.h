// nn::init: in-place parameter initializers with PyTorch's formulas (torch.nn.init). They draw
// from nabla's default generator, so manual_seed makes them reproducible, and run without autograd.
//
//   nn::init::kaiming_uniform_(conv->weight, 0, nn::init::FanMode::fan_in, nn::init::Nonlinearity::relu);
//   nn::init::zeros_(conv->bias);
#pragma once

#include <utility>

#include "../core/tensor.h"

namespace nabla::nn::init {

enum class Nonlinearity { linear, conv1d, conv2d, conv_transpose2d, sigmoid, tanh, relu, leaky_relu, selu };
enum class FanMode { fan_in, fan_out };

// The recommended gain for a nonlinearity: 1 (linear, conv, sigmoid), 5/3 (tanh), sqrt(2) (relu),
// sqrt(2 / (1 + param^2)) (leaky_relu, param = negative slope, 0.01 by default), 3/4 (selu).
double calculate_gain(Nonlinearity nonlinearity, double param = 0.01);
// (fan_in, fan_out) of a weight of at least 2 dims: size(1) * receptive field and size(0) * receptive field.
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t);

Tensor uniform_(Tensor t, double a = 0, double b = 1);
Tensor normal_(Tensor t, double mean = 0, double std = 1);
Tensor constant_(Tensor t, double value);
Tensor zeros_(Tensor t);
Tensor ones_(Tensor t);
// U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)).
Tensor xavier_uniform_(Tensor t, double gain = 1);
// N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out)).
Tensor xavier_normal_(Tensor t, double gain = 1);
// U(-b, b) with b = gain * sqrt(3 / fan), gain = calculate_gain(nonlinearity, a).
Tensor kaiming_uniform_(Tensor t, double a = 0, FanMode mode = FanMode::fan_in,
                        Nonlinearity nonlinearity = Nonlinearity::leaky_relu);
// N(0, std^2) with std = gain / sqrt(fan).
Tensor kaiming_normal_(Tensor t, double a = 0, FanMode mode = FanMode::fan_in,
                       Nonlinearity nonlinearity = Nonlinearity::leaky_relu);
// A (semi-)orthogonal matrix (the tensor viewed as (size(0), numel / size(0))), times gain: the Q
// of the QR decomposition of a Gaussian matrix, with R's diagonal made positive.
Tensor orthogonal_(Tensor t, double gain = 1);
// N(mean, std^2) truncated to [a, b] (inverse-CDF sampling, as PyTorch).
Tensor trunc_normal_(Tensor t, double mean = 0, double std = 1, double a = -2, double b = 2);

}  // namespace nabla::nn::init
