// audio::load / save / info: torchaudio's API over io/wav.h.
#include "audio/io.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/ops.h"
#include "io/wav.h"

namespace nabla::audio {

LoadResult load(const std::string& path, const LoadOptions& options) {
  wav::Samples s = wav::read(path, options.frame_offset, options.num_frames);
  Tensor w = options.normalize ? wav::to_float(s.samples, s.info) : s.samples;  // (frames, channels)
  if (options.channels_first) w = w.transpose(0, 1).contiguous();
  return {w, s.info.sample_rate};
}

namespace {

// x: float samples, contiguous -> int32 at the 32-bit scale, as sox converts (round, clip).
int32_t to_int32(double x) {
  const double v = std::nearbyint(x * 2147483648.0);
  return static_cast<int32_t>(std::clamp(v, -2147483648.0, 2147483647.0));
}

// Floating samples to the native dtype of (encoding, bits) for wav::write.
Tensor from_float(const Tensor& x, wav::Encoding enc, int64_t bits) {
  if (enc == wav::Encoding::pcm_f) return x;
  const Tensor src = x.to(kFloat64).contiguous();
  const double* s = src.data_ptr<double>();
  const int64_t n = src.numel();
  if (enc == wav::Encoding::pcm_u) {
    Tensor out = empty(src.sizes(), TensorOptions().dtype(kUInt8));
    uint8_t* d = out.data_ptr<uint8_t>();
    for (int64_t i = 0; i < n; ++i)
      d[i] =
          static_cast<uint8_t>(std::min<int64_t>((static_cast<int64_t>(to_int32(s[i])) + (1 << 23)) >> 24, 127) + 128);
    return out;
  }
  Tensor out = empty(src.sizes(), TensorOptions().dtype(kInt32));
  int32_t* d = out.data_ptr<int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    const int32_t v = to_int32(s[i]);
    d[i] = bits == 16 ? static_cast<int32_t>(std::min<int64_t>((static_cast<int64_t>(v) + (1 << 15)) >> 16, 32767)) : v;
  }
  return out;
}

}  // namespace

void save(const std::string& path, const Tensor& waveform, int64_t sample_rate, const SaveOptions& options) {
  NABLA_CHECK(ShapeError, waveform.dim() == 2, "audio::save: waveform must be 2-D (",
              options.channels_first ? "channels, frames" : "frames, channels", "), got ", waveform.sizes());
  const DType dt = waveform.dtype();
  NABLA_CHECK(DTypeError, dt == kFloat32 || dt == kFloat64 || dt == kInt32 || dt == kUInt8,
              "audio::save: waveform must be float32, float64, int32 or uint8, got ", dt);
  wav::Encoding enc;
  int64_t bits;
  if (options.encoding.empty()) {
    if (!options.bits_per_sample) {
      enc = dt == kUInt8 ? wav::Encoding::pcm_u : dt == kInt32 ? wav::Encoding::pcm_s : wav::Encoding::pcm_f;
      bits = dt == kUInt8 ? 8 : dt == kFloat64 ? 64 : 32;
    } else {
      bits = *options.bits_per_sample;
      enc = bits == 8 ? wav::Encoding::pcm_u : bits == 64 ? wav::Encoding::pcm_f : wav::Encoding::pcm_s;
    }
  } else {
    enc = wav::parse_encoding(options.encoding, "audio::save");
    bits = options.bits_per_sample.value_or(enc == wav::Encoding::pcm_u ? 8 : 32);
  }
  Tensor frames = options.channels_first ? waveform.transpose(0, 1) : waveform;  // (frames, channels)
  Tensor native;
  if (dt == kFloat32 || dt == kFloat64) {
    native = from_float(frames.detach().cpu(), enc, bits);
  } else {
    NABLA_CHECK(DTypeError, (dt == kUInt8) == (enc == wav::Encoding::pcm_u) && enc != wav::Encoding::pcm_f,
                "audio::save: ", dt, " samples cannot be written as ", wav::encoding_name(enc),
                " (int32 goes to PCM_S, uint8 to PCM_U; convert to float for other encodings)");
    native = frames;
  }
  wav::write(path, native, sample_rate, enc, bits);
}

AudioMetaData info(const std::string& path) {
  const wav::Info i = wav::read_info(path);
  return {i.sample_rate, i.num_frames, i.num_channels, i.bits_per_sample, wav::encoding_name(i.encoding)};
}

}  // namespace nabla::audio
