// Reading datasets from files: IDX (against hostile files), MNIST / Fashion-MNIST, CIFAR-10, image
// files and ImageFolder. Fixtures are generated into a temporary directory by the tests themselves.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/sanitizer.h"
#include "data_util.h"
#include "nabla.h"

using namespace nabla;
namespace data = nabla::data;
using nabla_test::gzip_stored;
using nabla_test::idx_bytes;
using nabla_test::read_bytes;
using nabla_test::TempDir;
using nabla_test::write_bytes;

namespace {

// Runs f, expecting an IOError whose message contains every one of `parts`.
template <class F>
void expect_io_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "expected an IOError";
  } catch (const IOError& e) {
    std::string msg = e.what();
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "message: " << msg << "\nmissing: " << p;
  }
}

std::vector<uint8_t> gzip_bytes(const TempDir& dir, const std::vector<uint8_t>& plain_idx) {
  // write_idx compresses; reuse it by round-tripping the plain file through read_idx.
  std::string p = dir / "tmp-plain.idx", z = dir / "tmp.idx.gz";
  write_bytes(p, plain_idx);
  data::write_idx(z, data::read_idx(p), true);
  return read_bytes(z);
}

std::string repo_data_dir(const char* env, const std::string& sub) {
  if (const char* e = std::getenv(env)) return e;
  // NABLA_TEST_DATA_DIR is <repo>/tests/data (which may not exist): go up lexically.
  return (std::filesystem::path(NABLA_TEST_DATA_DIR).parent_path().parent_path() / "data" / sub).string();
}

}  // namespace

// ---- IDX ----------------------------------------------------------------------------------------
TEST(DataIdx, RoundTripsEveryTypePlainAndGzip) {
  TempDir dir;
  std::vector<Tensor> tensors = {arange(24, kUInt8).view({2, 3, 4}), tensor(std::vector<int32_t>{-5, 7, 1 << 30}),
                                 tensor({{1.5f, -2.25f}, {1e30f, 0.f}}),
                                 tensor(std::vector<double>{3.141592653589793, -1e-300})};
  for (bool gz : {false, true})
    for (size_t k = 0; k < tensors.size(); ++k) {
      std::string path = dir / ("t" + std::to_string(k) + (gz ? ".gz" : ""));
      data::write_idx(path, tensors[k], gz);
      Tensor back = data::read_idx(path);
      EXPECT_EQ(back.dtype(), tensors[k].dtype());
      EXPECT_TRUE(back.equal(tensors[k])) << k << (gz ? " gz" : "");
    }
  // Signed 8- and 16-bit types are widened to int32; the bytes are big-endian.
  write_bytes(dir / "i8", idx_bytes(0x09, {3}, {0xFF, 0x7F, 0x80}));
  EXPECT_TRUE(data::read_idx(dir / "i8").equal(tensor(std::vector<int32_t>{-1, 127, -128})));
  write_bytes(dir / "i16", idx_bytes(0x0B, {2}, {0xFF, 0xFE, 0x01, 0x02}));
  EXPECT_TRUE(data::read_idx(dir / "i16").equal(tensor(std::vector<int32_t>{-2, 258})));
  write_bytes(dir / "i32", idx_bytes(0x0C, {1}, {0x01, 0x02, 0x03, 0x04}));
  EXPECT_EQ(data::read_idx(dir / "i32").item<int64_t>(), 0x01020304);
}

TEST(DataIdx, RejectsBadMagicAndTypes) {
  TempDir dir;
  std::string p = dir / "bad";
  write_bytes(p, {0x50, 0x4B, 0x03, 0x04, 1, 2, 3, 4});  // a zip file
  expect_io_error([&] { data::read_idx(p); }, {p, "bad magic number 0x504B0304"});
  write_bytes(p, idx_bytes(0x07, {1}, {0}));
  expect_io_error([&] { data::read_idx(p); }, {p, "unknown element type 0x07"});
  write_bytes(p, idx_bytes(0x08, {}, {}));
  expect_io_error([&] { data::read_idx(p); }, {p, "declares 0 dims"});
  write_bytes(p, {0, 0, 8, 200});
  expect_io_error([&] { data::read_idx(p); }, {p, "declares 200 dims"});
  write_bytes(p, {});
  expect_io_error([&] { data::read_idx(p); }, {p, "truncated: 0 bytes"});
  write_bytes(p, {0, 0});
  expect_io_error([&] { data::read_idx(p); }, {p, "truncated"});
  expect_io_error([&] { data::read_idx(dir / "missing"); }, {dir / "missing", "cannot open"});
  expect_io_error([&] { data::read_idx(dir.str()); }, {dir.str()});
}

