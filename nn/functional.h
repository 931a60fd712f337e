// nn::functional: the stateless twins of the layers, and the losses.
//
//   namespace F = nabla::nn::functional;
//   Tensor h = F::relu(F::linear(x, w, b));
//   Tensor loss = F::cross_entropy(logits, target, {.ignore_index = 0, .label_smoothing = 0.1});
//
// Everything here is differentiable (float64 gradchecks in tests/ops/opinfo_nn.cpp) and built from
// core ops, except the normalization kernel behind batch_norm, layer_norm and group_norm, which is
// one autograd node with its own backward (it saves the normalized input and 1/std only).
#pragma once

#include <functional>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "../core/ops.h"
#include "../core/tensor.h"

namespace nabla::nn::functional {

// ---- activations (the core ops, re-exported) ------------------------------------------------------
using nabla::elu;
using nabla::gelu;
using nabla::leaky_relu;
using nabla::log_softmax;
using nabla::relu;
using nabla::sigmoid;
using nabla::silu;
using nabla::softmax;
using nabla::softplus;
using nabla::tanh;

// ---- linear, convolution, pooling, embedding ------------------------------------------------------
using nabla::adaptive_avg_pool2d;
using nabla::adaptive_max_pool2d;
using nabla::avg_pool2d;
using nabla::conv1d;
using nabla::conv2d;
using nabla::conv3d;
using nabla::conv_transpose2d;
using nabla::embedding;
using nabla::flatten;
using nabla::linear;
using nabla::max_pool2d;
using nabla::unflatten;

// y[..., o] = x1[..., i] weight[o, i, j] x2[..., j] + bias[o]
// x1: (*, in1), x2: (*, in2), weight: (out, in1, in2), bias: (out) or undefined.
Tensor bilinear(const Tensor& x1, const Tensor& x2, const Tensor& weight, const Tensor& bias = {});

// ---- normalization --------------------------------------------------------------------------------
// x: (N, C, *). In training, normalizes with the batch statistics over every dim but C and, when
// running_mean/var are given, updates them in place (without autograd):
//   running = (1 - momentum) * running + momentum * batch_stat   (the variance unbiased).
// In evaluation, normalizes with running_mean/var. weight/bias: (C) or undefined.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight = {},
                  const Tensor& bias = {}, bool training = false, double momentum = 0.1, double eps = 1e-5);
// Normalizes over the trailing dims given by normalized_shape; weight/bias have that shape.
Tensor layer_norm(const Tensor& x, IntArrayRef normalized_shape, const Tensor& weight = {}, const Tensor& bias = {},
                  double eps = 1e-5);
// torch.nn.functional.rms_norm (PyTorch 2.4): x / sqrt(mean(x^2 over the trailing dims
// normalized_shape) + eps), times weight (of shape normalized_shape) when given. eps defaults to the
// machine epsilon of x's dtype (torch.finfo(x.dtype).eps), as PyTorch's. A float16/bfloat16 x is
// normalized in float32 and rounded back to its dtype before the weight multiplies it (a float32
// weight then promotes the result to float32, as in PyTorch).
Tensor rms_norm(const Tensor& x, IntArrayRef normalized_shape, const Tensor& weight = {},
                std::optional<double> eps = std::nullopt);
// x: (N, C, *), C divisible by num_groups; statistics per (sample, group). weight/bias: (C).
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = {}, const Tensor& bias = {},
                  double eps = 1e-5);
// x: (N, C, *), at least one spatial dim; statistics per (sample, channel) over the spatial dims
// (torch.nn.functional.instance_norm). With use_input_stats and running_mean/var given, these are
// updated in place (without autograd) with the batch's mean over N of the per-instance mean and
// unbiased variance; without use_input_stats, x is normalized with running_mean/var. weight/bias: (C).
// With use_input_stats, one spatial element per instance is a ValueError, as in PyTorch.
Tensor instance_norm(const Tensor& x, const Tensor& running_mean = {}, const Tensor& running_var = {},
                     const Tensor& weight = {}, const Tensor& bias = {}, bool use_input_stats = true,
                     double momentum = 0.1, double eps = 1e-5);
