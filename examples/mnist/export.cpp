// mnist export: writes test-set digits as PNG files, to try `mnist predict` on real image files.
#include <cstdio>
#include <filesystem>

#include "cli.h"
#include "common.h"

namespace mnist {

using namespace nabla;

int cmd_export(int argc, char** argv) {
  Cli cli("export", "Writes images of the test set as PNG files named <index>-<label>.png, picked at random\n"
                    "(with --seed) or the first ones (--first). --invert writes dark digits on white, like a\n"
                    "digit drawn on paper; `mnist predict` reads both.");
  cli.option("out", "DIR", "folder to write the images to (created if missing)", "samples")
      .option("count", "N", "how many images", "10")
      .option("seed", "N", "which images: a random pick with this seed", "1")
      .flag("first", "take the first images of the test set instead of a random pick")
      .flag("invert", "dark digits on a white background")
      .option("dataset", "NAME", "mnist or fashion-mnist", "mnist", {"mnist", "fashion-mnist"})
      .option("data", "DIR", "folder with the IDX files", "data/mnist or data/fashion-mnist")
      .example("mnist export --count 10 --out samples")
      .example("mnist predict --checkpoint checkpoints/mnist-cnn.safetensors samples/*.png");
  if (!cli.parse(argc, argv, 2)) return kExitOk;
  std::string dataset = cli.str("dataset");
  std::string dir = cli.is_set("data") ? cli.str("data") : default_data_dir(dataset);
  int64_t count = cli.integer("count");
  if (count < 1) throw UsageError("--count must be at least 1");
  auto test_set = load_split(dataset, dir, false);
  const int64_t n = test_set->size();
  if (count > n) throw UsageError("--count " + std::to_string(count) + " is more than the " + std::to_string(n) +
                                  " images of the test set");
  Tensor picks;
  if (cli.is_set("first")) {
    picks = arange(count, dtype(kInt64));
  } else {
    manual_seed(static_cast<uint64_t>(cli.integer("seed")));
    picks = randperm(n, dtype(kInt64)).narrow(0, 0, count).contiguous();
  }
  std::filesystem::path out = cli.str("out");
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec) throw Failure("cannot create the folder " + out.string() + ": " + ec.message(), kExitError);
  const Tensor& images = test_set->images();  // (N, 1, 28, 28) u8
  const int64_t* idx = picks.data_ptr<int64_t>();
  const int64_t* labels = test_set->targets().data_ptr<int64_t>();
  for (int64_t k = 0; k < count; ++k) {
    Tensor img = images[idx[k]][0];
    if (cli.is_set("invert")) img = (255 - img.to(kInt64)).to(kUInt8);
    std::filesystem::path file = out / (std::to_string(idx[k]) + "-" + std::to_string(labels[idx[k]]) + ".png");
    data::save_image(file.string(), img);
    std::printf("%s\n", file.string().c_str());
  }
  return kExitOk;
}

}  // namespace mnist
