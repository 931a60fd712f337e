// CRC-32C (Castagnoli), the checksum TFRecord files (TensorBoard's event files) carry, and its
// "masked" form. With SSE4.2 (checked once at run time) the crc32 instruction does 8 bytes per
// cycle or so; elsewhere a slicing-by-8 table does 8 bytes per step.
#pragma once

#include <cstddef>
#include <cstdint>

namespace nabla::tensorboard {

// CRC-32C of n bytes, continued from `crc` (0 to start): crc32c("123456789") == 0xE3069283.
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);

// The portable table-driven version (what crc32c uses without SSE4.2), for the tests.
uint32_t crc32c_portable(const void* data, size_t n, uint32_t crc = 0);

// TFRecord's masked CRC: rotated right by 15 bits plus a constant, so a CRC stored inside the data
// it covers does not checksum to a fixed value.
inline uint32_t mask_crc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u; }

}  // namespace nabla::tensorboard
