// mnist train: trains a model, evaluates it after every epoch, and keeps a checkpoint and a CSV of
// per-epoch metrics. Ctrl-C saves a checkpoint mid-epoch; --resume continues exactly where it
// stopped (same data order, same dropout masks, same optimizer and scheduler state), so
// `--epochs 1` followed by `--resume ... --epochs 2` ends with the weights of one `--epochs 2` run.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli.h"
#include "core/io.h"
#include "common.h"
#include "progress.h"

namespace mnist {

using namespace nabla;
namespace fs = std::filesystem;

namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted.store(true); }

struct Settings {
  std::string model, dataset, optimizer, scheduler;
  double lr, momentum, weight_decay, gamma;
  int64_t batch_size, seed;
  bool shuffle, augment;
};

// The settings that define a run are stored in its checkpoint and restored by --resume.
std::map<std::string, std::string> to_metadata(const Settings& s) {
  auto d = [](double v) {
    std::ostringstream os;
    os.precision(17);
    os << v;
    return os.str();
  };
  return {{"mnist.model", s.model},           {"mnist.dataset", s.dataset},
          {"mnist.optimizer", s.optimizer},   {"mnist.scheduler", s.scheduler},
          {"mnist.lr", d(s.lr)},              {"mnist.momentum", d(s.momentum)},
          {"mnist.weight_decay", d(s.weight_decay)}, {"mnist.gamma", d(s.gamma)},
          {"mnist.batch_size", std::to_string(s.batch_size)}, {"mnist.seed", std::to_string(s.seed)},
          {"mnist.shuffle", s.shuffle ? "1" : "0"}, {"mnist.augment", s.augment ? "1" : "0"}};
}

Settings from_metadata(const std::map<std::string, std::string>& m) {
  Settings s;
  s.model = m.at("mnist.model");
  s.dataset = m.at("mnist.dataset");
  s.optimizer = m.at("mnist.optimizer");
  s.scheduler = m.at("mnist.scheduler");
  s.lr = std::stod(m.at("mnist.lr"));
  s.momentum = std::stod(m.at("mnist.momentum"));
  s.weight_decay = std::stod(m.at("mnist.weight_decay"));
  s.gamma = std::stod(m.at("mnist.gamma"));
  s.batch_size = std::stoll(m.at("mnist.batch_size"));
  s.seed = std::stoll(m.at("mnist.seed"));
  s.shuffle = m.at("mnist.shuffle") == "1";
  s.augment = m.count("mnist.augment") && m.at("mnist.augment") == "1";
  return s;
}

std::unique_ptr<optim::Optimizer> make_optimizer(const Settings& s, std::vector<Tensor> params) {
  if (s.optimizer == "sgd")
    return std::make_unique<optim::SGD>(params, optim::SGDOptions{.lr = s.lr, .momentum = s.momentum, .weight_decay = s.weight_decay});
  if (s.optimizer == "adam")
    return std::make_unique<optim::Adam>(params, optim::AdamOptions{.lr = s.lr, .weight_decay = s.weight_decay});
  if (s.optimizer == "adamw")
    return std::make_unique<optim::AdamW>(params, optim::AdamWOptions{.lr = s.lr, .weight_decay = s.weight_decay});
  if (s.optimizer == "rmsprop")
    return std::make_unique<optim::RMSprop>(params, optim::RMSpropOptions{.lr = s.lr, .weight_decay = s.weight_decay, .momentum = s.momentum});
  if (s.optimizer == "adagrad")
    return std::make_unique<optim::Adagrad>(params, optim::AdagradOptions{.lr = s.lr, .weight_decay = s.weight_decay});
  if (s.optimizer == "adadelta")
    return std::make_unique<optim::Adadelta>(params, optim::AdadeltaOptions{.lr = s.lr, .weight_decay = s.weight_decay});
  if (s.optimizer == "nadam")
    return std::make_unique<optim::NAdam>(params, optim::NAdamOptions{.lr = s.lr, .weight_decay = s.weight_decay});
  if (s.optimizer == "radam")
    return std::make_unique<optim::RAdam>(params, optim::RAdamOptions{.lr = s.lr, .weight_decay = s.weight_decay});
  throw UsageError("unknown optimizer '" + s.optimizer + "'");
}

