// The mnist example program, end to end on a small generated dataset (written as IDX files):
// training, resume equals uninterrupted (bitwise), Ctrl-C saves and resumes mid-epoch, eval,
// predict (text and JSON), export of test digits as PNG (and predict reading them back), and the
// messages and exit codes for mistakes.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "examples/mnist/models.h"
#include "nabla.h"
#include "program_util.h"
#include "tests/common/python_torch.h"
#include "tests/onnx/ort.h"
#include "tests/tensorboard/event_reader.h"

#ifndef NABLA_MNIST_BIN
#error "NABLA_MNIST_BIN must name the mnist program"
#endif

using namespace nabla;
using namespace nabla::program_test;
namespace fs = std::filesystem;

namespace {

Result run(const std::string& args) { return run_program(NABLA_MNIST_BIN, args); }

// Runs the program with these arguments, as they are (no shell), stdout and stderr together.
Result run_argv(const std::vector<std::string>& args) {
  int out[2];
  if (::pipe(out) != 0) return {-1, "pipe failed"};
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out[1], 1);
    ::dup2(out[1], 2);
    ::close(out[0]);
    std::vector<char*> argv{const_cast<char*>(NABLA_MNIST_BIN)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(NABLA_MNIST_BIN, argv.data());
    ::_exit(127);
  }
  ::close(out[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  ::close(out[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), text};
}

std::vector<uint8_t> file_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

bool same_weights(const std::string& a, const std::string& b) {
  auto fa = safetensors::load_file(a), fb = safetensors::load_file(b);
  int compared = 0;
  for (const auto& [name, t] : fa.tensors) {
    if (name.rfind("model.", 0) != 0) continue;
    const Tensor* u = fb.tensors.find(name);
    if (!u || !equal(t, *u)) return false;
    ++compared;
  }
  return compared > 0;
}

class MnistProgram : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("nabla_mnist_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    write_dataset(dir_ / "data", 1024, 256);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string data() const { return "--data " + (dir_ / "data").string(); }
  std::string ck(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

}  // namespace

TEST_F(MnistProgram, TrainsEvaluatesAndWritesSummaryAndCsv) {
  Result r = run("train --model mlp --epochs 2 --quiet " + data() + " --checkpoint " + ck("mlp.safetensors") +
                 " --summary-json " + ck("summary.json"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("epoch 2/2"), std::string::npos) << r.out;
  std::ifstream js(ck("summary.json"));
  std::string json((std::istreambuf_iterator<char>(js)), {});
  for (const char* key : {"\"test_acc\"", "\"train_seconds\"", "\"epochs\": 2", "\"images_per_second\""})
    EXPECT_NE(json.find(key), std::string::npos) << json;
  std::ifstream csv(ck("mlp.csv"));
  std::string header, line;
  std::getline(csv, header);
  EXPECT_EQ(header, "epoch,train_loss,train_acc,test_loss,test_acc,seconds,lr");
  int rows = 0;
  while (std::getline(csv, line)) ++rows;
  EXPECT_EQ(rows, 2);
  // The toy classes are easy: the model must have learned them.
  double acc = std::stod(json.substr(json.find("\"test_acc\": ") + 12));
  EXPECT_GT(acc, 0.9) << json;

  Result e = run("eval --checkpoint " + ck("mlp.safetensors") + " " + data());
  ASSERT_EQ(e.code, 0) << e.out;
  EXPECT_NE(e.out.find("confusion matrix"), std::string::npos);
  EXPECT_NE(e.out.find("precision"), std::string::npos);
}

TEST_F(MnistProgram, TensorboardLogsWhatTheReadmeSays) {
  // A tiny learning rate keeps the model wrong on many test digits, so the misclassified grid is there.
  std::string logs = ck("tb");
  Result r = run("train --model mlp --epochs 1 --lr 0.000001 --batch-size 64 --quiet " + data() + " --checkpoint " +
                 ck("tb.safetensors") + " --tensorboard " + logs + " --tensorboard-every 4");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("tensorboard --logdir " + logs), std::string::npos) << r.out;
  std::vector<std::string> files, subdirs;
  for (const auto& e : fs::directory_iterator(logs)) (e.is_directory() ? subdirs : files).push_back(e.path().string());
  ASSERT_EQ(files.size(), 1u);
  ASSERT_EQ(subdirs.size(), 1u);                      // the hparams run
  std::map<std::string, std::vector<int64_t>> steps;  // tag -> the steps it was logged at
  std::map<std::string, int> kinds;  // tag -> Summary.Value field: 2 scalar, 4 image, 5 histogram, 8 tensor
  for (const auto& e : tb_test::read_events(files[0]))
    for (const auto& v : e.values) {
      steps[v.str(1)].push_back(e.step);
      for (int k : {2, 4, 5, 8})
        if (v.has(k)) kinds[v.str(1)] = k;
    }
  // 1024 images at batch 64: 16 steps, train scalars every 4.
  for (const char* tag : {"train/loss", "train/accuracy", "train/lr"}) {
    EXPECT_EQ(steps[tag], (std::vector<int64_t>{4, 8, 12, 16})) << tag;
    EXPECT_EQ(kinds[tag], 2) << tag;
  }
  for (const char* tag : {"test/loss", "test/accuracy"}) EXPECT_EQ(steps[tag], (std::vector<int64_t>{16})) << tag;
  int weight_tags = 0;  // the mlp's two Linear layers: a weight and a bias each, with their gradients
  for (const auto& [tag, kind] : kinds)
    if (tag.rfind("weights/", 0) == 0) {
      ++weight_tags;
      EXPECT_EQ(kind, 5) << tag;
      EXPECT_EQ(kinds["grads/" + tag.substr(8)], 5) << tag;
      EXPECT_EQ(steps[tag], (std::vector<int64_t>{16})) << tag;
    }
  EXPECT_EQ(weight_tags, 4);
  EXPECT_EQ(kinds["test/misclassified"], 4);
  EXPECT_EQ(kinds["test/misclassified/text_summary"], 8);
  // The learning rate logged is the one given.
  for (const auto& e : tb_test::read_events(files[0]))
    for (const auto& v : e.values)
      if (v.str(1) == "train/lr") EXPECT_EQ(v.get(2)->f32(), 1e-6f);

  // hparams: the plugin's three summaries and the final metrics.
  std::vector<std::string> hp_files;
  for (const auto& e : fs::directory_iterator(subdirs[0])) hp_files.push_back(e.path().string());
  ASSERT_EQ(hp_files.size(), 1u);
  std::vector<std::string> hp_tags;
  for (const auto& e : tb_test::read_events(hp_files[0]))
    for (const auto& v : e.values) hp_tags.push_back(v.str(1));
  EXPECT_EQ(hp_tags,
            (std::vector<std::string>{"_hparams_/experiment", "_hparams_/session_start_info",
                                      "_hparams_/session_end_info", "hparam/test_accuracy", "hparam/test_loss"}));

  Result bad = run("train --tensorboard-every 5 " + data());
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("--tensorboard-every needs --tensorboard DIR"), std::string::npos) << bad.out;
  Result help = run("train --help");
  EXPECT_NE(help.out.find("--tensorboard DIR"), std::string::npos) << help.out;
}

TEST_F(MnistProgram, ResumeEqualsUninterrupted) {
  std::string common = " --model cnn --quiet " + data();
  ASSERT_EQ(run("train --epochs 2" + common + " --checkpoint " + ck("full.safetensors")).code, 0);
  ASSERT_EQ(run("train --epochs 1" + common + " --checkpoint " + ck("part.safetensors")).code, 0);
  // The same command plus --resume: the settings it repeats equal the saved ones, so they are accepted.
  Result r = run("train --epochs 2" + common + " --resume " + ck("part.safetensors"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("from epoch 2"), std::string::npos) << r.out;
  EXPECT_TRUE(same_weights(ck("full.safetensors"), ck("part.safetensors")));
  // A real conflict is refused, naming both values.
  Result conflict = run("train --epochs 3 --model lenet --quiet --resume " + ck("part.safetensors") + " " + data());
  EXPECT_EQ(conflict.code, 2) << conflict.out;
  EXPECT_NE(conflict.out.find("--model lenet conflicts with the run in '" + ck("part.safetensors") +
                              "', started with --model cnn"),
            std::string::npos)
      << conflict.out;
  conflict = run("train --epochs 3 --lr 0.5 --no-shuffle --quiet --resume " + ck("part.safetensors") + " " + data());
  EXPECT_EQ(conflict.code, 2) << conflict.out;
  EXPECT_NE(conflict.out.find("--lr 0.5 conflicts"), std::string::npos) << conflict.out;
}

// --amp: bf16 trains under autocast (float32 weights in the checkpoint) and says so in the header;
// fp16 adds a GradScaler whose state the checkpoint carries, so a resumed fp16 run ends with the
// weights of an uninterrupted one; --amp is a run setting, refused on resume when it conflicts.
TEST_F(MnistProgram, AmpTrainsResumesAndKeepsItsSetting) {
  Result b = run("train --model cnn --epochs 1 --amp bf16 --quiet " + data() + " --checkpoint " +
                 ck("bf16.safetensors") + " --summary-json " + ck("bf16.json"));
  ASSERT_EQ(b.code, 0) << b.out;
  EXPECT_NE(b.out.find("mixed precision: forward under autocast to bfloat16, float32 weights"), std::string::npos)
      << b.out;
  std::ifstream js(ck("bf16.json"));
  std::string json((std::istreambuf_iterator<char>(js)), {});
  EXPECT_NE(json.find("\"amp\": \"bf16\""), std::string::npos) << json;
  EXPECT_GT(std::stod(json.substr(json.find("\"test_acc\": ") + 12)), 0.9) << json;
  auto saved = safetensors::load_file(ck("bf16.safetensors"));
  int weights = 0;
  for (const auto& [name, t] : saved.tensors)
    if (name.rfind("model.", 0) == 0 && t.is_floating_point()) {
      EXPECT_EQ(t.dtype(), kFloat32) << name;
      ++weights;
    }
  EXPECT_GT(weights, 0);
  // mnist eval evaluates under the mode the run trained with unless told otherwise, and gives the
  // accuracy the training run reported (its last test evaluation ran the same way).
  Result e = run("eval --checkpoint " + ck("bf16.safetensors") + " " + data());
  ASSERT_EQ(e.code, 0) << e.out;
  EXPECT_NE(e.out.find("test set (256 images), under autocast to bfloat16\n"), std::string::npos) << e.out;
  const double trained_acc = std::stod(json.substr(json.find("\"test_acc\": ") + 12));
  const size_t at = e.out.find("test accuracy ");
  ASSERT_NE(at, std::string::npos) << e.out;
  EXPECT_NEAR(std::stod(e.out.substr(at + 14)), 100 * trained_acc, 0.4) << e.out;  // one image of 256
  Result e32 = run("eval --amp off --checkpoint " + ck("bf16.safetensors") + " " + data());
  ASSERT_EQ(e32.code, 0) << e32.out;
  EXPECT_NE(e32.out.find("test set (256 images)\n"), std::string::npos) << e32.out;

  std::string common = " --model cnn --amp fp16 --quiet " + data();
  Result f = run("train --epochs 2" + common + " --checkpoint " + ck("fp16full.safetensors"));
  ASSERT_EQ(f.code, 0) << f.out;
  EXPECT_NE(f.out.find("float16, float32 weights, loss scaled by a GradScaler (scale 65536)"), std::string::npos)
      << f.out;
  ASSERT_EQ(run("train --epochs 1" + common + " --checkpoint " + ck("fp16part.safetensors")).code, 0);
  Result r = run("train --epochs 2 --quiet " + data() + " --resume " + ck("fp16part.safetensors"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("loss scaled by a GradScaler"), std::string::npos) << r.out;
  EXPECT_TRUE(same_weights(ck("fp16full.safetensors"), ck("fp16part.safetensors")));
  Result conflict = run("train --epochs 3 --amp bf16 --quiet " + data() + " --resume " + ck("fp16part.safetensors"));
  EXPECT_EQ(conflict.code, 2) << conflict.out;
  EXPECT_NE(conflict.out.find("--amp bf16 conflicts with the run in '" + ck("fp16part.safetensors") +
                              "', started with --amp fp16"),
            std::string::npos)
      << conflict.out;
  Result bad = run("train --amp fp8 " + data());
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("fp8"), std::string::npos) << bad.out;
}

// The fast recipe: its model's defaults (one epoch, one-cycle Adam, label smoothing 0.1) with
// nothing else given; resuming keeps the model's epoch count and the saved label smoothing.
TEST_F(MnistProgram, FastRecipeDefaultsAndResume) {
  Result r = run("train --model fast --quiet " + data() + " --checkpoint " + ck("fast.safetensors"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("adam lr 0.02, onecycle schedule, label smoothing 0.1, batch 64, 1 epoch\n"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("after 1 epoch,"), std::string::npos) << r.out;
  // Resumed without --epochs: the fast model's one epoch is done already.
  Result again = run("train --model fast --quiet --resume " + ck("fast.safetensors") + " " + data());
  EXPECT_EQ(again.code, 2) << again.out;
  EXPECT_NE(again.out.find("already finished 1 epochs"), std::string::npos) << again.out;
  Result conflict =
      run("train --epochs 2 --label-smoothing 0.2 --quiet --resume " + ck("fast.safetensors") + " " + data());
  EXPECT_EQ(conflict.code, 2) << conflict.out;
  EXPECT_NE(conflict.out.find("--label-smoothing 0.2 conflicts with the run in '" + ck("fast.safetensors") +
                              "', started with --label-smoothing 0.1"),
            std::string::npos)
      << conflict.out;
  Result bad = run("train --label-smoothing 1 " + data());
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("--label-smoothing must be in [0, 1)"), std::string::npos) << bad.out;
}

TEST_F(MnistProgram, InterruptSavesAndResumesMidEpoch) {
  // Enough data that the interrupt (sent once the first train scalars are logged) lands inside
  // training: lenet trains ~50,000 images/s here, so 4 epochs of 16,384 take over a second.
  write_dataset(dir_ / "data", 16384, 256);
  std::string common = " --model lenet --epochs 4 --quiet " + data();
  ASSERT_EQ(run("train" + common + " --checkpoint " + ck("full.safetensors")).code, 0);

  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::string cmd = std::string(NABLA_MNIST_BIN) + " train" + common + " --checkpoint " + ck("int.safetensors") +
                      " --tensorboard " + ck("tb") + " --tensorboard-every 10 > /dev/null 2>&1";
    execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // Interrupt once the run has logged its first train scalars (polling the TensorBoard file, which
  // may end in a record being written), not after a fixed time: on a loaded machine the start alone
  // can take longer than a fixed delay.
  auto logged_training = [&] {
    if (!fs::exists(ck("tb"))) return false;
    for (const auto& e : fs::directory_iterator(ck("tb"))) {
      try {
        for (const auto& ev : tb_test::read_events(e.path().string()))
          for (const auto& v : ev.values)
            if (v.str(1) == "train/loss") return true;
      } catch (const std::exception&) {  // a record half written: look again
      }
    }
    return false;
  };
  int status = 0;
  bool exited = false;
  for (int i = 0; i < 3000 && !logged_training(); ++i) {
    if (waitpid(pid, &status, WNOHANG) == pid) {
      exited = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!exited) {
    kill(pid, SIGINT);
    waitpid(pid, &status, 0);
  }
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 0) GTEST_SKIP() << "training finished before the interrupt arrived";
  ASSERT_EQ(WEXITSTATUS(status), 130);
  ASSERT_TRUE(fs::exists(ck("int.safetensors")));
  // Ctrl-C loses no TensorBoard event: the file ends on a record boundary, with the train scalars
  // up to the step the checkpoint holds.
  std::vector<std::string> tb_files;
  for (const auto& e : fs::directory_iterator(ck("tb")))
    if (e.is_regular_file()) tb_files.push_back(e.path().string());
  ASSERT_EQ(tb_files.size(), 1u);
  int64_t last_logged = 0;
  for (const auto& e : tb_test::read_events(tb_files[0]))  // throws on a partial or corrupt record
    for (const auto& v : e.values)
      if (v.str(1) == "train/loss") last_logged = e.step;
  EXPECT_GT(last_logged, 0);
  Result r = run("train --epochs 4 --quiet --resume " + ck("int.safetensors") + " " + data() + " --tensorboard " +
                 ck("tb") + " --tensorboard-every 10");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(same_weights(ck("full.safetensors"), ck("int.safetensors")));
  // The resumed run's file starts by purging what came after the checkpoint (purge_step), and then
  // continues the step count: its first train scalar is the first multiple of 10 from there.
  std::string resumed_file;
  for (const auto& e : fs::directory_iterator(ck("tb")))
    if (e.is_regular_file() && e.path().string() != tb_files[0]) resumed_file = e.path().string();
  ASSERT_FALSE(resumed_file.empty());
  auto resumed = tb_test::read_events(resumed_file);
  ASSERT_GE(resumed.size(), 4u);
  ASSERT_TRUE(resumed[2].session_log.has_value());
  int64_t purge = resumed[2].step;
  EXPECT_GT(purge, last_logged);
  EXPECT_LE(purge, last_logged + 10);
  int64_t first_loss_step = -1;
  for (const auto& e : resumed)
    for (const auto& v : e.values)
      if (v.str(1) == "train/loss" && first_loss_step < 0) first_loss_step = e.step;
  EXPECT_EQ(first_loss_step, (purge + 9) / 10 * 10);
}

TEST_F(MnistProgram, PredictsImagesAsTextAndJson) {
  ASSERT_EQ(run("train --model mlp --epochs 2 --quiet " + data() + " --checkpoint " + ck("m.safetensors")).code, 0);
  // A dark stroke on white paper, far off-center, as a user might draw it: predict must invert
  // it, fit it into 20x20 and center it by mass in 28x28, as MNIST's digits are.
  Tensor img = full({140, 200}, 230, kUInt8);
  img.narrow(0, 10, 60).narrow(1, 130, 12).fill_(20);
  data::save_image(ck("three.png"), img);
  fs::create_directories(ck("seen"));
  Result t = run("predict --save-input " + ck("seen") + " --checkpoint " + ck("m.safetensors") + " " + ck("three.png"));
  ASSERT_EQ(t.code, 0) << t.out;
  EXPECT_NE(t.out.find("three.png: "), std::string::npos) << t.out;
  Tensor seen = data::load_image_gray(ck("seen") + "/three.png.28x28.png").to(kFloat64);
  EXPECT_GT(seen.max().item<double>(), 200);    // bright stroke
  EXPECT_LT(seen[0].max().item<double>(), 10);  // dark background
  Tensor rows = arange(28, kFloat64).unsqueeze(1), cols = arange(28, kFloat64).unsqueeze(0);
  double mass = seen.sum().item<double>();
  EXPECT_NEAR((seen * rows).sum().item<double>() / mass, 13.5, 0.75);  // centered by mass
  EXPECT_NEAR((seen * cols).sum().item<double>() / mass, 13.5, 0.75);
  // The 60x12 stroke becomes about 20x4: some 80 bright pixels.
  double bright = (seen > 100).sum().item<double>();
  EXPECT_GT(bright, 50);
  EXPECT_LT(bright, 110);
  Result j =
      run("predict --json --checkpoint " + ck("m.safetensors") + " " + ck("three.png") + " " + ck("missing.png"));
  EXPECT_EQ(j.code, 1) << j.out;  // one file failed
  EXPECT_NE(j.out.find("\"digit\": "), std::string::npos) << j.out;
  EXPECT_NE(j.out.find("\"probabilities\": ["), std::string::npos) << j.out;
  EXPECT_NE(j.out.find("\"error\""), std::string::npos) << j.out;
}

TEST_F(MnistProgram, ExportsTestDigitsThatPredictReadsBack) {
  ASSERT_EQ(run("train --model mlp --epochs 2 --quiet " + data() + " --checkpoint " + ck("m.safetensors")).code, 0);
  Result e = run("export --count 10 --seed 3 " + data() + " --out " + ck("samples"));
  ASSERT_EQ(e.code, 0) << e.out;
  data::MNIST test((dir_ / "data").string(), data::Split::test);
  std::vector<std::string> files;
  for (const auto& f : fs::directory_iterator(ck("samples"))) files.push_back(f.path().string());
  ASSERT_EQ(files.size(), 10u) << e.out;
  for (const std::string& f : files) {
    // <index>-<label>.png holds test image <index> exactly, and <label> is its label.
    std::string name = fs::path(f).stem().string();
    int64_t index = std::stoll(name.substr(0, name.find('-'))), label = std::stoll(name.substr(name.find('-') + 1));
    ASSERT_LT(index, test.size());
    EXPECT_EQ(label, test.targets()[index].item<int64_t>()) << f;
    EXPECT_TRUE(equal(data::load_image_gray(f), test.images()[index][0])) << f;
  }
  // predict reads them all. (Its accuracy on exported real MNIST digits is what scripts/mnist.sh
  // shows at the end; the toy digits here are bars whose position is the class, which predict's
  // fitting and centering, made for handwriting, deliberately removes.)
  std::string args;
  for (const std::string& f : files) args += " " + f;
  Result p = run("predict --json --checkpoint " + ck("m.safetensors") + args);
  ASSERT_EQ(p.code, 0) << p.out;
  size_t lines = 0;
  for (size_t at = 0; (at = p.out.find("\"digit\": ", at)) != std::string::npos; ++at) ++lines;
  EXPECT_EQ(lines, 10u) << p.out;

  // --first takes images 0..n-1; --invert writes dark digits on white.
  ASSERT_EQ(run("export --count 2 --first --invert " + data() + " --out " + ck("inv")).code, 0);
  std::string first = ck("inv") + "/0-" + std::to_string(test.targets()[0].item<int64_t>()) + ".png";
  ASSERT_TRUE(fs::exists(first));
  EXPECT_TRUE(equal(data::load_image_gray(first).to(kInt64), 255 - test.images()[0][0].to(kInt64)));

  Result bad = run("export --count 0 " + data());
  EXPECT_EQ(bad.code, 2) << bad.out;
  bad = run("export --count 257 " + data() + " --out " + ck("x"));
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("more than the 256 images"), std::string::npos) << bad.out;
}

// `mnist export --onnx`: the trained cnn with the input normalization in front, checked by
// onnx.checker and run in ONNX Runtime on test images at two batch sizes (N is dynamic); its scores
// equal the checkpoint's model run by nabla on the same pixels (the batch norms folded into the
// convolutions by the exporter, so float32 rounding differs a little).
TEST_F(MnistProgram, ExportsOnnxThatOnnxRuntimeRunsAsNablaDoes) {
  NABLA_NEEDS_ORT();
  ASSERT_EQ(run("train --model cnn --epochs 1 --quiet " + data() + " --checkpoint " + ck("cnn.safetensors")).code, 0);
  Result e = run("export --onnx " + ck("cnn.onnx") + " --checkpoint " + ck("cnn.safetensors"));
  ASSERT_EQ(e.code, 0) << e.out;
  EXPECT_NE(e.out.find("image float32 (N, 1, 28, 28) in [0, 1] -> scores (N, 10), logits"), std::string::npos) << e.out;
  std::string check = std::string(nabla::testing::kOnnxPython) +
                      " -c 'import onnx, sys\nonnx.checker.check_model(sys.argv[1], full_check=True)\n"
                      "m = onnx.load(sys.argv[1])\nassert [i.name for i in m.graph.input] == [\"image\"]\n"
                      "assert [o.name for o in m.graph.output] == [\"scores\"]\n"
                      "assert not [n for n in m.graph.node if n.op_type == \"BatchNormalization\"], \"not folded\"' " +
                      ck("cnn.onnx");
  EXPECT_EQ(std::system(check.c_str()), 0) << check;

  mnist::ModelInfo m = mnist::make_model("cnn");
  optim::Checkpoint state{.model = m.module.get(), .rng = false};
  optim::load_checkpoint(ck("cnn.safetensors"), state);
  m.module->eval();
  data::MNIST test((dir_ / "data").string(), data::Split::test);
  std::vector<Tensor> inputs{test.images().narrow(0, 0, 1), test.images().narrow(0, 1, 7)};
  std::ostringstream jobs;
  jobs << "[{\"model\":\"" << ck("cnn.onnx") << "\",\"runs\":[";
  for (size_t b = 0; b < inputs.size(); ++b) {
    inputs[b] = inputs[b].to(kFloat32) / 255;
    jobs << (b ? "," : "") << "{\"inputs\":["
         << nabla::testing::ort_input("image", inputs[b], ck("in" + std::to_string(b) + ".bin")) << "],\"output\":\""
         << ck("out" + std::to_string(b) + ".bin") << "\"}";
  }
  jobs << "]}]";
  std::ofstream(ck("jobs.json")) << jobs.str();
  const std::string ort = nabla::testing::run_ort_command(ck("jobs.json"));
  ASSERT_EQ(std::system(ort.c_str()), 0) << ort;
  for (size_t b = 0; b < inputs.size(); ++b) {
    Tensor want;
    {
      autograd::NoGradGuard ng;
      want = m.module->forward((inputs[b] - mnist::kMean) / mnist::kStd).contiguous();
    }
    std::vector<uint8_t> bytes = file_bytes(ck("out" + std::to_string(b) + ".bin"));
    ASSERT_EQ(bytes.size(), want.nbytes())
        << "ONNX Runtime's scores for " << inputs[b].sizes() << " are not " << want.sizes();
    Tensor got = empty(want.sizes(), dtype(kFloat32));
    std::memcpy(got.data_ptr(), bytes.data(), bytes.size());
    Tensor err = (got.to(kFloat64) - want.to(kFloat64)).abs();
    EXPECT_TRUE((err <= want.to(kFloat64).abs() * 1e-4 + 1e-5).all().item<bool>())
        << "batch " << inputs[b].size(0) << ": max |ort - nabla| = " << err.max().item<double>()
        << "\nONNX Runtime: " << got[0] << "\nnabla: " << want[0];
    EXPECT_TRUE(equal(got.argmax(1), want.argmax(1)));
  }
}

TEST_F(MnistProgram, MistakesGetClearMessagesAndExitCodes) {
  Result r = run("train --epoch 2");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("did you mean --epochs"), std::string::npos) << r.out;
  r = run("train --model resnet");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("must be one of"), std::string::npos) << r.out;
  r = run("train --data " + ck("nowhere"));
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.out.find("scripts/get-data.sh"), std::string::npos) << r.out;
  r = run("predict --checkpoint " + ck("none.safetensors") + " x.png");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("does not exist"), std::string::npos) << r.out;
  r = run("frobnicate");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(run("train --help").code, 0);
  EXPECT_EQ(run("--help").code, 0);
}