TEST(DataIdx, RejectsTruncatedAndOversizedFiles) {
  TempDir dir;
  std::string p = dir / "images";
  // The header is cut inside the dims.
  write_bytes(p, {0, 0, 8, 3, 0, 0, 0xEA, 0x60, 0, 0});
  expect_io_error([&] { data::read_idx(p); }, {p, "truncated inside the header", "3 dims need 12 bytes", "has 6"});
  // 60000 x 28 x 28 declared, 1000 bytes present: an error before any large allocation.
  std::vector<uint8_t> payload(1000, 7);
  auto bytes = idx_bytes(0x08, {60000, 28, 28}, payload);
  write_bytes(p, bytes);
  expect_io_error([&] { data::read_idx(p); },
                  {p, "truncated", "60000 x 28 x 28 u8 (47040000 bytes of data)", "only 1000 bytes"});
  // The same, gzip-compressed: 1039 bytes of gzip cannot hold 47 MB (deflate expands at most
  // 1032 times), an error before anything is allocated or decompressed.
  write_bytes(p, gzip_stored(bytes));
  expect_io_error(
      [&] { data::read_idx(p); },
      {p, "47040000 bytes of data", "a gzip file of 1039 bytes cannot hold that much", "decompression bomb"});
  write_bytes(p, gzip_stored(idx_bytes(0x08, {0xFFFFu, 0xFFFFu}, std::vector<uint8_t>(70000, 1))));
  expect_io_error([&] { data::read_idx(p); }, {p, "4294836225 bytes of data", "cannot hold that much"});
  // A plausible size that the decompressed data falls short of.
  write_bytes(p, gzip_stored(idx_bytes(0x08, {3000}, std::vector<uint8_t>(1000, 1))));
  expect_io_error([&] { data::read_idx(p); },
                  {p, "truncated", "3000 bytes of data", "decompressed file has only 1000 bytes"});
  std::vector<uint8_t> small_plain = idx_bytes(0x08, {10}, std::vector<uint8_t>(10, 1));
  auto gz = gzip_bytes(dir, idx_bytes(0x08, {1000}, std::vector<uint8_t>(1000, 3)));
  // Trailing bytes after the declared data.
  auto extra = small_plain;
  extra.push_back(0);
  write_bytes(p, extra);
  expect_io_error([&] { data::read_idx(p); }, {p, "1 unexpected bytes"});
  write_bytes(p, gzip_stored(extra));
  expect_io_error([&] { data::read_idx(p); }, {p, "more bytes after it"});
  // A hand-made stored gzip of a valid file reads back.
  write_bytes(p, gzip_stored(small_plain));
  EXPECT_TRUE(data::read_idx(p).equal(full({10}, 1, kUInt8)));
  // A truncated gzip stream.
  auto cut = std::vector<uint8_t>(gz.begin(), gz.begin() + static_cast<long>(gz.size() / 2));
  write_bytes(p, cut);
  expect_io_error([&] { data::read_idx(p); }, {p, "truncated"});
  // Corrupt compressed data.
  auto corrupt = gz;
  for (size_t i = 12; i < corrupt.size() - 8; ++i) corrupt[i] ^= 0x5A;
  write_bytes(p, corrupt);
  expect_io_error([&] { data::read_idx(p); }, {p});
}

