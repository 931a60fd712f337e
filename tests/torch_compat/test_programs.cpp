// The libtorch-style programs of programs/, built against nabla's torch layer, give libtorch's
// results: the numbers each prints match programs/<name>.expected (libtorch 1.13's output,
// recorded by record_libtorch.sh) and, when libtorch-dev is installed, the output of the same
// source built against libtorch in this build (libtorch_program_<name>).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

std::vector<std::string> program_names() {
  std::vector<std::string> names;
  std::stringstream ss(NABLA_TORCH_PROGRAM_NAMES);
  for (std::string name; std::getline(ss, name, ',');)
    if (!name.empty()) names.push_back(name);
  return names;
}

// Runs `binary` in a scratch folder of its own; returns its standard output (empty on failure,
// with the exit status in *status).
std::string run_program(const std::string& binary, int* status) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() /
                 ("nabla_torch_programs_" + std::to_string(getpid()) + "_" + fs::path(binary).filename().string());
  fs::create_directories(dir);
  std::string cmd = "cd '" + dir.string() + "' && '" + binary + "' 2>&1";
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return "";
  std::array<char, 4096> buf{};
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  *status = pclose(p);
  fs::remove_all(dir);
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Compares two outputs token by token: words must be equal, numbers within
// |a - b| <= atol + rtol * |b|. Returns "" or a description of the first difference.
std::string compare_outputs(const std::string& got, const std::string& want, double rtol, double atol) {
  std::stringstream g(got), w(want);
  std::string gline, wline;
  int line = 0;
  while (true) {
    bool more_g = static_cast<bool>(std::getline(g, gline)), more_w = static_cast<bool>(std::getline(w, wline));
    ++line;
    if (!more_g && !more_w) return "";
    if (more_g != more_w)
      return "line " + std::to_string(line) + ": one output ends first (got '" + gline + "', want '" + wline + "')";
    std::stringstream gt(gline), wt(wline);
    std::string a, b;
    while (true) {
      bool ha = static_cast<bool>(gt >> a), hb = static_cast<bool>(wt >> b);
      if (!ha && !hb) break;
      if (ha != hb) return "line " + std::to_string(line) + ": '" + gline + "' vs '" + wline + "'";
      char* ea = nullptr;
      char* eb = nullptr;
      double x = std::strtod(a.c_str(), &ea), y = std::strtod(b.c_str(), &eb);
      bool na = ea && *ea == '\0' && !a.empty(), nb = eb && *eb == '\0' && !b.empty();
      if (na && nb) {
        if (std::abs(x - y) > atol + rtol * std::abs(y))
          return "line " + std::to_string(line) + ": " + a + " vs " + b + " ('" + gline + "' vs '" + wline + "')";
      } else if (a != b) {
        return "line " + std::to_string(line) + ": '" + a + "' vs '" + b + "'";
      }
    }
  }
}

}  // namespace

TEST(TorchPrograms, CompareChecksNumbersWithinToleranceAndWordsExactly) {
  EXPECT_EQ(compare_outputs("loss 1.0001 ok\n", "loss 1.0 ok\n", 1e-3, 0), "");
  EXPECT_NE(compare_outputs("loss 1.01 ok\n", "loss 1.0 ok\n", 1e-3, 0), "");
  EXPECT_NE(compare_outputs("loss 1.0 no\n", "loss 1.0 ok\n", 1e-3, 0), "");
  EXPECT_NE(compare_outputs("loss 1.0\n", "loss 1.0\nmore 2\n", 1e-3, 0), "");
}

TEST(TorchPrograms, ThereAreAtLeastThreePrograms) { EXPECT_GE(program_names().size(), 3u); }

class TorchProgram : public ::testing::TestWithParam<std::string> {};

TEST_P(TorchProgram, GivesLibtorchsResults) {
  const std::string& name = GetParam();
  int status = -1;
  const std::string ours = run_program(std::string(NABLA_TORCH_PROGRAM_DIR) + "/torch_program_" + name, &status);
  ASSERT_EQ(status, 0) << ours;
  const std::string expected_path = std::string(NABLA_TORCH_EXPECTED_DIR) + "/" + name + ".expected";
  ASSERT_TRUE(std::filesystem::exists(expected_path))
      << expected_path << " is missing: run tests/torch_compat/record_libtorch.sh";
  const std::string expected = read_file(expected_path);
  EXPECT_EQ(compare_outputs(ours, expected, 2e-3, 2e-5), "") << "nabla printed:\n" << ours;
  if (NABLA_LIBTORCH_TWINS) {
    const std::string theirs = run_program(std::string(NABLA_TORCH_PROGRAM_DIR) + "/libtorch_program_" + name, &status);
    ASSERT_EQ(status, 0) << theirs;
    EXPECT_EQ(compare_outputs(ours, theirs, 2e-3, 2e-5), "") << "nabla:\n" << ours << "libtorch:\n" << theirs;
    EXPECT_EQ(compare_outputs(theirs, expected, 1e-5, 1e-6), "")
        << "libtorch's output differs from " << expected_path << " (run record_libtorch.sh):\n"
        << theirs;
  }
}

INSTANTIATE_TEST_SUITE_P(Programs, TorchProgram, ::testing::ValuesIn(program_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });
