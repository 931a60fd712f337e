// BatchNorm1d, BatchNorm2d, LayerNorm, GroupNorm and InstanceNorm1d/2d/3d.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "module.h"

namespace nabla::nn {

struct BatchNormOptions {
  double eps = 1e-5;
  // Weight of the new batch statistic in the running averages; nullopt: a cumulative average
  // (1 / num_batches_tracked), as PyTorch's momentum=None.
  std::optional<double> momentum = 0.1;
  bool affine = true;               // learnable weight (ones) and bias (zeros)
  bool track_running_stats = true;  // buffers running_mean (zeros), running_var (ones), num_batches_tracked
};

// Training: normalizes with the batch statistics over (N, *) per channel and updates the running
// statistics (under no-grad). Evaluation: normalizes with the running statistics.
class BatchNorm : public Module {
 public:
  BatchNorm(int64_t num_features, BatchNormOptions options, const char* kind);
  Tensor forward(Tensor x) override;
  void reset_parameters() override;
  void reset_running_stats();
  std::string extra_repr() const override;

  int64_t num_features;
  BatchNormOptions options;
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;
  // When set, forward checks its input and then returns delegate(x) instead of normalizing it
  // itself. nn::SyncBatchNorm::convert_sync_batchnorm (nabla::distributed) points a replaced
  // BatchNorm at the SyncBatchNorm that took its place in the module tree, so that a parent still
  // holding the BatchNorm (a typed member such as ResNet's bn1, a Sequential's list) gets the
  // synchronized statistics, whether it calls (*bn)(x) or bn->forward(x).
  std::function<Tensor(const Tensor&)> delegate;

 protected:
  // A BatchNorm named `kind` holding `other`'s parameter and buffer tensors (shared, not copied),
  // options and mode (SyncBatchNorm's conversion).
  BatchNorm(const BatchNorm& other, const char* kind);
  // Counts a training step in num_batches_tracked and returns the running statistics' update
  // factor (momentum, or 1 / num_batches_tracked for momentum None); 0 when nothing is updated.
  double running_stats_factor();
  virtual void check_input(const Tensor& x) const = 0;

 private:
  // momentum None: a host mirror of num_batches_tracked, so a CUDA buffer is not read back (one
  // synchronization) at every training step. Trusted while the buffer is the tensor it was taken
  // from (counted_ keeps that storage alive) at the version this module left it.
  Tensor counted_;
  uint32_t counted_version_ = 0;
  int64_t count_ = 0;
};

// x: (N, C) or (N, C, L).
class BatchNorm1d : public BatchNorm {
 public:
  explicit BatchNorm1d(int64_t num_features, BatchNormOptions options = {});

 protected:
  void check_input(const Tensor& x) const override;
};

// x: (N, C, H, W).
class BatchNorm2d : public BatchNorm {
 public:
  explicit BatchNorm2d(int64_t num_features, BatchNormOptions options = {});

 protected:
  void check_input(const Tensor& x) const override;
};

struct LayerNormOptions {
  double eps = 1e-5;
  bool elementwise_affine = true;  // weight (ones) and bias (zeros) of normalized_shape
  bool bias = true;
};

// Normalizes over the trailing dims normalized_shape, per sample.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(std::vector<int64_t> normalized_shape, LayerNormOptions options = {});
  Tensor forward(Tensor x) override;
  void reset_parameters() override;
  std::string extra_repr() const override;
  std::vector<int64_t> normalized_shape;
  LayerNormOptions options;
  Tensor weight, bias;
};

struct RMSNormOptions {
  std::optional<double> eps{};     // default: the input dtype's machine epsilon (F::rms_norm)
  bool elementwise_affine = true;  // a weight (ones) of normalized_shape
};

// Root-mean-square normalization over the trailing dims normalized_shape, per sample, as
// torch.nn.RMSNorm: y = x / sqrt(mean(x^2) + eps) * weight (F::rms_norm).
class RMSNorm : public Module {
 public:
  explicit RMSNorm(std::vector<int64_t> normalized_shape, RMSNormOptions options = {});
  Tensor forward(Tensor x) override;
  void reset_parameters() override;
  std::string extra_repr() const override;
  std::vector<int64_t> normalized_shape;
  RMSNormOptions options;
  Tensor weight;
};

struct GroupNormOptions {
  double eps = 1e-5;
  bool affine = true;  // per-channel weight (ones) and bias (zeros)
};

// x: (N, C, *); statistics per sample and group of C / num_groups channels.
class GroupNorm : public Module {
 public:
  GroupNorm(int64_t num_groups, int64_t num_channels, GroupNormOptions options = {});
  Tensor forward(Tensor x) override;
  void reset_parameters() override;
  std::string extra_repr() const override;
  int64_t num_groups, num_channels;
  GroupNormOptions options;
  Tensor weight, bias;
};

struct InstanceNormOptions {
  double eps = 1e-5;
  double momentum = 0.1;
  bool affine = false;               // learnable per-channel weight (ones) and bias (zeros)
  bool track_running_stats = false;  // buffers running_mean, running_var, num_batches_tracked
};

// Normalizes each (sample, channel) over its spatial dims (InstanceNorm1d: (N, C, L) or (C, L);
// 2d: (N, C, H, W) or (C, H, W); 3d: (N, C, D, H, W) or (C, D, H, W)). With track_running_stats,
// training updates the running statistics and evaluation normalizes with them.
class InstanceNorm : public Module {
 public:
  InstanceNorm(int64_t num_features, InstanceNormOptions options, int64_t spatial_dims, const char* kind);
  Tensor forward(Tensor x) override;
  void reset_parameters() override;
  void reset_running_stats();
  std::string extra_repr() const override;

  int64_t num_features;
  InstanceNormOptions options;
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;

 private:
  int64_t spatial_dims_;
};

class InstanceNorm1d : public InstanceNorm {
 public:
  explicit InstanceNorm1d(int64_t num_features, InstanceNormOptions options = {})
      : InstanceNorm(num_features, options, 1, "InstanceNorm1d") {}
};
class InstanceNorm2d : public InstanceNorm {
 public:
  explicit InstanceNorm2d(int64_t num_features, InstanceNormOptions options = {})
      : InstanceNorm(num_features, options, 2, "InstanceNorm2d") {}
};
class InstanceNorm3d : public InstanceNorm {
 public:
  explicit InstanceNorm3d(int64_t num_features, InstanceNormOptions options = {})
      : InstanceNorm(num_features, options, 3, "InstanceNorm3d") {}
};

}  // namespace nabla::nn
