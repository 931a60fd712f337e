#include "tensorboard/summary.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/graph.h"
#include "core/ops.h"
#include "data/image.h"

namespace nabla::tensorboard {

namespace {

namespace value_field {
inline constexpr uint32_t tag = 1, simple_value = 2, image = 4, histo = 5, tensor = 8, metadata = 9;
}
// TensorProto { DataType dtype = 1; TensorShapeProto tensor_shape = 2; repeated float float_val = 5;
//               repeated bytes string_val = 8; }  TensorShapeProto { repeated Dim dim = 2 { int64 size = 1; } }
inline constexpr int64_t kDtFloat = 1, kDtString = 7;

void tensor_shape(ProtoWriter& w, std::initializer_list<int64_t> dims) {
  w.message(2, [&] {
    for (int64_t d : dims) w.message(2, [&] { w.int64(1, d); });
  });
}

// SummaryMetadata { PluginData plugin_data = 1 { string plugin_name = 1; bytes content = 2; } }
void plugin_metadata(ProtoWriter& w, std::string_view plugin, std::string_view content) {
  w.message(value_field::metadata, [&] {
    w.message(1, [&] {
      w.str(1, plugin);
      w.str(2, content);
    });
  });
}

// The tensor's values as contiguous doubles on the CPU.
Tensor as_f64(const Tensor& t) {
  autograd::NoGradGuard ng;
  return t.cpu().to(kFloat64).contiguous();
}

}  // namespace

// ---- scalars ------------------------------------------------------------------------------------

void scalar_value(ProtoWriter& w, std::string_view tag, float value) {
  w.message(1, [&] {
    w.str(value_field::tag, tag);
    w.f32_always(value_field::simple_value, value);
  });
}

// ---- histograms ---------------------------------------------------------------------------------

const std::vector<double>& tensorflow_bins() {
  static const std::vector<double> bins = [] {
    std::vector<double> pos;
    for (double v = 1e-12; v < 1e20; v *= 1.1) pos.push_back(v);
    std::vector<double> b;
    for (auto it = pos.rbegin(); it != pos.rend(); ++it) b.push_back(-*it);
    b.push_back(0);
    b.insert(b.end(), pos.begin(), pos.end());
    return b;
  }();
  return bins;
}

Histogram make_histogram(const Tensor& values, std::span<const double> bins, std::optional<int64_t> max_bins,
                         const char* op) {
  NABLA_CHECK(ValueError, values.defined() && values.numel() > 0, op, ": the tensor has no elements (shape ",
              values.defined() ? values.sizes() : Shape{}, ")");
  NABLA_CHECK(ValueError, bins.size() >= 2, op, ": need at least two bin edges, got ", bins.size());
  for (size_t i = 1; i < bins.size(); ++i)
    NABLA_CHECK(ValueError, bins[i - 1] < bins[i], op, ": bin edges must increase, got ", bins[i - 1], " then ",
                bins[i], " at ", i);
  NABLA_CHECK(ValueError, !max_bins || *max_bins >= 1, op, ": max_bins must be at least 1, got ", max_bins.value_or(0));
  Tensor v = as_f64(values);
  const double* x = v.data_ptr<double>();
  const int64_t n = v.numel();
  const size_t nb = bins.size() - 1;
  std::vector<double> counts(nb, 0.0);
  Histogram h;
  h.min = std::numeric_limits<double>::infinity();
  h.max = -h.min;
  bool nan = false;
  const double lo = bins.front(), hi = bins.back();
  // The bin of a value in [lo, hi]: [edge k, edge k+1), the last bin also holding hi. The default
  // bins are 1e-12 * 1.1^j on either side of 0, so a logarithm guesses the bin (to within one or
  // two: the edges were built by repeated multiplication) and exact comparisons settle it, 3-4
  // times faster than a binary search over the 1549 edges; other bins take the binary search.
  const bool tf_bins = bins.data() == tensorflow_bins().data();
  const size_t zero = (bins.size() - 1) / 2;  // tensorflow_bins()[zero] == 0
  const double inv_log_step = 1.0 / std::log(1.1);
  auto locate = [&](double a) -> size_t {
    if (!tf_bins) {
      size_t k = static_cast<size_t>(std::upper_bound(bins.begin(), bins.end(), a) - bins.begin()) - 1;
      return std::min(k, nb - 1);
    }
    double m = std::abs(a);
    // j: the power of 1.1 with 1e-12 * 1.1^j <= |a| < 1e-12 * 1.1^(j+1), or -1 below 1e-12.
    int64_t j = m < 1e-12 ? -1 : static_cast<int64_t>(std::floor(std::log(m * 1e12) * inv_log_step));
    int64_t g = a >= 0 ? static_cast<int64_t>(zero) + 1 + j : static_cast<int64_t>(zero) - 2 - j;
    size_t k = static_cast<size_t>(std::clamp<int64_t>(g, 0, static_cast<int64_t>(nb) - 1));
    while (k > 0 && bins[k] > a) --k;
    while (k + 1 < nb && bins[k + 1] <= a) ++k;
    return k;
  };
  for (int64_t i = 0; i < n; ++i) {
    double a = x[i];
    h.sum += a;
    h.sum_squares += a * a;
    if (std::isnan(a)) {
      nan = true;
      continue;
    }
    h.min = std::min(h.min, a);
    h.max = std::max(h.max, a);
    if (a >= lo && a <= hi) counts[locate(a)] += 1;
  }
  if (nan) h.min = h.max = std::numeric_limits<double>::quiet_NaN();  // as numpy's min and max
  h.num = static_cast<double>(n);

  std::vector<double> limits(bins.begin(), bins.end());
  if (max_bins && static_cast<int64_t>(nb) > *max_bins) {  // merge groups of `sub` bins
    size_t sub = nb / static_cast<size_t>(*max_bins);
    size_t groups = (nb + sub - 1) / sub;
    std::vector<double> merged(groups, 0.0), new_limits;
    for (size_t i = 0; i < nb; ++i) merged[i / sub] += counts[i];
    for (size_t i = 0; i + 1 < limits.size(); i += sub) new_limits.push_back(limits[i]);
    new_limits.push_back(limits.back());
    counts = std::move(merged);
    limits = std::move(new_limits);
  }
  // The first and the last non-empty bin; TensorBoard reads right edges only, so one empty bin
  // goes in front (the one before the first non-empty bin, or a new one).
  auto first = std::find_if(counts.begin(), counts.end(), [](double c) { return c > 0; });
  NABLA_CHECK(ValueError, first != counts.end(), op, ": no value lies within the bins [", lo, ", ", hi, "] (min ",
              h.min, ", max ", h.max, ")");
  size_t start = static_cast<size_t>(first - counts.begin());
  size_t last = counts.size() - 1 -
                static_cast<size_t>(std::find_if(counts.rbegin(), counts.rend(), [](double c) { return c > 0; }) -
                                    counts.rbegin());
  if (start > 0) {
    h.bucket.assign(counts.begin() + static_cast<ptrdiff_t>(start - 1),
                    counts.begin() + static_cast<ptrdiff_t>(last + 1));
  } else {
    h.bucket.push_back(0);
    h.bucket.insert(h.bucket.end(), counts.begin(), counts.begin() + static_cast<ptrdiff_t>(last + 1));
  }
  h.bucket_limit.assign(limits.begin() + static_cast<ptrdiff_t>(start),
                        limits.begin() + static_cast<ptrdiff_t>(last + 2));
  return h;
}

void histogram_value(ProtoWriter& w, std::string_view tag, const Histogram& h) {
  w.message(1, [&] {
    w.str(value_field::tag, tag);
    w.message(value_field::histo, [&] {
      w.f64(1, h.min);
      w.f64(2, h.max);
      w.f64(3, h.num);
      w.f64(4, h.sum);
      w.f64(5, h.sum_squares);
      w.packed_f64(6, h.bucket_limit);
      w.packed_f64(7, h.bucket);
    });
  });
}

// ---- images -------------------------------------------------------------------------------------

namespace {

// The tensor as u8 in the dimension order `order` (a permutation of the letters of `fmt`).
Tensor u8_in_order(const Tensor& image, const std::string& fmt, std::string_view order) {
  autograd::NoGradGuard ng;
  std::vector<int64_t> perm;
  for (char c : order) perm.push_back(static_cast<int64_t>(fmt.find(c)));
  Tensor x = image.cpu().permute(perm).contiguous();
  if (x.dtype() == kUInt8) return x;
  Tensor f = x.to(kFloat32).contiguous();
  Tensor out = empty(f.sizes(), kUInt8);
  const float* src = f.data_ptr<float>();
  uint8_t* dst = out.data_ptr<uint8_t>();
  for (int64_t i = 0, n = f.numel(); i < n; ++i) {
    float v = src[i] * 255.0f;  // (x * 255).clip(0, 255).astype(uint8): truncation
    dst[i] = std::isnan(v) ? 0 : static_cast<uint8_t>(std::clamp(v, 0.0f, 255.0f));
  }
  return out;
}

// A grid of ncols images per row from u8 (N, C, H, W) with C 1, 3 or 4, as u8 (H * rows, W * ncols, C'),
// C' = 3 for gray.
Tensor grid_hwc(const Tensor& nchw, int64_t ncols) {
  const int64_t n = nchw.size(0), c = nchw.size(1), h = nchw.size(2), wd = nchw.size(3);
  const int64_t oc = c == 1 ? 3 : c;
  ncols = std::min(n, ncols);
  const int64_t nrows = (n + ncols - 1) / ncols;
  Tensor out = zeros({h * nrows, wd * ncols, oc}, kUInt8);
  const uint8_t* src = nchw.data_ptr<uint8_t>();
  uint8_t* dst = out.data_ptr<uint8_t>();
  const int64_t row_stride = wd * ncols * oc;
  for (int64_t i = 0; i < n; ++i) {
    int64_t gy = i / ncols, gx = i % ncols;
    for (int64_t ch = 0; ch < oc; ++ch) {
      const uint8_t* plane = src + (i * c + (c == 1 ? 0 : ch)) * h * wd;
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < wd; ++x) dst[(gy * h + y) * row_stride + (gx * wd + x) * oc + ch] = plane[y * wd + x];
    }
  }
  return out;
}

std::string upper(std::string_view s) {
  std::string u(s);
  for (char& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return u;
}

}  // namespace

Tensor image_hwc(const Tensor& image, std::string_view dataformats, const char* op) {
  NABLA_CHECK(ValueError, image.defined(), op, ": the image tensor is undefined");
  std::string fmt = upper(dataformats);
  bool letters_ok = !fmt.empty() && fmt.find_first_not_of("NCHW") == std::string::npos;
  for (size_t i = 0; letters_ok && i < fmt.size(); ++i) letters_ok = fmt.find(fmt[i], i + 1) == std::string::npos;
  NABLA_CHECK(ValueError, letters_ok && fmt.find('H') != std::string::npos && fmt.find('W') != std::string::npos, op,
              ": dataformats must name H, W and optionally C and N once each (e.g. CHW, HWC, HW, NCHW), got '",
              std::string(dataformats), "'");
  NABLA_CHECK(ShapeError, static_cast<int64_t>(fmt.size()) == image.dim(), op, ": dataformats '", fmt, "' has ",
              fmt.size(), " dimensions but the image has shape ", image.sizes());
  NABLA_CHECK(ValueError, image.numel() > 0, op, ": the image is empty (shape ", image.sizes(), ")");
  const bool has_c = fmt.find('C') != std::string::npos;
  if (has_c) {
    int64_t c = image.size(static_cast<int64_t>(fmt.find('C')));
    NABLA_CHECK(ShapeError, c == 1 || c == 3 || c == 4, op, ": an image has 1, 3 or 4 channels (C), got ", c,
                " in shape ", image.sizes(), " (", fmt, ")");
  }
  if (fmt.size() == 4) return grid_hwc(u8_in_order(image, fmt, "NCHW"), 8);
  if (fmt.size() == 3 && !has_c) {  // NHW: a batch of gray images
    Tensor x = u8_in_order(image, fmt, "NHW");
    return grid_hwc(x.unsqueeze(1).contiguous(), 8);
  }
  if (fmt.size() == 3) {
    Tensor x = u8_in_order(image, fmt, "HWC");
    if (x.size(2) != 1) return x;
    return grid_hwc(x.permute({2, 0, 1}).unsqueeze(0).contiguous(), 1);
  }
  Tensor x = u8_in_order(image, fmt, "HW");
  return grid_hwc(x.unsqueeze(0).unsqueeze(0).contiguous(), 1);
}

Tensor image_grid(const Tensor& images_nchw, int64_t ncols, const char* op) {
  NABLA_CHECK(ShapeError, images_nchw.defined() && images_nchw.dim() == 4, op,
              ": expected images (N, C, H, W), got shape ", images_nchw.defined() ? images_nchw.sizes() : Shape{});
  NABLA_CHECK(ValueError, images_nchw.numel() > 0, op, ": the images are empty (shape ", images_nchw.sizes(), ")");
  int64_t c = images_nchw.size(1);
  NABLA_CHECK(ShapeError, c == 1 || c == 3 || c == 4, op, ": an image has 1, 3 or 4 channels (C), got ", c,
              " in shape ", images_nchw.sizes());
  return grid_hwc(u8_in_order(images_nchw, "NCHW", "NCHW"), std::max<int64_t>(ncols, 1));
}

void image_value(ProtoWriter& w, std::string_view tag, const Tensor& hwc) {
  std::string png = data::encode_image(hwc, "png");
  w.message(1, [&] {
    w.str(value_field::tag, tag);
    w.message(value_field::image, [&] {
      w.int64(1, hwc.size(0));
      w.int64(2, hwc.size(1));
      w.int64(3, hwc.size(2));
      w.str(4, png);
    });
  });
}

// ---- text ---------------------------------------------------------------------------------------

void text_value(ProtoWriter& w, std::string_view tag, std::string_view text) {
  w.message(1, [&] {
    w.str(value_field::tag, std::string(tag) + "/text_summary");
    w.message(value_field::tensor, [&] {
      w.int64(1, kDtString);
      tensor_shape(w, {1});
      w.str_always(8, text);
    });
    plugin_metadata(w, "text", "");  // TextPluginData { int32 version = 1; } at version 0: no bytes
  });
}

// ---- precision-recall curves --------------------------------------------------------------------

std::vector<double> pr_curve_data(const Tensor& labels, const Tensor& predictions, int64_t num_thresholds,
                                  const Tensor& weights, const char* op) {
  NABLA_CHECK(ValueError, labels.defined() && predictions.defined(), op, ": labels and predictions must be defined");
  NABLA_CHECK(ShapeError, labels.numel() == predictions.numel(), op, ": labels ", labels.sizes(), " and predictions ",
              predictions.sizes(), " have different numbers of elements");
  NABLA_CHECK(ShapeError, !weights.defined() || weights.numel() == labels.numel(), op, ": weights ",
              weights.defined() ? weights.sizes() : Shape{}, " must have one value per label (labels ", labels.sizes(),
              ")");
  NABLA_CHECK(ValueError, num_thresholds >= 2, op, ": num_thresholds must be at least 2, got ", num_thresholds);
  const int64_t nt = std::min<int64_t>(num_thresholds, 127);
  Tensor l = as_f64(labels), wt = weights.defined() ? as_f64(weights) : Tensor();
  const double* lp = l.data_ptr<double>();
  const double* wp = wt.defined() ? wt.data_ptr<double>() : nullptr;
  // The bucket index floor(prediction * (nt - 1)) in the predictions' own precision, as numpy.
  std::vector<int64_t> bucket(static_cast<size_t>(labels.numel()));
  {
    autograd::NoGradGuard ng;
    Tensor p = predictions.cpu().contiguous();
    auto index = [&](double v) {
      double f = std::floor(v);
      return std::isfinite(f) && f >= -1 && f <= static_cast<double>(nt) ? static_cast<int64_t>(f) : int64_t{-1};
    };
    if (p.dtype() == kFloat64) {
      const double* q = p.data_ptr<double>();
      for (size_t i = 0; i < bucket.size(); ++i) bucket[i] = index(q[i] * static_cast<double>(nt - 1));
    } else {
      Tensor f = p.to(kFloat32).contiguous();
      const float* q = f.data_ptr<float>();
      for (size_t i = 0; i < bucket.size(); ++i) bucket[i] = index(q[i] * static_cast<float>(nt - 1));
    }
  }
  std::vector<double> tp(static_cast<size_t>(nt), 0.0), fp(static_cast<size_t>(nt), 0.0);
  for (size_t i = 0; i < bucket.size(); ++i) {
    if (bucket[i] < 0 || bucket[i] >= nt) continue;
    double w = wp ? wp[i] : 1.0;
    tp[static_cast<size_t>(bucket[i])] += lp[i] * w;
    fp[static_cast<size_t>(bucket[i])] += (1.0 - lp[i]) * w;
  }
  for (int64_t k = nt - 2; k >= 0; --k) {  // reverse cumulative sums: at or above threshold k
    tp[static_cast<size_t>(k)] += tp[static_cast<size_t>(k + 1)];
    fp[static_cast<size_t>(k)] += fp[static_cast<size_t>(k + 1)];
  }
  std::vector<double> out(static_cast<size_t>(6 * nt));
  constexpr double kMinCount = 1e-7;
  for (int64_t k = 0; k < nt; ++k) {
    size_t i = static_cast<size_t>(k);
    double tn = fp[0] - fp[i], fn = tp[0] - tp[i];
    out[i] = tp[i];
    out[static_cast<size_t>(nt) + i] = fp[i];
    out[static_cast<size_t>(2 * nt) + i] = tn;
    out[static_cast<size_t>(3 * nt) + i] = fn;
    out[static_cast<size_t>(4 * nt) + i] = tp[i] / std::max(kMinCount, tp[i] + fp[i]);
    out[static_cast<size_t>(5 * nt) + i] = tp[i] / std::max(kMinCount, tp[i] + fn);
  }
  return out;
}

void pr_curve_value(ProtoWriter& w, std::string_view tag, std::span<const double> data, int64_t num_thresholds) {
  std::vector<float> f(data.begin(), data.end());
  std::string content;  // PrCurvePluginData { int32 version = 1; uint32 num_thresholds = 2; }
  ProtoWriter(content).int64(2, num_thresholds);
  w.message(1, [&] {
    w.str(value_field::tag, tag);
    w.message(value_field::tensor, [&] {
      w.int64(1, kDtFloat);
      tensor_shape(w, {6, static_cast<int64_t>(data.size() / 6)});
      w.packed_f32(5, f);
    });
    plugin_metadata(w, "pr_curves", content);
  });
}

// ---- hyperparameters ----------------------------------------------------------------------------

namespace {

// google.protobuf.Value { oneof kind { double number_value = 2; string string_value = 3; bool bool_value = 4; } }
void struct_value(ProtoWriter& w, const HParam& v) {
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, double>) w.f64_always(2, x);
        else if constexpr (std::is_same_v<T, std::string>) w.str_always(3, x);
        else w.int64_always(4, x ? 1 : 0);
      },
      v.value());
}

