#include "distributed/process_group_nccl.h"

#include <dlfcn.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "core/cuda_api.h"
#include "core/graph.h"
#include "core/ops.h"
#include "distributed/nccl_plan.h"
#include "distributed/nccl_watch.h"

namespace nabla::distributed {

bool nccl_built() { return true; }

namespace {

using nccl_plan::NcclOp;
using nccl_plan::NcclType;
static_assert(static_cast<int>(NcclType::int8) == ncclInt8 && static_cast<int>(NcclType::uint8) == ncclUint8 &&
                  static_cast<int>(NcclType::int32) == ncclInt32 && static_cast<int>(NcclType::uint32) == ncclUint32 &&
                  static_cast<int>(NcclType::int64) == ncclInt64 && static_cast<int>(NcclType::uint64) == ncclUint64 &&
                  static_cast<int>(NcclType::float16) == ncclFloat16 &&
                  static_cast<int>(NcclType::float32) == ncclFloat32 &&
                  static_cast<int>(NcclType::float64) == ncclFloat64 &&
                  static_cast<int>(NcclType::bfloat16) == ncclBfloat16,
              "nccl_plan::NcclType must hold NCCL's ncclDataType_t values");
static_assert(static_cast<int>(NcclOp::sum) == ncclSum && static_cast<int>(NcclOp::prod) == ncclProd &&
                  static_cast<int>(NcclOp::max) == ncclMax && static_cast<int>(NcclOp::min) == ncclMin &&
                  static_cast<int>(NcclOp::avg) == ncclAvg,
              "nccl_plan::NcclOp must hold NCCL's ncclRedOp_t values");
static_assert(NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0), "ncclAvg needs NCCL 2.10 or newer");
static_assert(nccl_watch::kNcclSuccess == ncclSuccess && nccl_watch::kNcclInProgress == ncclInProgress,
              "nccl_watch's status values must be NCCL's");
using nccl_watch::Stage;

ncclDataType_t to_nccl(NcclType t) { return static_cast<ncclDataType_t>(static_cast<int>(t)); }
ncclRedOp_t to_nccl(NcclOp o) { return static_cast<ncclRedOp_t>(static_cast<int>(o)); }

// ---- libnccl, opened at run time ------------------------------------------------------------------
// Not linked: a CUDA build of libnabla_distributed then loads where NCCL is missing (the gloo backend
// works there), and the nccl backend says why it cannot run.

struct NcclLibrary {
  std::string error;  // why it could not be loaded; empty when it was
  std::string path;
  int version = 0;
  decltype(&::ncclGetVersion) ncclGetVersion = nullptr;
  decltype(&::ncclGetErrorString) ncclGetErrorString = nullptr;
  decltype(&::ncclGetLastError) ncclGetLastError = nullptr;  // optional (NCCL 2.13)
  decltype(&::ncclGetUniqueId) ncclGetUniqueId = nullptr;
  decltype(&::ncclCommInitRank) ncclCommInitRank = nullptr;
  // Optional (NCCL 2.14): a non-blocking communicator, whose setup and teardown obey the timeout.
  // Without them (an older NCCL) setup blocks until every rank has joined, as ncclCommInitRank does.
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
  decltype(&::ncclCommInitRankConfig) ncclCommInitRankConfig = nullptr;
  decltype(&::ncclCommFinalize) ncclCommFinalize = nullptr;
#else  // built against an older nccl.h: the blocking setup only
  void* ncclCommInitRankConfig = nullptr;
  void* ncclCommFinalize = nullptr;
#endif
  decltype(&::ncclCommDestroy) ncclCommDestroy = nullptr;
  decltype(&::ncclCommAbort) ncclCommAbort = nullptr;
  decltype(&::ncclCommGetAsyncError) ncclCommGetAsyncError = nullptr;
  decltype(&::ncclAllReduce) ncclAllReduce = nullptr;
  decltype(&::ncclBroadcast) ncclBroadcast = nullptr;
  decltype(&::ncclAllGather) ncclAllGather = nullptr;
  decltype(&::ncclReduceScatter) ncclReduceScatter = nullptr;
  decltype(&::ncclSend) ncclSend = nullptr;
  decltype(&::ncclRecv) ncclRecv = nullptr;
  decltype(&::ncclGroupStart) ncclGroupStart = nullptr;
  decltype(&::ncclGroupEnd) ncclGroupEnd = nullptr;
};

template <class F>
void load_symbol(void* handle, const char* name, F& f, std::string& error, bool required = true) {
  f = reinterpret_cast<F>(dlsym(handle, name));
  if (!f && required && error.empty()) error = internal::str("the NCCL library has no symbol ", name, " (too old?)");
}

const NcclLibrary& api() {
  static const NcclLibrary lib = [] {
    NcclLibrary l;
    std::vector<std::string> candidates;
    if (const char* p = std::getenv("NABLA_NCCL_LIBRARY"); p && *p) candidates.emplace_back(p);
    candidates.emplace_back("libnccl.so.2");
#ifdef NABLA_NCCL_LIBRARY_PATH
    candidates.emplace_back(NABLA_NCCL_LIBRARY_PATH);  // where the build found it
#endif
    void* h = nullptr;
    std::string tried;
    for (const std::string& c : candidates) {
      h = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (h) {
        l.path = c;
        break;
      }
      const char* e = dlerror();
      tried += internal::str(tried.empty() ? "" : "; ", e ? e : c.c_str());
    }
    if (!h) {
      l.error = internal::str("cannot load NCCL (libnccl.so.2; NABLA_NCCL_LIBRARY names another file): ", tried);
      return l;
    }
    load_symbol(h, "ncclGetVersion", l.ncclGetVersion, l.error);
    load_symbol(h, "ncclGetErrorString", l.ncclGetErrorString, l.error);
    load_symbol(h, "ncclGetLastError", l.ncclGetLastError, l.error, /*required=*/false);
    load_symbol(h, "ncclGetUniqueId", l.ncclGetUniqueId, l.error);
    load_symbol(h, "ncclCommInitRank", l.ncclCommInitRank, l.error);
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
    load_symbol(h, "ncclCommInitRankConfig", l.ncclCommInitRankConfig, l.error, /*required=*/false);
    load_symbol(h, "ncclCommFinalize", l.ncclCommFinalize, l.error, /*required=*/false);
    if (!l.ncclCommInitRankConfig || !l.ncclCommFinalize)
      l.ncclCommInitRankConfig = nullptr, l.ncclCommFinalize = nullptr;
#endif
    load_symbol(h, "ncclCommDestroy", l.ncclCommDestroy, l.error);
    load_symbol(h, "ncclCommAbort", l.ncclCommAbort, l.error);
    load_symbol(h, "ncclCommGetAsyncError", l.ncclCommGetAsyncError, l.error);
    load_symbol(h, "ncclAllReduce", l.ncclAllReduce, l.error);
    load_symbol(h, "ncclBroadcast", l.ncclBroadcast, l.error);
    load_symbol(h, "ncclAllGather", l.ncclAllGather, l.error);
    load_symbol(h, "ncclReduceScatter", l.ncclReduceScatter, l.error);
    load_symbol(h, "ncclSend", l.ncclSend, l.error);
    load_symbol(h, "ncclRecv", l.ncclRecv, l.error);
    load_symbol(h, "ncclGroupStart", l.ncclGroupStart, l.error);
    load_symbol(h, "ncclGroupEnd", l.ncclGroupEnd, l.error);
    if (!l.error.empty()) return l;
    if (l.ncclGetVersion(&l.version) != ncclSuccess) l.version = 0;
    if (l.version < NCCL_VERSION(2, 10, 0))
      l.error =
          internal::str(l.path, " is NCCL version code ", l.version, "; nabla needs NCCL 2.10 or newer (ncclAvg)");
    return l;
  }();
  return lib;
}

std::string describe(const Tensor& t) { return internal::str(t.dtype(), " ", t.sizes()); }

}  // namespace

