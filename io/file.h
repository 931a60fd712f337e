// File helpers shared by every writer in nabla (npy, safetensors, checkpoints): writes go to a
// temporary file in the same directory, are flushed and fsynced, and then renamed over the target,
// so a crash mid-save never leaves a truncated file in place of the previous one.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace nabla::io {

// Calls write(fd-backed stream) on a temporary file next to `path` (<path>.tmp.<pid>.<n>, locked
// while it is written), then atomically replaces `path`. Throws IOError naming the path on any
// failure (and removes the temporary file). Temporary files of `path` that a killed save left
// behind (their process is gone and their lock free) are removed first.
void atomic_write(const std::string& path, const std::function<void(std::FILE*)>& write);

// Reads a whole file; throws IOError naming the path if it cannot. Refuses files over max_bytes.
std::vector<char> read_file(const std::string& path, uint64_t max_bytes = uint64_t(1) << 40);

// A name or string read from an untrusted file, for an error message: quoted, control characters
// escaped, and cut after 80 bytes (at a UTF-8 character boundary) with the full length noted, so a
// hostile file cannot flood or garble a message: 'fc1.weight', 'a\x0Ab', 'xxxx...' (1000000 bytes).
std::string quote_name(const std::string& s);

// Writes all bytes or throws IOError.
void write_all(std::FILE* f, const void* data, size_t n, const std::string& path);

}  // namespace nabla::io
