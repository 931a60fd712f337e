#include "examples/mnist/cli.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace mnist {

namespace {
// Edit distance, to suggest the option the user probably meant.
size_t distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t prev = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cur = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, prev + (a[i - 1] == b[j - 1] ? 0 : 1)});
      prev = cur;
    }
  }
  return row[b.size()];
}
}  // namespace

Cli& Cli::option(const std::string& name, const std::string& metavar, const std::string& help,
                 std::string default_value, std::vector<std::string> choices) {
  specs_[name] = Spec{metavar, help, std::move(default_value), std::move(choices), false};
  order_.push_back(name);
  return *this;
}

Cli& Cli::flag(const std::string& name, const std::string& help) {
  specs_[name] = Spec{"", help, "", {}, true};
  order_.push_back(name);
  return *this;
}

Cli& Cli::positional(const std::string& metavar, const std::string& help, bool at_least_one) {
  pos_metavar_ = metavar;
  pos_help_ = help;
  pos_required_ = at_least_one;
  return *this;
}

Cli& Cli::example(const std::string& line) {
  examples_.push_back(line);
  return *this;
}

const Cli::Spec& Cli::spec(const std::string& name) const {
  auto it = specs_.find(name);
  if (it == specs_.end()) throw std::logic_error("mnist: undeclared option --" + name);
  return it->second;
}

bool Cli::parse(int argc, char** argv, int first) {
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(help().c_str(), stdout);
      return false;
    }
    if (a.rfind("--", 0) != 0 || a == "--") {
      if (pos_metavar_.empty()) throw UsageError("unexpected argument '" + a + "'");
      positionals_.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    auto it = specs_.find(name);
    if (it == specs_.end()) {
      std::string best;
      size_t best_d = 3;
      for (const auto& [n, s] : specs_)
        if (size_t d = distance(name, n); d < best_d) best_d = d, best = n;
      throw UsageError("unknown option --" + name + (best.empty() ? "" : " (did you mean --" + best + "?)"));
    }
    const Spec& s = it->second;
    if (s.is_flag) {
      if (has_value) throw UsageError("--" + name + " does not take a value");
      values_[name] = "1";
      continue;
    }
    if (!has_value) {
      if (i + 1 >= argc) throw UsageError("--" + name + " needs a value (" + s.metavar + ")");
      value = argv[++i];
    }
    if (!s.choices.empty() && std::find(s.choices.begin(), s.choices.end(), value) == s.choices.end()) {
      std::string list;
      for (const auto& c : s.choices) list += (list.empty() ? "" : ", ") + c;
      throw UsageError("--" + name + " must be one of " + list + ", got '" + value + "'");
    }
    values_[name] = value;
  }
  if (pos_required_ && positionals_.empty()) throw UsageError("expected at least one " + pos_metavar_);
  return true;
}

std::string Cli::str(const std::string& name) const {
  const Spec& s = spec(name);
  auto it = values_.find(name);
  return it != values_.end() ? it->second : s.default_value;
}

int64_t Cli::integer(const std::string& name, int64_t lo, int64_t hi) const {
  std::string v = str(name);
  auto range = [&] {
    if (lo == INT64_MIN && hi == INT64_MAX) return std::string("a whole number");
    if (hi == INT64_MAX) return "a whole number >= " + std::to_string(lo);
    return "a whole number from " + std::to_string(lo) + " to " + std::to_string(hi);
  };
  errno = 0;
  char* end = nullptr;
  long long r = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || std::isspace(static_cast<unsigned char>(v[0])) || *end != '\0')
    throw UsageError("--" + name + " expects " + range() + ", got '" + v + "'");
  if (errno == ERANGE || r < lo || r > hi) throw UsageError("--" + name + " must be " + range() + ", got " + v);
  return r;
}

double Cli::number(const std::string& name) const {
  std::string v = str(name);
  char* end = nullptr;
  double r = std::strtod(v.c_str(), &end);
  if (v.empty() || std::isspace(static_cast<unsigned char>(v[0])) || *end != '\0' || !std::isfinite(r))
    throw UsageError("--" + name + " expects a finite number, got '" + v + "'");
  return r;
}

bool Cli::is_set(const std::string& name) const {
  spec(name);
  return values_.count(name) > 0;
}

std::string Cli::help() const {
  std::ostringstream os;
  os << "usage: mnist " << command_ << " [options]";
  if (!pos_metavar_.empty()) os << " " << pos_metavar_ << (pos_required_ ? " [...]" : "");
  os << "\n\n" << summary_ << "\n\noptions:\n";
  for (const std::string& n : order_) {
    const Spec& s = specs_.at(n);
    std::string left = "  --" + n + (s.is_flag ? "" : " " + s.metavar);
    os << left << std::string(left.size() < 26 ? 26 - left.size() : 1, ' ') << s.help;
    if (!s.is_flag && !s.default_value.empty()) os << " (default: " << s.default_value << ")";
    os << "\n";
  }
  os << "  -h, --help" << std::string(14, ' ') << "show this help\n";
  if (!pos_metavar_.empty()) os << "\n" << pos_metavar_ << ": " << pos_help_ << "\n";
  if (!examples_.empty()) {
    os << "\nexamples:\n";
    for (const auto& e : examples_) os << "  " << e << "\n";
  }
  return os.str();
}

}  // namespace mnist