std::string nccl_version() {
  const NcclLibrary& L = api();
  NABLA_CHECK(DistributedError, L.error.empty(), "nccl_version: ", L.error);
  // NCCL 2.9 and later: major * 10000 + minor * 100 + patch.
  return internal::str(L.version / 10000, ".", L.version / 100 % 100, ".", L.version % 100);
}

// ---- the group's state ----------------------------------------------------------------------------

struct ProcessGroupNccl::Impl {
  std::string where;  // "rank 0 of 2 (nccl, cuda:0, timeout 1000 ms)"
  ncclComm_t comm = nullptr;
  bool nonblocking = false;  // made with blocking = 0: calls may answer ncclInProgress (see nccl_watch.h)
  std::chrono::milliseconds timeout{0};
  cuda::Stream stream;
  // The NCCL calls, comm and broken. Recursive: a call that answers ncclInProgress is watched (the
  // watch asks for the state and may abort) while the lock taken to make the call is held.
  std::recursive_mutex mutex;
  std::string broken;  // the first failure

  cudaStream_t raw_stream() const { return static_cast<cudaStream_t>(stream.handle()); }

  // NCCL's words for a status, with its last error message where it has one.
  std::string status_text(ncclResult_t r) const {
    const NcclLibrary& L = api();
    std::string s = L.ncclGetErrorString ? L.ncclGetErrorString(r) : "?";
    if (L.ncclGetLastError) {
      const char* last = L.ncclGetLastError(comm);
      if (last && *last) s += internal::str(" (", last, ")");
    }
    return s;
  }