// (x - mean) / sqrt(var + eps) over `dims` (biased variance): the kernel of the norms above.
Tensor normalize_over(const Tensor& x, IntArrayRef dims, double eps);

// ---- rearranging pixels and sampling grids ------------------------------------------------------
// (*, C r^2, H, W) -> (*, C, H r, W r) (torch.nn.functional.pixel_shuffle), and its inverse.
Tensor pixel_shuffle(const Tensor& x, int64_t upscale_factor);
Tensor pixel_unshuffle(const Tensor& x, int64_t downscale_factor);
// The sampling grid of the affine maps theta, (N, 2, 3) for size (N, C, H, W) -> (N, H, W, 2), or
// (N, 3, 4) for size (N, C, D, H, W) -> (N, D, H, W, 3), in grid_sample's [-1, 1] coordinates
// (x first); align_corners: -1 and 1 are the corner pixels' centres, else their outer edges.
Tensor affine_grid(const Tensor& theta, IntArrayRef size, bool align_corners = false);

// ---- resampling -------------------------------------------------------------------------------------
// torch.nn.functional.interpolate for (N, C, L), (N, C, H, W) and (N, C, D, H, W) inputs. Give the
// output's spatial size, or a scale factor (one for every spatial dim, or one per dim; the output
// size is floor(in * scale) and the source positions use 1 / scale, as PyTorch does).
//   mode "nearest": out[j] = in[floor(j * scale)]
//   mode "nearest-exact": out[j] = in[floor((j + 0.5) * scale)] (pixel centres; matches PIL and
//   OpenCV; PyTorch's "nearest" keeps its old off-by-half rule, and so does nabla's)
//   mode "linear" (3-D), "bilinear" (4-D), "trilinear" (5-D): linear interpolation per spatial dim,
//   with align_corners (default false) as in PyTorch.
//   mode "bicubic" (4-D): cubic convolution (a = -0.75) over 4x4 neighbours, the border repeated,
//   align_corners as for bilinear; values may overshoot the input's range, as PyTorch's do.
//   mode "area": adaptive average pooling to the output size (3-D, 4-D and 5-D).
struct InterpolateOptions {
  std::vector<int64_t> size{};
  std::vector<double> scale_factor{};
  std::string mode = "nearest";
  std::optional<bool> align_corners{};
};
Tensor interpolate(const Tensor& x, const InterpolateOptions& options);

// ---- padding --------------------------------------------------------------------------------------
// torch.nn.functional.pad: `padding` holds (before, after) pairs for the last dims, last dim first:
// {1, 2} pads the last dim with 1 before and 2 after; {1, 1, 2, 2} also the second-last by 2.
//   "constant"  fills with `value` (negative padding crops), any number of dims;
//   "reflect"   mirrors without repeating the edge (padding < the dim's size);
//   "replicate" repeats the edge element;
//   "circular"  wraps around (padding <= the dim's size).
// The non-constant modes pad the last 1, 2 or 3 dims of an input with one or two more dims
// ((C, L) or (N, C, L) for 1, ...), as PyTorch's.
Tensor pad(const Tensor& x, IntArrayRef padding, std::string_view mode = "constant", double value = 0);

// ---- convolution with string padding, transposed 1-d and 3-d convolutions --------------------------
// padding "valid" (none) or "same" (the output has the input's size; stride must be 1; when the
// kernel's reach d * (k - 1) is odd, the extra zero goes after, as PyTorch's). ConvPadding is the
// word as its own type, so that a plain 0 still means zero padding.
struct ConvPadding {
  template <size_t N>
  ConvPadding(const char (&word)[N]) : value(word, N - 1) {}  // NOLINT(google-explicit-constructor)
  ConvPadding(const std::string& word) : value(word) {}       // NOLINT(google-explicit-constructor)
  std::string value;
};
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride, const ConvPadding& padding,
              int64_t dilation = 1, int64_t groups = 1);
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, IntArrayRef stride, const ConvPadding& padding,
              IntArrayRef dilation = 1, int64_t groups = 1);
Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias, IntArrayRef stride, const ConvPadding& padding,
              IntArrayRef dilation = 1, int64_t groups = 1);
