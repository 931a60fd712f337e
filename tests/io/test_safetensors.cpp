// safetensors: round trips, the exact layout, an independent reader and writer
// (tests/io/safetensors_reader.py: json, struct and numpy only; and safetensors.torch where it is
// installed), and one hostile-header test per validation rule.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "nabla.h"

using namespace nabla;
namespace fs = std::filesystem;

namespace {

std::string tmp_path(const std::string& name) {
  fs::path dir = fs::path(::testing::TempDir()) / "nabla_safetensors_test";
  fs::create_directories(dir);
  return (dir / name).string();
}

std::vector<char> file_bytes(const std::string& header, size_t data_len, char fill = 0) {
  std::vector<char> b(8 + header.size() + data_len, fill);
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  std::memcpy(b.data() + 8, header.data(), header.size());
  return b;
}

// Expects deserialize to throw IOError whose message contains `needle`.
void expect_rejected(const std::vector<char>& bytes, const std::string& needle) {
  try {
    safetensors::deserialize(bytes.data(), bytes.size(), "hostile");
    ADD_FAILURE() << "accepted a file that should be rejected for: " << needle;
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "message: " << e.what();
  }
}
void expect_rejected(const std::string& header, size_t data_len, const std::string& needle) {
  expect_rejected(file_bytes(header, data_len), needle);
}

nn::StateDict sample_tensors() {
  manual_seed(7);
  nn::StateDict sd;
  sd.insert("f32", randn({2, 3}));
  sd.insert("f64.scalar", scalar_tensor(-1.25, kFloat64));
  sd.insert("i64", tensor({int64_t(-5), int64_t(0), int64_t(1) << 40}));
  sd.insert("i32", tensor({1, -2, 3}).to(kInt32));
  sd.insert("u8", tensor({0, 255, 7}).to(kUInt8));
  sd.insert("bool", tensor({true, false, true}));
  sd.insert("f16", tensor({0.5, -2.0, 65504.0}).to(kFloat16));
  sd.insert("bf16", tensor({1.0, -0.375, 3.0e38}).to(kBFloat16));
  sd.insert("empty", zeros({0, 3}));
  sd.insert("transposed", arange(12, dtype(kFloat32)).view({3, 4}).t());  // non-contiguous
  return sd;
}

std::string json_number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

// The expected contents for safetensors_reader.py check.
std::string expected_json(const nn::StateDict& sd, const safetensors::Metadata& meta) {
  std::ostringstream os;
  os << "{\"metadata\": {";
  bool first = true;
  for (const auto& [k, v] : meta) {
    os << (first ? "" : ", ") << "\"" << k << "\": \"" << v << "\"";
    first = false;
  }
  os << "}, \"tensors\": {";
  first = true;
  for (const auto& [name, t] : sd) {
    const char* dt = t.dtype() == kFloat32   ? "F32"
                     : t.dtype() == kFloat64 ? "F64"
                     : t.dtype() == kInt64   ? "I64"
                     : t.dtype() == kInt32   ? "I32"
                     : t.dtype() == kUInt8   ? "U8"
                     : t.dtype() == kBool    ? "BOOL"
                     : t.dtype() == kFloat16 ? "F16"
                                             : "BF16";
    os << (first ? "" : ", ") << "\"" << name << "\": {\"dtype\": \"" << dt << "\", \"shape\": [";
    for (int64_t d = 0; d < t.dim(); ++d) os << (d ? ", " : "") << t.size(d);
    os << "], \"values\": [";
    Tensor v = t.to(kFloat64).contiguous().reshape({-1});
    for (int64_t i = 0; i < v.numel(); ++i) os << (i ? ", " : "") << json_number(v[i].item<double>());
    os << "]}";
    first = false;
  }
  os << "}}";
  return os.str();
}

// A Python with numpy: NABLA_TEST_PYTHON when set (scripts/gpu-verify.sh points it at the Python
// that has PyTorch and safetensors), else Debian's /usr/bin/python3 (python3-numpy), then python3
// on PATH.
std::string python_with_numpy() {
  if (const char* py = std::getenv("NABLA_TEST_PYTHON"); py && *py) {
    if (std::system((std::string(py) + " -c 'import numpy' > /dev/null 2>&1").c_str()) == 0) return py;
  }
  for (const char* py : {"/usr/bin/python3", "python3"})
    if (std::system((std::string(py) + " -c 'import numpy' > /dev/null 2>&1").c_str()) == 0) return py;
  return "";
}

// Next to this file (CMake compiles sources by absolute path).
std::string reader_script() { return std::string(NABLA_TESTS_DIR) + "/io/safetensors_reader.py"; }

}  // namespace