// tests/hostile/mnist/: the mnist fuzz target's inputs (see fuzz/mnist_fuzzer.cpp), each with
// FILE.expect. A command line (first byte even) must be a usage error (exit code 2) with the
// expected message; a checkpoint (first byte odd) given to `train --resume` must be refused (exit
// code 1) with a message naming it and the damaged field.
TEST_F(MnistProgram, HostileInputsGetClearErrors) {
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(NABLA_HOSTILE_DIR) / "mnist")) {
    const fs::path file = entry.path();
    if (file.extension() == ".expect" || file.extension() == ".md") continue;
    SCOPED_TRACE(file.string());
    std::ifstream ex(file.string() + ".expect");
    std::string type, line;
    ASSERT_TRUE(std::getline(ex, type)) << "every hostile file needs FILE.expect";
    std::vector<std::string> contains;
    while (std::getline(ex, line))
      if (!line.empty()) contains.push_back(line);
    std::vector<uint8_t> bytes = file_bytes(file);
    ASSERT_FALSE(bytes.empty());
    Result r;
    if (bytes[0] % 2 == 0) {
      std::vector<std::string> args(1);
      for (size_t i = 1; i < bytes.size(); ++i) {
        if (bytes[i] == 0) args.emplace_back();
        else args.back() += static_cast<char>(bytes[i]);
      }
      r = run_argv(args);
      EXPECT_EQ(type, "error UsageError");
      EXPECT_EQ(r.code, 2) << r.out;
    } else {
      const std::string ckpt = ck(file.filename().string() + ".safetensors");
      std::ofstream(ckpt, std::ios::binary)
          .write(reinterpret_cast<const char*>(bytes.data() + 1), static_cast<std::streamsize>(bytes.size() - 1));
      r = run_argv({"train", "--resume", ckpt, "--data", (dir_ / "data").string()});
      EXPECT_EQ(type, "error Failure");
      EXPECT_EQ(r.code, 1) << r.out;
      EXPECT_NE(r.out.find(ckpt), std::string::npos) << r.out;
    }
    for (const auto& part : contains) EXPECT_NE(r.out.find(part), std::string::npos) << r.out << "\nmissing: " << part;
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

// What a resumed run reads from its checkpoint beyond the settings: the epoch (library metadata)
// and the mid-epoch progress, each checked (a negative epoch used to train extra epochs).
TEST_F(MnistProgram, DamagedProgressInACheckpointIsRefused) {
  ASSERT_EQ(run("train --model mlp --epochs 1 --quiet " + data() + " --checkpoint " + ck("m.safetensors")).code, 0);
  auto damaged = [&](const std::string& key, const std::string& value) {
    safetensors::File f = safetensors::load_file(ck("m.safetensors"));
    f.metadata[key] = value;
    std::vector<char> bytes = safetensors::serialize(f.tensors, f.metadata);
    std::ofstream(ck("d.safetensors"), std::ios::binary)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return run("train --epochs 3 --quiet --resume " + ck("d.safetensors") + " " + data());
  };
  Result r = damaged("epoch", "-1");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("epoch is not a whole number >= 0: '-1'"), std::string::npos) << r.out;
  r = damaged("user.mnist.partial_seen", "99999999999999999999");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("the metadata field 'mnist.partial_seen' must be a whole number from 0 to 1024"),
            std::string::npos)
      << r.out;
  r = damaged("user.mnist.loader_index", "-3");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("'mnist.loader_index' must be a whole number from 0 to 1024"), std::string::npos) << r.out;
}

