// AudioFolder (see audio_folder.h): the class folders listed once, each clip read on get().
#include "data/audio_folder.h"

#include "core/error.h"
#include "core/ops.h"
#include "data/impl.h"
#include "io/wav.h"

namespace nabla::data {

AudioFolder::AudioFolder(const std::string& root, AudioFolderOptions options) : options_(std::move(options)) {
  NABLA_CHECK(ValueError, options_.num_frames >= 0,
              "AudioFolder: num_frames must be >= 0 (0: each clip's length), got ", options_.num_frames);
  NABLA_CHECK(ValueError, options_.sample_rate >= 0, "AudioFolder: sample_rate must be >= 0 (0: any), got ",
              options_.sample_rate);
  auto found = internal::list_class_folders("AudioFolder", root, options_.extensions, options_.allow_empty, "clips");
  classes_ = std::move(found.classes);
  samples_ = std::move(found.samples);
}

Example AudioFolder::get(int64_t index) const {
  internal::check_index("AudioFolder", index, size());
  const auto& [path, label] = samples_[static_cast<size_t>(index)];
  const int64_t n = options_.num_frames;
  wav::Samples s = wav::read(path, 0, n > 0 ? n : -1);
  NABLA_CHECK(IOError, options_.sample_rate == 0 || s.info.sample_rate == options_.sample_rate, "AudioFolder: '", path,
              "' is sampled at ", s.info.sample_rate, " Hz, not the ", options_.sample_rate, " Hz asked for");
  Tensor w = wav::to_float(s.samples, s.info).transpose(0, 1);  // (channels, frames)
  if (n > 0 && w.size(1) < n) w = pad(w, {0, n - w.size(1)});
  w = w.contiguous();
  if (options_.transform) w = options_.transform(w);
  return {w, scalar_tensor(label, kInt64)};
}

}  // namespace nabla::data
