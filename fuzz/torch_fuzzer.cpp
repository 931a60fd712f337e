// libFuzzer target: torch_io::load on arbitrary bytes (PyTorch's zip and legacy files, the zip
// reader and the restricted unpickler), from a file and from memory, which must agree. Limits keep
// every input far below the 1 GB RSS limit of the runs (a 4 KB input can still ask for ~4 MB: a
// deflated storage, int8 widened to int32). A value that loads is saved with torch_io::serialize and
// must load back the same (repr, and every tensor's dtype, shape and bytes).
//
// Wiring (fuzz/CMakeLists.txt, scripts/fuzz.sh): add `torch` to NABLA_FUZZ_TARGETS and to the
// script's targets; seeds: tests/torch_files/*.pt and tests/hostile/torch/*.pt; dictionary: torch.dict.
#include <cstring>

#include "fuzz_util.h"
#include "nabla.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace nabla;
  static nabla_fuzz::ScratchFile file("torch.pt");
  const torch_io::LoadOptions limits{.max_pickle_bytes = 1 << 20, .max_objects = 100'000, .max_memo = 100'000, .max_depth = 200};
  const std::string& path = file.write(data, size);
  torch_io::Value from_file, from_memory;
  std::string e_file = nabla_fuzz::expect_clean([&] { from_file = torch_io::load(path, limits); });
  std::string e_mem = nabla_fuzz::expect_clean(
      [&] { from_memory = torch_io::load_bytes(reinterpret_cast<const char*>(data), size, "'" + path + "'", limits); });
  if (e_file != e_mem) nabla_fuzz::finding("torch_io::load", "loading the file and its bytes disagree");
  if (!e_file.empty()) return 0;
  if (from_file.repr() != from_memory.repr()) nabla_fuzz::finding("torch_io::load", "file and memory load different values");

  std::vector<char> saved;
  std::string e_save = nabla_fuzz::expect_clean([&] { saved = torch_io::serialize(from_file); });
  if (!e_save.empty()) nabla_fuzz::finding("torch_io::serialize", e_save.c_str());
  torch_io::Value back = torch_io::load_bytes(saved.data(), saved.size(), "round trip", limits);
  if (back.repr() != from_file.repr()) nabla_fuzz::finding("torch round trip", "the saved value loads back different");
  nn::StateDict a = from_file.flatten_tensors(), b = back.flatten_tensors();
  for (const auto& [name, t] : a) {
    const Tensor* u = b.find(name);
    Tensor x = t.contiguous();
    if (!u || u->dtype() != t.dtype() || u->sizes() != t.sizes() ||
        std::memcmp(u->contiguous().data_ptr(), x.data_ptr(), x.nbytes()) != 0)
      nabla_fuzz::finding("torch round trip", "a tensor loads back different");
  }
  return 0;
}
