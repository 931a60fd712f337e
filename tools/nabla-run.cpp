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
// Beyond torchrun:
//   - the job's secret: on one machine nabla-run makes a random one and gives its workers the path of
//     a file only the user can read (NABLA_STORE_SECRET_FILE), which init_process_group reads: rank
//     0's store then serves only processes that prove they know it (distributed/store.h);
//   - a liveness check (--liveness-grace): each worker's heartbeat arrives on a Unix socket
//     (distributed/heartbeat.h), and /proc says each worker's state and CPU time. A worker stopped
//     (kill -STOP) or silent for the grace period, or workers that wait for their peers (or, without
//     heartbeats, use no CPU) for the grace period after a worker exited, end the job with status 124
//     and a message naming the rank.
//
// A POSIX program with no dependency on the library: it only starts, watches and stops processes.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
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
  NABLA_STORE_SECRET_FILE
                    a file holding the job's secret, readable only by you: the store serves only
                    processes that prove they know it (the secret itself never crosses the network)

Options:
  --nproc-per-node N   workers to start on this machine (default 1)
  --nnodes N           machines in the job (default 1); run one nabla-run on each
  --node-rank R        this machine's number, 0 .. nnodes-1 (default 0); node 0 hosts rank 0
  --master-addr A      address of node 0 that every machine can reach (default 127.0.0.1;
                       set it to node 0's IP or host name when nnodes > 1). Rank 0's store
                       listens only there (NABLA_STORE_LISTEN_ALL=1: on every interface)
  --master-port P      free TCP port on node 0 (default 29500)
  --store-secret-file F
                       the job's secret (16 or more characters) in file F, readable only by you
                       (chmod 600); the same on every machine. Default on one machine: a fresh
                       random secret for each job. With --nnodes > 1, give this option or set
                       NABLA_STORE_SECRET (the same value on every machine)
  --no-store-secret    no secret: the store serves anyone who can reach the port (as PyTorch's)
  --liveness-grace S   end the job (status 124) when a worker has been stopped (kill -STOP) or
                       silent for S seconds, or when workers have waited for their peers (or,
                       programs without nabla's heartbeat, used no CPU) for S seconds after a
                       worker exited; the message names the rank. 0: no check (default 60)
  --stop-timeout S     seconds a worker gets to exit after SIGTERM before SIGKILL (default 5)
  -h, --help           this text

Examples:
  nabla-run --nproc-per-node 2 ./mnist train --epochs 1   two workers on this machine
  # two machines with 2 workers each; 10.0.0.1 is node 0; the same secret on both:
  node0$ nabla-run --nnodes 2 --node-rank 0 --nproc-per-node 2 --master-addr 10.0.0.1 --store-secret-file ~/job.secret ./train
  node1$ nabla-run --nnodes 2 --node-rank 1 --nproc-per-node 2 --master-addr 10.0.0.1 --store-secret-file ~/job.secret ./train

Each worker runs with NABLA_NUM_THREADS=1 when more than one shares the machine and the variable
is not set (as torchrun sets OMP_NUM_THREADS): N workers with N threads each oversubscribe the
cores. Ctrl-C (SIGINT) and SIGTERM are passed on to every worker. When one worker fails, the
others are stopped and nabla-run exits with the failed worker's exit status (128 + signal number
for a worker killed by a signal); 124 when the liveness check ended the job; 0 when all succeed.
)";

constexpr int kLivenessStatus = 124;

[[noreturn]] void usage_error(const std::string& msg) {
  std::fprintf(stderr, "nabla-run: %s\n(nabla-run --help explains the options)\n", msg.c_str());
  std::exit(2);
}

int parse_int(const std::string& opt, const char* text, int lo, int hi) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(text, &end, 10);
  if (!*text || *end || errno || v < lo || v > hi)
    usage_error(opt + " takes an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got '" + text +
                "'");
  return static_cast<int>(v);
}

