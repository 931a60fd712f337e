// io::MappedFile: a read-only mapping of a whole file, its errors, and moves.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "io/file.h"

namespace fs = std::filesystem;
using nabla::io::MappedFile;

namespace {

fs::path temp_dir() {
  fs::path d = fs::temp_directory_path() / ("nabla_mapped_file_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

std::string error_of(const std::string& path) {
  try {
    MappedFile f(path);
  } catch (const nabla::IOError& e) { return e.what(); }
  return "";
}

}  // namespace

TEST(MappedFile, MapsTheBytesOfAFile) {
  const fs::path d = temp_dir();
  std::string bytes(100'003, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7 + 3);
  std::ofstream(d / "data.bin", std::ios::binary) << bytes;
  MappedFile f((d / "data.bin").string());
  ASSERT_EQ(f.size(), bytes.size());
  EXPECT_EQ(std::string(f.data(), f.size()), bytes);
  EXPECT_EQ(f.path(), (d / "data.bin").string());

  // Moves hand the mapping over; the moved-from object holds nothing.
  MappedFile g(std::move(f));
  EXPECT_EQ(f.data(), nullptr);
  EXPECT_EQ(f.size(), 0u);
  EXPECT_EQ(std::string(g.data(), 10), bytes.substr(0, 10));
  std::ofstream(d / "other.bin", std::ios::binary) << "xyz";
  MappedFile h((d / "other.bin").string());
  h = std::move(g);
  EXPECT_EQ(h.size(), bytes.size());
  EXPECT_EQ(h.data()[100'002], bytes[100'002]);

  // An empty file maps to nothing.
  std::ofstream(d / "empty.bin").close();
  MappedFile e((d / "empty.bin").string());
  EXPECT_EQ(e.size(), 0u);
  EXPECT_EQ(e.data(), nullptr);
  fs::remove_all(d);
}

TEST(MappedFile, NamesThePathWhenItCannotMap) {
  const fs::path d = temp_dir();
  const std::string missing = error_of((d / "missing.bin").string());
  EXPECT_NE(missing.find("cannot open '" + (d / "missing.bin").string() + "'"), std::string::npos) << missing;
  EXPECT_NE(missing.find("No such file"), std::string::npos) << missing;
  const std::string dir = error_of(d.string());
  EXPECT_NE(dir.find("not a regular file"), std::string::npos) << dir;
  fs::remove_all(d);
}