// The metrics CSV describes saved checkpoints only: its row is written after the checkpoint is
// saved, and a new run that fails before its first save leaves the previous run's CSV alone.
TEST_F(MnistProgram, CsvRowsFollowSuccessfulSaves) {
  const std::string path = ck("c.safetensors"), csv = ck("c.csv");
  ASSERT_EQ(run("train --model mlp --epochs 2 --quiet " + data() + " --checkpoint " + path).code, 0);
  auto rows = [&] {
    std::ifstream f(csv);
    int n = 0;
    for (std::string line; std::getline(f, line);) ++n;
    return n - 1;
  };
  ASSERT_EQ(rows(), 2);
  // A checkpoint that cannot be saved (a folder is in the way): the run fails at its first save.
  fs::remove(path);
  fs::create_directories(fs::path(path) / "in-the-way");
  Result r = run("train --model mlp --epochs 1 --quiet " + data() + " --checkpoint " + path);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("cannot rename"), std::string::npos) << r.out;
  EXPECT_EQ(rows(), 2) << "the failed run changed the previous run's CSV";
  // A folder that cannot be created is an error naming it.
  r = run("train --model mlp --epochs 1 --quiet " + data() + " --checkpoint /dev/null/sub/c.safetensors");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("cannot create the folder '/dev/null/sub' for the checkpoint"), std::string::npos) << r.out;
}

