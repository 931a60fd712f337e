#include "nn/conv.h"

#include <cmath>

#include "nn/functional.h"
#include "nn/init.h"

namespace nabla::nn {

namespace {

void check_channels(const char* op, int64_t in, int64_t out, int64_t groups, bool kernel_ok) {
  NABLA_CHECK(ValueError, in > 0 && out > 0, op, ": in_channels and out_channels must be positive, got ", in, " and ",
              out);
  NABLA_CHECK(ValueError, groups > 0 && in % groups == 0 && out % groups == 0, op, ": in_channels (", in,
              ") and out_channels (", out, ") must be divisible by groups (", groups, ")");
  NABLA_CHECK(ValueError, kernel_ok, op, ": kernel_size must be positive");
}

// PyTorch's _ConvNd.reset_parameters: kaiming_uniform_(a = sqrt(5)), i.e. U(-1/sqrt(fan_in), ..),
// and the bias from U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in computed from the weight.
void conv_reset(Tensor& weight, Tensor& bias) {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    int64_t fan_in = init::calculate_fan_in_and_fan_out(weight).first;
    double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
    init::uniform_(bias, -bound, bound);
  }
}

template <size_t N>
bool all_equal(const std::array<int64_t, N>& a, int64_t v) {
  for (int64_t x : a)
    if (x != v) return false;
  return true;
}

template <size_t N>
std::string tuple_of(const ExpandingArray<N>& a) {
  return repr_tuple(a.values);
}

// PyTorch's extra_repr of an N-d convolution: the sizes, then what differs from the defaults
// (`more`, e.g. a transposed convolution's output_padding, goes before groups as in PyTorch).
template <class Options>
std::string conv_repr(const Options& o, const std::string& more = {}) {
  std::string s = internal::str(o.in_channels, ", ", o.out_channels, ", kernel_size=", tuple_of(o.kernel_size),
                                ", stride=", tuple_of(o.stride));
  if (!all_equal(o.padding.values, 0)) s += ", padding=" + tuple_of(o.padding);
  if (!all_equal(o.dilation.values, 1)) s += ", dilation=" + tuple_of(o.dilation);
  s += more;
  if (o.groups != 1) s += internal::str(", groups=", o.groups);
  if (!o.bias) s += ", bias=False";
  return s;
}

void check_padding_mode(const char* op, const std::string& mode) {
  NABLA_CHECK(ValueError, mode == "zeros" || mode == "reflect" || mode == "replicate" || mode == "circular", op,
              ": padding_mode must be 'zeros', 'reflect', 'replicate' or 'circular', got '", mode, "'");
}

// A convolution's input padded by `padding` (one value per spatial dim) in padding_mode, when that
// is not "zeros"; the convolution then runs without padding.
Tensor pad_input(const Tensor& x, IntArrayRef padding, const std::string& mode) {
  std::vector<int64_t> pairs;
  for (size_t i = padding.size(); i-- > 0;) {
    pairs.push_back(padding[i]);
    pairs.push_back(padding[i]);
  }
  return F::pad(x, pairs, mode);
}

std::string padding_mode_repr(const std::string& mode) { return mode == "zeros" ? "" : ", padding_mode=" + mode; }

}  // namespace

// ---- Conv1d ---------------------------------------------------------------------------------------

Conv1d::Conv1d(Conv1dOptions o) : options(o) {
  check_padding_mode("Conv1d", o.padding_mode);
  check_channels("Conv1d", o.in_channels, o.out_channels, o.groups, o.kernel_size > 0);
  weight = register_parameter("weight", empty({o.out_channels, o.in_channels / o.groups, o.kernel_size}));
  if (o.bias) bias = register_parameter("bias", empty({o.out_channels}));
  reset_parameters();
}

Conv1d::Conv1d(int64_t in, int64_t out, int64_t k, Conv1dOptions o)
    : Conv1d([&] {
        o.in_channels = in;
        o.out_channels = out;
        o.kernel_size = k;
        return o;
      }()) {}

void Conv1d::reset_parameters() { conv_reset(weight, bias); }

Tensor Conv1d::forward(Tensor x) {
  NABLA_CHECK(ShapeError,
              (x.dim() == 3 && x.size(1) == options.in_channels) || (x.dim() == 2 && x.size(0) == options.in_channels),
              "Conv1d: expected input (N, ", options.in_channels, ", L) or (", options.in_channels, ", L), got ",
              x.sizes());
  if (options.padding_mode != "zeros") {
    check_padding_mode("Conv1d", options.padding_mode);
    return F::conv1d(pad_input(x, options.padding, options.padding_mode), weight, bias, options.stride, 0,
                     options.dilation, options.groups);
  }
  return F::conv1d(x, weight, bias, options.stride, options.padding, options.dilation, options.groups);
}