// Schedulers that step per epoch ("step", "exponential") do not depend on the number of epochs;
// "cosine" and "onecycle" step per batch over the whole run and do.
struct Schedule {
  std::unique_ptr<optim::LRScheduler> scheduler;
  bool per_batch = false;
};
Schedule make_scheduler(const Settings& s, optim::Optimizer& opt, int64_t epochs, int64_t steps_per_epoch) {
  if (s.scheduler == "none") return {};
  if (s.scheduler == "step") return {std::make_unique<optim::StepLR>(opt, 1, s.gamma), false};
  if (s.scheduler == "exponential") return {std::make_unique<optim::ExponentialLR>(opt, s.gamma), false};
  if (s.scheduler == "cosine")
    return {std::make_unique<optim::CosineAnnealingLR>(opt, epochs * steps_per_epoch), true};
  if (s.scheduler == "onecycle")
    return {std::make_unique<optim::OneCycleLR>(opt, s.lr, optim::OneCycleOptions{.total_steps = epochs * steps_per_epoch}),
            true};
  throw UsageError("unknown scheduler '" + s.scheduler + "'");
}

struct EvalResult {
  double loss = 0, accuracy = 0;
};

EvalResult evaluate(nn::Module& model, bool log_probs, const data::DatasetPtr& test_set, Device device) {
  autograd::InferenceMode guard;
  model.eval();
  double loss = 0;
  int64_t correct = 0, seen = 0;
  data::DataLoader loader(test_set, {.batch_size = 1000});
  for (auto& batch : loader) {
    Tensor x = normalize(batch.data.to(device)), y = batch.target.to(device);
    Tensor out = model(x);
    Tensor l = log_probs ? nn::functional::nll_loss(out, y, {.reduction = nn::Reduction::sum})
                         : nn::functional::cross_entropy(out, y, {.reduction = nn::Reduction::sum});
    loss += l.item<double>();
    correct += (out.argmax(1) == y).sum().item<int64_t>();
    seen += y.numel();
  }
  model.train();
  return {loss / std::max<int64_t>(seen, 1), static_cast<double>(correct) / std::max<int64_t>(seen, 1)};
}

std::string json_number(double v) {
  std::ostringstream os;
  os.precision(10);
  os << v;
  return os.str();
}

}  // namespace