// --init-from: a PyTorch state dict of PyTorch's examples/mnist Net (torch.save(model.state_dict()))
// starts a run of --model pytorch; a state dict of another architecture is refused with the keys.
TEST_F(MnistProgram, InitFromPyTorchStateDict) {
  write_dataset(dir_ / "data", 128, 64);
  manual_seed(5);
  auto w = [](IntArrayRef shape) { return randn(shape) * 0.05; };
  nn::StateDict sd{{"conv1.weight", w({32, 1, 3, 3})},  {"conv1.bias", w({32})},
                   {"conv2.weight", w({64, 32, 3, 3})}, {"conv2.bias", w({64})},
                   {"fc1.weight", w({128, 9216})},      {"fc1.bias", w({128})},
                   {"fc2.weight", w({10, 128})},        {"fc2.bias", w({10})}};
  torch_io::save(ck("mnist_cnn.pt"), sd);
  // A learning rate of 1e-12 leaves the weights where --init-from put them.
  Result r = run("train --model pytorch --init-from " + ck("mnist_cnn.pt") + " --epochs 1 --lr 1e-12 --quiet " +
                 data() + " --checkpoint " + ck("init.safetensors"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("initialized pytorch from"), std::string::npos) << r.out;
  auto saved = safetensors::load_file(ck("init.safetensors"));
  for (const auto& [name, t] : sd) EXPECT_TRUE(allclose(saved.tensors["model." + name], t, 0, 1e-6)) << name;

  r = run("train --model lenet --init-from " + ck("mnist_cnn.pt") + " --epochs 1 --quiet " + data());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("does not fit --model lenet"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("size mismatch for conv1.weight"), std::string::npos) << r.out;
  r = run("train --init-from " + ck("mnist_cnn.pt") + " --resume " + ck("init.safetensors") + " " + data());
  EXPECT_EQ(r.code, 2) << r.out;
  r = run("train --model pytorch --init-from " + ck("missing.pt") + " --epochs 1 --quiet " + data());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("cannot open"), std::string::npos) << r.out;

  // The real thing, when PyTorch is installed: its example's Net saved in Python.
  if (!nabla_test::python_has("torch")) {
    EXPECT_FALSE(nabla_test::torch_required()) << "NABLA_REQUIRE_TORCH=1 but /usr/bin/python3 cannot import torch";
    return;
  }
  std::ofstream(ck("net.py")) << "import sys, torch\nfrom torch import nn\nimport torch.nn.functional as F\n"
                                 "class Net(nn.Module):\n"
                                 "    def __init__(self):\n"
                                 "        super().__init__()\n"
                                 "        self.conv1 = nn.Conv2d(1, 32, 3, 1)\n"
                                 "        self.conv2 = nn.Conv2d(32, 64, 3, 1)\n"
                                 "        self.dropout1 = nn.Dropout(0.25)\n"
                                 "        self.dropout2 = nn.Dropout(0.5)\n"
                                 "        self.fc1 = nn.Linear(9216, 128)\n"
                                 "        self.fc2 = nn.Linear(128, 10)\n"
                                 "torch.manual_seed(1)\n"
                                 "torch.save(Net().state_dict(), sys.argv[1])\n";
  ASSERT_EQ(std::system(("/usr/bin/python3 " + ck("net.py") + " " + ck("py_cnn.pt")).c_str()), 0);
  r = run("train --model pytorch --init-from " + ck("py_cnn.pt") + " --epochs 1 --quiet " + data() + " --checkpoint " +
          ck("py.safetensors"));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("initialized pytorch from"), std::string::npos) << r.out;
}

