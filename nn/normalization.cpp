#include "nn/normalization.h"

#include "core/graph.h"
#include "nn/functional.h"
#include "nn/init.h"

namespace nabla::nn {

// ---- BatchNorm ------------------------------------------------------------------------------------

BatchNorm::BatchNorm(int64_t n, BatchNormOptions o, const char* kind) : Module(kind), num_features(n), options(o) {
  NABLA_CHECK(ValueError, n > 0, kind, ": num_features must be positive, got ", n);
  if (o.momentum) NABLA_CHECK(ValueError, *o.momentum >= 0 && *o.momentum <= 1, kind, ": momentum must be in [0, 1]");
  if (o.affine) {
    weight = register_parameter("weight", empty({n}));
    bias = register_parameter("bias", empty({n}));
  }
  if (o.track_running_stats) {
    running_mean = register_buffer("running_mean", zeros({n}));
    running_var = register_buffer("running_var", ones({n}));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, dtype(kInt64)));
  }
  reset_parameters();
}

BatchNorm::BatchNorm(const BatchNorm& o, const char* kind)
    : Module(kind), num_features(o.num_features), options(o.options) {
  if (o.weight.defined()) weight = register_parameter("weight", o.weight, o.weight.requires_grad());
  if (o.bias.defined()) bias = register_parameter("bias", o.bias, o.bias.requires_grad());
  if (o.running_mean.defined()) running_mean = register_buffer("running_mean", o.running_mean);
  if (o.running_var.defined()) running_var = register_buffer("running_var", o.running_var);
  if (o.num_batches_tracked.defined())
    num_batches_tracked = register_buffer("num_batches_tracked", o.num_batches_tracked);
  training_ = o.is_training();
}

double BatchNorm::running_stats_factor() {
  if (!training_ || !options.track_running_stats) return 0.0;
  // The mirror is current unless something else wrote the buffer since (load_state_dict, copy_,
  // another module sharing it) or replaced it (to(device), assignment).
  const bool mirrored = counted_.defined() && counted_.data_ptr() == num_batches_tracked.data_ptr() &&
                        counted_version_ == num_batches_tracked.version();
  {
    autograd::NoGradGuard ng;
    num_batches_tracked.add_(1);
  }
  if (options.momentum) return *options.momentum;
  if (mirrored) {
    ++count_;
  } else {
    counted_ = num_batches_tracked.detach();  // shares the storage, not the TensorImpl (which to() and
                                              // load_state_dict may point at another storage)
    count_ = num_batches_tracked.item<int64_t>();
  }
  counted_version_ = num_batches_tracked.version();
  return 1.0 / static_cast<double>(count_);
}

void BatchNorm::reset_running_stats() {
  if (!options.track_running_stats) return;
  init::zeros_(running_mean);
  init::ones_(running_var);
  autograd::NoGradGuard ng;
  num_batches_tracked.zero_();
}

void BatchNorm::reset_parameters() {
  reset_running_stats();
  if (options.affine) {
    init::ones_(weight);
    init::zeros_(bias);
  }
}

Tensor BatchNorm::forward(Tensor x) {
  check_input(x);
  NABLA_CHECK(ShapeError, x.size(1) == num_features, name(), ": expected ", num_features,
              " channels (dim 1), got input of shape ", x.sizes());
  if (delegate) return delegate(x);
  const double factor = running_stats_factor();
  // Batch statistics in training, and in evaluation too when no running statistics are kept.
  bool use_batch_stats = training_ || !options.track_running_stats;
  bool pass_running = !training_ || options.track_running_stats;
  return F::batch_norm(x, pass_running ? running_mean : Tensor(), pass_running ? running_var : Tensor(), weight, bias,
                       use_batch_stats, factor, options.eps);
}

std::string BatchNorm::extra_repr() const {
  return internal::str(num_features, ", eps=", repr_double(options.eps),
                       ", momentum=", options.momentum ? repr_double(*options.momentum) : std::string("None"),
                       ", affine=", repr_bool(options.affine),
                       ", track_running_stats=", repr_bool(options.track_running_stats));
}

BatchNorm1d::BatchNorm1d(int64_t n, BatchNormOptions o) : BatchNorm(n, o, "BatchNorm1d") {}
void BatchNorm1d::check_input(const Tensor& x) const {
  NABLA_CHECK(ShapeError, x.dim() == 2 || x.dim() == 3, "BatchNorm1d: expected input (N, C) or (N, C, L), got ",
              x.sizes());
}

BatchNorm2d::BatchNorm2d(int64_t n, BatchNormOptions o) : BatchNorm(n, o, "BatchNorm2d") {}
void BatchNorm2d::check_input(const Tensor& x) const {
  NABLA_CHECK(ShapeError, x.dim() == 4, "BatchNorm2d: expected input (N, C, H, W), got ", x.sizes());
}

// ---- LayerNorm ------------------------------------------------------------------------------------

LayerNorm::LayerNorm(std::vector<int64_t> shape, LayerNormOptions o) : normalized_shape(std::move(shape)), options(o) {
  NABLA_CHECK(ValueError, !normalized_shape.empty(), "LayerNorm: normalized_shape must not be empty");
  if (o.elementwise_affine) {
    weight = register_parameter("weight", nabla::empty(normalized_shape));
    if (o.bias) bias = register_parameter("bias", nabla::empty(normalized_shape));
  }
  reset_parameters();
}

