// examples/audio_classify end to end: make_data.py speaks a small set of words with espeak-ng and
// sox, the program trains on them (log-mel and MFCC features), reaches an accuracy that shows it
// learned, saves the model, classifies a clip with it, and reports mistakes with a message and exit
// status 1 (bad input) or 2 (usage).
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "program_util.h"

#if !defined(NABLA_AUDIO_CLASSIFY_BIN) || !defined(NABLA_AUDIO_CLASSIFY_DATA_SCRIPT)
#error "audio_classify's paths must be defined"
#endif

using namespace nabla::program_test;
namespace fs = std::filesystem;

namespace {

const fs::path& words() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("nabla_audio_classify_" + std::to_string(::getpid()));
    fs::remove_all(d);
    Result r = run_program("/usr/bin/python3", std::string(NABLA_AUDIO_CLASSIFY_DATA_SCRIPT) + " " + d.string() +
                                                   " --words yes,no,up,down --per-word 80 --seed 3");
    EXPECT_EQ(r.code, 0) << r.out;
    return d;
  }();
  return dir;
}

double test_accuracy(const std::string& out) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex(R"(test accuracy: ([0-9.]+))"))) return -1;
  return std::stod(m[1]);
}

}  // namespace

// One data set, made once: 4 words x 80 clips (64 train, 16 test each), ~10 s; then 15 epochs of
// log-mel (~8 s) and 8 of MFCC (~2 s) training.
TEST(AudioClassify, MakesDataLearnsWordsSavesAndClassifiesAClip) {
  int64_t clips = 0;
  for (const char* split : {"train", "test"})
    for (const char* word : {"yes", "no", "up", "down"}) {
      fs::path d = words() / split / word;
      ASSERT_TRUE(fs::is_directory(d)) << d;
      for (const auto& e : fs::directory_iterator(d)) {
        EXPECT_EQ(fs::file_size(e.path()), 44u + 2 * 16000) << e.path();  // 1 s of 16-bit mono at 16 kHz
        ++clips;
      }
    }
  EXPECT_EQ(clips, 320);

  const std::string model = (words() / "words.safetensors").string();
  Result r =
      run_program(NABLA_AUDIO_CLASSIFY_BIN,
                  "--data " + words().string() + " --epochs 15 --batch-size 16 --lr 0.003 --seed 1 --save " + model);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("256 training and 64 test clips of 4 words: down,no,up,yes"), std::string::npos) << r.out;
  EXPECT_GE(test_accuracy(r.out), 0.8) << r.out;  // chance is 0.25; 0.91 measured
  ASSERT_TRUE(fs::exists(model));

  Result c = run_program(NABLA_AUDIO_CLASSIFY_BIN,
                         "--load " + model + " --classify " + (words() / "test" / "yes" / "0000.wav").string());
  ASSERT_EQ(c.code, 0) << c.out;
  EXPECT_TRUE(std::regex_search(c.out, std::regex(R"(0000\.wav \(16000 Hz, 1\.00 s\):\n  (yes|no|up|down) +[0-9.]+%)")))
      << c.out;

  r = run_program(NABLA_AUDIO_CLASSIFY_BIN,
                  "--data " + words().string() +
                      " --features mfcc --epochs 8 --batch-size 16 --lr 0.003 --seed 2 --save " +
                      (words() / "mfcc.safetensors").string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_GE(test_accuracy(r.out), 0.8) << r.out;
  fs::remove_all(words());
}

TEST(AudioClassify, ReportsMistakes) {
  Result r = run_program(NABLA_AUDIO_CLASSIFY_BIN, "--epochs 2");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--data DIR is needed"), std::string::npos) << r.out;
  r = run_program(NABLA_AUDIO_CLASSIFY_BIN, "--data /tmp --features fft");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--features is mel or mfcc"), std::string::npos) << r.out;
  r = run_program(NABLA_AUDIO_CLASSIFY_BIN, "--data /nonexistent/words");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("/nonexistent/words"), std::string::npos) << r.out;
  r = run_program(NABLA_AUDIO_CLASSIFY_BIN, "--classify x.wav");
  EXPECT_EQ(r.code, 2) << r.out;
  r = run_program(NABLA_AUDIO_CLASSIFY_BIN, "--help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("make_data.py"), std::string::npos) << r.out;
}
