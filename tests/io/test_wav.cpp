// WAV files (io/wav.h): bit-exact round trips of every format and channel count, the header
// nabla writes, files written by Python's wave module, soundfile (libsndfile) and sox, and the
// malformed headers the reader must refuse or tolerate (the hostile files of tests/hostile/wav/
// are checked in test_hostile_files.cpp).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "nabla.h"
#include "tests/common/python_torch.h"
#include "tests/common/value_helpers.h"
#include "tests/data/data_util.h"

using namespace nabla;
using nabla::testing::throws_with;
using nabla_test::read_bytes;
using nabla_test::TempDir;
using nabla_test::write_bytes;
using Bytes = std::vector<uint8_t>;

namespace {

struct Format {
  wav::Encoding encoding;
  int64_t bits;
};
const Format kFormats[] = {{wav::Encoding::pcm_u, 8},  {wav::Encoding::pcm_s, 16}, {wav::Encoding::pcm_s, 24},
                           {wav::Encoding::pcm_s, 32}, {wav::Encoding::pcm_f, 32}, {wav::Encoding::pcm_f, 64}};

// Random samples in the native dtype and range of a format (24-bit: multiples of 256).
Tensor native_samples(const Format& f, int64_t frames, int64_t channels) {
  const Shape s{frames, channels};
  if (f.encoding == wav::Encoding::pcm_f) return randn(s, f.bits == 64 ? kFloat64 : kFloat32);
  if (f.bits == 8) return randint(0, 256, s).to(kUInt8);
  if (f.bits == 16) return randint(-32768, 32768, s).to(kInt32);
  if (f.bits == 24) return (randint(-(1 << 23), 1 << 23, s) * 256).to(kInt32);
  Tensor t = randint(-(int64_t(1) << 31), int64_t(1) << 31, s).to(kInt32);
  t.narrow(0, 0, 1).fill_(std::numeric_limits<int32_t>::min());  // the extremes survive too
  return t;
}

void put16(Bytes& b, uint32_t v) {
  b.push_back(static_cast<uint8_t>(v));
  b.push_back(static_cast<uint8_t>(v >> 8));
}
void put32(Bytes& b, uint32_t v) {
  put16(b, v & 0xFFFF);
  put16(b, v >> 16);
}
void chunk(Bytes& b, const char* id, const Bytes& body, uint32_t declared = 0xFFFFFFFFu) {
  b.insert(b.end(), id, id + 4);
  put32(b, declared == 0xFFFFFFFFu ? static_cast<uint32_t>(body.size()) : declared);
  b.insert(b.end(), body.begin(), body.end());
}
Bytes fmt(uint16_t tag, uint16_t channels, uint32_t rate, uint16_t bits, int block_align = -1) {
  Bytes f;
  const uint16_t block =
      block_align < 0 ? static_cast<uint16_t>(channels * bits / 8) : static_cast<uint16_t>(block_align);
  put16(f, tag);
  put16(f, channels);
  put32(f, rate);
  put32(f, rate * block);
  put16(f, block);
  put16(f, bits);
  return f;
}
Bytes riff(const Bytes& chunks, uint32_t declared = 0xFFFFFFFFu) {
  Bytes b = {'R', 'I', 'F', 'F'};
  put32(b, declared == 0xFFFFFFFFu ? static_cast<uint32_t>(4 + chunks.size()) : declared);
  b.insert(b.end(), {'W', 'A', 'V', 'E'});
  b.insert(b.end(), chunks.begin(), chunks.end());
  return b;
}

}  // namespace

TEST(Wav, RoundTripsEveryFormatAndChannelCountBitExactly) {
  TempDir dir;
  manual_seed(46);
  for (const Format& f : kFormats)
    for (int64_t channels : {1, 2, 3, 6}) {
      SCOPED_TRACE(std::string(wav::encoding_name(f.encoding)) + " " + std::to_string(f.bits) + " bits, " +
                   std::to_string(channels) + " channels");
      const Tensor x = native_samples(f, 37, channels);
      const std::string path = dir / "x.wav";
      wav::write(path, x, 22050, f.encoding, f.bits);
      const wav::Info i = wav::read_info(path);
      EXPECT_EQ(i.sample_rate, 22050);
      EXPECT_EQ(i.num_frames, 37);
      EXPECT_EQ(i.num_channels, channels);
      EXPECT_EQ(i.bits_per_sample, f.bits);
      EXPECT_EQ(i.encoding, f.encoding);
      const wav::Samples back = wav::read(path);
      ASSERT_EQ(back.samples.dtype(), x.dtype());
      ASSERT_EQ(back.samples.sizes(), x.sizes());
      EXPECT_EQ(std::memcmp(back.samples.data_ptr(), x.data_ptr(), x.nbytes()), 0);
      // A window of frames, and one running past the end (cut there, as torchaudio).
      EXPECT_TRUE(equal(wav::read(path, 5, 10).samples, x.narrow(0, 5, 10)));
      EXPECT_TRUE(equal(wav::read(path, 30, 100).samples, x.narrow(0, 30, 7)));
      EXPECT_EQ(wav::read(path, 99).samples.size(0), 0);
      // The header: plain PCM/float up to two channels and 16 bits, extensible beyond.
      const Bytes b = read_bytes(path);
      const uint16_t tag = static_cast<uint16_t>(b[20] | (b[21] << 8));
      const bool extensible = channels > 2 || f.bits > 16;
      EXPECT_EQ(tag, extensible ? 0xFFFE : f.encoding == wav::Encoding::pcm_f ? 3 : 1);
    }
}

TEST(Wav, WriterChecksItsArguments) {
  TempDir dir;
  const std::string p = dir / "x.wav";
  EXPECT_TRUE(throws_with<DTypeError>(
      [&] {
        wav::write(p, zeros({4, 1}), 8000, wav::Encoding::pcm_s, 16);
      },
      {"PCM_S takes int32", "float32"}));
  EXPECT_TRUE(throws_with<ValueError>(
      [&] {
        wav::write(p, zeros({4, 1}), 8000, wav::Encoding::pcm_f, 16);
      },
      {"PCM_F with 16 bits"}));
  EXPECT_TRUE(throws_with<ValueError>(
      [&] {
        wav::write(p, full({4, 1}, 40000, kInt32), 8000, wav::Encoding::pcm_s, 16);
      },
      {"40000", "16-bit"}));
  EXPECT_TRUE(throws_with<ShapeError>([&] { wav::write(p, zeros({4}), 8000, wav::Encoding::pcm_f, 32); }, {"[4]"}));
  EXPECT_TRUE(throws_with<ValueError>(
      [&] {
        wav::write(p, zeros({4, 1}), 0, wav::Encoding::pcm_f, 32);
      },
      {"sample_rate 0"}));
  EXPECT_FALSE(std::filesystem::exists(p));  // nothing written, no temporary left
  EXPECT_TRUE(std::filesystem::is_empty(dir.str()));
}

TEST(Wav, ToleratesWhatLibsndfileTolerates) {
  TempDir dir;
  const std::string p = dir / "x.wav";
  Bytes data = {1, 0, 2, 0, 3, 0};
  // An odd-sized unknown chunk (with its pad byte) before fmt, a wrong RIFF size, trailing junk.
  Bytes chunks;
  chunk(chunks, "LIST", {'a', 'b', 'c'});
  chunks.push_back(0);
  chunk(chunks, "fmt ", fmt(1, 1, 8000, 16));
  chunk(chunks, "data", data);
  chunks.insert(chunks.end(), {'j', 'u'});
  write_bytes(p, riff(chunks, 12345));
  wav::Samples s = wav::read(p);
  EXPECT_EQ(nabla::testing::int_values(s.samples), (std::vector<int64_t>{1, 2, 3}));
  // A data chunk declaring more than the file holds: the whole frames present (a half frame dropped).
  chunks.clear();
  chunk(chunks, "fmt ", fmt(1, 1, 8000, 16));
  chunk(chunks, "data", {1, 0, 2, 0, 3}, 0xFFFFFFF0u);
  write_bytes(p, riff(chunks));
  s = wav::read(p);
  EXPECT_EQ(s.info.num_frames, 2);
  EXPECT_EQ(nabla::testing::int_values(s.samples), (std::vector<int64_t>{1, 2}));
  // WAVE_FORMAT_EXTENSIBLE with a 20-bit valid width in 24-bit containers: read as 24-bit.
  Bytes ext = fmt(0xFFFE, 1, 8000, 24);
  put16(ext, 22);
  put16(ext, 20);
  put32(ext, 4);
  put16(ext, 1);
  ext.insert(ext.end(), {0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71});
  chunks.clear();
  chunk(chunks, "fmt ", ext);
  chunk(chunks, "data", {0x00, 0x10, 0x80});
  write_bytes(p, riff(chunks));
  s = wav::read(p);
  EXPECT_EQ(s.info.encoding, wav::Encoding::pcm_s);
  EXPECT_EQ(nabla::testing::int_values(s.samples), (std::vector<int64_t>{static_cast<int32_t>(0x80100000u)}));
}

