// The TCP store's wire protocol, shared by its client (store.cpp) and server (store_server.cpp).
// Internal to distributed/.
//
//   on connect, the server sends its hello (kHelloBytes):
//     "NBST", u8 version, u8 mode (0: open, 1: secret), u16 0, u32 max key bytes, u64 max value
//     bytes, 32 random bytes (the server's nonce Ns)
//   mode 1, the client answers with 32 random bytes Nc and HMAC-SHA256(secret, kClientLabel Ns Nc);
//     the server checks it (constant time) and answers u8 1 and HMAC-SHA256(secret, kServerLabel Ns
//     Nc), which the client checks, or u8 0 and closes. Nothing is read from a connection before it
//     has passed this, and the secret itself never crosses the wire.
//   then requests, one at a time:   u8 command, u32 body bytes, body
//     set:   u32 key bytes, key, value           -> (nothing)
//     get:   key                                 -> u8 found, value
//     add:   i64 delta, key                      -> i64 sum
//     check: u32 n, n x (u32 key bytes, key)     -> u8 all set
//   and each reply:                  u8 status (0 ok, 1 refused), u32 payload bytes, payload
//     (a refusal's payload is the reason, naming the limit).
//   Integers in the host's byte order (every rank of a job runs the same build).
#pragma once

#include <sys/socket.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace nabla::distributed::wire {

enum Command : uint8_t { kSet = 1, kGet = 2, kAdd = 3, kCheck = 4 };
constexpr char kMagic[4] = {'N', 'B', 'S', 'T'};
constexpr uint8_t kVersion = 1;
constexpr uint8_t kModeOpen = 0, kModeSecret = 1;
constexpr size_t kNonceBytes = 32, kTagBytes = 32;
constexpr size_t kHelloBytes = 4 + 1 + 1 + 2 + 4 + 8 + kNonceBytes;
constexpr size_t kProofBytes = kNonceBytes + kTagBytes;
constexpr size_t kHeaderBytes = 5;  // a request's command and body size; a reply's status and size
constexpr char kClientLabel[] = "nabla-store client v1";
constexpr char kServerLabel[] = "nabla-store server v1";
constexpr size_t kEntryOverhead = 64;  // what the server counts per key beyond its bytes

// (resize + memcpy: GCC 12's -Wstringop-overflow misreads vector::insert of a few bytes.)
inline void append(std::vector<char>& m, const void* p, size_t n) {
  size_t at = m.size();
  m.resize(at + n);
  if (n) std::memcpy(m.data() + at, p, n);
}
template <class T>
void put(std::vector<char>& m, T v) {
  append(m, &v, sizeof(T));
}
template <class T>
T get_at(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// The message the proofs are computed over: label, Ns, Nc.
inline std::string proof_message(const char* label, const uint8_t* ns, const uint8_t* nc) {
  std::string m(label);
  m.append(reinterpret_cast<const char*>(ns), kNonceBytes);
  m.append(reinterpret_cast<const char*>(nc), kNonceBytes);
  return m;
}

// Blocking reads and writes of exactly n bytes; false on EOF or error (errno says which).
inline bool read_all(int fd, void* p, size_t n) {
  auto* b = static_cast<char*>(p);
  while (n > 0) {
    ssize_t r = ::recv(fd, b, n, 0);
    if (r == 0) {
      errno = ECONNRESET;
      return false;
    }
    if (r < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    b += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

inline bool write_all(int fd, const void* p, size_t n) {
  auto* b = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t r = ::send(fd, b, n, MSG_NOSIGNAL);
    if (r < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    b += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

}  // namespace nabla::distributed::wire
