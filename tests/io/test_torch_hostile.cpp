// Hostile PyTorch files at the size they were reported (fuzz/torch_hostile.h makes
// them here, into a temporary folder; the small and the deflated ones are also committed in
// tests/hostile/torch/): each is loaded and flattened (as load_torch_weights names its tensors) in
// a fresh process of this program, which reports its time and its peak memory. The bound for each:
// a clear error, or a correct load, within 100 MB; the deadline that kills a child (20 s)
// is a hang guard far above the tenths of seconds they take, not a speed test. Also: what the
// fixes changed, checked by value: names of shared subtrees, Python's dict keys, memo indices,
// the memory limit as an option, expanded views.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "fuzz/torch_hostile.h"
#include "io/torch_file.h"
#include "io/zip.h"
#include "nabla.h"
#include "nn/serialize.h"
#include "tests/common/sanitizers.h"
#include "tests/data/data_util.h"

using namespace nabla;
namespace fs = std::filesystem;
namespace th = nabla_fuzz::torch_hostile;
using nabla_test::TempDir;
using torch_io::Value;

namespace {

void write(const std::string& path, const th::Bytes& b) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

Value load(const th::Bytes& b, const torch_io::LoadOptions& o = {}) {
  return torch_io::load_bytes(reinterpret_cast<const char*>(b.data()), b.size(), "'mem'", o);
}

// What the child of in_child() saw.
struct Outcome {
  bool finished = false;
  std::string type;  // "none" (it loaded and flattened), "IOError", "ValueError", "other"
  std::string message;
  double ms = 0, growth_mb = 0;
  std::string output;  // everything it printed
};

// Loads `file` and flattens it in a fresh process (TorchHostile.DISABLED_Child), killed after
// `deadline_s`.
Outcome in_child(const std::string& file, int deadline_s = 20) {
  if (nabla::testing::kAddressSanitizer) deadline_s *= 6;
  const std::string exe = fs::read_symlink("/proc/self/exe").string();
  const std::string cmd = "env -u GTEST_TOTAL_SHARDS -u GTEST_SHARD_INDEX NABLA_HOSTILE_FILE='" + file +
                          "' timeout -s KILL " + std::to_string(deadline_s) + " " + exe +
                          " --gtest_also_run_disabled_tests --gtest_filter=TorchHostile.DISABLED_Child 2>&1";
  Outcome o;
  FILE* p = ::popen(cmd.c_str(), "r");
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) o.output.append(buf, n);
  ::pclose(p);
  const size_t r = o.output.find("HOSTILE_RESULT "), m = o.output.find("HOSTILE_MESSAGE ");
  if (r == std::string::npos || m == std::string::npos) return o;
  char type[32] = {};
  long growth_kb = 0;
  if (std::sscanf(o.output.c_str() + r, "HOSTILE_RESULT %31s %lf %ld", type, &o.ms, &growth_kb) != 3) return o;
  o.finished = true;
  o.type = type;
  o.growth_mb = static_cast<double>(growth_kb) / 1024.0;
  const size_t end = o.output.find('\n', m);
  o.message = o.output.substr(m + 16, end == std::string::npos ? std::string::npos : end - m - 16);
  return o;
}

// The bound for each of these files: a clear error (or a load) within 100 MB.
void expect_bounded(const Outcome& o, const std::string& what) {
  ASSERT_TRUE(o.finished) << what << ": the child did not finish (killed at its deadline, or crashed):\n" << o.output;
  std::printf("%s: %s in %.0f ms, peak memory +%.1f MB: %.160s\n", what.c_str(), o.type.c_str(), o.ms, o.growth_mb,
              o.message.c_str());
  if (!nabla::testing::kAddressSanitizer) EXPECT_LT(o.growth_mb, 100.0) << what << ": " << o.message;
}

}  // namespace

// Run by in_child(): loads NABLA_HOSTILE_FILE, flattens it, prints what happened, its time and how
// much its peak resident memory grew.
TEST(TorchHostile, DISABLED_Child) {
  const char* file = std::getenv("NABLA_HOSTILE_FILE");
  ASSERT_NE(file, nullptr);
  std::ifstream statm("/proc/self/statm");
  long size = 0, resident = 0;
  statm >> size >> resident;
  const long before_kb = resident * ::sysconf(_SC_PAGESIZE) / 1024;
  const auto t0 = std::chrono::steady_clock::now();
  std::string type = "none", msg;
  try {
    Value v = torch_io::load(file);
    auto flat = v.flatten();
    size_t tensors = 0;
    for (const auto& [name, x] : flat) tensors += x.is_tensor();
    msg = std::to_string(flat.size()) + " leaves, " + std::to_string(tensors) + " tensors";
  } catch (const IOError& e) { type = "IOError", msg = e.what(); } catch (const ValueError& e) {
    type = "ValueError", msg = e.what();
  } catch (const std::exception& e) { type = "other", msg = e.what(); }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  std::printf("HOSTILE_RESULT %s %.1f %ld\nHOSTILE_MESSAGE %s\n", type.c_str(), ms, ru.ru_maxrss - before_kb,
              msg.c_str());
}

