#include "distributed/distributed.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "core/cuda_api.h"
#include "distributed/heartbeat.h"
#include "distributed/process_group_gloo.h"
#include "distributed/process_group_nccl.h"

namespace nabla::distributed {

#ifndef NABLA_HAVE_NCCL
bool nccl_built() { return false; }
std::string nccl_version() {
  throw ValueError("nccl_version: this build of nabla has no nccl backend (it comes with the CUDA backend and NCCL)");
}
#endif

namespace {

struct DefaultGroup {
  std::mutex mutex;
  std::unique_ptr<Store> store;  // rank 0's holds the TCP store's server: kept while the group lives
  std::unique_ptr<ProcessGroup> group;
};
DefaultGroup& global() {
  static DefaultGroup g;
  return g;
}

std::string env_or(const char* name, const std::string& fallback = "") {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

int parse_int(const std::string& text, const std::string& what) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(text.c_str(), &end, 10);
  NABLA_CHECK(ValueError, !text.empty() && end && *end == '\0' && errno == 0 && v >= INT32_MIN && v <= INT32_MAX,
              "init_process_group: ", what, "='", text, "' is not an integer");
  return static_cast<int>(v);
}

int env_int(const char* name, int fallback) {
  std::string v = env_or(name);
  return v.empty() ? fallback : parse_int(v, name);
}

// The ranks whose key is not set; when the store itself went away (rank 0 gave up first and
// exited), says so instead.
std::string missing_ranks(Store& store, const std::string& prefix, int world_size) {
  std::string s;
  try {
    for (int r = 0; r < world_size; ++r)
      if (!store.check({prefix + std::to_string(r)})) s += (s.empty() ? "" : ", ") + std::to_string(r);
  } catch (const DistributedError& e) { return internal::str("unknown: ", e.what()); }
  return s;
}

std::vector<std::string> keys_for(const std::string& prefix, int from, int to) {
  std::vector<std::string> keys;
  for (int r = from; r < to; ++r) keys.push_back(prefix + std::to_string(r));
  return keys;
}

// Waits for prefix<r> of every rank in [from, to); names the missing ranks on timeout.
void wait_for_ranks(Store& store, const std::string& prefix, int from, int to, int rank, int world_size,
                    std::chrono::milliseconds timeout, const char* stage) {
  try {
    store.wait(keys_for(prefix, from, to), timeout);
  } catch (const DistributedError&) {
    throw DistributedError(internal::str("init_process_group: rank ", rank, " (world_size ", world_size, ") waited ",
                                         timeout.count(), " ms at ", store.describe(), " for ranks [",
                                         missing_ranks(store, prefix, to), "] to ", stage, "; were all ", world_size,
                                         " processes started, with the same WORLD_SIZE and MASTER_ADDR/MASTER_PORT?"));
  }
}

size_t env_size(const char* name, size_t fallback) {
  std::string v = env_or(name);
  if (v.empty()) return fallback;
  char* end = nullptr;
  errno = 0;
  unsigned long long x = std::strtoull(v.c_str(), &end, 10);
  NABLA_CHECK(ValueError, *end == '\0' && errno == 0 && v[0] != '-' && x > 0, "init_process_group: ", name, "='", v,
              "' is not a positive number of bytes");
  return static_cast<size_t>(x);
}

constexpr size_t kMinSecret = 16;

// The job's secret: the option, else NABLA_STORE_SECRET_FILE's contents (trailing white space
// dropped), else NABLA_STORE_SECRET; "" for none.
std::string job_secret(const InitOptions& options) {
  std::string secret = options.store_secret, from = "InitOptions::store_secret";
  if (secret.empty()) {
    if (std::string path = env_or("NABLA_STORE_SECRET_FILE"); !path.empty()) {
      from = "NABLA_STORE_SECRET_FILE '" + path + "'";
      int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      NABLA_CHECK(ValueError, fd >= 0, "init_process_group: cannot open ", from, ": ", std::strerror(errno));
      struct stat st {};
      ::fstat(fd, &st);
      if (!S_ISREG(st.st_mode) || (st.st_mode & 077) != 0 || st.st_size > 4096) {
        ::close(fd);
        throw ValueError(internal::str("init_process_group: ", from,
                                       !S_ISREG(st.st_mode) ? " is not a regular file"
                                       : st.st_size > 4096  ? " is larger than 4096 bytes"
                                                            : " may be read or written by other users (chmod 600 it)",
                                       " (mode ", std::oct, (st.st_mode & 0777), ")"));
      }
      secret.resize(static_cast<size_t>(st.st_size));
      ssize_t n = ::read(fd, secret.data(), secret.size());
      ::close(fd);
      NABLA_CHECK(ValueError, n == st.st_size, "init_process_group: cannot read ", from);
      while (!secret.empty() && std::isspace(static_cast<unsigned char>(secret.back()))) secret.pop_back();
      NABLA_CHECK(ValueError, !secret.empty(), "init_process_group: ", from, " is empty");
    } else if (std::string v = env_or("NABLA_STORE_SECRET"); !v.empty()) {
      secret = v;
      from = "NABLA_STORE_SECRET";
    }
  }
  NABLA_CHECK(ValueError, secret.empty() || secret.size() >= kMinSecret, "init_process_group: the store's secret (",
              from, ") has ", secret.size(), " bytes; it needs at least ", kMinSecret,
              " (e.g. head -c 32 /dev/urandom | base64)");
  return secret;
}

bool is_loopback(const std::string& address) {  // "127.0.1.1:29500", "[::1]:29500"
  return address.rfind("127.", 0) == 0 || address.rfind("[::1]", 0) == 0;
}

}  // namespace

void init_process_group(const InitOptions& options) {
  auto& g = global();
  std::lock_guard lock(g.mutex);
  NABLA_CHECK(ValueError, !g.group, "init_process_group: already initialized (rank ", g.group ? g.group->rank() : -1,
              "); call destroy_process_group first");
  NABLA_CHECK(ValueError, options.backend == "gloo" || options.backend == "nccl", "init_process_group: backend '",
              options.backend, "' is not one of nabla's: 'gloo' (CPU tensors), 'nccl' (CUDA tensors)");
  NABLA_CHECK(ValueError, options.backend != "nccl" || nccl_built(),
              "init_process_group: backend 'nccl' is not in this ",
              "build of nabla: it is built with the CUDA backend where the CUDA toolkit has NCCL (nccl.h, ",
              "libnccl); use 'gloo' (CPU tensors)");
  // Before the rendezvous: a rank without a GPU says so at once (its peers then name it as missing).
  NABLA_CHECK(DeviceError, options.backend != "nccl" || cuda::is_available(), "init_process_group: rank ",
              options.rank >= 0 ? options.rank : env_int("RANK", -1), " (nccl) needs a CUDA device, and ",
              "there is none here: ", cuda::unavailable_reason(), " (use the gloo backend for CPU tensors)");
  NABLA_CHECK(ValueError, options.timeout.count() > 0, "init_process_group: timeout must be positive, got ",
              options.timeout.count(), " ms");
  int rank = options.rank >= 0 ? options.rank : env_int("RANK", -1);
  int world_size = options.world_size >= 0 ? options.world_size : env_int("WORLD_SIZE", -1);
  NABLA_CHECK(ValueError, rank >= 0,
              "init_process_group: no rank: pass .rank or set RANK (nabla-run and torchrun set it)");
  NABLA_CHECK(ValueError, world_size >= 1, "init_process_group: no world size: pass .world_size or set WORLD_SIZE ",
              "(nabla-run and torchrun set it)");
  NABLA_CHECK(ValueError, rank < world_size, "init_process_group: rank ", rank, " is not below world_size ",
              world_size);

  // Gloo writes to its sockets without MSG_NOSIGNAL: a peer that died would kill this process with
  // SIGPIPE instead of failing the collective with an error. Ignore SIGPIPE (as Python does for
  // PyTorch) unless the program installed a handler of its own.
  struct sigaction old {};
  if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) signal(SIGPIPE, SIG_IGN);

