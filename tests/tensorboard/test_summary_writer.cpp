// TensorBoard event files (tensorboard/): CRC-32C, the protobuf encoding, TFRecord framing, and every
// SummaryWriter call read back with an independent reader (tests/tensorboard/event_reader.h) and,
// when /usr/bin/python3 has google.protobuf and protoc is installed, with the official protobuf
// runtime and .proto definitions written for the tests (tests/tensorboard/*.proto).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <random>
#include <regex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "nabla.h"
#include "tensorboard/crc32c.h"
#include "tensorboard/event_file.h"
#include "tensorboard/events.h"
#include "tensorboard/proto.h"
#include "tests/common/python_torch.h"
#include "tests/common/sanitizers.h"
#include "tests/tensorboard/event_reader.h"

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wunused-but-set-variable"
#endif
#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#define STBI_ONLY_PNG
#include <stb_image.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

using namespace nabla;
namespace tb = nabla::tensorboard;
namespace fs = std::filesystem;
using tb_test::Event;
using tb_test::Msg;

namespace {

class Tensorboard : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("nabla_tb_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& sub = "") const { return sub.empty() ? dir_.string() : (dir_ / sub).string(); }
  fs::path dir_;
};

// The event files in a folder (not below it), sorted by name.
std::vector<std::string> event_files(const fs::path& dir) {
  std::vector<std::string> v;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename().string().rfind("events.out.tfevents.", 0) == 0)
      v.push_back(e.path().string());
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<Event> only_file_events(const fs::path& dir) {
  auto files = event_files(dir);
  EXPECT_EQ(files.size(), 1u) << dir;
  return files.empty() ? std::vector<Event>{} : tb_test::read_events(files[0]);
}

// The summary values of the events, in order, with their events' steps.
struct Value {
  int64_t step;
  Msg v;
};
std::vector<Value> summary_values(const std::vector<Event>& events) {
  std::vector<Value> out;
  for (const auto& e : events)
    for (const auto& v : e.values) out.push_back({e.step, v});
  return out;
}

// The plugin name and content of a Summary.Value's metadata (field 9: { plugin_data = 1 { name = 1; content = 2 } }).
std::pair<std::string, std::string> plugin(const Msg& value) {
  Msg pd = value.msg(9).msg(1);
  return {pd.str(1), pd.str(2)};
}

// A PNG decoded by stb_image as (H, W, C) bytes.
struct Png {
  int w = 0, h = 0, c = 0;
  std::vector<uint8_t> px;
};
Png decode_png(const std::string& bytes) {
  Png p;
  unsigned char* d = stbi_load_from_memory(reinterpret_cast<const unsigned char*>(bytes.data()),
                                           static_cast<int>(bytes.size()), &p.w, &p.h, &p.c, 0);
  if (!d) return p;
  p.px.assign(d, d + size_t(p.w) * p.h * p.c);
  stbi_image_free(d);
  return p;
}

}  // namespace

// ---- CRC-32C, protobuf, framing -----------------------------------------------------------------