// Shared subtrees: 20 levels of {A: d, B: d} with 4 KB keys: 9 KB, 2^20 leaves of 80 KB names.
TEST(TorchHostile, SharedSubtreesAreRefusedBeforeAnyNameIsBuilt) {
  TempDir dir;
  const std::string f = dir / "billion_laughs.pt";
  write(f, th::billion_laughs());
  Outcome o = in_child(f);
  expect_bounded(o, "billion laughs (9 KB)");
  EXPECT_EQ(o.type, "ValueError");
  EXPECT_NE(o.message.find("the value has 1048576 leaves (counting shared subtrees once per path)"), std::string::npos)
      << o.message;
  EXPECT_NE(o.message.find("more than the limit of 268435456 (Value::flatten's max_bytes)"), std::string::npos)
      << o.message;
  // What it names when small enough: every path, in order, as Python would walk it.
  Value small = load(th::billion_laughs(3, 2));
  std::vector<std::string> names;
  for (const auto& [name, v] : small.flatten()) {
    names.push_back(name);
    EXPECT_TRUE(v.is_none()) << name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"AA.AA.AA", "AA.AA.BB", "AA.BB.AA", "AA.BB.BB", "BB.AA.AA", "BB.AA.BB",
                                             "BB.BB.AA", "BB.BB.BB"}));
  EXPECT_EQ(small.flatten("m").front().first, "m.AA.AA.AA");
  // The limit counts names (8 x 8 bytes and their dots), strings and 64 bytes a leaf: just enough
  // passes, one byte less is refused.
  const uint64_t need = 8 * (9 + 64 + 1);
  EXPECT_EQ(small.flatten("", need).size(), 8u);
  EXPECT_THROW(small.flatten("", need - 1), ValueError);
}

// A deep shared key: dicts nested 990 deep, each {K: the next}, K one memoized 1 MB string (1 MB, stored).
TEST(TorchHostile, ADeepSharedKeyCostsItsBytesOnce) {
  TempDir dir;
  const std::string f = dir / "deep_shared_key.pt";
  write(f, th::deep_shared_key());
  Outcome o = in_child(f);
  expect_bounded(o, "990 dicts sharing a 1 MB key (1 MB)");
  EXPECT_EQ(o.type, "ValueError");
  EXPECT_NE(
      o.message.find("the value has 1 leaf (counting shared subtrees once per path) whose dotted names and strings "
                     "would take 1038091295 bytes"),
      std::string::npos)
      << o.message;
  // It loads (the key is not copied into each dict's index), and the small one names its leaf.
  Value v = load(th::deep_shared_key(5, 3));
  auto flat = v.flatten();
  ASSERT_EQ(flat.size(), 1u);
  EXPECT_EQ(flat[0].first, "KKK.KKK.KKK.KKK.KKK");
  EXPECT_TRUE(flat[0].second.is_none());
  const Value* inner = v.find("KKK");
  ASSERT_NE(inner, nullptr);
  EXPECT_EQ(inner->entries()[0].first.node(), v.entries()[0].first.node()) << "one string, shared";
}

