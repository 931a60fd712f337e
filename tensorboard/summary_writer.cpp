#include "tensorboard/summary_writer.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>

#include "core/error.h"
#include "core/graph.h"
#include "core/ops.h"
#include "data/image.h"
#include "io/file.h"
#include "tensorboard/events.h"

namespace nabla::tensorboard {

namespace fs = std::filesystem;

namespace {

// The shortest text that reads back as the same number (Python's repr for doubles).
template <class T>
std::string shortest(T v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// Python's str(n).zfill(5): zeros after the sign up to five characters.
std::string zfill5(int64_t n) {
  std::string s = std::to_string(n);
  size_t at = s[0] == '-' ? 1 : 0;
  if (s.size() < 5) s.insert(at, 5 - s.size(), '0');
  return s;
}

// SummaryWriter._encode: a tag as one path component ('%', '/' and '\' as %25, %2f, %5c).
std::string encode_tag(const std::string& tag) {
  std::string out;
  for (char c : tag) {
    if (c == '%') out += "%25";
    else if (c == '/') out += "%2f";
    else if (c == '\\') out += "%5c";
    else out += c;
  }
  return out;
}

// A string literal of protobuf's text format (what text_format.MessageToString writes).
std::string text_literal(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '"': out += "\\\""; break;
      case '\'': out += "\\'"; break;
      case '\\': out += "\\\\"; break;
      default:
        if (c >= 0x20 && c < 0x7F) {
          out += static_cast<char>(c);
        } else {
          char oct[8];
          std::snprintf(oct, sizeof oct, "\\%03o", c);
          out += oct;
        }
    }
  }
  return out + "\"";
}

void write_whole(const fs::path& path, const std::string& bytes) {
  std::string p = path.string();
  io::atomic_write(p, [&](std::FILE* f) { io::write_all(f, bytes.data(), bytes.size(), p); });
}

// The events of this thread's add_* calls are encoded here (no allocation once it has grown).
std::string& scratch() {
  thread_local std::string buf;
  if (buf.capacity() > (size_t(1) << 20)) std::string().swap(buf);  // an image's worth: give it back
  buf.clear();
  return buf;
}

}  // namespace

std::string default_log_dir(const std::string& comment) {
  static const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char when[32];
  std::snprintf(when, sizeof when, "%s%02d_%02d-%02d-%02d", kMonths[tm.tm_mon % 12], tm.tm_mday, tm.tm_hour, tm.tm_min,
                tm.tm_sec);
  return (fs::path("runs") / (std::string(when) + "_" + hostname() + comment)).string();
}

SummaryWriter::SummaryWriter(std::string log_dir, SummaryWriterOptions options)
    : log_dir_(log_dir.empty() ? default_log_dir(options.comment) : std::move(log_dir)), options_(std::move(options)) {
  std::lock_guard lk(mu_);
  main_file();
}

SummaryWriter::~SummaryWriter() {
  try {
    close();
  } catch (const std::exception& e) { std::fprintf(stderr, "nabla: SummaryWriter: %s\n", e.what()); }
}

EventFile& SummaryWriter::main_file() {
  if (!main_) {
    main_ = std::make_unique<EventFile>(log_dir_, EventFileOptions{.max_queue = options_.max_queue,
                                                                   .flush_secs = options_.flush_secs,
                                                                   .filename_suffix = options_.filename_suffix});
    if (options_.purge_step) {  // as PyTorch: a second file_version event and a session start, at purge_step
      int64_t step = *options_.purge_step;
      options_.purge_step.reset();
      std::string buf;
      encode_file_version_event(buf, wall_time(), step, "brain.Event:2");
      main_->add(buf);
      buf.clear();
      encode_session_start_event(buf, wall_time(), step);
      main_->add(buf);
    }
  }
  return *main_;
}

std::string SummaryWriter::event_file_path() {
  std::lock_guard lk(mu_);
  return main_file().path();
}

template <class SummaryBody>
void SummaryWriter::add_summary(std::optional<int64_t> step, std::optional<double> walltime, SummaryBody&& body) {
  std::string& buf = scratch();
  encode_summary_event(buf, walltime ? *walltime : wall_time(), step, body);
  std::lock_guard lk(mu_);
  main_file().add(buf);
}

