// Built-in datasets: MNIST and Fashion-MNIST (IDX files), CIFAR-10 (binary batches) and
// ImageFolder (one folder of images per class). Each example is {float32 image (C, H, W) in
// [0, 1], int64 label ()}, with an optional transform applied to the image.
//
//   data::MNIST train("data/mnist", data::Split::train);    // scripts/get-data.sh fetches it
//   train.size();                  // 60000
//   auto [image, label] = train.get(0);   // (1, 28, 28) float32, () int64
//
// MNIST and CIFAR-10 keep their u8 pixels in memory (47 MB for MNIST train) and convert per batch;
// without a transform, get_batch builds a whole (B, C, H, W) batch in one pass.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "../core/tensor.h"
#include "dataset.h"
#include "idx.h"
#include "image.h"
#include "transforms.h"

namespace nabla::data {

enum class Split { train, test };

// Labelled u8 images held in memory: images (N, C, H, W) u8, labels (N) int64.
class InMemoryImageDataset : public Dataset {
 public:
  int64_t size() const override { return images_.size(0); }
  Example get(int64_t index) const override;
  Example get_batch(std::span<const int64_t> indices) const override;

  const Tensor& images() const { return images_; }    // (N, C, H, W) u8
  const Tensor& targets() const { return targets_; }  // (N) int64
  const std::vector<std::string>& classes() const { return classes_; }
  const Transform& transform() const { return transform_; }

 protected:
  InMemoryImageDataset() = default;
  const char* name_ = "dataset";  // for error messages
  Tensor images_, targets_;
  std::vector<std::string> classes_;
  Transform transform_;
};

// MNIST from `root`/{train,t10k}-{images-idx3,labels-idx1}-ubyte, each plain or with .gz.
class MNIST : public InMemoryImageDataset {
 public:
  explicit MNIST(const std::string& root, Split split = Split::train, Transform transform = {});

 protected:
  MNIST(const char* name, std::vector<std::string> classes, const std::string& root, Split split, Transform transform);
};

// Fashion-MNIST: the same files and format (Debian's dataset-fashion-mnist installs them in
// /usr/share/datasets/fashion-mnist).
class FashionMNIST : public MNIST {
 public:
  explicit FashionMNIST(const std::string& root, Split split = Split::train, Transform transform = {});
};

// CIFAR-10 from its binary version: `root` holds data_batch_1.bin .. data_batch_5.bin and
// test_batch.bin, directly or in cifar-10-batches-bin/. Each record is a label byte and 3072 bytes
// of 32x32 RGB pixels, channel by channel.
class CIFAR10 : public InMemoryImageDataset {
 public:
  explicit CIFAR10(const std::string& root, Split split = Split::train, Transform transform = {});
};

struct ImageFolderOptions {
  int channels = 3;       // 1 (gray), 3 (RGB) or 4 (RGBA)
  Transform transform{};  // applied to the float (C, H, W) image
  ImageLimits limits{};
  std::vector<std::string> extensions = {".png", ".jpg", ".jpeg", ".bmp"};  // matched case-insensitively
  bool allow_empty = false;                                                 // allow class folders without images
};

// Images in `root`/<class>/**/<file>: classes are the sub-folders in sorted order (label = position),
// files are sorted within each class. Images are decoded when get() is called.
class ImageFolder : public Dataset {
 public:
  explicit ImageFolder(const std::string& root, ImageFolderOptions options = {});
  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
  Example get(int64_t index) const override;

  const std::vector<std::string>& classes() const { return classes_; }
  const std::vector<std::pair<std::string, int64_t>>& samples() const { return samples_; }  // (path, label)

 private:
  ImageFolderOptions options_;
  std::vector<std::string> classes_;
  std::vector<std::pair<std::string, int64_t>> samples_;
};

}  // namespace nabla::data
