// libFuzzer target: wav::read_info and wav::read on arbitrary bytes. The two agree (same error, or
// the same header), and a file that loads is written back (wav::write) and reads back equal.
#include <cstring>

#include "fuzz/fuzz_util.h"
#include "nabla.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static nabla_fuzz::ScratchFile in("wav-in.wav"), out("wav-out.wav");
  using namespace nabla;
  const std::string& path = in.write(data, size);
  wav::Info info;
  wav::Samples s;
  const std::string e_info = nabla_fuzz::expect_clean([&] { info = wav::read_info(path); });
  const std::string e_read = nabla_fuzz::expect_clean([&] { s = wav::read(path); });
  if (e_info != e_read) nabla_fuzz::finding("wav read_info and read disagree", (e_info + " | " + e_read).c_str());
  if (!s.samples.defined()) return 0;
  if (s.info.num_frames != info.num_frames || s.samples.size(0) != info.num_frames ||
      s.samples.size(1) != info.num_channels)
    nabla_fuzz::finding("wav sizes", "read's samples do not match read_info's header");
  wav::write(out.path(), s.samples, s.info.sample_rate, s.info.encoding, s.info.bits_per_sample);
  wav::Samples back = wav::read(out.path());
  if (back.samples.dtype() != s.samples.dtype() || back.samples.sizes() != s.samples.sizes() ||
      std::memcmp(back.samples.data_ptr(), s.samples.data_ptr(), s.samples.nbytes()) != 0)
    nabla_fuzz::finding("wav round trip", "write(read(file)) does not read back equal");
  return 0;
}
