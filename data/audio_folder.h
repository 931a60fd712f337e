// AudioFolder: WAV clips in one folder per class, SpeechCommands' layout:
//
//   data::AudioFolder words("speech", {.num_frames = 16000, .sample_rate = 16000});
//   words.classes();                      // {"no", "yes"}: the sorted sub-folders, label = position
//   auto [waveform, label] = words.get(0);  // (channels, 16000) float32 in [-1, 1], () int64
//
// Clips are read when get() is called (through io/wav.h: data/ sits below audio/), normalised as
// audio::load, and cut to their first num_frames frames or padded with zeros at the end, so that
// a DataLoader can stack them (clips must then have the same number of channels).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "../core/tensor.h"
#include "dataset.h"
#include "transforms.h"

namespace nabla::data {

struct AudioFolderOptions {
  int64_t num_frames = 16000;                      // the length of every clip; 0 keeps each clip's own
  int64_t sample_rate = 0;                         // > 0: a clip at another rate is an IOError
  Transform transform{};                           // applied to the (channels, num_frames) waveform
  std::vector<std::string> extensions = {".wav"};  // matched case-insensitively
  bool allow_empty = false;                        // allow class folders without clips
};

class AudioFolder : public Dataset {
 public:
  explicit AudioFolder(const std::string& root, AudioFolderOptions options = {});
  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
  // {waveform (channels, num_frames) float32, label () int64}; an unreadable clip is an IOError
  // naming its path.
  Example get(int64_t index) const override;

  const std::vector<std::string>& classes() const { return classes_; }
  const std::vector<std::pair<std::string, int64_t>>& samples() const { return samples_; }  // (path, label)

 private:
  AudioFolderOptions options_;
  std::vector<std::string> classes_;
  std::vector<std::pair<std::string, int64_t>> samples_;
};

}  // namespace nabla::data
