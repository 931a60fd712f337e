// Training checkpoints: resuming equals not stopping (bitwise, on the CPU), saves are atomic
// (a child process killed in the middle of saves, many times, never leaves a damaged checkpoint),
// and damaged or foreign files give clear errors.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <thread>

#include "io/file.h"
#include "nabla.h"

using namespace nabla;
namespace fs = std::filesystem;

namespace {

fs::path tmp_dir(const std::string& name) {
  fs::path dir = fs::path(::testing::TempDir()) / ("nabla_checkpoint_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A small CNN with BatchNorm and Dropout (both stateful or random), AdamW with two parameter
// groups, and a warm-up + cosine schedule: every kind of state a checkpoint has to carry.
struct TrainingRun {
  std::shared_ptr<nn::Sequential> model;
  std::unique_ptr<optim::AdamW> opt;
  std::unique_ptr<optim::SequentialLR> sched;

  explicit TrainingRun(uint64_t seed) {
    manual_seed(seed);
    model = std::make_shared<nn::Sequential>(nn::Conv2d(1, 4, 3, {.padding = 1}), nn::BatchNorm2d(4), nn::ReLU(),
                                             nn::Dropout(0.2), nn::Flatten(), nn::Linear(4 * 6 * 6, 3));
    std::vector<Tensor> body, head;
    for (size_t i = 0; i < 2; ++i)
      for (const Tensor& p : (*model)[i]->parameters()) body.push_back(p);
    head = (*model)[5]->parameters();
    opt = std::make_unique<optim::AdamW>(
        std::vector<optim::AdamW::ParamGroup>{
            {.params = body},
            {.params = head, .options = optim::AdamWOptions{.lr = 5e-3, .weight_decay = 0.05, .amsgrad = true}}},
        optim::AdamWOptions{.lr = 1e-2});
    auto warm = std::make_shared<optim::LinearLR>(*opt, 0.2, 1.0, 3);
    auto cosine = std::make_shared<optim::CosineAnnealingLR>(*opt, 10, 1e-4);
    sched = std::make_unique<optim::SequentialLR>(*opt, std::vector<std::shared_ptr<optim::LRScheduler>>{warm, cosine},
                                                  std::vector<int64_t>{3});
  }

  // One step on a fresh random batch (drawn from the default generator, like a shuffling loader).
  void step() {
    Tensor x = randn({8, 1, 6, 6});
    Tensor y = randint(0, 3, {8});
    Tensor loss = nn::functional::cross_entropy((*model)(x), y, {.label_smoothing = 0.1});
    opt->zero_grad();
    loss.backward();
    nn::utils::clip_grad_norm_(model->parameters(), 1.0);
    opt->step();
    sched->step();
  }

  optim::Checkpoint checkpoint(int64_t step) {
    return {.model = model.get(), .optimizer = opt.get(), .scheduler = sched.get(), .epoch = step / 4, .step = step};
  }
};

void expect_same_state(const nn::StateDict& a, const nn::StateDict& b, const std::string& what) {
  ASSERT_EQ(a.keys(), b.keys()) << what;
  for (const auto& [k, t] : a) EXPECT_TRUE(t.equal(b[k])) << what << ": " << k << " differs";
}

}  // namespace

TEST(Checkpoint, ResumingEqualsTrainingWithoutStopping) {
  constexpr int N = 7;
  fs::path dir = tmp_dir("resume");
  std::string path = (dir / "ckpt.safetensors").string();

  TrainingRun straight(1);
  for (int i = 0; i < 2 * N; ++i) straight.step();
  Generator::State rng_straight = default_generator(kCPU).get_state();

  {
    TrainingRun first(1);
    for (int i = 0; i < N; ++i) first.step();
    optim::Checkpoint ck = first.checkpoint(N);
    ck.metadata["note"] = "half way";
    optim::save_checkpoint(path, ck);
  }
  // A new process, in effect: other objects, other initial weights, the generator elsewhere.
  manual_seed(999);
  randn({123});
  TrainingRun second(2);
  optim::Checkpoint ck{.model = second.model.get(), .optimizer = second.opt.get(), .scheduler = second.sched.get()};
  optim::load_checkpoint(path, ck);
  EXPECT_EQ(ck.step, N);
  EXPECT_EQ(ck.epoch, N / 4);
  EXPECT_EQ(ck.metadata.at("note"), "half way");
  for (int i = 0; i < N; ++i) second.step();

  expect_same_state(second.model->state_dict(), straight.model->state_dict(), "model");  // bitwise
  expect_same_state(second.opt->state_dict(), straight.opt->state_dict(), "optimizer");
  expect_same_state(second.sched->state_dict(), straight.sched->state_dict(), "scheduler");
  EXPECT_EQ(second.opt->lr(1), straight.opt->lr(1));
  // The generator is where it would be: the next random batch is the same too.
  Generator::State rng_resumed = default_generator(kCPU).get_state();
  EXPECT_EQ(rng_resumed.seed, rng_straight.seed);
  EXPECT_EQ(rng_resumed.offset, rng_straight.offset);
  fs::remove_all(dir);
}

// A DataLoader's position goes into the checkpoint (.loader): a save inside the loop over its
// batches, loaded into another loader over the same data, makes that loader's next loop continue
// the epoch with the batches the first one would have given.
TEST(Checkpoint, TheLoaderResumesMidEpoch) {
  fs::path dir = tmp_dir("loader");
  std::string path = (dir / "l.safetensors").string();
  data::TensorDataset ds(arange(40, kFloat32).view({20, 2}), arange(20, kInt64));
  data::DataLoader a(ds, {.batch_size = 3, .shuffle = true, .seed = 5});
  std::vector<Tensor> rest;  // what a gives after the save: the rest of epoch 0, then epoch 1
  int k = 0;
  for (auto& batch : a) {
    if (k == 2) optim::save_checkpoint(path, {.loader = &a});  // after batch 2 of 7
    if (k > 2) rest.push_back(batch.target);
    ++k;
  }
  for (auto& batch : a) rest.push_back(batch.target);

  data::DataLoader b(ds, {.batch_size = 3, .shuffle = true, .seed = 99});  // another seed: restored
  optim::Checkpoint ck{.loader = &b};
  optim::load_checkpoint(path, ck);
  std::vector<Tensor> got;
  for (auto& batch : b) got.push_back(batch.target);
  for (auto& batch : b) got.push_back(batch.target);
  ASSERT_EQ(got.size(), rest.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(equal(got[i], rest[i])) << "batch " << i;

  // A checkpoint without a loader's state, and a malformed one, are clear errors.
  std::string none = (dir / "none.safetensors").string();
  optim::save_checkpoint(none, {});
  EXPECT_THROW(optim::load_checkpoint(none, ck), IOError);
  nn::StateDict empty;
  safetensors::save_file(
      empty, (dir / "bad.safetensors").string(),
      {{"format", "nabla.checkpoint"}, {"format_version", "1"}, {"contents", "loader"}, {"loader", "5 -1 3"}});
  try {
    optim::load_checkpoint((dir / "bad.safetensors").string(), ck);
    ADD_FAILURE() << "no error";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("the loader's epoch is not a whole number >= 0: '-1'"), std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

TEST(Checkpoint, GeneratorStateIsRestored) {
  fs::path dir = tmp_dir("rng");
  std::string path = (dir / "rng.safetensors").string();
  manual_seed(77);
  randn({10});
  optim::save_checkpoint(path, {});
  Tensor expected = randn({5});
  randn({1000});
  optim::Checkpoint ck;
  optim::load_checkpoint(path, ck);
  EXPECT_TRUE(randn({5}).equal(expected));
  // rng = false leaves the generator alone.
  manual_seed(1);
  Tensor a = randn({3});
  manual_seed(1);
  optim::Checkpoint no_rng{.rng = false};
  optim::load_checkpoint(path, no_rng);
  EXPECT_TRUE(randn({3}).equal(a));
  fs::remove_all(dir);
}

TEST(Checkpoint, PartsAndForeignOrDamagedFiles) {
  fs::path dir = tmp_dir("parts");
  std::string path = (dir / "c.safetensors").string(), weights = (dir / "w.safetensors").string();
  TrainingRun r(3);
  r.step();
  optim::save_checkpoint(path, {.model = r.model.get(), .optimizer = r.opt.get(), .step = 1});
  // Only the model, for evaluation.
  TrainingRun other(4);
  optim::Checkpoint model_only{.model = other.model.get(), .rng = false};
  optim::load_checkpoint(path, model_only);
  expect_same_state(other.model->state_dict(), r.model->state_dict(), "model only");
  // A part that is not in the file.
  optim::Checkpoint with_sched{.model = other.model.get(), .scheduler = other.sched.get()};
  try {
    optim::load_checkpoint(path, with_sched);
    FAIL();
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("holds no scheduler state (it has: 'model,optimizer')"), std::string::npos)
        << e.what();
  }
  // Plain weights are not a training checkpoint.
  nn::save_weights(*r.model, weights);
  optim::Checkpoint ck{.model = other.model.get()};
  try {
    optim::load_checkpoint(weights, ck);
    FAIL();
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("is not a nabla training checkpoint"), std::string::npos) << e.what();
  }
  // A truncated checkpoint.
  auto size = fs::file_size(path);
  fs::resize_file(path, size - 100);
  EXPECT_THROW(optim::load_checkpoint(path, ck), IOError);
  // A model that does not fit.
  optim::save_checkpoint(path, {.model = r.model.get()});
  nn::Sequential wrong(nn::Linear(2, 2));
  optim::Checkpoint ck2{.model = &wrong};
  EXPECT_THROW(optim::load_checkpoint(path, ck2), ValueError);
  fs::remove_all(dir);
}

namespace {
// A save's temporary file (ckpt.safetensors.tmp.<pid>.<n>) in dir, if there is one.
std::optional<fs::path> temporary_in(const fs::path& dir) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind("ckpt.safetensors.tmp.", 0) == 0) return e.path();
  return std::nullopt;
}
}  // namespace

TEST(Checkpoint, KillingASaveNeverDamagesTheCheckpoint) {
  // A model of 1024 x 1024 weights and SGD momentum: each checkpoint is about 8 MB, so a save
  // takes long enough to be interrupted. Version k has every weight, bias and momentum value
  // equal to k, and step = k in its metadata.
  fs::path dir = tmp_dir("kill");
  std::string path = (dir / "ckpt.safetensors").string();
  nn::Linear model(1024, 1024);
  optim::SGD opt(model.parameters(), {.lr = 0.1, .momentum = 0.9});
  model(ones({1, 1024})).sum().backward();
  opt.step();                             // creates the momentum buffers
  nn::StateDict live = opt.state_dict();  // shares storage with the optimizer's state
  std::vector<Tensor> slots = {model.weight, model.bias, live["state.0.momentum_buffer"],
                               live["state.1.momentum_buffer"]};
  auto set_version = [&](int64_t k) {  // raw writes: no kernels (the forked child has no thread pool)
    for (const Tensor& t : slots) {
      float* p = t.data_ptr<float>();
      for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(k);
    }
  };
  set_version(0);
  // How long one save takes here (much longer under sanitizers or on a loaded machine): the kills
  // are timed within it.
  auto t0 = std::chrono::steady_clock::now();
  optim::save_checkpoint(path, {.model = &model, .optimizer = &opt, .step = 0, .rng = false});
  const auto save_us = std::max<int64_t>(
      100, std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count());

  nn::Linear check_model(1024, 1024);
  optim::SGD check_opt(check_model.parameters(), {.lr = 0.1, .momentum = 0.9});
  std::mt19937 rng(2024);
  int64_t last = 0;
  // 50 kills; on a machine so loaded that few of them land inside a save, more (up to 300) until
  // 5 have.
  int trial = 0, mid_write = 0, complete_saves = 0;
  for (; trial < 50 || (mid_write < 5 && trial < 300); ++trial) {
    int64_t base = 1000 * (trial + 1);
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0) << "fork failed";
    if (pid == 0) {
      ::close(ready[0]);
      try {
        for (int64_t k = base;; ++k) {
          set_version(k);
          if (k == base) {  // tell the parent the first save starts now
            char c = 1;
            if (::write(ready[1], &c, 1) != 1) ::_exit(4);
            ::close(ready[1]);
          }
          optim::save_checkpoint(path, {.model = &model, .optimizer = &opt, .step = k, .rng = false});
        }
      } catch (...) { ::_exit(3); }
    }
    ::close(ready[1]);
    // Wait until the child starts saving (however slow its start). Even trials then kill it at a
    // random moment within about one and a half saves (before, inside or after a save); odd ones
    // wait for its temporary file to appear and kill within 200 us, inside the write, however
    // slow the machine.
    pollfd pf{ready[0], POLLIN, 0};
    const bool started = ::poll(&pf, 1, 60000) == 1;
    ::close(ready[0]);
    if (started && trial % 2 == 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % (save_us * 3 / 2)));
    } else if (started) {
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (!temporary_in(dir) && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 200));
    }
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(started) << "the saving child did not start within a minute";
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "the saving child failed on its own";
    // A temporary file left behind means the kill landed inside a save.
    while (auto tmp = temporary_in(dir)) {
      ++mid_write;
      fs::remove(*tmp);
    }
    optim::Checkpoint ck{.model = &check_model, .optimizer = &check_opt, .rng = false};
    ASSERT_NO_THROW(optim::load_checkpoint(path, ck)) << "trial " << trial;
    // The file is one complete version: the last one seen or one the child finished.
    ASSERT_TRUE(ck.step == last || (ck.step >= base && ck.step < base + 1000)) << "step " << ck.step;
    if (ck.step != last) ++complete_saves;
    last = ck.step;
    nn::StateDict sd = check_opt.state_dict();
    for (const Tensor& t :
         {check_model.weight, check_model.bias, sd["state.0.momentum_buffer"], sd["state.1.momentum_buffer"]}) {
      ASSERT_EQ(t.min().item<double>(), static_cast<double>(ck.step)) << "trial " << trial;
      ASSERT_EQ(t.max().item<double>(), static_cast<double>(ck.step)) << "trial " << trial;
    }
  }
  std::printf("kill test: %d kills, %d inside a save, %d new complete versions loaded\n", trial, mid_write,
              complete_saves);
  EXPECT_GT(mid_write, 0) << "no kill landed inside a save; the test did not exercise the window";
  fs::remove_all(dir);
}