std::string Conv1d::extra_repr() const {
  const auto& o = options;
  std::string s = internal::str(o.in_channels, ", ", o.out_channels, ", kernel_size=(", o.kernel_size, ",), stride=(",
                                o.stride, ",)");
  if (o.padding != 0) s += internal::str(", padding=(", o.padding, ",)");
  if (o.dilation != 1) s += internal::str(", dilation=(", o.dilation, ",)");
  if (o.groups != 1) s += internal::str(", groups=", o.groups);
  if (!o.bias) s += ", bias=False";
  return s + padding_mode_repr(o.padding_mode);
}

// ---- Conv2d ---------------------------------------------------------------------------------------

Conv2d::Conv2d(Conv2dOptions o) : options(o) {
  check_padding_mode("Conv2d", o.padding_mode);
  check_channels("Conv2d", o.in_channels, o.out_channels, o.groups, o.kernel_size[0] > 0 && o.kernel_size[1] > 0);
  weight = register_parameter("weight",
                              empty({o.out_channels, o.in_channels / o.groups, o.kernel_size[0], o.kernel_size[1]}));
  if (o.bias) bias = register_parameter("bias", empty({o.out_channels}));
  reset_parameters();
}

Conv2d::Conv2d(int64_t in, int64_t out, ExpandingArray<2> k, Conv2dOptions o)
    : Conv2d([&] {
        o.in_channels = in;
        o.out_channels = out;
        o.kernel_size = k;
        return o;
      }()) {}

void Conv2d::reset_parameters() { conv_reset(weight, bias); }

Tensor Conv2d::forward(Tensor x) {
  NABLA_CHECK(ShapeError,
              (x.dim() == 4 && x.size(1) == options.in_channels) || (x.dim() == 3 && x.size(0) == options.in_channels),
              "Conv2d: expected input (N, ", options.in_channels, ", H, W) or (", options.in_channels, ", H, W), got ",
              x.sizes());
  if (options.padding_mode != "zeros") {
    check_padding_mode("Conv2d", options.padding_mode);
    return F::conv2d(pad_input(x, options.padding, options.padding_mode), weight, bias, options.stride, 0,
                     options.dilation, options.groups);
  }
  return F::conv2d(x, weight, bias, options.stride, options.padding, options.dilation, options.groups);
}

std::string Conv2d::extra_repr() const { return conv_repr(options) + padding_mode_repr(options.padding_mode); }

// ---- Conv3d ---------------------------------------------------------------------------------------

Conv3d::Conv3d(Conv3dOptions o) : options(o) {
  check_padding_mode("Conv3d", o.padding_mode);
  check_channels("Conv3d", o.in_channels, o.out_channels, o.groups,
                 o.kernel_size[0] > 0 && o.kernel_size[1] > 0 && o.kernel_size[2] > 0);
  weight = register_parameter("weight", empty({o.out_channels, o.in_channels / o.groups, o.kernel_size[0],
                                               o.kernel_size[1], o.kernel_size[2]}));
  if (o.bias) bias = register_parameter("bias", empty({o.out_channels}));
  reset_parameters();
}

Conv3d::Conv3d(int64_t in, int64_t out, ExpandingArray<3> k, Conv3dOptions o)
    : Conv3d([&] {
        o.in_channels = in;
        o.out_channels = out;
        o.kernel_size = k;
        return o;
      }()) {}

void Conv3d::reset_parameters() { conv_reset(weight, bias); }

Tensor Conv3d::forward(Tensor x) {
  NABLA_CHECK(ShapeError,
              (x.dim() == 5 && x.size(1) == options.in_channels) || (x.dim() == 4 && x.size(0) == options.in_channels),
              "Conv3d: expected input (N, ", options.in_channels, ", D, H, W) or (", options.in_channels,
              ", D, H, W), got ", x.sizes());
  if (options.padding_mode != "zeros") {
    check_padding_mode("Conv3d", options.padding_mode);
    return F::conv3d(pad_input(x, options.padding, options.padding_mode), weight, bias, options.stride, 0,
                     options.dilation, options.groups);
  }
  return F::conv3d(x, weight, bias, options.stride, options.padding, options.dilation, options.groups);
}

std::string Conv3d::extra_repr() const { return conv_repr(options) + padding_mode_repr(options.padding_mode); }

// ---- ConvTranspose2d ------------------------------------------------------------------------------

ConvTranspose2d::ConvTranspose2d(ConvTranspose2dOptions o) : options(o) {
  check_channels("ConvTranspose2d", o.in_channels, o.out_channels, o.groups,
                 o.kernel_size[0] > 0 && o.kernel_size[1] > 0);
  weight = register_parameter("weight",
                              empty({o.in_channels, o.out_channels / o.groups, o.kernel_size[0], o.kernel_size[1]}));
  if (o.bias) bias = register_parameter("bias", empty({o.out_channels}));
  reset_parameters();
}

