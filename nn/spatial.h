// Padding layers (ReflectionPad, ReplicationPad, CircularPad, ZeroPad, ConstantPad in 1, 2 and 3
// dims), Unfold and Fold, MaxUnpool1d and MaxUnpool2d: the functional ops of nn/functional.h with
// their arguments held, as torch.nn's.
//
//   nn::ReflectionPad2d pad({1, 1, 2, 0});   // (left, right, top, bottom)
//   nn::Unfold unfold({.kernel_size = {3, 3}, .padding = 1});
#pragma once

#include <array>
#include <string>

#include "functional.h"
#include "module.h"

namespace nabla::nn {

// A padding layer over the last D dims: `padding` holds 2 D values, (before, after) for the last dim
// first, or one value for all of them.
template <size_t D>
class PadNd : public Module {
 public:
  PadNd(const char* mode, ExpandingArray<2 * D> padding, double value = 0)
      : mode(mode), padding(padding), value(value) {}
  Tensor forward(Tensor x) override { return functional::pad(x, padding, mode, value); }
  std::string extra_repr() const override {
    std::string s = repr_tuple(padding.values);
    if (mode == "constant") s += internal::str(", value=", value);
    return s;
  }
  std::string mode;
  ExpandingArray<2 * D> padding;
  double value;
};

#define NABLA_PAD_LAYER(Name, D, mode)                                        \
  class Name : public PadNd<D> {                                              \
   public:                                                                    \
    explicit Name(ExpandingArray<2 * D> padding) : PadNd<D>(mode, padding) {} \
  };
NABLA_PAD_LAYER(ReflectionPad1d, 1, "reflect")
NABLA_PAD_LAYER(ReflectionPad2d, 2, "reflect")
NABLA_PAD_LAYER(ReflectionPad3d, 3, "reflect")
NABLA_PAD_LAYER(ReplicationPad1d, 1, "replicate")
NABLA_PAD_LAYER(ReplicationPad2d, 2, "replicate")
NABLA_PAD_LAYER(ReplicationPad3d, 3, "replicate")
NABLA_PAD_LAYER(CircularPad1d, 1, "circular")
NABLA_PAD_LAYER(CircularPad2d, 2, "circular")
NABLA_PAD_LAYER(CircularPad3d, 3, "circular")
NABLA_PAD_LAYER(ZeroPad1d, 1, "constant")
NABLA_PAD_LAYER(ZeroPad2d, 2, "constant")
NABLA_PAD_LAYER(ZeroPad3d, 3, "constant")
#undef NABLA_PAD_LAYER

// ConstantPad1d/2d/3d(padding, value).
template <size_t D>
class ConstantPadNd : public PadNd<D> {
 public:
  ConstantPadNd(ExpandingArray<2 * D> padding, double value) : PadNd<D>("constant", padding, value) {}
};
using ConstantPad1d = ConstantPadNd<1>;
using ConstantPad2d = ConstantPadNd<2>;
using ConstantPad3d = ConstantPadNd<3>;

// "kernel_size=(..), dilation=(..), padding=(..), stride=(..)": Unfold's and Fold's repr.
template <class Options>
std::string block_repr(const Options& o) {
  return "kernel_size=" + repr_tuple(o.kernel_size.values) + ", dilation=" + repr_tuple(o.dilation.values) +
         ", padding=" + repr_tuple(o.padding.values) + ", stride=" + repr_tuple(o.stride.values);
}

struct UnfoldOptions {
  ExpandingArray<2> kernel_size = 1;
  ExpandingArray<2> dilation = 1, padding = 0, stride = 1;
};

// (N, C, H, W) -> (N, C kH kW, L): the sliding blocks as columns (F::unfold).
class Unfold : public Module {
 public:
  explicit Unfold(UnfoldOptions options) : options(options) {}
  Tensor forward(Tensor x) override {
    return functional::unfold(x, options.kernel_size, options.dilation, options.padding, options.stride);
  }
  std::string extra_repr() const override { return block_repr(options); }
  UnfoldOptions options;
};

struct FoldOptions {
  ExpandingArray<2> output_size = 1;
  ExpandingArray<2> kernel_size = 1;
  ExpandingArray<2> dilation = 1, padding = 0, stride = 1;
};

// (N, C kH kW, L) -> (N, C, output_size): blocks summed back into place (F::fold).
class Fold : public Module {
 public:
  explicit Fold(FoldOptions options) : options(options) {}
  Tensor forward(Tensor x) override {
    return functional::fold(x, options.output_size, options.kernel_size, options.dilation, options.padding,
                            options.stride);
  }
  std::string extra_repr() const override {
    return "output_size=" + repr_tuple(options.output_size.values) + ", " + block_repr(options);
  }
  FoldOptions options;
};

// MaxUnpool2d(kernel_size, stride = kernel_size, padding): forward(x, indices) with the indices of
// max_pool2d_with_indices; the output size is the default one (F::max_unpool2d takes others).
class MaxUnpool2d : public Module {
 public:
  explicit MaxUnpool2d(ExpandingArray<2> kernel_size, std::optional<ExpandingArray<2>> stride = std::nullopt,
                       ExpandingArray<2> padding = 0)
      : kernel_size(kernel_size), stride(stride.value_or(kernel_size)), padding(padding) {}
  Tensor forward(Tensor x, Tensor indices) override {
    return functional::max_unpool2d(x, indices, kernel_size, stride, padding);
  }
  std::string extra_repr() const override {
    return "kernel_size=" + repr_tuple(kernel_size.values) + ", stride=" + repr_tuple(stride.values) +
           ", padding=" + repr_tuple(padding.values);
  }
  ExpandingArray<2> kernel_size, stride, padding;
};

class MaxUnpool1d : public Module {
 public:
  explicit MaxUnpool1d(int64_t kernel_size, std::optional<int64_t> stride = std::nullopt, int64_t padding = 0)
      : kernel_size(kernel_size), stride(stride.value_or(kernel_size)), padding(padding) {}
  Tensor forward(Tensor x, Tensor indices) override {
    return functional::max_unpool1d(x, indices, kernel_size, stride, padding);
  }
  std::string extra_repr() const override {
    return internal::str("kernel_size=(", kernel_size, ",), stride=(", stride, ",), padding=(", padding, ",)");
  }
  int64_t kernel_size, stride, padding;
};

}  // namespace nabla::nn
