// .npy files: round trips for every dtype and shape, the file layout, a cross-check with NumPy
// when python3 has it, and hostile files that must give IOError.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "io/npy.h"
#include "tests/common/value_helpers.h"

namespace nabla::testing {
namespace {

// ---- .npy round trips ------------------------------------------------------------------------------
class Npy : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("nabla_npy_" + std::to_string(::getpid()) + "_" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write_bytes(const std::string& name, const std::string& bytes) const {
    std::ofstream f(path(name), std::ios::binary);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  std::filesystem::path dir_;
};

// A version-1 .npy file with the given header dict (padded as NumPy does) and raw data.
std::string npy_bytes(const std::string& dict, const std::string& data, int hlen_override = -1) {
  std::string header = dict;
  size_t total = 10 + header.size() + 1;
  header += std::string((64 - total % 64) % 64, ' ') + "\n";
  size_t hlen = hlen_override >= 0 ? static_cast<size_t>(hlen_override) : header.size();
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(hlen & 0xff);
  out += static_cast<char>((hlen >> 8) & 0xff);
  return out + header + data;
}

TEST_F(Npy, RoundTripEveryDtype) {
  std::vector<Tensor> ts = {
      tensor({{1.5f, -2.f, 3.25f}, {0.f, 1e-30f, -7.f}}),
      tensor(std::vector<double>{1.0 / 3, -1e300, 5e-324}, {3}),
      tensor(std::vector<int64_t>{std::numeric_limits<int64_t>::min(), -1, 0, std::numeric_limits<int64_t>::max()}),
      tensor(std::vector<int32_t>{-5, 7, 2147483647}),
      tensor(std::vector<uint8_t>{0, 128, 255}),
      tensor({{true, false}, {false, true}}),
      tensor({0.5, -65504.0, 0.000061035156}, kFloat16),
  };
  for (size_t i = 0; i < ts.size(); ++i) {
    std::string p = path("t" + std::to_string(i) + ".npy");
    save_npy(ts[i], p);
    Tensor r = load_npy(p);
    EXPECT_EQ(r.dtype(), ts[i].dtype()) << i;
    EXPECT_EQ(shape_of(r), shape_of(ts[i])) << i;
    EXPECT_TRUE(values_near(values(r), values(ts[i]), 0, 0)) << i;
  }
  EXPECT_THROW(save_npy(ones({2}, kBFloat16), path("bf.npy")), NotImplemented);
  // Complex: '<c8' / '<c16', and a big-endian file whose parts are swapped one by one.
  for (DType dt : {kComplex64, kComplex128}) {
    Tensor z = nabla::complex(tensor({1.5, -2.0}, kFloat64), tensor({0.25, 3.0}, kFloat64)).to(dt);
    save_npy(z, path("z.npy"));
    Tensor r = load_npy(path("z.npy"));
    EXPECT_EQ(r.dtype(), dt);
    EXPECT_TRUE(equal(view_as_real(r), view_as_real(z))) << dt;
  }
  write_bytes("be.npy", npy_bytes("{'descr': '>c8', 'fortran_order': False, 'shape': (1,), }",
                                  std::string("\x3f\x80\x00\x00\x40\x00\x00\x00", 8)));
  EXPECT_TRUE(equal(view_as_real(load_npy(path("be.npy"))), tensor({{1.0f, 2.0f}})));
}

TEST_F(Npy, RoundTripShapes) {
  for (const std::vector<int64_t>& s :
       std::vector<std::vector<int64_t>>{{}, {0}, {0, 3}, {4}, {2, 3, 4}, {1, 1, 1, 1}}) {
    Tensor t = lcg_tensor(s, 7, kFloat32);
    save_npy(t, path("s.npy"));
    Tensor r = load_npy(path("s.npy"));
    EXPECT_EQ(shape_of(r), s);
    EXPECT_TRUE(values_near(values(r), values(t), 0, 0));
  }
  // A non-contiguous tensor is saved in logical (C) order.
  Tensor nc = arange(6, kFloat64).view({2, 3}).t();
  save_npy(nc, path("nc.npy"));
  EXPECT_TRUE(tensor_is(load_npy(path("nc.npy")), {3, 2}, {0, 3, 1, 4, 2, 5}, 0, 0));
}

TEST_F(Npy, FileLayoutIsNumPyVersion1) {
  save_npy(tensor({1.f, 2.f}), path("a.npy"));
  std::ifstream f(path("a.npy"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  ASSERT_GE(bytes.size(), 10u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  size_t hlen = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
  EXPECT_EQ((10 + hlen) % 64, 0u);  // data aligned to 64 bytes
  std::string header = bytes.substr(10, hlen);
  EXPECT_EQ(header.rfind("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 0), 0u) << header;
  EXPECT_EQ(header.back(), '\n');
  EXPECT_EQ(bytes.size(), 10 + hlen + 8);
}

TEST_F(Npy, LoadsFortranOrderBigEndianAndVersion2) {
  // (2, 3) float64 in Fortran order: columns stored first.
  double col_major[6] = {1, 4, 2, 5, 3, 6};
  write_bytes("f.npy", npy_bytes("{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }",
                                 std::string(reinterpret_cast<char*>(col_major), sizeof(col_major))));
  EXPECT_TRUE(tensor_is(load_npy(path("f.npy")), {2, 3}, {1, 2, 3, 4, 5, 6}, 0, 0));
  // Big-endian float64 and int32.
  std::string be;
  for (double v : {1.5, -2.0}) {
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    for (int k = 7; k >= 0; --k) be += static_cast<char>((bits >> (8 * k)) & 0xff);
  }
  write_bytes("be.npy", npy_bytes("{'descr': '>f8', 'fortran_order': False, 'shape': (2,), }", be));
  EXPECT_TRUE(tensor_is(load_npy(path("be.npy")), {2}, {1.5, -2}, 0, 0));
  write_bytes("bei.npy", npy_bytes("{'descr': '>i4', 'fortran_order': False, 'shape': (1,), }",
                                   std::string("\x00\x00\x01\x02", 4)));
  EXPECT_EQ(load_npy(path("bei.npy")).item<int64_t>(), 258);
  // Version 2.0 has a 4-byte header length; keys may come in any order, double quotes are fine.
  std::string dict = "{\"shape\": (), \"fortran_order\": False, \"descr\": \"<i8\"}\n";
  std::string v2 = std::string("\x93NUMPY\x02\x00", 8);
  uint32_t hl = static_cast<uint32_t>(dict.size());
  for (int k = 0; k < 4; ++k) v2 += static_cast<char>((hl >> (8 * k)) & 0xff);
  int64_t seven = 7;
  write_bytes("v2.npy", v2 + dict + std::string(reinterpret_cast<char*>(&seven), 8));
  Tensor s = load_npy(path("v2.npy"));
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.item<int64_t>(), 7);
}

TEST_F(Npy, HostileFilesGiveIOError) {
  float two[2] = {1, 2};
  std::string data(reinterpret_cast<char*>(two), 8);
  std::string good = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  write_bytes("ok.npy", npy_bytes(good, data));
  ASSERT_NO_THROW(load_npy(path("ok.npy")));
  struct Bad {
    const char* name;
    std::string bytes;
    const char* why;
  };
  std::string ok = npy_bytes(good, data);
  std::vector<Bad> bad = {
      {"magic", "\x93NUMPX" + ok.substr(6), "magic"},
      {"tiny", std::string("\x93NUM", 4), "magic"},
      {"empty", "", "magic"},
      {"truncated", ok.substr(0, ok.size() - 3), "bytes"},
      {"extra", ok + "xx", "bytes"},
      {"hlen_past_end", npy_bytes(good, data, 60000), "header length"},
      {"hlen_lies_short", npy_bytes(good, data, 20), "header"},
      {"hlen_lies_long", npy_bytes(good, data, 126), "bytes"},  // the header swallows the data
      {"version", "\x93NUMPY\x07" + ok.substr(7), "version"},
      {"complex_short", npy_bytes("{'descr': '<c16', 'fortran_order': False, 'shape': (1,), }", data), "bytes"},
      {"dtype_object", npy_bytes("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", data), "dtype"},
      {"dtype_unicode", npy_bytes("{'descr': '<U10', 'fortran_order': False, 'shape': (1,), }", data), "dtype"},
      {"byte_order", npy_bytes("{'descr': '!f4', 'fortran_order': False, 'shape': (2,), }", data), "byte order"},
      {"missing_shape", npy_bytes("{'descr': '<f4', 'fortran_order': False, }", data), "shape"},
      {"unknown_key", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", data), "key"},
      {"bad_shape", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", data), "shape"},
      {"huge_shape", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", data),
       "overflow"},
      {"unterminated", npy_bytes("{'descr': '<f4", data), "header"},
      {"not_a_dict", npy_bytes("[1, 2, 3]", data), "header"},
      {"bool_bytes", npy_bytes("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", std::string("\x01\x07", 2)),
       "bool"},
  };
  for (const Bad& b : bad) {
    write_bytes(b.name, b.bytes);
    EXPECT_TRUE(throws_with<IOError>([&] { load_npy(path(b.name)); }, {"load_npy", b.name, b.why})) << b.name;
  }
  EXPECT_TRUE(throws_with<IOError>([&] { load_npy(path("does_not_exist.npy")); }, {"does_not_exist.npy"}));
  EXPECT_THROW(load_npy(dir_.string()), IOError);  // a directory
  EXPECT_THROW(save_npy(ones({2}), path("no_such_dir/x.npy")), IOError);
}

// ---- cross-check with NumPy --------------------------------------------------------------------------
// Debian's python3 (which python3-numpy serves) may not be the first python3 on PATH.
std::string python() {
  for (const char* p : {"/usr/bin/python3", "python3"})
    if (std::system((std::string(p) + " -c 'import numpy' > /dev/null 2>&1").c_str()) == 0) return p;
  return "";
}
bool have_numpy() { return !python().empty(); }

TEST_F(Npy, NumPyReadsWhatNablaWrites) {
  if (!have_numpy()) GTEST_SKIP() << "python3 with numpy is not available";
  save_npy(tensor({{1.5f, -2.f, 3.f}, {4.f, 5.f, 6.25f}}), path("f4.npy"));
  save_npy(tensor(std::vector<int64_t>{-3, 1LL << 40}), path("i8.npy"));
  save_npy(tensor({true, false, true}), path("b1.npy"));
  save_npy(arange(6, kFloat64).view({2, 3}).t(), path("t.npy"));
  save_npy(scalar_tensor(2.5, kFloat64), path("s.npy"));
  save_npy(zeros({0, 2}, kInt32), path("e.npy"));
  save_npy(tensor({0.5, -1.0}, kFloat16), path("f2.npy"));
  std::string script = path("check.py");
  std::ofstream(script)
      << "import numpy as np, sys\n"
         "d = sys.argv[1]\n"
         "a = np.load(d + '/f4.npy'); assert a.dtype == np.float32 and a.shape == (2, 3)\n"
         "assert (a == np.array([[1.5, -2, 3], [4, 5, 6.25]], dtype=np.float32)).all()\n"
         "b = np.load(d + '/i8.npy'); assert b.dtype == np.int64 and list(b) == [-3, 1 << 40]\n"
         "c = np.load(d + '/b1.npy'); assert c.dtype == np.bool_ and list(c) == [True, False, True]\n"
         "t = np.load(d + '/t.npy'); assert t.shape == (3, 2) and (t == np.arange(6.0).reshape(2, 3).T).all()\n"
         "s = np.load(d + '/s.npy'); assert s.shape == () and s == 2.5 and s.dtype == np.float64\n"
         "e = np.load(d + '/e.npy'); assert e.shape == (0, 2) and e.dtype == np.int32\n"
         "h = np.load(d + '/f2.npy'); assert h.dtype == np.float16 and list(h) == [0.5, -1.0]\n";
  EXPECT_EQ(std::system((python() + " " + script + " " + dir_.string()).c_str()), 0);
}

TEST_F(Npy, NablaReadsWhatNumPyWrites) {
  if (!have_numpy()) GTEST_SKIP() << "python3 with numpy is not available";
  std::string script = path("write.py");
  std::ofstream(script) << "import numpy as np, sys\n"
                           "d = sys.argv[1]\n"
                           "x = np.arange(12, dtype='<f4').reshape(3, 4)\n"
                           "np.save(d + '/c.npy', x)\n"
                           "np.save(d + '/f.npy', np.asfortranarray(x))\n"
                           "np.save(d + '/be.npy', np.array([1.5, -2.25, 1e300], dtype='>f8'))\n"
                           "np.save(d + '/bei.npy', np.array([[1, -2], [3, 1 << 40]], dtype='>i8'))\n"
                           "np.save(d + '/u1.npy', np.array([0, 200, 255], dtype=np.uint8))\n"
                           "np.save(d + '/b.npy', np.array([[True, False]]))\n"
                           "np.save(d + '/s.npy', np.float64(3.5))\n"
                           "np.save(d + '/e.npy', np.zeros((2, 0, 3), dtype=np.int32))\n"
                           "np.save(d + '/h.npy', np.array([0.1, 2], dtype=np.float16))\n";
  ASSERT_EQ(std::system((python() + " " + script + " " + dir_.string()).c_str()), 0);
  std::vector<double> x(12);
  for (int i = 0; i < 12; ++i) x[i] = i;
  Tensor c = load_npy(path("c.npy"));
  EXPECT_EQ(c.dtype(), kFloat32);
  EXPECT_TRUE(tensor_is(c, {3, 4}, x, 0, 0));
  EXPECT_TRUE(tensor_is(load_npy(path("f.npy")), {3, 4}, x, 0, 0));
  EXPECT_TRUE(tensor_is(load_npy(path("be.npy")), {3}, {1.5, -2.25, 1e300}, 0, 0));
  Tensor bei = load_npy(path("bei.npy"));
  EXPECT_EQ(bei.dtype(), kInt64);
  EXPECT_EQ(int_values(bei), (std::vector<int64_t>{1, -2, 3, 1LL << 40}));
  EXPECT_EQ(int_values(load_npy(path("u1.npy"))), (std::vector<int64_t>{0, 200, 255}));
  Tensor b = load_npy(path("b.npy"));
  EXPECT_EQ(b.dtype(), kBool);
  EXPECT_TRUE(tensor_is(b, {1, 2}, {1, 0}));
  Tensor s = load_npy(path("s.npy"));
  EXPECT_EQ(s.dim(), 0);
  EXPECT_DOUBLE_EQ(s.item<double>(), 3.5);
  Tensor e = load_npy(path("e.npy"));
  EXPECT_EQ(e.dtype(), kInt32);
  EXPECT_EQ(shape_of(e), (std::vector<int64_t>{2, 0, 3}));
  Tensor h = load_npy(path("h.npy"));
  EXPECT_EQ(h.dtype(), kFloat16);
  EXPECT_TRUE(tensor_is(h, {2}, {0.0999755859375, 2}, 0, 0));
}

}  // namespace
}  // namespace nabla::testing
