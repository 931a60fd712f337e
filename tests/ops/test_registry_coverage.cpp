// The op registry's coverage: every op family's layers and functionals have entries with the
// samples the checks need (float64 gradcheck samples for the differentiable ones). A new layer
// without an entry fails here, not silently.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "opinfo.h"

namespace nabla::testing {
namespace {

// Every attention and Transformer op must have float64 gradcheck samples.
TEST(OpRegistry, EveryAttentionAndTransformerLayerIsRegistered) {
  std::vector<std::string> required = {"nn.scaled_dot_product_attention", "nn.scaled_dot_product_attention_dropout",
                                       "nn.MultiheadAttention",           "nn.MultiheadAttention_kdim_vdim_bias_kv",
                                       "nn.TransformerEncoderLayer",      "nn.TransformerDecoderLayer"};
  std::string missing;
  for (const auto& n : required) {
    const OpInfo* op = find_op(n);
    if (!op || op->samples.empty() || !op->differentiable || !op->twice_differentiable) missing += " " + n;
  }
  EXPECT_TRUE(missing.empty()) << "attention layers without gradcheck samples:" << missing;
}

// Every layer and loss of nn must have float64 gradcheck samples.
TEST(OpRegistry, EveryNnLayerAndLossIsRegistered) {
  std::vector<std::string> required = {"nn.Linear",
                                       "nn.Bilinear",
                                       "nn.Conv1d",
                                       "nn.Conv2d",
                                       "nn.Conv3d",
                                       "nn.ConvTranspose2d",
                                       "nn.MaxPool2d",
                                       "nn.AvgPool2d",
                                       "nn.AdaptiveAvgPool2d",
                                       "nn.AdaptiveMaxPool2d",
                                       "nn.MaxPool1d",
                                       "nn.AvgPool1d",
                                       "nn.AdaptiveAvgPool1d",
                                       "nn.AdaptiveMaxPool1d",
                                       "nn.BatchNorm1d",
                                       "nn.BatchNorm2d",
                                       "nn.BatchNorm2d_eval",
                                       "nn.LayerNorm",
                                       "nn.GroupNorm",
                                       "nn.InstanceNorm2d",
                                       "nn.instance_norm",
                                       "nn.PixelShuffle",
                                       "nn.affine_grid",
                                       "nn.Dropout",
                                       "nn.Dropout2d",
                                       "nn.Embedding",
                                       "nn.Flatten",
                                       "nn.Unflatten",
                                       "nn.Identity",
                                       "nn.ReLU",
                                       "nn.LeakyReLU",
                                       "nn.GELU",
                                       "nn.SiLU",
                                       "nn.Sigmoid",
                                       "nn.Tanh",
                                       "nn.Softmax",
                                       "nn.LogSoftmax",
                                       "nn.ELU",
                                       "nn.ReLU6",
                                       "nn.Mish",
                                       "nn.SELU",
                                       "nn.CELU",
                                       "nn.LogSigmoid",
                                       "nn.Hardsigmoid",
                                       "nn.Hardswish",
                                       "nn.Hardtanh",
                                       "nn.Softsign",
                                       "nn.Tanhshrink",
                                       "nn.Softplus",
                                       "nn.Threshold",
                                       "nn.GLU",
                                       "nn.Softmin",
                                       "nn.PReLU",
                                       "nn.Sequential",
                                       "nn.cross_entropy",
                                       "nn.nll_loss",
                                       "nn.mse_loss",
                                       "nn.l1_loss",
                                       "nn.smooth_l1_loss",
                                       "nn.huber_loss",
                                       "nn.binary_cross_entropy",
                                       "nn.binary_cross_entropy_with_logits",
                                       "nn.kl_div",
                                       "nn.loss_weight_gradients",
                                       "nn.margin_ranking_loss",
                                       "nn.hinge_embedding_loss",
                                       "nn.cosine_embedding_loss",
                                       "nn.triplet_margin_loss",
                                       "nn.triplet_margin_with_distance_loss",
                                       "nn.soft_margin_loss",
                                       "nn.multilabel_soft_margin_loss",
                                       "nn.multi_margin_loss",
                                       "nn.poisson_nll_loss",
                                       "nn.gaussian_nll_loss",
                                       "nn.ctc_loss",
                                       "nn.interpolate",
                                       "nn.normalize",
                                       "nn.cosine_similarity",
                                       "nn.pairwise_distance"};
  std::string missing;
  for (const auto& n : required) {
    const OpInfo* op = find_op(n);
    if (!op || op->samples.empty() || !op->differentiable) missing += " " + n;
  }
  EXPECT_TRUE(missing.empty()) << "nn layers/losses without gradcheck samples:" << missing;
}

TEST(OpRegistry, EverySpatialFunctionalIsRegistered) {
  for (const char* n : {"nn.pad_modes", "nn.conv_padding_same", "nn.conv_transpose1d_3d", "nn.unfold_fold",
                        "nn.avg_pool2d_divisor_override", "nn.max_unpool", "nn.grid_sample", "nn.grid_sample_bicubic",
                        "nn.embedding_bag", "nn.interpolate_modes", "nn.ConvTranspose1d_3d", "nn.EmbeddingBag",
                        "nn.padding_layers", "nn.Fold_Unfold_MaxUnpool2d"}) {
    const OpInfo* op = find_op(n);
    ASSERT_NE(op, nullptr) << n;
    EXPECT_FALSE(op->samples.empty()) << n;
    EXPECT_FALSE(op->torch.empty()) << n;
  }
}

// Every recurrent layer must have float64 gradcheck samples (and so gradgradcheck, CPU/CUDA parity).
TEST(OpRegistry, EveryRnnLayerIsRegistered) {
  std::string missing;
  for (const char* n :
       {"nn.RNNCell", "nn.RNNCell_relu", "nn.LSTMCell", "nn.GRUCell", "nn.RNN", "nn.RNN_relu", "nn.LSTM", "nn.GRU",
        "nn.RNN_packed", "nn.LSTM_packed", "nn.GRU_packed", "nn.utils.pad_sequence", "nn.utils.pack_padded_sequence"}) {
    const OpInfo* op = find_op(n);
    if (!op || op->samples.empty() || !op->differentiable || !op->twice_differentiable) missing += std::string(" ") + n;
  }
  EXPECT_TRUE(missing.empty()) << "recurrent layers without gradcheck and gradgradcheck samples:" << missing;
}

// Every building block of the zoo has float64 gradcheck samples.
TEST(OpRegistry, EveryVisionLayerIsRegistered) {
  std::string missing;
  for (const char* n : {"vision.SqueezeExcitation", "vision.Conv2dNormActivation", "vision.ChannelShuffle",
                        "vision.StochasticDepth", "vision.LayerNorm2d", "vision.Permute", "vision.MLPBlock",
                        "vision.EncoderBlock", "vision.shifted_window_attention", "vision.ShiftedWindowAttention",
                        "vision.PatchMerging", "vision.SwinTransformerBlock"}) {
    const OpInfo* op = find_op(n);
    if (!op || op->samples.empty() || !op->differentiable) missing += std::string(" ") + n;
  }
  EXPECT_TRUE(missing.empty()) << "vision layers without gradcheck samples:" << missing;
}

}  // namespace
}  // namespace nabla::testing