TEST(TensorboardCrc, KnownValues) {
  // RFC 3720 (iSCSI) B.4 test vectors and the usual check value.
  EXPECT_EQ(tb::crc32c("123456789", 9), 0xE3069283u);
  std::string zeros(32, '\0'), ones(32, '\xFF'), inc(32, '\0');
  for (int i = 0; i < 32; ++i) inc[i] = static_cast<char>(i);
  EXPECT_EQ(tb::crc32c(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(tb::crc32c(ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(tb::crc32c(inc.data(), 32), 0x46DD794Eu);
  EXPECT_EQ(tb::crc32c_portable(inc.data(), 32), 0x46DD794Eu);
  EXPECT_EQ(tb::crc32c("", 0), 0u);
}

TEST(TensorboardCrc, HardwareMatchesTableAndBitwiseAtEveryLengthAndAlignment) {
  std::mt19937 rng(7);
  std::string buf(300, '\0');
  for (char& c : buf) c = static_cast<char>(rng());
  for (size_t off = 0; off < 9; ++off)
    for (size_t n = 0; n + off <= buf.size(); n += (n < 40 ? 1 : 37)) {
      std::string s = buf.substr(off, n);
      uint32_t want = tb_test::crc32c_bitwise(s);
      ASSERT_EQ(tb::crc32c(buf.data() + off, n), want) << "offset " << off << " length " << n;
      ASSERT_EQ(tb::crc32c_portable(buf.data() + off, n), want) << "offset " << off << " length " << n;
    }
  // Continuing a CRC over a split buffer gives the CRC of the whole.
  uint32_t part = tb::crc32c(buf.data(), 100);
  EXPECT_EQ(tb::crc32c(buf.data() + 100, 200, part), tb::crc32c(buf.data(), 300));
}

TEST(TensorboardCrc, MaskIsTfRecords) {
  // masked = rotr(crc, 15) + 0xa282ead8, modulo 2^32.
  EXPECT_EQ(tb::mask_crc(0), 0xA282EAD8u);
  EXPECT_EQ(tb::mask_crc(0x00008000u), 0xA282EAD9u);
  EXPECT_EQ(tb::mask_crc(0x00000001u), 0xA282EAD8u + 0x00020000u);
  EXPECT_EQ(tb::mask_crc(0xFFFFFFFFu), 0xA282EAD7u);  // 0xFFFFFFFF + 0xA282EAD8 wraps
}

TEST(TensorboardProto, WireFormat) {
  std::string out;
  tb::ProtoWriter w(out);
  w.int64(1, 150);  // the protobuf documentation's example: 08 96 01
  EXPECT_EQ(out, std::string("\x08\x96\x01", 3));
  out.clear();
  w.int64(2, 0);  // a default value is not written
  w.str(3, "");
  w.f64(4, 0.0);
  EXPECT_TRUE(out.empty());
  w.int64(2, -1);  // negative: ten bytes
  EXPECT_EQ(out.size(), 11u);
  out.clear();
  w.f32_always(2, 0.0f);  // a oneof member is written even at 0
  EXPECT_EQ(out, std::string("\x15\0\0\0\0", 5));
  out.clear();
  std::string big(300, 'x');
  w.message(5, [&] { w.str(1, big); });  // nested length 303 needs a two-byte varint
  Msg m = tb_test::parse(out);
  ASSERT_EQ(m.fields.size(), 1u);
  EXPECT_EQ(m.msg(5).str(1), big);
  out.clear();
  std::vector<double> d = {1.5, -2.25};
  w.packed_f64(6, d);
  EXPECT_EQ(tb_test::packed_f64(tb_test::parse(out).str(6)), d);
}

TEST(TensorboardProto, FrameIsTfRecord) {
  std::string out;
  tb::EventFile::frame("hello", out);
  ASSERT_EQ(out.size(), 12u + 5 + 4);
  auto r = tb_test::read_records(out);
  EXPECT_EQ(r.error, "");
  ASSERT_EQ(r.records.size(), 1u);
  EXPECT_EQ(r.records[0], "hello");
  out[14] ^= 1;  // a flipped data bit is caught
  EXPECT_NE(tb_test::read_records(out).error, "");
}

// ---- the writer -----------------------------------------------------------------------------------

TEST_F(Tensorboard, FileNameAndFirstEventAsPyTorch) {
  double before = tb::wall_time();
  {
    tb::SummaryWriter w(path());
    EXPECT_EQ(w.log_dir(), path());
  }
  auto files = event_files(dir_);
  ASSERT_EQ(files.size(), 1u);
  std::string name = fs::path(files[0]).filename().string();
  std::smatch m;
  ASSERT_TRUE(std::regex_match(name, m, std::regex(R"(events\.out\.tfevents\.(\d{10})\.(.+)\.(\d+)\.(\d+))"))) << name;
  EXPECT_NEAR(std::stod(m[1]), before, 5);
  EXPECT_EQ(m[2].str(), tb::hostname());
  EXPECT_EQ(std::stoll(m[3]), ::getpid());
  auto events = tb_test::read_events(files[0]);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].file_version.value_or("none"), "brain.Event:2");
  EXPECT_EQ(events[0].step, 0);
  EXPECT_NEAR(events[0].wall_time, before, 5);
  EXPECT_GE(events[0].wall_time, before - 1e-3);
}

TEST_F(Tensorboard, DefaultLogDirAndFileSuffix) {
  std::string d = tb::default_log_dir("_lr0.1");
  EXPECT_TRUE(std::regex_match(
      d,
      std::regex(R"(runs/(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\d\d_\d\d-\d\d-\d\d_)" +
                 std::regex_replace(tb::hostname(), std::regex(R"([.^$|()\[\]{}*+?\\-])"), R"(\$&)") + R"(_lr0\.1)")))
      << d;
  { tb::SummaryWriter w(path(), {.filename_suffix = ".v2"}); }
  auto files = event_files(dir_);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_TRUE(files[0].ends_with(".v2")) << files[0];
}

TEST_F(Tensorboard, ScalarsWithStepsAndWallTimes) {
  {
    tb::SummaryWriter w(path());
    w.add_scalar("loss/train", 0.5, 1);
    w.add_scalar("loss/train", 0.25, 2, 1234.5);
    w.add_scalar("acc", 0.0, 0);             // zero value and step: still a value
    w.add_scalar("acc", tensor({0.75}), 7);  // a one-element tensor
    w.add_scalar("nostep", -3.0);
    w.add_scalar("big", 1e30, int64_t(1) << 40);
    EXPECT_THROW(w.add_scalar("t", tensor({1.0, 2.0})), ShapeError);
  }
  auto events = only_file_events(dir_);
  ASSERT_EQ(events.size(), 7u);
  struct Want {
    std::string tag;
    float value;
    int64_t step;
  };
  std::vector<Want> want = {{"loss/train", 0.5f, 1}, {"loss/train", 0.25f, 2}, {"acc", 0.0f, 0},
                            {"acc", 0.75f, 7},       {"nostep", -3.0f, 0},     {"big", 1e30f, int64_t(1) << 40}};
  for (size_t i = 0; i < want.size(); ++i) {
    const Event& e = events[i + 1];
    ASSERT_EQ(e.values.size(), 1u);
    EXPECT_EQ(e.values[0].str(1), want[i].tag);
    ASSERT_TRUE(e.values[0].has(2)) << want[i].tag;
    EXPECT_EQ(e.values[0].get(2)->wire, 5u);
    EXPECT_EQ(e.values[0].get(2)->f32(), want[i].value);
    EXPECT_EQ(e.step, want[i].step);
  }
  EXPECT_EQ(events[2].wall_time, 1234.5);
  EXPECT_NEAR(events[1].wall_time, tb::wall_time(), 30);
}

TEST_F(Tensorboard, EventsWaitInMemoryUntilQueueFullTimerFlushOrClose) {
  tb::SummaryWriter w(path(), {.max_queue = 1000, .flush_secs = 1000});
  std::string file = w.event_file_path();
  uintmax_t first = fs::file_size(file);  // the file_version event, written at once
  w.add_scalar("a", 1, 1);
  w.add_scalar("a", 2, 2);
  EXPECT_EQ(fs::file_size(file), first);  // no write per scalar
  w.flush();
  EXPECT_EQ(tb_test::read_events(file).size(), 3u);

  // max_queue events wake the writer thread.
  tb::SummaryWriter q(path("q"), {.max_queue = 3, .flush_secs = 1000});
  std::string qfile = q.event_file_path();
  for (int i = 0; i < 3; ++i) q.add_scalar("b", i, i);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (tb_test::read_events(qfile).size() < 4 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(tb_test::read_events(qfile).size(), 4u);

  // flush_secs bounds how long one event waits.
  tb::SummaryWriter t(path("t"), {.max_queue = 1000, .flush_secs = 0.05});
  std::string tfile = t.event_file_path();
  t.add_scalar("c", 1, 1);
  deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (tb_test::read_events(tfile).size() < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(tb_test::read_events(tfile).size(), 2u);
}

// A few large records (images) fill the byte bound before max_queue records wait: the writer thread
// must be woken to make room, not left asleep until flush_secs while add() waits for space.
TEST_F(Tensorboard, QueuedBytesWakeTheWriterWhenFewLargeRecordsFillTheQueue) {
  tb::EventFile f(path(), {.max_queue = 1000000, .flush_secs = 3600, .max_pending_bytes = 4096});
  const uintmax_t first = fs::file_size(f.path());  // the file_version event, written at once
  const std::string big(1000, 'x');
  auto adds = std::async(std::launch::async, [&] {
    for (int i = 0; i < 12; ++i) f.add(big);  // ~12 KB through a 4 KB queue
  });
  const bool done = adds.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
  EXPECT_TRUE(done) << "add() still waits for space: the writer thread was not woken";
  if (!done) f.close();  // releases the waiting add()
  adds.get();
  // The writer wrote on its own (no flush yet): all but the at most 5 records a full queue holds.
  const uintmax_t written = first + 7 * (big.size() + 16);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (fs::file_size(f.path()) < written && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_GE(fs::file_size(f.path()), written);
  f.close();
  EXPECT_EQ(fs::file_size(f.path()), first + 12 * (big.size() + 16));
}

TEST_F(Tensorboard, CloseWritesEverythingAndLaterCallsOpenANewFile) {
  tb::SummaryWriter w(path(), {.max_queue = 1000, .flush_secs = 1000});
  for (int i = 0; i < 100; ++i) w.add_scalar("x", i, i);
  w.close();
  w.close();  // twice is fine
  auto files = event_files(dir_);
  ASSERT_EQ(files.size(), 1u);
  auto events = tb_test::read_events(files[0]);
  ASSERT_EQ(events.size(), 101u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(events[i + 1].values[0].get(2)->f32(), i);
  w.add_scalar("x", 100, 100);  // as PyTorch: a new event file
  w.close();
  EXPECT_EQ(event_files(dir_).size(), 2u);
}

TEST_F(Tensorboard, PurgeStepEventsAsPyTorch) {
  { tb::SummaryWriter w(path(), {.purge_step = 42}); }
  auto events = only_file_events(dir_);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].step, 0);
  EXPECT_EQ(events[1].file_version.value_or(""), "brain.Event:2");
  EXPECT_EQ(events[1].step, 42);
  ASSERT_TRUE(events[2].session_log.has_value());
  EXPECT_EQ(events[2].session_log->i64(1), 1);  // SessionLog.START
  EXPECT_EQ(events[2].step, 42);
}

TEST_F(Tensorboard, AddScalarsWritesOneRunPerKey) {
  {
    tb::SummaryWriter w(path());
    w.add_scalars("run/loss", {{"train", 0.5}, {"test", 0.75}}, 3);
    w.add_scalars("run/loss", {{"train", 0.25}, {"test", 0.5}}, 4);
  }
  EXPECT_EQ(only_file_events(dir_).size(), 1u);  // nothing in the main run
  for (auto [key, a, b] : {std::tuple{"train", 0.5f, 0.25f}, std::tuple{"test", 0.75f, 0.5f}}) {
    auto events = only_file_events(dir_ / (std::string("run_loss_") + key));
    ASSERT_EQ(events.size(), 3u) << key;
    EXPECT_EQ(events[0].file_version.value_or(""), "brain.Event:2");
    EXPECT_EQ(events[1].values[0].str(1), "run/loss");
    EXPECT_EQ(events[1].values[0].get(2)->f32(), a);
    EXPECT_EQ(events[1].step, 3);
    EXPECT_EQ(events[2].values[0].get(2)->f32(), b);
    EXPECT_EQ(events[2].step, 4);
  }
}

// ---- histograms ---------------------------------------------------------------------------------

TEST(TensorboardHistogram, DefaultBinsArePyTorchs) {
  const auto& b = tb::tensorflow_bins();
  // 1e-12 * 1.1^k < 1e20 for k = 0 .. 773: 774 positive edges, their negatives and 0.
  ASSERT_EQ(b.size(), 2u * 774 + 1);
  EXPECT_EQ(b[774], 0.0);
  EXPECT_EQ(b[775], 1e-12);
  EXPECT_EQ(b[776], 1e-12 * 1.1);
  EXPECT_EQ(b[773], -1e-12);
  EXPECT_LT(b.back(), 1e20);
  EXPECT_GT(b.back() * 1.1, 1e20);
  EXPECT_EQ(b.front(), -b.back());
}

TEST_F(Tensorboard, HistogramBucketsByHand) {
  // bins [0,1) [1,2) [2,3) [3,4]: 0.5 -> 0; 1.5, 1.5 -> 1; 3, 4 -> 3; -1 and 10 are outside.
  std::vector<double> bins = {0, 1, 2, 3, 4};
  tb::Histogram h = tb::make_histogram(tensor({0.5, 1.5, 1.5, 3.0, 4.0, -1.0, 10.0}), bins);
  EXPECT_EQ(h.min, -1);
  EXPECT_EQ(h.max, 10);
  EXPECT_EQ(h.num, 7);
  EXPECT_EQ(h.sum, 19.5);
  EXPECT_EQ(h.sum_squares, 0.25 + 2.25 * 2 + 9 + 16 + 1 + 100);
  // The first bin is non-empty: an empty bin goes in front; limits are right edges.
  EXPECT_EQ(h.bucket, (std::vector<double>{0, 1, 2, 0, 2}));
  EXPECT_EQ(h.bucket_limit, (std::vector<double>{0, 1, 2, 3, 4}));

  // Only bin 2 is used: it and the bin before it remain.
  h = tb::make_histogram(tensor({2.5f, 2.7f}), bins);
  EXPECT_EQ(h.bucket, (std::vector<double>{0, 2}));
  EXPECT_EQ(h.bucket_limit, (std::vector<double>{2, 3}));

  // max_bins 3 of 7 bins: groups of 7 // 3 = 2 (the last one padded), limits every second edge and the last.
  std::vector<double> bins8 = {0, 1, 2, 3, 4, 5, 6, 7};
  h = tb::make_histogram(tensor({0.5, 6.5, 6.9}), bins8, 3);
  EXPECT_EQ(h.bucket, (std::vector<double>{0, 1, 0, 0, 2}));
  EXPECT_EQ(h.bucket_limit, (std::vector<double>{0, 2, 4, 6, 7}));

  // The default bins: 1.0 lies in [1e-12 * 1.1^k, 1e-12 * 1.1^(k+1)) for the k a linear search finds.
  const auto& tf = tb::tensorflow_bins();
  size_t k = 0;
  while (!(tf[k] <= 1.0 && 1.0 < tf[k + 1])) ++k;
  h = tb::make_histogram(tensor({1.0, 1.0, 1.0}), tf);
  EXPECT_EQ(h.bucket, (std::vector<double>{0, 3}));
  EXPECT_EQ(h.bucket_limit, (std::vector<double>{tf[k], tf[k + 1]}));
  EXPECT_EQ(h.sum_squares, 3);

  EXPECT_THROW(tb::make_histogram(zeros({0}), bins), ValueError);
  try {
    tb::make_histogram(tensor({-5.0}), bins);
    FAIL() << "no value inside the bins must raise";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("add_histogram: no value lies within the bins [0, 4]"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(tb::make_histogram(tensor({1.0}), std::vector<double>{0, 2, 1}), ValueError);
}

TEST(TensorboardHistogram, DefaultBinsFastPathEqualsBinarySearch) {
  // make_histogram finds a value's default bin from a logarithm; a copy of the bins (another
  // address) takes the plain binary search. Every edge, its neighbours, and random magnitudes.
  const auto& tf = tb::tensorflow_bins();
  std::vector<double> copy(tf.begin(), tf.end());
  std::vector<double> v;
  for (double e : tf) {
    v.push_back(e);
    v.push_back(std::nextafter(e, -INFINITY));
    v.push_back(std::nextafter(e, INFINITY));
  }
  std::mt19937_64 rng(5);
  std::normal_distribution<double> g(0, 1);
  for (int i = 0; i < 20000; ++i) v.push_back(g(rng) * std::exp(g(rng) * 20));
  Tensor t = tensor(v);
  tb::Histogram fast = tb::make_histogram(t, tf), slow = tb::make_histogram(t, copy);
  EXPECT_EQ(fast.bucket, slow.bucket);
  EXPECT_EQ(fast.bucket_limit, slow.bucket_limit);
  double counted = 0;
  for (double c : fast.bucket) counted += c;
  EXPECT_GT(counted, 0.9 * static_cast<double>(v.size()));
}

TEST_F(Tensorboard, HistogramEventHoldsTheProto) {
  {
    tb::SummaryWriter w(path());
    w.add_histogram("w", tensor({{0.5f, 1.5f}, {1.5f, 3.0f}}), 5, {.bins = {0, 1, 2, 3, 4}});
    w.add_histogram("default", tensor({-2.0, 0.0, 3.0}), 6);
  }
  auto values = summary_values(only_file_events(dir_));
  ASSERT_EQ(values.size(), 2u);
  EXPECT_EQ(values[0].step, 5);
  EXPECT_EQ(values[0].v.str(1), "w");
  Msg h = values[0].v.msg(5);
  EXPECT_EQ(h.f64(1), 0.5);
  EXPECT_EQ(h.f64(2), 3.0);
  EXPECT_EQ(h.f64(3), 4.0);
  EXPECT_EQ(h.f64(4), 6.5);
  EXPECT_EQ(h.f64(5), 0.25 + 2.25 + 2.25 + 9);
  EXPECT_EQ(tb_test::packed_f64(h.str(6)), (std::vector<double>{0, 1, 2, 3, 4}));  // 0.5 in the first bin: an
  EXPECT_EQ(tb_test::packed_f64(h.str(7)), (std::vector<double>{0, 1, 2, 0, 1}));  // empty one in front
  // Default bins: -2 and 3 in their bins, 0 in [0, 1e-12); everything between stays as empty buckets.
  Msg d = values[1].v.msg(5);
  auto limits = tb_test::packed_f64(d.str(6)), counts = tb_test::packed_f64(d.str(7));
  ASSERT_EQ(limits.size(), counts.size());
  double total = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    total += counts[i];
    if (counts[i] > 0) {  // each counted value lies in (limits[i-1], limits[i]]... as numpy: [left, right)
      ASSERT_GT(i, 0u);
      double v = limits[i] <= -1 ? -2.0 : limits[i] > 1 ? 3.0 : 0.0;
      EXPECT_LE(limits[i - 1], v);
      EXPECT_LT(v, limits[i]);
    }
  }
  EXPECT_EQ(total, 3);
  EXPECT_EQ(counts.front(), 0);
  EXPECT_GT(counts.back(), 0);
}

// ---- images -------------------------------------------------------------------------------------

TEST_F(Tensorboard, ImagesDecodeToWhatWasLogged) {
  manual_seed(3);
  Tensor chw = rand({3, 4, 5});                      // float in [0, 1]
  Tensor hw = (rand({6, 7}) * 255).to(kUInt8);       // u8 gray
  Tensor hwc4 = (rand({2, 3, 4}) * 255).to(kUInt8);  // RGBA
  Tensor batch = rand({10, 1, 2, 3});                // 10 gray images: a grid of 8 columns, 2 rows
  {
    tb::SummaryWriter w(path());
    w.add_image("chw", chw, 1);
    w.add_image("hw", hw, 2, std::nullopt, "HW");
    w.add_image("hwc", hwc4, 3, std::nullopt, "HWC");
    w.add_images("batch", batch, 4);
  }
  auto values = summary_values(only_file_events(dir_));
  ASSERT_EQ(values.size(), 4u);
  auto check_image = [&](const Msg& v, const std::string& tag, int h, int w, int c) {
    EXPECT_EQ(v.str(1), tag);
    Msg img = v.msg(4);
    EXPECT_EQ(img.i64(1), h) << tag;
    EXPECT_EQ(img.i64(2), w) << tag;
    EXPECT_EQ(img.i64(3), c) << tag;
    Png p = decode_png(img.str(4));
    EXPECT_EQ(p.h, h) << tag;
    EXPECT_EQ(p.w, w) << tag;
    EXPECT_EQ(p.c, c) << tag;
    return p;
  };
  Png p = check_image(values[0].v, "chw", 4, 5, 3);
  const float* x = chw.data_ptr<float>();
  for (int y = 0; y < 4; ++y)
    for (int xx = 0; xx < 5; ++xx)
      for (int c = 0; c < 3; ++c)  // (x * 255) truncated, as PyTorch's astype(uint8)
        ASSERT_EQ(p.px[(y * 5 + xx) * 3 + c], static_cast<uint8_t>(x[(c * 4 + y) * 5 + xx] * 255.0f));
  p = check_image(values[1].v, "hw", 6, 7, 3);
  for (int i = 0; i < 42; ++i)
    for (int c = 0; c < 3; ++c) ASSERT_EQ(p.px[i * 3 + c], hw.data_ptr<uint8_t>()[i]);
  p = check_image(values[2].v, "hwc", 2, 3, 4);
  EXPECT_EQ(std::memcmp(p.px.data(), hwc4.data_ptr<uint8_t>(), 24), 0);
  p = check_image(values[3].v, "batch", 4, 24, 3);
  const float* b = batch.data_ptr<float>();
  for (int n = 0; n < 16; ++n)
    for (int y = 0; y < 2; ++y)
      for (int xx = 0; xx < 3; ++xx) {
        int gy = (n / 8) * 2 + y, gx = (n % 8) * 3 + xx;
        uint8_t want = n < 10 ? static_cast<uint8_t>(b[(n * 2 + y) * 3 + xx] * 255.0f) : 0;
        for (int c = 0; c < 3; ++c) ASSERT_EQ(p.px[(gy * 24 + gx) * 3 + c], want) << n << " " << y << " " << xx;
      }
}

TEST_F(Tensorboard, ImageMistakesNameTheCallAndTheShape) {
  tb::SummaryWriter w(path());
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) { return std::string(e.what()); }
    return std::string("no error");
  };
  EXPECT_EQ(
      message([&] {
        w.add_image("x", rand({3, 4, 5}), 0, std::nullopt, "CHX");
      }),
      "add_image: dataformats must name H, W and optionally C and N once each (e.g. CHW, HWC, HW, NCHW), got 'CHX'");
  EXPECT_EQ(message([&] {
              w.add_image("x", rand({2, 4, 5}));
            }),
            "add_image: an image has 1, 3 or 4 channels (C), got 2 in shape [2, 4, 5] (CHW)");
  EXPECT_EQ(message([&] {
              w.add_image("x", rand({4, 5}));
            }),
            "add_image: dataformats 'CHW' has 3 dimensions but the image has shape [4, 5]");
  EXPECT_EQ(message([&] {
              w.add_images("x", rand({3, 4, 5}));
            }),
            "add_images: 'x': dataformats 'NCHW' does not fit the shape [3, 4, 5]");
  EXPECT_THROW(w.add_image("x", zeros({3, 0, 5})), ValueError);
}

// ---- text, pr curves, hparams ---------------------------------------------------------------------

TEST_F(Tensorboard, TextAsTheTextPlugin) {
  std::string text = "**bold** and `code`\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\xC3\xA9";
  {
    tb::SummaryWriter w(path());
    w.add_text("notes", text, 9);
  }
  auto values = summary_values(only_file_events(dir_));
  ASSERT_EQ(values.size(), 1u);
  EXPECT_EQ(values[0].step, 9);
  EXPECT_EQ(values[0].v.str(1), "notes/text_summary");
  Msg t = values[0].v.msg(8);
  EXPECT_EQ(t.i64(1), 7);  // DT_STRING
  auto dims = t.msg(2).all(2);
  ASSERT_EQ(dims.size(), 1u);
  EXPECT_EQ(tb_test::parse(dims[0].bytes).i64(1), 1);
  EXPECT_EQ(t.str(8), text);
  EXPECT_EQ(plugin(values[0].v), (std::pair<std::string, std::string>{"text", ""}));
}

TEST_F(Tensorboard, PrCurveByHand) {
  // thresholds 0, 0.5, 1 (num_thresholds 3): bucket = floor(p * 2): 0.9, 0.8 -> 1; 0.3, 0.1 -> 0.
  // tp per bucket [1, 1, 0], fp [1, 1, 0]; at or above each threshold: tp [2, 1, 0], fp [2, 1, 0].
  std::vector<double> want = {2, 1, 0, 2, 1, 0, 0, 1, 2, 0, 1, 2, 0.5, 0.5, 0, 1, 0.5, 0};
  EXPECT_EQ(tb::pr_curve_data(tensor({1, 0, 1, 0}), tensor({0.9f, 0.8f, 0.3f, 0.1f}), 3), want);
  // Weights multiply each example; 2.5 (bucket floor(2.5 * 1) = 2 of 0..1) falls in no bucket.
  std::vector<double> weighted =
      tb::pr_curve_data(tensor({1.0, 0.0, 1.0}), tensor({0.9, 0.2, 2.5}), 2, tensor({2.0, 3.0, 100.0}));
  EXPECT_EQ(weighted, (std::vector<double>{2, 0, 3, 0, 0, 3, 0, 2, 0.4, 0, 1, 0}));
  {
    tb::SummaryWriter w(path());
    w.add_pr_curve("pr", tensor({1, 0, 1, 0}), tensor({0.9f, 0.8f, 0.3f, 0.1f}), 2, 3);
    EXPECT_THROW(w.add_pr_curve("pr", tensor({1, 0}), tensor({0.5f})), ShapeError);
  }
  auto values = summary_values(only_file_events(dir_));
  ASSERT_EQ(values.size(), 1u);
  EXPECT_EQ(values[0].v.str(1), "pr");
  Msg t = values[0].v.msg(8);
  EXPECT_EQ(t.i64(1), 1);  // DT_FLOAT
  auto dims = t.msg(2).all(2);
  ASSERT_EQ(dims.size(), 2u);
  EXPECT_EQ(tb_test::parse(dims[0].bytes).i64(1), 6);
  EXPECT_EQ(tb_test::parse(dims[1].bytes).i64(1), 3);
  auto f = tb_test::packed_f32(t.str(5));
  ASSERT_EQ(f.size(), 18u);
  for (size_t i = 0; i < 18; ++i) EXPECT_EQ(f[i], static_cast<float>(want[i])) << i;
  auto [name, content] = plugin(values[0].v);
  EXPECT_EQ(name, "pr_curves");
  EXPECT_EQ(tb_test::parse(content).i64(2), 3);  // PrCurvePluginData.num_thresholds
}

TEST_F(Tensorboard, HparamsAsThePluginReadsThem) {
  {
    tb::SummaryWriter w(path());
    w.add_hparams({{"lr", 0.01}, {"batch", 64}, {"optimizer", "adam"}, {"shuffle", true}},
                  {{"hparam/accuracy", 0.97}, {"hparam/loss", 0.1}}, {{"optimizer", {"adam", "sgd"}}}, "trial1", 3);
    EXPECT_THROW(w.add_hparams({{"lr", 0.1}}, {}, {{"lr", {"fast"}}}), ValueError);  // a string in a number's domain
  }
  EXPECT_EQ(only_file_events(dir_).size(), 1u);
  auto events = only_file_events(dir_ / "trial1");
  ASSERT_EQ(events.size(), 6u);
  auto content_of = [&](size_t i, const std::string& tag) {
    EXPECT_EQ(events[i].values.size(), 1u);
    EXPECT_EQ(events[i].values[0].str(1), tag);
    EXPECT_EQ(events[i].step, 3);
    auto [name, content] = plugin(events[i].values[0]);
    EXPECT_EQ(name, "hparams");
    Msg data = tb_test::parse(content);
    EXPECT_EQ(data.i64(1), 0);  // version
    return data;
  };
  // Experiment: hparam_infos (name, type: FLOAT64 3, STRING 1, BOOL 2; the discrete domain), metric_infos.
  Msg exp = content_of(1, "_hparams_/experiment").msg(2);
  auto infos = exp.all(4);
  ASSERT_EQ(infos.size(), 4u);
  std::vector<std::pair<std::string, int64_t>> got;
  for (const auto& f : infos) got.emplace_back(tb_test::parse(f.bytes).str(1), tb_test::parse(f.bytes).i64(4));
  EXPECT_EQ(got,
            (std::vector<std::pair<std::string, int64_t>>{{"lr", 3}, {"batch", 3}, {"optimizer", 1}, {"shuffle", 2}}));
  auto domain = tb_test::parse(infos[2].bytes).msg(5).all(1);
  ASSERT_EQ(domain.size(), 2u);
  EXPECT_EQ(tb_test::parse(domain[0].bytes).str(3), "adam");
  EXPECT_EQ(tb_test::parse(domain[1].bytes).str(3), "sgd");
  auto metrics = exp.all(5);
  ASSERT_EQ(metrics.size(), 2u);
  EXPECT_EQ(tb_test::parse(metrics[0].bytes).msg(1).str(2), "hparam/accuracy");
  EXPECT_EQ(tb_test::parse(metrics[1].bytes).msg(1).str(2), "hparam/loss");
  // Session start: the values, as a map<string, google.protobuf.Value>.
  Msg ssi = content_of(2, "_hparams_/session_start_info").msg(3);
  std::map<std::string, Msg> hp;
  for (const auto& e : ssi.all(1)) hp[tb_test::parse(e.bytes).str(1)] = tb_test::parse(e.bytes).msg(2);
  ASSERT_EQ(hp.size(), 4u);
  EXPECT_EQ(hp["lr"].f64(2), 0.01);
  EXPECT_EQ(hp["batch"].f64(2), 64);
  EXPECT_EQ(hp["optimizer"].str(3), "adam");
  EXPECT_EQ(hp["shuffle"].i64(4), 1);
  // Session end: STATUS_SUCCESS.
  EXPECT_EQ(content_of(3, "_hparams_/session_end_info").msg(4).i64(1), 1);
  // The metrics as scalars of the same run.
  EXPECT_EQ(events[4].values[0].str(1), "hparam/accuracy");
  EXPECT_EQ(events[4].values[0].get(2)->f32(), 0.97f);
  EXPECT_EQ(events[5].values[0].str(1), "hparam/loss");
  EXPECT_EQ(events[5].step, 3);
}

// ---- embeddings ---------------------------------------------------------------------------------

TEST_F(Tensorboard, EmbeddingProjectorFiles) {
  Tensor mat = tensor({{1.0f, 0.5f}, {-2.0f, 0.1f}, {3.0f, 4.0f}});
  Tensor imgs = zeros({3, 1, 2, 2});
  imgs.index_put_({1}, 1.0);  // the second image white
  {
    tb::SummaryWriter w(path());
    w.add_embedding(mat, {"a", "b", "c"}, imgs, std::nullopt, "feat/x");
    w.add_embedding(mat, {{"a", "1"}, {"b", "2"}, {"c", "3"}}, {"name", "n"}, {}, 7);
    EXPECT_THROW(w.add_embedding(mat, {"a", "b"}), ShapeError);
  }
  auto read = [](const fs::path& p) { return tb_test::file_bytes(p.string()); };
  fs::path e1 = dir_ / "00000" / "feat%2fx", e2 = dir_ / "00007" / "default";
  EXPECT_EQ(read(e1 / "tensors.tsv"), "1\t0.5\n-2\t0.1\n3\t4\n");
  EXPECT_EQ(read(e1 / "metadata.tsv"), "a\nb\nc\n");
  EXPECT_EQ(read(e2 / "metadata.tsv"), "name\tn\na\t1\nb\t2\nc\t3\n");
  EXPECT_FALSE(fs::exists(e2 / "sprite.png"));
  // The sprite: ceil(sqrt(3)) = 2 images per row, square 4 x 4, RGB; the second image white.
  Png s = decode_png(read(e1 / "sprite.png"));
  ASSERT_EQ(s.w, 4);
  ASSERT_EQ(s.h, 4);
  ASSERT_EQ(s.c, 3);
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 4; ++x) EXPECT_EQ(s.px[(y * 4 + x) * 3], (y < 2 && x >= 2) ? 255 : 0) << y << "," << x;
  EXPECT_EQ(read(dir_ / "projector_config.pbtxt"),
            "embeddings {\n"
            "  tensor_name: \"feat/x:00000\"\n"
            "  metadata_path: \"00000/feat%2fx/metadata.tsv\"\n"
            "  sprite {\n"
            "    image_path: \"00000/feat%2fx/sprite.png\"\n"
            "    single_image_dim: 2\n"
            "    single_image_dim: 2\n"
            "  }\n"
            "  tensor_path: \"00000/feat%2fx/tensors.tsv\"\n"
            "}\n"
            "embeddings {\n"
            "  tensor_name: \"default:00007\"\n"
            "  metadata_path: \"00007/default/metadata.tsv\"\n"
            "  tensor_path: \"00007/default/tensors.tsv\"\n"
            "}\n");
}

// ---- threads and crashes --------------------------------------------------------------------------

TEST_F(Tensorboard, ThreadsLogConcurrently) {
  constexpr int kThreads = 4, kEach = 3000;
  {
    tb::SummaryWriter w(path(), {.max_queue = 7, .flush_secs = 0.01});
    std::vector<std::thread> ts;
    for (int t = 0; t < kThreads; ++t)
      ts.emplace_back([&, t] {
        for (int i = 0; i < kEach; ++i) w.add_scalar("t" + std::to_string(t), t * 100000 + i, i);
      });
    for (auto& t : ts) t.join();
  }
  auto values = summary_values(only_file_events(dir_));
  ASSERT_EQ(values.size(), size_t(kThreads) * kEach);
  std::vector<int> next(kThreads, 0);
  for (const auto& v : values) {
    int t = std::stoi(v.v.str(1).substr(1));
    ASSERT_EQ(v.step, next[t]) << "thread " << t << "'s events out of order";
    EXPECT_EQ(v.v.get(2)->f32(), static_cast<float>(t * 100000 + next[t]));
    ++next[t];
  }
}

TEST_F(Tensorboard, KilledWriterLeavesOnlyCompleteRecordsAndOnePartialTail) {
  std::mt19937 rng(11);
  int with_partial = 0, total_records = 0;
  // Under AddressSanitizer 4 trials: checking a trial's records (hundreds of MB) takes 8 s there.
  const int trials = nabla::testing::kAddressSanitizer ? 4 : 12;
  for (int trial = 0; trial < trials; ++trial) {
    fs::path d = dir_ / std::to_string(trial);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {  // the child: log as fast as it can, in records of many sizes, until killed
      try {
        tb::SummaryWriter w(d.string(), {.max_queue = 3, .flush_secs = 0.001});
        for (int64_t i = 0;; ++i) {
          w.add_scalar("s", static_cast<double>(i), i);
          w.add_text("t", std::string(static_cast<size_t>((i * 7919) % 200000), static_cast<char>('a' + i % 26)), i);
        }
      } catch (...) {}
      ::_exit(3);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(30 + rng() % 120));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "the child ended on its own: " << status;
    auto files = event_files(d);
    ASSERT_EQ(files.size(), 1u);
    tb_test::Records r = tb_test::read_records(tb_test::file_bytes(files[0]));
    ASSERT_EQ(r.error, "") << "trial " << trial;
    ASSERT_GE(r.records.size(), 1u);
    with_partial += r.trailing > 0;
    total_records += static_cast<int>(r.records.size());
    // Every complete record is the event the child wrote, in order.
    for (size_t k = 1; k < r.records.size(); ++k) {
      Event e = tb_test::decode_event(r.records[k]);
      int64_t i = static_cast<int64_t>((k - 1) / 2);
      ASSERT_EQ(e.step, i);
      ASSERT_EQ(e.values.size(), 1u);
      if ((k - 1) % 2 == 0) {
        ASSERT_EQ(e.values[0].get(2)->f32(), static_cast<float>(i));
      } else {
        ASSERT_EQ(e.values[0].msg(8).str(8),
                  std::string(static_cast<size_t>((i * 7919) % 200000), static_cast<char>('a' + i % 26)));
      }
    }
  }
  EXPECT_GT(total_records, trials * 3);  // the children got to write
  std::printf("killed writers: %d records in %d files, %d ending in a partial record\n", total_records, trials,
              with_partial);
}

// ---- the official protobuf runtime and PyTorch's algorithms ------------------------------------

namespace {

std::string run_capture(const std::string& cmd, int* code) {
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[65536];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  int status = pclose(p);
  *code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

}  // namespace

TEST_F(Tensorboard, OfficialProtobufReadsEverythingAndPyTorchsAlgorithmsAgree) {
  NABLA_NEEDS_PYTHON_MODULES("google.protobuf, numpy");
  if (std::system("command -v protoc > /dev/null 2>&1") != 0) {
    if (nabla_test::torch_required())
      FAIL() << "NABLA_REQUIRE_TORCH=1 but protoc is missing (apt-get install protobuf-compiler)";
    GTEST_SKIP() << "protoc is missing (Debian: apt-get install protobuf-compiler python3-protobuf)";
  }
  manual_seed(5);
  fs::create_directories(dir_);
  // Histogram inputs: a layer's weights; values over 60 orders of magnitude with zeros, both signs,
  // values beyond the bins (|x| >= 1e20) and on bin edges; small integers.
  Tensor normal = randn({10000}) * 0.1;
  Tensor wide = randn({5000}, kFloat64) * exp(randn({5000}, kFloat64) * 12);
  wide.narrow(0, 0, 50).zero_();
  wide.index_put_({60}, 1e25);
  wide.index_put_({61}, -3e21);
  wide.index_put_({62}, 1e-12);
  wide.index_put_({63}, 1e-12 * 1.1 * 1.1);
  Tensor ints = randint(-5, 6, {1000});
  save_npy(normal, path("normal.npy"));
  save_npy(wide, path("wide.npy"));
  save_npy(ints, path("ints.npy"));
  Tensor labels = randint(0, 2, {2000}), preds = rand({2000}), weights = rand({2000}, kFloat64);
  save_npy(labels, path("pr_labels.npy"));
  save_npy(preds, path("pr_predictions.npy"));
  save_npy(weights, path("pr_weights.npy"));
  {
    tb::SummaryWriter w(path(), {.purge_step = 3});
    w.add_scalar("loss", 0.125, 4);
    w.add_scalars("both", {{"a", 1.5}, {"b", -2.5}}, 5);
    w.add_histogram("ref/normal", normal, 6);
    w.add_histogram("ref/wide", wide, 7);
    w.add_histogram("ref/ints", ints, 8);
    w.add_image("img", rand({3, 5, 7}), 9);
    w.add_text("md", "# title\n*x*", 10);
    w.add_pr_curve("ref_pr", labels, preds, 11, 50, weights);
    w.add_hparams({{"lr", 0.5}, {"opt", "sgd"}, {"bn", false}}, {{"hparam/acc", 0.875}}, {{"opt", {"sgd", "adam"}}},
                  "hp", 12);
    w.add_embedding(rand({4, 3}), {"w", "x", "y", "z"}, rand({4, 1, 5, 5}), 13, "emb");
  }
  int code = 0;
  std::string out = run_capture(
      "/usr/bin/python3 " + std::string(NABLA_TESTS_DIR) + "/tensorboard/read_events.py " + path() + " 2>&1", &code);
  ASSERT_EQ(code, 0) << out;
  nlohmann::json j = nlohmann::json::parse(out);
  ASSERT_EQ(j["checks"].size(), 4u) << out.substr(0, 4000);
  for (const auto& c : j["checks"]) EXPECT_TRUE(c["ok"].get<bool>()) << c["name"] << ": " << c["detail"];

  const auto& main = j["runs"]["."];
  ASSERT_EQ(main.size(), 10u) << main.dump().substr(0, 4000);
  EXPECT_EQ(main[0]["file_version"], "brain.Event:2");
  EXPECT_EQ(main[1]["file_version"], "brain.Event:2");
  EXPECT_EQ(main[1]["step"], 3);
  EXPECT_EQ(main[2]["session_log"], "START");
  auto value = [&](size_t i) { return main[i]["values"][0]; };
  EXPECT_EQ(value(3)["tag"], "loss");
  EXPECT_EQ(value(3)["simple_value"], 0.125);
  EXPECT_EQ(main[3]["step"], 4);
  EXPECT_EQ(value(7)["image"], nlohmann::json({{"height", 5},
                                               {"width", 7},
                                               {"colorspace", 3},
                                               {"png_bytes", value(7)["image"]["png_bytes"]},
                                               {"png_signature", true}}));
  EXPECT_EQ(value(8)["tag"], "md/text_summary");
  EXPECT_EQ(value(8)["tensor"]["dtype"], "DT_STRING");
  EXPECT_EQ(value(8)["tensor"]["string_val"][0], "# title\n*x*");
  EXPECT_EQ(value(8)["plugin"], "text");
  EXPECT_EQ(value(9)["plugin"], "pr_curves");
  EXPECT_EQ(value(9)["plugin_content"]["num_thresholds"], 50);
  EXPECT_EQ(j["runs"]["both_a"][1]["values"][0]["simple_value"], 1.5);
  EXPECT_EQ(j["runs"]["both_b"][1]["values"][0]["tag"], "both");
  EXPECT_EQ(j["runs"]["both_b"][1]["values"][0]["simple_value"], -2.5);

  const auto& hp = j["runs"]["hp"];
  ASSERT_EQ(hp.size(), 5u);
  const auto& exp = hp[1]["values"][0]["plugin_content"]["experiment"];
  EXPECT_EQ(exp["hparam_infos"][0], nlohmann::json({{"name", "lr"}, {"type", "DATA_TYPE_FLOAT64"}}));
  EXPECT_EQ(exp["hparam_infos"][1]["domain_discrete"],
            nlohmann::json::parse(R"({"values": [{"string_value": "sgd"}, {"string_value": "adam"}]})"));
  EXPECT_EQ(exp["hparam_infos"][2]["type"], "DATA_TYPE_BOOL");
  EXPECT_EQ(exp["metric_infos"][0]["name"]["tag"], "hparam/acc");
  const auto& ssi = hp[2]["values"][0]["plugin_content"]["session_start_info"]["hparams"];
  EXPECT_EQ(ssi["lr"]["number_value"], 0.5);
  EXPECT_EQ(ssi["opt"]["string_value"], "sgd");
  EXPECT_EQ(ssi["bn"]["bool_value"], false);
  EXPECT_EQ(hp[3]["values"][0]["plugin_content"]["session_end_info"]["status"], "STATUS_SUCCESS");
  EXPECT_EQ(hp[4]["values"][0]["simple_value"], 0.875);
  EXPECT_EQ(hp[4]["step"], 12);

  EXPECT_EQ(j["projector"]["embeddings"][0]["tensor_name"], "emb:00013");
  EXPECT_EQ(j["projector"]["embeddings"][0]["sprite"]["single_image_dim"], nlohmann::json::parse("[5, 5]"));
}

// ---- checks of arguments ------------------------------------------------------------------------

TEST_F(Tensorboard, MistakesGiveClearErrors) {
  EXPECT_THROW(tb::SummaryWriter(path("a"), {.max_queue = 0}), ValueError);
  EXPECT_THROW(tb::SummaryWriter(path("b"), {.flush_secs = -1}), ValueError);
  fs::create_directories(dir_);
  std::ofstream(dir_ / "file") << "x";
  try {
    tb::SummaryWriter w(path("file"));
    FAIL() << "a file as log dir must raise";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("SummaryWriter: cannot create the log folder '" + path("file") + "'"),
              std::string::npos)
        << e.what();
  }
}
