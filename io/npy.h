// NumPy .npy files (format versions 1.0-3.0): what nabla saves, np.load reads, and back.
//
//   save_npy(x, "x.npy");             // np.load("x.npy") in Python
//   Tensor y = load_npy("y.npy");     // what np.save wrote
//
// The reader trusts nothing: magic, version, header length, the header dict's syntax, dtype,
// shape overflow and the data size must all check out, or it throws IOError naming the file.
#pragma once

#include <string>

#include "../core/tensor.h"

namespace nabla {

// Saves a CPU or CUDA tensor (copied to the host) as .npy, atomically (temporary file + rename).
void save_npy(const Tensor& t, const std::string& path);
// Loads a .npy file (little- or big-endian, C or Fortran order) of a supported dtype.
Tensor load_npy(const std::string& path);

}  // namespace nabla