  // Marks the group broken with `message` and aborts the communicator (its kernels return).
  void abort(const std::string& message) {
    std::lock_guard lock(mutex);
    if (broken.empty()) broken = message;
    if (comm) {
      if (api().ncclCommAbort(comm) != ncclSuccess) {
        // best effort: the group is unusable either way, and the error thrown says why
      }
      comm = nullptr;
    }
  }

  // Marks the group broken, aborts the communicator and throws.
  [[noreturn]] void fail(const std::string& what, const std::string& why) {
    std::string msg = internal::str(what, " failed on ", where, ": ", why);
    abort(msg);
    throw DistributedError(msg);
  }
};

namespace {

// Throws (through fail) unless an NCCL call succeeded. mutex held.
void check_nccl_done(ncclResult_t r, ProcessGroupNccl::Impl& impl, const std::string& what, const char* call) {
  if (r != ncclSuccess) impl.fail(what, internal::str(call, ": ", impl.status_text(r)));
}

// The watch's view of the group (nccl_watch.h): NCCL's state, the event after a collective, abort.
class CommProbe : public nccl_watch::Probe {
 public:
  explicit CommProbe(ProcessGroupNccl::Impl& impl, const cuda::Event* done = nullptr) : impl_(impl), done_(done) {}
  std::string broken() override {
    std::lock_guard lock(impl_.mutex);
    return impl_.broken.empty() && !impl_.comm ? std::string("the communicator is gone") : impl_.broken;
  }
  int state() override {
    std::lock_guard lock(impl_.mutex);
    NABLA_CHECK(DistributedError, impl_.comm != nullptr, "process group (", impl_.where,
                ") has no communicator: ", impl_.broken);
    ncclResult_t state = ncclSuccess;
    check_nccl_done(api().ncclCommGetAsyncError(impl_.comm, &state), impl_, "ncclCommGetAsyncError",
                    "ncclCommGetAsyncError");
    return static_cast<int>(state);
  }
  bool event_done() override { return done_ && done_->query(); }
  std::string status_text(int status) override {
    std::lock_guard lock(impl_.mutex);
    return impl_.status_text(static_cast<ncclResult_t>(status));
  }
  void abort(const std::string& message) override { impl_.abort(message); }

 protected:
  ProcessGroupNccl::Impl& impl_;
  const cuda::Event* done_;
};

// As check_nccl_done, but a call that a non-blocking communicator answered with ncclInProgress is
// watched (through `probe`, by default the enqueue stage's) until NCCL has finished it, within the
// group's timeout: an error or the timeout aborts the communicator and throws. mutex held.
void check_nccl(ncclResult_t r, ProcessGroupNccl::Impl& impl, const std::string& what, const char* call,
                nccl_watch::Probe* probe = nullptr, Stage stage = Stage::enqueue) {
  if (r == ncclInProgress && impl.nonblocking && impl.comm) {
    CommProbe enqueue(impl);
    nccl_watch::watch(probe ? *probe : enqueue, stage, what, impl.where, impl.timeout, call);
    return;
  }
  check_nccl_done(r, impl, what, call);
}

// Setup's probe also says which ranks never reached the setup (each sets its key in the store first).
class SetupProbe : public CommProbe {
 public:
  SetupProbe(ProcessGroupNccl::Impl& impl, Store& store, int size) : CommProbe(impl), store_(store), size_(size) {}
  std::string hint(Stage) override {
    std::string missing;
    try {
      for (int r = 0; r < size_; ++r)
        if (!store_.check({setup_key(r)})) missing += internal::str(missing.empty() ? "" : ", ", r);
    } catch (const std::exception&) {
      return "";  // the store is gone too (rank 0 gave up): nothing more to say
    }
    return missing.empty() ? "every rank reached the setup" : "ranks that never reached the setup: " + missing;
  }
  static std::string setup_key(int rank) { return internal::str("nabla.nccl.setup.", rank); }