TEST(Safetensors, RoundTripEveryDtypeBitwise) {
  nn::StateDict sd = sample_tensors();
  std::string path = tmp_path("roundtrip.safetensors");
  safetensors::save_file(sd, path, {{"framework", "nabla"}, {"epoch", "3"}});
  safetensors::File f = safetensors::load_file(path);
  EXPECT_EQ(f.metadata.at("framework"), "nabla");
  EXPECT_EQ(f.metadata.at("epoch"), "3");
  ASSERT_EQ(f.tensors.size(), sd.size());
  for (const auto& [name, t] : sd) {
    const Tensor& u = f.tensors[name];
    EXPECT_EQ(u.dtype(), t.dtype()) << name;
    EXPECT_EQ(u.sizes(), t.sizes()) << name;
    EXPECT_EQ(std::memcmp(u.contiguous().data_ptr(), t.contiguous().data_ptr(), t.nbytes()), 0) << name;
  }
  // serialize() is the same bytes as the file.
  auto bytes = safetensors::serialize(sd, {{"framework", "nabla"}, {"epoch", "3"}});
  std::ifstream in(path, std::ios::binary);
  std::vector<char> disk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(bytes, disk);
}

TEST(Safetensors, LayoutFollowsTheSpecification) {
  nn::StateDict sd;
  sd.insert("w", tensor({1.0f, 2.0f}));
  sd.insert("d", tensor({3.0}, kFloat64));
  auto b = safetensors::serialize(sd);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(b[i]);
  EXPECT_EQ(n % 8, 0u);  // padded so the data starts 8-byte aligned
  std::string header(b.data() + 8, n);
  EXPECT_EQ(header.front(), '{');
  // The 8-byte dtype goes first, then the float32 tensor; trailing spaces pad the header.
  EXPECT_NE(header.find("\"d\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}"), std::string::npos) << header;
  EXPECT_NE(header.find("\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}"), std::string::npos)
      << header;
  EXPECT_EQ(b.size(), 8 + n + 16);
  double d;
  std::memcpy(&d, b.data() + 8 + n, 8);
  EXPECT_EQ(d, 3.0);  // little-endian IEEE
  float w1;
  std::memcpy(&w1, b.data() + 8 + n + 12, 4);
  EXPECT_EQ(w1, 2.0f);
  EXPECT_THROW(safetensors::serialize(nn::StateDict{{"__metadata__", zeros({1})}}), ValueError);
}

TEST(Safetensors, ModuleWeights) {
  manual_seed(3);
  nn::Sequential a(nn::Conv2d(1, 2, 3), nn::BatchNorm2d(2), nn::Flatten(), nn::Linear(8, 3));
  a(randn({4, 1, 4, 4}));  // non-trivial running statistics
  std::string path = tmp_path("model.safetensors");
  nn::save_weights(a, path, {{"arch", "tiny"}});
  manual_seed(4);
  nn::Sequential b(nn::Conv2d(1, 2, 3), nn::BatchNorm2d(2), nn::Flatten(), nn::Linear(8, 3));
  nn::load_weights(b, path);
  a.eval();
  b.eval();
  Tensor x = randn({2, 1, 4, 4});
  EXPECT_TRUE(a(x).equal(b(x)));
  EXPECT_EQ(b.at<nn::BatchNorm2d>(1)->num_batches_tracked.item<int64_t>(), 1);
  nn::Sequential c(nn::Conv2d(1, 2, 3), nn::BatchNorm2d(2), nn::Flatten(), nn::Linear(8, 4));
  EXPECT_THROW(nn::load_weights(c, path), ValueError);  // size mismatch for 3.weight
}

