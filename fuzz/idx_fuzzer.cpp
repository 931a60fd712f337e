// libFuzzer target: read_idx on arbitrary bytes, plain or gzip (chosen by the content), with a
// 64 MB limit so that the largest tensor a hostile header can ask for stays far below the 1 GB
// RSS limit of the runs. A file that loads is written back (plain and gzip) and must read back equal.
#include <cstring>

#include "fuzz/fuzz_util.h"
#include "nabla.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static nabla_fuzz::ScratchFile in("idx-in"), out("idx-out");
  using namespace nabla;
  const std::string& path = in.write(data, size);
  Tensor t;
  nabla_fuzz::expect_clean([&] { t = data::read_idx(path, {.max_bytes = 64 << 20}); });
  if (!t.defined()) return 0;
  for (bool gzip : {false, true}) {
    data::write_idx(out.path(), t, gzip);
    Tensor back = data::read_idx(out.path());  // compared bytewise: NaN != NaN
    if (back.dtype() != t.dtype() || back.sizes() != t.sizes() ||
        std::memcmp(back.data_ptr(), t.data_ptr(), t.nbytes()) != 0)
      nabla_fuzz::finding("IDX round trip", gzip ? "gzip" : "plain");
  }
  return 0;
}
