// examples/text_classify end to end: make_data.py builds a small data set from this machine's apt
// lists (every Debian machine that installed packages through apt-get has them; where they are empty
// the script fails, naming the fix, `apt-get update`, and so does this test: it does not skip), then
// each model trains for a few epochs and must reach the accuracy its README promises for this size,
// save, and classify a sentence.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "program_util.h"

#if !defined(NABLA_TEXT_CLASSIFY_BIN) || !defined(NABLA_TEXT_CLASSIFY_DATA_SCRIPT)
#error "the text_classify program's and its data script's paths must be defined"
#endif

using namespace nabla::program_test;
namespace fs = std::filesystem;

namespace {

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The number after "test accuracy: " on the last line that has it (-1 when none does).
double final_accuracy(const std::string& out) {
  std::smatch m;
  double acc = -1;
  std::regex re(R"(test accuracy: ([0-9.]+)\n)");
  for (auto it = out.cbegin(); std::regex_search(it, out.cend(), m, re); it = m[0].second) acc = std::stod(m[1]);
  return acc;
}

struct TextClassify : ::testing::Test {
  static void SetUpTestSuite() {
    dir = fs::temp_directory_path() / ("nabla_text_classify_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    // 600 texts a section (about 3,080 for training, 520 for testing): a second or two per lstm run.
    made = run_program("/usr/bin/python3",
                       std::string(NABLA_TEXT_CLASSIFY_DATA_SCRIPT) + " " + (dir / "data").string() + " --max 600");
  }
  static void TearDownTestSuite() { fs::remove_all(dir); }
  static Result train(const std::string& model, const std::string& args) {
    return run_program(NABLA_TEXT_CLASSIFY_BIN, "--data " + (dir / "data").string() + " --model " + model + " --save " +
                                                    (dir / (model + ".safetensors")).string() + " " + args);
  }
  static inline fs::path dir;
  static inline Result made;
};

TEST_F(TextClassify, DataScriptWritesSixSectionsDeterministically) {
  ASSERT_EQ(made.code, 0) << made.out;
  EXPECT_EQ(read(dir / "data" / "classes.txt"), "admin\ngames\ngraphics\nnet\nscience\nsound\n");
  // AG_NEWS's layout: every field quoted, the label first, from 1.
  std::string train = read(dir / "data" / "train.csv");
  EXPECT_TRUE(std::regex_search(train, std::regex(R"(^"[1-6]","[^"]+","[^\n]*\n)"))) << train.substr(0, 200);
  std::string test = read(dir / "data" / "test.csv");
  // 600 a section, one line each (make_data.py writes a long description on one line).
  EXPECT_EQ(std::count(train.begin(), train.end(), '\n') + std::count(test.begin(), test.end(), '\n'), 3600);
  // The same apt lists give the same files.
  Result again = run_program(
      "/usr/bin/python3", std::string(NABLA_TEXT_CLASSIFY_DATA_SCRIPT) + " " + (dir / "again").string() + " --max 600");
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_EQ(read(dir / "again" / "train.csv"), train);
  EXPECT_EQ(read(dir / "again" / "test.csv"), test);
}

TEST_F(TextClassify, EachModelLearnsSavesAndClassifies) {
  ASSERT_EQ(made.code, 0) << made.out;
  // The README's CI-sized run: (model, epochs, accuracy it must beat; chance is 1/6).
  for (auto [model, epochs, bar] : {std::tuple{"bow", 5, 0.62}, {"bag", 5, 0.62}, {"lstm", 5, 0.62}}) {
    SCOPED_TRACE(model);
    Result r = train(model, "--epochs " + std::to_string(epochs));
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("epoch   " + std::to_string(epochs) + "  loss"), std::string::npos) << r.out;
    EXPECT_GT(final_accuracy(r.out), bar) << r.out;
    // The saved model answers with the sections' names and probabilities, most likely first.
    Result c = run_program(NABLA_TEXT_CLASSIFY_BIN, "--load " + (dir / (std::string(model) + ".safetensors")).string() +
                                                        " --classify 'a multiplayer strategy game' --top 3");
    ASSERT_EQ(c.code, 0) << c.out;
    std::smatch m;
    std::regex line(R"(\n +([0-9.]+)%  (admin|games|graphics|net|science|sound)\n)");
    std::vector<double> p;
    std::vector<std::string> names;
    for (auto it = c.out.cbegin(); std::regex_search(it, c.out.cend(), m, line); it = m[0].second - 1) {
      p.push_back(std::stod(m[1]));
      names.push_back(m[2]);
    }
    ASSERT_EQ(p.size(), 3u) << c.out;
    EXPECT_GE(p[0], p[1]);
    EXPECT_GE(p[1], p[2]);
    EXPECT_LE(p[0] + p[1] + p[2], 100.05);
    EXPECT_EQ(names[0], "games") << c.out;
  }
}

TEST(TextClassifyProgram, HelpAndMistakes) {  // no data needed: a plain TEST, without the suite's set-up
  Result help = run_program(NABLA_TEXT_CLASSIFY_BIN, "--help");
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("usage: text_classify --data DIR"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("make_data.py"), std::string::npos) << help.out;
  Result model = run_program(NABLA_TEXT_CLASSIFY_BIN, "--data x --model cnn");
  EXPECT_EQ(model.code, 2) << model.out;
  EXPECT_NE(model.out.find("--model is bow, bag or lstm, not 'cnn'"), std::string::npos) << model.out;
  Result nodata =
      run_program(NABLA_TEXT_CLASSIFY_BIN, "--data " + (fs::temp_directory_path() / "nabla_no_such_dir").string());
  EXPECT_EQ(nodata.code, 1) << nodata.out;
  EXPECT_NE(nodata.out.find("make_data.py"), std::string::npos) << nodata.out;
  Result alone = run_program(NABLA_TEXT_CLASSIFY_BIN, "--classify 'some text'");
  EXPECT_EQ(alone.code, 2) << alone.out;
  EXPECT_NE(alone.out.find("--classify TEXT and --load FILE go together"), std::string::npos) << alone.out;
}

}  // namespace