void SummaryWriter::add_scalar(const std::string& tag, double value, std::optional<int64_t> global_step,
                               std::optional<double> walltime) {
  add_summary(global_step, walltime, [&](ProtoWriter& w) { scalar_value(w, tag, static_cast<float>(value)); });
}

void SummaryWriter::add_scalar(const std::string& tag, const Tensor& value, std::optional<int64_t> global_step,
                               std::optional<double> walltime) {
  NABLA_CHECK(ShapeError, value.defined() && value.numel() == 1, "add_scalar: '", tag,
              "' needs a tensor of one element, got shape ", value.defined() ? value.sizes() : Shape{});
  autograd::NoGradGuard ng;
  add_scalar(tag, value.cpu().to(kFloat64).item<double>(), global_step, walltime);
}

void SummaryWriter::add_scalars(const std::string& main_tag, const std::vector<std::pair<std::string, double>>& values,
                                std::optional<int64_t> global_step, std::optional<double> walltime) {
  double wall = walltime ? *walltime : wall_time();
  std::string run = main_tag;
  for (char& c : run)
    if (c == '/') c = '_';
  std::string& buf = scratch();
  std::lock_guard lk(mu_);
  const std::string prefix = main_file().dir() + "/" + run + "_";
  for (const auto& kv : values) {
    const std::string& key = kv.first;
    const float value = static_cast<float>(kv.second);
    std::string dir = prefix + key;
    auto it = scalars_runs_.find(dir);
    if (it == scalars_runs_.end())
      it = scalars_runs_
               .emplace(dir,
                        std::make_unique<EventFile>(dir, EventFileOptions{.max_queue = options_.max_queue,
                                                                          .flush_secs = options_.flush_secs,
                                                                          .filename_suffix = options_.filename_suffix}))
               .first;
    buf.clear();
    encode_summary_event(buf, wall, global_step, [&](ProtoWriter& w) { scalar_value(w, main_tag, value); });
    it->second->add(buf);
  }
}

void SummaryWriter::add_histogram(const std::string& tag, const Tensor& values, std::optional<int64_t> global_step,
                                  const HistogramOptions& options, std::optional<double> walltime) {
  std::span<const double> bins =
      options.bins.empty() ? std::span<const double>(tensorflow_bins()) : std::span<const double>(options.bins);
  Histogram h = make_histogram(values, bins, options.max_bins, "add_histogram");
  add_histogram_raw(tag, h, global_step, walltime);
}

void SummaryWriter::add_histogram_raw(const std::string& tag, const Histogram& h, std::optional<int64_t> global_step,
                                      std::optional<double> walltime) {
  NABLA_CHECK(ValueError, h.bucket_limit.size() == h.bucket.size(), "add_histogram_raw: '", tag, "' has ",
              h.bucket_limit.size(), " bucket limits but ", h.bucket.size(), " bucket counts");
  add_summary(global_step, walltime, [&](ProtoWriter& w) { histogram_value(w, tag, h); });
}

void SummaryWriter::add_image(const std::string& tag, const Tensor& image, std::optional<int64_t> global_step,
                              std::optional<double> walltime, const std::string& dataformats) {
  Tensor hwc = image_hwc(image, dataformats, "add_image");
  add_summary(global_step, walltime, [&](ProtoWriter& w) { image_value(w, tag, hwc); });
}

void SummaryWriter::add_images(const std::string& tag, const Tensor& images, std::optional<int64_t> global_step,
                               std::optional<double> walltime, const std::string& dataformats) {
  NABLA_CHECK(ShapeError, images.defined() && images.dim() == static_cast<int64_t>(dataformats.size()), "add_images: '",
              tag, "': dataformats '", dataformats, "' does not fit the shape ",
              images.defined() ? images.sizes() : Shape{});
  Tensor hwc = image_hwc(images, dataformats, "add_images");
  add_summary(global_step, walltime, [&](ProtoWriter& w) { image_value(w, tag, hwc); });
}

void SummaryWriter::add_text(const std::string& tag, const std::string& text, std::optional<int64_t> global_step,
                             std::optional<double> walltime) {
  add_summary(global_step, walltime, [&](ProtoWriter& w) { text_value(w, tag, text); });
}