TEST(Wav, RefusesMalformedHeadersNamingTheFile) {
  TempDir dir;
  const std::string p = dir / "bad.wav";
  auto refused = [&](const Bytes& bytes, std::initializer_list<std::string> words) {
    write_bytes(p, bytes);
    std::vector<std::string> all(words);
    all.push_back(p);
    EXPECT_TRUE(throws_with<IOError>([&] { wav::read(p); }, {all[0], p}));
    for (const auto& w : all) {
      try {
        wav::read_info(p);
        ADD_FAILURE() << "read_info accepted it: " << w;
      } catch (const IOError& e) { EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << e.what(); }
    }
  };
  const Bytes data = {0, 0, 0, 0};
  auto with = [&](const Bytes& f) {
    Bytes c;
    chunk(c, "fmt ", f);
    chunk(c, "data", data);
    return riff(c);
  };
  refused(with(fmt(1, 0, 8000, 16)), {"0 channels"});
  refused(with(fmt(1, 2, 0, 16)), {"sample rate of 0"});
  refused(with(fmt(1, 2, 8000, 16, 3)), {"block_align 3", "2 channels * 16 bits / 8 = 4"});
  refused(with(fmt(1, 1, 8000, 12)), {"PCM with 12 bits"});
  refused(with(fmt(3, 1, 8000, 16)), {"IEEE float with 16 bits"});
  refused(with(fmt(7, 1, 8000, 8)), {"format tag 7", "mu-law"});
  Bytes bad_guid = fmt(0xFFFE, 1, 8000, 16);
  put16(bad_guid, 22);
  put16(bad_guid, 16);
  put32(bad_guid, 0);
  bad_guid.resize(bad_guid.size() + 16, 0x11);
  refused(with(bad_guid), {"sub-format GUID 1111"});
  Bytes c;
  chunk(c, "data", data);
  refused(riff(c), {"no fmt chunk"});
  c.clear();
  chunk(c, "fmt ", fmt(1, 1, 8000, 16));
  refused(riff(c), {"no data chunk"});
  c.clear();
  chunk(c, "fmt ", Bytes(10, 0));
  refused(riff(c), {"fmt chunk has 10 bytes"});
  c.clear();
  chunk(c, "fmt ", fmt(1, 1, 8000, 16), 4000);
  refused(riff(c), {"chunk 'fmt ' at offset 12 declares 4000 bytes but only 16 remain"});
  refused({'R', 'I', 'F', 'F', 0, 0}, {"6 bytes"});
  refused({'R', 'I', 'F', 'X', 0, 0, 0, 0, 'W', 'A', 'V', 'E'}, {"'RIFX'"});
  refused({'O', 'g', 'g', 'S', 0, 0, 0, 0, 'W', 'A', 'V', 'E'}, {"starts with 'OggS'"});
  EXPECT_TRUE(throws_with<IOError>([&] { wav::read(dir / "missing.wav"); }, {"cannot open", "missing.wav"}));
  EXPECT_TRUE(throws_with<IOError>([&] { wav::read(dir.str()); }, {"not a regular file"}));
}

