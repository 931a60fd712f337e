// The mnist program's inputs, parsed and checked before anything runs: each command's command line
// (touching no file: the mnist fuzz target calls these on arbitrary arguments) and the settings a
// checkpoint's metadata holds. Every mistake is a UsageError (the command line) or a Failure (a
// checkpoint) that names the option or the field, what was expected and what was found.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mnist {

// A number as text: precision 17 round-trips a double (metadata), fewer digits read better.
std::string number_text(double v, int precision = 17);

// The settings that define a training run: stored in its checkpoint, restored by --resume.
struct Settings {
  std::string model, dataset, optimizer, scheduler;
  double lr = 0, momentum = 0, weight_decay = 0, gamma = 0, label_smoothing = 0;
  int64_t batch_size = 0, seed = 0;
  bool shuffle = true, augment = false;
  std::string amp = "off";  // mixed precision: off, bf16 or fp16 (kAmpModes)
};
std::map<std::string, std::string> to_metadata(const Settings& s);
Settings settings_from_metadata(const std::map<std::string, std::string>& info, const std::string& checkpoint);

// Reads fields of a checkpoint's metadata (the mnist.* keys, without their "user." prefix),
// checking each: a Failure that names the checkpoint and the field otherwise.
class MetadataReader {
 public:
  MetadataReader(const std::map<std::string, std::string>& info, std::string checkpoint)
      : info_(info), checkpoint_(std::move(checkpoint)) {}
  std::string choice(const std::string& key, const std::vector<std::string>& choices) const;
  // A finite number in [lo, hi]; `fallback` when the field is absent (else required).
  double number(const std::string& key, double lo, double hi, std::optional<double> fallback = std::nullopt) const;
  int64_t integer(const std::string& key, int64_t lo, int64_t hi, std::optional<int64_t> fallback = std::nullopt) const;
  uint64_t u64(const std::string& key, std::optional<uint64_t> fallback = std::nullopt) const;
  bool flag(const std::string& key, std::optional<bool> fallback = std::nullopt) const;

 private:
  const std::string* find(const std::string& key, bool required) const;
  [[noreturn]] void bad(const std::string& key, const std::string& expected) const;
  const std::map<std::string, std::string>& info_;
  std::string checkpoint_;
};

// Where a run saved mid-epoch (Ctrl-C) stopped: the loader's position and the epoch's running sums.
struct RunProgress {
  double train_seconds = 0, partial_loss = 0, partial_seconds = 0;
  uint64_t loader_seed = 0;
  int64_t loader_epoch = 0, loader_index = 0, partial_seen = 0, partial_correct = 0;
};
std::map<std::string, std::string> to_metadata(const RunProgress& p);
// Checked against the run: loader_index (a position in the epoch's order of images) and
// partial_seen at most train_size, partial_correct at most partial_seen, ...
RunProgress progress_from_metadata(const std::map<std::string, std::string>& info, const std::string& checkpoint,
                                   int64_t train_size);

// Bounds of the numeric options.
inline constexpr int64_t kMaxTimeout = 7 * 24 * 3600;
inline constexpr int64_t kMaxLogEvery = 1'000'000'000, kMaxEpochs = 1'000'000, kMaxBatchSize = 1'000'000,
                         kMaxWorkers = 256, kMaxCount = 1'000'000;
inline const std::vector<std::string> kModels = {"mlp", "lenet", "cnn", "pytorch", "fast"},
                                      kDatasets = {"mnist", "fashion-mnist"},
                                      kOptimizers = {"sgd",   "adam",    "adamw",   "nadam",
                                                     "radam", "rmsprop", "adagrad", "adadelta"},
                                      kSchedulers = {"none", "step", "exponential", "cosine", "onecycle"},
                                      kAmpModes = {"off", "bf16", "fp16"};

// The train options that are part of a run's Settings: a resumed run keeps its own, so --resume
// accepts them only with the values the run was started with (re-running the same command plus
// --resume works); check_resume_settings refuses a real conflict, naming both values.
inline constexpr const char* kRunSettingOptions[] = {
    "model",      "lr",   "momentum", "weight-decay", "gamma",   "optimizer",       "scheduler",
    "batch-size", "seed", "dataset",  "no-shuffle",   "augment", "label-smoothing", "amp"};
struct TrainArgs {
  Settings settings;                        // from the command line; with --resume the checkpoint's replace them
  std::vector<std::string> settings_given;  // which of kRunSettingOptions the command line set
  std::string resume;                       // the checkpoint to continue, or ""
  std::string init_from;                    // a PyTorch state dict to start from, or ""
  int64_t epochs = 0;  // 0: the model's default (default_recipe), known once a resumed run's model is
  std::optional<int> threads;
  int64_t workers = 0;
  bool quiet = false;
  std::string device, data, checkpoint, summary_json;  // data, checkpoint: "" for the defaults
  std::string tensorboard;                             // a TensorBoard log folder, or ""
  int64_t tensorboard_every = 0;                       // train scalars every this many steps
  int64_t timeout_s = 1800;                            // data-parallel: the rendezvous's and each collective's timeout
  std::string shard = "none";                          // data-parallel: "none" or "zero1" (ZeroRedundancyOptimizer)
};
void check_resume_settings(const TrainArgs& a, const Settings& saved);
struct EvalArgs {
  std::string checkpoint, data, device;  // data: "" for the checkpoint's dataset in data/
  std::string amp = "saved";             // off, bf16, fp16, or "saved": the mode the run trained with
  int64_t batch_size = 0;
  bool compile = false;  // through nabla::compile
};
struct PredictArgs {
  std::string checkpoint, device, save_input;
  bool json = false;
  std::vector<std::string> images;
};
struct ExportArgs {
  std::string out, dataset, data;  // data: "" for data/<dataset>
  std::string onnx, checkpoint;    // --onnx FILE: the checkpoint's model as ONNX instead of images
  int64_t opset = 17;
  int64_t count = 0, seed = 0;
  bool first = false, invert = false;
};

// argv[2...] of `mnist <command>`; nullopt when --help was asked (and printed).
std::optional<TrainArgs> parse_train_args(int argc, char** argv);
std::optional<EvalArgs> parse_eval_args(int argc, char** argv);
std::optional<PredictArgs> parse_predict_args(int argc, char** argv);
std::optional<ExportArgs> parse_export_args(int argc, char** argv);

}  // namespace mnist