void LayerNorm::reset_parameters() {
  if (weight.defined()) init::ones_(weight);
  if (bias.defined()) init::zeros_(bias);
}

Tensor LayerNorm::forward(Tensor x) { return F::layer_norm(x, normalized_shape, weight, bias, options.eps); }

namespace {
// A normalized_shape as Python prints the tuple: "(4,)", "(3, 4)".
std::string shape_tuple(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}
}  // namespace

std::string LayerNorm::extra_repr() const {
  return shape_tuple(normalized_shape) + ", eps=" + repr_double(options.eps) +
         ", elementwise_affine=" + repr_bool(options.elementwise_affine);
}

// ---- RMSNorm --------------------------------------------------------------------------------------

RMSNorm::RMSNorm(std::vector<int64_t> shape, RMSNormOptions o) : normalized_shape(std::move(shape)), options(o) {
  NABLA_CHECK(ValueError, !normalized_shape.empty(), "RMSNorm: normalized_shape must not be empty");
  NABLA_CHECK(ValueError, !o.eps || *o.eps >= 0, "RMSNorm: eps must not be negative, got ", o.eps.value_or(0));
  if (o.elementwise_affine) weight = register_parameter("weight", nabla::empty(normalized_shape));
  reset_parameters();
}

void RMSNorm::reset_parameters() {
  if (weight.defined()) init::ones_(weight);
}

Tensor RMSNorm::forward(Tensor x) { return F::rms_norm(x, normalized_shape, weight, options.eps); }

std::string RMSNorm::extra_repr() const {
  return shape_tuple(normalized_shape) + ", eps=" + (options.eps ? repr_double(*options.eps) : std::string("None")) +
         ", elementwise_affine=" + repr_bool(options.elementwise_affine);
}

// ---- GroupNorm ------------------------------------------------------------------------------------

GroupNorm::GroupNorm(int64_t groups, int64_t channels, GroupNormOptions o)
    : num_groups(groups), num_channels(channels), options(o) {
  NABLA_CHECK(ValueError, groups > 0 && channels % groups == 0, "GroupNorm: num_channels (", channels,
              ") must be divisible by num_groups (", groups, ")");
  if (o.affine) {
    weight = register_parameter("weight", empty({channels}));
    bias = register_parameter("bias", empty({channels}));
  }
  reset_parameters();
}

void GroupNorm::reset_parameters() {
  if (weight.defined()) init::ones_(weight);
  if (bias.defined()) init::zeros_(bias);
}

Tensor GroupNorm::forward(Tensor x) {
  NABLA_CHECK(ShapeError, x.dim() >= 2 && x.size(1) == num_channels, "GroupNorm: expected input (N, ", num_channels,
              ", *), got ", x.sizes());
  return F::group_norm(x, num_groups, weight, bias, options.eps);
}

// ---- InstanceNorm ---------------------------------------------------------------------------------

InstanceNorm::InstanceNorm(int64_t features, InstanceNormOptions o, int64_t spatial_dims, const char* kind)
    : Module(kind), num_features(features), options(o), spatial_dims_(spatial_dims) {
  NABLA_CHECK(ValueError, features > 0, kind, ": num_features must be positive, got ", features);
  if (o.affine) {
    weight = register_parameter("weight", empty({features}));
    bias = register_parameter("bias", empty({features}));
  }
  if (o.track_running_stats) {
    running_mean = register_buffer("running_mean", zeros({features}));
    running_var = register_buffer("running_var", ones({features}));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, kInt64));
  }
  reset_parameters();
}

void InstanceNorm::reset_parameters() {
  if (weight.defined()) init::ones_(weight);
  if (bias.defined()) init::zeros_(bias);
  reset_running_stats();
}

void InstanceNorm::reset_running_stats() {
  if (!running_mean.defined()) return;
  autograd::NoGradGuard ng;
  running_mean.zero_();
  running_var.fill_(1.0);
  num_batches_tracked.zero_();
}

Tensor InstanceNorm::forward(Tensor x) {
  const int64_t d = spatial_dims_;
  NABLA_CHECK(ShapeError, x.dim() == d + 1 || x.dim() == d + 2, name(), ": expected input of ", d + 2,
              " dims (N, C, *) or ", d + 1, " (C, *), got ", x.sizes());
  const bool unbatched = x.dim() == d + 1;
  Tensor in = unbatched ? x.unsqueeze(0) : x;
  NABLA_CHECK(ShapeError, in.size(1) == num_features, name(), ": expected ", num_features,
              " channels, got input of shape ", x.sizes());
  // num_batches_tracked stays 0, as in PyTorch's InstanceNorm (the momentum is always a number).
  const bool use_input_stats = is_training() || !options.track_running_stats;
  Tensor y = F::instance_norm(in, options.track_running_stats ? running_mean : Tensor(),
                              options.track_running_stats ? running_var : Tensor(), weight, bias, use_input_stats,
                              options.momentum, options.eps);
  return unbatched ? y.squeeze(0) : y;
}

std::string InstanceNorm::extra_repr() const {
  return internal::str(num_features, ", eps=", repr_double(options.eps), ", momentum=", repr_double(options.momentum),
                       ", affine=", repr_bool(options.affine),
                       ", track_running_stats=", repr_bool(options.track_running_stats));
}

std::string GroupNorm::extra_repr() const {
  return internal::str(num_groups, ", ", num_channels, ", eps=", repr_double(options.eps),
                       ", affine=", repr_bool(options.affine));
}

}  // namespace nabla::nn
