// The examples' command lines: `--name value` options, `--switch` flags and positional arguments,
// with a --help text. A mistake (an unknown option, a value that is not a number or is out of range)
// prints what was wrong and how to get help, and exits with status 2.
//
//   Flags flags(argc, argv, "usage: quickstart [--epochs N]\n...");
//   int64_t epochs = flags.integer("epochs", 5, 1, 1000);
//   flags.finish();   // anything not asked for is an error
//
// Switches named in `switches` never take the next argument as their value, so that
// `classify --json photo.jpg` keeps photo.jpg positional.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace examples {

class Flags {
 public:
  Flags(int argc, char** argv, std::string help, const std::set<std::string>& switches = {})
      : program_(argc > 0 ? argv[0] : "example"), help_(std::move(help)) {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "-h" || a == "--help") {
        std::cout << help_;
        std::exit(0);
      }
      if (a.rfind("--", 0) != 0 || a.size() == 2) {
        positional_.push_back(a);
        continue;
      }
      std::string name = a.substr(2), value;
      if (auto eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name.resize(eq);
      } else if (!switches.contains(name) && i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) {
        value = argv[++i];
      } else {
        value = "\x01";  // a switch without a value
      }
      values_[name] = value;
    }
  }

  std::string str(const std::string& name, const std::string& fallback) {
    auto v = take(name);
    if (v && *v == "\x01") usage("--" + name + " needs a value");
    return v ? *v : fallback;
  }
  int64_t integer(const std::string& name, int64_t fallback, int64_t lo, int64_t hi) {
    auto v = take(name);
    if (!v) return fallback;
    char* end = nullptr;
    errno = 0;
    long long x = std::strtoll(v->c_str(), &end, 10);
    if (v->empty() || *end != '\0' || errno == ERANGE || x < lo || x > hi)
      usage("--" + name + " expects a whole number from " + std::to_string(lo) + " to " + std::to_string(hi) +
            ", got '" + shown(*v) + "'");
    return x;
  }
  double number(const std::string& name, double fallback, double lo, double hi) {
    auto v = take(name);
    if (!v) return fallback;
    char* end = nullptr;
    double x = std::strtod(v->c_str(), &end);
    if (v->empty() || *end != '\0' || !(x >= lo && x <= hi))
      usage("--" + name + " expects a number from " + std::to_string(lo) + " to " + std::to_string(hi) + ", got '" +
            shown(*v) + "'");
    return x;
  }
  bool flag(const std::string& name) {
    auto v = take(name);
    if (v && *v != "\x01") usage("--" + name + " takes no value, got '" + *v + "'");
    return v.has_value();
  }
  const std::vector<std::string>& positional() const { return positional_; }

  // Every option given must have been asked for.
  void finish(size_t max_positional = 0) {
    if (!values_.empty()) usage("unknown option --" + values_.begin()->first);
    if (positional_.size() > max_positional) usage("unexpected argument '" + positional_[max_positional] + "'");
  }
  [[noreturn]] void usage(const std::string& problem) const {
    std::cerr << program_ << ": " << problem << " (run with --help for the options)\n";
    std::exit(2);
  }

 private:
  std::optional<std::string> take(const std::string& name) {
    auto it = values_.find(name);
    if (it == values_.end()) return std::nullopt;
    std::string v = it->second;
    values_.erase(it);
    return v;
  }
  static std::string shown(const std::string& v) { return v == "\x01" ? "" : v; }

  std::string program_, help_;
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

}  // namespace examples
