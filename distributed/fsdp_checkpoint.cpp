// FullyShardedDataParallel's sharded checkpoints, and the checks the wrapper makes of its ranks.
//
// A checkpoint folder holds index.json and one file per rank, shard-<rank>-of-<world>-<tag>.safetensors:
//   tensors   unit.<u>           this rank's shard of unit u's flat parameter (1-D)
//             optimizer.<key>    the optimizer's state_dict() (its parameters: the shards)
//             module.<name>      rank 0's file only: the frozen parameters and the buffers, which
//                                every rank holds whole (loaded by rank 0 and broadcast)
//   metadata  format "nabla.fsdp.shard", rank, world_size, tag
// index.json: {"format": "nabla.fsdp", "version": 1, "world_size": N, "tag": "<16 hex digits>",
//              "units": [{"name": "", "numel": n, "padded": p}, ...],
//              "files": [{"rank": r, "file": "shard-...", "sha256": "<64 hex digits>"}, ...]}
// Every save writes files under a fresh tag; once every rank wrote its file, rank 0 writes the
// index as index-<tag>.json and then replaces index.json with it (each atomically), and removes the
// files of tags older than the previous save's: the last two saves stay loadable, so a checkpoint
// written next to the shards (the mnist and gpt programs' model, scheduler and loader) that
// records the tag it goes with still finds its shards if the program dies between the two saves.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/graph.h"
#include "core/ops.h"
#include "distributed/fsdp_internal.h"
#include "distributed/sha256.h"
#include "io/file.h"
#include "io/safetensors.h"