// Empty dicts: 9.9 M, one pickle byte each: stored (9.9 MB) and deflated (10 KB).
TEST(TorchHostile, MillionsOfEmptyDictsStopAtTheMemoryLimit) {
  TempDir dir;
  for (bool deflate : {false, true}) {
    const std::string f = dir / (deflate ? "empty_dicts_deflated.pt" : "empty_dicts.pt");
    write(f, th::empty_dicts(9'900'000, deflate));
    Outcome o = in_child(f);
    expect_bounded(o, deflate ? "9.9 M empty dicts (deflated, 10 KB)" : "9.9 M empty dicts (stored, 9.9 MB)");
    EXPECT_EQ(o.type, "IOError");
    const uint64_t limit = (uint64_t(64) << 20) + 2 * fs::file_size(f);
    EXPECT_NE(o.message.find("the pickle's values take more than " + std::to_string(limit) +
                             " bytes of memory (LoadOptions::max_value_bytes"),
              std::string::npos)
        << o.message;
  }
  // 100,000 of them are a legal file: they load, and are 100,000 leaves.
  Value v = load(th::empty_dicts(100'000));
  ASSERT_EQ(v.size(), 100'000u);
  EXPECT_TRUE(v[99'999].is_dict());
  EXPECT_EQ(v.flatten().back().first, "99999");
  // The limit is an option, both ways.
  EXPECT_THROW(load(th::empty_dicts(100'000), {.max_value_bytes = 1 << 20}), IOError);
  EXPECT_EQ(load(th::empty_dicts(400'000, true), {.max_value_bytes = uint64_t(256) << 20}).size(), 400'000u);
}

// Nested records: 400 stored records, each one's data holding the next record (4.3 MB, valid CRCs).
TEST(TorchHostile, NestedZipRecordsAreRefusedAsOverlapping) {
  TempDir dir;
  const std::string f = dir / "nested_records.pt";
  write(f, th::nested_records());
  Outcome o = in_child(f);
  expect_bounded(o, "400 nested zip records (4.3 MB)");
  EXPECT_EQ(o.type, "IOError");
  EXPECT_NE(o.message.find("entries 'archive/data/000' and 'archive/data/001' overlap"), std::string::npos)
      << o.message;
  // The reader alone refuses it, before any entry is read.
  zip::Source src(f);
  try {
    zip::Reader z(src);
    ADD_FAILURE() << "read";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("entries nested in each other"), std::string::npos) << e.what();
  }
}

// An expanded view: a tensor of 5e8 elements with stride 0 over one stored float (1 KB): legal, and loaded
// as PyTorch loads it, a view of its one value.
TEST(TorchHostile, AnExpandedViewLoadsAsAView) {
  TempDir dir;
  const std::string f = dir / "zero_stride_view.pt";
  write(f, th::zero_stride_view());
  Outcome o = in_child(f);
  expect_bounded(o, "a zero-stride view of 5e8 elements (528 bytes)");
  EXPECT_EQ(o.type, "none") << o.message;
  EXPECT_EQ(o.message, "1 leaves, 1 tensors");
  Value v = torch_io::load(f);
  const Tensor& t = v["expanded"].to_tensor();
  EXPECT_EQ(t.sizes(), Shape({500'000'000}));
  EXPECT_EQ(t.strides(), Shape({0}));
  EXPECT_EQ(t.impl()->storage->nbytes, 4u);
  EXPECT_EQ(t[123'456'789].item<float>(), 2.5f);
  // Saved again, it stays a view of one value.
  std::vector<char> saved = torch_io::serialize(v);
  EXPECT_LT(saved.size(), 2048u);
  Value back = torch_io::load_bytes(saved.data(), saved.size());
  EXPECT_EQ(back["expanded"].to_tensor().strides(), Shape({0}));
  EXPECT_EQ(back["expanded"].to_tensor().impl()->storage->nbytes, 4u);
}

// The dict keys found through a hash table now (no copies of the keys): Python's equality.
TEST(TorchHostile, DictKeysFollowPythonsEquality) {
  Value d = Value::dict();
  d.set(1, "int");
  d.set(1.0, "float");  // 1 == 1.0 == True: one key, the first one kept, the value replaced
  d.set(true, "bool");
  d.set("1", "str");
  d.set(Value::bytes("1"), "bytes");
  d.set(Value::tuple({1, "a"}), "tuple");
  d.set(Value::tuple({1.0, "a"}), "tuple again");
  d.set(2.5, "half");
  ASSERT_EQ(d.size(), 5u);
  EXPECT_EQ(d.repr(), "{1: 'bool', '1': 'str', b'1': 'bytes', (1, 'a'): 'tuple again', 2.5: 'half'}");
  EXPECT_EQ(d.find(int64_t(1))->to_string(), "bool");
  EXPECT_EQ(d.find("1")->to_string(), "str");
  EXPECT_EQ(d.find(int64_t(2)), nullptr);
  // Past kLinearKeys entries the table takes over: every key found, replacements in place.
  Value big = Value::dict();
  for (int i = 0; i < 5000; ++i) big.set("k" + std::to_string(i), i);
  for (int i = 0; i < 5000; i += 7) big.set(i, -i);
  big.set("k17", 1700);
  EXPECT_EQ(big.size(), 5000u + 715u);
  EXPECT_EQ(big["k17"].to_int(), 1700);
  EXPECT_EQ(big.entries()[17].first.to_string(), "k17");
  EXPECT_EQ(big.find(int64_t(4998))->to_int(), -4998);
  EXPECT_EQ(big.find(int64_t(4999)), nullptr);
  for (int i = 0; i < 5000; i += 97) EXPECT_EQ(big["k" + std::to_string(i)].to_int(), i == 17 ? 1700 : i);
  // A tuple key that expands past kMaxKeyValues (shared, so small) is refused, clearly.
  Value t = Value::tuple({1, 2});
  for (int i = 0; i < 12; ++i) t = Value::tuple({t, t});
  try {
    big.set(t, 0);
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("a tuple of more than 4096 values"), std::string::npos) << e.what();
  }
  EXPECT_THROW(big.set(Value::list(), 0), ValueError);
}

TEST(TorchHostile, MemoIndicesInAnyOrder) {
  // Python writes them in order (a vector); others may not (a map): both read back.
  th::Pickle p;
  p.op(']'), p.put(0), p.op('0');
  p.str("x"), p.put(1000000), p.op('0');
  p.op('('), p.get(1000000), p.get(0), p.get(1000000), p.op('t'), p.stop();
  EXPECT_EQ(load(th::archive(p.s, {})).repr(), "('x', [], 'x')");
}

TEST(TorchHostile, ReprStopsAtItsLimit) {
  Value v = Value::list({Value(std::string(1000, 'a')), 2, 3});
  EXPECT_EQ(v.repr().size(), 1000u + 2 + 8);
  EXPECT_EQ(v.repr(10), "['aaaaaaaa...");
  // A shared structure of 2^20 leaves is cut as it is written, not after.
  Value s = load(th::billion_laughs(20, 64));
  EXPECT_EQ(s.repr(200).size(), 203u);
}
