#include "data/datasets.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "core/error.h"
#include "core/ops.h"
#include "data/impl.h"
#include "io/file.h"

namespace fs = std::filesystem;

namespace nabla::data {

namespace {

const std::array<float, 256>& u8_to_unit() {
  static const std::array<float, 256> lut = [] {
    std::array<float, 256> t;
    for (int v = 0; v < 256; ++v) t[static_cast<size_t>(v)] = static_cast<float>(v) / 255.0f;
    return t;
  }();
  return lut;
}

// u8 pixels -> float32 in [0, 1].
void pixels_to_float(const uint8_t* src, float* dst, int64_t n) {
  const auto& lut = u8_to_unit();
  for (int64_t i = 0; i < n; ++i) dst[i] = lut[src[i]];
}

bool exists_file(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

}  // namespace

// ---- InMemoryImageDataset -----------------------------------------------------------------------
Example InMemoryImageDataset::get(int64_t index) const {
  internal::check_index(name_, index, size());
  const int64_t C = images_.size(1), H = images_.size(2), W = images_.size(3), n = C * H * W;
  Tensor image = empty({C, H, W}, kFloat32);
  pixels_to_float(images_.data_ptr<uint8_t>() + index * n, image.data_ptr<float>(), n);
  if (transform_) image = transform_(image);
  return {image, targets_.select(0, index)};
}

Example InMemoryImageDataset::get_batch(std::span<const int64_t> indices) const {
  if (transform_) return Dataset::get_batch(indices);
  const int64_t B = static_cast<int64_t>(indices.size());
  const int64_t C = images_.size(1), H = images_.size(2), W = images_.size(3), n = C * H * W;
  Tensor data = empty({B, C, H, W}, kFloat32);
  const uint8_t* src = images_.data_ptr<uint8_t>();
  float* dst = data.data_ptr<float>();
  for (int64_t b = 0; b < B; ++b) pixels_to_float(src + indices[static_cast<size_t>(b)] * n, dst + b * n, n);
  return {data, targets_.index_select(0, internal::index_tensor(indices))};
}

// ---- MNIST --------------------------------------------------------------------------------------
namespace {

// root/name, or root/name.gz when only that exists.
std::string find_idx(const char* dataset, const std::string& root, const std::string& name) {
  std::string plain = root + "/" + name, gz = plain + ".gz";
  if (exists_file(plain)) return plain;
  if (exists_file(gz)) return gz;
  const bool fashion = std::string_view(dataset) == "FashionMNIST";
  throw IOError(internal::str(dataset, ": cannot find '", plain, "' (or '", gz, "'); ",
                              fashion
                                  ? "Debian's package dataset-fashion-mnist installs the files in "
                                    "/usr/share/datasets/fashion-mnist (apt-get install dataset-fashion-mnist), and "
                                    "scripts/get-data.sh puts them in data/fashion-mnist"
                                  : "scripts/get-data.sh puts MNIST in data/mnist (and Fashion-MNIST in "
                                    "data/fashion-mnist)"));
}

Tensor read_idx_for(const char* dataset, const std::string& path, uint64_t max_bytes) {
  try {
    return read_idx(path, {.max_bytes = max_bytes});
  } catch (const IOError& e) { throw IOError(internal::str(dataset, ": ", e.what())); }
}

IdxInfo read_idx_info_for(const char* dataset, const std::string& path, uint64_t max_bytes) {
  try {
    return read_idx_info(path, {.max_bytes = max_bytes});
  } catch (const IOError& e) { throw IOError(internal::str(dataset, ": ", e.what())); }
}

}  // namespace

MNIST::MNIST(const std::string& root, Split split, Transform transform)
    : MNIST("MNIST", {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}, root, split, std::move(transform)) {}

MNIST::MNIST(const char* name, std::vector<std::string> classes, const std::string& root, Split split,
             Transform transform) {
  name_ = name;
  classes_ = std::move(classes);
  transform_ = std::move(transform);
  const std::string prefix = split == Split::train ? "train" : "t10k";
  const std::string image_path = find_idx(name, root, prefix + "-images-idx3-ubyte");
  const std::string label_path = find_idx(name, root, prefix + "-labels-idx1-ubyte");
  // Generous caps (MNIST's training images are 47 MB) so that a hostile or wrong file, even a
  // gzip bomb with a plausible header, cannot make us allocate gigabytes: read_idx's max_bytes
  // bounds the tensor it returns, which is its only large allocation (the data is decompressed
  // straight into it, after checking that the gzip file is large enough to hold it).
  constexpr uint64_t kMaxImages = uint64_t(1) << 30, kMaxLabels = uint64_t(64) << 20;
  auto bad = [&](const std::string& path, const std::string& what) {
    throw IOError(internal::str(name, ": IDX file '", path, "': ", what));
  };
  // The two headers first: whether the files agree (types, dims, counts) is known before either is
  // read (a gzip file declaring a million images next to 10,000 labels was decompressed, 1 GB).
  const IdxInfo image_info = read_idx_info_for(name, image_path, kMaxImages);
  const IdxInfo label_info = read_idx_info_for(name, label_path, kMaxLabels);
  const Shape image_dims(image_info.dims.begin(), image_info.dims.end()),
      label_dims(label_info.dims.begin(), label_info.dims.end());
  if (image_info.dtype != kUInt8)
    bad(image_path,
        internal::str("expected u8 pixels (type 0x08), got ", image_info.type, " (", image_info.dtype, ")"));
  if (image_dims.size() != 3)
    bad(image_path, internal::str("expected 3 dims (images, rows, columns), got ", image_dims.size(), " ", image_dims));
  if (image_dims[0] == 0 || image_dims[1] == 0 || image_dims[2] == 0)
    bad(image_path, internal::str("holds no images (dims ", image_dims, ")"));
  if (label_info.dtype != kUInt8)
    bad(label_path,
        internal::str("expected u8 labels (type 0x08), got ", label_info.type, " (", label_info.dtype, ")"));
  if (label_dims.size() != 1)
    bad(label_path, internal::str("expected 1 dim (labels), got ", label_dims.size(), " ", label_dims));
  if (label_dims[0] != image_dims[0])
    bad(label_path, internal::str("has ", label_dims[0], " labels but '", image_path, "' has ", image_dims[0],
                                  " images (compared from the headers, before reading either)"));
  Tensor images = read_idx_for(name, image_path, kMaxImages);
  Tensor labels = read_idx_for(name, label_path, kMaxLabels);
  if (images.sizes() != image_dims || labels.sizes() != label_dims)  // the files changed in between
    bad(image_path, internal::str("changed while being read (dims ", image_dims, " then ", images.sizes(), ")"));
  const uint8_t* l = labels.data_ptr<uint8_t>();
  const int64_t num_classes = static_cast<int64_t>(classes_.size());
  for (int64_t i = 0; i < labels.size(0); ++i)
    if (l[i] >= num_classes)
      bad(label_path, internal::str("label ", int(l[i]), " at index ", i, " is out of range [0, ", num_classes, ")"));
  images_ = images.unsqueeze(1);  // (N, 1, H, W)
  targets_ = labels.to(kInt64);
}

FashionMNIST::FashionMNIST(const std::string& root, Split split, Transform transform)
    : MNIST("FashionMNIST",
            {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"},
            root, split, std::move(transform)) {}

// ---- CIFAR-10 -----------------------------------------------------------------------------------
CIFAR10::CIFAR10(const std::string& root, Split split, Transform transform) {
  name_ = "CIFAR10";
  classes_ = {"airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"};
  transform_ = std::move(transform);
  std::string dir = root;
  if (!exists_file(dir + "/test_batch.bin") && !exists_file(dir + "/data_batch_1.bin") &&
      fs::is_directory(root + "/cifar-10-batches-bin"))
    dir = root + "/cifar-10-batches-bin";
  std::vector<std::string> files;
  if (split == Split::train)
    for (int k = 1; k <= 5; ++k) files.push_back(dir + "/data_batch_" + std::to_string(k) + ".bin");
  else files.push_back(dir + "/test_batch.bin");
  constexpr int64_t kRecord = 1 + 3 * 32 * 32;
  std::vector<std::vector<char>> contents;
  int64_t total = 0;
  for (const auto& f : files) {
    if (!exists_file(f))
      throw IOError(internal::str("CIFAR10: cannot find '", f,
                                  "' (expected the binary version, cifar-10-binary.tar.gz, unpacked in '", root, "')"));
    std::vector<char> bytes = io::read_file(f, uint64_t(1) << 30);
    const int64_t size = static_cast<int64_t>(bytes.size());
    NABLA_CHECK(IOError, size > 0 && size % kRecord == 0, "CIFAR10: '", f, "' has ", size,
                " bytes, not a positive multiple of the ", kRecord,
                "-byte record (1 label byte + 3x32x32 pixels): truncated or not a CIFAR-10 batch");
    for (int64_t r = 0; r < size / kRecord; ++r) {
      auto label = static_cast<uint8_t>(bytes[static_cast<size_t>(r * kRecord)]);
      NABLA_CHECK(IOError, label < 10, "CIFAR10: '", f, "': label ", int(label), " of record ", r,
                  " is out of range [0, 10)");
    }
    total += size / kRecord;
    contents.push_back(std::move(bytes));
  }
  images_ = empty({total, 3, 32, 32}, kUInt8);
  targets_ = empty({total}, kInt64);
  uint8_t* img = images_.data_ptr<uint8_t>();
  int64_t* tgt = targets_.data_ptr<int64_t>();
  int64_t i = 0;
  for (const auto& bytes : contents)
    for (int64_t r = 0; r < static_cast<int64_t>(bytes.size()) / kRecord; ++r, ++i) {
      const char* rec = bytes.data() + r * kRecord;
      tgt[i] = static_cast<uint8_t>(rec[0]);
      std::memcpy(img + i * (kRecord - 1), rec + 1, kRecord - 1);
    }
}

// ---- ImageFolder --------------------------------------------------------------------------------
namespace {
std::string lowercase(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
}  // namespace

namespace internal {

ClassFolders list_class_folders(const char* who, const std::string& root, const std::vector<std::string>& extensions,
                                bool allow_empty, const char* files) {
  ClassFolders out;
  std::error_code ec;
  NABLA_CHECK(IOError, fs::is_directory(root, ec), who, ": '", root, "' is not a directory");
  std::vector<std::string> exts;
  for (const auto& e : extensions) exts.push_back(lowercase(e));
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (!name.empty() && name[0] != '.' && it->is_directory(ec)) out.classes.push_back(name);
  }
  NABLA_CHECK(IOError, !ec, who, ": cannot list '", root, "': ", ec.message());
  NABLA_CHECK(IOError, !out.classes.empty(), who, ": '", root, "' has no class folders (expected ", root, "/<class>/<",
              files, ">)");
  std::sort(out.classes.begin(), out.classes.end());
  for (size_t label = 0; label < out.classes.size(); ++label) {
    const std::string dir = root + "/" + out.classes[label];
    std::vector<std::string> found;
    for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
         !ec && it != end; it.increment(ec)) {
      if (!it->is_regular_file(ec)) continue;
      std::string ext = lowercase(it->path().extension().string());
      if (std::find(exts.begin(), exts.end(), ext) != exts.end()) found.push_back(it->path().string());
    }
    NABLA_CHECK(IOError, !ec, who, ": cannot list '", dir, "': ", ec.message());
    NABLA_CHECK(IOError, !found.empty() || allow_empty, who, ": class folder '", dir, "' has no ", files,
                " with a supported extension (set allow_empty to accept it)");
    std::sort(found.begin(), found.end());
    for (auto& f : found) out.samples.emplace_back(std::move(f), static_cast<int64_t>(label));
  }
  NABLA_CHECK(IOError, !out.samples.empty(), who, ": '", root, "' has no ", files);
  return out;
}

}  // namespace internal

ImageFolder::ImageFolder(const std::string& root, ImageFolderOptions options) : options_(std::move(options)) {
  NABLA_CHECK(ValueError, options_.channels == 1 || options_.channels == 3 || options_.channels == 4,
              "ImageFolder: channels must be 1, 3 or 4, got ", options_.channels);
  auto found = internal::list_class_folders("ImageFolder", root, options_.extensions, options_.allow_empty, "images");
  classes_ = std::move(found.classes);
  samples_ = std::move(found.samples);
}

Example ImageFolder::get(int64_t index) const {
  internal::check_index("ImageFolder", index, size());
  const auto& [path, label] = samples_[static_cast<size_t>(index)];
  Tensor image = to_tensor(load_image(path, options_.channels, options_.limits));
  if (options_.transform) image = options_.transform(image);
  return {image, scalar_tensor(label, kInt64)};
}

}  // namespace nabla::data
