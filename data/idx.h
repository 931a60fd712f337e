// IDX files, the format of MNIST and Fashion-MNIST: a magic number 0x0000TTNN (TT: element type,
// NN: number of dims), NN big-endian uint32 dims, then the elements, big-endian, row-major. Plain
// or gzip-compressed (detected from the content, not the name).
//
// read_idx checks everything before trusting it: the magic number and element type, the dim
// count, that the declared sizes neither overflow nor exceed max_bytes, and that the file holds
// exactly the declared data. A bad file is an IOError naming the file and the problem; memory is
// allocated only as fast as real data arrives, so a hostile header cannot cause a huge allocation.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace nabla::data {

struct IdxOptions {
  uint64_t max_bytes = uint64_t(4) << 30;  // largest element data accepted (4 GiB)
  int max_dims = 8;
};

// Returns the file's array with its dims: u8 (type 0x08), int32 (0x09 i8, 0x0B i16 and 0x0C i32,
// widened), float32 (0x0D) or float64 (0x0E).
Tensor read_idx(const std::string& path, const IdxOptions& options = {});

// Writes t (u8, int32, float32 or float64; 1 to 255 dims) as an IDX file, gzip-compressed when
// `gzip` is true. The file is replaced atomically.
void write_idx(const std::string& path, const Tensor& t, bool gzip = false);

}  // namespace nabla::data