// A gzip file declaring 1 GiB once took 2.2 GB (a buffer of the raw data and the tensor). The
// data is now decompressed straight into the tensor: reading a 256 MB gzip bomb (a valid file of
// zeros, 250 KB compressed) takes the tensor's 256 MB, not twice that.
TEST(DataIdx, GzipDataGoesStraightIntoTheTensor) {
#ifdef NABLA_ASAN
  GTEST_SKIP() << "AddressSanitizer's allocator changes resident memory";
#else
  TempDir dir;
  const std::string p = dir / "bomb.idx.gz";
  const uint64_t n = uint64_t(256) << 20;  // 16384 x 16384 u8
  {
    std::vector<uint8_t> header = idx_bytes(0x08, {16384, 16384}, {});
    z_stream zs{};
    ASSERT_EQ(deflateInit2(&zs, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
    std::ofstream f(p, std::ios::binary);
    std::vector<uint8_t> zeros(1 << 20, 0), out(1 << 20);
    auto pump = [&](const uint8_t* in, size_t len, int flush) {
      zs.next_in = const_cast<Bytef*>(in);
      zs.avail_in = static_cast<uInt>(len);
      do {
        zs.next_out = out.data();
        zs.avail_out = static_cast<uInt>(out.size());
        deflate(&zs, flush);
        f.write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(out.size() - zs.avail_out));
      } while (zs.avail_out == 0);
    };
    pump(header.data(), header.size(), Z_NO_FLUSH);
    for (uint64_t done = 0; done < n; done += zeros.size()) pump(zeros.data(), zeros.size(), Z_NO_FLUSH);
    pump(nullptr, 0, Z_FINISH);
    deflateEnd(&zs);
  }
  EXPECT_LT(std::filesystem::file_size(p), 1u << 20);
  // In a child process, whose peak resident memory starts at its current size.
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::ifstream statm("/proc/self/statm");
    long size = 0, resident = 0;
    statm >> size >> resident;
    const double before_mb = static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGESIZE)) / 1048576.0;
    Tensor t = data::read_idx(p);
    bool ok = t.numel() == static_cast<int64_t>(n) && t.data_ptr<uint8_t>()[n - 1] == 0;
    rusage ru{};
    ::getrusage(RUSAGE_SELF, &ru);
    const double peak_mb = static_cast<double>(ru.ru_maxrss) / 1024.0;
    std::printf("read_idx of a 256 MB gzip bomb: peak resident memory grew by %.0f MB\n", peak_mb - before_mb);
    std::fflush(stdout);
    ::_exit(!ok ? 2 : peak_mb - before_mb < 256 * 1.2 ? 0 : 3);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_NE(WEXITSTATUS(status), 2) << "wrong contents";
  EXPECT_NE(WEXITSTATUS(status), 3) << "the peak memory was over 1.2 times the tensor";
  EXPECT_EQ(WEXITSTATUS(status), 0);
#endif
}

TEST(DataIdx, RejectsOverflowingDims) {
  TempDir dir;
  std::string p = dir / "huge";
  write_bytes(p, idx_bytes(0x08, {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu}, {1, 2, 3}));
  expect_io_error([&] { data::read_idx(p); }, {p, "4294967295 x 4294967295 x 4294967295 overflow"});
  write_bytes(p, idx_bytes(0x0E, {0x80000000u, 0x80000000u}, {}));  // 2^62 doubles: the byte count overflows
  expect_io_error([&] { data::read_idx(p); }, {p, "overflow"});
  write_bytes(p, idx_bytes(0x08, {65536, 65536, 65536}, {1}));  // 2^48 bytes: fits, but over the limit
  expect_io_error([&] { data::read_idx(p); }, {p, "281474976710656 bytes, more than the limit"});
  write_bytes(p, idx_bytes(0x08, {100, 100}, std::vector<uint8_t>(10000)));
  expect_io_error([&] { data::read_idx(p, {.max_bytes = 9999}); }, {p, "more than the limit of 9999"});
}

// ---- MNIST and Fashion-MNIST --------------------------------------------------------------------
namespace {
// A tiny MNIST-format dataset: n images of h x w with pixel (i, r, c) = (i * 7 + r * w + c) % 256.
void write_mnist(const std::string& root, const std::string& prefix, int64_t n, int64_t h, int64_t w,
                 std::vector<uint8_t> labels, bool gz) {
  std::filesystem::create_directories(root);
  Tensor images = empty({n, h, w}, kUInt8);
  auto* px = images.data_ptr<uint8_t>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < h * w; ++k) px[i * h * w + k] = static_cast<uint8_t>((i * 7 + k) % 256);
  std::string ext = gz ? ".gz" : "";
  data::write_idx(root + "/" + prefix + "-images-idx3-ubyte" + ext, images, gz);
  data::write_idx(root + "/" + prefix + "-labels-idx1-ubyte" + ext, tensor(labels, kUInt8).to(kUInt8), gz);
}
}  // namespace