int status_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  return std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) +
         ")";
}

double now_s() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// ---- the job's secret -----------------------------------------------------------------------------

// A fresh random secret in a file only this user can read, in a directory of its own; removed at exit.
struct SecretFile {
  std::string dir, path;
  bool make() {
    unsigned char raw[32];
    for (size_t got = 0; got < sizeof raw;) {
      ssize_t r = getrandom(raw + got, sizeof raw - got, 0);
      if (r < 0 && errno != EINTR) return false;
      if (r > 0) got += static_cast<size_t>(r);
    }
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/nabla-run.XXXXXX";
    if (!mkdtemp(tmpl.data())) return false;  // mode 0700
    dir = tmpl;
    path = dir + "/store-secret";
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return false;
    char text[65];
    for (int i = 0; i < 32; ++i) std::snprintf(text + 2 * i, 3, "%02x", raw[i]);
    bool ok = write(fd, text, 64) == 64;
    close(fd);
    return ok;
  }
  ~SecretFile() {
    if (!path.empty()) unlink(path.c_str());
    if (!dir.empty()) rmdir(dir.c_str());
  }
};

// ---- liveness -------------------------------------------------------------------------------------

// distributed/heartbeat.h's Record (nabla-run does not link the library).
struct Beat {
  uint32_t magic, version, waiting, waiting_ms;
  uint64_t waits_done;
};
constexpr uint32_t kBeatMagic = 0x4e424842;

struct Worker {
  pid_t pid = -1;
  int rank = 0;
  bool running = false;
  int beat_fd = -1;           // nabla-run's end of the heartbeat socket
  double last_beat = -1;      // when the last beat came (-1: none yet)
  Beat beat{};                // the last beat
  char state = '?';           // of the process (or the stopped one of its tree): R, S, D, T, t, Z
  pid_t stopped_pid = -1;     // a process of its tree that is stopped
  double stopped_since = -1;  // since when it has been seen stopped (-1: not stopped)
  long long cpu = -1;         // CPU ticks of its process tree at the last sample
  double last_busy = -1;      // the last sample at which it had used CPU
};

// A process's state and CPU ticks (its own and its reaped children's) from /proc/<pid>/stat; false
// when it is gone.
struct ProcInfo {
  char state = '?';
  long long ticks = 0;
};
bool read_stat(pid_t pid, ProcInfo& out) {
  char path[64], buf[1024];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = 0;
  const char* p = std::strrchr(buf, ')');  // the command name may hold anything, up to the last ')'
  if (!p || p[1] != ' ' || !p[2]) return false;
  // after the state: ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime stime
  // cutime cstime (the last two: children it has reaped, so a shell's finished commands count)
  long long f[14] = {};
  if (std::sscanf(p + 3, "%lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld", &f[0], &f[1], &f[2],
                  &f[3], &f[4], &f[5], &f[6], &f[7], &f[8], &f[9], &f[10], &f[11], &f[12], &f[13]) != 14)
    return false;
  out.state = p[2];
  out.ticks = f[10] + f[11] + f[12] + f[13];
  return true;
}

// The children of every thread of pid (/proc/<pid>/task/<tid>/children).
void add_children(pid_t pid, std::vector<pid_t>& out) {
  std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(dir.c_str());
  if (!d) return;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    int fd = open((dir + "/" + e->d_name + "/children").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) continue;
    buf[n] = 0;
    for (char* p = buf; *p;) {
      char* end = nullptr;
      long c = std::strtol(p, &end, 10);
      if (end == p) break;
      if (c > 0) out.push_back(static_cast<pid_t>(c));
      p = end;
    }
  }
  closedir(d);
}

class Liveness {
 public:
  Liveness(std::vector<Worker>& workers, int grace) : workers_(workers), grace_(grace) {}
  bool on() const { return grace_ > 0; }