 private:
  Store& store_;
  int size_;
};

}  // namespace

// ---- construction ---------------------------------------------------------------------------------

ProcessGroupNccl::ProcessGroupNccl(Store& store, int rank, int size, NcclOptions options)
    : ProcessGroup(rank, size), options_(options), impl_(std::make_unique<Impl>()) {
  const std::string who = internal::str("init_process_group: rank ", rank, " of ", size, " (nccl)");
  NABLA_CHECK(DeviceError, cuda::is_available(), who,
              " needs a CUDA device, and there is none here: ", cuda::unavailable_reason(),
              " (use the gloo backend for CPU tensors)");
  const NcclLibrary& L = api();
  NABLA_CHECK(DistributedError, L.error.empty(), who, ": ", L.error);
  const int count = cuda::device_count();
  device_ = options_.device >= 0 ? options_.device : cuda::current_device();
  NABLA_CHECK(ValueError, device_ < count, who, ": device cuda:", device_, " does not exist (this machine has ", count,
              " CUDA devices)");
  impl_->where = internal::str("rank ", rank, " of ", size, " (nccl, cuda:", device_, ", timeout ",
                               options_.timeout.count(), " ms)");
  impl_->timeout = options_.timeout;

  // NCCL's unique id: made by rank 0, read by the others through the store.
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  const std::string key = "nabla.nccl.unique_id";
  std::lock_guard lock(impl_->mutex);
  if (rank == 0) {
    check_nccl(L.ncclGetUniqueId(&id), *impl_, "init_process_group", "ncclGetUniqueId");
    store.set(key, std::vector<char>(id.internal, id.internal + sizeof id.internal));
  } else {
    try {
      store.wait({key}, options_.timeout);
    } catch (const DistributedError& e) {
      throw DistributedError(internal::str(who, ": rank 0 did not publish NCCL's unique id within ",
                                           options_.timeout.count(), " ms: ", e.what()));
    }
    std::vector<char> v = store.get(key);
    NABLA_CHECK(DistributedError, v.size() == sizeof id.internal, who, ": NCCL's unique id in ", store.describe(),
                " has ", v.size(), " bytes, expected ", sizeof id.internal);
    std::memcpy(id.internal, v.data(), v.size());
  }
  cuda::DeviceGuard device_guard(device_);
  impl_->stream = cuda::new_stream(device_);
  // Each rank says it reached the setup, so that a rank whose setup times out can name the missing.
  store.set(SetupProbe::setup_key(rank), std::vector<char>{'1'});
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
  const bool nonblocking = L.ncclCommInitRankConfig != nullptr;
#else
  const bool nonblocking = false;
#endif
  if (nonblocking) {
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
    // Non-blocking: the call returns at once and the setup (which waits for every rank to join) is
    // watched within the timeout; a peer that never comes aborts it instead of hanging here.
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    impl_->nonblocking = true;
    SetupProbe probe(*impl_, store, size);
    // The communicator is kept as soon as NCCL returns it (in progress): a failed setup aborts it.
    check_nccl(L.ncclCommInitRankConfig(&impl_->comm, size, id, rank, &config), *impl_, "init_process_group",
               "ncclCommInitRankConfig", &probe, Stage::setup);
#endif
  } else {
    // NCCL before 2.14: ncclCommInitRank blocks until every rank has joined (not bounded by the timeout).
    ncclComm_t comm = nullptr;  // kept only once made (a failed init leaves nothing to abort)
    check_nccl(L.ncclCommInitRank(&comm, size, id, rank), *impl_, "init_process_group", "ncclCommInitRank");
    impl_->comm = comm;
  }
}

