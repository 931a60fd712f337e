// Small helpers shared by the data/ sources (not part of the public API).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../core/error.h"
#include "../core/tensor.h"

namespace nabla::data::internal {

// nabla's own private helpers (internal::str, ...) resolve from here too.
using namespace ::nabla::internal;

inline void check_index(const char* what, int64_t index, int64_t size) {
  NABLA_CHECK(IndexError, index >= 0 && index < size, what, ": index ", index, " is out of range for ", size,
              " examples");
}

// The files of a folder-per-class data set (ImageFolder, AudioFolder): classes are root's
// sub-folders (not hidden) in sorted order, label = position; files are those under each class
// folder (recursively) whose extension is one of `extensions` (case-insensitive), sorted. IOErrors
// (prefixed by `who`) for a missing root, no class folders, a class folder without such `files`
// (unless allow_empty), or no files at all.
struct ClassFolders {
  std::vector<std::string> classes;
  std::vector<std::pair<std::string, int64_t>> samples;  // (path, label)
};
ClassFolders list_class_folders(const char* who, const std::string& root, const std::vector<std::string>& extensions,
                                bool allow_empty, const char* files);

// An int64 tensor (n) that views `indices` without copying; valid while `indices` lives. Read only.
Tensor index_tensor(std::span<const int64_t> indices);

// Image resampling (data/image.cpp), one separable two-pass resampler for every filter: for each
// output pixel along one axis, `taps` input indices and their weights (a filter's taps come from
// its own function: bilinear_taps here, nearest and bicubic in transforms.cpp).
struct AxisTaps {
  int64_t taps = 0;
  std::vector<int64_t> index;  // out * taps
  std::vector<double> weight;  // out * taps
};
// PIL's triangle filter (bilinear), widened by the scale when antialiasing a reduction.
AxisTaps bilinear_taps(int64_t in, int64_t out, bool antialias);
// x (..., H, W) float32, float64 or u8 (computed in float, rounded and clamped) resampled to
// (..., out_h, out_w) along W with `tx`, then along H with `ty`; `op` names the caller in errors.
Tensor resample(const Tensor& x, int64_t out_h, int64_t out_w, const AxisTaps& tx, const AxisTaps& ty, const char* op);
// The checks every resize makes, naming `op`: x is (..., H, W) with H, W > 0 and the output size positive.
void check_resize(const Tensor& x, int64_t out_h, int64_t out_w, const char* op);

}  // namespace nabla::data::internal
