// torch::nn: libtorch's module handles, options, containers, losses, functional, init and utils.
#pragma once

#include "../nn/clip_grad.h"
#include "../nn/init.h"
#include "../nn/rnn_utils.h"
#include "nn_functional.h"
#include "nn_holder.h"
#include "nn_layers.h"
#include "nn_misc.h"
#include "nn_more.h"
#include "nn_rnn.h"
#include "nn_transformer.h"

namespace torch::nn {
// torch::nn::init::xavier_uniform_(w), normal_(w, 0, 0.02), constant_(b, 0), ...: nabla's.
namespace init {
using namespace nabla::nn::init;  // NOLINT(google-build-using-namespace)
// (nn_more.h adds overloads taking libtorch's tags; these keep nabla's reachable by qualified name.)
using nabla::nn::init::calculate_gain;
using nabla::nn::init::kaiming_normal_;
using nabla::nn::init::kaiming_uniform_;
}  // namespace init
// torch::nn::utils::clip_grad_norm_(model->parameters(), 1.0), clip_grad_value_.
namespace utils {
using nabla::nn::utils::clip_grad_norm_;
using nabla::nn::utils::clip_grad_value_;
// torch::nn::utils::rnn::pad_sequence, pack_padded_sequence, pad_packed_sequence, PackedSequence.
namespace rnn {
using namespace nabla::nn::utils::rnn;  // NOLINT(google-build-using-namespace)
}  // namespace rnn
}  // namespace utils
}  // namespace torch::nn