int cmd_train(int argc, char** argv) {
  Cli cli("train", "Trains a model on MNIST (or Fashion-MNIST), evaluating on the test set after each epoch.\n"
                   "Without options it runs the default recipe: a small CNN with batch norm, Adam (lr 0.002, x0.2 per\n"
                   "epoch), batch 64, 3 epochs: 99%+ test accuracy.");
  cli.option("model", "NAME", "mlp, lenet (libtorch's example model), cnn or pytorch (PyTorch's example model)", "cnn",
             {"mlp", "lenet", "cnn", "pytorch"})
      .option("epochs", "N", "total number of epochs (with --resume: the total, not additional ones)", "3")
      .option("batch-size", "N", "training batch size", "model default")
      .option("lr", "X", "learning rate", "model default")
      .option("momentum", "X", "momentum of sgd and rmsprop", "model default")
      .option("weight-decay", "X", "L2 penalty", "0")
      .option("optimizer", "NAME", "sgd, adam, adamw, nadam, radam, rmsprop, adagrad or adadelta", "model default",
              {"sgd", "adam", "adamw", "nadam", "radam", "rmsprop", "adagrad", "adadelta"})
      .option("scheduler", "NAME", "none, step or exponential (per epoch), cosine or onecycle (per batch)",
              "model default", {"none", "step", "exponential", "cosine", "onecycle"})
      .option("gamma", "X", "learning-rate factor per epoch of the step and exponential schedulers", "model default")
      .option("seed", "N", "random seed (initial weights, data order, dropout)", "1")
      .flag("no-shuffle", "visit the training images in file order (as libtorch's example)")
      .flag("augment", "random small rotations and shifts of the training images")
      .option("device", "NAME", "auto, cpu or cuda", "auto", {"auto", "cpu", "cuda"})
      .option("threads", "N", "CPU threads for the math", "all cores")
      .option("workers", "N", "data loader threads preparing batches ahead", "0")
      .option("dataset", "NAME", "mnist or fashion-mnist", "mnist", {"mnist", "fashion-mnist"})
      .option("data", "DIR", "folder with the four IDX files (plain or .gz)", "data/<dataset>")
      .option("checkpoint", "PATH", "where to save the model after each epoch", "checkpoints/<dataset>-<model>.safetensors")
      .option("resume", "PATH", "continue the run saved in this checkpoint", "")
      .option("init-from", "PATH", "start from the weights of a PyTorch state dict (torch.save(model.state_dict(), PATH)) of the same architecture", "")
      .option("summary-json", "PATH", "write test_acc, train_seconds, epochs, images_per_second here at the end", "")
      .flag("quiet", "no progress bar, only the per-epoch lines")
      .example("mnist train                                  # the default recipe")
      .example("mnist train --model lenet --optimizer sgd --lr 0.01 --momentum 0.5 --batch-size 64 --no-shuffle")
      .example("mnist train --epochs 5 --resume checkpoints/mnist-cnn.safetensors");
  if (!cli.parse(argc, argv, 2)) return kExitOk;

  // ---- settings: from the command line, or from the checkpoint being resumed ---------------------
  Settings s;
  std::map<std::string, std::string> resume_info;
  std::string resume = cli.str("resume");
  if (!resume.empty()) {
    resume_info = read_checkpoint_info(resume);
    s = from_metadata(resume_info);
    for (const char* opt : {"model", "dataset", "optimizer", "scheduler", "lr", "momentum", "weight-decay", "gamma",
                            "batch-size", "seed", "no-shuffle", "augment"})
      if (cli.is_set(opt))
        throw UsageError(std::string("--") + opt + " cannot change when resuming: the run in '" + resume +
                         "' was started with its own settings (drop --" + opt + ")");
  } else {
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
    s.batch_size = cli.is_set("batch-size") ? cli.integer("batch-size") : r.batch_size;
    s.seed = cli.integer("seed");
    s.shuffle = !cli.is_set("no-shuffle");
    s.augment = cli.is_set("augment");
  }
  int64_t epochs = cli.integer("epochs");
  if (epochs < 1) throw UsageError("--epochs must be at least 1");
  if (s.batch_size < 1) throw UsageError("--batch-size must be at least 1");
  if (!(s.lr > 0)) throw UsageError("--lr must be positive");
  if (cli.is_set("threads")) {
    int64_t t = cli.integer("threads");
    if (t < 1) throw UsageError("--threads must be at least 1");
    set_num_threads(static_cast<int>(t));
  }
  int64_t workers = cli.integer("workers");
  if (workers < 0) throw UsageError("--workers must be 0 or more");
  bool quiet = cli.is_set("quiet");
  Device device = pick_device(cli.str("device"));
  std::string data_dir = cli.is_set("data") ? cli.str("data") : default_data_dir(s.dataset);
  std::string ckpt_path = cli.is_set("checkpoint") ? cli.str("checkpoint")
                          : !resume.empty()        ? resume
                                                   : "checkpoints/" + s.dataset + "-" + s.model + ".safetensors";
  std::string csv_path = fs::path(ckpt_path).replace_extension(".csv").string();

  // ---- data, model, optimizer ---------------------------------------------------------------------
  auto train_set = load_split(s.dataset, data_dir, true);
  auto test_set = load_split(s.dataset, data_dir, false);
  manual_seed(static_cast<uint64_t>(s.seed));
  ModelInfo m = make_model(s.model);
  nn::Module& model = *m.module;
  if (std::string init = cli.str("init-from"); !init.empty()) {  // weights trained in Python
    if (!resume.empty()) throw UsageError("--init-from starts a new run; --resume continues one: pass only one of them");
    try {
      model.load_state_dict(torch_io::load(init).flatten_tensors());
    } catch (const ValueError& e) {
      throw Failure("'" + init + "' does not fit --model " + s.model + ": " + e.what(), kExitError);
    }
    std::printf("initialized %s from %s\n", s.model.c_str(), init.c_str());
  }
  model.to(device);
  data::DatasetPtr train_data = train_set;
  if (s.augment)  // small random rotations and shifts, seeded per batch (so resumes reproduce them)
    train_data = std::make_shared<data::TransformDataset>(train_set, data::RandomAffine(8, {0.08, 0.08}));
  data::DataLoader loader(train_data, {.batch_size = s.batch_size, .shuffle = s.shuffle,
                                      .seed = static_cast<uint64_t>(s.seed), .num_workers = static_cast<int>(workers)});
  int64_t steps_per_epoch = loader.size();
  auto opt = make_optimizer(s, model.parameters());
  Schedule sched = make_scheduler(s, *opt, epochs, steps_per_epoch);

  int64_t start_epoch = 0, step = 0;
  double train_seconds = 0, partial_loss = 0, partial_seconds = 0;
  int64_t partial_correct = 0, partial_seen = 0;
  if (!resume.empty()) {
    optim::Checkpoint ck{.model = &model, .optimizer = opt.get(), .scheduler = sched.scheduler.get()};
    optim::load_checkpoint(resume, ck);
    start_epoch = ck.epoch;
    step = ck.step;
    auto get = [&](const char* k, const char* def) { return ck.metadata.count(k) ? ck.metadata.at(k) : std::string(def); };
    train_seconds = std::stod(get("mnist.train_seconds", "0"));
    data::LoaderState ls{static_cast<uint64_t>(std::stoull(get("mnist.loader_seed", "0"))),
                         std::stoll(get("mnist.loader_epoch", "0")), std::stoll(get("mnist.loader_index", "0"))};
    loader.load_state(ls);
    partial_loss = std::stod(get("mnist.partial_loss", "0"));
    partial_correct = std::stoll(get("mnist.partial_correct", "0"));
    partial_seen = std::stoll(get("mnist.partial_seen", "0"));
    partial_seconds = std::stod(get("mnist.partial_seconds", "0"));
    if (start_epoch >= epochs)
      throw UsageError("the run in '" + resume + "' already finished " + std::to_string(start_epoch) +
                       " epochs; pass a larger --epochs to train further");
  }

  // ---- the header ---------------------------------------------------------------------------------
  {
    std::string sched_desc = s.scheduler == "none"   ? "constant lr"
                             : s.scheduler == "step" || s.scheduler == "exponential"
                                 ? "lr x" + json_number(s.gamma) + " per epoch"
                                 : s.scheduler + " schedule";
    std::printf("%s %s on %s (%s train / %s test images), %s%s\n", resume.empty() ? "training" : "resuming",
                s.model.c_str(), dataset_title(s.dataset).c_str(), format_count(train_set->size()).c_str(),
                format_count(test_set->size()).c_str(), device.str().c_str(),
                device.is_cpu() ? (" with " + std::to_string(get_num_threads()) + " threads").c_str() : "");
    std::printf("%s lr %g%s, %s, batch %lld, %lld epoch%s%s\n", s.optimizer.c_str(), s.lr,
                s.optimizer == "sgd" ? (" momentum " + json_number(s.momentum)).c_str() : "", sched_desc.c_str(),
                static_cast<long long>(s.batch_size), static_cast<long long>(epochs), epochs == 1 ? "" : "s",
                resume.empty() ? "" : (" (from epoch " + std::to_string(start_epoch + 1) + ")").c_str());
    std::printf("checkpoint: %s\n", ckpt_path.c_str());
    std::fflush(stdout);
  }

  // ---- checkpoints and the CSV --------------------------------------------------------------------
  fs::path ckdir = fs::path(ckpt_path).parent_path();
  if (!ckdir.empty()) fs::create_directories(ckdir);
  auto save = [&](int64_t epochs_done) {
    auto md = to_metadata(s);
    data::LoaderState ls = loader.state();
    md["mnist.loader_seed"] = std::to_string(ls.seed);
    md["mnist.loader_epoch"] = std::to_string(ls.epoch);
    md["mnist.loader_index"] = std::to_string(ls.index);
    md["mnist.train_seconds"] = json_number(train_seconds);
    md["mnist.partial_loss"] = json_number(partial_loss);
    md["mnist.partial_correct"] = std::to_string(partial_correct);
    md["mnist.partial_seen"] = std::to_string(partial_seen);
    md["mnist.partial_seconds"] = json_number(partial_seconds);
    optim::save_checkpoint(ckpt_path, {.model = &model, .optimizer = opt.get(), .scheduler = sched.scheduler.get(),
                                       .epoch = epochs_done, .step = step, .metadata = md});
  };
  bool new_csv = resume.empty() || !fs::exists(csv_path);
  std::ofstream csv(csv_path, resume.empty() ? std::ios::trunc : std::ios::app);
  if (!csv) throw Failure("cannot write '" + csv_path + "'", kExitError);
  if (new_csv) csv << "epoch,train_loss,train_acc,test_loss,test_acc,seconds,lr\n";

  std::signal(SIGINT, on_sigint);
  bool interactive = !quiet && stdout_is_terminal();
  EvalResult last{};
  for (int64_t epoch = start_epoch; epoch < epochs; ++epoch) {
    model.train();
    double lr_now = opt->lr();
    Progress progress(epoch + 1, epochs, steps_per_epoch, interactive);
    int64_t batch_no = partial_seen / std::max<int64_t>(s.batch_size, 1);
    for (auto& batch : loader) {
      Tensor x = normalize(batch.data.to(device)), y = batch.target.to(device);
      Tensor out = model(x);
      Tensor loss = m.outputs_log_probs ? nn::functional::nll_loss(out, y) : nn::functional::cross_entropy(out, y);
      opt->zero_grad();
      loss.backward();
      opt->step();
      if (sched.per_batch) sched.scheduler->step();
      ++step;
      ++batch_no;
      {
        autograd::NoGradGuard ng;
        partial_loss += loss.item<double>() * static_cast<double>(y.numel());
        partial_correct += (out.argmax(1) == y).sum().item<int64_t>();
      }
      partial_seen += y.numel();
      progress.update(batch_no, partial_loss / partial_seen, static_cast<double>(partial_correct) / partial_seen,
                      partial_seen);
      if (g_interrupted.load()) {
        progress.finish();
        partial_seconds += progress.seconds();
        train_seconds += progress.seconds();
        save(epoch);
        std::printf("interrupted: saved checkpoint %s (epoch %lld, batch %lld/%lld)\nresume with:  mnist train --resume %s --epochs %lld\n",
                    ckpt_path.c_str(), static_cast<long long>(epoch + 1), static_cast<long long>(batch_no),
                    static_cast<long long>(steps_per_epoch), ckpt_path.c_str(), static_cast<long long>(epochs));
        return kExitInterrupted;
      }
    }
    progress.finish();
    double epoch_seconds = partial_seconds + progress.seconds();
    train_seconds += progress.seconds();
    if (!sched.per_batch && sched.scheduler) sched.scheduler->step();
    double train_loss = partial_loss / std::max<int64_t>(partial_seen, 1);
    double train_acc = static_cast<double>(partial_correct) / std::max<int64_t>(partial_seen, 1);
    int64_t seen = partial_seen;
    partial_loss = 0;
    partial_correct = partial_seen = 0;
    partial_seconds = 0;
    last = evaluate(model, m.outputs_log_probs, test_set, device);
    std::printf("epoch %lld/%lld  train loss %.4f acc %.2f%%  test loss %.4f acc %.2f%%  %s  %s img/s\n",
                static_cast<long long>(epoch + 1), static_cast<long long>(epochs), train_loss, train_acc * 100,
                last.loss, last.accuracy * 100, format_duration(epoch_seconds).c_str(),
                format_count(seen / std::max(epoch_seconds, 1e-9)).c_str());
    std::fflush(stdout);
    csv << epoch + 1 << ',' << json_number(train_loss) << ',' << json_number(train_acc) << ','
        << json_number(last.loss) << ',' << json_number(last.accuracy) << ',' << json_number(epoch_seconds) << ','
        << json_number(lr_now) << '\n'
        << std::flush;
    save(epoch + 1);
  }
  std::signal(SIGINT, SIG_DFL);

  std::printf("test accuracy %.2f%% after %lld epochs, %s of training\n", last.accuracy * 100,
              static_cast<long long>(epochs), format_duration(train_seconds).c_str());
  std::printf("saved %s (metrics: %s)\ntry:  mnist eval --checkpoint %s\n      mnist predict --checkpoint %s your-digit.png\n",
              ckpt_path.c_str(), csv_path.c_str(), ckpt_path.c_str(), ckpt_path.c_str());
  std::string summary = cli.str("summary-json");
  if (!summary.empty()) {
    double ips = train_seconds > 0 ? static_cast<double>(train_set->size()) * static_cast<double>(epochs) / train_seconds : 0;
    io::atomic_write(summary, [&](std::FILE* f) {
      std::string json = "{\"test_acc\": " + json_number(last.accuracy) + ", \"test_loss\": " + json_number(last.loss) +
                         ", \"train_seconds\": " + json_number(train_seconds) +
                         ", \"epochs\": " + std::to_string(epochs) + ", \"images_per_second\": " + json_number(ips) +
                         ", \"model\": \"" + s.model + "\", \"dataset\": \"" + s.dataset + "\", \"device\": \"" +
                         device.str() + "\", \"checkpoint\": \"" + json_escape(ckpt_path) +
                         "\", \"data\": \"" + json_escape(data_dir) + "\"}\n";
      io::write_all(f, json.data(), json.size(), summary);
    });
  }
  return kExitOk;
}

}  // namespace mnist
