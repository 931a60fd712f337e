#include "optim/checkpoint.h"

#include <cerrno>
#include <cstdlib>

#include "core/generator.h"
#include "io/file.h"
#include "io/safetensors.h"

namespace nabla::optim {

namespace {

constexpr const char* kFormat = "nabla.checkpoint";
constexpr const char* kVersion = "1";

void add(nn::StateDict& out, const std::string& prefix, const nn::StateDict& part) {
  for (const auto& [k, v] : part) out.insert(prefix + k, v);
}

nn::StateDict part(const nn::StateDict& all, const std::string& prefix) {
  nn::StateDict out;
  for (const auto& [k, v] : all)
    if (k.compare(0, prefix.size(), prefix) == 0) out.insert(k.substr(prefix.size()), v);
  return out;
}

uint64_t parse_u64(const std::string& s, const std::string& what, const std::string& path) {
  errno = 0;
  char* end = nullptr;
  unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || errno != 0 || *end != '\0')
    throw IOError("load_checkpoint: '" + path + "': " + what + " is not a whole number >= 0: " + io::quote_name(s));
  return v;
}

// epoch and step: whole numbers from 0 to INT64_MAX (a negative epoch would train extra epochs).
int64_t parse_count(const std::string& s, const std::string& what, const std::string& path) {
  uint64_t v = parse_u64(s, what, path);
  if (v > static_cast<uint64_t>(INT64_MAX))
    throw IOError("load_checkpoint: '" + path + "': " + what + " is out of range: '" + s + "'");
  return static_cast<int64_t>(v);
}

// Runs f; a nabla error it throws is thrown again, of the same type, with "load_checkpoint:
// '<path>': " before its message.
template <class F>
void naming_file(const std::string& path, F&& f) {
  auto msg = [&](const Error& e) { return "load_checkpoint: '" + path + "': " + e.what(); };
  try {
    f();
  } catch (const ShapeError& e) { throw ShapeError(msg(e)); } catch (const DTypeError& e) {
    throw DTypeError(msg(e));
  } catch (const DeviceError& e) { throw DeviceError(msg(e)); } catch (const IndexError& e) {
    throw IndexError(msg(e));
  } catch (const ValueError& e) { throw ValueError(msg(e)); } catch (const IOError& e) {
    throw IOError(msg(e));
  }
}

std::string rng_string(Device d) {
  Generator::State s = default_generator(d).get_state();
  return std::to_string(s.seed) + " " + std::to_string(s.offset);
}

Generator::State parse_rng(const std::string& s, const std::string& key, const std::string& path) {
  auto sp = s.find(' ');
  if (sp == std::string::npos)
    throw IOError("load_checkpoint: '" + path + "': malformed " + key +
                  " (expected \"<seed> <offset>\"): " + io::quote_name(s));
  return {parse_u64(s.substr(0, sp), key, path), parse_u64(s.substr(sp + 1), key, path)};
}

}  // namespace

void save_checkpoint(const std::string& path, const Checkpoint& c) {
  nn::StateDict all;
  std::string contents;
  if (c.model) {
    add(all, "model.", c.model->state_dict());
    contents += "model";
  }
  if (c.optimizer) {
    add(all, "optimizer.", c.optimizer->state_dict());
    contents += std::string(contents.empty() ? "" : ",") + "optimizer";
  }
  if (c.scheduler) {
    add(all, "scheduler.", c.scheduler->state_dict());
    contents += std::string(contents.empty() ? "" : ",") + "scheduler";
  }
  if (c.scaler) {
    add(all, "scaler.", c.scaler->state_dict());
    contents += std::string(contents.empty() ? "" : ",") + "scaler";
  }
  if (c.loader) contents += std::string(contents.empty() ? "" : ",") + "loader";
  safetensors::Metadata meta;
  meta.emplace("format", std::string(kFormat));
  meta.emplace("format_version", std::string(kVersion));
  meta["contents"] = contents;
  meta["epoch"] = std::to_string(c.epoch);
  meta["step"] = std::to_string(c.step);
  if (c.rng) {
    meta["rng.cpu"] = rng_string(kCPU);
    meta["rng.cuda"] = rng_string(kCUDA);
  }
  if (c.loader) {
    data::LoaderState s = c.loader->state();
    meta["loader"] = std::to_string(s.seed) + " " + std::to_string(s.epoch) + " " + std::to_string(s.index);
  }
  for (const auto& [k, v] : c.metadata) meta["user." + k] = v;
  safetensors::save_file(all, path, meta);
}