ProcessGroupNccl::~ProcessGroupNccl() {
  if (!impl_) return;
  std::lock_guard lock(impl_->mutex);
  if (!impl_->comm) return;
  // Queued work first (bounded by the timeout: a peer that never comes would hang it), then destroy.
  bool finished = false;
  try {
    cuda::DeviceGuard device_guard(device_);
    const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
    while (!(finished = impl_->stream.query()) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
  } catch (const std::exception&) { finished = false; }
  // A destructor has nobody to report a failed clean-up to.
  if (finished && impl_->broken.empty() && impl_->nonblocking) {
    // Non-blocking: ncclCommFinalize flushes and waits for the peers (watched within the timeout;
    // the watch aborts the communicator when it fails), then ncclCommDestroy frees without blocking.
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
    try {
      CommProbe probe(*impl_);
      check_nccl(api().ncclCommFinalize(impl_->comm), *impl_, "destroy_process_group", "ncclCommFinalize", &probe,
                 Stage::teardown);
    } catch (const std::exception&) {
      finished = false;  // aborted already (comm is null)
    }
#endif
  }
  if (!impl_->comm) return;
  if (finished && impl_->broken.empty()) {
    if (api().ncclCommDestroy(impl_->comm) != ncclSuccess) {}
  } else if (api().ncclCommAbort(impl_->comm) != ncclSuccess) {
  }
  impl_->comm = nullptr;
}

// ---- the flow of one collective -------------------------------------------------------------------

void ProcessGroupNccl::check_not_broken() const {
  std::lock_guard lock(impl_->mutex);
  NABLA_CHECK(DistributedError, impl_->broken.empty(), "process group (", impl_->where,
              ") is unusable after an earlier failure: ", impl_->broken);
}

void ProcessGroupNccl::check_tensor(const char* op, const Tensor& t, const char* name) const {
  NABLA_CHECK(ValueError, t.defined(), op, ": ", name, " is undefined");
  NABLA_CHECK(DeviceError, t.is_cuda() && t.device().index == device_, op,
              ": the nccl backend takes CUDA tensors on this ", "rank's device cuda:", device_, "; ", name, " is on ",
              t.device(), t.is_cpu() ? " (move it with .to(\"cuda\"), or use the gloo backend for CPU tensors)" : "");
}

namespace {

// Waits (on the host) until `done` has completed, watching NCCL's asynchronous error and the timeout.
void wait_for(ProcessGroupNccl::Impl& impl, const cuda::Event& done, const std::string& what,
              std::chrono::milliseconds timeout) {
  if (done.query()) return;  // already finished: no lock, no NCCL call
  CommProbe probe(impl, &done);
  nccl_watch::watch(probe, Stage::completion, what, impl.where, timeout);
}

// What the collective reads: the tensor itself when contiguous, else a contiguous copy (made on the
// caller's current stream).
Tensor contiguous_input(const Tensor& t) {
  NoGradGuard g;
  return t.is_contiguous() ? t.detach() : t.contiguous().detach();
}

void copy_back(const Tensor& dst, const Tensor& buf) {
  if (!buf.is_same(dst) && buf.data_ptr() != dst.data_ptr()) dst.detach().copy_(buf.view(dst.sizes()));
}

char* bytes_at(const Tensor& t, int64_t elements) {
  return static_cast<char*>(t.data_ptr()) + elements * static_cast<int64_t>(t.element_size());
}

}  // namespace

Work ProcessGroupNccl::launch(const std::string& what, const std::vector<Tensor>& tensors,
                              const std::function<void()>& body) {
  check_not_broken();
  cuda::DeviceGuard device_guard(device_);
  // The group's stream starts after what the caller queued so far (its inputs are ready then).
  cuda::Event inputs_ready;
  inputs_ready.record(cuda::current_stream(device_));
  impl_->stream.wait(inputs_ready);
  {
    std::lock_guard lock(impl_->mutex);
    NABLA_CHECK(DistributedError, impl_->comm != nullptr, what, ": process group (", impl_->where,
                ") is unusable after an earlier failure: ", impl_->broken);
    NoGradGuard no_grad;
    cuda::StreamGuard on_group_stream(impl_->stream);  // the copies in body follow the NCCL calls
    body();
  }
  for (const Tensor& t : tensors)
    if (t.defined() && t.numel() > 0) cuda::record_stream(t, impl_->stream);
  cuda::Event done;
  done.record(impl_->stream);
  auto state = std::make_shared<Work::State>();
  Impl* impl = impl_.get();
  const int device = device_;
  const auto timeout = options_.timeout;
  state->finish = [impl, done, what, timeout, device] {
    wait_for(*impl, done, what, timeout);
    cuda::DeviceGuard g(device);
    cuda::current_stream(device).wait(done);  // for the caller's later work, as PyTorch's wait()
  };
  return Work(state);
}

namespace {
void check_list(const char* op, const std::vector<Tensor>& list, const Tensor& like, int size, const char* name) {
  NABLA_CHECK(ValueError, static_cast<int>(list.size()) == size, op, ": ", name, " holds ", list.size(),
              " tensors; the group has ", size, " ranks");
  for (size_t r = 0; r < list.size(); ++r) {
    NABLA_CHECK(DTypeError, list[r].defined() && list[r].dtype() == like.dtype(), op, ": ", name, "[", r, "] is ",
                list[r].defined() ? dtype_name(list[r].dtype()) : "undefined", ", expected ", like.dtype());
    NABLA_CHECK(ShapeError, list[r].numel() == like.numel(), op, ": ", name, "[", r, "] has shape ", list[r].sizes(),
                ", expected ", like.numel(), " elements as ", like.sizes());
  }
}
void check_rank(const char* op, int r, int size, const char* what) {
  NABLA_CHECK(ValueError, r >= 0 && r < size, op, ": ", what, " ", r, " is not a rank of this group (size ", size, ")");
}
}  // namespace

// ---- collectives ----------------------------------------------------------------------------------

Work ProcessGroupNccl::all_reduce(const Tensor& tensor, ReduceOp op) {
  check_tensor("all_reduce", tensor, "tensor");
  const nccl_plan::Reduction red = nccl_plan::reduction(op, tensor.dtype(), "all_reduce");
  check_not_broken();
  if (tensor.numel() == 0) return Work();
  const std::string what = internal::str("all_reduce(", reduce_op_name(op), ", ", describe(tensor), ")");
  cuda::DeviceGuard device_guard(device_);
  Tensor buf = contiguous_input(tensor);
  return launch(what, {tensor, buf}, [&] {
    check_nccl(api().ncclAllReduce(buf.data_ptr(), buf.data_ptr(), static_cast<size_t>(buf.numel()), to_nccl(red.type),
                                   to_nccl(red.op), impl_->comm, impl_->raw_stream()),
               *impl_, what, "ncclAllReduce");
    copy_back(tensor, buf);
  });
}

Work ProcessGroupNccl::broadcast(const Tensor& tensor, int root) {
  check_tensor("broadcast", tensor, "tensor");
  check_rank("broadcast", root, size_, "root");
  const NcclType type = nccl_plan::data_type(tensor.dtype(), "broadcast");
  check_not_broken();
  if (tensor.numel() == 0) return Work();
  const std::string what = internal::str("broadcast(root ", root, ", ", describe(tensor), ")");
  cuda::DeviceGuard device_guard(device_);
  Tensor buf = contiguous_input(tensor);
  return launch(what, {tensor, buf}, [&] {
    check_nccl(api().ncclBroadcast(buf.data_ptr(), buf.data_ptr(), static_cast<size_t>(buf.numel()), to_nccl(type),
                                   root, impl_->comm, impl_->raw_stream()),
               *impl_, what, "ncclBroadcast");
    copy_back(tensor, buf);
  });
}

Work ProcessGroupNccl::all_gather(const std::vector<Tensor>& outputs, const Tensor& input) {
  check_tensor("all_gather", input, "input");
  check_list("all_gather", outputs, input, size_, "outputs");
  for (const Tensor& t : outputs) check_tensor("all_gather", t, "outputs");
  const NcclType type = nccl_plan::data_type(input.dtype(), "all_gather");
  check_not_broken();
  const int64_t n = input.numel();
  if (n == 0) return Work();
  const std::string what = internal::str("all_gather(", describe(input), ")");
  cuda::DeviceGuard device_guard(device_);
  Tensor in = contiguous_input(input);
  Tensor all = empty({size_ * n}, TensorOptions(input.dtype()).device(input.device()));
  std::vector<Tensor> used = outputs;
  used.push_back(in);
  used.push_back(all);
  return launch(what, used, [&] {
    check_nccl(api().ncclAllGather(in.data_ptr(), all.data_ptr(), static_cast<size_t>(n), to_nccl(type), impl_->comm,
                                   impl_->raw_stream()),
               *impl_, what, "ncclAllGather");
    for (int r = 0; r < size_; ++r) outputs[r].detach().copy_(all.narrow(0, r * n, n).view(outputs[r].sizes()));
  });
}

Work ProcessGroupNccl::reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op) {
  check_tensor("reduce_scatter", output, "output");
  check_list("reduce_scatter", inputs, output, size_, "inputs");
  for (const Tensor& t : inputs) check_tensor("reduce_scatter", t, "inputs");
  const nccl_plan::Reduction red = nccl_plan::reduction(op, output.dtype(), "reduce_scatter");
  check_not_broken();
  const int64_t n = output.numel();
  if (n == 0) return Work();
  const std::string what = internal::str("reduce_scatter(", reduce_op_name(op), ", ", describe(output), ")");
  cuda::DeviceGuard device_guard(device_);
  Tensor all;
  {
    NoGradGuard g;
    std::vector<Tensor> flat;
    for (const Tensor& t : inputs) flat.push_back(t.detach().reshape({-1}));
    all = cat(flat, 0).contiguous();
  }
  Tensor buf = contiguous_input(output);
  return launch(what, {output, all, buf}, [&] {
    check_nccl(api().ncclReduceScatter(all.data_ptr(), buf.data_ptr(), static_cast<size_t>(n), to_nccl(red.type),
                                       to_nccl(red.op), impl_->comm, impl_->raw_stream()),
               *impl_, what, "ncclReduceScatter");
    copy_back(output, buf);
  });
}

