// Turning any photo or drawing of a digit into what an MNIST model expects: 28x28 grayscale,
// white digit on black, the digit scaled into a 20x20 box and centered by its center of mass (the
// way the MNIST images themselves were made).
#pragma once

#include <string>

#include "nabla.h"

namespace mnist {

struct Prepared {
  nabla::Tensor image;  // float32 (1, 28, 28) in [0, 1], white digit on black
  bool inverted;        // the source had a light background and was inverted
};

// Reads PNG/JPEG/BMP through nabla's image loader; throws nabla::IOError for unreadable files and
// nabla::ValueError when no digit can be found (a blank image).
Prepared prepare_digit(const std::string& path);

}  // namespace mnist