// x: (N, C_in, L) or (C_in, L), weight: (C_in, C_out / groups, k).
Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, int64_t stride = 1,
                        int64_t padding = 0, int64_t output_padding = 0, int64_t groups = 1, int64_t dilation = 1);
// x: (N, C_in, D, H, W) or (C_in, D, H, W), weight: (C_in, C_out / groups, kD, kH, kW); the int
// arrays take 1 or 3 values.
Tensor conv_transpose3d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, IntArrayRef stride = 1,
                        IntArrayRef padding = 0, IntArrayRef output_padding = 0, int64_t groups = 1,
                        IntArrayRef dilation = 1);

// ---- sliding blocks -------------------------------------------------------------------------------
// torch.nn.functional.unfold (im2col): x (N, C, H, W) or (C, H, W) -> (N, C kH kW, L), one column
// per block position (L of them, row-major), rows ordered (c, ki, kj). The int arrays take 1 or 2
// values.
Tensor unfold(const Tensor& x, IntArrayRef kernel_size, IntArrayRef dilation = 1, IntArrayRef padding = 0,
              IntArrayRef stride = 1);
// torch.nn.functional.fold (col2im), unfold's adjoint: x (N, C kH kW, L) or (C kH kW, L) ->
// (N, C, output_size), overlapping values summed.
Tensor fold(const Tensor& x, IntArrayRef output_size, IntArrayRef kernel_size, IntArrayRef dilation = 1,
            IntArrayRef padding = 0, IntArrayRef stride = 1);

// ---- pooling extras -------------------------------------------------------------------------------
// avg_pool2d dividing every window's sum by divisor_override (torch's avg_pool2d(divisor_override=)).
Tensor avg_pool2d(const Tensor& x, IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding, bool ceil_mode,
                  bool count_include_pad, std::optional<int64_t> divisor_override);
// The partial inverse of max_pool: x (N, C, H_in, W_in) and the indices max_pool2d_with_indices gave
// (flat positions in each (H, W) plane) -> (N, C, H, W), zeros where no maximum came from.
// output_size (H, W) (or (N, C, H, W)) defaults to (H_in - 1) * stride - 2 padding + kernel; one
// given must lie strictly within one stride of that default in each dim (a ValueError otherwise, as
// in PyTorch). max_unpool1d: the same for (N, C, L) or (C, L) and a length.
Tensor max_unpool2d(const Tensor& x, const Tensor& indices, IntArrayRef kernel_size, IntArrayRef stride = {},
                    IntArrayRef padding = 0, IntArrayRef output_size = {});
Tensor max_unpool1d(const Tensor& x, const Tensor& indices, int64_t kernel_size,
                    std::optional<int64_t> stride = std::nullopt, int64_t padding = 0,
                    std::optional<int64_t> output_size = std::nullopt);

// ---- grid sampling ----------------------------------------------------------------------------------
// torch.nn.functional.grid_sample: input (N, C, H, W) and grid (N, H_out, W_out, 2) holding (x, y) in
// [-1, 1] (align_corners as in affine_grid) -> (N, C, H_out, W_out); or input (N, C, D, H, W) and grid
// (N, D_out, H_out, W_out, 3) holding (x, y, z) -> (N, C, D_out, H_out, W_out). mode "bilinear"
// (trilinear for 5-D, as PyTorch's), "nearest" (ties to even) or "bicubic" (4-D only, as PyTorch:
// 4 x 4 taps, A = -0.75, the padding rule applied to each tap); padding_mode "zeros", "border" or
// "reflection". Differentiable with respect to input and grid (the grid's gradient is 0 in "nearest"
// mode).
struct GridSampleOptions {
  std::string mode = "bilinear";
  std::string padding_mode = "zeros";
  bool align_corners = false;
};
Tensor grid_sample(const Tensor& input, const Tensor& grid, const GridSampleOptions& options = {});