// gather and scatter: NCCL has none; point-to-point calls in one NCCL group, as PyTorch does. The
// root's own part is a copy on the group's stream.
Work ProcessGroupNccl::gather(const std::vector<Tensor>& outputs, const Tensor& input, int root) {
  check_tensor("gather", input, "input");
  check_rank("gather", root, size_, "root");
  if (rank_ == root) {
    check_list("gather", outputs, input, size_, "outputs");
    for (const Tensor& t : outputs) check_tensor("gather", t, "outputs");
  } else {
    NABLA_CHECK(ValueError, outputs.empty(), "gather: only the root (rank ", root, ") passes outputs; rank ", rank_,
                " passed ", outputs.size());
  }
  const NcclType type = nccl_plan::data_type(input.dtype(), "gather");
  check_not_broken();
  const int64_t n = input.numel();
  if (n == 0) return Work();
  const std::string what = internal::str("gather(root ", root, ", ", describe(input), ")");
  cuda::DeviceGuard device_guard(device_);
  Tensor in = contiguous_input(input);
  Tensor all = rank_ == root ? empty({size_ * n}, TensorOptions(input.dtype()).device(input.device())) : Tensor();
  std::vector<Tensor> used = outputs;
  used.push_back(in);
  used.push_back(all);
  return launch(what, used, [&] {
    check_nccl(api().ncclGroupStart(), *impl_, what, "ncclGroupStart");
    if (rank_ == root) {
      for (int r = 0; r < size_; ++r)
        if (r != root)
          check_nccl(api().ncclRecv(bytes_at(all, r * n), static_cast<size_t>(n), to_nccl(type), r, impl_->comm,
                                    impl_->raw_stream()),
                     *impl_, what, "ncclRecv");
    } else {
      check_nccl(
          api().ncclSend(in.data_ptr(), static_cast<size_t>(n), to_nccl(type), root, impl_->comm, impl_->raw_stream()),
          *impl_, what, "ncclSend");
    }
    check_nccl(api().ncclGroupEnd(), *impl_, what, "ncclGroupEnd");
    if (rank_ == root)
      for (int r = 0; r < size_; ++r)
        outputs[r].detach().copy_((r == root ? in : all.narrow(0, r * n, n)).view(outputs[r].sizes()));
  });
}

