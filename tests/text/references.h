// What the tokenizer tests of this folder share: finding node and the npm references
// (tests/text/install_references.sh installs them into <repo>/.deps/tokenizers/node_modules, or
// $NABLA_TOKENIZERS_NODE_MODULES), and a reference directory made once by scripts and shared by the
// test processes (ctest runs each case as its own).
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#ifndef NABLA_TESTS_DIR
#error "NABLA_TESTS_DIR must name the repository's tests/ folder"
#endif

namespace text_refs {

namespace fs = std::filesystem;

inline std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

inline bool tokenizers_required() { return env_or("NABLA_REQUIRE_TOKENIZERS", "") == "1"; }

inline fs::path tests_dir() { return fs::path(NABLA_TESTS_DIR); }

inline fs::path node_modules() {
  return fs::path(env_or("NABLA_TOKENIZERS_NODE_MODULES",
                         (tests_dir().parent_path() / ".deps" / "tokenizers" / "node_modules").string()));
}

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

inline std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline std::vector<std::string> lines_of(const fs::path& p) {
  std::vector<std::string> out;
  std::istringstream in(slurp(p));
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

// A file of ids, one line of space-separated ids per record.
inline std::vector<std::vector<int32_t>> ids_of(const fs::path& p) {
  std::vector<std::vector<int32_t>> out;
  for (const std::string& line : lines_of(p)) {
    std::vector<int32_t> v;
    std::istringstream ls(line);
    int32_t id;
    while (ls >> id) v.push_back(id);
    out.push_back(std::move(v));
  }
  return out;
}

// Skips (or fails under NABLA_REQUIRE_TOKENIZERS=1) with `why`.
#define SKIP_OR_FAIL(why)                                                                     \
  do {                                                                                        \
    if (text_refs::tokenizers_required()) FAIL() << (why) << " (NABLA_REQUIRE_TOKENIZERS=1)"; \
    GTEST_SKIP() << (why);                                                                    \
  } while (0)

// Removes a temporary directory at exit (NABLA_KEEP_TOKENIZER_REFS=1 keeps it).
struct RemoveAtExit {
  fs::path dir;
  ~RemoveAtExit() {
    if (!dir.empty() && env_or("NABLA_KEEP_TOKENIZER_REFS", "") != "1") {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  }
};

struct ReferenceDir {
  bool ok = false;
  std::string why;  // when !ok
  fs::path dir;
};

// The shell commands that write a reference directory: given the directory, node and python.
using ReferenceCommands =
    std::function<std::vector<std::string>(const std::string& dir, const std::string& node, const std::string& python)>;

// $TMPDIR/<prefix>_<uid>_<hash of the scripts of this folder and the modules' package.json>: made once
// under a lock by `commands` (into a temporary directory renamed into place; a command must write
// manifest.json) and kept for the next processes (NABLA_KEEP_TOKENIZER_REFS=1 also keeps a failed
// attempt's temporary directory). Not ok, with the reason, when node, a module or a command is
// missing or fails.
inline ReferenceDir reference_dir(const std::string& prefix, const std::vector<std::string>& scripts,
                                  const std::vector<std::string>& modules, const ReferenceCommands& commands) {
  static RemoveAtExit remove_at_exit;  // a failed attempt's temporary directory
  ReferenceDir r;
  const fs::path mods = node_modules();
  for (const std::string& m : modules)
    if (!fs::exists(mods / m / "package.json")) {
      r.why = "npm module " + m + " not found in " + mods.string() +
              " (sh tests/text/install_references.sh, or set NABLA_TOKENIZERS_NODE_MODULES)";
      return r;
    }
  const std::string node = env_or("NABLA_NODE", "node");
  const std::string python = env_or("NABLA_PYTHON", "/usr/bin/python3");
  if (std::system((shell_quote(node) + " --version > /dev/null 2>&1").c_str()) != 0) {
    r.why = "node not found (set NABLA_NODE)";
    return r;
  }
  std::string key;
  for (const std::string& f : scripts) key += slurp(tests_dir() / "text" / f);
  for (const std::string& m : modules) key += slurp(mods / m / "package.json");
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016zx", std::hash<std::string>{}(key));
  r.dir = fs::temp_directory_path() / (prefix + "_" + std::to_string(::getuid()) + "_" + hash);
  if (!fs::exists(r.dir / "manifest.json")) {
    const std::string lock_path = r.dir.string() + ".lock";
    const int lock = ::open(lock_path.c_str(), O_CREAT | O_RDWR, 0600);
    if (lock < 0 || ::flock(lock, LOCK_EX) != 0) {
      r.why = "cannot lock " + lock_path;
      return r;
    }
    struct Unlock {
      int fd;
      ~Unlock() { ::close(fd); }
    } unlock{lock};
    if (!fs::exists(r.dir / "manifest.json")) {
      const fs::path tmp = r.dir.string() + ".tmp." + std::to_string(::getpid());
      fs::remove_all(tmp);
      fs::create_directories(tmp);
      remove_at_exit.dir = tmp;
      for (const std::string& cmd : commands(tmp.string(), node, python)) {
        if (std::system(cmd.c_str()) != 0) {
          r.why = "reference command failed: " + cmd;
          return r;
        }
      }
      fs::remove_all(r.dir);
      fs::rename(tmp, r.dir);
    }
  }
  r.ok = true;
  return r;
}

}  // namespace text_refs