namespace nabla::nn::parallel {

namespace dist = nabla::distributed;
namespace fs = std::filesystem;

namespace {

constexpr const char* kWho = "FullyShardedDataParallel";

std::string shard_file(int rank, int world, const std::string& tag) {
  return "shard-" + std::to_string(rank) + "-of-" + std::to_string(world) + "-" + tag + ".safetensors";
}

// All ranks' 32-byte digests, everywhere.
std::vector<std::string> gather_digests(dist::ProcessGroup& group, const dist::crypto::Digest& mine) {
  Tensor in = zeros({32}, dtype(kUInt8));
  std::copy(mine.begin(), mine.end(), static_cast<uint8_t*>(in.data_ptr()));
  std::vector<Tensor> out;
  for (int r = 0; r < group.size(); ++r) out.push_back(zeros({32}, dtype(kUInt8)));
  group.all_gather(out, in).wait();
  std::vector<std::string> hexes;
  for (const Tensor& t : out) hexes.push_back(dist::crypto::hex(static_cast<const uint8_t*>(t.data_ptr()), 32));
  return hexes;
}

// True on every rank when `ok` is true on all of them.
bool all_ok(dist::ProcessGroup& group, bool ok) {
  Tensor t = full({1}, ok ? 1.0 : 0.0, dtype(kFloat64));
  group.all_reduce(t, dist::ReduceOp::min).wait();
  return t.item<double>() > 0.5;
}

}  // namespace

void check_same_units(dist::ProcessGroup& group, const Units& units, const char* who) {
  if (group.size() == 1) return;
  std::vector<int64_t> sig{static_cast<int64_t>(units.size())};
  for (const auto& u : units) {
    sig.push_back(static_cast<int64_t>(u->params.size()));
    for (const Tensor& p : u->params) sig.push_back(p.numel() * 16 + static_cast<int64_t>(p.dtype()));
  }
  Tensor len = full({1}, static_cast<int64_t>(sig.size()), dtype(kInt64));
  std::vector<Tensor> lens;
  for (int r = 0; r < group.size(); ++r) lens.push_back(zeros({1}, dtype(kInt64)));
  group.all_gather(lens, len).wait();
  bool same = true;
  for (const Tensor& l : lens) same = same && l.item<int64_t>() == static_cast<int64_t>(sig.size());
  if (same) {
    std::vector<Tensor> all;
    for (int r = 0; r < group.size(); ++r) all.push_back(zeros({static_cast<int64_t>(sig.size())}, dtype(kInt64)));
    group.all_gather(all, tensor(sig, dtype(kInt64))).wait();
    for (const Tensor& a : all) same = same && equal(a, all[0]);
  }
  NABLA_CHECK(dist::DistributedError, same, who,
              ": the ranks built different units (their parameters' sizes or dtypes "
              "differ; rank ",
              group.rank(), " has ", units.size(),
              " units): every rank must wrap the same model with the "
              "same policy");
}

void check_no_partial_backward(const Units& units, size_t done, size_t expecting, const char* who) {
  if (expecting == 0 || done == expecting) return;
  std::string missing;
  bool any = done > 0;
  for (const auto& u : units)
    for (size_t k = 0; k < u->params.size(); ++k) {
      if (u->ready[k]) any = true;
      if (u->expect[k] && !u->ready[k]) missing += (missing.empty() ? "'" : ", '") + u->names[k] + "'";
    }
  if (!any) return;  // a forward without a backward after it: nothing is half done
  throw dist::DistributedError(internal::str(
      who, ": the previous backward produced no gradient for ", missing,
      ", so the gradients were not reduce-scattered; every parameter the output depends on must get a gradient"));
}

std::string FullyShardedDataParallel::save_sharded(const std::string& dir, const optim::Optimizer* optimizer) {
  // A fresh tag for this save's files, rank 0's, everywhere.
  Tensor tag_t = zeros({1}, dtype(kInt64));
  if (rank_ == 0) {
    int64_t v = 0;
    dist::crypto::random_bytes(&v, sizeof v);
    tag_t.fill_(v & 0x7fffffffffffffff);
  }
  group_->broadcast(tag_t, 0).wait();
  char tag[17];
  std::snprintf(tag, sizeof tag, "%016llx", static_cast<unsigned long long>(tag_t.item<int64_t>()));
  std::error_code ec;
  fs::create_directories(dir, ec);
  StateDict sd;
  for (size_t i = 0; i < units_.size(); ++i)
    if (units_[i]->shard.defined()) sd.insert("unit." + std::to_string(i), units_[i]->shard.detach());
  if (optimizer)
    for (const auto& [key, t] : optimizer->state_dict()) sd.insert("optimizer." + key, t);
  if (rank_ == 0)
    for (const auto& [name, t] : whole_tensors()) sd.insert("module." + name, t);
  const std::vector<char> bytes = safetensors::serialize(sd, {{"format", "nabla.fsdp.shard"},
                                                              {"rank", std::to_string(rank_)},
                                                              {"world_size", std::to_string(world_)},
                                                              {"tag", tag}});
  const std::string name = shard_file(rank_, world_, tag);
  bool wrote = true;
  std::string why;
  try {
    io::atomic_write(dir + "/" + name, [&](std::FILE* f) { io::write_all(f, bytes.data(), bytes.size(), name); });
  } catch (const std::exception& e) {
    wrote = false;
    why = e.what();
  }
  const auto digests = gather_digests(*group_, dist::crypto::sha256(std::string_view(bytes.data(), bytes.size())));
  if (!all_ok(*group_, wrote))
    throw IOError(wrote ? internal::str(kWho, ".save_sharded: another rank could not write its file in '", dir,
                                        "'; the previous checkpoint there is unchanged")
                        : internal::str(kWho, ".save_sharded: ", why));
  if (rank_ == 0) {
    std::string previous;  // the tag of the save before this one, whose files stay
    try {
      const std::vector<char> old = io::read_file(dir + "/index.json", 64 << 20);
      previous = nlohmann::json::parse(old.begin(), old.end()).value("tag", "");
    } catch (const std::exception&) {}
    nlohmann::json index{{"format", "nabla.fsdp"}, {"version", 1}, {"world_size", world_}, {"tag", tag}};
    for (const auto& u : units_)
      index["units"].push_back({{"name", u->name}, {"numel", u->numel}, {"padded", u->padded}});
    for (int r = 0; r < world_; ++r)
      index["files"].push_back({{"rank", r}, {"file", shard_file(r, world_, tag)}, {"sha256", digests[r]}});
    const std::string text = index.dump(1) + "\n";
    for (const std::string file : {"index-" + std::string(tag) + ".json", std::string("index.json")})
      io::atomic_write(dir + "/" + file, [&](std::FILE* f) { io::write_all(f, text.data(), text.size(), file); });
    for (const auto& entry : fs::directory_iterator(dir, ec)) {  // the files of older saves
      const std::string f = entry.path().filename().string();
      auto ends = [&](const char* e) {
        return f.size() > std::strlen(e) && f.compare(f.size() - std::strlen(e), std::strlen(e), e) == 0;
      };
      const bool ours =
          (f.rfind("shard-", 0) == 0 && ends(".safetensors")) || (f.rfind("index-", 0) == 0 && ends(".json"));
      if (ours && f.find(tag) == std::string::npos && (previous.empty() || f.find(previous) == std::string::npos))
        fs::remove(entry.path(), ec);
    }
  }
  group_->barrier().wait();
  return tag;
}

void FullyShardedDataParallel::load_sharded(const std::string& dir, optim::Optimizer* optimizer,
                                            const std::string& tag) {
  // Everything is read and checked on every rank before anything changes; then every rank learns
  // whether all of them can go on.
  std::string problem;
  StateDict mine, opt_state, whole;
  try {
    NABLA_CHECK(ValueError, tag.find_first_not_of("0123456789abcdef") == std::string::npos,
                "a shard tag is hex digits, got ", io::quote_name(tag));
    const std::string index_name = tag.empty() ? "index.json" : "index-" + tag + ".json";
    NABLA_CHECK(IOError, fs::exists(dir + "/" + index_name), "'", dir, "' has no ", index_name,
                tag.empty() ? " (it is not a sharded checkpoint)" : " (the shards of that save are gone)");
    const std::vector<char> text = io::read_file(dir + "/" + index_name, 64 << 20);
    nlohmann::json index = nlohmann::json::parse(text.begin(), text.end());
    NABLA_CHECK(IOError, index.value("format", "") == "nabla.fsdp" && index.value("version", 0) == 1, "'", dir,
                "/index.json' is not a nabla FSDP checkpoint index");
    const int saved_world = index.at("world_size").get<int>();
    NABLA_CHECK(ValueError, saved_world == world_, "'", dir, "' was saved by ", saved_world, " ranks; this run has ",
                world_,
                " (a sharded checkpoint resumes on the same world size; "
                "state_dict() gives one that loads on any)");
    const auto& units = index.at("units");
    NABLA_CHECK(ValueError, units.size() == units_.size(), "'", dir, "' holds ", units.size(),
                " units; this model has ", units_.size(), " (wrap it with the same policy)");
    for (size_t i = 0; i < units_.size(); ++i)
      NABLA_CHECK(ValueError, units[i].at("numel").get<int64_t>() == units_[i]->numel, "'", dir, "': unit ", i, " ('",
                  units_[i]->name, "') has ", units[i].at("numel").get<int64_t>(), " elements there and ",
                  units_[i]->numel, " here");
    const auto& entry = index.at("files").at(static_cast<size_t>(rank_));
    const std::string file = entry.at("file").get<std::string>();
    NABLA_CHECK(IOError, file.find('/') == std::string::npos && file.rfind("shard-", 0) == 0, "'", dir,
                "/index.json' names a file outside the checkpoint: ", io::quote_name(file));
    const std::string path = dir + "/" + file;
    NABLA_CHECK(IOError, fs::exists(path), "the shard of rank ", rank_, ", '", path, "', is missing");
    const std::vector<char> bytes = io::read_file(path);
    const auto digest = dist::crypto::sha256(std::string_view(bytes.data(), bytes.size()));
    NABLA_CHECK(IOError, dist::crypto::hex(digest.data(), digest.size()) == entry.at("sha256").get<std::string>(), "'",
                path, "' is damaged or was replaced: its SHA-256 differs from the one index.json recorded");
    auto f = safetensors::deserialize(bytes.data(), bytes.size(), path);
    for (size_t i = 0; i < units_.size(); ++i) {
      if (!units_[i]->shard.defined()) continue;
      const Tensor* t = f.tensors.find("unit." + std::to_string(i));
      NABLA_CHECK(IOError, t && t->dim() == 1 && t->size(0) == units_[i]->shard_numel, "'", path, "' lacks unit ", i,
                  "'s shard of ", units_[i]->shard_numel, " elements");
      mine.insert("unit." + std::to_string(i), *t);
    }
    for (const auto& [key, t] : f.tensors)
      if (key.rfind("optimizer.", 0) == 0) opt_state.insert(key.substr(10), t);
    if (rank_ == 0)
      for (const auto& [name, t] : whole_tensors()) {
        const Tensor* saved = f.tensors.find("module." + name);
        NABLA_CHECK(IOError, saved && saved->sizes() == t.sizes(), "'", path, "' lacks '", name, "' of shape ",
                    t.sizes());
        whole.insert(name, *saved);
      }
    NABLA_CHECK(ValueError, !optimizer || opt_state.size() > 0, "'", path, "' holds no optimizer state");
  } catch (const std::exception& e) { problem = e.what(); }
  if (!all_ok(*group_, problem.empty())) {
    if (!problem.empty()) throw IOError(internal::str(kWho, ".load_sharded: ", problem));
    throw IOError(internal::str(kWho, ".load_sharded: another rank could not read its shard of '", dir,
                                "' (its error says why); nothing was loaded"));
  }
  if (optimizer) optimizer->load_state_dict(opt_state);  // validates before it changes anything
  autograd::NoGradGuard no_grad;
  for (size_t i = 0; i < units_.size(); ++i)
    if (const Tensor* t = mine.find("unit." + std::to_string(i))) units_[i]->shard.detach().copy_(*t);
  for (const auto& [name, t] : whole_tensors()) {
    if (rank_ == 0) t.detach().copy_(*whole.find(name));
    if (world_ > 1) group_->broadcast(t, 0).wait();
  }
  refresh_frozen();
}

}  // namespace nabla::nn::parallel
