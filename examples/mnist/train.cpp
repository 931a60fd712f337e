// mnist train: trains a model, evaluates it after every epoch, and keeps a checkpoint and a CSV of
// per-epoch metrics. Ctrl-C saves a checkpoint mid-epoch; --resume continues exactly where it
// stopped (same data order, same dropout masks, same optimizer and scheduler state), so
// `--epochs 1` followed by `--resume ... --epochs 2` ends with the weights of one `--epochs 2` run.
//
// Data-parallel (started by nabla-run or torchrun, WORLD_SIZE > 1): every process joins the Gloo
// process group (with --device cuda the NCCL one, each process on the GPU of its LOCAL_RANK),
// trains the same model wrapped in DistributedDataParallel on its own share of the training images
// (a DistributedSampler: --batch-size images per process per step, so the global batch is world
// size x --batch-size), and evaluates its own slice of the test set; the sums are all-reduced, so
// the printed figures are the whole sets'. Rank 0 alone prints and writes the checkpoint, the CSV,
// TensorBoard logs and --summary-json; every rank reads --resume (on several machines, copy it to
// each first).
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "data/distributed_sampler.h"
#include "examples/amp.h"
#include "examples/mnist/args.h"
#include "examples/mnist/cli.h"
#include "examples/mnist/common.h"
#include "examples/mnist/progress.h"
#include "io/file.h"

#ifdef NABLA_MNIST_DISTRIBUTED
#include "distributed/distributed.h"
#include "distributed/distributed_data_parallel.h"
#include "distributed/fully_sharded_data_parallel.h"
#include "distributed/process_group_nccl.h"
#include "distributed/zero_redundancy_optimizer.h"
#endif

namespace mnist {

using namespace nabla;
namespace fs = std::filesystem;

namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted.store(true); }

std::unique_ptr<optim::Optimizer> make_optimizer(const Settings& s, std::vector<Tensor> params) {
  if (s.optimizer == "sgd")
    return std::make_unique<optim::SGD>(
        params, optim::SGDOptions{.lr = s.lr, .momentum = s.momentum, .weight_decay = s.weight_decay});
  if (s.optimizer == "adam")
    return std::make_unique<optim::Adam>(params, optim::AdamOptions{.lr = s.lr, .weight_decay = s.weight_decay});
  if (s.optimizer == "adamw")
    return std::make_unique<optim::AdamW>(params, optim::AdamWOptions{.lr = s.lr, .weight_decay = s.weight_decay});
  if (s.optimizer == "rmsprop")
    return std::make_unique<optim::RMSprop>(
        params, optim::RMSpropOptions{.lr = s.lr, .weight_decay = s.weight_decay, .momentum = s.momentum});
  if (s.optimizer == "adagrad")
    return std::make_unique<optim::Adagrad>(params, optim::AdagradOptions{.lr = s.lr, .weight_decay = s.weight_decay});
  if (s.optimizer == "adadelta")
    return std::make_unique<optim::Adadelta>(params,
                                             optim::AdadeltaOptions{.lr = s.lr, .weight_decay = s.weight_decay});
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
  if (s.scheduler == "cosine") return {std::make_unique<optim::CosineAnnealingLR>(opt, epochs * steps_per_epoch), true};
  if (s.scheduler == "onecycle")
    return {
        std::make_unique<optim::OneCycleLR>(opt, s.lr, optim::OneCycleOptions{.total_steps = epochs * steps_per_epoch}),
        true};
  throw UsageError("unknown scheduler '" + s.scheduler + "'");
}

struct EvalResult {
  double loss = 0, accuracy = 0;
};

// What evaluate() adds up over the images it sees (summed over the ranks of a data-parallel run).
struct EvalSums {
  double loss = 0;
  int64_t correct = 0, seen = 0;
  EvalResult result() const {
    return {loss / static_cast<double>(std::max<int64_t>(seen, 1)),
            static_cast<double>(correct) / static_cast<double>(std::max<int64_t>(seen, 1))};
  }
};

// Up to `max` misclassified test images, (N, 1, 28, 28) in [0, 1], with what the model said.
struct Misclassified {
  int64_t max = 0;
  std::vector<Tensor> images;
  std::vector<std::pair<int64_t, int64_t>> predicted_true;
  int64_t count() const { return static_cast<int64_t>(predicted_true.size()); }
};

using examples::amp_region;  // --amp: the autocast region the forward runs in (none for off)