TEST(Wav, ReadsWhatPythonsWaveModuleWrites) {
  // Python's wave module writes PCM of 1-4 bytes per sample; the values are a ramp of known numbers.
  TempDir dir;
  const std::string script = R"(
import sys, wave
d = sys.argv[1]
for width in (1, 2, 3, 4):
    for ch in (1, 2, 5):
        w = wave.open(f"{d}/w{width}_{ch}.wav", "wb")
        w.setnchannels(ch); w.setsampwidth(width); w.setframerate(11025)
        frames = bytearray()
        for i in range(50 * ch):
            v = (i * 37 - 700) % (1 << (8 * width))      # two's complement bytes (8-bit: unsigned)
            frames += v.to_bytes(width, "little")
        w.writeframes(bytes(frames)); w.close()
)";
  write_bytes(dir / "make.py", Bytes(script.begin(), script.end()));
  ASSERT_EQ(std::system(("/usr/bin/python3 " + dir / "make.py" + " " + dir.str()).c_str()), 0);
  for (int width : {1, 2, 3, 4})
    for (int ch : {1, 2, 5}) {
      SCOPED_TRACE(std::to_string(width) + " bytes, " + std::to_string(ch) + " channels");
      wav::Samples s = wav::read(dir / ("w" + std::to_string(width) + "_" + std::to_string(ch) + ".wav"));
      EXPECT_EQ(s.info.sample_rate, 11025);
      ASSERT_EQ(s.samples.sizes(), Shape({50, ch}));
      const auto v = nabla::testing::int_values(s.samples);
      const int64_t mod = int64_t(1) << (8 * width);
      for (int64_t i = 0; i < 50 * ch; ++i) {
        int64_t want = ((i * 37 - 700) % mod + mod) % mod;
        if (width > 1 && want >= mod / 2) want -= mod;
        if (width == 3) want *= 256;
        ASSERT_EQ(v[static_cast<size_t>(i)], want) << i;
      }
    }
}

TEST(Wav, ReadsWhatSoundfileAndSoxWrite) {
  // libsndfile (python3-soundfile) and sox write WAVE_FORMAT_EXTENSIBLE for many channels or deep
  // samples, and float files with a fact chunk; both must read as the values written.
  if (!nabla_test::python_has("numpy, soundfile") || std::system("command -v sox >/dev/null 2>&1") != 0) {
    if (nabla_test::torch_required()) FAIL() << "needs python3-soundfile and sox (scripts/common.sh installs them)";
    GTEST_SKIP() << "needs python3-soundfile and sox";
  }
  TempDir dir;
  const std::string script = R"(
import subprocess, sys
import numpy as np, soundfile as sf
d = sys.argv[1]
x = (np.arange(240, dtype=np.float64).reshape(40, 6) / 240.0 - 0.5)
np.save(f"{d}/x.npy", x)
for sub in ("PCM_U8", "PCM_16", "PCM_24", "PCM_32", "FLOAT", "DOUBLE"):
    sf.write(f"{d}/sf_{sub}.wav", x, 16000, subtype=sub)
    sf.write(f"{d}/sf2_{sub}.wav", x[:, :2], 16000, subtype=sub)
for bits, enc in ((16, "signed-integer"), (24, "signed-integer"), (32, "floating-point"), (8, "unsigned-integer")):
    subprocess.check_call(["sox", "-D", f"{d}/sf_DOUBLE.wav", "-b", str(bits), "-e", enc, f"{d}/sox_{bits}.wav"])
)";
  write_bytes(dir / "make.py", Bytes(script.begin(), script.end()));
  ASSERT_EQ(std::system(("/usr/bin/python3 " + dir / "make.py" + " " + dir.str()).c_str()), 0);
  const Tensor x = load_npy(dir / "x.npy");
  auto check = [&](const std::string& name, const Tensor& want, double tol, int64_t bits) {
    SCOPED_TRACE(name);
    const wav::Samples s = wav::read(dir / name);
    EXPECT_EQ(s.info.sample_rate, 16000);
    EXPECT_EQ(s.info.bits_per_sample, bits);
    const Tensor got = wav::to_float(s.samples, s.info).to(kFloat64);
    ASSERT_EQ(got.sizes(), want.sizes());
    EXPECT_LE((got - want).abs().max().item<double>(), tol);
  };
  const char* subs[] = {"PCM_U8", "PCM_16", "PCM_24", "PCM_32", "FLOAT", "DOUBLE"};
  const int64_t bits[] = {8, 16, 24, 32, 32, 64};
  // to_float's float32 rounding bounds the 32-bit cases (3e-8 at |x| <= 0.5).
  const double tols[] = {1.0 / 128, 1.0 / 32768, 1.0 / (1 << 23), 3e-8, 3e-8, 3e-8};
  for (int i = 0; i < 6; ++i) {
    check(std::string("sf_") + subs[i] + ".wav", x, tols[i], bits[i]);
    check(std::string("sf2_") + subs[i] + ".wav", x.narrow(1, 0, 2), tols[i], bits[i]);
  }
  check("sox_16.wav", x, 1.0 / 32768, 16);
  check("sox_24.wav", x, 1.0 / (1 << 23), 24);
  check("sox_32.wav", x, 1e-7, 32);
  check("sox_8.wav", x, 1.0 / 128, 8);
}
