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

#include "args.h"
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

// Up to `max` misclassified test images, (N, 1, 28, 28) in [0, 1], with what the model said.
struct Misclassified {
  int64_t max = 0;
  std::vector<Tensor> images;
  std::vector<std::pair<int64_t, int64_t>> predicted_true;
  int64_t count() const { return static_cast<int64_t>(predicted_true.size()); }
};

EvalResult evaluate(nn::Module& model, bool log_probs, const data::DatasetPtr& test_set, Device device,
                    Misclassified* wrong = nullptr) {
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
    Tensor pred = out.argmax(1);
    correct += (pred == y).sum().item<int64_t>();
    seen += y.numel();
    if (wrong && wrong->count() < wrong->max) {
      Tensor p = pred.cpu().contiguous(), t = batch.target.cpu().to(kInt64).contiguous();
      std::vector<int64_t> rows;
      for (int64_t i = 0; i < p.numel() && wrong->count() < wrong->max; ++i)
        if (p.data_ptr<int64_t>()[i] != t.data_ptr<int64_t>()[i]) {
          rows.push_back(i);
          wrong->predicted_true.emplace_back(p.data_ptr<int64_t>()[i], t.data_ptr<int64_t>()[i]);
        }
      if (!rows.empty()) wrong->images.push_back(batch.data.cpu().index_select(0, tensor(rows)));
    }
  }
  model.train();
  return {loss / std::max<int64_t>(seen, 1), static_cast<double>(correct) / std::max<int64_t>(seen, 1)};
}

// What --tensorboard logs at the end of an epoch (at the global step, like every event of the run,
// so that a resumed run's purge_step replaces what a crashed one logged after its checkpoint):
// test loss and accuracy, each parameter's values and last gradient as histograms, and the
// misclassified test digits as one grid image with a table of what the model said.
void log_epoch(tensorboard::SummaryWriter& tb, nn::Module& model, const EvalResult& test, const Misclassified& wrong,
               int64_t step) {
  tb.add_scalar("test/loss", test.loss, step);
  tb.add_scalar("test/accuracy", test.accuracy, step);
  for (const auto& [name, p] : model.named_parameters()) {
    tb.add_histogram("weights/" + name, p, step);
    if (p.grad().defined()) tb.add_histogram("grads/" + name, p.grad(), step);
  }
  if (wrong.count() > 0) {
    tb.add_images("test/misclassified", cat(wrong.images, 0), step);
    std::string table = "First " + std::to_string(wrong.count()) +
                        " misclassified test digits, in the order of the image (8 per row):\n\n"
                        "| # | predicted | true |\n|---|---|---|\n";
    for (int64_t i = 0; i < wrong.count(); ++i)
      table += "| " + std::to_string(i + 1) + " | " + std::to_string(wrong.predicted_true[i].first) + " | " +
               std::to_string(wrong.predicted_true[i].second) + " |\n";
    tb.add_text("test/misclassified", table, step);
  }
  tb.flush();  // so that TensorBoard shows the epoch while the next one trains
}

std::string json_number(double v) { return number_text(v, 10); }

}  // namespace