  // Takes every beat that has arrived.
  void read_beats(double now) {
    for (auto& w : workers_) {
      if (w.beat_fd < 0) continue;
      Beat b;
      ssize_t n;
      while ((n = recv(w.beat_fd, &b, sizeof b, MSG_DONTWAIT)) == static_cast<ssize_t>(sizeof b))
        if (b.magic == kBeatMagic && b.version == 1) {
          w.beat = b;
          w.last_beat = now;
        }
    }
  }

  // A worker exited with status 0 while others run: from now on, waiting for peers is a hang.
  void exited(const Worker& w, double now) {
    if (exit_rank_ < 0) {
      exit_rank_ = w.rank;
      exit_time_ = now;
    }
  }

  // Samples /proc (once a second) and judges; returns the reason to end the job, or "".
  std::string check(double now) {
    if (!on() || now - last_sample_ < 1.0) return "";
    last_sample_ = now;
    for (auto& w : workers_) {
      if (!w.running) continue;
      // The worker's process tree (a shell that runs the real program counts as the program).
      long long ticks = 0;
      pid_t stopped = -1;
      char state = '?';
      bool seen = false;
      std::vector<pid_t> todo{w.pid};
      for (size_t i = 0; i < todo.size() && i < 4096; ++i) {
        ProcInfo p;
        if (!read_stat(todo[i], p)) continue;
        if (todo[i] == w.pid) {
          seen = true;
          state = p.state;
        }
        ticks += p.ticks;
        if ((p.state == 'T' || p.state == 't') && stopped < 0) {
          stopped = todo[i];
          state = p.state;
        }
        add_children(todo[i], todo);
      }
      w.state = state;
      if (stopped >= 0) {
        if (w.stopped_since < 0 || w.stopped_pid != stopped) w.stopped_since = now;
        w.stopped_pid = stopped;
      } else {
        w.stopped_since = -1;
        w.stopped_pid = -1;
      }
      // Busy: 2 ticks (20 ms at 100 Hz) or more since the last sample; a thread polling for its
      // peers every 10 ms uses less than that.
      if (w.cpu < 0 || ticks - w.cpu >= 2 || !seen) w.last_busy = now;  // no /proc: never idle
      w.cpu = ticks;
    }
    for (auto& w : workers_) {
      if (!w.running) continue;
      double stopped = w.stopped_since >= 0 ? now - w.stopped_since : -1;
      double silent = w.last_beat >= 0 ? now - w.last_beat : -1;
      if (stopped >= 0 && std::max(stopped, silent) >= grace_)
        return who(w) + " has made no progress for " + secs(std::max(stopped, silent)) + ": it is stopped (state " +
               w.state + ", pid " + std::to_string(w.stopped_pid) +
               ": kill -STOP, Ctrl-Z or a debugger), and its peers cannot go on without it";
      if (silent >= grace_)
        return who(w) + " has sent no heartbeat for " + secs(silent) + " (state " + w.state +
               "): it is frozen, and its peers cannot go on without it";
    }
    if (exit_rank_ >= 0) {
      for (auto& w : workers_) {
        if (!w.running) continue;
        double since_exit = now - exit_time_, stuck = -1;
        std::string how;
        if (w.last_beat >= 0) {
          if (w.beat.waiting > 0) {
            stuck = std::min(since_exit, w.beat.waiting_ms / 1000.0 + (now - w.last_beat));
            how = "has been waiting for its peers";
          }
        } else {
          stuck = std::min(since_exit, now - w.last_busy);
          how = "has used no CPU";
        }
        if (stuck >= grace_)
          return who(w) + " " + how + " for " + secs(stuck) + " since rank " + std::to_string(exit_rank_) +
                 " exited (status 0): a collective cannot finish without every rank";
      }
    }
    return "";
  }

