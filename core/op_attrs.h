// The attributes an op call carries besides its tensors, one struct per kind of op: what a traced
// call records (core/trace.h) and what the ONNX exporter and `compile` read back, by field, with
// the op's typed identity (core/op_schema.h names each op's struct). Sizes are as the caller gave
// them (negative dims not yet wrapped); an empty `dims` of a reduction means every dim. Equality
// (field by field) is how compile's common-subexpression pass tells calls apart.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace nabla {

struct NoAttrs {
  bool operator==(const NoAttrs&) const = default;
};
// Elementwise unary ops: their parameters (leaky_relu's slope, softplus's beta and threshold,
// hardtanh's and clamp's bounds, polygamma's order; 0 where an op has none).
struct UnaryAttrs {
  bool operator==(const UnaryAttrs&) const = default;
  double p0 = 0, p1 = 0;
};
// Elementwise binary ops: add's and sub's scale of b.
struct BinaryAttrs {
  bool operator==(const BinaryAttrs&) const = default;
  double alpha = 1;
};
// pow(x, exponent) with a number.
struct ScalarAttrs {
  bool operator==(const ScalarAttrs&) const = default;
  double value = 0;
};
struct ShapeAttrs {  // view, reshape, expand
  bool operator==(const ShapeAttrs&) const = default;
  std::vector<int64_t> shape;
};
struct DimsAttrs {  // permute
  bool operator==(const DimsAttrs&) const = default;
  std::vector<int64_t> dims;
};
struct DimAttrs {  // cat, unsqueeze, unbind, index_select, gather, scatter, cumsum, softmax, ...
  bool operator==(const DimAttrs&) const = default;
  int64_t dim = 0;
};
// The FFT primitives (fft_c2c, fft_r2c, fft_c2r): the dims transformed (wrapped, in order), the
// normalization (0 none, 1 by 1/sqrt(n), 2 by 1/n), the direction of a complex transform, whether
// r2c keeps only the first half (onesided) and c2r's output length along the last dim.
struct FftAttrs {
  bool operator==(const FftAttrs&) const = default;
  std::vector<int64_t> dims;
  int64_t norm = 0;
  bool forward = true;
  bool onesided = true;
  int64_t last_dim_size = 0;
};
struct SqueezeAttrs {  // no dim: every dim of size 1
  bool operator==(const SqueezeAttrs&) const = default;
  std::optional<int64_t> dim;
};
struct FlattenAttrs {
  bool operator==(const FlattenAttrs&) const = default;
  int64_t start = 0, end = -1;
};
struct SliceAttrs {
  bool operator==(const SliceAttrs&) const = default;
  int64_t dim = 0, start = 0, end = std::numeric_limits<int64_t>::max(), step = 1;
};
struct SelectAttrs {
  bool operator==(const SelectAttrs&) const = default;
  int64_t dim = 0, index = 0;
};
struct DiagonalAttrs {
  bool operator==(const DiagonalAttrs&) const = default;
  int64_t offset = 0, dim1 = 0, dim2 = 1;
};
struct SplitAttrs {
  bool operator==(const SplitAttrs&) const = default;
  std::vector<int64_t> sizes;
  int64_t dim = 0;
};
// (before, after) pairs from the last dim; mode: "constant", "reflect", "replicate", "circular".
struct PadAttrs {
  bool operator==(const PadAttrs&) const = default;
  std::vector<int64_t> padding;
  double value = 0;
  std::string mode = "constant";
};
struct ReduceAttrs {  // sum, mean, prod, amax, amin, any, all
  bool operator==(const ReduceAttrs&) const = default;
  std::vector<int64_t> dims;
  bool keepdim = false;
};
struct DimKeepAttrs {  // max and min along a dim, mode
  bool operator==(const DimKeepAttrs&) const = default;
  int64_t dim = 0;
  bool keepdim = false;
};
struct OptionalDimAttrs {  // median, nanmedian: over everything, or along dim
  bool operator==(const OptionalDimAttrs&) const = default;
  std::optional<int64_t> dim;
  bool keepdim = false;
};
struct KthvalueAttrs {
  bool operator==(const KthvalueAttrs&) const = default;
  int64_t k = 1, dim = -1;
  bool keepdim = false;
};
struct QuantileAttrs {
  bool operator==(const QuantileAttrs&) const = default;
  std::optional<int64_t> dim;
  bool keepdim = false;
  std::string interpolation = "linear";
};
struct SortAttrs {
  bool operator==(const SortAttrs&) const = default;
  int64_t dim = -1;
  bool descending = false;
};
struct TopkAttrs {
  bool operator==(const TopkAttrs&) const = default;
  int64_t k = 1, dim = -1;
  bool largest = true, sorted = true;
};
struct HistcAttrs {
  bool operator==(const HistcAttrs&) const = default;
  int64_t bins = 100;
  double min = 0, max = 0;
};
struct BincountAttrs {
  bool operator==(const BincountAttrs&) const = default;
  int64_t minlength = 0;
};
struct SearchsortedAttrs {
  bool operator==(const SearchsortedAttrs&) const = default;
  bool right = false;
};
struct UniqueAttrs {  // unique, unique_consecutive: dim absent for the flattened tensor
  bool operator==(const UniqueAttrs&) const = default;
  std::optional<int64_t> dim;
  bool return_inverse = false, return_counts = false;
};
// conv1d/2d/3d: one value per spatial dim.
struct ConvAttrs {
  bool operator==(const ConvAttrs&) const = default;
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups = 1;
};
struct ConvTransposeAttrs {
  bool operator==(const ConvTransposeAttrs&) const = default;
  std::vector<int64_t> stride, padding, output_padding, dilation;
  int64_t groups = 1;
};
struct MaxPoolAttrs {
  bool operator==(const MaxPoolAttrs&) const = default;
  std::vector<int64_t> kernel, stride, padding, dilation;
  bool ceil_mode = false;
};
struct AvgPoolAttrs {
  bool operator==(const AvgPoolAttrs&) const = default;
  std::vector<int64_t> kernel, stride, padding;
  bool ceil_mode = false, count_include_pad = true;
};
struct AdaptivePoolAttrs {
  bool operator==(const AdaptivePoolAttrs&) const = default;
  std::vector<int64_t> output_size;
};
struct BatchNormAttrs {
  bool operator==(const BatchNormAttrs&) const = default;
  bool training = false;
  double momentum = 0.1, eps = 1e-5;
};
struct InstanceNormAttrs {
  bool operator==(const InstanceNormAttrs&) const = default;
  bool use_input_stats = true;
  double eps = 1e-5;
};
// nn::functional::interpolate: an output size or scale factors (one of the two is empty).
struct InterpolateAttrs {
  bool operator==(const InterpolateAttrs&) const = default;
  std::string mode;
  std::vector<int64_t> size;
  std::vector<double> scale_factor;
  bool align_corners = false;
};
struct GridSampleAttrs {
  bool operator==(const GridSampleAttrs&) const = default;
  std::string mode, padding_mode;
  bool align_corners = false;
};
// RNN, LSTM and GRU as one op each (inputs: x, h0, c0, then per layer and direction weight_ih,
// weight_hh, bias_ih, bias_hh, weight_hr).
struct RnnAttrs {
  bool operator==(const RnnAttrs&) const = default;
  int64_t num_layers = 1, hidden_size = 0, proj_size = 0;
  bool bidirectional = false, batch_first = false, relu = false;
};

// Any op's attributes.
using OpAttrs = std::variant<NoAttrs, UnaryAttrs, BinaryAttrs, ScalarAttrs, ShapeAttrs, DimsAttrs, DimAttrs,
                             SqueezeAttrs, FlattenAttrs, SliceAttrs, SelectAttrs, DiagonalAttrs, SplitAttrs, PadAttrs,
                             ReduceAttrs, DimKeepAttrs, OptionalDimAttrs, KthvalueAttrs, QuantileAttrs, SortAttrs,
                             TopkAttrs, HistcAttrs, BincountAttrs, SearchsortedAttrs, UniqueAttrs, ConvAttrs,
                             ConvTransposeAttrs, MaxPoolAttrs, AvgPoolAttrs, AdaptivePoolAttrs, BatchNormAttrs,
                             InstanceNormAttrs, InterpolateAttrs, GridSampleAttrs, RnnAttrs, FftAttrs>;

}  // namespace nabla