  heartbeat::start_from_env();  // nabla-run's liveness check: from here on it sees this rank wait

  const std::string& m = options.init_method;
  std::unique_ptr<Store> store;
  GlooOptions gloo{
      .timeout = options.timeout, .hostname = {}, .iface = env_or("NABLA_SOCKET_IFNAME", env_or("GLOO_SOCKET_IFNAME"))};
  if (m.rfind("env://", 0) == 0 || m.rfind("tcp://", 0) == 0) {
    std::string host, port_text;
    if (m.rfind("env://", 0) == 0) {
      host = env_or("MASTER_ADDR");
      port_text = env_or("MASTER_PORT");
      NABLA_CHECK(ValueError, !host.empty() && !port_text.empty(), "init_process_group: env:// needs MASTER_ADDR and ",
                  "MASTER_PORT (nabla-run and torchrun set them); MASTER_ADDR='", host, "' MASTER_PORT='", port_text,
                  "'");
    } else {
      std::string hp = m.substr(6);
      auto colon = hp.rfind(':');
      NABLA_CHECK(ValueError, colon != std::string::npos && colon > 0, "init_process_group: '", m,
                  "' is not tcp://host:port");
      host = hp.substr(0, colon);
      port_text = hp.substr(colon + 1);
      if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    }
    int port = parse_int(port_text, "the master port");
    NABLA_CHECK(ValueError, port > 0 && port < 65536, "init_process_group: port ", port, " is not a TCP port");
    TCPStoreOptions so;
    so.secret = job_secret(options);
    so.listen_all = options.store_listen_all || env_or("NABLA_STORE_LISTEN_ALL") == "1";
    // Gloo's full mesh keeps about 136 bytes per pair of ranks (world_size^2 in all).
    so.max_total_bytes = env_size("NABLA_STORE_MAX_BYTES", (size_t(64) << 20) + size_t(512) * world_size * world_size);
    so.max_value_bytes = std::min(env_size("NABLA_STORE_MAX_VALUE_BYTES", size_t(16) << 20), size_t(1) << 31);
    auto tcp = std::make_unique<TCPStore>(host, static_cast<uint16_t>(port), rank == 0, options.timeout, so);
    if (rank == 0) {
      const std::string where = tcp->describe();
      if (so.secret.empty() && env_or("NABLA_STORE_INSECURE") != "1")
        std::fprintf(stderr,
                     "nabla: warning: the rendezvous store at %s has no secret: any process that can reach it can "
                     "read and change the ranks' keys. nabla-run gives its workers one; when you start the ranks "
                     "yourself, give each the same NABLA_STORE_SECRET (16 or more characters) or "
                     "NABLA_STORE_SECRET_FILE (NABLA_STORE_INSECURE=1 silences this warning)\n",
                     where.c_str());
      const auto& at = tcp->server()->listen_addresses();
      const int local = env_int("LOCAL_WORLD_SIZE", world_size);
      if (!so.listen_all && world_size > local && std::all_of(at.begin(), at.end(), is_loopback))
        std::fprintf(stderr,
                     "nabla: warning: rank 0's store listens only on %s (what MASTER_ADDR '%s' resolves to here), but "
                     "WORLD_SIZE %d > LOCAL_WORLD_SIZE %d says other machines take part, and they cannot reach a "
                     "loopback address: set MASTER_ADDR to this machine's address on their network (or "
                     "NABLA_STORE_LISTEN_ALL=1)\n",
                     at.front().c_str(), host.c_str(), world_size, local);
    }
    // Peers reach this process on the interface it reaches the master through.
    if (gloo.iface.empty()) gloo.hostname = tcp->local_address();
    int64_t claims = tcp->add("nabla.rank_claims." + std::to_string(rank), 1);
    NABLA_CHECK(DistributedError, claims == 1, "init_process_group: rank ", rank, " was claimed by ", claims,
                " processes at ", tcp->describe(), "; every process needs its own RANK");
    store = std::move(tcp);
  } else if (m.rfind("file://", 0) == 0) {
    std::string path = m.substr(7);
    NABLA_CHECK(ValueError, !path.empty(), "init_process_group: '", m, "' names no directory (file:///path)");
    store = std::make_unique<FileStore>(path, options.timeout);
  } else {
    throw ValueError(
        internal::str("init_process_group: init_method '", m, "' is not env://, tcp://host:port or file:///path"));
  }
  store->set_timeout(options.timeout);
  std::unique_ptr<ProcessGroup> group;
  try {
    // Everyone announces its world size; a rank that waits for more ranks than were started, or that
    // disagrees about how many there are, says so here rather than inside Gloo.
    std::string ws = std::to_string(world_size);
    store->set("nabla.join." + std::to_string(rank), std::vector<char>(ws.begin(), ws.end()));
    wait_for_ranks(*store, "nabla.join.", 0, world_size, rank, world_size, options.timeout, "join");
    for (int r = 0; r < world_size; ++r) {
      auto v = store->get("nabla.join." + std::to_string(r));
      std::string theirs(v.begin(), v.end());
      NABLA_CHECK(DistributedError, theirs == ws, "init_process_group: rank ", r, " says world_size ", theirs,
                  " but rank ", rank, " says ", ws, " (", store->describe(), ")");
    }

    if (options.backend == "nccl") {
#ifdef NABLA_HAVE_NCCL
      group = std::make_unique<ProcessGroupNccl>(*store, rank, world_size,
                                                 NcclOptions{.timeout = options.timeout, .device = options.device});
#endif
    } else {
      group = std::make_unique<ProcessGroupGloo>(*store, rank, world_size, gloo);
    }

    // Rank 0 hosts the TCP store: it leaves init last, so no rank still reads the store when it
    // could be destroyed.
    std::vector<char> one{'1'};
    store->set("nabla.ready." + std::to_string(rank), one);
    wait_for_ranks(*store, "nabla.ready.", 0, world_size, rank, world_size, options.timeout, "connect");
    if (rank != 0) store->set("nabla.initialized." + std::to_string(rank), one);
    else wait_for_ranks(*store, "nabla.initialized.", 1, world_size, rank, world_size, options.timeout, "finish init");
  } catch (...) {
    if (auto* tcp = dynamic_cast<TCPStore*>(store.get()))
      tcp->close_and_linger(std::min<std::chrono::milliseconds>(options.timeout, std::chrono::seconds(10)));
    throw;
  }