  // What each running worker is doing, for the message that ends the job.
  std::string report(double now) const {
    std::string s;
    for (auto& w : workers_) {
      if (!w.running) continue;
      s += "  " + who(w) + ": state " + std::string(1, w.state);
      if (w.last_beat >= 0)
        s += ", last heartbeat " + secs(now - w.last_beat) + " ago" +
             (w.beat.waiting ? ", waiting for its peers for " + secs(w.beat.waiting_ms / 1000.0) : std::string(""));
      else s += ", no heartbeat (not a nabla program, or before init_process_group)";
      s += "\n";
    }
    return s;
  }

 private:
  static std::string who(const Worker& w) {
    return "rank " + std::to_string(w.rank) + " (pid " + std::to_string(w.pid) + ")";
  }
  static std::string secs(double s) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f s", s);
    return b;
  }
  std::vector<Worker>& workers_;
  int grace_;
  double last_sample_ = -1e9;
  int exit_rank_ = -1;
  double exit_time_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  int nproc = 1, nnodes = 1, node_rank = 0, port = 29500, stop_timeout = 5, grace = 60;
  std::string addr = "127.0.0.1", secret_file;
  bool no_secret = false;
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kHelp, stdout);
      return 0;
    }
    if (a.rfind("--", 0) != 0) break;  // the program
    if (a == "--no-store-secret") {
      no_secret = true;
      continue;
    }
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
    else if (a == "--liveness-grace") grace = parse_int(a, value.c_str(), 0, 7 * 24 * 3600);
    else if (a == "--store-secret-file") secret_file = value;
    else usage_error("unknown option " + a);
  }
  if (i >= argc) usage_error("no program to run");
  if (node_rank >= nnodes)
    usage_error("--node-rank " + std::to_string(node_rank) + " must be below --nnodes " + std::to_string(nnodes));
  if (addr.empty()) usage_error("--master-addr is empty");
  char** program = argv + i;

  // The job's secret: given (the option, or the variables already set), made here, or none.
  const char* env_secret = std::getenv("NABLA_STORE_SECRET");
  const char* env_file = std::getenv("NABLA_STORE_SECRET_FILE");
  const bool inherited = (env_secret && *env_secret) || (env_file && *env_file);
  if (no_secret && (!secret_file.empty() || inherited))
    usage_error(
        "--no-store-secret conflicts with " +
        std::string(!secret_file.empty() ? "--store-secret-file" : "NABLA_STORE_SECRET(_FILE) in the environment"));
  SecretFile made;
  if (!secret_file.empty()) {
    struct stat st {};
    if (stat(secret_file.c_str(), &st) != 0)
      usage_error("--store-secret-file " + secret_file + ": " + std::strerror(errno));
    if (!S_ISREG(st.st_mode) || (st.st_mode & 077) != 0)
      usage_error("--store-secret-file " + secret_file + " must be a file only you can read (chmod 600 it)");
    if (secret_file[0] != '/') {  // the workers may change directory
      char cwd[4096];
      if (getcwd(cwd, sizeof cwd)) secret_file = std::string(cwd) + "/" + secret_file;
    }
  } else if (!no_secret && !inherited) {
    if (nnodes > 1)
      usage_error(
          "with --nnodes > 1 every machine needs the same secret: pass --store-secret-file FILE (16 or more "
          "characters, chmod 600, the same on every machine) or set NABLA_STORE_SECRET to the same value on "
          "each; --no-store-secret runs without one (then anyone who can reach the master port can join)");
    if (!made.make()) {
      std::fprintf(stderr, "nabla-run: cannot write the job's secret in %s: %s\n",
                   made.dir.empty() ? "TMPDIR" : made.dir.c_str(), std::strerror(errno));
      return 1;
    }
    secret_file = made.path;
  }

  // Signals arrive through sigtimedwait, never as handlers: block them before starting workers
  // (which get the original mask back before exec).
  sigset_t watched, original;
  sigemptyset(&watched);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&watched, s);
  sigprocmask(SIG_BLOCK, &watched, &original);

  const int world = nnodes * nproc;
  std::vector<Worker> workers(nproc);
  Liveness liveness(workers, grace);
  const std::string interval_ms = std::to_string(std::max(100, std::min(1000, grace * 1000 / 5)));
  for (int local = 0; local < nproc; ++local) {
    int rank = node_rank * nproc + local;
    int sv[2] = {-1, -1};
    if (liveness.on() && socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) != 0) sv[0] = sv[1] = -1;
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
      if (!secret_file.empty()) setenv("NABLA_STORE_SECRET_FILE", secret_file.c_str(), 1);
      if (no_secret) setenv("NABLA_STORE_INSECURE", "1", 1);  // asked for: no warning in every worker
      if (sv[1] >= 0) {  // the heartbeat socket, named by descriptor, device and inode
        struct stat st {};
        fstat(sv[1], &st);
        fcntl(sv[1], F_SETFD, 0);
        std::string id = std::to_string(sv[1]) + ":" + std::to_string(static_cast<unsigned long long>(st.st_dev)) +
                         ":" + std::to_string(static_cast<unsigned long long>(st.st_ino));
        setenv("NABLA_HEARTBEAT_FD", id.c_str(), 1);
        setenv("NABLA_HEARTBEAT_INTERVAL_MS", interval_ms.c_str(), 1);
      } else {
        unsetenv("NABLA_HEARTBEAT_FD");
      }
      execvp(program[0], program);
      std::fprintf(stderr, "nabla-run: cannot run %s: %s\n", program[0], std::strerror(errno));
      _exit(127);
    }
    if (sv[1] >= 0) close(sv[1]);
    workers[local] = {};
    workers[local].pid = pid;
    workers[local].rank = rank;
    workers[local].running = true;
    workers[local].beat_fd = sv[0];
  }

  int result = 0;         // the exit status nabla-run reports
  bool stopping = false;  // the others are being stopped (a failure or a signal)
  double stop_deadline = 0;
  auto stop_all = [&](int sig) {
    for (auto& w : workers)
      if (w.running) {
        kill(w.pid, sig);
        if (sig != SIGKILL) kill(w.pid, SIGCONT);  // a stopped worker acts on it only once continued
      }
  };
  auto begin_stop = [&] {
    if (stopping) return;
    stopping = true;
    stop_all(SIGTERM);
    stop_deadline = now_s() + stop_timeout;
  };

  int running = nproc;
  bool killed = false;
  while (running > 0) {
    timespec wait{0, 100 * 1000 * 1000};  // re-check the stop deadline and the liveness every 100 ms
    siginfo_t info;
    int sig = sigtimedwait(&watched, &info, &wait);
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
      std::fprintf(stderr, "nabla-run: got %s; passing it on to the workers\n", strsignal(sig));
      if (result == 0) result = 128 + sig;
      stop_all(sig);
      if (!stopping) {
        stopping = true;
        stop_deadline = now_s() + stop_timeout;
      }
    }
    const double now = now_s();
    liveness.read_beats(now);
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
      } else if (!failed) {
        liveness.exited(w, now);
      }
    }
    if (!stopping && running > 0) {
      std::string why = liveness.check(now);
      if (!why.empty()) {
        std::fprintf(stderr, "nabla-run: %s; stopping the job (--liveness-grace %d)\n%s", why.c_str(), grace,
                     liveness.report(now).c_str());
        result = kLivenessStatus;
        begin_stop();
      }
    }
    if (stopping && running > 0 && !killed && now >= stop_deadline) {
      std::fprintf(stderr, "nabla-run: %d worker(s) still running %d s after SIGTERM: SIGKILL\n", running,
                   stop_timeout);
      stop_all(SIGKILL);
      killed = true;
    }
  }
  for (auto& w : workers)
    if (w.beat_fd >= 0) close(w.beat_fd);
  return result;
}
