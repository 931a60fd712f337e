// What the text tests of files share: scratch files, and the check that a bad file's error names the
// file and says what is wrong.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <system_error>
#include <vector>

#include "core/error.h"

namespace text_files {

// The scratch folders of this process, removed when it exits.
struct ScratchDirs {
  std::vector<std::filesystem::path> dirs;
  ~ScratchDirs() {
    std::error_code ec;
    for (const auto& d : dirs) std::filesystem::remove_all(d, ec);
  }
};
inline ScratchDirs scratch_dirs;

// <tmp>/nabla_test_<suite>_<pid>, created once.
inline std::filesystem::path scratch_dir(const std::string& suite) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("nabla_test_" + suite + "_" + std::to_string(::getpid()));
  if (fs::create_directories(dir)) scratch_dirs.dirs.push_back(dir);
  return dir;
}

// <tmp>/nabla_test_<suite>_<pid>/<name> holding `bytes`; its path.
inline std::string scratch_file(const std::string& suite, const std::string& name, const std::string& bytes) {
  const std::filesystem::path dir = scratch_dir(suite);
  std::ofstream(dir / name, std::ios::binary) << bytes;
  return (dir / name).string();
}

// load(path) throws an IOError whose message holds the path and every fragment.
template <class F>
void expect_io_error(F&& load, const std::string& path, std::initializer_list<std::string> fragments) {
  try {
    load(path);
    ADD_FAILURE() << "no error for " << path;
  } catch (const nabla::IOError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(path), std::string::npos) << m;
    for (const auto& f : fragments) EXPECT_NE(m.find(f), std::string::npos) << "lacks " << f << ": " << m;
  }
}

}  // namespace text_files