// Data-parallel under nabla-run, 2 processes: with --no-shuffle, rank r of a DistributedSampler
// takes the images r, r + 2, ..., so the two per-rank batches of 32 of each step are together the
// single process's batch of 64, and DDP's averaged gradient is that batch's: the weights must end
// equal to a 1-process run with --batch-size 64 (up to float32 rounding). Each worker runs in its
// own folder (a wrapper `cd rank$RANK`), so a file written by rank 1 would show there; only rank 0
// may print and write. The test accuracy printed (each rank evaluates half the test set, summed)
// must be the one `mnist eval` measures on the whole test set with the saved checkpoint.
TEST_F(MnistProgram, TrainsDataParallelUnderNablaRun) {
#ifndef NABLA_RUN_BIN
  GTEST_SKIP() << "nabla-run is not built (no Gloo: install libgloo-dev), so mnist cannot train data-parallel";
#else
  for (const char* d : {"rank0", "rank1"}) fs::create_directories(dir_ / d);
  const std::string args =
      "train --model mlp --optimizer sgd --lr 0.05 --momentum 0.9 --scheduler none --epochs 2 "
      "--no-shuffle --quiet --device cpu " +
      data() +
      " --checkpoint ck.safetensors "
      "--summary-json summary.json";
  std::ofstream(dir_ / "worker.sh") << "cd \"" << dir_.string() << "/rank$RANK\" && exec " << NABLA_MNIST_BIN
                                    << " \"$@\"\n";
  // A port of its own per test process, so parallel ctest runs do not meet.
  const std::string port = std::to_string(20000 + ::getpid() % 20000);
  Result r = run_program(NABLA_RUN_BIN, "--nproc-per-node 2 --master-port " + port + " /bin/sh " +
                                            (dir_ / "worker.sh").string() + " " + args + " --batch-size 32");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("data-parallel: 2 processes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("512 images per process per epoch, 16 steps per epoch"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("batch 32 per process x 2 processes = global batch 64"), std::string::npos) << r.out;
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = r.out.find(what); at != std::string::npos; at = r.out.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("training mlp"), 1u) << r.out;  // rank 1 stays quiet
  EXPECT_EQ(count("epoch 1/2"), 1u) << r.out;
  EXPECT_EQ(count("epoch 2/2"), 1u) << r.out;
  // Rank 0 wrote the checkpoint, the CSV and the summary; rank 1 wrote nothing.
  for (const char* f : {"ck.safetensors", "ck.csv", "summary.json"}) EXPECT_TRUE(fs::exists(dir_ / "rank0" / f)) << f;
  EXPECT_TRUE(fs::is_empty(dir_ / "rank1")) << fs::directory_iterator(dir_ / "rank1")->path();

  // The test accuracy and loss printed for epoch 2 are the whole test set's.
  size_t at = r.out.find("epoch 2/2");
  ASSERT_NE(at, std::string::npos);
  std::string line = r.out.substr(at, r.out.find('\n', at) - at);
  size_t t = line.find("test loss ");
  ASSERT_NE(t, std::string::npos) << line;
  const double test_loss = std::stod(line.substr(t + 10));
  const double test_acc = std::stod(line.substr(line.find("acc ", t) + 4));
  EXPECT_GT(test_acc, 90) << line;
  Result e = run("eval --checkpoint " + (dir_ / "rank0" / "ck.safetensors").string() + " " + data());
  ASSERT_EQ(e.code, 0) << e.out;
  char expect[64];
  std::snprintf(expect, sizeof expect, "test accuracy %.2f%%  loss %.4f", test_acc, test_loss);
  EXPECT_NE(e.out.find(expect), std::string::npos) << "expected '" << expect << "' in:\n" << e.out;

  // One process, global batch 64: the same weights.
  Result one = run_program("cd " + dir_.string() + " && " + NABLA_MNIST_BIN, args + " --batch-size 64");
  ASSERT_EQ(one.code, 0) << one.out;
  auto a = safetensors::load_file((dir_ / "rank0" / "ck.safetensors").string());
  auto b = safetensors::load_file((dir_ / "ck.safetensors").string());
  int compared = 0;
  for (const auto& [name, w] : a.tensors) {
    if (name.rfind("model.", 0) != 0) continue;
    const Tensor* u = b.tensors.find(name);
    ASSERT_NE(u, nullptr) << name;
    EXPECT_TRUE(allclose(w, *u, 1e-4, 1e-5)) << name << ": max difference " << (w - *u).abs().max().item<double>();
    ++compared;
  }
  EXPECT_EQ(compared, 4);  // two Linear layers' weight and bias
#endif
}

