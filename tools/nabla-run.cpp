// nabla-run: start the processes of a data-parallel job, as PyTorch's torchrun.
//
//   nabla-run --nproc-per-node 2 ./train --epochs 3
//
// starts `./train --epochs 3` twice with RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
// GROUP_RANK, MASTER_ADDR and MASTER_PORT set, which distributed::init_process_group() (env://)
// reads. SIGINT, SIGTERM and SIGHUP are forwarded to every worker. When a worker fails, the others
// are stopped (SIGTERM, then SIGKILL after --stop-timeout seconds) and nabla-run exits with the
// failed worker's status (128 + the signal for a worker killed by one).
//
// A POSIX program with no dependency on the library: it only starts, watches and stops processes.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

namespace {

const char* kHelp = R"(usage: nabla-run [options] PROGRAM [ARGS...]

Starts PROGRAM as the workers of a data-parallel training job on this machine, as PyTorch's
torchrun does. Each worker finds the others through distributed::init_process_group(), which
reads the variables nabla-run sets:

  RANK              this worker's number in the whole job, 0 .. WORLD_SIZE-1
  LOCAL_RANK        its number on this machine, 0 .. LOCAL_WORLD_SIZE-1
  WORLD_SIZE        workers in the job (nnodes x nproc-per-node)
  LOCAL_WORLD_SIZE  workers on this machine (nproc-per-node)
  GROUP_RANK        this machine's number (node-rank)
  MASTER_ADDR, MASTER_PORT
                    where rank 0 listens for the others to meet (its rendezvous store)

Options:
  --nproc-per-node N   workers to start on this machine (default 1)
  --nnodes N           machines in the job (default 1); run one nabla-run on each
  --node-rank R        this machine's number, 0 .. nnodes-1 (default 0); node 0 hosts rank 0
  --master-addr A      address of node 0 that every machine can reach (default 127.0.0.1;
                       set it to node 0's IP or host name when nnodes > 1)
  --master-port P      free TCP port on node 0 (default 29500)
  --stop-timeout S     seconds a worker gets to exit after SIGTERM before SIGKILL (default 5)
  -h, --help           this text

Examples:
  nabla-run --nproc-per-node 2 ./mnist train --epochs 1   two workers on this machine
  # two machines with 2 workers each; 10.0.0.1 is node 0:
  node0$ nabla-run --nnodes 2 --node-rank 0 --nproc-per-node 2 --master-addr 10.0.0.1 ./train
  node1$ nabla-run --nnodes 2 --node-rank 1 --nproc-per-node 2 --master-addr 10.0.0.1 ./train

Each worker runs with NABLA_NUM_THREADS=1 when more than one shares the machine and the variable
is not set (as torchrun sets OMP_NUM_THREADS): N workers with N threads each oversubscribe the
cores. Ctrl-C (SIGINT) and SIGTERM are passed on to every worker. When one worker fails, the
others are stopped and nabla-run exits with the failed worker's exit status (128 + signal number
for a worker killed by a signal); 0 when all succeed.
)";

[[noreturn]] void usage_error(const std::string& msg) {
  std::fprintf(stderr, "nabla-run: %s\n(nabla-run --help explains the options)\n", msg.c_str());
  std::exit(2);
}

int parse_int(const std::string& opt, const char* text, int lo, int hi) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(text, &end, 10);
  if (!*text || *end || errno || v < lo || v > hi)
    usage_error(opt + " takes an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got '" + text + "'");
  return static_cast<int>(v);
}

int status_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  return std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
}

struct Worker {
  pid_t pid = -1;
  int rank = 0;
  bool running = false;
};

}  // namespace

