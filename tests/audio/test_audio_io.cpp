// audio::load / save / info as torchaudio's: the normalisation of each format, native dtypes,
// channels_first, frame windows, the encodings save picks and the conversions it makes.
#include <gtest/gtest.h>

#include <string>

#include "nabla.h"
#include "tests/common/value_helpers.h"
#include "tests/data/data_util.h"

using namespace nabla;
using nabla::testing::int_values;
using nabla::testing::throws_with;
using nabla::testing::values;
using nabla::testing::values_near;
using nabla_test::TempDir;

TEST(AudioIo, LoadNormalizesAsTorchaudio) {
  TempDir dir;
  const std::string p = dir / "a.wav";
  // 16-bit: x / 32768; channels first by default.
  wav::write(p, tensor({{-32768, 16384}, {32767, 0}}, kInt32), 8000, wav::Encoding::pcm_s, 16);
  auto [w, sr] = audio::load(p);
  EXPECT_EQ(sr, 8000);
  EXPECT_EQ(w.dtype(), kFloat32);
  EXPECT_TRUE(values_near(values(w), {-1.0, 32767.0 / 32768, 0.5, 0.0}, 0, 0));  // (channels, frames)
  auto native = audio::load(p, {.normalize = false, .channels_first = false}).waveform;
  EXPECT_EQ(native.dtype(), kInt32);
  EXPECT_EQ(int_values(native), (std::vector<int64_t>{-32768, 16384, 32767, 0}));
  // 8-bit: (x - 128) / 128, native uint8.
  wav::write(p, tensor({{0}, {128}, {255}}, kUInt8), 8000, wav::Encoding::pcm_u, 8);
  EXPECT_TRUE(values_near(values(audio::load(p).waveform), {-1.0, 0.0, 127.0 / 128}, 0, 0));
  EXPECT_EQ(audio::load(p, {.normalize = false}).waveform.dtype(), kUInt8);
  // 24-bit: int32 at the 32-bit scale, x / 2^31.
  wav::write(p, tensor({{1 << 30}, {-(1 << 8)}}, kInt32), 8000, wav::Encoding::pcm_s, 24);
  EXPECT_TRUE(values_near(values(audio::load(p).waveform), {0.5, -1.0 / (1 << 23)}, 0, 0));
  EXPECT_EQ(int_values(audio::load(p, {.normalize = false}).waveform), (std::vector<int64_t>{1 << 30, -(1 << 8)}));
  // float64: float32 normalised, float64 native; a window of frames.
  wav::write(p, tensor({{0.1}, {0.2}, {0.3}, {0.4}}, kFloat64), 8000, wav::Encoding::pcm_f, 64);
  EXPECT_EQ(audio::load(p).waveform.dtype(), kFloat32);
  Tensor win = audio::load(p, {.frame_offset = 1, .num_frames = 2, .normalize = false}).waveform;
  EXPECT_EQ(win.dtype(), kFloat64);
  EXPECT_TRUE(values_near(values(win), {0.2, 0.3}, 0, 0));
  const audio::AudioMetaData m = audio::info(p);
  EXPECT_EQ(m.sample_rate, 8000);
  EXPECT_EQ(m.num_frames, 4);
  EXPECT_EQ(m.num_channels, 1);
  EXPECT_EQ(m.bits_per_sample, 64);
  EXPECT_EQ(m.encoding, "PCM_F");
}

TEST(AudioIo, SaveConvertsAndRoundTrips) {
  TempDir dir;
  const std::string p = dir / "a.wav";
  Tensor x = tensor({{0.5, -0.25, 1.0, -1.0, 0.1}, {0.0, 2.0, -2.0, 0.75, -0.5}});  // (channels, frames)
  // Defaults: float32 -> 32-bit float, exact.
  audio::save(p, x, 16000);
  EXPECT_EQ(audio::info(p).encoding, "PCM_F");
  EXPECT_TRUE(equal(audio::load(p).waveform, x));
  // To 16-bit: as sox, clipped at full scale.
  audio::save(p, x, 16000, {.bits_per_sample = 16});
  const audio::AudioMetaData m = audio::info(p);
  EXPECT_EQ(m.encoding, "PCM_S");
  EXPECT_EQ(m.bits_per_sample, 16);
  EXPECT_EQ(int_values(audio::load(p, {.normalize = false}).waveform),
            (std::vector<int64_t>{16384, -8192, 32767, -32768, 3277, 0, 32767, -32768, 24576, -16384}));
  audio::save(p, x, 16000, {.encoding = "PCM_U"});
  EXPECT_EQ(int_values(audio::load(p, {.normalize = false}).waveform),
            (std::vector<int64_t>{192, 96, 255, 0, 141, 128, 255, 0, 224, 64}));
  // load(normalize = false) -> save is lossless for every integer format.
  for (int64_t bits : {16, 24, 32}) {
    audio::save(p, x, 16000, {.encoding = "PCM_S", .bits_per_sample = bits});
    Tensor native = audio::load(p, {.normalize = false}).waveform;
    const std::string q = dir / "b.wav";
    audio::save(q, native, 16000, {.bits_per_sample = bits});
    EXPECT_EQ(nabla_test::read_bytes(p), nabla_test::read_bytes(q)) << bits;
  }
  // frames-first input.
  audio::save(p, x.t(), 8000, {.channels_first = false});
  EXPECT_TRUE(equal(audio::load(p).waveform, x));
  EXPECT_TRUE(throws_with<ValueError>([&] { audio::save(p, x, 8000, {.encoding = "ULAW"}); }, {"PCM_S", "'ULAW'"}));
  EXPECT_TRUE(throws_with<DTypeError>([&] { audio::save(p, x.to(kInt64), 8000); }, {"int64"}));
  EXPECT_TRUE(throws_with<DTypeError>([&] { audio::save(p, x.to(kInt32), 8000, {.encoding = "PCM_F"}); },
                                      {"cannot be written as PCM_F"}));
  EXPECT_TRUE(throws_with<ShapeError>([&] { audio::save(p, zeros({3}), 8000); }, {"2-D", "[3]"}));
  EXPECT_TRUE(throws_with<IOError>([&] { audio::load(dir / "none.wav"); }, {"none.wav"}));
}