// --shard zero1: each of the 2 processes keeps and steps half of Adam's state and broadcasts its
// updated weights; the run matches plain data-parallel training (weights and the whole optimizer
// state in the checkpoint), also when the sharded run stops after epoch 1 and is resumed.
TEST_F(MnistProgram, ShardedOptimizerStateTrainsAsDataParallelAndResumes) {
#ifndef NABLA_RUN_BIN
  GTEST_SKIP() << "nabla-run is not built (no Gloo: install libgloo-dev), so mnist cannot train data-parallel";
#else
  const std::string port = std::to_string(20000 + (::getpid() + 17) % 20000);
  const std::string launch = std::string(NABLA_RUN_BIN) + " --nproc-per-node 2 --master-port " + port + " " +
                             NABLA_MNIST_BIN +
                             " train --model mlp --optimizer adam --lr 0.002 --scheduler none "
                             "--no-shuffle --quiet --device cpu --batch-size 32 " +
                             data();
  Result ddp = run_program(launch, "--epochs 2 --checkpoint " + ck("ddp.safetensors"));
  ASSERT_EQ(ddp.code, 0) << ddp.out;
  Result first = run_program(launch, "--shard zero1 --epochs 1 --checkpoint " + ck("zero.safetensors"));
  ASSERT_EQ(first.code, 0) << first.out;
  EXPECT_NE(first.out.find("optimizer state sharded: ZeroRedundancyOptimizer"), std::string::npos) << first.out;
  Result second = run_program(launch, "--shard zero1 --epochs 2 --resume " + ck("zero.safetensors") + " --checkpoint " +
                                          ck("zero.safetensors"));
  ASSERT_EQ(second.code, 0) << second.out;
  auto a = safetensors::load_file(ck("ddp.safetensors")), b = safetensors::load_file(ck("zero.safetensors"));
  int model = 0, state = 0;
  for (const auto& [name, w] : a.tensors) {
    const Tensor* u = b.tensors.find(name);
    ASSERT_NE(u, nullptr) << name << " is missing from the sharded run's checkpoint";
    EXPECT_TRUE(allclose(w.to(kFloat64), u->to(kFloat64), 1e-4, 1e-6))
        << name << ": max difference " << (w.to(kFloat64) - u->to(kFloat64)).abs().max().item<double>();
    model += name.rfind("model.", 0) == 0;
    state += name.rfind("optimizer.state.", 0) == 0;
  }
  EXPECT_EQ(model, 4);      // two Linear layers' weight and bias
  EXPECT_EQ(state, 4 * 3);  // step, exp_avg, exp_avg_sq of each
  EXPECT_EQ(a.tensors.size(), b.tensors.size());
  // --shard fsdp: weights, gradients and Adam's state sharded, each layer a unit. The same weights
  // as DDP (up to the reductions' rounding); stopped after epoch 1 and resumed from its shards, it
  // ends as the uninterrupted run; its checkpoint evaluates as any other.
  Result f2 = run_program(launch, "--shard fsdp --epochs 2 --checkpoint " + ck("f2.safetensors"));
  ASSERT_EQ(f2.code, 0) << f2.out;
  EXPECT_NE(f2.out.find("FullyShardedDataParallel, each layer a unit"), std::string::npos) << f2.out;
  Result f1 = run_program(launch, "--shard fsdp --epochs 1 --checkpoint " + ck("f1.safetensors"));
  ASSERT_EQ(f1.code, 0) << f1.out;
  Result f1b = run_program(
      launch, "--shard fsdp --epochs 2 --resume " + ck("f1.safetensors") + " --checkpoint " + ck("f1.safetensors"));
  ASSERT_EQ(f1b.code, 0) << f1b.out;
  auto whole = safetensors::load_file(ck("f2.safetensors")), resumed = safetensors::load_file(ck("f1.safetensors"));
  int weights = 0;
  for (const auto& [name, w] : a.tensors) {
    if (name.rfind("model.", 0) != 0) continue;
    const Tensor *f = whole.tensors.find(name), *g = resumed.tensors.find(name);
    ASSERT_TRUE(f && g) << name;
    EXPECT_TRUE(allclose(f->to(kFloat64), w.to(kFloat64), 1e-3, 1e-5)) << name << " (FSDP vs DDP)";
    EXPECT_TRUE(allclose(g->to(kFloat64), f->to(kFloat64), 1e-6, 1e-8)) << name << " (resumed vs uninterrupted)";
    ++weights;
  }
  EXPECT_EQ(weights, 4);
  EXPECT_TRUE(fs::exists(dir_ / "f2.safetensors.shards" / "index.json"));
  Result e = run("eval --checkpoint " + ck("f2.safetensors") + " " + data());
  EXPECT_EQ(e.code, 0) << e.out;
  Result plain =
      run_program(launch, "--epochs 3 --resume " + ck("f2.safetensors") + " --checkpoint " + ck("f3.safetensors"));
  EXPECT_EQ(plain.code, 2) << plain.out;
  EXPECT_NE(plain.out.find("was trained with --shard fsdp"), std::string::npos) << plain.out;
  // One process: nothing to shard over.
  Result alone = run("train --shard zero1 --epochs 1 --quiet " + data());
  EXPECT_EQ(alone.code, 2) << alone.out;
  EXPECT_NE(alone.out.find("start it with nabla-run --nproc-per-node N"), std::string::npos) << alone.out;
#endif
}

