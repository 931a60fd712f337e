// Reading and writing audio files as torchaudio.load / save / info (WAV, through io/wav.h).
//
//   auto [waveform, sample_rate] = audio::load("yes.wav");         // (channels, frames) float32 in [-1, 1]
//   audio::save("out.wav", waveform, 16000, {.encoding = "PCM_S", .bits_per_sample = 16});
//   audio::AudioMetaData m = audio::info("yes.wav");                // m.num_frames, m.encoding == "PCM_S"
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "../core/tensor.h"

namespace nabla::audio {

struct LoadOptions {
  int64_t frame_offset = 0;
  int64_t num_frames = -1;     // -1: to the end
  bool normalize = true;       // float32 in [-1, 1]; false: the file's native values (below)
  bool channels_first = true;  // (channels, frames); false: (frames, channels)
};

struct LoadResult {
  Tensor waveform;
  int64_t sample_rate = 0;
};

// torchaudio.load. With normalize = false the samples keep their native type as torchaudio's:
// uint8 for 8-bit, int32 for 24-bit (shifted to the 32-bit scale) and 32-bit, float32 for 32-bit
// float; two deliberate differences: 16-bit comes as int32 holding the 16-bit values (nabla has no
// int16 dtype), and 64-bit float as float64 (torchaudio's soundfile backend; its sox backend
// rounds to float32). Errors are IOErrors naming the file.
LoadResult load(const std::string& path, const LoadOptions& options = {});

struct SaveOptions {
  bool channels_first = true;
  std::string encoding;                    // "PCM_S", "PCM_U", "PCM_F"; "" picks from the dtype / bits
  std::optional<int64_t> bits_per_sample;  // 8, 16, 24, 32, 64
};

// torchaudio.save of a WAV file (atomically). Without encoding and bits the dtype decides as
// torchaudio's: float32 -> 32-bit float, float64 -> 64-bit float (torchaudio: 32-bit), int32 ->
// 32-bit PCM_S, uint8 -> 8-bit PCM_U; bits alone: 8 is PCM_U, others PCM_S; PCM_S defaults to 32
// bits, PCM_F to 32. Floating samples are converted as sox converts them: to 32-bit integers
// (x * 2^31, rounded, clipped), then to the bit depth (rounded, clipped). int32 samples are taken
// in the scale load(normalize = false) gives for the format (16-bit values for 16 bits, 32-bit
// scale for 24 and 32), uint8 samples as 8-bit PCM_U, so load -> save round trips are exact.
void save(const std::string& path, const Tensor& waveform, int64_t sample_rate, const SaveOptions& options = {});

struct AudioMetaData {
  int64_t sample_rate = 0;
  int64_t num_frames = 0;
  int64_t num_channels = 0;
  int64_t bits_per_sample = 0;
  std::string encoding;  // "PCM_S", "PCM_U", "PCM_F"
};

// torchaudio.info.
AudioMetaData info(const std::string& path);

}  // namespace nabla::audio
