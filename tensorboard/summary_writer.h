// nabla::tensorboard::SummaryWriter: torch.utils.tensorboard.SummaryWriter for C++ programs. It
// writes TensorBoard event files (and the embedding projector's files) that `tensorboard --logdir`
// reads, with PyTorch's names, defaults and file layout.
//
//   tensorboard::SummaryWriter tb("runs/exp1");           // or SummaryWriter() for runs/<date>_<host>
//   tb.add_scalar("loss/train", loss, step);
//   tb.add_scalars("loss", {{"train", 0.31}, {"test", 0.35}}, step);   // runs/exp1/loss_train, loss_test
//   tb.add_histogram("fc1.weight", fc1->weight, epoch);
//   tb.add_images("misclassified", digits, epoch);       // (N, 1, 28, 28) floats in [0, 1]
//   tb.add_text("notes", "**batch 64**, adam", 0);
//   tb.add_hparams({{"lr", 0.001}, {"optimizer", "adam"}}, {{"hparam/accuracy", 0.99}});
//
// Every add_* call is thread-safe and returns after encoding its event in memory: a background
// thread per event file writes them (when max_queue events wait, every flush_secs, on flush(), on
// close() and on destruction). The optional global_step and walltime default, as PyTorch's, to no
// step (0) and the time of the call.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "../core/tensor.h"
#include "event_file.h"
#include "summary.h"

namespace nabla::tensorboard {

struct SummaryWriterOptions {
  std::string comment{};                // appended to the default log_dir (ignored with a log_dir)
  std::optional<int64_t> purge_step{};  // TensorBoard drops earlier events with a step >= this one
  int64_t max_queue = 10;               // events buffered before the writer thread writes them
  double flush_secs = 120;              // the longest an event waits in memory
  std::string filename_suffix{};        // appended to every event file's name
};

struct HistogramOptions {
  std::vector<double> bins{};         // bin edges; empty: PyTorch's default ("tensorflow") bins
  std::optional<int64_t> max_bins{};  // merge groups of bins down to at most this many
};

class SummaryWriter {
 public:
  // log_dir "" gives runs/<Mon>DD_HH-MM-SS_<hostname><comment>, as PyTorch.
  explicit SummaryWriter(std::string log_dir = "", SummaryWriterOptions options = {});
  ~SummaryWriter();  // close()
  SummaryWriter(const SummaryWriter&) = delete;
  SummaryWriter& operator=(const SummaryWriter&) = delete;

  const std::string& log_dir() const { return log_dir_; }  // get_logdir()
  std::string event_file_path();                           // the main event file

  void add_scalar(const std::string& tag, double value, std::optional<int64_t> global_step = std::nullopt,
                  std::optional<double> walltime = std::nullopt);
  void add_scalar(const std::string& tag, const Tensor& value, std::optional<int64_t> global_step = std::nullopt,
                  std::optional<double> walltime = std::nullopt);  // a one-element tensor
  // One run per key, as PyTorch: events tagged main_tag in <log_dir>/<main_tag with '/' as '_'>_<key>.
  void add_scalars(const std::string& main_tag, const std::vector<std::pair<std::string, double>>& values,
                   std::optional<int64_t> global_step = std::nullopt, std::optional<double> walltime = std::nullopt);
  void add_histogram(const std::string& tag, const Tensor& values, std::optional<int64_t> global_step = std::nullopt,
                     const HistogramOptions& options = {}, std::optional<double> walltime = std::nullopt);
  // A histogram computed elsewhere (add_histogram_raw): bucket_limits[i] is bucket i's right edge.
  void add_histogram_raw(const std::string& tag, const Histogram& histogram,
                         std::optional<int64_t> global_step = std::nullopt,
                         std::optional<double> walltime = std::nullopt);
  // dataformats: CHW (default), HWC, HW; floats in [0, 1] or u8 in [0, 255].
  void add_image(const std::string& tag, const Tensor& image, std::optional<int64_t> global_step = std::nullopt,
                 std::optional<double> walltime = std::nullopt, const std::string& dataformats = "CHW");
  // A batch as one grid image, 8 per row; dataformats NCHW (default) or NHWC.
  void add_images(const std::string& tag, const Tensor& images, std::optional<int64_t> global_step = std::nullopt,
                  std::optional<double> walltime = std::nullopt, const std::string& dataformats = "NCHW");
  // Markdown text, shown in the TEXT tab under "<tag>/text_summary".
  void add_text(const std::string& tag, const std::string& text, std::optional<int64_t> global_step = std::nullopt,
                std::optional<double> walltime = std::nullopt);
  // The run's hyperparameters and final metrics for the HPARAMS tab: written, as PyTorch, to a
  // sub-run <log_dir>/<run_name> (run_name "" gives the current time, as str(time.time())) with
  // the metrics also as scalars there.
  void add_hparams(const HParams& hparams, const Metrics& metrics, const HParamDomains& hparam_domain_discrete = {},
                   const std::string& run_name = "", std::optional<int64_t> global_step = std::nullopt);
  void add_pr_curve(const std::string& tag, const Tensor& labels, const Tensor& predictions,
                    std::optional<int64_t> global_step = std::nullopt, int64_t num_thresholds = 127,
                    const Tensor& weights = {}, std::optional<double> walltime = std::nullopt);
  // The embedding projector: mat (N, D) to <log_dir>/<step %05d>/<tag>/tensors.tsv, one metadata
  // label per row (metadata.tsv), label images (N, C, H, W) as sprite.png, and the run's
  // projector_config.pbtxt listing every embedding added so far (each file written atomically).
  void add_embedding(const Tensor& mat, const std::vector<std::string>& metadata = {}, const Tensor& label_img = {},
                     std::optional<int64_t> global_step = std::nullopt, const std::string& tag = "default");
  // Several metadata columns, with their header.
  void add_embedding(const Tensor& mat, const std::vector<std::vector<std::string>>& metadata,
                     const std::vector<std::string>& metadata_header, const Tensor& label_img = {},
                     std::optional<int64_t> global_step = std::nullopt, const std::string& tag = "default");

  // Writes every queued event of every event file of this writer.
  void flush();
  // Flushes and closes the event files; a later add_* opens a new event file, as PyTorch.
  void close();

 private:
  EventFile& main_file();  // caller holds mu_
  template <class SummaryBody>
  void add_summary(std::optional<int64_t> step, std::optional<double> walltime, SummaryBody&& body);
  void embedding(const Tensor& mat, const std::vector<std::string>& rows, bool has_metadata, const Tensor& label_img,
                 std::optional<int64_t> global_step, const std::string& tag);

  std::string log_dir_;
  SummaryWriterOptions options_;
  std::mutex mu_;
  std::unique_ptr<EventFile> main_;
  std::map<std::string, std::unique_ptr<EventFile>> scalars_runs_;  // add_scalars' sub-runs, by folder
  std::string projector_config_;                                    // the embeddings written so far, in text format
};

// The default log_dir for a comment: runs/<Mon>DD_HH-MM-SS_<hostname><comment> (local time).
std::string default_log_dir(const std::string& comment = "");

}  // namespace nabla::tensorboard