EvalSums evaluate(nn::Module& model, bool log_probs, const std::string& amp, const data::DatasetPtr& test_set,
                  Device device, Misclassified* wrong = nullptr) {
  autograd::InferenceMode guard;
  model.eval();
  double loss = 0;
  int64_t correct = 0, seen = 0;
  // For a GPU: page-locked batches, copied without waiting (no host synchronization per batch).
  const bool gpu = device.is_cuda();
  data::DataLoader loader(test_set, {.batch_size = 1000, .pin_memory = gpu});
  for (auto& batch : loader) {
    Tensor x = normalize(batch.data.to(device, gpu)), y = batch.target.to(device, gpu);
    auto region = amp_region(amp, device);
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
  return {loss, correct, seen};
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

// Running means of the train loss and accuracy over some images (an epoch so far, or the steps since
// the last TensorBoard point).
struct Tally {
  double loss_sum = 0;
  int64_t correct = 0, seen = 0;
  void add(double batch_loss, int64_t batch_correct, int64_t n) {
    loss_sum += batch_loss * static_cast<double>(n);
    correct += batch_correct;
    seen += n;
  }
  double loss() const { return loss_sum / static_cast<double>(std::max<int64_t>(seen, 1)); }
  double accuracy() const { return static_cast<double>(correct) / static_cast<double>(std::max<int64_t>(seen, 1)); }
};

// The data-parallel side of a run. Off (world size 1, no process group) unless the launcher set
// WORLD_SIZE > 1; then join() initializes the process group (env://: RANK, MASTER_ADDR,
// MASTER_PORT): Gloo on the CPU, or with --device cuda NCCL with one GPU per process (LOCAL_RANK's,
// as torchrun's convention); the model is trained through DistributedDataParallel.
class DataParallel {
 public:
  static int world_size_from_env() {
    const char* w = std::getenv("WORLD_SIZE");
    if (!w || !*w) return 1;
    char* end = nullptr;
    long v = std::strtol(w, &end, 10);
    if (*end || v < 1 || v > 1'000'000)
      throw Failure("WORLD_SIZE='" + std::string(w) + "' is not a positive whole number", kExitUsage);
    return static_cast<int>(v);
  }

  // Joins the job when WORLD_SIZE > 1 and returns the device to train on: the CPU (Gloo) for
  // --device cpu or auto, this process's GPU (NCCL) for --device cuda. World size 1: pick_device.
  // timeout_s: how long the rendezvous and each collective wait for the other ranks
  // (InitOptions::timeout; --timeout).
  Device join(const std::string& device, int64_t timeout_s) {
    if (world_size_from_env() <= 1) return pick_device(device);
#ifdef NABLA_MNIST_DISTRIBUTED
    if (device == "cuda") {
      (void)pick_device(device);  // no usable GPU: says why
      if (!distributed::nccl_built())
        throw UsageError(
            "data-parallel training on GPUs needs NCCL, and this build has none (the CUDA backend "
            "was built without NCCL): pass --device cpu for Gloo");
      const int local = distributed::get_local_rank(), gpus = cuda::device_count();
      if (local >= gpus)
        throw UsageError("LOCAL_RANK=" + std::to_string(local) + " but this machine has " + std::to_string(gpus) +
                         " GPU" + (gpus == 1 ? "" : "s") + ": with --device cuda, start at most " +
                         std::to_string(gpus) + " processes per machine (nabla-run --nproc-per-node)");
      cuda::set_device(local);
      distributed::init_process_group({.backend = "nccl", .timeout = std::chrono::seconds(timeout_s), .device = local});
      comm_ = Device::cuda(static_cast<int16_t>(local));
    } else {
      distributed::init_process_group({.backend = "gloo", .timeout = std::chrono::seconds(timeout_s)});
    }
    rank_ = distributed::get_rank();
    world_ = distributed::get_world_size();
    return comm_;
#else
    (void)device;
    (void)timeout_s;
    throw Failure("WORLD_SIZE=" + std::to_string(world_size_from_env()) +
                      " asks for data-parallel training, but this mnist was built without nabla::distributed "
                      "(Gloo was not found: install libgloo-dev and rebuild)",
                  kExitError);
#endif
  }
  void leave() {
#ifdef NABLA_MNIST_DISTRIBUTED
    ddp_.reset();
    fsdp_.reset();
    if (on()) distributed::destroy_process_group();
#endif
  }

  bool on() const { return world_ > 1; }
  int rank() const { return rank_; }
  int world() const { return world_; }
  bool leader() const { return rank_ == 0; }  // prints and writes files

  // Wraps the model (rank 0's parameters and buffers go to every rank): in DDP, or with --shard
  // fsdp in FSDP, each convolution and linear layer a unit.
  void wrap(const std::shared_ptr<nn::Module>& model, const std::string& shard) {
    if (shard != "none" && !on())
      throw UsageError("--shard " + shard +
                       " shards over the processes of a data-parallel run: start it with nabla-run "
                       "--nproc-per-node N (N >= 2)");
#ifdef NABLA_MNIST_DISTRIBUTED
    if (on() && shard == "fsdp")
      fsdp_ = std::make_unique<nn::parallel::FullyShardedDataParallel>(
          model, nn::parallel::FSDPOptions{.auto_wrap_policy = nn::parallel::wrap_modules_named({"Conv2d", "Linear"})});
    else if (on()) ddp_ = std::make_unique<nn::parallel::DistributedDataParallel>(model);
#endif
    model_ = model.get();
  }
  Tensor forward(const Tensor& x) {
#ifdef NABLA_MNIST_DISTRIBUTED
    if (ddp_) return (*ddp_)(x);
    if (fsdp_) return (*fsdp_)(x);
#endif
    return (*model_)(x);
  }
  bool fsdp() const {
#ifdef NABLA_MNIST_DISTRIBUTED
    return fsdp_ != nullptr;
#else
    return false;
#endif
  }
  // What the optimizer steps: the model's parameters, or under FSDP this rank's shards of them.
  std::vector<Tensor> parameters() const {
#ifdef NABLA_MNIST_DISTRIBUTED
    if (fsdp_) return fsdp_->parameters();
#endif
    return model_->parameters();
  }
  // Runs fn on every rank with the whole model readable (under FSDP its parameters gathered, a
  // collective, for fn's duration): evaluation, TensorBoard's histograms, the checkpoint's weights.
  template <class Fn>
  void with_whole_model(Fn&& fn) {
#ifdef NABLA_MNIST_DISTRIBUTED
    if (fsdp_) {
      auto whole = fsdp_->full_parameters();
      fn();
      return;
    }
#endif
    fn();
  }
  // --shard fsdp: each rank's shards and optimizer state in a folder next to the checkpoint.
  // Returns the save's tag, which the checkpoint records ("" when not under FSDP).
  std::string save_shards(const std::string& dir, const optim::Optimizer& opt) {
#ifdef NABLA_MNIST_DISTRIBUTED
    if (fsdp_) return fsdp_->save_sharded(dir, &opt);
#endif
    (void)dir, (void)opt;
    return "";
  }
  void load_shards(const std::string& dir, optim::Optimizer& opt, const std::string& tag) {
#ifdef NABLA_MNIST_DISTRIBUTED
    if (fsdp_) fsdp_->load_sharded(dir, &opt, tag);
#endif
    (void)dir, (void)opt, (void)tag;
  }

  // --shard zero1: the optimizer wrapped so that each rank keeps and steps its shard of the state.
  std::unique_ptr<optim::Optimizer> shard(std::unique_ptr<optim::Optimizer> opt, const std::string& mode) {
    if (mode != "zero1") return opt;
#ifdef NABLA_MNIST_DISTRIBUTED
    auto zero = std::make_unique<optim::ZeroRedundancyOptimizer>(std::move(opt));
    zero_ = zero.get();
    return zero;
#else
    return opt;
#endif
  }
  bool sharded() const { return zero_ != nullptr; }
  const char* wrapper() const {
    return fsdp()  ? "FullyShardedDataParallel, each layer a unit: weights, gradients and optimizer state sharded"
           : zero_ ? "DistributedDataParallel, optimizer state sharded: ZeroRedundancyOptimizer"
                   : "DistributedDataParallel";
  }
  // Before a checkpoint (on every rank): the whole optimizer state gathered to rank 0, which saves.
  void gather_optimizer_state() {
#ifdef NABLA_MNIST_DISTRIBUTED
    if (zero_) zero_->consolidate_state_dict(0);
#endif
  }

  // Sums `v` over the ranks, in place (float64, so counts up to 2^53 stay exact).
  void sum(std::vector<double>& v) {
#ifdef NABLA_MNIST_DISTRIBUTED
    if (!on()) return;
    Tensor t = tensor(v).to(kFloat64).to(comm_);  // NCCL reduces CUDA tensors
    distributed::all_reduce(t, distributed::ReduceOp::sum);
    t = t.cpu();
    for (size_t i = 0; i < v.size(); ++i) v[i] = t.data_ptr<double>()[i];
#else
    (void)v;
#endif
  }
  // True on every rank when it is true on any (so all ranks stop at the same step).
  bool any(bool flag) {
    std::vector<double> v{flag ? 1.0 : 0.0};
    sum(v);
    return v[0] > 0;
  }
  // Rank 0's buffers (batch-norm statistics) on every rank: each rank's last forward updated its
  // own with its own batch; evaluation and the checkpoint use rank 0's.
  void broadcast_buffers() {
#ifdef NABLA_MNIST_DISTRIBUTED
    if (!on()) return;
    for (const Tensor& b : model_->buffers()) distributed::broadcast(b, 0);
#endif
  }

 private:
  int rank_ = 0, world_ = 1;
  Device comm_ = kCPU;  // where the collectives' tensors live: the CPU (Gloo) or this rank's GPU (NCCL)
  nn::Module* model_ = nullptr;
#ifdef NABLA_MNIST_DISTRIBUTED
  std::unique_ptr<nn::parallel::DistributedDataParallel> ddp_;
  std::unique_ptr<nn::parallel::FullyShardedDataParallel> fsdp_;
  optim::ZeroRedundancyOptimizer* zero_ = nullptr;
#else
  optim::Optimizer* zero_ = nullptr;
#endif
};

// One `mnist train` run, in the order it happens: settings (from the command line or the checkpoint
// being resumed), data, model and optimizer, the resumed state, the header, the outputs (checkpoint
// folder, CSV, TensorBoard), the epochs, and the end (hparams, --summary-json).
class TrainingRun {
 public:
  explicit TrainingRun(TrainArgs args) : args_(std::move(args)) {}

  int run() {
    configure();
    build();
    if (resuming()) restore();
    print_header();
    prepare_outputs();
    open_tensorboard();
    std::signal(SIGINT, on_sigint);
    for (int64_t epoch = start_epoch_; epoch < epochs_; ++epoch)
      if (!train_epoch(epoch)) return kExitInterrupted;
    std::signal(SIGINT, SIG_DFL);
    finish();
    dp_.leave();
    return kExitOk;
  }

 private:
  bool resuming() const { return !args_.resume.empty(); }

  void configure() {
    s_ = args_.settings;
    if (resuming()) {
      if (DataParallel::world_size_from_env() > 1 && !fs::exists(args_.resume)) {
        const char* rank = std::getenv("RANK");
        throw Failure("--resume: '" + args_.resume + "' does not exist on this machine (rank " + (rank ? rank : "?") +
                          "). In a data-parallel run only rank 0 writes checkpoints, on its own "
                          "machine: copy the file to the same path on every machine (or keep checkpoints on a shared "
                          "filesystem), then resume again",
                      kExitError);
      }
      s_ = settings_from_metadata(read_checkpoint_info(args_.resume), args_.resume);
      check_resume_settings(args_, s_);
    }
    epochs_ = args_.epochs > 0 ? args_.epochs : default_recipe(s_.model).epochs;
    if (args_.threads) set_num_threads(*args_.threads);
    device_ = dp_.join(args_.device, args_.timeout_s);
    data_dir_ = !args_.data.empty() ? args_.data : default_data_dir(s_.dataset);
    ckpt_path_ = !args_.checkpoint.empty() ? args_.checkpoint
                 : resuming()              ? args_.resume
                                           : "checkpoints/" + s_.dataset + "-" + s_.model + ".safetensors";
    csv_path_ = fs::path(ckpt_path_).replace_extension(".csv").string();
  }

  void build() {
    train_set_ = load_split(s_.dataset, data_dir_, true);
    test_set_ = load_split(s_.dataset, data_dir_, false);
    manual_seed(static_cast<uint64_t>(s_.seed));
    m_ = make_model(s_.model);
    if (const std::string& init = args_.init_from; !init.empty()) {  // weights trained in Python
      if (resuming()) throw UsageError("--init-from starts a new run; --resume continues one: pass only one of them");
      try {
        model().load_state_dict(torch_io::load(init).flatten_tensors());
      } catch (const ValueError& e) {
        throw Failure("'" + init + "' does not fit --model " + s_.model + ": " + e.what(), kExitError);
      }
      std::printf("initialized %s from %s\n", s_.model.c_str(), init.c_str());
    }
    model().to(device_);
    dp_.wrap(m_.module, args_.shard);
    data::DatasetPtr train_data = train_set_;
    if (s_.augment)  // small random rotations and shifts, seeded per batch (so resumes reproduce them)
      train_data = std::make_shared<data::TransformDataset>(train_set_, data::RandomAffine(8, {0.08, 0.08}));
    data::DataLoaderOptions lo{.batch_size = s_.batch_size,
                               .shuffle = s_.shuffle,
                               .seed = static_cast<uint64_t>(s_.seed),
                               .num_workers = static_cast<int>(args_.workers),
                               .pin_memory = device_.is_cuda()};  // copied to the GPU without waiting (step())
    if (dp_.on()) {  // this rank's share of each epoch, in an order every rank agrees on (seeded by --seed)
      lo.shuffle = false;
      auto sampler = std::make_shared<data::DistributedSampler>(train_data->size(), dp_.world(), dp_.rank(), s_.shuffle,
                                                                static_cast<uint64_t>(s_.seed));
      per_rank_images_ = sampler->num_samples();
      lo.sampler = sampler;
      // This rank's slice of the test set: contiguous, no padding, so the summed counts are exact.
      const int64_t n = test_set_->size(), begin = n * dp_.rank() / dp_.world(),
                    end = n * (dp_.rank() + 1) / dp_.world();
      std::vector<int64_t> mine(static_cast<size_t>(end - begin));
      for (int64_t i = begin; i < end; ++i) mine[static_cast<size_t>(i - begin)] = i;
      test_shard_ = std::make_shared<data::Subset>(test_set_, std::move(mine));
    } else {
      test_shard_ = test_set_;
    }
    loader_.emplace(train_data, lo);
    steps_per_epoch_ = loader_->size();
    opt_ = dp_.shard(make_optimizer(s_, dp_.parameters()), args_.shard);
    sched_ = make_scheduler(s_, *opt_, epochs_, steps_per_epoch_);
    // float16 gradients underflow without loss scaling; bfloat16 has float32's range and needs none.
    if (s_.amp == "fp16") scaler_.emplace();
  }

  // The checkpoint's weights, optimizer and scheduler state, the loader's position and the running
  // sums of a mid-epoch save, each checked.
  void restore() {
    // Under --shard fsdp the weights and the optimizer's state come from the shards' folder.
    const std::string shards = args_.resume + ".shards";
    if (!dp_.fsdp() && fs::exists(shards + "/index.json"))
      throw Failure("'" + args_.resume + "' was trained with --shard fsdp (its optimizer state is in " + shards +
                        "): resume it with --shard fsdp on the same number of processes",
                    kExitUsage);
    optim::Checkpoint ck{.model = dp_.fsdp() ? nullptr : &model(),
                         .optimizer = dp_.fsdp() ? nullptr : opt_.get(),
                         .scheduler = sched_.scheduler.get(),
                         .scaler = scaler_ ? &*scaler_ : nullptr};
    optim::load_checkpoint(args_.resume, ck);
    const auto tag = ck.metadata.find("mnist.shards_tag");
    dp_.load_shards(shards, *opt_, tag == ck.metadata.end() ? "" : tag->second);
    start_epoch_ = ck.epoch;
    step_ = ck.step;
    progress_ = progress_from_metadata(ck.metadata, args_.resume, train_set_->size());
    // A position mid-epoch is one in each rank's share of the images: only valid for the same
    // number of processes. (A checkpoint saved at the end of an epoch resumes with any number.)
    const int64_t saved_world = MetadataReader(ck.metadata, args_.resume).integer("mnist.world_size", 1, 1'000'000, 1);
    if (progress_.loader_index > 0 && saved_world != dp_.world())
      throw Failure("'" + args_.resume + "' was saved mid-epoch by a run on " + std::to_string(saved_world) +
                        " process" + (saved_world == 1 ? "" : "es") + "; resume it on as many (this run has " +
                        std::to_string(dp_.world()) + "), or resume from a checkpoint saved at the end of an epoch",
                    kExitUsage);
    loader_->load_state({progress_.loader_seed, progress_.loader_epoch, progress_.loader_index});
    // The saved running sums are the whole job's: rank 0 carries them, the others start from zero.
    if (dp_.leader()) epoch_tally_ = {progress_.partial_loss, progress_.partial_correct, progress_.partial_seen};
    if (start_epoch_ >= epochs_)
      throw UsageError("the run in '" + args_.resume + "' already finished " + std::to_string(start_epoch_) +
                       " epochs; pass a larger --epochs to train further");
  }

  void print_header() const {
    if (!dp_.leader()) return;
    std::string sched_desc = s_.scheduler == "none" ? "constant lr"
                             : s_.scheduler == "step" || s_.scheduler == "exponential"
                                 ? "lr x" + json_number(s_.gamma) + " per epoch"
                                 : s_.scheduler + " schedule";
    std::printf("%s %s on %s (%s train / %s test images), %s%s\n", resuming() ? "resuming" : "training",
                s_.model.c_str(), dataset_title(s_.dataset).c_str(), format_count(train_set_->size()).c_str(),
                format_count(test_set_->size()).c_str(), device_.str().c_str(),
                device_.is_cpu() ? (" with " + std::to_string(get_num_threads()) + " threads").c_str() : "");
    if (dp_.on())
      std::printf(
          "data-parallel: %d processes (gloo, %s), %s images per process per epoch, "
          "%lld steps per epoch; rank 0 prints and saves\n",
          dp_.world(), dp_.wrapper(), format_count(static_cast<double>(per_rank_images_)).c_str(),
          static_cast<long long>(steps_per_epoch_));
    const std::string batch_desc = dp_.on() ? "batch " + std::to_string(s_.batch_size) + " per process x " +
                                                  std::to_string(dp_.world()) + " processes = global batch " +
                                                  std::to_string(s_.batch_size * dp_.world())
                                            : "batch " + std::to_string(s_.batch_size);
    std::printf("%s lr %g%s, %s%s, %s, %lld epoch%s%s\n", s_.optimizer.c_str(), s_.lr,
                s_.optimizer == "sgd" ? (" momentum " + json_number(s_.momentum)).c_str() : "", sched_desc.c_str(),
                s_.label_smoothing > 0 ? (", label smoothing " + json_number(s_.label_smoothing)).c_str() : "",
                batch_desc.c_str(), static_cast<long long>(epochs_), epochs_ == 1 ? "" : "s",
                resuming() ? (" (from epoch " + std::to_string(start_epoch_ + 1) + ")").c_str() : "");
    if (s_.amp != "off")
      std::printf(
          "%s%s\n", examples::amp_description(s_.amp, /*training=*/false).c_str(),
          scaler_ ? (", loss scaled by a GradScaler (scale " + json_number(scaler_->get_scale()) + ")").c_str() : "");
    std::printf("checkpoint: %s\n", ckpt_path_.c_str());
    std::fflush(stdout);
  }

  // The checkpoint's folder, and the CSV: one row per saved epoch, rewritten (atomically) after each
  // checkpoint save, so it never describes an epoch whose checkpoint was not saved, and a new run
  // leaves the old file alone until its own first save. Resuming keeps the rows of the epochs the
  // checkpoint has.
  void prepare_outputs() {
    if (!dp_.leader()) return;
    fs::path ckdir = fs::path(ckpt_path_).parent_path();
    if (std::error_code ec; !ckdir.empty() && (fs::create_directories(ckdir, ec), ec))
      throw Failure("cannot create the folder '" + ckdir.string() + "' for the checkpoint: " + ec.message(),
                    kExitError);
    csv_ = "epoch,train_loss,train_acc,test_loss,test_acc,seconds,lr\n";
    if (!resuming()) return;
    std::ifstream old(csv_path_);
    std::string line;
    for (bool header = true; std::getline(old, line); header = false) {
      char* end = nullptr;
      long long e = std::strtoll(line.c_str(), &end, 10);
      if (!header && end != line.c_str() && *end == ',' && e >= 1 && e <= start_epoch_) csv_ += line + "\n";
    }
  }

  void open_tensorboard() {
    if (args_.tensorboard.empty() || !dp_.leader()) return;
    tensorboard::SummaryWriterOptions o;
    if (resuming()) o.purge_step = step_ + 1;  // events a crashed run logged after its checkpoint go
    try {
      tb_.emplace(args_.tensorboard, o);
    } catch (const IOError& e) { throw Failure(std::string("--tensorboard: ") + e.what(), kExitError); }
    std::printf("tensorboard: %s (view with: tensorboard --logdir %s)\n", args_.tensorboard.c_str(),
                args_.tensorboard.c_str());
    std::fflush(stdout);
  }

  // Called on every rank (the running sums are summed over the ranks); rank 0 writes.
  void save(int64_t epochs_done) {
    const Tally sums = job_tally(epoch_tally_);
    dp_.gather_optimizer_state();
    // Under --shard fsdp: each rank's shards first, then rank 0's checkpoint naming them, with the
    // whole weights gathered.
    const std::string tag = dp_.save_shards(ckpt_path_ + ".shards", *opt_);
    dp_.with_whole_model([&] {
      if (!dp_.leader()) return;
      auto md = to_metadata(s_);
      md["mnist.world_size"] = std::to_string(dp_.world());
      if (!tag.empty()) md["mnist.shards_tag"] = tag;
      data::LoaderState ls = loader_->state();
      progress_.partial_loss = sums.loss_sum;
      progress_.partial_correct = sums.correct;
      progress_.partial_seen = sums.seen;
      progress_.loader_seed = ls.seed;
      progress_.loader_epoch = ls.epoch;
      progress_.loader_index = ls.index;
      md.merge(to_metadata(progress_));
      optim::save_checkpoint(ckpt_path_, {.model = &model(),
                                          .optimizer = dp_.fsdp() ? nullptr : opt_.get(),
                                          .scheduler = sched_.scheduler.get(),
                                          .scaler = scaler_ ? &*scaler_ : nullptr,
                                          .epoch = epochs_done,
                                          .step = step_,
                                          .metadata = md});
    });
  }

  // One optimizer step on a batch; returns its mean loss and number of correct predictions.
  std::pair<double, int64_t> step(const data::Batch& batch) {
    const bool gpu = device_.is_cuda();  // pinned batches (the loader's pin_memory): asynchronous copies
    Tensor x = normalize(batch.data.to(device_, gpu)), y = batch.target.to(device_, gpu);
    Tensor out, loss;
    {
      auto region = amp_region(s_.amp, device_);  // the forward and the loss, not backward (as PyTorch's)
      out = dp_.forward(x);                       // under DDP, backward averages the gradients over the ranks
      // (Label smoothing on a model that outputs log-probabilities: cross_entropy's log_softmax of
      // them is themselves.)
      loss = m_.outputs_log_probs && s_.label_smoothing == 0
                 ? nn::functional::nll_loss(out, y)
                 : nn::functional::cross_entropy(out, y, {.label_smoothing = s_.label_smoothing});
    }
    opt_->zero_grad();
    if (scaler_) {  // a step whose scaled gradients overflowed is skipped, and the scale backs off
      scaler_->scale(loss).backward();
      scaler_->step(*opt_);
      scaler_->update();
    } else {
      loss.backward();
      opt_->step();
    }
    if (sched_.per_batch) sched_.scheduler->step();
    ++step_;
    autograd::NoGradGuard ng;
    return {loss.item<double>(), (out.argmax(1) == y).sum().item<int64_t>()};
  }

  // The train scalars every --tensorboard-every steps: means over the steps since the last ones.
  void log_train_scalars(double batch_loss, int64_t batch_correct, int64_t n) {
    tb_tally_.add(batch_loss, batch_correct, n);
    if (step_ % args_.tensorboard_every != 0) return;
    tb_->add_scalar("train/loss", tb_tally_.loss(), step_);
    tb_->add_scalar("train/accuracy", tb_tally_.accuracy(), step_);
    tb_->add_scalar("train/lr", opt_->lr(), step_);
    tb_tally_ = {};
  }

  // Trains one epoch (the rest of it, when resumed mid-epoch), evaluates, saves. Returns false when
  // Ctrl-C stopped it (after saving a checkpoint mid-epoch).
  bool train_epoch(int64_t epoch) {
    model().train();
    const double lr_now = opt_->lr();
    Progress progress(epoch + 1, epochs_, steps_per_epoch_, !args_.quiet && dp_.leader() && stdout_is_terminal());
    int64_t batch_no = loader_->state().index / std::max<int64_t>(s_.batch_size, 1);
    for (auto& batch : *loader_) {
      auto [batch_loss, batch_correct] = step(batch);
      ++batch_no;
      const int64_t n = batch.target.numel();
      epoch_tally_.add(batch_loss, batch_correct, n);
      if (tb_) log_train_scalars(batch_loss, batch_correct, n);
      progress.update(batch_no, epoch_tally_.loss(), epoch_tally_.accuracy(), epoch_tally_.seen);
      // (Data-parallel: the ranks agree after every step, so all of them stop after the same batch.)
      if (dp_.on() ? dp_.any(g_interrupted.load()) : g_interrupted.load()) {
        progress.finish();
        progress_.partial_seconds += progress.seconds();
        progress_.train_seconds += progress.seconds();
        save(epoch);
        if (dp_.leader())
          std::printf(
              "interrupted: saved checkpoint %s (epoch %lld, batch %lld/%lld)\nresume with:  %smnist train --resume %s "
              "--epochs %lld\n",
              ckpt_path_.c_str(), static_cast<long long>(epoch + 1), static_cast<long long>(batch_no),
              static_cast<long long>(steps_per_epoch_),
              dp_.on() ? ("nabla-run --nproc-per-node " + std::to_string(dp_.world()) + " ").c_str() : "",
              ckpt_path_.c_str(), static_cast<long long>(epochs_));
        return false;
      }
    }
    progress.finish();
    const double epoch_seconds = progress_.partial_seconds + progress.seconds();
    progress_.train_seconds += progress.seconds();
    if (!sched_.per_batch && sched_.scheduler) sched_.scheduler->step();
    const Tally train = job_tally(epoch_tally_);
    epoch_tally_ = {};
    progress_.partial_seconds = 0;
    Misclassified wrong{.max = tb_ ? 64 : 0};
    dp_.with_whole_model([&] {  // under FSDP: the weights gathered on every rank for the evaluation
      last_ = evaluate_job(tb_ ? &wrong : nullptr);
      if (tb_) log_epoch(*tb_, model(), last_, wrong, step_);
    });
    save(epoch + 1);
    if (!dp_.leader()) return true;
    std::printf("epoch %lld/%lld  train loss %.4f acc %.2f%%  test loss %.4f acc %.2f%%  %s  %s img/s\n",
                static_cast<long long>(epoch + 1), static_cast<long long>(epochs_), train.loss(),
                train.accuracy() * 100, last_.loss, last_.accuracy * 100, format_duration(epoch_seconds).c_str(),
                format_count(static_cast<double>(train.seen) / std::max(epoch_seconds, 1e-9)).c_str());
    std::fflush(stdout);
    csv_ += std::to_string(epoch + 1) + ',' + json_number(train.loss()) + ',' + json_number(train.accuracy()) + ',' +
            json_number(last_.loss) + ',' + json_number(last_.accuracy) + ',' + json_number(epoch_seconds) + ',' +
            json_number(lr_now) + '\n';
    io::atomic_write(csv_path_, [&](std::FILE* f) { io::write_all(f, csv_.data(), csv_.size(), csv_path_); });
    return true;
  }

  void finish() {
    if (!dp_.leader()) return;
    if (tb_) {  // the HPARAMS tab: this run's settings next to its final metrics
      tb_->add_hparams({{"model", s_.model},
                        {"dataset", s_.dataset},
                        {"optimizer", s_.optimizer},
                        {"scheduler", s_.scheduler},
                        {"lr", s_.lr},
                        {"momentum", s_.momentum},
                        {"weight_decay", s_.weight_decay},
                        {"gamma", s_.gamma},
                        {"batch_size", s_.batch_size},
                        {"epochs", epochs_},
                        {"seed", s_.seed},
                        {"shuffle", s_.shuffle},
                        {"augment", s_.augment},
                        {"amp", s_.amp},
                        {"label_smoothing", s_.label_smoothing}},
                       {{"hparam/test_accuracy", last_.accuracy}, {"hparam/test_loss", last_.loss}}, {}, "", step_);
      tb_->close();
    }
    const double train_seconds = progress_.train_seconds;
    std::printf("test accuracy %.2f%% after %lld epoch%s, %s of training\n", last_.accuracy * 100,
                static_cast<long long>(epochs_), epochs_ == 1 ? "" : "s", format_duration(train_seconds).c_str());
    std::printf(
        "saved %s (metrics: %s)\ntry:  mnist eval --checkpoint %s\n      mnist predict --checkpoint %s "
        "your-digit.png\n",
        ckpt_path_.c_str(), csv_path_.c_str(), ckpt_path_.c_str(), ckpt_path_.c_str());
    const std::string& summary = args_.summary_json;
    if (summary.empty()) return;
    double ips =
        train_seconds > 0 ? static_cast<double>(train_set_->size()) * static_cast<double>(epochs_) / train_seconds : 0;
    io::atomic_write(summary, [&](std::FILE* f) {
      std::string json =
          "{\"test_acc\": " + json_number(last_.accuracy) + ", \"test_loss\": " + json_number(last_.loss) +
          ", \"train_seconds\": " + json_number(train_seconds) + ", \"epochs\": " + std::to_string(epochs_) +
          ", \"images_per_second\": " + json_number(ips) + ", \"model\": \"" + s_.model + "\", \"amp\": \"" + s_.amp +
          "\", \"dataset\": \"" + s_.dataset + "\", \"device\": \"" + device_.str() + "\", \"checkpoint\": \"" +
          json_escape(ckpt_path_) + "\", \"data\": \"" + json_escape(data_dir_) + "\"}\n";
      io::write_all(f, json.data(), json.size(), summary);
    });
  }

  // A tally summed over the ranks (this rank's own when not data-parallel).
  Tally job_tally(const Tally& t) {
    std::vector<double> v{t.loss_sum, static_cast<double>(t.correct), static_cast<double>(t.seen)};
    dp_.sum(v);
    return {v[0], static_cast<int64_t>(v[1]), static_cast<int64_t>(v[2])};
  }

  // The test loss and accuracy of the whole test set: each rank evaluates its slice with rank 0's
  // batch-norm statistics, and the sums are added up. (With --tensorboard, the misclassified
  // digits shown are those of rank 0's slice.)
  EvalResult evaluate_job(Misclassified* wrong) {
    dp_.broadcast_buffers();
    EvalSums e = evaluate(model(), m_.outputs_log_probs, s_.amp, test_shard_, device_, wrong);
    std::vector<double> v{e.loss, static_cast<double>(e.correct), static_cast<double>(e.seen)};
    dp_.sum(v);
    return EvalSums{v[0], static_cast<int64_t>(v[1]), static_cast<int64_t>(v[2])}.result();
  }

  nn::Module& model() { return *m_.module; }

  TrainArgs args_;
  Settings s_;
  int64_t epochs_ = 0, steps_per_epoch_ = 0, start_epoch_ = 0, step_ = 0;
  int64_t per_rank_images_ = 0;  // data-parallel: each rank's share of an epoch (padded as PyTorch's)
  Device device_;
  std::string data_dir_, ckpt_path_, csv_path_, csv_;
  data::DatasetPtr train_set_, test_set_;
  data::DatasetPtr test_shard_;  // what this rank evaluates: the test set, or its slice of it
  ModelInfo m_;
  std::optional<data::DataLoader> loader_;
  std::unique_ptr<optim::Optimizer> opt_;
  Schedule sched_;
  std::optional<amp::GradScaler> scaler_;  // --amp fp16
  RunProgress progress_;                   // train seconds, and the seconds of a resumed partial epoch
  Tally epoch_tally_, tb_tally_;           // this epoch so far; the steps since the last TensorBoard point
  std::optional<tensorboard::SummaryWriter> tb_;
  EvalResult last_{};
  DataParallel dp_;
};

}  // namespace

int cmd_train(int argc, char** argv) {
  std::optional<TrainArgs> args = parse_train_args(argc, argv);
  if (!args) return kExitOk;
  return TrainingRun(std::move(*args)).run();
}

}  // namespace mnist
