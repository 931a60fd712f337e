// libFuzzer target: load_npy on arbitrary bytes. A file that loads is saved and loaded again and
// must come back equal (dtype, shape, bytes).
#include <cstring>

#include "fuzz/fuzz_util.h"
#include "nabla.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static nabla_fuzz::ScratchFile in("npy-in.npy"), out("npy-out.npy");
  using namespace nabla;
  const std::string& path = in.write(data, size);
  Tensor t;
  nabla_fuzz::expect_clean([&] { t = load_npy(path); });
  if (!t.defined() || t.dtype() == kBFloat16) return 0;
  save_npy(t, out.path());
  Tensor back = load_npy(out.path());
  if (back.dtype() != t.dtype() || back.sizes() != t.sizes() ||
      std::memcmp(back.data_ptr(), t.contiguous().data_ptr(), t.nbytes()) != 0)
    nabla_fuzz::finding("npy round trip", "save_npy(load_npy(file)) does not load back equal");
  return 0;
}