// A save killed mid-write leaves <path>.tmp.<pid>.<n> behind (55 of 110 kills, 90 MB, in an earlier
// test): the next save of the same path removes those whose process is gone and whose lock is free,
// and nothing else.
TEST(Checkpoint, ASaveRemovesWhatKilledSavesLeftBehind) {
  fs::path dir = tmp_dir("stale");
  const std::string path = (dir / "ck.safetensors").string();
  auto touch = [](const std::string& p) { std::ofstream(p) << "partial"; };
  // A dead process: a child that has exited (and been reaped).
  pid_t dead = ::fork();
  ASSERT_GE(dead, 0);
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  // A save really killed while writing.
  pid_t writer = ::fork();
  ASSERT_GE(writer, 0);
  if (writer == 0) {
    io::atomic_write(path, [](std::FILE* f) {
      std::fputs("half a checkpoint", f);
      std::fflush(f);
      ::pause();  // killed here
    });
    ::_exit(1);
  }
  const std::string killed_prefix = "ck.safetensors.tmp." + std::to_string(writer) + ".";
  auto exists_killed = [&] {
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().filename().string().rfind(killed_prefix, 0) == 0) return true;
    return false;
  };
  for (int i = 0; i < 6000 && !exists_killed(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(exists_killed());
  ::kill(writer, SIGKILL);
  ::waitpid(writer, nullptr, 0);

  const std::string d = std::to_string(dead), me = std::to_string(::getpid());
  const std::string stale = path + ".tmp." + d + ".123";
  touch(stale);
  touch(path + ".tmp." + me + ".5");                                 // this process's (another thread may be saving)
  touch(path + ".tmp.1.7");                                          // a live process's
  touch((dir / "other.safetensors").string() + ".tmp." + d + ".1");  // another target's
  touch(path + ".tmp." + d + ".x");                                  // not a temporary name
  const std::string locked = path + ".tmp." + d + ".9";              // written by a live process elsewhere
  touch(locked);
  int fd = ::open(locked.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  nn::Linear model(2, 2);
  optim::save_checkpoint(path, {.model = &model});
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_FALSE(exists_killed());
  for (const std::string& kept : {path + ".tmp." + me + ".5", path + ".tmp.1.7", path + ".tmp." + d + ".x", locked,
                                  (dir / "other.safetensors").string() + ".tmp." + d + ".1"})
    EXPECT_TRUE(fs::exists(kept)) << kept;
  ::close(fd);
  optim::save_checkpoint(path, {.model = &model});  // unlocked now
  EXPECT_FALSE(fs::exists(locked));
  fs::remove_all(dir);
}