void SummaryWriter::add_hparams(const HParams& hparams, const Metrics& metrics, const HParamDomains& domains,
                                const std::string& run_name, std::optional<int64_t> global_step) {
  std::string exp, start, end;  // the three summaries, checked before anything is written
  auto summary = [&](std::string& out, auto&& body) {
    ProtoWriter w(out);
    body(w);
  };
  summary(exp, [&](ProtoWriter& w) { hparams_experiment_value(w, hparams, metrics, domains); });
  summary(start, [&](ProtoWriter& w) { hparams_session_start_value(w, hparams); });
  summary(end, [&](ProtoWriter& w) { hparams_session_end_value(w); });
  std::string run = run_name.empty() ? shortest(wall_time()) : run_name;
  std::string dir;
  {
    std::lock_guard lk(mu_);
    dir = (fs::path(main_file().dir()) / run).string();
  }
  SummaryWriter hp(dir);
  for (const std::string* s : {&exp, &start, &end}) {
    std::string buf;
    ProtoWriter w(buf);
    w.f64(event_field::wall_time, wall_time());
    if (global_step) w.int64(event_field::step, *global_step);
    w.str_always(event_field::summary, *s);
    std::lock_guard lk(hp.mu_);
    hp.main_file().add(buf);
  }
  for (const auto& [tag, value] : metrics) hp.add_scalar(tag, value, global_step);
  hp.close();
}

void SummaryWriter::add_pr_curve(const std::string& tag, const Tensor& labels, const Tensor& predictions,
                                 std::optional<int64_t> global_step, int64_t num_thresholds, const Tensor& weights,
                                 std::optional<double> walltime) {
  std::vector<double> data = pr_curve_data(labels, predictions, num_thresholds, weights, "add_pr_curve");
  int64_t nt = static_cast<int64_t>(data.size() / 6);
  add_summary(global_step, walltime, [&](ProtoWriter& w) { pr_curve_value(w, tag, data, nt); });
}

void SummaryWriter::add_embedding(const Tensor& mat, const std::vector<std::string>& metadata, const Tensor& label_img,
                                  std::optional<int64_t> global_step, const std::string& tag) {
  embedding(mat, metadata, !metadata.empty(), label_img, global_step, tag);
}

void SummaryWriter::add_embedding(const Tensor& mat, const std::vector<std::vector<std::string>>& metadata,
                                  const std::vector<std::string>& header, const Tensor& label_img,
                                  std::optional<int64_t> global_step, const std::string& tag) {
  auto join = [](const std::vector<std::string>& cols) {
    std::string line;
    for (size_t i = 0; i < cols.size(); ++i) line += (i ? "\t" : "") + cols[i];
    return line;
  };
  std::vector<std::string> rows;
  if (!header.empty()) rows.push_back(join(header));
  for (size_t i = 0; i < metadata.size(); ++i) {
    NABLA_CHECK(ShapeError, header.empty() || metadata[i].size() == header.size(), "add_embedding: metadata row ", i,
                " has ", metadata[i].size(), " columns but the header has ", header.size());
    rows.push_back(join(metadata[i]));
  }
  NABLA_CHECK(ShapeError, !mat.defined() || mat.dim() != 2 || static_cast<int64_t>(metadata.size()) == mat.size(0),
              "add_embedding: ", metadata.size(), " metadata rows for ", mat.size(0), " data points");
  embedding(mat, rows, !metadata.empty(), label_img, global_step, tag);
}

