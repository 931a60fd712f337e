// Inference of examples/mnist's CNN and ResNet-50 in nabla next to ONNX Runtime (CPU) running the same model
// exported by onnx::export_model, with the same thread count, interleaved: each round times a batch
// of calls of each contender in turn and keeps each one's best batch (bench/timing.h). ONNX Runtime
// runs in a Node process (onnxruntime-node, from .deps/onnxruntime: scripts/test.sh installs it)
// that this program drives over a pipe; its times include the Node binding's per-call cost.
//
//   build/bench/onnx_speed [--threads N] [--rounds R] [--no-resnet]
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "bench/timing.h"
#include "examples/mnist/models.h"
#include "nabla.h"
#include "onnx/export.h"
#include "vision/vision.h"

using namespace nabla;

namespace {

// A child process with its stdin and stdout on pipes.
struct Child {
  pid_t pid = -1;
  FILE* in = nullptr;   // what we write to its stdin
  FILE* out = nullptr;  // what we read from its stdout
  std::string ask(const std::string& line) {
    std::fprintf(in, "%s\n", line.c_str());
    std::fflush(in);
    return read_line();
  }
  std::string read_line() {
    char buf[256];
    if (!std::fgets(buf, sizeof(buf), out)) throw std::runtime_error("onnx_speed: the ONNX Runtime process ended");
    return buf;
  }
  ~Child() {
    if (in) std::fclose(in);
    if (out) std::fclose(out);
    if (pid > 0) waitpid(pid, nullptr, 0);
  }
};

void start(Child& c, const std::vector<std::string>& argv) {
  int to_child[2], from_child[2];
  if (pipe(to_child) != 0 || pipe(from_child) != 0) throw std::runtime_error("onnx_speed: pipe failed");
  c.pid = fork();
  if (c.pid == 0) {
    dup2(to_child[0], 0);
    dup2(from_child[1], 1);
    close(to_child[1]);
    close(from_child[0]);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::perror("onnx_speed: cannot run node");
    _exit(127);
  }
  close(to_child[0]);
  close(from_child[1]);
  c.in = fdopen(to_child[1], "w");
  c.out = fdopen(from_child[0], "r");
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, rounds = 5;
  bool with_resnet = true;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--no-resnet")) with_resnet = false;
  }
  std::string root = std::filesystem::path(__FILE__).parent_path().parent_path().string();
  const char* dir_env = std::getenv("NABLA_ORT_DIR");
  std::string ort_dir = dir_env && *dir_env ? dir_env : root + "/.deps/onnxruntime";
  if (!std::filesystem::exists(ort_dir + "/node_modules/onnxruntime-node")) {
    std::fprintf(stderr, "onnx_speed: onnxruntime-node is not in %s (scripts/test.sh installs it)\n", ort_dir.c_str());
    return 1;
  }
  set_num_threads(threads);
  setenv("NABLA_ORT_DIR", ort_dir.c_str(), 1);
  std::printf(
      "nabla (the module, eval, InferenceMode; eager and nabla::compile'd) vs ONNX Runtime 1.30 (the exported graph) "
      "on the CPU, %d thread%s, best of %d interleaved rounds\n\n"
      "| model | batch | nabla eager | nabla compiled | ONNX Runtime | eager / ORT | compiled / ORT |\n"
      "| --- | --- | --- | --- | --- | --- | --- |\n",
      threads, threads == 1 ? "" : "s", rounds);
  std::fflush(stdout);
  struct Row {
    std::string name;
    std::shared_ptr<nn::Module> model;
    Shape sample;  // one input's dims
    std::vector<int64_t> batches;
  };
  manual_seed(0);
  std::vector<Row> rows;
  rows.push_back({"mnist CNN", mnist::make_model("cnn").module, {1, 28, 28}, {1, 8, 64}});
  if (with_resnet) rows.push_back({"ResNet-50", vision::resnet50(), {3, 224, 224}, {1, 8}});
  for (Row& row : rows) {
    {  // running statistics that are not the identity
      autograd::NoGradGuard ng;
      Shape s = row.sample;
      s.insert(s.begin(), 2);
      row.model->forward(randn(s));
    }
    Shape s1 = row.sample;
    s1.insert(s1.begin(), 1);
    std::string file =
        (std::filesystem::temp_directory_path() / ("nabla_onnx_speed_" + std::to_string(getpid()) + ".onnx")).string();
    onnx::export_model(*row.model, {randn(s1)}, file,
                       {.dynamic_axes = {{"input", {{0, "batch"}}}, {"output", {{0, "batch"}}}}});
    row.model->eval();
    std::string dims;
    for (int64_t d : row.sample) dims += (dims.empty() ? "" : ",") + std::to_string(d);
    Child ort;
    start(ort, {"node", root + "/bench/onnx_ort_server.js", file, std::to_string(threads), dims});
    ort.read_line();  // "ready": the session is loaded
    for (int64_t batch : row.batches) {
      Shape s = row.sample;
      s.insert(s.begin(), batch);
      Tensor x = rand(s);
      autograd::InferenceMode im;
      auto run_nabla = [&] { (void)row.model->forward(x); };
      CompiledModule fast = compile(row.model);
      (void)fast(x);  // the capture (its time is not counted)
      auto run_compiled = [&] { (void)fast(x); };
      int64_t n = bench::calibrate(run_nabla, 0.1);
      ort.ask(std::to_string(batch) + " " + std::to_string(n));  // warm-up
      std::vector<double> a, c, b;
      for (int r = 0; r < rounds; ++r) {
        bench::settle();
        a.push_back(bench::time_batch(run_nabla, n));
        bench::settle();
        c.push_back(bench::time_batch(run_compiled, n));
        bench::settle();
        b.push_back(std::stod(ort.ask(std::to_string(batch) + " " + std::to_string(n))));
      }
      double ta = *std::min_element(a.begin(), a.end()), tb = *std::min_element(b.begin(), b.end());
      double tc = *std::min_element(c.begin(), c.end());
      std::printf("| %s | %lld | %s | %s | %s | %.2f | %.2f |\n", row.name.c_str(), static_cast<long long>(batch),
                  bench::fmt_time(ta).c_str(), bench::fmt_time(tc).c_str(), bench::fmt_time(tb).c_str(), ta / tb,
                  tc / tb);
      if (fast.stats().replays == 0)
        std::printf("  (%s ran eagerly: %s)\n", row.name.c_str(), fast.stats().last_fallback.c_str());
      std::fflush(stdout);
    }
    std::filesystem::remove(file);
  }
  return 0;
}
