// libFuzzer target: torch_io::load on arbitrary bytes (PyTorch's zip and legacy files, the zip
// reader and the restricted unpickler), from a file and from memory, which must agree. The bytes are
// also loaded as the data.pkl of an archive (with storages data/0 to data/3 of 64 bytes each), since
// a mutated pickle inside a zip mostly fails its CRC before the unpickler sees it. Limits keep every
// input far below the 1 GB RSS limit of the runs (a 4 KB input can still ask for ~4 MB: a deflated
// storage, int8 widened to int32). A value that loads is saved with torch_io::serialize and must
// load back the same (repr, and every tensor's dtype, shape and bytes).
// Seeds: tests/torch_files/*.pt and tests/hostile/torch/*.pt (scripts/fuzz.sh); dictionary: torch.dict.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "fuzz/fuzz_util.h"
#include "io/zip.h"
#include "nabla.h"

namespace {

const nabla::torch_io::LoadOptions kLimits{
    .max_pickle_bytes = 1 << 20, .max_objects = 100'000, .max_memo = 100'000, .max_depth = 200};

// The bytes as data.pkl of an archive with four 64-byte storages.
std::vector<char> as_pickle_archive(const uint8_t* data, size_t size) {
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* f = open_memstream(&buf, &len);
  {
    nabla::zip::Writer w(f, "memory");
    w.add("archive/data.pkl", data, size);
    static const std::vector<unsigned char> storage = [] {
      std::vector<unsigned char> s(64);
      for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<unsigned char>(i * 37 + 11);
      return s;
    }();
    for (int k = 0; k < 4; ++k) w.add("archive/data/" + std::to_string(k), storage.data(), storage.size());
    w.finish();
  }
  std::fclose(f);
  std::vector<char> out(buf, buf + len);
  std::free(buf);
  return out;
}

// Whether two tensors hold the same values, without making a large view contiguous (a file of a
// few hundred bytes may hold an expanded view of 5e8 elements): past a million elements, the same
// strides and the same bytes of the storage they view.
bool same_values(const nabla::Tensor& a, const nabla::Tensor& b) {
  using namespace nabla;
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  if (a.numel() <= (1 << 20)) {
    Tensor x = a.contiguous(), y = b.contiguous();
    return std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
  }
  if (a.strides() != b.strides()) return false;
  int64_t last = 0;
  for (int64_t d = 0; d < a.dim(); ++d) last += (a.sizes()[d] - 1) * a.strides()[d];
  return std::memcmp(a.data_ptr(), b.data_ptr(), static_cast<size_t>(last + 1) * a.element_size()) == 0;
}

// A value that loaded: saved and loaded again, it must come back the same.
void round_trip(const nabla::torch_io::Value& v) {
  using namespace nabla;
  std::vector<char> saved;
  std::string e_save = nabla_fuzz::expect_clean([&] { saved = torch_io::serialize(v); });
  if (!e_save.empty()) nabla_fuzz::finding("torch_io::serialize", e_save.c_str());
  torch_io::Value back = torch_io::load_bytes(saved.data(), saved.size(), "round trip", kLimits);
  if (back.repr() != v.repr()) nabla_fuzz::finding("torch round trip", "the saved value loads back different");
  nn::StateDict a = v.flatten_tensors(), b = back.flatten_tensors();
  for (const auto& [name, t] : a) {
    const Tensor* u = b.find(name);
    if (!u || !same_values(t, *u)) nabla_fuzz::finding("torch round trip", "a tensor loads back different");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace nabla;
  static nabla_fuzz::ScratchFile file("torch.pt");
  const std::string& path = file.write(data, size);
  torch_io::Value from_file, from_memory, wrapped;
  std::string e_file = nabla_fuzz::expect_clean([&] { from_file = torch_io::load(path, kLimits); });
  std::string e_mem = nabla_fuzz::expect_clean([&] {
    from_memory = torch_io::load_bytes(reinterpret_cast<const char*>(data), size, "'" + path + "'", kLimits);
  });
  if (e_file != e_mem) nabla_fuzz::finding("torch_io::load", "loading the file and its bytes disagree");
  if (e_file.empty()) {
    if (from_file.repr() != from_memory.repr())
      nabla_fuzz::finding("torch_io::load", "file and memory load different values");
    round_trip(from_file);
  }
  std::vector<char> archive = as_pickle_archive(data, size);
  if (nabla_fuzz::expect_clean([&] {
        wrapped = torch_io::load_bytes(archive.data(), archive.size(), "wrapped", kLimits);
      }).empty())
    round_trip(wrapped);
  return 0;
}