void load_checkpoint(const std::string& path, Checkpoint& c) {
  safetensors::File f = safetensors::load_file(path);
  auto meta = [&](const std::string& key) -> const std::string* {
    auto it = f.metadata.find(key);
    return it == f.metadata.end() ? nullptr : &it->second;
  };
  const std::string* format = meta("format");
  if (!format || *format != kFormat)
    throw IOError("load_checkpoint: '" + path + "' is not a nabla training checkpoint (metadata format is " +
                  (format ? io::quote_name(*format) : std::string("missing")) +
                  "); for plain weights use nn::load_weights");
  const std::string* version = meta("format_version");
  if (!version || *version != kVersion)
    throw IOError("load_checkpoint: '" + path + "' has checkpoint format version " +
                  (version ? io::quote_name(*version) : "?") + ", this nabla reads version " + kVersion);
  std::string contents = meta("contents") ? *meta("contents") : "";
  auto has = [&](const std::string& p) { return ("," + contents + ",").find("," + p + ",") != std::string::npos; };
  int64_t epoch = meta("epoch") ? parse_count(*meta("epoch"), "epoch", path) : 0;
  int64_t step = meta("step") ? parse_count(*meta("step"), "step", path) : 0;
  std::optional<Generator::State> cpu_rng, cuda_rng;
  if (c.rng && meta("rng.cpu")) cpu_rng = parse_rng(*meta("rng.cpu"), "rng.cpu", path);
  if (c.rng && meta("rng.cuda")) cuda_rng = parse_rng(*meta("rng.cuda"), "rng.cuda", path);

  auto require = [&](bool target, const char* what) {
    if (target && !has(what))
      throw IOError(std::string("load_checkpoint: '") + path + "' holds no " + what +
                    " state (it has: " + (contents.empty() ? "nothing" : io::quote_name(contents)) + ")");
  };
  require(c.model, "model");
  require(c.optimizer, "optimizer");
  require(c.scheduler, "scheduler");
  require(c.scaler, "scaler");
  require(c.loader, "loader");
  data::LoaderState loader_state;
  if (c.loader) {
    const std::string* s = meta("loader");
    const std::string text = s ? *s : "";
    auto a = text.find(' '), b = a == std::string::npos ? a : text.find(' ', a + 1);
    if (b == std::string::npos)
      throw IOError("load_checkpoint: '" + path +
                    "': malformed loader state (expected \"<seed> <epoch> <index>\"): " + io::quote_name(text));
    loader_state = {parse_u64(text.substr(0, a), "the loader's seed", path),
                    parse_count(text.substr(a + 1, b - a - 1), "the loader's epoch", path),
                    parse_count(text.substr(b + 1), "the loader's index", path)};
  }

  // Each load validates its part completely before it modifies anything; its errors, of their
  // own types, are prefixed with the file's name.
  naming_file(path, [&] {
    if (c.model) c.model->load_state_dict(part(f.tensors, "model."), true);
    if (c.optimizer) c.optimizer->load_state_dict(part(f.tensors, "optimizer."));
    if (c.scheduler) c.scheduler->load_state_dict(part(f.tensors, "scheduler."));
    if (c.scaler) c.scaler->load_state_dict(part(f.tensors, "scaler."));
  });
  if (cpu_rng) default_generator(kCPU).set_state(*cpu_rng);
  if (cuda_rng) default_generator(kCUDA).set_state(*cuda_rng);
  if (c.loader) c.loader->load_state(loader_state);
  c.epoch = epoch;
  c.step = step;
  c.metadata.clear();
  for (const auto& [k, v] : f.metadata)
    if (k.compare(0, 5, "user.") == 0) c.metadata[k.substr(5)] = v;
}

}  // namespace nabla::optim