int main(int argc, char** argv) {
  int nproc = 1, nnodes = 1, node_rank = 0, port = 29500, stop_timeout = 5;
  std::string addr = "127.0.0.1";
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kHelp, stdout);
      return 0;
    }
    if (a.rfind("--", 0) != 0) break;  // the program
    std::string value;
    auto eq = a.find('=');
    if (eq != std::string::npos) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
    } else {
      if (i + 1 >= argc) usage_error(a + " needs a value");
      value = argv[++i];
    }
    if (a == "--nproc-per-node" || a == "--nproc_per_node") nproc = parse_int(a, value.c_str(), 1, 4096);
    else if (a == "--nnodes") nnodes = parse_int(a, value.c_str(), 1, 1 << 20);
    else if (a == "--node-rank" || a == "--node_rank") node_rank = parse_int(a, value.c_str(), 0, 1 << 20);
    else if (a == "--master-addr" || a == "--master_addr") addr = value;
    else if (a == "--master-port" || a == "--master_port") port = parse_int(a, value.c_str(), 1, 65535);
    else if (a == "--stop-timeout") stop_timeout = parse_int(a, value.c_str(), 0, 3600);
    else usage_error("unknown option " + a);
  }
  if (i >= argc) usage_error("no program to run");
  if (node_rank >= nnodes)
    usage_error("--node-rank " + std::to_string(node_rank) + " must be below --nnodes " + std::to_string(nnodes));
  if (addr.empty()) usage_error("--master-addr is empty");
  char** program = argv + i;

  // Signals arrive through sigtimedwait, never as handlers: block them before starting workers
  // (which get the original mask back before exec).
  sigset_t watched, original;
  sigemptyset(&watched);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&watched, s);
  sigprocmask(SIG_BLOCK, &watched, &original);

  const int world = nnodes * nproc;
  std::vector<Worker> workers(nproc);
  for (int local = 0; local < nproc; ++local) {
    int rank = node_rank * nproc + local;
    pid_t pid = fork();
    if (pid < 0) {
      std::perror("nabla-run: fork");
      for (auto& w : workers)
        if (w.running) kill(w.pid, SIGKILL);
      return 1;
    }
    if (pid == 0) {
      sigprocmask(SIG_SETMASK, &original, nullptr);
      setenv("RANK", std::to_string(rank).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(local).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
      setenv("LOCAL_WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      setenv("GROUP_RANK", std::to_string(node_rank).c_str(), 1);
      setenv("MASTER_ADDR", addr.c_str(), 1);
      setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      if (nproc > 1) setenv("NABLA_NUM_THREADS", "1", 0);
      execvp(program[0], program);
      std::fprintf(stderr, "nabla-run: cannot run %s: %s\n", program[0], std::strerror(errno));
      _exit(127);
    }
    workers[local] = {pid, rank, true};
  }

  int result = 0;          // the exit status nabla-run reports
  bool stopping = false;   // the others are being stopped (a failure or a signal)
  timespec stop_deadline{};
  auto now = [] {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t;
  };
  auto stop_all = [&](int sig) {
    for (auto& w : workers)
      if (w.running) kill(w.pid, sig);
  };
  auto begin_stop = [&] {
    if (stopping) return;
    stopping = true;
    stop_all(SIGTERM);
    stop_deadline = now();
    stop_deadline.tv_sec += stop_timeout;
  };

  int running = nproc;
  bool killed = false;
  while (running > 0) {
    timespec wait{0, 100 * 1000 * 1000};  // re-check the stop deadline every 100 ms
    siginfo_t info;
    int sig = sigtimedwait(&watched, &info, &wait);
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
      std::fprintf(stderr, "nabla-run: got %s; passing it on to the workers\n", strsignal(sig));
      if (result == 0) result = 128 + sig;
      stop_all(sig);
      if (!stopping) {
        stopping = true;
        stop_deadline = now();
        stop_deadline.tv_sec += stop_timeout;
      }
    }
    // Reap whatever has exited (SIGCHLD may merge several exits into one signal).
    for (auto& w : workers) {
      if (!w.running) continue;
      int status;
      if (waitpid(w.pid, &status, WNOHANG) != w.pid) continue;
      w.running = false;
      --running;
      bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
      if (failed && !stopping) {
        std::fprintf(stderr, "nabla-run: rank %d (pid %d) %s; stopping the other %d worker(s)\n", w.rank, w.pid,
                     describe_status(status).c_str(), running);
        result = status_code(status);
        begin_stop();
      }
    }
    if (stopping && running > 0 && !killed) {
      timespec t = now();
      if (t.tv_sec > stop_deadline.tv_sec || (t.tv_sec == stop_deadline.tv_sec && t.tv_nsec >= stop_deadline.tv_nsec)) {
        std::fprintf(stderr, "nabla-run: %d worker(s) still running %d s after SIGTERM: SIGKILL\n", running, stop_timeout);
        stop_all(SIGKILL);
        killed = true;
      }
    }
  }
  return result;
}
