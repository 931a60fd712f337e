// torch_load: how fast torch_io::load reads a 100 MB checkpoint, next to what bounds it.
//
//   build/bench/torch_load [--mb 100] [--dir /tmp] [--rounds 7]
//
// Writes a state dict of about --mb MB (25 float32 matrices of 1024x1024 and small tensors) with
// torch_io::save (and, when Debian's python3-torch is installed, the same with torch.save, which is
// the file then read), then reports the best of --rounds:
//   read       open + one pread of the whole file into memory already touched (the bound: a copy
//              from the page cache when warm, the disk when cold)
//   crc32      zlib's CRC-32 over the bytes in memory (the check the reader makes of each storage)
//   load       torch_io::load of the file (and with LoadOptions::check_crc = false)
//   safetensors nabla's safetensors::load_file of the same tensors
//   torch.load PyTorch 1.13's torch.load of the same file (in Python, timed there), when installed
// warm (the file in the page cache) and cold (its pages dropped with posix_fadvise first; a cold
// read then comes from the disk, whatever caches the virtual machine's host keeps).
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/timing.h"
#include "io/zip.h"
#include "nabla.h"

using namespace nabla;

namespace {

void drop_cache(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

size_t file_size(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  std::fseek(f, 0, SEEK_END);
  size_t n = static_cast<size_t>(std::ftell(f));
  std::fclose(f);
  return n;
}

// The whole file into `buf` (memory already touched, as a loader's reused allocations are).
void raw_read(const std::string& path, std::vector<char>& buf) {
  int fd = ::open(path.c_str(), O_RDONLY);
  size_t done = 0;
  while (done < buf.size()) {
    ssize_t got = ::pread(fd, buf.data() + done, buf.size() - done, static_cast<off_t>(done));
    if (got <= 0) break;
    done += static_cast<size_t>(got);
  }
  ::close(fd);
}

template <class F>
double best_of(int rounds, bool cold, const std::string& path, F&& f) {
  double best = 1e30;
  for (int r = 0; r < rounds; ++r) {
    if (cold) drop_cache(path);
    double t0 = bench::now();
    f();
    best = std::min(best, bench::now() - t0);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t mb = 100;
  int rounds = 7;
  std::string dir = "/tmp";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--mb") mb = std::atoll(argv[i + 1]);
    else if (a == "--rounds") rounds = std::atoi(argv[i + 1]);
    else if (a == "--dir") dir = argv[i + 1];
  }
  const std::string pt = dir + "/nabla_bench_torch_load.pt", st = dir + "/nabla_bench_torch_load.safetensors";
  const std::string py = dir + "/nabla_bench_torch_load.py";
  manual_seed(0);
  nn::StateDict sd;
  const int64_t big = std::max<int64_t>(1, mb * 1000 * 1000 / (1024 * 1024 * 4));
  for (int64_t i = 0; i < big; ++i) {
    sd.insert("layer" + std::to_string(i) + ".weight", randn({1024, 1024}));
    sd.insert("layer" + std::to_string(i) + ".bias", randn({1024}));
    sd.insert("layer" + std::to_string(i) + ".num_batches_tracked", scalar_tensor(int64_t(i), dtype(kInt64)));
  }
  torch_io::save(pt, sd);
  safetensors::save_file(sd, st);
  const bool have_torch = std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0;
  if (have_torch) {
    // The file PyTorch itself writes for these tensors: read by both.
    FILE* f = std::fopen(py.c_str(), "w");
    std::fprintf(
        f,
        "import sys, time, torch\n"
        "if sys.argv[1] == 'save':\n"
        "    torch.save(torch.load(sys.argv[2]), sys.argv[2])\n"
        "else:\n"
        "    import os\n"
        "    best = 1e30\n"
        "    for r in range(int(sys.argv[3])):\n"
        "        if sys.argv[4] == 'cold':\n"
        "            fd = os.open(sys.argv[2], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); "
        "os.close(fd)\n"
        "        t0 = time.perf_counter(); torch.load(sys.argv[2]); best = min(best, time.perf_counter() - t0)\n"
        "    print(best)\n");
    std::fclose(f);
    std::system(("/usr/bin/python3 " + py + " save " + pt).c_str());
  }
  const size_t n = file_size(pt);
  const double mbytes = static_cast<double>(n) / 1e6;
  std::printf("checkpoint: %s, %.1f MB (%s), %zu tensors; best of %d rounds\n", pt.c_str(), mbytes,
              have_torch ? "written by torch.save" : "written by torch_io::save", sd.size(), rounds);

  std::vector<char> mem(n);
  {
    FILE* f = std::fopen(pt.c_str(), "rb");
    if (std::fread(mem.data(), 1, n, f) != n) return 1;
    std::fclose(f);
  }
  double crc = best_of(rounds, false, pt, [&] { zip::crc32(mem.data(), n); });
  std::printf("%-36s %9.1f ms %9.0f MB/s\n", "crc32 of the bytes in memory", crc * 1e3, mbytes / crc);
  for (bool cold : {false, true}) {
    const char* tag = cold ? "cold" : "warm";
    double raw = best_of(rounds, cold, pt, [&] { raw_read(pt, mem); });
    double load = best_of(rounds, cold, pt, [&] { torch_io::load(pt); });
    double nocrc = best_of(rounds, cold, pt, [&] { torch_io::load(pt, {.check_crc = false}); });
    double stl = best_of(rounds, cold, st, [&] { safetensors::load_file(st); });
    std::printf("%-36s %9.1f ms %9.0f MB/s\n", (std::string(tag) + ": read (one pread)").c_str(), raw * 1e3,
                mbytes / raw);
    std::printf("%-36s %9.1f ms %9.0f MB/s   %.2fx the read\n", (std::string(tag) + ": torch_io::load").c_str(),
                load * 1e3, mbytes / load, load / raw);
    std::printf("%-36s %9.1f ms %9.0f MB/s   %.2fx the read\n",
                (std::string(tag) + ": torch_io::load, no CRC check").c_str(), nocrc * 1e3, mbytes / nocrc,
                nocrc / raw);
    std::printf("%-36s %9.1f ms %9.0f MB/s   %.2fx the read\n", (std::string(tag) + ": safetensors::load_file").c_str(),
                stl * 1e3, mbytes / stl, stl / raw);
    if (have_torch) {
      std::string cmd = "/usr/bin/python3 " + py + " load " + pt + " " + std::to_string(rounds) + " " + tag;
      FILE* p = popen(cmd.c_str(), "r");
      double t = 0;
      if (std::fscanf(p, "%lf", &t) != 1) t = 0;
      pclose(p);
      if (t > 0)
        std::printf("%-36s %9.1f ms %9.0f MB/s   nabla / torch = %.2f\n",
                    (std::string(tag) + ": torch.load (PyTorch)").c_str(), t * 1e3, mbytes / t, load / t);
    }
  }
  std::remove(pt.c_str());
  std::remove(st.c_str());
  std::remove(py.c_str());
  return 0;
}
