// A small command-line parser for the mnist program: declared options with help text, --key value
// and --key=value forms, flags, and errors that say what was wrong and what was expected.
#pragma once

#include <climits>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace mnist {

// A usage mistake: the program prints it with a hint to --help and exits with code 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Cli {
 public:
  Cli(std::string command, std::string summary) : command_(std::move(command)), summary_(std::move(summary)) {}

  // An option taking a value; `choices`, when given, lists the allowed values.
  Cli& option(const std::string& name, const std::string& metavar, const std::string& help, std::string default_value,
              std::vector<std::string> choices = {});
  // A flag without a value (false unless given).
  Cli& flag(const std::string& name, const std::string& help);
  // Positional arguments (e.g. image files), described in the help.
  Cli& positional(const std::string& metavar, const std::string& help, bool at_least_one);
  Cli& example(const std::string& line);

  // Parses argv[first...]; returns false when --help was asked (help already printed).
  bool parse(int argc, char** argv, int first);

  std::string str(const std::string& name) const;
  // A whole number from lo to hi (out-of-range values, which strtoll would clamp, are refused).
  int64_t integer(const std::string& name, int64_t lo = INT64_MIN, int64_t hi = INT64_MAX) const;
  // A finite number (not inf or nan).
  double number(const std::string& name) const;
  bool is_set(const std::string& name) const;  // flag given, or option given explicitly
  const std::vector<std::string>& positionals() const { return positionals_; }
  std::string help() const;

 private:
  struct Spec {
    std::string metavar, help, default_value;
    std::vector<std::string> choices;
    bool is_flag = false;
  };
  const Spec& spec(const std::string& name) const;
  std::string command_, summary_, pos_metavar_, pos_help_;
  bool pos_required_ = false;
  std::vector<std::string> order_, examples_;
  std::map<std::string, Spec> specs_;
  std::map<std::string, std::string> values_;
  std::vector<std::string> positionals_;
};

}  // namespace mnist
