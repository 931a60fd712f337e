// nabla's thread pool when another process keeps the same cores busy: training steps of a small
// LSTM language model (many short parallel ops, the worst case for a pool whose idle workers spin)
// with the default thread count and with one thread, first on an idle machine and then next to a
// competing process that runs one busy thread per core but one. The contenders run interleaved,
// and the table gives the median and the best step time of each.
//
//   build/bench/contention [--rounds N] [--busy THREADS]
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench/timing.h"
#include "nabla.h"

using namespace nabla;

namespace {

// A child process running `threads` busy threads until it is killed.
pid_t start_busy_process(int threads) {
  pid_t pid = fork();
  if (pid < 0) {
    std::perror("fork");
    std::exit(1);
  }
  if (pid == 0) {
    std::vector<std::thread> ts;
    std::atomic<uint64_t> sink{0};
    for (int i = 0; i < threads; ++i)
      ts.emplace_back([&] {
        uint64_t x = 1;
        for (;;) {
          for (int k = 0; k < 1000000; ++k) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
          sink.fetch_add(x, std::memory_order_relaxed);
        }
      });
    for (auto& t : ts) t.join();
    _exit(0);
  }
  return pid;
}

struct Model {
  nn::Embedding emb{64, 32};
  nn::LSTM lstm{32, 128};
  nn::Linear head{128, 64};
  std::unique_ptr<optim::Adam> opt;
  Tensor tokens, targets;

  Model() {
    std::vector<Tensor> params;
    for (nn::Module* m : std::initializer_list<nn::Module*>{&emb, &lstm, &head})
      for (const Tensor& p : m->parameters()) params.push_back(p);
    opt = std::make_unique<optim::Adam>(params, optim::AdamOptions{.lr = 1e-3});
    manual_seed(0);
    tokens = randint(0, 64, {32, 16});  // (seq, batch)
    targets = randint(0, 64, {32, 16});
  }
  void step() {
    opt->zero_grad();
    Tensor h = lstm.forward(emb.forward(tokens));
    Tensor logits = head.forward(h).reshape({-1, 64});
    nn::functional::cross_entropy(logits, targets.reshape({-1})).backward();
    opt->step();
  }
};

struct Stats {
  double median, best;
};

std::vector<Stats> measure(Model& m, const std::vector<int>& threads, int rounds) {
  const int64_t n = bench::calibrate([&] { m.step(); }, 0.2);
  std::vector<std::vector<double>> per(threads.size());
  for (int r = 0; r < rounds; ++r)
    for (size_t c = 0; c < threads.size(); ++c) {
      set_num_threads(threads[c]);
      bench::settle();
      per[c].push_back(bench::time_batch([&] { m.step(); }, n));
    }
  std::vector<Stats> out;
  for (auto& p : per) out.push_back({bench::median(p), *std::min_element(p.begin(), p.end())});
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 9;
  int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int busy = std::max(1, cores - 1);
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--rounds" && i + 1 < argc) rounds = std::atoi(argv[++i]);
    else if (a == "--busy" && i + 1 < argc) busy = std::atoi(argv[++i]);
    else {
      std::printf("usage: contention [--rounds N] [--busy THREADS]\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  const int dflt = get_num_threads();
  const std::vector<int> threads = {dflt, 1};
  Model m;
  std::printf(
      "LSTM language-model training step (embedding 64x32, LSTM 32->128, seq 32, batch 16, Adam); "
      "%d rounds, interleaved\n\n",
      rounds);
  std::printf(
      "| machine | threads | median step | best step | median vs 1 thread |\n| --- | --- | --- | --- | --- |\n");
  auto report = [&](const char* what, const std::vector<Stats>& s) {
    for (size_t c = 0; c < threads.size(); ++c)
      std::printf("| %s | %d%s | %s | %s | %.2fx |\n", what, threads[c], c == 0 ? " (default)" : "",
                  bench::fmt_time(s[c].median).c_str(), bench::fmt_time(s[c].best).c_str(), s[c].median / s[1].median);
  };
  report("idle", measure(m, threads, rounds));
  pid_t pid = start_busy_process(busy);
  std::string label = "busy (" + std::to_string(busy) + " spinning thread" + (busy > 1 ? "s" : "") + " elsewhere)";
  std::vector<Stats> s = measure(m, threads, rounds);
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  report(label.c_str(), s);
  set_num_threads(dflt);
  return 0;
}