TEST(DataMNIST, LoadsGeneratedFilesPlainAndGzip) {
  TempDir dir;
  write_mnist(dir / "plain", "train", 5, 4, 3, {3, 1, 4, 1, 5}, false);
  write_mnist(dir / "gz", "t10k", 5, 4, 3, {9, 2, 6, 5, 3}, true);
  data::MNIST train(dir / "plain", data::Split::train);
  EXPECT_EQ(train.size(), 5);
  EXPECT_EQ(train.images().sizes(), (Shape{5, 1, 4, 3}));
  auto e = train.get(2);
  EXPECT_EQ(e.data.sizes(), (Shape{1, 4, 3}));
  EXPECT_EQ(e.data.dtype(), kFloat32);
  EXPECT_FLOAT_EQ(e.data.flatten()[5].item<float>(), static_cast<float>(2 * 7 + 5) / 255.f);
  EXPECT_EQ(e.target.dtype(), kInt64);
  EXPECT_EQ(e.target.item<int64_t>(), 4);
  // The fast batch path equals stacking single examples.
  std::vector<int64_t> idx = {4, 0, 2};
  auto b = train.get_batch(idx);
  EXPECT_TRUE(b.data.equal(stack({train.get(4).data, train.get(0).data, train.get(2).data})));
  EXPECT_TRUE(b.target.equal(tensor(std::vector<int64_t>{5, 3, 4})));
  try {
    train.get(5);
    ADD_FAILURE() << "expected IndexError";
  } catch (const IndexError& e) { EXPECT_STREQ(e.what(), "MNIST: index 5 is out of range for 5 examples"); }

  data::FashionMNIST test(dir / "gz", data::Split::test, data::Normalize({0.5}, {0.5}));
  EXPECT_EQ(test.size(), 5);
  EXPECT_EQ(test.classes()[9], "Ankle boot");
  EXPECT_FLOAT_EQ(test.get(0).data.flatten()[0].item<float>(), -1.f);  // (0 - 0.5) / 0.5
  EXPECT_EQ(test.get(0).target.item<int64_t>(), 9);
  auto tb = test.get_batch(idx);  // with a transform: example by example
  EXPECT_TRUE(tb.data.equal(stack({test.get(4).data, test.get(0).data, test.get(2).data})));
}

TEST(DataMNIST, RejectsBadFiles) {
  TempDir dir;
  expect_io_error([&] { data::MNIST m(dir.str()); }, {"MNIST: cannot find", "train-images-idx3-ubyte", "get-data.sh"});
  write_mnist(dir / "labels", "train", 4, 2, 2, {1, 2, 10, 3}, false);
  expect_io_error([&] { data::MNIST m(dir / "labels"); },
                  {"MNIST", dir / "labels/train-labels-idx1-ubyte", "label 10 at index 2 is out of range [0, 10)"});
  write_mnist(dir / "count", "train", 4, 2, 2, {1, 2, 3}, false);
  expect_io_error([&] { data::MNIST m(dir / "count"); }, {"has 3 labels but", "has 4 images"});
  write_mnist(dir / "dims", "train", 2, 2, 2, {1, 2}, false);
  data::write_idx(dir / "dims/train-images-idx3-ubyte", zeros({2, 4}, kUInt8));
  expect_io_error([&] { data::MNIST m(dir / "dims"); }, {dir / "dims/train-images-idx3-ubyte", "expected 3 dims"});
  data::write_idx(dir / "dims/train-images-idx3-ubyte", zeros({2, 2, 2}, kFloat32));
  expect_io_error([&] { data::MNIST m(dir / "dims"); }, {"expected u8 pixels"});
  data::write_idx(dir / "dims/train-images-idx3-ubyte", zeros({0, 2, 2}, kUInt8));
  expect_io_error([&] { data::MNIST m(dir / "dims"); }, {"holds no images"});
  // A hostile file inside a dataset: the IDX error, prefixed with the dataset.
  write_bytes(dir / "dims/train-images-idx3-ubyte", idx_bytes(0x08, {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu}, {}));
  expect_io_error([&] { data::MNIST m(dir / "dims"); }, {"MNIST: IDX file", "overflow"});
}