// ---- embedding bags ---------------------------------------------------------------------------------
// torch.nn.functional.embedding_bag: reduces the embeddings of each bag ("sum", "mean" or "max") without
// materialising them per index. input: (B, L) int64 (B bags of L indices, offsets undefined) or 1-D with
// offsets (the start of each bag; include_last_offset: offsets has B + 1 entries, the last the end).
// per_sample_weights (input's shape) scale each embedding (mode "sum" only). padding_idx entries are
// left out of their bag (a mean over the rest; an empty bag gives zeros). Out: (B, embedding_dim).
struct EmbeddingBagOptions {
  std::string mode = "mean";
  bool include_last_offset = false;
  std::optional<int64_t> padding_idx{};
};
Tensor embedding_bag(const Tensor& input, const Tensor& weight, const Tensor& offsets = {},
                     const Tensor& per_sample_weights = {}, const EmbeddingBagOptions& options = {});

// ---- distances --------------------------------------------------------------------------------------
// x / max(||x||_p, eps) along dim (torch.nn.functional.normalize).
Tensor normalize(const Tensor& x, double p = 2, int64_t dim = 1, double eps = 1e-12);
// sum(x1 * x2, dim) / (max(||x1||, eps) * max(||x2||, eps)), x1 and x2 broadcast
// (torch.nn.functional.cosine_similarity).
Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim = 1, double eps = 1e-8);
// ||x1 - x2 + eps||_p over the last dim, x1 and x2 broadcast (torch.nn.functional.pairwise_distance).
Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p = 2, double eps = 1e-6, bool keepdim = false);

// ---- 1-d pooling: x (N, C, L) or (C, L), through the 2-d kernels with a unit height ---------------
Tensor max_pool1d(const Tensor& x, int64_t kernel_size, std::optional<int64_t> stride = std::nullopt,
                  int64_t padding = 0, int64_t dilation = 1, bool ceil_mode = false);
Tensor avg_pool1d(const Tensor& x, int64_t kernel_size, std::optional<int64_t> stride = std::nullopt,
                  int64_t padding = 0, bool ceil_mode = false, bool count_include_pad = true);
Tensor adaptive_avg_pool1d(const Tensor& x, int64_t output_size);
Tensor adaptive_max_pool1d(const Tensor& x, int64_t output_size);

// ---- activations beyond the Tensor core's (relu, relu6, gelu, silu, mish, softplus, elu, selu,
// hardtanh, hardsigmoid, hardswish, logsigmoid, leaky_relu are nabla:: functions) ----------------
// alpha * elu(x / alpha): continuously differentiable ELU (alpha != 0).
Tensor celu(const Tensor& x, double alpha = 1.0);
using nabla::softsign;               // x / (1 + |x|) (core/elementwise_ops.h)
Tensor tanhshrink(const Tensor& x);  // x - tanh(x)
// x where x > threshold, else value.
Tensor threshold(const Tensor& x, double threshold, double value);
// a * sigmoid(b), with a and b the two halves of x along dim (its size must be even).
Tensor glu(const Tensor& x, int64_t dim = -1);
// x where x > 0, else weight * x; weight has one element, or one per channel (dim 1 of x).
Tensor prelu(const Tensor& x, const Tensor& weight);
Tensor softmin(const Tensor& x, int64_t dim);  // softmax(-x)

// ---- dropout --------------------------------------------------------------------------------------
// Zeroes each element with probability p and scales the rest by 1/(1-p) (training only). The mask
// comes from nabla's default generator: manual_seed makes it reproducible.
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true);
// Zeroes whole channels: x (N, C, H, W) or (C, H, W). A 3-D input is one unbatched image, as the
// docs of torch.nn.Dropout2d describe it (PyTorch itself still reads it as (N, C, L), with a
// warning that this will change; for that, reshape to (N, C, L, 1)).
Tensor dropout2d(const Tensor& x, double p = 0.5, bool training = true);

// ---- losses ---------------------------------------------------------------------------------------
enum class Reduction { none, mean, sum, batchmean /* kl_div only */ };
const char* reduction_name(Reduction r);

struct CrossEntropyOptions {
  Tensor weight{};              // (C) class weights, or undefined
  int64_t ignore_index = -100;  // targets equal to this contribute nothing (class-index targets only)
  Reduction reduction = Reduction::mean;
  double label_smoothing = 0.0;
};
// input: (N, C) or (N, C, d1, ...) or (C) logits. target: int64 class indices (N) / (N, d1, ...)
// / () or, with the input's shape and dtype, class probabilities.
Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyOptions& options = {});