Work ProcessGroupNccl::scatter(const Tensor& output, const std::vector<Tensor>& inputs, int root) {
  check_tensor("scatter", output, "output");
  check_rank("scatter", root, size_, "root");
  if (rank_ == root) {
    check_list("scatter", inputs, output, size_, "inputs");
    for (const Tensor& t : inputs) check_tensor("scatter", t, "inputs");
  } else {
    NABLA_CHECK(ValueError, inputs.empty(), "scatter: only the root (rank ", root, ") passes inputs; rank ", rank_,
                " passed ", inputs.size());
  }
  const NcclType type = nccl_plan::data_type(output.dtype(), "scatter");
  check_not_broken();
  const int64_t n = output.numel();
  if (n == 0) return Work();
  const std::string what = internal::str("scatter(root ", root, ", ", describe(output), ")");
  cuda::DeviceGuard device_guard(device_);
  std::vector<Tensor> ins;
  for (const Tensor& t : inputs) ins.push_back(contiguous_input(t));
  Tensor buf = contiguous_input(output);
  std::vector<Tensor> used = ins;
  used.push_back(output);
  used.push_back(buf);
  return launch(what, used, [&] {
    check_nccl(api().ncclGroupStart(), *impl_, what, "ncclGroupStart");
    if (rank_ == root) {
      for (int r = 0; r < size_; ++r)
        if (r != root)
          check_nccl(api().ncclSend(ins[r].data_ptr(), static_cast<size_t>(n), to_nccl(type), r, impl_->comm,
                                    impl_->raw_stream()),
                     *impl_, what, "ncclSend");
    } else {
      check_nccl(
          api().ncclRecv(buf.data_ptr(), static_cast<size_t>(n), to_nccl(type), root, impl_->comm, impl_->raw_stream()),
          *impl_, what, "ncclRecv");
    }
    check_nccl(api().ncclGroupEnd(), *impl_, what, "ncclGroupEnd");
    if (rank_ == root) output.detach().copy_(ins[root].view(output.sizes()));
    else copy_back(output, buf);
  });
}