// An images file whose header declares 1,048,576 images (a valid gzip file of 822 MB of
// zeros, 0.9 MB) next to a labels file of 10,000 was decompressed before the counts were compared.
// The headers are compared first: the error comes at once, in a child whose peak memory is measured.
TEST(DataMNIST, ComparesTheHeadersBeforeReadingEither) {
  TempDir dir;
  const std::string images = dir / "train-images-idx3-ubyte.gz";
  {
    // Gzip members one after another (zlib reads them as one stream): the header, then 256 KB of
    // zeros at a time, the same member each time.
    auto member = [](const std::vector<uint8_t>& plain) {
      z_stream zs{};
      deflateInit2(&zs, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
      std::vector<uint8_t> out(deflateBound(&zs, static_cast<uLong>(plain.size())) + 64);
      zs.next_in = const_cast<Bytef*>(plain.data());
      zs.avail_in = static_cast<uInt>(plain.size());
      zs.next_out = out.data();
      zs.avail_out = static_cast<uInt>(out.size());
      deflate(&zs, Z_FINISH);
      out.resize(zs.total_out);
      deflateEnd(&zs);
      return out;
    };
    std::vector<uint8_t> file = member(idx_bytes(0x08, {1048576, 28, 28}, {}));
    const std::vector<uint8_t> zeros = member(std::vector<uint8_t>(256 << 10, 0));
    for (uint64_t done = 0; done < uint64_t(1048576) * 28 * 28; done += 256 << 10)
      file.insert(file.end(), zeros.begin(), zeros.end());
    write_bytes(images, file);
  }
  write_bytes(dir / "train-labels-idx1-ubyte", idx_bytes(0x08, {10000}, std::vector<uint8_t>(10000, 3)));
  EXPECT_GT(std::filesystem::file_size(images), uint64_t(1048576) * 28 * 28 / 1032)
      << "a file that can hold what it declares";
  const data::IdxInfo info = data::read_idx_info(images);
  EXPECT_EQ(info.dims, (std::vector<int64_t>{1048576, 28, 28}));
  EXPECT_EQ(info.dtype, kUInt8);
  EXPECT_EQ(info.type, "u8");
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::ifstream statm("/proc/self/statm");
    long size = 0, resident = 0;
    statm >> size >> resident;
    const double before_mb = static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGESIZE)) / 1048576.0;
    const auto t0 = std::chrono::steady_clock::now();
    int code = 0;
    try {
      data::MNIST m(dir.str());
      code = 2;
    } catch (const IOError& e) {
      const std::string msg = e.what();
      code = msg.find("has 10000 labels but '" + images + "' has 1048576 images (compared from the headers") !=
                     std::string::npos
                 ? 0
                 : 3;
      if (code) std::printf("message: %s\n", msg.c_str());
    }
    rusage ru{};
    ::getrusage(RUSAGE_SELF, &ru);
    const double peak_mb = static_cast<double>(ru.ru_maxrss) / 1024.0;
    std::printf("MNIST with 1,048,576 images declared and 10,000 labels: an error in %.1f ms, peak memory +%.1f MB\n",
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(),
                peak_mb - before_mb);
    std::fflush(stdout);
#ifdef NABLA_ASAN
    const bool measured = false;  // AddressSanitizer's allocator changes resident memory
#else
    const bool measured = true;