struct NLLLossOptions {
  Tensor weight{};
  int64_t ignore_index = -100;
  Reduction reduction = Reduction::mean;
};
// input: log-probabilities (N, C) or (N, C, d1, ...) or (C); target: int64 class indices.
// mean divides by the summed weights of the targets that are not ignored (0 / 0 = NaN when every
// target is ignored; the gradient is then 0, as in PyTorch).
// Differs from PyTorch: a weight that requires grad gets a gradient (PyTorch raises); this holds
// for every loss's weight and pos_weight here.
Tensor nll_loss(const Tensor& input, const Tensor& target, const NLLLossOptions& options = {});

// Differs from PyTorch: these regression losses (and binary_cross_entropy(_with_logits), kl_div and
// the ranking, margin and likelihood losses below) require the target to have the input's shape; PyTorch broadcasts it with a warning, which almost
// always hides a bug such as an (N, 1) output against an (N) target.
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean);
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean);
struct SmoothL1LossOptions {
  Reduction reduction = Reduction::mean;
  double beta = 1.0;
};
// 0.5 d^2 / beta where |d| < beta, |d| - 0.5 beta elsewhere (beta = 0 is l1_loss).
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const SmoothL1LossOptions& options = {});
struct HuberLossOptions {
  Reduction reduction = Reduction::mean;
  double delta = 1.0;
};
// 0.5 d^2 where |d| <= delta, delta (|d| - 0.5 delta) elsewhere.
Tensor huber_loss(const Tensor& input, const Tensor& target, const HuberLossOptions& options = {});

struct BCEOptions {
  Tensor weight{};  // broadcast to the input's shape
  Reduction reduction = Reduction::mean;
};
// input: probabilities in [0, 1]. -w (y log x + (1 - y) log(1 - x)), each log clamped at -100.
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const BCEOptions& options = {});

struct BCEWithLogitsOptions {
  Tensor weight{};      // broadcast to the input's shape
  Tensor pos_weight{};  // weight of the positive term, broadcast along the last dim (one per class)
  Reduction reduction = Reduction::mean;
};
// Numerically stable sigmoid + binary_cross_entropy:
//   (1 - y) x + (1 + (pos_weight - 1) y) (log(1 + exp(-|x|)) + max(-x, 0)).
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const BCEWithLogitsOptions& options = {});

struct KLDivLossOptions {
  Reduction reduction = Reduction::mean;  // batchmean divides the sum by N
  bool log_target = false;
};
// input: log-probabilities; target: probabilities (or log-probabilities with log_target).
// Pointwise target (log target - input), 0 where target is 0 and NaN where it is negative, as
// PyTorch's xlogy(target, target) - target * input; so is the gradient with respect to the target
// (log target + 1 - input: NaN at target 0, as PyTorch's).
Tensor kl_div(const Tensor& input, const Tensor& target, const KLDivLossOptions& options = {});

// ---- ranking, embedding and margin losses (PyTorch's formulas) ----------------------------------
// max(0, -y (x1 - x2) + margin); x1, x2 and y of one shape, y in {1, -1}.
Tensor margin_ranking_loss(const Tensor& x1, const Tensor& x2, const Tensor& y, double margin = 0.0,
                           Reduction reduction = Reduction::mean);
// x where y = 1, max(0, margin - x) where y = -1 (both terms where y is neither, as PyTorch).
Tensor hinge_embedding_loss(const Tensor& x, const Tensor& y, double margin = 1.0,
                            Reduction reduction = Reduction::mean);
// 1 - cos(x1, x2) where y = 1, max(0, cos(x1, x2) - margin) where y = -1; x1, x2 (N, D) with y (N),
// or (D) with y (). cos = <x1, x2> / sqrt((|x1|^2 + 1e-12) (|x2|^2 + 1e-12)).
Tensor cosine_embedding_loss(const Tensor& x1, const Tensor& x2, const Tensor& y, double margin = 0.0,
                             Reduction reduction = Reduction::mean);
