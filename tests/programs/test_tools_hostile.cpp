// nabla-inspect and nabla-convert on the hostile PyTorch files (fuzz/torch_hostile.h, made here
// at the size they were reported), each run as a process whose peak memory (wait4) and time are
// measured: a clear error, or a correct result, within 100 MB; a run is killed at a deadline (20 s)
// far above the tenths of seconds they take (a hang guard, not a speed test). Then what else was
// found: many non-tensor values (linear, not quadratic), and names that would drive a terminal or
// are not UTF-8.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "fuzz/torch_hostile.h"
#include "nabla.h"
#include "tests/common/sanitizers.h"

using namespace nabla;
namespace fs = std::filesystem;
namespace th = nabla_fuzz::torch_hostile;
using json = nlohmann::json;
using torch_io::Value;

namespace {

struct ToolRun {
  int code = -1;  // the exit status; -1: killed at the deadline
  std::string out, err;
  double seconds = 0, peak_mb = 0;
};

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

class ToolsHostile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("nabla_tools_hostile_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  void write(const std::string& name, const th::Bytes& b) const {
    std::ofstream f(path(name), std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  }

  // Runs a tool with stdout and stderr apart, through ToolsHostileHelper.DISABLED_Measure in a
  // fresh process of this program: a child forked from this one would report the test's own
  // memory as its peak (the resident pages it shares at the fork count), not the tool's.
  ToolRun run(const std::string& binary, std::vector<std::string> args, int deadline_s = 20) const {
    if (nabla::testing::kAddressSanitizer) deadline_s *= 6;
    const std::string out = path("stdout"), err = path("stderr"), list = path("argv");
    {
      std::ofstream f(list, std::ios::trunc);
      f << binary << "\n";
      for (const auto& a : args) f << a << "\n";
    }
    const std::string exe = fs::read_symlink("/proc/self/exe").string();
    const std::string cmd = "env -u GTEST_TOTAL_SHARDS -u GTEST_SHARD_INDEX NABLA_MEASURE='" + list +
                            "' NABLA_MEASURE_OUT='" + out + "' NABLA_MEASURE_ERR='" + err +
                            "' NABLA_MEASURE_DEADLINE=" + std::to_string(deadline_s) + " " + exe +
                            " --gtest_also_run_disabled_tests --gtest_filter=ToolsHostileHelper.DISABLED_Measure 2>&1";
    std::string report;
    FILE* p = ::popen(cmd.c_str(), "r");
    char buf[4096];
    while (size_t n = std::fread(buf, 1, sizeof buf, p)) report.append(buf, n);
    ::pclose(p);
    ToolRun r;
    const size_t at = report.find("MEASURE ");
    long kb = 0;
    if (at == std::string::npos ||
        std::sscanf(report.c_str() + at, "MEASURE %d %ld %lf", &r.code, &kb, &r.seconds) != 3) {
      ADD_FAILURE() << "the measuring helper failed:\n" << report;
      return r;
    }
    r.peak_mb = static_cast<double>(kb) / 1024.0;
    r.out = slurp(out), r.err = slurp(err);
    return r;
  }
  ToolRun inspect(std::vector<std::string> args) const { return run(NABLA_INSPECT_BIN, std::move(args)); }
  ToolRun convert(std::vector<std::string> args) const { return run(NABLA_CONVERT_BIN, std::move(args)); }

  // A run that must end (exit `code`) within `max_mb` (the bound for its hostile files),
  // its output holding `text`.
  void expect_bounded(const ToolRun& r, const std::string& what, int code, const std::string& text,
                      double max_mb = 100) const {
    std::printf("%-58s exit %d in %.2f s, peak %.1f MB\n", what.c_str(), r.code, r.seconds, r.peak_mb);
    ASSERT_NE(r.code, -1) << what << ": killed at the deadline";
    EXPECT_EQ(r.code, code) << what << "\n" << r.out << r.err;
    EXPECT_NE((r.out + r.err).find(text), std::string::npos) << what << ": no '" << text << "' in\n" << r.out << r.err;
    if (!nabla::testing::kAddressSanitizer) EXPECT_LT(r.peak_mb, max_mb) << what;
  }

  fs::path dir_;
};

}  // namespace