// Ctrl-C under nabla-run: the launcher forwards SIGINT, the ranks agree to stop after the same step,
// rank 0 saves, and resuming (every rank reading rank 0's checkpoint) ends with the weights of an
// uninterrupted data-parallel run.
// With --device cuda, each process trains on its own GPU over NCCL; without a GPU every rank says
// so at once (a usage error, which nabla-run passes on) instead of waiting for its peers.
TEST_F(MnistProgram, DataParallelOnGpusSaysWhenThereIsNoGpu) {
#ifndef NABLA_RUN_BIN
  GTEST_SKIP() << "nabla-run is not built (no Gloo: install libgloo-dev), so mnist cannot train data-parallel";
#else
  if (cuda::is_available()) GTEST_SKIP() << "a GPU is here: scripts/gpu-verify.sh runs mnist on it";
  const std::string port = std::to_string(20000 + (::getpid() + 7) % 20000);
  Result r = run_program(NABLA_RUN_BIN, "--nproc-per-node 2 --master-port " + port + " " + NABLA_MNIST_BIN +
                                            " train --device cuda --epochs 1 --quiet " + data());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--device cuda: no usable CUDA GPU here"), std::string::npos) << r.out;
#endif
}

// --timeout bounds how long a rank waits for the others (PyTorch's default is 30 minutes, and
// mnist had no way to shorten it): rank 0 of a 2-rank job whose rank 1 never comes fails after 2 s, naming it.
TEST_F(MnistProgram, DataParallelTimeoutIsAnOptionAndNamesTheMissingRank) {
#ifndef NABLA_RUN_BIN
  GTEST_SKIP() << "nabla-run is not built (no Gloo: install libgloo-dev), so mnist cannot train data-parallel";
#else
  const std::string port = std::to_string(20000 + (::getpid() + 13) % 20000);
  auto t0 = std::chrono::steady_clock::now();
  // Node 0 of 2, one worker: WORLD_SIZE 2, and node 1 is never started.
  Result r = run_program(NABLA_RUN_BIN, "--nnodes 2 --node-rank 0 --no-store-secret --master-port " + port + " " +
                                            NABLA_MNIST_BIN + " train --timeout 2 --device cpu --quiet " + data());
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("waited 2000 ms"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("for ranks [1] to join"), std::string::npos) << r.out;
  EXPECT_LT(took, 20.0) << r.out;
  EXPECT_EQ(run("train --timeout 0").code, 2);
  EXPECT_NE(run("train --help").out.find("--timeout SECONDS"), std::string::npos);
#endif
}