#endif
    ::_exit(code ? code : peak_mb - before_mb < 100 || !measured ? 0 : 4);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_NE(WEXITSTATUS(status), 2) << "loaded";
  EXPECT_NE(WEXITSTATUS(status), 3) << "not the error of the counts";
  EXPECT_NE(WEXITSTATUS(status), 4) << "the peak memory was over 100 MB";
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(DataMNIST, RealFilesWhenPresent) {
  std::string root = repo_data_dir("NABLA_MNIST_DIR", "mnist");
  if (!std::filesystem::exists(root + "/train-images-idx3-ubyte") &&
      !std::filesystem::exists(root + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "MNIST is not in " << root << " (run scripts/get-data.sh)";
  data::MNIST train(root, data::Split::train), test(root, data::Split::test);
  EXPECT_EQ(train.size(), 60000);
  EXPECT_EQ(test.size(), 10000);
  EXPECT_EQ(train.get(0).target.item<int64_t>(), 5);
  EXPECT_EQ(test.get(0).target.item<int64_t>(), 7);
  EXPECT_EQ(train.images().sizes(), (Shape{60000, 1, 28, 28}));
  EXPECT_FLOAT_EQ(train.get(0).data.max().item<float>(), 1.f);
  // Label counts of the training set (a well-known histogram).
  Tensor counts = zeros({10}, kInt64).scatter_add(0, train.targets(), ones({60000}, kInt64));
  EXPECT_TRUE(counts.equal(tensor(std::vector<int64_t>{5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949})));

  // One epoch, batch 64, shuffled, no model: timed for the report (tests never assert times).
  for (int workers : {0, 2}) {
    data::DataLoader loader(train, {.batch_size = 64, .shuffle = true, .seed = 1, .num_workers = workers});
    auto t0 = std::chrono::steady_clock::now();
    int64_t n = 0;
    double checksum = 0;
    for (auto& batch : loader) {
      n += batch.data.size(0);
      checksum += static_cast<double>(batch.target[0].item<int64_t>());
    }
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(n, 60000);
    std::printf("[ timing ] MNIST train epoch, batch 64, shuffle, %d workers: %.1f ms (%lld batches)\n", workers, ms,
                static_cast<long long>(loader.size()));
  }
}

TEST(DataMNIST, RealFashionWhenPresent) {
  std::string root = "/usr/share/datasets/fashion-mnist";
  if (!std::filesystem::exists(root + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST is not in " << root << " (apt-get install dataset-fashion-mnist)";
  data::FashionMNIST train(root), test(root, data::Split::test);
  EXPECT_EQ(train.size(), 60000);
  EXPECT_EQ(test.size(), 10000);
  EXPECT_EQ(train.get(0).target.item<int64_t>(), 9);  // an ankle boot
  EXPECT_EQ(test.get(0).target.item<int64_t>(), 9);
}

// ---- CIFAR-10 -----------------------------------------------------------------------------------
namespace {
std::vector<uint8_t> cifar_records(int n, int first_label) {
  std::vector<uint8_t> bytes;
  for (int r = 0; r < n; ++r) {
    bytes.push_back(static_cast<uint8_t>((first_label + r) % 10));
    for (int k = 0; k < 3072; ++k) bytes.push_back(static_cast<uint8_t>((r * 31 + k) % 251));
  }
  return bytes;
}
}  // namespace

TEST(DataCIFAR, LoadsGeneratedBatches) {
  TempDir dir;
  std::string bin = dir / "cifar-10-batches-bin";
  for (int k = 1; k <= 5; ++k) write_bytes(bin + "/data_batch_" + std::to_string(k) + ".bin", cifar_records(2, k));
  write_bytes(bin + "/test_batch.bin", cifar_records(3, 7));
  data::CIFAR10 train(dir.str()), test(bin, data::Split::test);
  EXPECT_EQ(train.size(), 10);
  EXPECT_EQ(test.size(), 3);
  EXPECT_EQ(train.classes()[0], "airplane");
  auto e = test.get(1);
  EXPECT_EQ(e.data.sizes(), (Shape{3, 32, 32}));
  EXPECT_EQ(e.target.item<int64_t>(), 8);
  // Record 1, channel 1 (green), row 2, col 3: byte 1024 + 2 * 32 + 3 of the pixels.
  EXPECT_FLOAT_EQ(e.data.index({1, 2, 3}).item<float>(), static_cast<float>((31 + 1024 + 67) % 251) / 255.f);
  EXPECT_EQ(train.get(9).target.item<int64_t>(), 6);  // batch 5, record 1: label (5 + 1) % 10

  write_bytes(bin + "/test_batch.bin", std::vector<uint8_t>(3073 * 2 + 5));
  expect_io_error([&] { data::CIFAR10 c(bin, data::Split::test); },
                  {bin + "/test_batch.bin", "not a positive multiple"});
  auto bad = cifar_records(2, 0);
  bad[3073] = 10;
  write_bytes(bin + "/test_batch.bin", bad);
  expect_io_error([&] { data::CIFAR10 c(bin, data::Split::test); }, {"label 10 of record 1 is out of range"});
  expect_io_error([&] { data::CIFAR10 c(dir / "nowhere"); }, {"cannot find", "data_batch_1.bin"});
}

// ---- image files --------------------------------------------------------------------------------
namespace {
// u8 (h, w, c) with a recognizable pattern.
Tensor pattern_image(int64_t h, int64_t w, int64_t c) {
  Tensor img = empty({h, w, c}, kUInt8);
  auto* p = img.data_ptr<uint8_t>();
  for (int64_t i = 0; i < h * w * c; ++i) p[i] = static_cast<uint8_t>((i * 37 + 11) % 256);
  return img;
}
}  // namespace

TEST(DataImage, PngAndBmpRoundTrip) {
  TempDir dir;
  for (int64_t c : {1, 3, 4}) {
    Tensor img = pattern_image(5, 7, c);
    data::save_image(dir / "a.png", img);
    Tensor back = data::load_image(dir / "a.png");
    EXPECT_TRUE(back.equal(img)) << c << " channels";
    auto info = data::image_info(dir / "a.png");
    EXPECT_EQ(info.width, 7);
    EXPECT_EQ(info.height, 5);
    EXPECT_EQ(info.channels, c);
  }
  Tensor rgb = pattern_image(6, 4, 3);
  data::save_image(dir / "b.BMP", rgb);
  EXPECT_TRUE(data::load_image(dir / "b.BMP", 3).equal(rgb));
  // Channel conversion: RGB -> gray (stb's weights), gray -> RGB, and the (H, W) form.
  Tensor gray = data::load_image_gray(dir / "b.BMP");
  EXPECT_EQ(gray.sizes(), (Shape{6, 4}));
  EXPECT_TRUE(data::load_image(dir / "b.BMP", 1).squeeze(2).equal(gray));
  int r = rgb.index({0, 0, 0}).item<int>(), g = rgb.index({0, 0, 1}).item<int>(), b = rgb.index({0, 0, 2}).item<int>();
  EXPECT_EQ(gray.index({0, 0}).item<int>(), (r * 77 + g * 150 + 29 * b) >> 8);
  data::save_image(dir / "g.png", gray);
  Tensor rgb_again = data::load_image(dir / "g.png", 3);
  EXPECT_TRUE(rgb_again.select(2, 1).equal(gray));
  // JPEG is lossy: a smooth image comes back close.
  Tensor smooth = arange(0, 64, 1, kInt64).view({8, 8, 1}).mul(3).to(kUInt8).expand({8, 8, 3}).contiguous();
  data::save_image(dir / "c.jpg", smooth, 100);
  Tensor jpg = data::load_image(dir / "c.jpg", 3);
  EXPECT_LE((jpg.to(kFloat32) - smooth.to(kFloat32)).abs().max().item<float>(), 12.f);
  EXPECT_THROW(data::save_image(dir / "d.gif", rgb), ValueError);
  EXPECT_THROW(data::save_image(dir / "d.png", rgb.to(kFloat32)), DTypeError);
}

TEST(DataImage, CorruptFilesAreClearErrors) {
  TempDir dir;
  data::save_image(dir / "ok.png", pattern_image(16, 16, 3));
  auto png = read_bytes(dir / "ok.png");
  write_bytes(dir / "garbage.png", std::vector<uint8_t>(100, 0x42));
  expect_io_error([&] { data::load_image(dir / "garbage.png"); },
                  {dir / "garbage.png", "not a readable PNG, JPEG or BMP"});
  write_bytes(dir / "empty.png", {});
  expect_io_error([&] { data::load_image(dir / "empty.png"); }, {dir / "empty.png", "empty"});
  expect_io_error([&] { data::load_image(dir / "missing.png"); }, {dir / "missing.png"});
  // Cut in the middle of the pixel data: the header parses, decoding fails.
  write_bytes(dir / "cut.png", std::vector<uint8_t>(png.begin(), png.begin() + static_cast<long>(png.size() / 2)));
  expect_io_error([&] { data::load_image(dir / "cut.png"); }, {dir / "cut.png", "cannot decode"});
  // A header declaring 10000 x 10000 pixels is refused before decoding (over max_pixels)...
  auto huge = png;
  auto set_png_size = [&](uint32_t v) {
    for (int k = 0; k < 2; ++k)
      for (int j = 0; j < 4; ++j) huge[static_cast<size_t>(16 + 4 * k + j)] = static_cast<uint8_t>(v >> (24 - 8 * j));
  };
  set_png_size(10000);
  write_bytes(dir / "huge.png", huge);
  expect_io_error([&] { data::load_image(dir / "huge.png"); },
                  {dir / "huge.png", "10000x10000 pixels, over the limit"});
  // ... read from IHDR before libpng sees the file (whose CRC, not updated here, is wrong).
  set_png_size(100000);
  write_bytes(dir / "huge.png", huge);
  expect_io_error([&] { data::load_image(dir / "huge.png"); },
                  {dir / "huge.png", "100000x100000 pixels, over the limit"});
  // Within the limits, the wrong CRC is libpng's error.
  set_png_size(20);
  write_bytes(dir / "crc.png", huge);
  expect_io_error([&] { data::load_image(dir / "crc.png"); },
                  {dir / "crc.png", "looks like a PNG file but its header is corrupt", "CRC error"});
  expect_io_error([&] { data::load_image(dir / "ok.png", 0, {.max_width = 8}); },
                  {"16x16 pixels, over the limit of 8x16384"});
  EXPECT_THROW(data::load_image(dir / "ok.png", 5), ValueError);
}

// ---- ImageFolder --------------------------------------------------------------------------------
TEST(DataImageFolder, ReadsATreeOfImages) {
  TempDir dir;
  std::string root = dir / "tree";
  std::filesystem::create_directories(root + "/dog/sub");
  std::filesystem::create_directories(root + "/cat");
  std::filesystem::create_directories(root + "/.cache");
  Tensor a = pattern_image(4, 4, 3), b = pattern_image(4, 6, 3), c = pattern_image(5, 5, 3);
  data::save_image(root + "/cat/b.png", b);
  data::save_image(root + "/cat/a.PNG", a);
  data::save_image(root + "/dog/sub/c.bmp", c);
  data::save_image(root + "/dog/d.jpg", pattern_image(8, 8, 3));
  data::save_image(root + "/.cache/x.png", a);
  write_bytes(root + "/dog/notes.txt", {'h', 'i'});

  data::ImageFolder folder(root);
  EXPECT_EQ(folder.classes(), (std::vector<std::string>{"cat", "dog"}));
  ASSERT_EQ(folder.size(), 4);
  EXPECT_EQ(folder.samples()[0].first, root + "/cat/a.PNG");
  EXPECT_EQ(folder.samples()[1].first, root + "/cat/b.png");
  EXPECT_EQ(folder.samples()[2].first, root + "/dog/d.jpg");
  EXPECT_EQ(folder.samples()[3].first, root + "/dog/sub/c.bmp");
  auto e = folder.get(1);
  EXPECT_EQ(e.target.item<int64_t>(), 0);
  EXPECT_TRUE(e.data.equal(data::to_tensor(b)));
  EXPECT_EQ(folder.get(3).target.item<int64_t>(), 1);
  EXPECT_TRUE(folder.get(3).data.equal(data::to_tensor(c)));

  // Different sizes: a Resize in the transform makes them batchable; one channel on request.
  data::ImageFolder gray(root, {.channels = 1, .transform = data::Resize(3, 3)});
  data::DataLoader loader(gray, {.batch_size = 4, .num_workers = 2});
  int batches = 0;
  for (auto& batch : loader) {
    EXPECT_EQ(batch.data.sizes(), (Shape{4, 1, 3, 3}));
    EXPECT_TRUE(batch.target.equal(tensor(std::vector<int64_t>{0, 0, 1, 1})));
    ++batches;
  }
  EXPECT_EQ(batches, 1);

  // A corrupt image is an IOError naming it, also through DataLoader workers.
  write_bytes(root + "/dog/e.png", std::vector<uint8_t>(64, 1));
  data::ImageFolder broken(root, {.transform = data::Resize(3, 3)});
  expect_io_error([&] { broken.get(3); }, {root + "/dog/e.png"});
  data::DataLoader broken_loader(broken, {.batch_size = 2, .num_workers = 2});
  expect_io_error(
      [&] {
        for (auto& batch : broken_loader) (void)batch;
      },
      {root + "/dog/e.png"});

  std::filesystem::create_directories(root + "/empty");
  expect_io_error([&] { data::ImageFolder f(root); }, {root + "/empty", "has no images"});
  EXPECT_EQ(data::ImageFolder(root, {.allow_empty = true}).classes().size(), 3u);
  expect_io_error([&] { data::ImageFolder f(dir / "nope"); }, {"is not a directory"});
  expect_io_error([&] { data::ImageFolder f(root + "/cat"); }, {"no class folders"});
}