// HParamsPluginData { int32 version = 1; oneof data { Experiment experiment = 2;
//                     SessionStartInfo session_start_info = 3; SessionEndInfo session_end_info = 4; } }
template <class Body>
void hparams_summary(ProtoWriter& w, std::string_view tag, uint32_t data_field, Body&& body) {
  std::string content;
  ProtoWriter c(content);
  c.message(data_field, [&] { body(c); });
  w.message(1, [&] {
    w.str(value_field::tag, tag);
    plugin_metadata(w, "hparams", content);
  });
}

const char* kind_name(const HParam& v) {
  return v.value().index() == 0 ? "a number" : v.value().index() == 1 ? "a string" : "a bool";
}

}  // namespace

void hparams_experiment_value(ProtoWriter& w, const HParams& hparams, const Metrics& metrics,
                              const HParamDomains& domains) {
  for (const auto& domain : domains) {  // (no structured bindings here: clang 14 cannot capture them)
    const std::string& name = domain.first;
    const std::vector<HParam>& values = domain.second;
    auto it = std::find_if(hparams.begin(), hparams.end(), [&](const auto& p) { return p.first == name; });
    NABLA_CHECK(ValueError, it != hparams.end(), "add_hparams: the domain of '", name, "' names no hyperparameter");
    for (const HParam& d : values)
      NABLA_CHECK(ValueError, d.value().index() == it->second.value().index(), "add_hparams: the domain of '", name,
                  "' holds ", kind_name(d), " but the hyperparameter is ", kind_name(it->second));
  }
  // Experiment { repeated HParamInfo hparam_infos = 4; repeated MetricInfo metric_infos = 5; }
  // HParamInfo { string name = 1; DataType type = 4; ListValue domain_discrete = 5; }
  // DataType { UNSET = 0; STRING = 1; BOOL = 2; FLOAT64 = 3; }; MetricInfo { MetricName name = 1 { string tag = 2; } }
  hparams_summary(w, kHParamsExperimentTag, 2, [&](ProtoWriter& c) {
    for (const auto& hp : hparams) {
      const std::string& name = hp.first;
      const HParam& v = hp.second;
      c.message(4, [&] {
        c.str(1, name);
        c.int64(4, v.value().index() == 0 ? 3 : v.value().index() == 1 ? 1 : 2);
        for (const auto& domain : domains)
          if (domain.first == name)
            c.message(5, [&] {
              for (const HParam& d : domain.second) c.message(1, [&] { struct_value(c, d); });
            });
      });
    }
    for (const auto& metric : metrics) c.message(5, [&] { c.message(1, [&] { c.str(2, metric.first); }); });
  });
}

void hparams_session_start_value(ProtoWriter& w, const HParams& hparams) {
  // SessionStartInfo { map<string, google.protobuf.Value> hparams = 1; }
  hparams_summary(w, kHParamsSessionStartTag, 3, [&](ProtoWriter& c) {
    for (const auto& hp : hparams)
      c.message(1, [&] {
        c.str_always(1, hp.first);
        c.message(2, [&] { struct_value(c, hp.second); });
      });
  });
}

void hparams_session_end_value(ProtoWriter& w) {
  // SessionEndInfo { Status status = 1; }  Status { UNKNOWN = 0; SUCCESS = 1; FAILURE = 2; RUNNING = 3; }
  hparams_summary(w, kHParamsSessionEndTag, 4, [&](ProtoWriter& c) { c.int64(1, 1); });
}

}  // namespace nabla::tensorboard