// On several machines only rank 0's machine has the checkpoint: a rank that cannot find --resume
// says what to do, and nabla-run stops the job with its status.
TEST_F(MnistProgram, DataParallelResumeWithoutTheFileSaysToCopyIt) {
#ifndef NABLA_RUN_BIN
  GTEST_SKIP() << "nabla-run is not built (no Gloo: install libgloo-dev), so mnist cannot train data-parallel";
#else
  const std::string port = std::to_string(20000 + (::getpid() + 11) % 20000);
  Result r = run_program(NABLA_RUN_BIN, "--nproc-per-node 2 --master-port " + port + " " + NABLA_MNIST_BIN +
                                            " train --device cpu --quiet --resume " + ck("elsewhere.safetensors") +
                                            " " + data());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("does not exist on this machine (rank "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("copy the file to the same path on every machine"), std::string::npos) << r.out;
#endif
}

TEST_F(MnistProgram, DataParallelInterruptSavesAndResumesMidEpoch) {
#ifndef NABLA_RUN_BIN
  GTEST_SKIP() << "nabla-run is not built (no Gloo: install libgloo-dev)";
#else
  write_dataset(dir_ / "data", 16384, 256);
  for (const char* d : {"rank0", "rank1"}) fs::create_directories(dir_ / d);
  std::ofstream(dir_ / "worker.sh") << "cd \"" << dir_.string() << "/rank$RANK\" && exec " << NABLA_MNIST_BIN
                                    << " \"$@\"\n";
  const std::string port = std::to_string(20000 + (::getpid() + 7) % 20000);
  const std::string launch = std::string(NABLA_RUN_BIN) + " --nproc-per-node 2 --master-port " + port + " /bin/sh " +
                             (dir_ / "worker.sh").string();
  const std::string common = " train --model lenet --epochs 3 --batch-size 32 --quiet --device cpu " + data();
  Result full = run_program(launch, common + " --checkpoint " + ck("full.safetensors"));
  ASSERT_EQ(full.code, 0) << full.out;

  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::string cmd = launch + common + " --checkpoint " + ck("int.safetensors") + " > " + ck("int.log") + " 2>&1";
    execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  kill(pid, SIGINT);  // to nabla-run, which forwards it to both workers
  int status = 0;
  waitpid(pid, &status, 0);
  std::string log;
  {
    std::ifstream in(ck("int.log"));
    log.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_TRUE(WIFEXITED(status)) << log;
  if (WEXITSTATUS(status) == 0) GTEST_SKIP() << "training finished before the interrupt arrived";
  ASSERT_EQ(WEXITSTATUS(status), 130) << log;
  EXPECT_NE(log.find("interrupted: saved checkpoint"), std::string::npos) << log;
  ASSERT_TRUE(fs::exists(ck("int.safetensors"))) << log;
  EXPECT_TRUE(fs::is_empty(dir_ / "rank1")) << "rank 1 wrote " << fs::directory_iterator(dir_ / "rank1")->path();

  Result resumed = run_program(launch, " train --epochs 3 --quiet --resume " + ck("int.safetensors") + " " + data());
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_TRUE(same_weights(ck("full.safetensors"), ck("int.safetensors")));
#endif
}