int cmd_train(int argc, char** argv) {
  std::optional<TrainArgs> args = parse_train_args(argc, argv);
  if (!args) return kExitOk;

  // ---- settings: from the command line, or from the checkpoint being resumed ---------------------
  Settings s = args->settings;
  std::map<std::string, std::string> resume_info;
  const std::string& resume = args->resume;
  if (!resume.empty()) {
    resume_info = read_checkpoint_info(resume);
    s = settings_from_metadata(resume_info, resume);
    check_resume_settings(*args, s);
  }
  const int64_t epochs = args->epochs > 0 ? args->epochs : default_recipe(s.model).epochs;
  if (args->threads) set_num_threads(*args->threads);
  const int64_t workers = args->workers;
  bool quiet = args->quiet;
  Device device = pick_device(args->device);
  std::string data_dir = !args->data.empty() ? args->data : default_data_dir(s.dataset);
  std::string ckpt_path = !args->checkpoint.empty() ? args->checkpoint
                          : !resume.empty()         ? resume
                                                    : "checkpoints/" + s.dataset + "-" + s.model + ".safetensors";
  std::string csv_path = fs::path(ckpt_path).replace_extension(".csv").string();

  // ---- data, model, optimizer ---------------------------------------------------------------------
  auto train_set = load_split(s.dataset, data_dir, true);
  auto test_set = load_split(s.dataset, data_dir, false);
  manual_seed(static_cast<uint64_t>(s.seed));
  ModelInfo m = make_model(s.model);
  nn::Module& model = *m.module;
  if (const std::string& init = args->init_from; !init.empty()) {  // weights trained in Python
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
    // The loader's position and the running sums of a mid-epoch save, each checked.
    RunProgress p = progress_from_metadata(ck.metadata, resume, train_set->size());
    train_seconds = p.train_seconds;
    loader.load_state({p.loader_seed, p.loader_epoch, p.loader_index});
    partial_loss = p.partial_loss;
    partial_correct = p.partial_correct;
    partial_seen = p.partial_seen;
    partial_seconds = p.partial_seconds;
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
    std::printf("%s lr %g%s, %s%s, batch %lld, %lld epoch%s%s\n", s.optimizer.c_str(), s.lr,
                s.optimizer == "sgd" ? (" momentum " + json_number(s.momentum)).c_str() : "", sched_desc.c_str(),
                s.label_smoothing > 0 ? (", label smoothing " + json_number(s.label_smoothing)).c_str() : "",
                static_cast<long long>(s.batch_size), static_cast<long long>(epochs), epochs == 1 ? "" : "s",
                resume.empty() ? "" : (" (from epoch " + std::to_string(start_epoch + 1) + ")").c_str());
    std::printf("checkpoint: %s\n", ckpt_path.c_str());
    std::fflush(stdout);
  }

  // ---- checkpoints and the CSV --------------------------------------------------------------------
  fs::path ckdir = fs::path(ckpt_path).parent_path();
  if (std::error_code ec; !ckdir.empty() && (fs::create_directories(ckdir, ec), ec))
    throw Failure("cannot create the folder '" + ckdir.string() + "' for the checkpoint: " + ec.message(), kExitError);
  auto save = [&](int64_t epochs_done) {
    auto md = to_metadata(s);
    data::LoaderState ls = loader.state();
    md.merge(to_metadata(RunProgress{train_seconds, partial_loss, partial_seconds, ls.seed, ls.epoch, ls.index, partial_seen,
                                  partial_correct}));
    optim::save_checkpoint(ckpt_path, {.model = &model, .optimizer = opt.get(), .scheduler = sched.scheduler.get(),
                                       .epoch = epochs_done, .step = step, .metadata = md});
  };
  // The CSV holds one row per saved epoch: it is rewritten (atomically) after each checkpoint save,
  // so it never describes an epoch whose checkpoint was not saved, and a new run leaves the old
  // file alone until its own first save. Resuming keeps the rows of the epochs the checkpoint has.
  std::string csv = "epoch,train_loss,train_acc,test_loss,test_acc,seconds,lr\n";
  if (!resume.empty()) {
    std::ifstream old(csv_path);
    std::string line;
    for (bool header = true; std::getline(old, line); header = false) {
      char* end = nullptr;
      long long e = std::strtoll(line.c_str(), &end, 10);
      if (!header && end != line.c_str() && *end == ',' && e >= 1 && e <= start_epoch) csv += line + "\n";
    }
  }

  // ---- TensorBoard -------------------------------------------------------------------------------
  std::optional<tensorboard::SummaryWriter> tb;
  const int64_t tb_every = args->tensorboard_every;
  double tb_loss = 0;
  int64_t tb_correct = 0, tb_seen = 0;
  if (!args->tensorboard.empty()) {
    tensorboard::SummaryWriterOptions o;
    if (!resume.empty()) o.purge_step = step + 1;  // events a crashed run logged after its checkpoint go
    try {
      tb.emplace(args->tensorboard, o);
    } catch (const IOError& e) {
      throw Failure(std::string("--tensorboard: ") + e.what(), kExitError);
    }
    std::printf("tensorboard: %s (view with: tensorboard --logdir %s)\n", args->tensorboard.c_str(),
                args->tensorboard.c_str());
    std::fflush(stdout);
  }

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
      // (Label smoothing on a model that outputs log-probabilities: cross_entropy's log_softmax of them
      // is themselves.)
      Tensor loss = m.outputs_log_probs && s.label_smoothing == 0
                        ? nn::functional::nll_loss(out, y)
                        : nn::functional::cross_entropy(out, y, {.label_smoothing = s.label_smoothing});
      opt->zero_grad();
      loss.backward();
      opt->step();
      if (sched.per_batch) sched.scheduler->step();
      ++step;
      ++batch_no;
      double batch_loss;
      int64_t batch_correct;
      {
        autograd::NoGradGuard ng;
        batch_loss = loss.item<double>();
        batch_correct = (out.argmax(1) == y).sum().item<int64_t>();
      }
      partial_loss += batch_loss * static_cast<double>(y.numel());
      partial_correct += batch_correct;
      partial_seen += y.numel();
      if (tb) {  // the train scalars: means over the steps since the last ones
        tb_loss += batch_loss * static_cast<double>(y.numel());
        tb_correct += batch_correct;
        tb_seen += y.numel();
        if (step % tb_every == 0) {
          tb->add_scalar("train/loss", tb_loss / static_cast<double>(tb_seen), step);
          tb->add_scalar("train/accuracy", static_cast<double>(tb_correct) / static_cast<double>(tb_seen), step);
          tb->add_scalar("train/lr", opt->lr(), step);
          tb_loss = 0;
          tb_correct = tb_seen = 0;
        }
      }
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
    Misclassified wrong{.max = tb ? 64 : 0};
    last = evaluate(model, m.outputs_log_probs, test_set, device, tb ? &wrong : nullptr);
    if (tb) log_epoch(*tb, model, last, wrong, step);
    std::printf("epoch %lld/%lld  train loss %.4f acc %.2f%%  test loss %.4f acc %.2f%%  %s  %s img/s\n",
                static_cast<long long>(epoch + 1), static_cast<long long>(epochs), train_loss, train_acc * 100,
                last.loss, last.accuracy * 100, format_duration(epoch_seconds).c_str(),
                format_count(seen / std::max(epoch_seconds, 1e-9)).c_str());
    std::fflush(stdout);
    save(epoch + 1);
    csv += std::to_string(epoch + 1) + ',' + json_number(train_loss) + ',' + json_number(train_acc) + ',' +
           json_number(last.loss) + ',' + json_number(last.accuracy) + ',' + json_number(epoch_seconds) + ',' +
           json_number(lr_now) + '\n';
    io::atomic_write(csv_path, [&](std::FILE* f) { io::write_all(f, csv.data(), csv.size(), csv_path); });
  }
  std::signal(SIGINT, SIG_DFL);
  if (tb) {  // the HPARAMS tab: this run's settings next to its final metrics
    tb->add_hparams({{"model", s.model}, {"dataset", s.dataset}, {"optimizer", s.optimizer}, {"scheduler", s.scheduler},
                     {"lr", s.lr}, {"momentum", s.momentum}, {"weight_decay", s.weight_decay}, {"gamma", s.gamma},
                     {"batch_size", s.batch_size}, {"epochs", epochs}, {"seed", s.seed}, {"shuffle", s.shuffle},
                     {"augment", s.augment}, {"label_smoothing", s.label_smoothing}},
                    {{"hparam/test_accuracy", last.accuracy}, {"hparam/test_loss", last.loss}}, {}, "", step);
    tb->close();
  }

  std::printf("test accuracy %.2f%% after %lld epoch%s, %s of training\n", last.accuracy * 100,
              static_cast<long long>(epochs), epochs == 1 ? "" : "s", format_duration(train_seconds).c_str());
  std::printf("saved %s (metrics: %s)\ntry:  mnist eval --checkpoint %s\n      mnist predict --checkpoint %s your-digit.png\n",
              ckpt_path.c_str(), csv_path.c_str(), ckpt_path.c_str(), ckpt_path.c_str());
  const std::string& summary = args->summary_json;
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