ConvTranspose2d::ConvTranspose2d(int64_t in, int64_t out, ExpandingArray<2> k, ConvTranspose2dOptions o)
    : ConvTranspose2d([&] {
        o.in_channels = in;
        o.out_channels = out;
        o.kernel_size = k;
        return o;
      }()) {}

void ConvTranspose2d::reset_parameters() { conv_reset(weight, bias); }

Tensor ConvTranspose2d::forward(Tensor x) {
  NABLA_CHECK(ShapeError,
              (x.dim() == 4 && x.size(1) == options.in_channels) || (x.dim() == 3 && x.size(0) == options.in_channels),
              "ConvTranspose2d: expected input (N, ", options.in_channels, ", H, W) or (", options.in_channels,
              ", H, W), got ", x.sizes());
  return F::conv_transpose2d(x, weight, bias, options.stride, options.padding, options.output_padding, options.groups,
                             options.dilation);
}

std::string ConvTranspose2d::extra_repr() const {
  const auto& o = options;
  return conv_repr(o, all_equal(o.output_padding.values, 0) ? "" : ", output_padding=" + tuple_of(o.output_padding));
}

// ---- ConvTranspose1d / ConvTranspose3d ----------------------------------------------------------

ConvTranspose1d::ConvTranspose1d(ConvTranspose1dOptions o) : options(o) {
  check_channels("ConvTranspose1d", o.in_channels, o.out_channels, o.groups, o.kernel_size > 0);
  weight = register_parameter("weight", empty({o.in_channels, o.out_channels / o.groups, o.kernel_size}));
  if (o.bias) bias = register_parameter("bias", empty({o.out_channels}));
  reset_parameters();
}

ConvTranspose1d::ConvTranspose1d(int64_t in, int64_t out, int64_t k, ConvTranspose1dOptions o)
    : ConvTranspose1d([&] {
        o.in_channels = in;
        o.out_channels = out;
        o.kernel_size = k;
        return o;
      }()) {}

void ConvTranspose1d::reset_parameters() { conv_reset(weight, bias); }

Tensor ConvTranspose1d::forward(Tensor x) {
  NABLA_CHECK(ShapeError,
              (x.dim() == 3 && x.size(1) == options.in_channels) || (x.dim() == 2 && x.size(0) == options.in_channels),
              "ConvTranspose1d: expected input (N, ", options.in_channels, ", L) or (", options.in_channels,
              ", L), got ", x.sizes());
  const auto& o = options;
  return F::conv_transpose1d(x, weight, bias, o.stride, o.padding, o.output_padding, o.groups, o.dilation);
}

std::string ConvTranspose1d::extra_repr() const {
  const auto& o = options;
  std::string s = internal::str(o.in_channels, ", ", o.out_channels, ", kernel_size=(", o.kernel_size, ",), stride=(",
                                o.stride, ",)");
  if (o.padding != 0) s += internal::str(", padding=(", o.padding, ",)");
  if (o.dilation != 1) s += internal::str(", dilation=(", o.dilation, ",)");
  if (o.output_padding != 0) s += internal::str(", output_padding=(", o.output_padding, ",)");
  if (o.groups != 1) s += internal::str(", groups=", o.groups);
  if (!o.bias) s += ", bias=False";
  return s;
}

ConvTranspose3d::ConvTranspose3d(ConvTranspose3dOptions o) : options(o) {
  check_channels("ConvTranspose3d", o.in_channels, o.out_channels, o.groups,
                 o.kernel_size[0] > 0 && o.kernel_size[1] > 0 && o.kernel_size[2] > 0);
  weight = register_parameter("weight", empty({o.in_channels, o.out_channels / o.groups, o.kernel_size[0],
                                               o.kernel_size[1], o.kernel_size[2]}));
  if (o.bias) bias = register_parameter("bias", empty({o.out_channels}));
  reset_parameters();
}

ConvTranspose3d::ConvTranspose3d(int64_t in, int64_t out, ExpandingArray<3> k, ConvTranspose3dOptions o)
    : ConvTranspose3d([&] {
        o.in_channels = in;
        o.out_channels = out;
        o.kernel_size = k;
        return o;
      }()) {}

void ConvTranspose3d::reset_parameters() { conv_reset(weight, bias); }

Tensor ConvTranspose3d::forward(Tensor x) {
  NABLA_CHECK(ShapeError,
              (x.dim() == 5 && x.size(1) == options.in_channels) || (x.dim() == 4 && x.size(0) == options.in_channels),
              "ConvTranspose3d: expected input (N, ", options.in_channels, ", D, H, W) or (", options.in_channels,
              ", D, H, W), got ", x.sizes());
  const auto& o = options;
  return F::conv_transpose3d(x, weight, bias, o.stride, o.padding, o.output_padding, o.groups, o.dilation);
}

std::string ConvTranspose3d::extra_repr() const {
  const auto& o = options;
  return conv_repr(o, all_equal(o.output_padding.values, 0) ? "" : ", output_padding=" + tuple_of(o.output_padding));
}

}  // namespace nabla::nn
