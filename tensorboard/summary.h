// The summaries TensorBoard's plugins read, computed from tensors as torch.utils.tensorboard
// computes them, and encoded as Summary.Value messages (tensorflow/core/framework/summary.proto):
//
//   Summary { repeated Value value = 1; }
//   Value { string tag = 1; SummaryMetadata metadata = 9;
//           oneof value { float simple_value = 2; Image image = 4; HistogramProto histo = 5; TensorProto tensor = 8; } }
//   SummaryMetadata { PluginData plugin_data = 1 { string plugin_name = 1; bytes content = 2; } }
//
// Each *_value function appends one Value to a Summary being written by `w`.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "../core/tensor.h"
#include "proto.h"

namespace nabla::tensorboard {

// ---- scalars ------------------------------------------------------------------------------------
void scalar_value(ProtoWriter& w, std::string_view tag, float value);

// ---- histograms ---------------------------------------------------------------------------------
// HistogramProto { double min = 1, max = 2, num = 3, sum = 4, sum_squares = 5;
//                  repeated double bucket_limit = 6, bucket = 7; }  (bucket i: (limit[i-1], limit[i]])
struct Histogram {
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> bucket_limit, bucket;
};

// PyTorch's default bins ("tensorflow"): -1e20 ... -1e-12, 0, 1e-12, ... 1e20, each edge 1.1 times
// the last (1549 edges), the same doubles as SummaryWriter.default_bins.
const std::vector<double>& tensorflow_bins();

// What torch.utils.tensorboard.summary.make_histogram computes: counts per bin as numpy.histogram
// (bin i holds [edge i, edge i+1), the last bin also its right edge; values outside the edges are
// left out of the counts but not out of min/max/num/sum), optionally merged down to max_bins, then
// cut to the bins from the first to the last non-empty one, with one empty bin in front (TensorBoard
// reads only right edges). Throws ValueError for an empty tensor or when no value lies in the bins.
Histogram make_histogram(const Tensor& values, std::span<const double> bins,
                         std::optional<int64_t> max_bins = std::nullopt, const char* op = "add_histogram");
void histogram_value(ProtoWriter& w, std::string_view tag, const Histogram& h);

// ---- images -------------------------------------------------------------------------------------
// An image as torch.utils.tensorboard's convert_to_HWC and make_grid lay it out: u8 (H, W, C) with C
// 3 (RGB; gray images are repeated in three channels) or 4 (RGBA). dataformats names the
// dimensions ("CHW", "HWC", "HW", "NCHW", "NHWC", ...); a batch becomes a grid of 8 images per row.
// u8 tensors are taken as they are; any other dtype as values in [0, 1], scaled by 255, clipped
// and truncated to u8 (as PyTorch).
Tensor image_hwc(const Tensor& image, std::string_view dataformats, const char* op = "add_image");
// The same grid with `ncols` images per row (the embedding projector's sprite), from (N, C, H, W).
Tensor image_grid(const Tensor& images_nchw, int64_t ncols, const char* op);
// Summary.Image { int32 height = 1, width = 2, colorspace = 3; bytes encoded_image_string = 4; } of u8
// (H, W, C), PNG-encoded.
void image_value(ProtoWriter& w, std::string_view tag, const Tensor& hwc);

// ---- text ---------------------------------------------------------------------------------------
// The text plugin's summary: tag "<tag>/text_summary", a DT_STRING tensor of shape [1].
void text_value(ProtoWriter& w, std::string_view tag, std::string_view text);

// ---- precision-recall curves --------------------------------------------------------------------
// torch.utils.tensorboard.summary.compute_curve: rows tp, fp, tn, fn, precision, recall over
// min(num_thresholds, 127) thresholds (row-major, 6 rows). labels are 0/1 (any dtype), predictions
// in [0, 1] (a prediction whose bucket floor(p * (n - 1)) is outside 0 .. n-1 counts nowhere),
// weights optional (one per label).
std::vector<double> pr_curve_data(const Tensor& labels, const Tensor& predictions, int64_t num_thresholds,
                                  const Tensor& weights = {}, const char* op = "add_pr_curve");
void pr_curve_value(ProtoWriter& w, std::string_view tag, std::span<const double> data, int64_t num_thresholds);

// ---- hyperparameters ----------------------------------------------------------------------------
// A hyperparameter's value: a number, a string or a bool.
class HParam {
 public:
  HParam(double v) : v_(v) {}
  HParam(int v) : v_(static_cast<double>(v)) {}
  HParam(int64_t v) : v_(static_cast<double>(v)) {}
  HParam(bool v) : v_(v) {}
  HParam(const char* v) : v_(std::string(v)) {}
  HParam(std::string v) : v_(std::move(v)) {}
  const std::variant<double, std::string, bool>& value() const { return v_; }

 private:
  std::variant<double, std::string, bool> v_;
};
using HParams = std::vector<std::pair<std::string, HParam>>;  // in the order given
using Metrics = std::vector<std::pair<std::string, double>>;
using HParamDomains = std::vector<std::pair<std::string, std::vector<HParam>>>;

inline constexpr std::string_view kHParamsExperimentTag = "_hparams_/experiment",
                                  kHParamsSessionStartTag = "_hparams_/session_start_info",
                                  kHParamsSessionEndTag = "_hparams_/session_end_info";
// The hparams plugin's three summaries, as torch.utils.tensorboard.summary.hparams makes them:
// the experiment (each hparam's name, type and discrete domain; the metric tags), the session start
// (the values) and the session end (STATUS_SUCCESS).
void hparams_experiment_value(ProtoWriter& w, const HParams& hparams, const Metrics& metrics,
                              const HParamDomains& domains);
void hparams_session_start_value(ProtoWriter& w, const HParams& hparams);
void hparams_session_end_value(ProtoWriter& w);

}  // namespace nabla::tensorboard