Work ProcessGroupNccl::send(const Tensor& tensor, int dst, uint32_t tag) {
  check_tensor("send", tensor, "tensor");
  check_rank("send", dst, size_, "destination");
  NABLA_CHECK(ValueError, dst != rank_, "send: rank ", rank_, " cannot send to itself");
  const NcclType type = nccl_plan::data_type(tensor.dtype(), "send");
  check_not_broken();
  if (tensor.numel() == 0) return Work();
  const std::string what = internal::str("send(to rank ", dst, ", tag ", tag, ", ", describe(tensor), ")");
  cuda::DeviceGuard device_guard(device_);
  Tensor buf = contiguous_input(tensor);
  return launch(what, {buf}, [&] {
    check_nccl(api().ncclSend(buf.data_ptr(), static_cast<size_t>(buf.numel()), to_nccl(type), dst, impl_->comm,
                              impl_->raw_stream()),
               *impl_, what, "ncclSend");
  });
}

Work ProcessGroupNccl::recv(const Tensor& tensor, int src, uint32_t tag) {
  check_tensor("recv", tensor, "tensor");
  check_rank("recv", src, size_, "source");
  NABLA_CHECK(ValueError, src != rank_, "recv: rank ", rank_, " cannot receive from itself");
  const NcclType type = nccl_plan::data_type(tensor.dtype(), "recv");
  check_not_broken();
  if (tensor.numel() == 0) return Work();
  const std::string what = internal::str("recv(from rank ", src, ", tag ", tag, ", ", describe(tensor), ")");
  cuda::DeviceGuard device_guard(device_);
  Tensor buf = tensor.is_contiguous() ? tensor.detach()
                                      : empty(tensor.sizes(), TensorOptions(tensor.dtype()).device(tensor.device()));
  return launch(what, {tensor, buf}, [&] {
    check_nccl(api().ncclRecv(buf.data_ptr(), static_cast<size_t>(buf.numel()), to_nccl(type), src, impl_->comm,
                              impl_->raw_stream()),
               *impl_, what, "ncclRecv");
    copy_back(tensor, buf);
  });
}

Work ProcessGroupNccl::barrier() {
  check_not_broken();
  cuda::DeviceGuard device_guard(device_);
  Tensor one = ones({1}, TensorOptions(kFloat32).device(Device::cuda(static_cast<int16_t>(device_))));
  const std::string what = "barrier()";
  return launch(what, {one}, [&] {
    check_nccl(
        api().ncclAllReduce(one.data_ptr(), one.data_ptr(), 1, ncclFloat32, ncclSum, impl_->comm, impl_->raw_stream()),
        *impl_, what, "ncclAllReduce");
  });
}

}  // namespace nabla::distributed
