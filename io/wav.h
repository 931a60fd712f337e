// WAV files (RIFF/WAVE): PCM 8-bit unsigned, 16/24/32-bit signed, IEEE float 32/64, plain or
// WAVE_FORMAT_EXTENSIBLE, any number of channels. audio::load / audio::save (audio/io.h) build
// torchaudio's API on this; data::AudioFolder reads its clips through it.
//
//   wav::Info i = wav::read_info("a.wav");            // 16000 Hz, 2 channels, 16-bit PCM_S, ...
//   wav::Samples s = wav::read("a.wav");              // s.samples: (frames, channels), native dtype
//   wav::write("b.wav", s.samples, 16000, wav::Encoding::pcm_s, 16);
//
// Samples are interleaved (frames, channels) in the file's native values: uint8 for 8-bit (0..255,
// 128 is silence), int32 for 16-bit (the 16-bit values), for 24-bit (the value shifted left by 8,
// full 32-bit scale, as torchaudio's sox backend gives) and for 32-bit; float32 / float64 for IEEE
// float. (nabla has no int16 dtype: 16-bit values come in int32.)
//
// The reader trusts nothing: RIFF/WAVE header, chunk sizes against the file's length, fmt fields
// (channels, sample rate, bits, block_align == channels * bits / 8, the extensible sub-format GUID)
// are checked before anything is allocated, and errors are IOErrors naming the file. As libsndfile
// does, the RIFF size is not trusted (a mismatch is ignored), chunks it does not know are skipped
// (with the pad byte of odd sizes), and a data chunk declaring more bytes than the file holds (a
// recording cut short, or a streamed header with 0xFFFFFFFF) yields the whole frames present.
// The writer goes through io::atomic_write.
#pragma once

#include <cstdint>
#include <string>

#include "../core/tensor.h"

namespace nabla::wav {

// torchaudio's encoding names: "PCM_S", "PCM_U", "PCM_F".
enum class Encoding { pcm_s, pcm_u, pcm_f };
const char* encoding_name(Encoding e);
// "PCM_S" / "PCM_U" / "PCM_F" (case-insensitive) -> Encoding; ValueError naming `who` otherwise.
Encoding parse_encoding(const std::string& name, const char* who);

struct Info {
  int64_t sample_rate = 0;
  int64_t num_frames = 0;
  int64_t num_channels = 0;
  int64_t bits_per_sample = 0;
  Encoding encoding = Encoding::pcm_s;
};

struct Samples {
  Tensor samples;  // (frames, channels), the native dtype described above
  Info info;       // of the whole file (num_frames counts every frame, not only those read)
};

// The header of a WAV file, checked.
Info read_info(const std::string& path);
// Frames [frame_offset, frame_offset + num_frames) (num_frames -1: to the end; a range past the
// end is cut at the end, as torchaudio). frame_offset < 0 or num_frames < -1 is a ValueError.
Samples read(const std::string& path, int64_t frame_offset = 0, int64_t num_frames = -1);

// The samples read() returned as float32 in [-1, 1], scaled as torchaudio.load(normalize=True):
// 8-bit (x - 128) / 128, 16-bit x / 2^15, 24- and 32-bit (int32 at full scale) x / 2^31, each
// exactly rounded once (torchaudio's soundfile backend gives the same; its sox backend, going
// through sox's int32 samples, can differ by an ulp); float32 as stored, float64 rounded.
Tensor to_float(const Tensor& samples, const Info& info);

// Writes samples (frames, channels) as a WAV file with the given encoding and bits (PCM_U: 8;
// PCM_S: 16, 24, 32; PCM_F: 32, 64). The samples' dtype must be the native one read() returns:
// uint8 for PCM_U, int32 for PCM_S (16-bit: values in [-32768, 32767]; 24-bit: the top 24 bits
// are written, rounded; 32-bit as they are), float32 or float64 for PCM_F (converted to the bit
// depth). More than two channels or more than 16 bits are written as WAVE_FORMAT_EXTENSIBLE.
void write(const std::string& path, const Tensor& samples, int64_t sample_rate, Encoding encoding,
           int64_t bits_per_sample);

}  // namespace nabla::wav
