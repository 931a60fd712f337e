#include "nn/pooling.h"

#include "nn/functional.h"

namespace nabla::nn {

namespace {
// 2 for (2, 2), (2, 3) otherwise: PyTorch prints what it was given; square arguments are the usual.
std::string pair_repr(const ExpandingArray<2>& a) { return a[0] == a[1] ? std::to_string(a[0]) : repr_tuple(a.values); }
void check_input(const Tensor& x, const char* op) {
  NABLA_CHECK(ShapeError, x.dim() == 3 || x.dim() == 4, op, ": expected input (N, C, H, W) or (C, H, W), got ",
              x.sizes());
}
}  // namespace

MaxPool2d::MaxPool2d(ExpandingArray<2> k, MaxPool2dOptions o)
    : kernel_size(k), stride(o.stride.value_or(k)), options(o) {}

Tensor MaxPool2d::forward(Tensor x) {
  check_input(x, "MaxPool2d");
  return F::max_pool2d(x, kernel_size, stride, options.padding, options.dilation, options.ceil_mode);
}

std::string MaxPool2d::extra_repr() const {
  return "kernel_size=" + pair_repr(kernel_size) + ", stride=" + pair_repr(stride) +
         ", padding=" + pair_repr(options.padding) + ", dilation=" + pair_repr(options.dilation) +
         ", ceil_mode=" + repr_bool(options.ceil_mode);
}

AvgPool2d::AvgPool2d(ExpandingArray<2> k, AvgPool2dOptions o)
    : kernel_size(k), stride(o.stride.value_or(k)), options(o) {}

Tensor AvgPool2d::forward(Tensor x) {
  check_input(x, "AvgPool2d");
  return F::avg_pool2d(x, kernel_size, stride, options.padding, options.ceil_mode, options.count_include_pad);
}

std::string AvgPool2d::extra_repr() const {
  return "kernel_size=" + pair_repr(kernel_size) + ", stride=" + pair_repr(stride) +
         ", padding=" + pair_repr(options.padding);
}

Tensor AdaptiveAvgPool2d::forward(Tensor x) {
  check_input(x, "AdaptiveAvgPool2d");
  return F::adaptive_avg_pool2d(x, output_size);
}

std::string AdaptiveAvgPool2d::extra_repr() const { return "output_size=" + pair_repr(output_size); }

Tensor AdaptiveMaxPool2d::forward(Tensor x) {
  check_input(x, "AdaptiveMaxPool2d");
  return F::adaptive_max_pool2d(x, output_size);
}

std::string AdaptiveMaxPool2d::extra_repr() const { return "output_size=" + pair_repr(output_size); }

MaxPool1d::MaxPool1d(int64_t k, MaxPool1dOptions o) : kernel_size(k), stride(o.stride.value_or(k)), options(o) {}

Tensor MaxPool1d::forward(Tensor x) {
  return F::max_pool1d(x, kernel_size, stride, options.padding, options.dilation, options.ceil_mode);
}

std::string MaxPool1d::extra_repr() const {
  return "kernel_size=" + std::to_string(kernel_size) + ", stride=" + std::to_string(stride) +
         ", padding=" + std::to_string(options.padding) + ", dilation=" + std::to_string(options.dilation) +
         ", ceil_mode=" + repr_bool(options.ceil_mode);
}

AvgPool1d::AvgPool1d(int64_t k, AvgPool1dOptions o) : kernel_size(k), stride(o.stride.value_or(k)), options(o) {}

Tensor AvgPool1d::forward(Tensor x) {
  return F::avg_pool1d(x, kernel_size, stride, options.padding, options.ceil_mode, options.count_include_pad);
}

// PyTorch prints AvgPool1d's sizes as 1-tuples.
std::string AvgPool1d::extra_repr() const {
  return "kernel_size=(" + std::to_string(kernel_size) + ",), stride=(" + std::to_string(stride) + ",), padding=(" +
         std::to_string(options.padding) + ",)";
}

Tensor AdaptiveAvgPool1d::forward(Tensor x) { return F::adaptive_avg_pool1d(x, output_size); }

Tensor AdaptiveMaxPool1d::forward(Tensor x) { return F::adaptive_max_pool1d(x, output_size); }

}  // namespace nabla::nn