TEST(Safetensors, IndependentPythonReaderAgrees) {
  std::string py = python_with_numpy();
  if (py.empty()) GTEST_SKIP() << "no python3 with numpy (Debian: apt-get install python3-numpy)";
  nn::StateDict sd = sample_tensors();
  safetensors::Metadata meta{{"format", "pt"}, {"note", "written by nabla"}};
  std::string path = tmp_path("for_python.safetensors"), expect = tmp_path("for_python.json");
  safetensors::save_file(sd, path, meta);
  std::ofstream(expect) << expected_json(sd, meta);
  std::string cmd = py + " " + reader_script() + " check " + path + " " + expect + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof(buf), p)) out += buf;
  int rc = pclose(p);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("independent reader: 10 tensors match"), std::string::npos) << out;
  std::printf("%s", out.c_str());
}

TEST(Safetensors, ReadsAFileWrittenByAnIndependentWriter) {
  std::string py = python_with_numpy();
  if (py.empty()) GTEST_SKIP() << "no python3 with numpy (Debian: apt-get install python3-numpy)";
  std::string path = tmp_path("from_python.safetensors");
  ASSERT_EQ(std::system((py + " " + reader_script() + " write " + path).c_str()), 0);
  safetensors::File f = safetensors::load_file(path);
  EXPECT_EQ(f.metadata.at("writer"), "python");
  EXPECT_TRUE(f.tensors["a.f32"].equal(arange(6, dtype(kFloat32)).view({2, 3}) / 4));
  EXPECT_TRUE(f.tensors["b.i64"].equal(tensor({int64_t(-3), int64_t(0), int64_t(1) << 40})));
  EXPECT_EQ(f.tensors["c.f64"].dim(), 0);
  EXPECT_EQ(f.tensors["c.f64"].item<double>(), 2.5);
  EXPECT_TRUE(f.tensors["d.bool"].equal(tensor({true, false, true})));
  EXPECT_TRUE(f.tensors["e.f16"].to(kFloat32).equal(tensor({0.5f, -2.0f})));  // at an odd offset
  EXPECT_EQ(f.tensors["f.empty"].sizes(), (Shape{0, 4}));
}