void SummaryWriter::embedding(const Tensor& mat, const std::vector<std::string>& rows, bool has_metadata,
                              const Tensor& label_img, std::optional<int64_t> global_step, const std::string& tag) {
  NABLA_CHECK(ShapeError, mat.defined() && mat.dim() == 2,
              "add_embedding: mat must be 2-D (points, features), got shape ", mat.defined() ? mat.sizes() : Shape{});
  const int64_t n = mat.size(0);
  size_t header_rows = rows.size() > static_cast<size_t>(n) ? rows.size() - static_cast<size_t>(n) : 0;
  NABLA_CHECK(ShapeError, !has_metadata || rows.size() - header_rows == static_cast<size_t>(n),
              "add_embedding: ", rows.size() - header_rows, " metadata labels for ", n, " data points");
  NABLA_CHECK(ShapeError, !label_img.defined() || (label_img.dim() == 4 && label_img.size(0) == n),
              "add_embedding: label_img must be (N, C, H, W) with N = ", n, " data points, got shape ",
              label_img.defined() ? label_img.sizes() : Shape{});
  const int64_t step = global_step.value_or(0);
  const std::string subdir = zfill5(step) + "/" + encode_tag(tag);
  std::string logdir;
  {
    std::lock_guard lk(mu_);
    logdir = main_file().dir();
  }
  fs::path save = fs::path(logdir) / subdir;
  std::error_code ec;
  if (fs::exists(save, ec)) {
    NABLA_CHECK(IOError, fs::is_directory(save, ec), "add_embedding: '", save.string(), "' exists and is not a folder");
    std::fprintf(stderr, "nabla: add_embedding: '%s' exists already (did you set global_step?)\n", save.c_str());
  } else {
    fs::create_directories(save, ec);
    NABLA_CHECK(IOError, !ec, "add_embedding: cannot create '", save.string(), "': ", ec.message());
  }
  if (has_metadata) {
    std::string tsv;
    for (const std::string& r : rows) tsv += r + "\n";
    write_whole(save / "metadata.tsv", tsv);
  }
  if (label_img.defined()) {
    int64_t nrow = static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(n))));
    Tensor grid = image_grid(label_img, nrow, "add_embedding");  // (rows * H, nrow * W, C)
    const int64_t gh = grid.size(0), gw = grid.size(1), gc = grid.size(2);
    // The sprite is square (nrow x nrow images), RGB; rows beyond the last image stay black.
    Tensor sprite = zeros({std::max(gh, gw), gw, 3}, kUInt8);
    const uint8_t* g = grid.data_ptr<uint8_t>();
    uint8_t* s = sprite.data_ptr<uint8_t>();
    for (int64_t y = 0; y < gh; ++y)
      for (int64_t x = 0; x < gw; ++x)
        for (int64_t c = 0; c < 3; ++c) s[(y * gw + x) * 3 + c] = g[(y * gw + x) * gc + c];
    write_whole(save / "sprite.png", data::encode_image(sprite, "png"));
  }
  {
    autograd::NoGradGuard ng;
    Tensor m = mat.cpu().contiguous();
    std::string tsv;
    const int64_t d = m.size(1);
    if (m.dtype() == kFloat32) {
      const float* p = m.data_ptr<float>();
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < d; ++j) tsv += shortest(p[i * d + j]) + (j + 1 < d ? "\t" : "\n");
    } else {
      Tensor f = m.to(kFloat64).contiguous();
      const double* p = f.data_ptr<double>();
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < d; ++j) tsv += shortest(p[i * d + j]) + (j + 1 < d ? "\t" : "\n");
    }
    if (d == 0) tsv.assign(static_cast<size_t>(n), '\n');
    write_whole(save / "tensors.tsv", tsv);
  }
  std::string info = "embeddings {\n  tensor_name: " + text_literal(tag + ":" + zfill5(step)) + "\n";
  if (has_metadata) info += "  metadata_path: " + text_literal(subdir + "/metadata.tsv") + "\n";
  if (label_img.defined())
    info += "  sprite {\n    image_path: " + text_literal(subdir + "/sprite.png") +
            "\n    single_image_dim: " + std::to_string(label_img.size(3)) +
            "\n    single_image_dim: " + std::to_string(label_img.size(2)) + "\n  }\n";
  info += "  tensor_path: " + text_literal(subdir + "/tensors.tsv") + "\n}\n";
  std::lock_guard lk(mu_);
  projector_config_ += info;
  write_whole(fs::path(logdir) / "projector_config.pbtxt", projector_config_);
}

void SummaryWriter::flush() {
  std::lock_guard lk(mu_);
  if (main_) main_->flush();
  for (auto& [dir, f] : scalars_runs_) f->flush();
}

void SummaryWriter::close() {
  std::lock_guard lk(mu_);
  std::exception_ptr err;
  auto close_one = [&](std::unique_ptr<EventFile>& f) {
    try {
      if (f) f->close();
    } catch (...) {
      if (!err) err = std::current_exception();
    }
    f.reset();
  };
  close_one(main_);
  for (auto& [dir, f] : scalars_runs_) close_one(f);
  scalars_runs_.clear();
  if (err) std::rethrow_exception(err);
}

}  // namespace nabla::tensorboard