struct TripletMarginLossOptions {
  double margin = 1.0;
  double p = 2.0;     // the norm of pairwise_distance
  double eps = 1e-6;  // added to the differences (pairwise_distance)
  bool swap = false;  // use min(d(a, n), d(p, n)) as the negative distance
  Reduction reduction = Reduction::mean;
};
// max(d(a, p) - d(a, n) + margin, 0) with d = pairwise_distance over the last dim; (N, D) or (D).
Tensor triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                           const TripletMarginLossOptions& options = {});
struct TripletMarginWithDistanceLossOptions {
  // d(a, b) -> one distance per sample; unset: pairwise_distance(a, b).
  std::function<Tensor(const Tensor&, const Tensor&)> distance_function;
  double margin = 1.0;
  bool swap = false;
  Reduction reduction = Reduction::mean;
};
Tensor triplet_margin_with_distance_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                                         const TripletMarginWithDistanceLossOptions& options = {});
// log(1 + exp(-y x)), y in {1, -1}, x and y of one shape. Not differentiable with respect to y: a y
// that requires grad is an AutogradError (PyTorch raises too).
Tensor soft_margin_loss(const Tensor& x, const Tensor& y, Reduction reduction = Reduction::mean);
// x (N, C) (or (C)), y of x's shape in {0, 1}: -(y log sigmoid(x) + (1 - y) log sigmoid(-x)), times
// weight (C) if given, averaged over C; then the reduction over N.
Tensor multilabel_soft_margin_loss(const Tensor& x, const Tensor& y, const Tensor& weight = {},
                                   Reduction reduction = Reduction::mean);
struct MultiMarginLossOptions {
  int64_t p = 1;  // 1 or 2
  double margin = 1.0;
  Tensor weight{};  // (C) class weights, or undefined
  Reduction reduction = Reduction::mean;
};
// x (N, C) or (C), y int64 (N) or (): sum over i != y of w[y] max(0, margin - x[y] + x[i])^p / C.
Tensor multi_margin_loss(const Tensor& x, const Tensor& y, const MultiMarginLossOptions& options = {});

// ---- likelihood losses -----------------------------------------------------------------------------
struct PoissonNLLLossOptions {
  bool log_input = true;  // input is log(rate): exp(input) - target input; else input - target log(input + eps)
  bool full = false;      // add Stirling's term target log target - target + 0.5 log(2 pi target) where target > 1
  double eps = 1e-8;
  Reduction reduction = Reduction::mean;
};
Tensor poisson_nll_loss(const Tensor& input, const Tensor& target, const PoissonNLLLossOptions& options = {});
struct GaussianNLLLossOptions {
  bool full = false;  // add 0.5 log(2 pi)
  double eps = 1e-6;  // var is clamped at eps (the clamp passes gradients through, as PyTorch's)
  Reduction reduction = Reduction::mean;
};
// 0.5 (log var + (input - target)^2 / var). var: input's shape, or input's without the last dim, or
// with a last dim of 1 (one variance per sample); a negative var is an error.
Tensor gaussian_nll_loss(const Tensor& input, const Tensor& target, const Tensor& var,
                         const GaussianNLLLossOptions& options = {});

// ---- connectionist temporal classification -----------------------------------------------------------
// torch.nn.functional.ctc_loss: log_probs (T, N, C) (log_softmax over C) or unbatched (T, C); targets
// (N, S) padded, or 1-D holding every element's targets one after the other; input_lengths and
// target_lengths (N) (<= T and <= S). The negative log-likelihood of the targets over every alignment
// with blanks; "mean" divides each loss by its target length, then averages over the batch.
// zero_infinity: impossible alignments (input too short) give 0 and no gradient instead of inf.
// Differs from PyTorch: the gradient is the exact one with respect to log_probs; PyTorch's native
// kernel adds exp(log_probs) to it, which cancels when log_probs comes from log_softmax (the usual
// case, where the two agree). Not twice differentiable (PyTorch's is not either). Runs on the host.
struct CTCLossOptions {
  int64_t blank = 0;
  Reduction reduction = Reduction::mean;
  bool zero_infinity = false;
};
Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, IntArrayRef input_lengths, IntArrayRef target_lengths,
                const CTCLossOptions& options = {});
Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                const Tensor& target_lengths, const CTCLossOptions& options = {});

}  // namespace nabla::nn::functional

namespace nabla::nn {
namespace F = functional;
using functional::Reduction;
}  // namespace nabla::nn
