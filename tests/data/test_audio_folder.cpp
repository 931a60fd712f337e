// data::AudioFolder: classes from sorted folder names, clips padded or cropped to num_frames and
// normalised as audio::load, batches through the DataLoader, and clear errors naming the path.
#include <gtest/gtest.h>

#include <filesystem>

#include "nabla.h"
#include "tests/common/value_helpers.h"
#include "tests/data/data_util.h"

using namespace nabla;
using nabla::testing::throws_with;
using nabla::testing::values;
using nabla_test::TempDir;
namespace fs = std::filesystem;

namespace {

void clip(const std::string& path, int64_t frames, int value, int64_t rate = 16000) {
  fs::create_directories(fs::path(path).parent_path());
  wav::write(path, full({frames, 1}, value, kInt32), rate, wav::Encoding::pcm_s, 16);
}

}  // namespace

TEST(AudioFolder, LabelsPadsCropsAndBatches) {
  TempDir dir;
  clip(dir / "yes/b.wav", 10, 16384);
  clip(dir / "yes/a.WAV", 3, -8192);
  clip(dir / "no/x.wav", 6, 8192);
  clip(dir / "no/notes.txt", 1, 0);  // not a .wav: ignored
  data::AudioFolder ds(dir.str(), {.num_frames = 6});
  EXPECT_EQ(ds.classes(), (std::vector<std::string>{"no", "yes"}));
  ASSERT_EQ(ds.size(), 3);
  EXPECT_EQ(ds.samples()[1].first, dir / "yes/a.WAV");
  auto [w0, l0] = ds.get(0);
  EXPECT_EQ(w0.sizes(), Shape({1, 6}));
  EXPECT_EQ(l0.item<int64_t>(), 0);
  EXPECT_TRUE(nabla::testing::values_near(values(ds.get(1).data), {-0.25, -0.25, -0.25, 0, 0, 0}, 0, 0));  // padded
  EXPECT_TRUE(nabla::testing::values_near(values(ds.get(2).data), std::vector<double>(6, 0.5), 0, 0));     // cropped
  EXPECT_EQ(ds.get(2).target.item<int64_t>(), 1);
  data::DataLoader loader(ds, {.batch_size = 3});
  for (auto& batch : loader) {
    EXPECT_EQ(batch.data.sizes(), Shape({3, 1, 6}));
    EXPECT_EQ(nabla::testing::int_values(batch.target), (std::vector<int64_t>{0, 1, 1}));
  }
  // num_frames 0 keeps each clip's length.
  EXPECT_EQ(data::AudioFolder(dir.str(), {.num_frames = 0}).get(2).data.size(1), 10);
}

TEST(AudioFolder, ErrorsNameThePath) {
  TempDir dir;
  fs::create_directories(dir / "empty");
  clip(dir / "full/a.wav", 4, 1);
  EXPECT_TRUE(throws_with<IOError>([&] { data::AudioFolder f(dir.str()); }, {dir / "empty", "has no clips"}));
  EXPECT_TRUE(throws_with<IOError>([&] { data::AudioFolder f(dir / "full/a.wav"); }, {"not a directory"}));
  fs::remove(dir / "empty");
  nabla_test::write_bytes(dir / "full/broken.wav", {'R', 'I', 'F', 'F', 1, 2});
  data::AudioFolder ds(dir.str(), {.sample_rate = 8000});
  EXPECT_TRUE(throws_with<IOError>([&] { ds.get(1); }, {dir / "full/broken.wav", "6 bytes"}));
  EXPECT_TRUE(throws_with<IOError>([&] { ds.get(0); }, {dir / "full/a.wav", "16000 Hz", "8000 Hz"}));
  EXPECT_TRUE(throws_with<IndexError>([&] { ds.get(2); }, {"index 2"}));
}
