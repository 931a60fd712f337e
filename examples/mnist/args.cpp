#include "examples/mnist/args.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "core/parallel.h"
#include "examples/mnist/cli.h"
#include "examples/mnist/common.h"
#include "examples/mnist/models.h"

namespace mnist {

namespace {

std::string list(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// A value from a file, for a message: quoted and cut short.
std::string shown(const std::string& v) { return "'" + (v.size() > 60 ? v.substr(0, 60) + "..." : v) + "'"; }

}  // namespace

std::string number_text(double v, int precision) {
  std::ostringstream os;
  os.precision(precision);
  os << v;
  return os.str();
}

// ---- checkpoint metadata --------------------------------------------------------------------------

const std::string* MetadataReader::find(const std::string& key, bool required) const {
  auto it = info_.find(key);
  if (it != info_.end()) return &it->second;
  if (required)
    throw Failure("checkpoint '" + checkpoint_ + "' lacks the metadata field '" + key +
                      "' (it was not written by `mnist train`, or it is damaged)",
                  kExitError);
  return nullptr;
}

void MetadataReader::bad(const std::string& key, const std::string& expected) const {
  throw Failure("checkpoint '" + checkpoint_ + "': the metadata field '" + key + "' must be " + expected + ", got " +
                    shown(info_.at(key)) + " (the file is damaged)",
                kExitError);
}

std::string MetadataReader::choice(const std::string& key, const std::vector<std::string>& choices) const {
  const std::string& v = *find(key, true);
  if (std::find(choices.begin(), choices.end(), v) == choices.end()) bad(key, "one of " + list(choices));
  return v;
}

double MetadataReader::number(const std::string& key, double lo, double hi, std::optional<double> fallback) const {
  const std::string* v = find(key, !fallback);
  if (!v) return *fallback;
  char* end = nullptr;
  double r = std::strtod(v->c_str(), &end);
  if (v->empty() || *end != '\0' || !std::isfinite(r) || r < lo || r > hi)
    bad(key, "a number from " + number_text(lo) + " to " + number_text(hi));
  return r;
}

int64_t MetadataReader::integer(const std::string& key, int64_t lo, int64_t hi, std::optional<int64_t> fallback) const {
  const std::string* v = find(key, !fallback);
  if (!v) return *fallback;
  errno = 0;
  char* end = nullptr;
  long long r = std::strtoll(v->c_str(), &end, 10);
  if (v->empty() || *end != '\0' || errno == ERANGE || r < lo || r > hi)
    bad(key, "a whole number from " + std::to_string(lo) + " to " + std::to_string(hi));
  return r;
}

uint64_t MetadataReader::u64(const std::string& key, std::optional<uint64_t> fallback) const {
  const std::string* v = find(key, !fallback);
  if (!v) return *fallback;
  errno = 0;
  char* end = nullptr;
  unsigned long long r = std::strtoull(v->c_str(), &end, 10);
  if (v->empty() || v->find_first_not_of("0123456789") != std::string::npos || *end != '\0' || errno == ERANGE)
    bad(key, "a whole number from 0 to 2^64 - 1");
  return r;
}

bool MetadataReader::flag(const std::string& key, std::optional<bool> fallback) const {
  const std::string* v = find(key, !fallback);
  if (!v) return *fallback;
  if (*v != "0" && *v != "1") bad(key, "0 or 1");
  return *v == "1";
}

std::map<std::string, std::string> to_metadata(const Settings& s) {
  return {{"mnist.model", s.model},
          {"mnist.dataset", s.dataset},
          {"mnist.optimizer", s.optimizer},
          {"mnist.scheduler", s.scheduler},
          {"mnist.lr", number_text(s.lr)},
          {"mnist.momentum", number_text(s.momentum)},
          {"mnist.weight_decay", number_text(s.weight_decay)},
          {"mnist.gamma", number_text(s.gamma)},
          {"mnist.label_smoothing", number_text(s.label_smoothing)},
          {"mnist.batch_size", std::to_string(s.batch_size)},
          {"mnist.seed", std::to_string(s.seed)},
          {"mnist.shuffle", s.shuffle ? "1" : "0"},
          {"mnist.augment", s.augment ? "1" : "0"},
          {"mnist.amp", s.amp}};
}

// The same ranges as the command line's (parse_train_args).
Settings settings_from_metadata(const std::map<std::string, std::string>& info, const std::string& checkpoint) {
  MetadataReader m(info, checkpoint);
  Settings s;
  s.model = m.choice("mnist.model", kModels);
  s.dataset = m.choice("mnist.dataset", kDatasets);
  s.optimizer = m.choice("mnist.optimizer", kOptimizers);
  s.scheduler = m.choice("mnist.scheduler", kSchedulers);
  s.lr = m.number("mnist.lr", 1e-300, 1e300);
  s.momentum = m.number("mnist.momentum", 0, 1e300);
  s.weight_decay = m.number("mnist.weight_decay", 0, 1e300);
  s.gamma = m.number("mnist.gamma", 1e-300, 1e300);
  s.label_smoothing = m.number("mnist.label_smoothing", 0, 1, 0.0);  // (older checkpoints lack it)
  s.batch_size = m.integer("mnist.batch_size", 1, kMaxBatchSize);
  s.seed = m.integer("mnist.seed", INT64_MIN, INT64_MAX);
  s.shuffle = m.flag("mnist.shuffle");
  s.augment = m.flag("mnist.augment", false);                                  // (older checkpoints lack it)
  s.amp = info.count("mnist.amp") ? m.choice("mnist.amp", kAmpModes) : "off";  // (older checkpoints lack it)
  return s;
}

void check_resume_settings(const TrainArgs& a, const Settings& saved) {
  const Settings& s = a.settings;
  auto same = [](double x, double y) { return std::abs(x - y) <= 1e-12 * std::max(std::abs(x), std::abs(y)); };
  for (const std::string& opt : a.settings_given) {
    std::string given, was;  // the option as given, and what the run was started with
    if (opt == "model" && s.model != saved.model) given = s.model, was = saved.model;
    if (opt == "dataset" && s.dataset != saved.dataset) given = s.dataset, was = saved.dataset;
    if (opt == "optimizer" && s.optimizer != saved.optimizer) given = s.optimizer, was = saved.optimizer;
    if (opt == "scheduler" && s.scheduler != saved.scheduler) given = s.scheduler, was = saved.scheduler;
    if (opt == "lr" && !same(s.lr, saved.lr)) given = number_text(s.lr, 6), was = number_text(saved.lr, 6);
    if (opt == "momentum" && !same(s.momentum, saved.momentum))
      given = number_text(s.momentum, 6), was = number_text(saved.momentum, 6);
    if (opt == "weight-decay" && !same(s.weight_decay, saved.weight_decay))
      given = number_text(s.weight_decay, 6), was = number_text(saved.weight_decay, 6);
    if (opt == "gamma" && !same(s.gamma, saved.gamma))
      given = number_text(s.gamma, 6), was = number_text(saved.gamma, 6);
    if (opt == "label-smoothing" && !same(s.label_smoothing, saved.label_smoothing))
      given = number_text(s.label_smoothing, 6), was = number_text(saved.label_smoothing, 6);
    if (opt == "batch-size" && s.batch_size != saved.batch_size)
      given = std::to_string(s.batch_size), was = std::to_string(saved.batch_size);
    if (opt == "amp" && s.amp != saved.amp) given = s.amp, was = saved.amp;
    if (opt == "seed" && s.seed != saved.seed) given = std::to_string(s.seed), was = std::to_string(saved.seed);
    if (opt == "no-shuffle" && saved.shuffle)
      throw UsageError("--no-shuffle conflicts with the run in '" + a.resume +
                       "', which shuffles: a resumed run keeps the settings it was started with (drop --no-shuffle)");
    if (opt == "augment" && !saved.augment)
      throw UsageError("--augment conflicts with the run in '" + a.resume +
                       "', which was started without it: a resumed run keeps the settings it was started with (drop "
                       "--augment)");
    if (!given.empty())
      throw UsageError("--" + opt + " " + given + " conflicts with the run in '" + a.resume + "', started with --" +
                       opt + " " + was + ": a resumed run keeps the settings it was started with (drop --" + opt +
                       ", or give " + was + ")");
  }
}

std::map<std::string, std::string> to_metadata(const RunProgress& p) {
  return {{"mnist.loader_seed", std::to_string(p.loader_seed)},
          {"mnist.loader_epoch", std::to_string(p.loader_epoch)},
          {"mnist.loader_index", std::to_string(p.loader_index)},
          {"mnist.train_seconds", number_text(p.train_seconds)},
          {"mnist.partial_loss", number_text(p.partial_loss)},
          {"mnist.partial_correct", std::to_string(p.partial_correct)},
          {"mnist.partial_seen", std::to_string(p.partial_seen)},
          {"mnist.partial_seconds", number_text(p.partial_seconds)}};
}

RunProgress progress_from_metadata(const std::map<std::string, std::string>& info, const std::string& checkpoint,
                                   int64_t train_size) {
  MetadataReader m(info, checkpoint);
  constexpr double kHuge = 1e300;
  RunProgress p;
  p.train_seconds = m.number("mnist.train_seconds", 0, kHuge, 0.0);
  p.loader_seed = m.u64("mnist.loader_seed", 0);
  p.loader_epoch = m.integer("mnist.loader_epoch", 0, INT64_MAX, 0);
  p.loader_index = m.integer("mnist.loader_index", 0, train_size, 0);
  p.partial_seen = m.integer("mnist.partial_seen", 0, train_size, 0);
  p.partial_correct = m.integer("mnist.partial_correct", 0, p.partial_seen, 0);
  p.partial_loss = m.number("mnist.partial_loss", 0, kHuge, 0.0);
  p.partial_seconds = m.number("mnist.partial_seconds", 0, kHuge, 0.0);
  return p;
}

// ---- command lines --------------------------------------------------------------------------------

std::optional<TrainArgs> parse_train_args(int argc, char** argv) {
  Cli cli("train",
          "Trains a model on MNIST (or Fashion-MNIST), evaluating on the test set after each epoch.\n"
          "Without options it runs the default recipe: a small CNN with batch norm, Adam (lr 0.002, x0.2 per\n"
          "epoch), batch 64, 3 epochs: 99%+ test accuracy.\n"
          "\n"
          "Data-parallel on several processes or machines: start it with nabla-run (or torchrun), e.g.\n"
          "  nabla-run --nproc-per-node 2 mnist train --model fast\n"
          "Each process then trains on its own share of the images (DistributedSampler) and the gradients\n"
          "are averaged (DistributedDataParallel): --batch-size is per process, so the global batch\n"
          "is the number of processes x --batch-size (scale --lr yourself if you want). Rank 0 prints\n"
          "and writes the checkpoint, CSV, TensorBoard logs and --summary-json; the test figures are the\n"
          "whole test set's. --device cpu or auto: on the CPU (Gloo); --device cuda: one GPU per process,\n"
          "the one numbered LOCAL_RANK (NCCL). Ctrl-C saves a checkpoint on every rank's same step,\n"
          "resumed on the same number of processes.");
  cli.option("model", "NAME",
             "mlp, lenet (libtorch's example model), cnn, pytorch (PyTorch's example model) or fast (99% in one "
             "epoch: smaller, one-cycle learning rate, label smoothing)",
             "cnn", kModels)
      .option("epochs", "N", "total number of epochs (with --resume: the total, not additional ones)",
              "model default: 1 for fast, else 3")
      .option("batch-size", "N", "training batch size", "model default")
      .option("lr", "X", "learning rate", "model default")
      .option("momentum", "X", "momentum of sgd and rmsprop", "model default")
      .option("weight-decay", "X", "L2 penalty", "0")
      .option("optimizer", "NAME", "sgd, adam, adamw, nadam, radam, rmsprop, adagrad or adadelta", "model default",
              kOptimizers)
      .option("scheduler", "NAME", "none, step or exponential (per epoch), cosine or onecycle (per batch)",
              "model default", kSchedulers)
      .option("gamma", "X", "learning-rate factor per epoch of the step and exponential schedulers", "model default")
      .option("label-smoothing", "X", "label smoothing of the cross-entropy loss, in [0, 1) (as PyTorch's)",
              "model default")
      .option("seed", "N", "random seed (initial weights, data order, dropout)", "1")
      .flag("no-shuffle", "visit the training images in file order (as libtorch's example)")
      .flag("augment", "random small rotations and shifts of the training images")
      .option("amp", "MODE",
              "mixed precision: off, bf16 (the forward under autocast to bfloat16, as torch.autocast) or fp16 "
              "(autocast to float16, with a GradScaler scaling the loss); the weights stay float32",
              "off", kAmpModes)
      .option("device", "NAME", "auto, cpu or cuda", "auto", {"auto", "cpu", "cuda"})
      .option("threads", "N", "CPU threads for the math", "all cores")
      .option("workers", "N", "data loader threads preparing batches ahead", "0")
      .option("dataset", "NAME", "mnist or fashion-mnist", "mnist", kDatasets)
      .option("data", "DIR", "folder with the four IDX files (plain or .gz)", "data/<dataset>")
      .option("checkpoint", "PATH", "where to save the model after each epoch",
              "checkpoints/<dataset>-<model>.safetensors")
      .option("resume", "PATH", "continue the run saved in this checkpoint", "")
      .option("init-from", "PATH",
              "start from the weights of a PyTorch state dict (torch.save(model.state_dict(), PATH)) of the same "
              "architecture",
              "")
      .option("summary-json", "PATH", "write test_acc, train_seconds, epochs, images_per_second here at the end", "")
      .option("tensorboard", "DIR",
              "write TensorBoard logs to DIR: train loss/accuracy/lr, test loss/accuracy, weight and gradient "
              "histograms, misclassified digits, hparams (view: tensorboard --logdir DIR)",
              "")
      .option("tensorboard-every", "N", "steps between the train scalars written to --tensorboard", "50")
      .flag("quiet", "no progress bar, only the per-epoch lines")
      .option("timeout", "SECONDS",
              "data-parallel: how long joining the job and each collective wait for the other processes before "
              "failing with an error that names them (as PyTorch's init_process_group timeout)",
              "1800")
      .option("shard", "MODE",
              "data-parallel: none; zero1 to shard the optimizer's state over the processes (ZeRO stage 1, as "
              "PyTorch's ZeroRedundancyOptimizer: each process keeps and updates 1/N of it, then the updated weights "
              "are broadcast; the checkpoint holds the whole state and resumes with or without it); or fsdp to shard "
              "the weights, gradients and state too (FullyShardedDataParallel, each layer a unit, gathered while it "
              "computes; the checkpoint holds the whole weights, and PATH.shards/ each process's part, for --resume "
              "with --shard fsdp on as many processes)",
              "none", {"none", "zero1", "fsdp"})
      .example("mnist train                                  # the default recipe")
      .example("mnist train --model fast                     # 99% in one epoch")
      .example("mnist train --model lenet --optimizer sgd --lr 0.01 --momentum 0.5 --batch-size 64 --no-shuffle")
      .example("mnist train --epochs 5 --resume checkpoints/mnist-cnn.safetensors")
      .example("mnist train --amp bf16                       # mixed precision: bfloat16 autocast")
      .example("mnist train --tensorboard runs/cnn          # then: tensorboard --logdir runs")
      .example("nabla-run --nproc-per-node 2 mnist train --model fast   # 2 processes, global batch 2 x 64")
      .example("nabla-run --nproc-per-node 2 mnist train --shard zero1  # each process holds half of Adam's state")
      .example("nabla-run --nproc-per-node 2 mnist train --shard fsdp   # ... and half of the weights");
  if (!cli.parse(argc, argv, 2)) return std::nullopt;

  TrainArgs a;
  a.resume = cli.str("resume");
  a.init_from = cli.str("init-from");
  for (const char* opt : kRunSettingOptions)
    if (cli.is_set(opt)) a.settings_given.emplace_back(opt);
  Settings& s = a.settings;
  s.model = cli.str("model");
  s.dataset = cli.str("dataset");
  Recipe r = default_recipe(s.model);
  auto num_or = [&](const char* name, double def) { return cli.is_set(name) ? cli.number(name) : def; };
  s.optimizer = cli.is_set("optimizer") ? cli.str("optimizer") : r.optimizer;
  s.scheduler = cli.is_set("scheduler") ? cli.str("scheduler") : r.scheduler;
  s.lr = num_or("lr", r.lr);
  s.momentum = num_or("momentum", r.momentum);
  s.weight_decay = num_or("weight-decay", 0);
  s.gamma = num_or("gamma", r.gamma);
  s.label_smoothing = num_or("label-smoothing", r.label_smoothing);
  s.batch_size = cli.is_set("batch-size") ? cli.integer("batch-size", 1, kMaxBatchSize) : r.batch_size;
  s.seed = cli.integer("seed");
  s.shuffle = !cli.is_set("no-shuffle");
  s.augment = cli.is_set("augment");
  s.amp = cli.str("amp");
  if (!(s.lr > 0)) throw UsageError("--lr must be positive");
  if (s.momentum < 0) throw UsageError("--momentum must be 0 or more");
  if (s.weight_decay < 0) throw UsageError("--weight-decay must be 0 or more");
  if (!(s.gamma > 0)) throw UsageError("--gamma must be positive");
  if (!(s.label_smoothing >= 0 && s.label_smoothing < 1)) throw UsageError("--label-smoothing must be in [0, 1)");
  a.epochs = cli.is_set("epochs") ? cli.integer("epochs", 1, kMaxEpochs) : 0;  // 0: the (resumed) model's default
  if (cli.is_set("threads")) a.threads = static_cast<int>(cli.integer("threads", 1, nabla::kMaxThreads));
  a.workers = cli.integer("workers", 0, kMaxWorkers);
  a.quiet = cli.is_set("quiet");
  a.device = cli.str("device");
  a.data = cli.is_set("data") ? cli.str("data") : "";
  a.checkpoint = cli.is_set("checkpoint") ? cli.str("checkpoint") : "";
  a.summary_json = cli.str("summary-json");
  a.tensorboard = cli.str("tensorboard");
  a.tensorboard_every = cli.integer("tensorboard-every", 1, kMaxLogEvery);
  a.timeout_s = cli.integer("timeout", 1, kMaxTimeout);
  a.shard = cli.str("shard");
  if (cli.is_set("tensorboard-every") && a.tensorboard.empty())
    throw UsageError("--tensorboard-every needs --tensorboard DIR (where to write the logs)");
  return a;
}

std::optional<EvalArgs> parse_eval_args(int argc, char** argv) {
  Cli cli("eval",
          "Evaluates a trained checkpoint on the test set: accuracy, per-class precision and recall,\n"
          "and the confusion matrix (rows: true digit, columns: predicted digit).");
  cli.option("checkpoint", "PATH", "a checkpoint written by `mnist train`", "checkpoints/mnist-cnn.safetensors")
      .option("data", "DIR", "folder with the IDX files", "the checkpoint's dataset in data/")
      .option("device", "NAME", "auto, cpu or cuda", "auto", {"auto", "cpu", "cuda"})
      .option("batch-size", "N", "evaluation batch size", "1000")
      .option("amp", "MODE",
              "mixed precision of the forward: off, bf16 or fp16 (under autocast, as torch.autocast), or saved: "
              "the mode the run trained with",
              "saved", {"saved", "off", "bf16", "fp16"})
      .flag("compile", "run the model through nabla::compile (captured on the first batch, replayed on the others)")
      .example("mnist eval --checkpoint checkpoints/mnist-cnn.safetensors")
      .example("mnist eval --compile        # batch norms folded, activations fused; the same accuracy")
      .example("mnist eval --amp off        # a bf16-trained model evaluated in float32");
  if (!cli.parse(argc, argv, 2)) return std::nullopt;
  EvalArgs a;
  a.amp = cli.str("amp");
  a.checkpoint = cli.str("checkpoint");
  a.data = cli.is_set("data") ? cli.str("data") : "";
  a.device = cli.str("device");
  a.batch_size = cli.integer("batch-size", 1, kMaxBatchSize);
  a.compile = cli.is_set("compile");
  return a;
}

std::optional<PredictArgs> parse_predict_args(int argc, char** argv) {
  Cli cli("predict", "Predicts the digit in each image with a trained checkpoint.");
  cli.option("checkpoint", "PATH", "a checkpoint written by `mnist train`", "checkpoints/mnist-cnn.safetensors")
      .option("device", "NAME", "auto, cpu or cuda", "auto", {"auto", "cpu", "cuda"})
      .flag("json", "one JSON object per line: {\"file\": ..., \"digit\": ..., \"probabilities\": [...]}")
      .option("save-input", "DIR", "also write each image as the model sees it (28x28 PNG) into DIR", "")
      .positional("IMAGE", "PNG, JPEG or BMP files: a digit, dark on light or light on dark", true)
      .example("mnist predict --checkpoint checkpoints/mnist-cnn.safetensors my-digit.png");
  if (!cli.parse(argc, argv, 2)) return std::nullopt;
  PredictArgs a;
  a.checkpoint = cli.str("checkpoint");
  a.device = cli.str("device");
  a.json = cli.is_set("json");
  a.save_input = cli.str("save-input");
  a.images = cli.positionals();
  return a;
}

std::optional<ExportArgs> parse_export_args(int argc, char** argv) {
  Cli cli("export",
          "Writes images of the test set as PNG files named <index>-<label>.png, picked at random\n"
          "(with --seed) or the first ones (--first). --invert writes dark digits on white, like a\n"
          "digit drawn on paper; `mnist predict` reads both.\n"
          "\n"
          "With --onnx FILE it writes the checkpoint's model as an ONNX file instead, for ONNX Runtime,\n"
          "TensorRT or OpenVINO: input \"image\", float32 (N, 1, 28, 28) with pixels in [0, 1] (light\n"
          "digit on dark, as MNIST; the normalization is part of the graph), output \"scores\" (N, 10)\n"
          "(the digit is the argmax), N dynamic.");
  cli.option("onnx", "FILE", "write the model of --checkpoint as ONNX to FILE (no images)", "")
      .option("checkpoint", "PATH", "the checkpoint to export with --onnx", "checkpoints/mnist-cnn.safetensors")
      .option("opset", "N", "the ONNX opset of --onnx (13 to 17)", "17")
      .option("out", "DIR", "folder to write the images to (created if missing)", "samples")
      .option("count", "N", "how many images", "10")
      .option("seed", "N", "which images: a random pick with this seed", "1")
      .flag("first", "take the first images of the test set instead of a random pick")
      .flag("invert", "dark digits on a white background")
      .option("dataset", "NAME", "mnist or fashion-mnist", "mnist", kDatasets)
      .option("data", "DIR", "folder with the IDX files", "data/mnist or data/fashion-mnist")
      .example("mnist export --count 10 --out samples")
      .example("mnist predict --checkpoint checkpoints/mnist-cnn.safetensors samples/*.png")
      .example("mnist export --onnx mnist-cnn.onnx --checkpoint checkpoints/mnist-cnn.safetensors");
  if (!cli.parse(argc, argv, 2)) return std::nullopt;
  ExportArgs a;
  a.onnx = cli.str("onnx");
  a.checkpoint = cli.str("checkpoint");
  a.opset = cli.integer("opset", 13, 17);
  a.out = cli.str("out");
  a.dataset = cli.str("dataset");
  a.data = cli.is_set("data") ? cli.str("data") : "";
  a.count = cli.integer("count", 1, kMaxCount);
  a.seed = cli.integer("seed");
  a.first = cli.is_set("first");
  a.invert = cli.is_set("invert");
  return a;
}

}  // namespace mnist