  g.store = std::move(store);
  g.group = std::move(group);
}

bool is_initialized() {
  auto& g = global();
  std::lock_guard lock(g.mutex);
  return g.group != nullptr;
}

void destroy_process_group() {
  auto& g = global();
  std::unique_ptr<ProcessGroup> group;
  std::unique_ptr<Store> store;
  {
    std::lock_guard lock(g.mutex);
    group = std::move(g.group);
    store = std::move(g.store);
  }
  group.reset();  // joins the worker after the queued collectives
  store.reset();
}

ProcessGroup& default_group() {
  auto& g = global();
  std::lock_guard lock(g.mutex);
  NABLA_CHECK(DistributedError, g.group != nullptr,
              "the default process group is not initialized: call distributed::init_process_group first");
  return *g.group;
}

int get_rank() { return default_group().rank(); }
int get_world_size() { return default_group().size(); }
int get_local_rank() { return env_int("LOCAL_RANK", 0); }
int get_local_world_size() { return env_int("LOCAL_WORLD_SIZE", 1); }

namespace {
Work finish(Work w, bool async_op) {
  if (!async_op) w.wait();
  return w;
}
}  // namespace

Work all_reduce(const Tensor& tensor, ReduceOp op, bool async_op) {
  return finish(default_group().all_reduce(tensor, op), async_op);
}
Work broadcast(const Tensor& tensor, int src, bool async_op) {
  return finish(default_group().broadcast(tensor, src), async_op);
}
Work all_gather(const std::vector<Tensor>& outputs, const Tensor& input, bool async_op) {
  return finish(default_group().all_gather(outputs, input), async_op);
}
Work reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op, bool async_op) {
  return finish(default_group().reduce_scatter(output, inputs, op), async_op);
}
Work gather(const Tensor& input, const std::vector<Tensor>& outputs, int dst, bool async_op) {
  return finish(default_group().gather(outputs, input, dst), async_op);
}
Work scatter(const Tensor& output, const std::vector<Tensor>& inputs, int src, bool async_op) {
  return finish(default_group().scatter(output, inputs, src), async_op);
}
void send(const Tensor& tensor, int dst, uint32_t tag) { default_group().send(tensor, dst, tag).wait(); }
void recv(const Tensor& tensor, int src, uint32_t tag) { default_group().recv(tensor, src, tag).wait(); }
Work isend(const Tensor& tensor, int dst, uint32_t tag) { return default_group().send(tensor, dst, tag); }
Work irecv(const Tensor& tensor, int src, uint32_t tag) { return default_group().recv(tensor, src, tag); }
void barrier() { default_group().barrier().wait(); }

}  // namespace nabla::distributed