TEST(Safetensors, HostileHeadersAreRejected) {
  const std::string ok = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  EXPECT_NO_THROW(safetensors::deserialize(file_bytes(ok, 8).data(), 8 + ok.size() + 8));
  // The file must hold the 8-byte length.
  expect_rejected(std::vector<char>(5, 0), "file too small");
  // Header length limit (100,000,000 bytes), checked before anything is read or allocated.
  std::vector<char> huge(16, ' ');
  uint64_t big = 100'000'001;
  for (int i = 0; i < 8; ++i) huge[i] = static_cast<char>((big >> (8 * i)) & 0xff);
  expect_rejected(huge, "exceeds the limit of 100000000");
  // Header longer than the file.
  auto longer = file_bytes(ok, 8);
  longer[0] = static_cast<char>(longer[0] + 40);
  expect_rejected(longer, "larger than the rest of the file");
  // Must be a JSON object starting with '{'.
  expect_rejected("[1, 2]  ", 0, "starting with '{'");
  expect_rejected(" {}     ", 0, "starting with '{'");
  expect_rejected("{\"a\": }", 0, "not valid JSON");
  expect_rejected(std::string("{\"\xff\xfe\":1}"), 0, "not valid JSON");  // invalid UTF-8
  // Duplicate names (in the header, or fields inside an entry).
  expect_rejected(
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
      8, "duplicate name 'a'");
  expect_rejected(R"({"a":{"dtype":"F32","dtype":"F64","shape":[1],"data_offsets":[0,4]}})", 4,
                  "duplicate name 'dtype'");
  // Entries: known dtype, integer shape, two ordered offsets, all fields present.
  expect_rejected(R"({"a":{"dtype":"F128","shape":[1],"data_offsets":[0,16]}})", 16, "unknown dtype 'F128'");
  expect_rejected(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4, "non-negative integers");
  expect_rejected(R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", 4, "non-negative integers");
  expect_rejected(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", 4, "end 0 < begin 4");
  expect_rejected(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4, "data_offsets must be an array");
  expect_rejected(R"({"a":{"dtype":"F32","data_offsets":[0,4]}})", 4, "missing or non-array shape");
  expect_rejected(R"({"a":{"shape":[1],"data_offsets":[0,4]}})", 4, "missing or non-string dtype");
  expect_rejected(R"({"a":[1,2]})", 0, "expected an object");
  // Byte counts must match shape and dtype, without overflow.
  expect_rejected(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8, "need 12 bytes");
  expect_rejected(R"({"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8, "overflows");
  // No gaps, no overlaps, the buffer covered exactly.
  expect_rejected(
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
      12, "(a gap)");
  expect_rejected(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
      8, "(an overlap)");
  expect_rejected(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8, "starts at byte 4");
  expect_rejected(ok, 12, "the file holds 12 bytes");  // trailing bytes
  expect_rejected(ok, 4, "the file holds 4 bytes");    // truncated data
  // A huge tensor claimed by a small file is refused before any allocation.
  expect_rejected(R"({"a":{"dtype":"F64","shape":[1000000000000],"data_offsets":[0,8000000000000]}})", 8,
                  "the file holds 8 bytes");
  // __metadata__ is an object of strings.
  expect_rejected(R"({"__metadata__":{"k":1}})", 0, "is not a string");
  expect_rejected(R"({"__metadata__":[1]})", 0, "must be an object of strings");
  // A dtype of the format that nabla has no type for.
  expect_rejected(R"({"a":{"dtype":"I16","shape":[2],"data_offsets":[0,4]}})", 4, "nabla does not support");
}

TEST(Safetensors, DamagedFilesOnDiskGiveIOErrors) {
  nn::StateDict sd = sample_tensors();
  auto good = safetensors::serialize(sd);
  std::string path = tmp_path("damaged.safetensors");
  auto write = [&](const std::vector<char>& b, size_t n) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(b.data(), static_cast<std::streamsize>(n));
  };
  // Every truncation is an IOError (or, for the full length, a good load).
  for (size_t n = 0; n <= good.size(); n += (n < 64 ? 1 : 7)) {
    write(good, n);
    try {
      safetensors::load_file(path);
      EXPECT_EQ(n, good.size());
    } catch (const IOError&) { EXPECT_LT(n, good.size()); }
  }
  // Random byte corruption: either a load (data bytes changed) or an IOError, never a crash.
  std::mt19937 rng(5);
  int rejected = 0;
  for (int trial = 0; trial < 300; ++trial) {
    auto b = good;
    for (int k = 0; k < 3; ++k) b[rng() % b.size()] = static_cast<char>(rng());
    write(b, b.size());
    try {
      safetensors::load_file(path);
    } catch (const IOError&) { ++rejected; }
  }
  EXPECT_GT(rejected, 0);
  EXPECT_THROW(safetensors::load_file(tmp_path("does_not_exist.safetensors")), IOError);
  EXPECT_THROW(safetensors::load_file(::testing::TempDir()), IOError);  // a directory
  auto infos = safetensors::read_header(tmp_path("roundtrip.safetensors"));
  EXPECT_FALSE(infos.empty());
}