// Run by ToolsHostile's run(): runs the command listed in $NABLA_MEASURE (one argument a line),
// stdout and stderr to $NABLA_MEASURE_OUT and _ERR, killed after $NABLA_MEASURE_DEADLINE seconds,
// and prints "MEASURE <exit status, -1 if killed> <peak resident KB> <seconds>".
TEST(ToolsHostileHelper, DISABLED_Measure) {
  std::ifstream list(std::getenv("NABLA_MEASURE"));
  std::vector<std::string> args;
  for (std::string line; std::getline(list, line);) args.push_back(line);
  ASSERT_FALSE(args.empty());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string out = std::getenv("NABLA_MEASURE_OUT"), err = std::getenv("NABLA_MEASURE_ERR");
  const int deadline_s = std::atoi(std::getenv("NABLA_MEASURE_DEADLINE"));
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = ::fork();
  if (pid == 0) {
    int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600),
        e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(o, 1), ::dup2(e, 2);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0, code = -1;
  rusage ru{};
  while (true) {
    if (::wait4(pid, &status, WNOHANG, &ru) == pid) {
      code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(deadline_s)) {
      ::kill(pid, SIGKILL);
      ::wait4(pid, &status, 0, &ru);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("MEASURE %d %ld %.3f\n", code, static_cast<long>(ru.ru_maxrss), seconds);
}

namespace {

// CRC-32 of n copies of a float, the slow way.
uint32_t crc_of_copies(float v, size_t n) {
  std::vector<float> buf(1 << 16, v);
  uLong crc = 0;
  for (size_t done = 0; done < n; done += buf.size())
    crc =
        ::crc32(crc, reinterpret_cast<const Bytef*>(buf.data()), static_cast<uInt>(std::min(buf.size(), n - done) * 4));
  return static_cast<uint32_t>(crc);
}

std::string hex8(uint32_t v) {
  char b[16];
  std::snprintf(b, sizeof b, "%08x", v);
  return b;
}

}  // namespace

// Shared subtrees, a deep shared key, empty dicts, nested records: each ends in a clear error, from both tools.
TEST_F(ToolsHostile, ReportedFilesEndInClearErrors) {
  struct Case {
    const char* name;
    th::Bytes bytes;
    const char* text;
  };
  std::vector<Case> cases;
  cases.push_back({"billion_laughs.pt", th::billion_laughs(), "the value has 1048576 leaves"});
  cases.push_back({"deep_shared_key.pt", th::deep_shared_key(), "the value has 1 leaf"});
  cases.push_back({"empty_dicts.pt", th::empty_dicts(), "LoadOptions::max_value_bytes"});
  cases.push_back({"empty_dicts_deflated.pt", th::empty_dicts(9'900'000, true), "LoadOptions::max_value_bytes"});
  cases.push_back(
      {"nested_records.pt", th::nested_records(), "entries 'archive/data/000' and 'archive/data/001' overlap"});
  for (const Case& c : cases) {
    write(c.name, c.bytes);
    const std::string f = path(c.name);
    expect_bounded(inspect({f}), std::string("nabla-inspect ") + c.name, 1, c.text);
    expect_bounded(inspect({"--json", f}), std::string("nabla-inspect --json ") + c.name, 1, c.text);
    expect_bounded(convert({f, path("out.safetensors")}), std::string("nabla-convert ") + c.name + " out.safetensors",
                   1, c.text);
    expect_bounded(convert({f, path("out.pt")}), std::string("nabla-convert ") + c.name + " out.pt", 1, c.text);
    EXPECT_FALSE(fs::exists(path("out.safetensors")) || fs::exists(path("out.pt")));
  }
  // The limits name the option that raises them, and it does.
  ToolRun r = inspect({path("empty_dicts.pt")});
  EXPECT_NE(r.err.find("(--max-mb raises it)"), std::string::npos) << r.err;
  write("dicts.pt", th::empty_dicts(600'000, true));
  EXPECT_EQ(inspect({path("dicts.pt")}).code, 1);
  r = inspect({"--max-mb", "200", path("dicts.pt")});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("  599999 = {}\n"), std::string::npos);
  EXPECT_EQ(inspect({"--max-mb", "x", path("dicts.pt")}).code, 2);
}

// An expanded view: legal, and handled without making it contiguous.
TEST_F(ToolsHostile, ExpandedViewsAreSummedAndConvertedWithoutCopies) {
  write("expanded.pt", th::zero_stride_view());
  const std::string f = path("expanded.pt");
  // The CRC of 5e8 copies of 2.5f (what the tool printed when it made the view contiguous, 3.8 GB).
  ToolRun r = inspect({f});
  expect_bounded(r, "nabla-inspect expanded.pt (5e8 elements, stride 0)", 0,
                 "expanded  float32  [500000000]  2000000000  c3acc13b");
  r = inspect({"--json", "--values", f});
  expect_bounded(r, "nabla-inspect --json expanded.pt", 0, "\"crc32\": \"c3acc13b\"");
  EXPECT_EQ(json::parse(r.out)["tensors"][0]["bytes"], 2000000000);
  r = inspect({"--values", f});
  EXPECT_NE(r.out.find("c3acc13b  2.5, 2.5, 2.5, 2.5, 2.5, 2.5, ..."), std::string::npos) << r.out;
  // Checked the slow way on 5e7 copies.
  write("expanded_5e7.pt", th::zero_stride_view(50'000'000));
  r = inspect({path("expanded_5e7.pt")});
  EXPECT_NE(r.out.find(hex8(crc_of_copies(2.5f, 50'000'000))), std::string::npos) << r.out;
  // To .pt it stays a view; to safetensors (which needs every value) it is refused, before writing.
  r = convert({f, path("out.pt")});
  expect_bounded(r, "nabla-convert expanded.pt out.pt", 0, "1 tensor");
  EXPECT_LT(fs::file_size(path("out.pt")), 2048u);
  EXPECT_NE(inspect({path("out.pt")}).out.find("c3acc13b"), std::string::npos);
  r = convert({f, path("out.safetensors")});
  expect_bounded(r, "nabla-convert expanded.pt out.safetensors", 1,
                 "would hold 2000000000 bytes of values, more than the limit of " +
                     std::to_string((uint64_t(64) << 20) + 4 * fs::file_size(f)));
  EXPECT_NE(r.err.find("'expanded' is a view of shape [500000000] and strides [0] over 1 stored element"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(path("out.safetensors")));
  // Views of every kind sum as their contiguous copies do, and small ones convert.
  Tensor base = arange(24, dtype(kFloat32)).view({2, 3, 4});
  Tensor row = arange(4, dtype(kInt64)).view({1, 4});
  Value views =
      Value::dict({{"expanded", row.expand({3, 4})},
                   {"transposed", base.permute({2, 0, 1})},
                   {"sliced", base.slice(2, 1, 3)},
                   {"inner_expand", base.slice(2, 0, 1).expand({2, 3, 5})},
                   {"int8", Value::tensor(arange(6, dtype(kInt32)).view({2, 3}).t(), torch_io::StorageType::int8)}});
  Value copies = Value::dict();
  for (const auto& [k, v] : views.entries())
    copies.set(k, k.to_string() == "int8" ? Value::tensor(v.to_tensor().contiguous(), torch_io::StorageType::int8)
                                          : Value(v.to_tensor().contiguous()));
  torch_io::save(path("views.pt"), views);
  torch_io::save(path("copies.pt"), copies);
  json a = json::parse(inspect({"--json", path("views.pt")}).out),
       b = json::parse(inspect({"--json", path("copies.pt")}).out);
  ASSERT_EQ(a["tensors"].size(), 5u);
  EXPECT_EQ(a["tensors"], b["tensors"]);
  ASSERT_EQ(convert({path("views.pt"), path("views.safetensors")}).code, 0);
  json c = json::parse(inspect({"--json", path("views.safetensors")}).out);
  std::map<std::string, std::string> crc_a, crc_c;
  for (const auto& t : a["tensors"])
    if (t["name"] != "int8") crc_a[t["name"]] = t["crc32"];
  for (const auto& t : c["tensors"])
    if (t["name"] != "int8") crc_c[t["name"]] = t["crc32"];
  EXPECT_EQ(crc_a, crc_c);
}

// Time linear in the number of non-tensor values (100,000 took 14 s to inspect and 13 s
// to convert; 200,000 would take about a minute, far past the deadline).
TEST_F(ToolsHostile, ManyValuesTakeLinearTime) {
  Value d = Value::dict({{"w", Tensor(ones({3}))}}, true);
  for (int i = 0; i < 200'000; ++i) d.set("v" + std::to_string(i), i);
  torch_io::save(path("values.pt"), d);
  // A legal file: the general bound, 300 MB + 20 times its size (3.4 MB; it takes ~90).
  const double mb = 300;
  ToolRun r = inspect({path("values.pt")});
  expect_bounded(r, "nabla-inspect of 200,000 values", 0, "  v199999 = 199999\n", mb);
  r = inspect({"--json", path("values.pt")});
  expect_bounded(r, "nabla-inspect --json of 200,000 values", 0, "\"v199999\": \"199999\"", mb);
  EXPECT_EQ(json::parse(r.out)["others"].size(), 200'000u);
  r = convert({path("values.pt"), path("values.safetensors")});
  expect_bounded(r, "nabla-convert of 200,000 values to safetensors", 0, "1 tensor", mb);
  safetensors::Metadata md;
  safetensors::read_header(path("values.safetensors"), &md);
  EXPECT_EQ(md.size(), 200'001u);  // and "format"
  EXPECT_EQ(md["v123456"], "123456");
  r = convert({path("values.pt"), path("values2.pt")});
  expect_bounded(r, "nabla-convert of 200,000 values to .pt", 0, "1 tensor", mb);
}

// Names and values from a file are escaped before they reach a terminal; JSON output
// replaces what is not UTF-8 and says so; safetensors refuses it by name.
TEST_F(ToolsHostile, NamesCannotDriveTheTerminal) {
  Value d = Value::dict({{"\x1b[31mred", Tensor(ones({1}))},
                         {"bidi\xe2\x80\xae"
                          "cba",
                          Tensor(ones({2}))},
                         {"bad\xff\xfe", Tensor(ones({3}))},
                         {"back\\slash", Tensor(ones({4}))},
                         {"title", "\x1b]0;pwned\x07"},
                         {"latin1", "caf\xe9"},
                         {"c1",
                          "\xc2\x9b"
                          "31m"}},
                        true);
  torch_io::save(path("names.pt"), d);
  ToolRun r = inspect({path("names.pt")});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* raw : {"\x1b", "\xff", "\xe2\x80\xae", "\x07", "\xc2\x9b", "\xe9"})
    EXPECT_EQ(r.out.find(raw), std::string::npos) << "raw bytes reach the terminal:\n" << r.out;
  for (const char* shown : {"\\x1b[31mred ", "bidi\\u202ecba ", "bad\\xff\\xfe ", "back\\\\slash ",
                            "title = '\\x1b]0;pwned\\x07'", "latin1 = 'caf\\xe9'", "c1 = '\\u009b31m'"})
    EXPECT_NE(r.out.find(shown), std::string::npos) << "no " << shown << " in\n" << r.out;
  r = inspect({"--json", path("names.pt")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("not valid UTF-8; the JSON shows their invalid bytes as U+FFFD"), std::string::npos) << r.err;
  json j = json::parse(r.out);  // valid JSON (it was "[json.exception.type_error.316]")
  EXPECT_EQ(j["tensors"][0]["name"], "\x1b[31mred");
  EXPECT_EQ(j["tensors"][2]["name"], "bad\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(j["others"]["latin1"], "'caf\xef\xbf\xbd'");
  EXPECT_EQ(r.out.find("\x1b"), std::string::npos) << "JSON escapes control characters too";
  r = convert({path("names.pt"), path("names.safetensors")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("the tensor name 'bad\\xff\\xfe' is not valid UTF-8"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(path("names.safetensors")));
  // A .pt keeps every name as it was.
  ASSERT_EQ(convert({path("names.pt"), path("back.pt")}).code, 0);
  EXPECT_EQ(torch_io::load(path("back.pt")).repr(), torch_io::load(path("names.pt")).repr());
}
