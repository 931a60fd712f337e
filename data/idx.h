// IDX files, the format of MNIST and Fashion-MNIST: a magic number 0x0000TTNN (TT: element type,
// NN: number of dims), NN big-endian uint32 dims, then the elements, big-endian, row-major. Plain
// or gzip-compressed (detected from the content, not the name).
//
// read_idx checks everything before trusting it: the magic number and element type, the dim
// count, that the declared sizes neither overflow nor exceed max_bytes, that a plain file holds
// exactly the declared data, and that a gzip file is large enough to hold it at all (deflate
// expands at most 1032 times). Only then is the returned tensor allocated, and the data is read or
// decompressed straight into it, so the peak memory is that tensor (plus 1 MB for i8/i16) and a
// gzip bomb cannot take more than max_bytes. A bad file is an IOError naming the file and the
// problem.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "../core/tensor.h"

namespace nabla::data {

struct IdxOptions {
  // The largest tensor read_idx returns (4 GiB), counted after i8/i16 are widened to int32: the
  // bound on the memory it takes.
  uint64_t max_bytes = uint64_t(4) << 30;
  int max_dims = 8;
};

// Returns the file's array with its dims: u8 (type 0x08), int32 (0x09 i8, 0x0B i16 and 0x0C i32,
// widened), float32 (0x0D) or float64 (0x0E).
Tensor read_idx(const std::string& path, const IdxOptions& options = {});

// The header of an IDX file (what read_idx would return: dtype and dims, and the file's element
// type, "u8" ...), checked as read_idx checks it, without reading the data: a gzip file is
// decompressed only as far as its header. For files that must agree before either is read (the
// images and the labels of MNIST).
struct IdxInfo {
  DType dtype;
  std::vector<int64_t> dims;
  std::string type;
};
IdxInfo read_idx_info(const std::string& path, const IdxOptions& options = {});

// Writes t (u8, int32, float32 or float64; 1 to 255 dims) as an IDX file, gzip-compressed when
// `gzip` is true. The file is replaced atomically.
void write_idx(const std::string& path, const Tensor& t, bool gzip = false);

}  // namespace nabla::data
