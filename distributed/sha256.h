// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104): what the TCP store's challenge-response needs
// to prove that a peer knows the job's secret without sending it (store.h). Small, self-contained
// (no crypto library is a dependency of nabla), checked against FIPS 180-4's and RFC 4231's
// test vectors in tests/distributed/test_store_security.cpp. Not a general crypto API.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace nabla::distributed::crypto {

using Digest = std::array<uint8_t, 32>;

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t n);
  void update(std::string_view s) { update(s.data(), s.size()); }
  Digest finish();  // the object is spent afterwards

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t used_ = 0;
  uint64_t bytes_ = 0;
};

Digest sha256(std::string_view data);
// HMAC-SHA256(key, message); a key longer than 64 bytes is hashed first, as RFC 2104 says.
Digest hmac_sha256(std::string_view key, std::string_view message);
// Equal without an early exit: the time does not say how many leading bytes match.
bool constant_time_equal(const uint8_t* a, const uint8_t* b, size_t n);
// n bytes from the kernel's random source (getrandom); throws DistributedError when it fails.
void random_bytes(void* out, size_t n);
std::string hex(const uint8_t* p, size_t n);

}  // namespace nabla::distributed::crypto
