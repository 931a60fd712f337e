#include "distributed/process_group_gloo.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/gather.h>
#include <gloo/rendezvous/context.h>
#include <gloo/scatter.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <algorithm>
#include <cstdlib>
#include <type_traits>

#include "core/graph.h"
#include "core/ops.h"
#include "distributed/heartbeat.h"

namespace nabla::distributed {

// ---- Work -----------------------------------------------------------------------------------------

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::avg: return "avg";
    case ReduceOp::min: return "min";
    case ReduceOp::max: return "max";
    case ReduceOp::product: return "product";
  }
  return "?";
}

void Work::State::complete(std::exception_ptr e) {
  {
    std::lock_guard lock(mutex);
    error = e;
    done = true;
  }
  done_cv.notify_all();
}

void Work::wait() const {
  if (!state_) return;
  heartbeat::Waiting waiting;  // what nabla-run's liveness check sees
  std::unique_lock lock(state_->mutex);
  if (state_->finish) {  // point-to-point: finish on this thread, once
    auto finish = std::move(state_->finish);
    state_->finish = nullptr;
    try {
      finish();
    } catch (...) { state_->error = std::current_exception(); }
    state_->done = true;
  }
  state_->done_cv.wait(lock, [&] { return state_->done; });
  if (state_->error) std::rethrow_exception(state_->error);
}

bool Work::is_completed() const {
  if (!state_) return true;
  std::lock_guard lock(state_->mutex);
  return state_->done;
}

namespace {

using Clock = std::chrono::steady_clock;

// ---- reductions: c[i] = a[i] (op) b[i] ------------------------------------------------------------

template <class T>
constexpr bool is_half_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// Integer sums and products wrap (as PyTorch's), computed unsigned so that overflow is defined.
template <class T>
T add(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) return a || b;
  else if constexpr (is_half_v<T>) return T(float(a) + float(b));
  else if constexpr (std::is_integral_v<T>)
    return static_cast<T>(static_cast<std::make_unsigned_t<T>>(a) + static_cast<std::make_unsigned_t<T>>(b));
  else return a + b;
}
template <class T>
T mul(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) return a && b;
  else if constexpr (is_half_v<T>) return T(float(a) * float(b));
  else if constexpr (std::is_integral_v<T> && sizeof(T) >= 4)
    return static_cast<T>(static_cast<std::make_unsigned_t<T>>(a) * static_cast<std::make_unsigned_t<T>>(b));
  else if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<unsigned>(a) * static_cast<unsigned>(b));
  else return a * b;
}
// min/max propagate NaN as torch.minimum/maximum do.
template <class T>
T min_of(T a, T b) {
  if constexpr (is_half_v<T>) return float(a) != float(a) || float(a) < float(b) ? a : b;
  else if constexpr (std::is_floating_point_v<T>) return a != a || a < b ? a : b;
  else return a < b ? a : b;
}
template <class T>
T max_of(T a, T b) {
  if constexpr (is_half_v<T>) return float(a) != float(a) || float(a) > float(b) ? a : b;
  else if constexpr (std::is_floating_point_v<T>) return a != a || a > b ? a : b;
  else return a > b ? a : b;
}

template <class T, T (*F)(T, T)>
void reduce_loop(void* c_, const void* a_, const void* b_, size_t n) {
  auto* c = static_cast<T*>(c_);
  auto* a = static_cast<const T*>(a_);
  auto* b = static_cast<const T*>(b_);
  for (size_t i = 0; i < n; ++i) c[i] = F(a[i], b[i]);
}

template <class T>
gloo::AllreduceOptions::Func reduce_function(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return &reduce_loop<T, add<T>>;
    case ReduceOp::product: return &reduce_loop<T, mul<T>>;
    case ReduceOp::min: return &reduce_loop<T, min_of<T>>;
    case ReduceOp::max: return &reduce_loop<T, max_of<T>>;
  }
  throw ValueError("all_reduce: unknown ReduceOp");
}

// Gloo's all-reduce of a contiguous CPU tensor, in place. Gloo has two algorithms on unbound
// buffers: ring (its default, and PyTorch's) pipelines segments of at most 1 MiB around the ring;
// bcube (recursive halving and doubling; a direct reduce-scatter and all-gather where the world
// size does not factor) exchanges whole chunks in log2(world size) steps with fewer handshakes.
// Buffers up to kBcubeMaxBytes go through bcube. Measured on loopback, 2 processes on 2 cores
// (2026-11-29, interleaved): all-reduce of 1.7 MB back to back, median of 300, 1.2-2.0 ms against
// the ring's 2.6-4.0; 4-26 MB 0.7-1.0x the ring's time, 50-100 MB 1.1-1.5x (there the ring's
// pipelining wins); inside DDP training of the mnist CNN (its 1.7 MB of gradients), the time from
// the later rank's arrival to the end, mean of 60 steps over 4 runs each, 2.66 against 3.20 ms.
// Every rank passes the same size (a collective's contract) and so picks the same algorithm; each
// element is reduced on one rank and sent to the others, so all ranks get the same bits either way.
// With 3 or more ranks the order of a floating-point sum differs from the ring's (last bits).
constexpr size_t kBcubeMaxBytes = size_t{32} << 20;

void gloo_all_reduce(const std::shared_ptr<gloo::Context>& context, const Tensor& buf, ReduceOp op, uint32_t tag) {
  visit_dtype(buf.dtype(), [&](auto t) {
    using T = typename decltype(t)::type;
    gloo::AllreduceOptions o(context);
    o.setOutput(static_cast<T*>(buf.data_ptr()), static_cast<size_t>(buf.numel()));
    o.setReduceFunction(reduce_function<T>(op));
    o.setTag(tag);
    if (static_cast<size_t>(buf.numel()) * sizeof(T) <= kBcubeMaxBytes)
      o.setAlgorithm(gloo::AllreduceOptions::Algorithm::BCUBE);
    gloo::allreduce(o);
  });
}

// x /= n in place, for avg.
void divide_in_place(const Tensor& buf, int n) {
  visit_dtype(buf.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(buf.data_ptr());
    const int64_t count = buf.numel();
    if constexpr (std::is_floating_point_v<T>) {
      // In T (vectorized): for float the same bits as dividing in double and rounding to float
      // (double has more than 2 x 24 + 2 bits, so the double rounding is innocuous).
      const T d = static_cast<T>(n);
      for (int64_t i = 0; i < count; ++i) p[i] = p[i] / d;
    } else if constexpr (is_half_v<T>) {
      for (int64_t i = 0; i < count; ++i) p[i] = T(static_cast<double>(p[i]) / n);
    }
  });
}

std::string describe(const Tensor& t) { return internal::str(t.dtype(), " ", t.sizes()); }

// Gloo's messages name a peer by its listening address; "[127.0.0.1]:4123$7" -> "[127.0.0.1]:4123".
std::string strip_sequence(const std::string& a) { return a.substr(0, a.find('$')); }

constexpr uint8_t kSendRecvSlotPrefix = 0x8;  // Gloo's slots for point-to-point (as PyTorch's)

}  // namespace

// ---- construction ---------------------------------------------------------------------------------

ProcessGroupGloo::ProcessGroupGloo(Store& store, int rank, int size, GlooOptions options)
    : ProcessGroup(rank, size), options_(std::move(options)) {
  gloo::transport::tcp::attr attr;
  if (!options_.hostname.empty()) attr.hostname = options_.hostname;
  else if (!options_.iface.empty()) attr.iface = options_.iface;
  std::shared_ptr<gloo::transport::Device> device;
  try {
    device = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw DistributedError(internal::str("init_process_group: rank ", rank, " cannot open Gloo's TCP device on '",
                                         options_.hostname.empty() ? options_.iface : options_.hostname,
                                         "': ", e.what()));
  }
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->setTimeout(options_.timeout);
  try {
    context->connectFullMesh(store, device);
  } catch (const std::exception& e) {
    throw DistributedError(internal::str("init_process_group: rank ", rank, " of ", size,
                                         ": Gloo's rendezvous through ", store.describe(), " failed within ",
                                         options_.timeout.count(), " ms: ", e.what()));
  }
  context_ = context;
  const char* debug = std::getenv("NABLA_DISTRIBUTED_DEBUG");
  debug_ = debug && std::string(debug) == "1";
  // Gloo's errors name a peer by the address of its end of the connection: where it listens (the
  // rendezvous addresses below) or, on the accepting side, the connecting end. Every rank publishes
  // its end of each pair so that the others can map both to ranks.
  for (int j = 0; j < size; ++j) {
    if (j == rank) continue;
    std::string mine = strip_sequence(context->getPair(j)->address().str());
    store.set(internal::str("nabla.pair.", rank, ".", j), std::vector<char>(mine.begin(), mine.end()));
  }
  for (int j = 0; j < size; ++j) {
    if (j == rank) continue;
    try {
      auto theirs = store.get(internal::str("nabla.pair.", j, ".", rank));
      peer_addresses_[std::string(theirs.begin(), theirs.end())] = j;
    } catch (const std::exception&) {}
  }
  // Where each peer listens for this rank (what Gloo's errors print): key "<j>" holds rank j's
  // addresses for every other rank, in rank order without j itself.
  for (int j = 0; j < size; ++j) {
    if (j == rank) continue;
    try {
      std::vector<char> all = store.get(std::to_string(j));
      if (all.empty() || all.size() % static_cast<size_t>(size - 1) != 0) continue;
      size_t n = all.size() / static_cast<size_t>(size - 1), at = static_cast<size_t>(rank < j ? rank : rank - 1);
      gloo::transport::tcp::Address a(std::vector<char>(all.begin() + at * n, all.begin() + (at + 1) * n));
      peer_addresses_[strip_sequence(a.str())] = j;
    } catch (const std::exception&) {
      // Naming peers in errors is a courtesy; a store that lays keys out differently loses it.
    }
  }
  worker_ = std::thread([this] { run_worker(); });
}

ProcessGroupGloo::~ProcessGroupGloo() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

// ---- the worker -----------------------------------------------------------------------------------

void ProcessGroupGloo::run_worker() {
  for (;;) {
    Task task;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and nothing left
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task.run();
  }
}

void ProcessGroupGloo::check_not_broken() const {
  std::lock_guard lock(mutex_);
  NABLA_CHECK(DistributedError, broken_.empty(), "process group (gloo, rank ", rank_, " of ", size_,
              ") is unusable after an earlier failure: ", broken_);
}

void ProcessGroupGloo::rethrow_as_distributed(const std::string& what, const std::exception& e) const {
  if (dynamic_cast<const nabla::Error*>(&e) && !dynamic_cast<const gloo::Exception*>(&e)) throw;
  std::string msg = e.what(), peer;
  for (auto& [addr, r] : peer_addresses_)
    if (msg.find(addr) != std::string::npos) peer = internal::str("peer rank ", r, " at ", addr, ": ");
  if (peer.empty() && msg.find("Timed out") != std::string::npos) peer = "timed out waiting for a peer: ";
  throw DistributedError(internal::str(what, " failed on rank ", rank_, " of ", size_, " (gloo, timeout ",
                                       options_.timeout.count(), " ms): ", peer, msg));
}

namespace {
const char* const kCollectiveNames[] = {"?",      "all_reduce", "broadcast", "all_gather", "reduce_scatter",
                                        "gather", "scatter",    "barrier"};
enum : int64_t { kAllReduce = 1, kBroadcast, kAllGather, kReduceScatter, kGather, kScatter, kBarrier };
constexpr uint32_t kSignatureTagBit = 0x80000000u;  // the checks' own tags, apart from the collectives'
}  // namespace

// Gloo aborts the process (a check on its event-loop thread) when ranks pass different sizes to a
// collective; the debug mode all-gathers each call's signature first and throws instead.
void ProcessGroupGloo::check_signatures(const std::string& what, const Signature& sig, uint32_t tag) {
  std::vector<int64_t> mine{sig.collective, sig.numel, sig.dtype, sig.detail};
  std::vector<int64_t> all(4 * static_cast<size_t>(size_));
  gloo::AllgatherOptions o(context_);
  o.setInput(mine.data(), mine.size());
  o.setOutput(all.data(), all.size());
  o.setTag(tag | kSignatureTagBit);
  gloo::allgather(o);
  for (int r = 0; r < size_; ++r) {
    const int64_t* t = all.data() + 4 * r;
    if (std::equal(t, t + 4, mine.begin())) continue;
    auto name = [](int64_t c) { return c >= 1 && c <= 7 ? kCollectiveNames[c] : "?"; };
    throw DistributedError(
        internal::str(what, " on rank ", rank_, ": the ranks disagree (NABLA_DISTRIBUTED_DEBUG): rank ", r, " called ",
                      name(t[0]), " with ", t[1], " elements of ", dtype_name(static_cast<DType>(t[2])),
                      " (root or op ", t[3], "), rank ", rank_, " called ", name(sig.collective), " with ", sig.numel,
                      " elements of ", dtype_name(static_cast<DType>(sig.dtype)), " (root or op ", sig.detail, ")"));
  }
}

Work ProcessGroupGloo::enqueue(std::string what, Signature sig, std::function<void(uint32_t)> fn) {
  auto state = std::make_shared<Work::State>();
  std::lock_guard lock(mutex_);
  NABLA_CHECK(DistributedError, !stop_, what, ": the process group is being destroyed");
  uint32_t tag = next_tag_++;
  queue_.push_back({[this, state, tag, sig, what = std::move(what), fn = std::move(fn)] {
    std::string broken;
    {
      std::lock_guard l(mutex_);
      broken = broken_;
    }
    if (!broken.empty()) {
      state->complete(std::make_exception_ptr(
          DistributedError(internal::str(what, ": process group (gloo, rank ", rank_, " of ", size_,
                                         ") is unusable after an earlier failure: ", broken))));
      return;
    }
    try {
      NoGradGuard no_grad;  // copies into outputs are not part of any graph
      try {
        if (debug_) check_signatures(what, sig, tag);
        fn(tag);
      } catch (const std::exception& e) { rethrow_as_distributed(what, e); }
      state->complete(nullptr);
    } catch (const std::exception& e) {
      {
        std::lock_guard l(mutex_);
        if (broken_.empty()) broken_ = e.what();
      }
      state->complete(std::current_exception());
    }
  }});
  cv_.notify_one();
  return Work(state);
}

// ---- argument checks ------------------------------------------------------------------------------

namespace {

void check_cpu(const char* op, const Tensor& t, const char* name = "tensor") {
  NABLA_CHECK(ValueError, t.defined(), op, ": ", name, " is undefined");
  NABLA_CHECK(DeviceError, t.is_cpu(), op, ": the gloo backend takes CPU tensors; ", name, " is on ", t.device(),
              " (use the nccl backend for CUDA tensors, or .cpu())");
}

void check_rank(const char* op, int r, int size, const char* what) {
  NABLA_CHECK(ValueError, r >= 0 && r < size, op, ": ", what, " ", r, " is not a rank of this group (size ", size, ")");
}

void check_list(const char* op, const std::vector<Tensor>& list, const Tensor& like, int size, const char* name) {
  NABLA_CHECK(ValueError, static_cast<int>(list.size()) == size, op, ": ", name, " holds ", list.size(),
              " tensors; the group has ", size, " ranks");
  for (size_t r = 0; r < list.size(); ++r) {
    check_cpu(op, list[r], name);
    NABLA_CHECK(DTypeError, list[r].dtype() == like.dtype(), op, ": ", name, "[", r, "] is ", list[r].dtype(),
                ", expected ", like.dtype());
    NABLA_CHECK(ShapeError, list[r].numel() == like.numel(), op, ": ", name, "[", r, "] has shape ", list[r].sizes(),
                ", expected ", like.numel(), " elements as ", like.sizes());
  }
}

void check_reduce(const char* op, ReduceOp r, DType d) {
  NABLA_CHECK(DTypeError, r != ReduceOp::avg || is_floating(d), op, ": ReduceOp::avg needs a floating dtype, got ", d,
              " (as torch.distributed: reduce with sum and divide)");
}

// What the collective reads: the tensor itself when contiguous, else a contiguous copy.
Tensor contiguous_input(const Tensor& t) {
  NoGradGuard g;
  return t.is_contiguous() ? t.detach() : t.contiguous().detach();
}

void copy_back(const Tensor& dst, const Tensor& buf) {
  if (!buf.is_same(dst) && buf.data_ptr() != dst.data_ptr()) dst.detach().copy_(buf.view(dst.sizes()));
}

template <class F>
void with_type(DType d, F&& f) {
  visit_dtype(d, std::forward<F>(f));
}

}  // namespace

// ---- collectives ----------------------------------------------------------------------------------

Work ProcessGroupGloo::all_reduce(const Tensor& tensor, ReduceOp op) {
  check_cpu("all_reduce", tensor);
  check_reduce("all_reduce", op, tensor.dtype());
  check_not_broken();
  Tensor buf = contiguous_input(tensor);
  return enqueue(internal::str("all_reduce(", reduce_op_name(op), ", ", describe(tensor), ")"),
                 {kAllReduce, tensor.numel(), static_cast<int64_t>(tensor.dtype()), static_cast<int64_t>(op)},
                 [=, this](uint32_t tag) {
                   if (buf.numel() > 0) {
                     gloo_all_reduce(context_, buf, op, tag);
                     if (op == ReduceOp::avg) divide_in_place(buf, size_);
                   }
                   copy_back(tensor, buf);
                 });
}

Work ProcessGroupGloo::broadcast(const Tensor& tensor, int root) {
  check_cpu("broadcast", tensor);
  check_rank("broadcast", root, size_, "root");
  check_not_broken();
  Tensor buf = contiguous_input(tensor);
  return enqueue(internal::str("broadcast(root ", root, ", ", describe(tensor), ")"),
                 {kBroadcast, tensor.numel(), static_cast<int64_t>(tensor.dtype()), root}, [=, this](uint32_t tag) {
                   if (buf.numel() == 0) return;
                   with_type(buf.dtype(), [&](auto t) {
                     using T = typename decltype(t)::type;
                     gloo::BroadcastOptions o(context_);
                     o.setOutput(static_cast<T*>(buf.data_ptr()), static_cast<size_t>(buf.numel()));
                     o.setRoot(root);
                     o.setTag(tag);
                     gloo::broadcast(o);
                   });
                   copy_back(tensor, buf);
                 });
}

Work ProcessGroupGloo::all_gather(const std::vector<Tensor>& outputs, const Tensor& input) {
  check_cpu("all_gather", input, "input");
  check_list("all_gather", outputs, input, size_, "outputs");
  check_not_broken();
  Tensor in = contiguous_input(input);
  Tensor all = empty({size_ * input.numel()}, input.dtype());
  return enqueue(internal::str("all_gather(", describe(input), ")"),
                 {kAllGather, input.numel(), static_cast<int64_t>(input.dtype()), 0}, [=, this](uint32_t tag) {
                   int64_t n = in.numel();
                   if (n > 0) {
                     with_type(in.dtype(), [&](auto t) {
                       using T = typename decltype(t)::type;
                       gloo::AllgatherOptions o(context_);
                       o.setInput(static_cast<T*>(in.data_ptr()), static_cast<size_t>(n));
                       o.setOutput(static_cast<T*>(all.data_ptr()), static_cast<size_t>(n * size_));
                       o.setTag(tag);
                       gloo::allgather(o);
                     });
                   }
                   for (int r = 0; r < size_; ++r)
                     outputs[r].detach().copy_(all.narrow(0, r * n, n).view(outputs[r].sizes()));
                 });
}

// Gloo has no reduce-scatter on unbound buffers: the inputs are all-reduced as one buffer and each
// rank keeps its chunk (twice the traffic of a ring reduce-scatter; the results are the same).
Work ProcessGroupGloo::reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op) {
  check_cpu("reduce_scatter", output, "output");
  check_list("reduce_scatter", inputs, output, size_, "inputs");
  check_reduce("reduce_scatter", op, output.dtype());
  check_not_broken();
  std::vector<Tensor> flat;
  {
    NoGradGuard g;
    for (auto& t : inputs) flat.push_back(t.detach().reshape({-1}));
  }
  Tensor all = cat(flat, 0).contiguous();  // a fresh buffer
  return enqueue(internal::str("reduce_scatter(", reduce_op_name(op), ", ", describe(output), ")"),
                 {kReduceScatter, output.numel(), static_cast<int64_t>(output.dtype()), static_cast<int64_t>(op)},
                 [=, this](uint32_t tag) {
                   int64_t n = output.numel();
                   if (n > 0) { gloo_all_reduce(context_, all, op, tag); }
                   Tensor mine = all.narrow(0, rank_ * n, n).contiguous();
                   if (op == ReduceOp::avg) divide_in_place(mine, size_);
                   output.detach().copy_(mine.view(output.sizes()));
                 });
}

Work ProcessGroupGloo::gather(const std::vector<Tensor>& outputs, const Tensor& input, int root) {
  check_cpu("gather", input, "input");
  check_rank("gather", root, size_, "root");
  if (rank_ == root) check_list("gather", outputs, input, size_, "outputs");
  else
    NABLA_CHECK(ValueError, outputs.empty(), "gather: only the root (rank ", root, ") passes outputs; rank ", rank_,
                " passed ", outputs.size());
  check_not_broken();
  Tensor in = contiguous_input(input);
  Tensor all = rank_ == root ? empty({size_ * input.numel()}, input.dtype()) : Tensor();
  return enqueue(internal::str("gather(root ", root, ", ", describe(input), ")"),
                 {kGather, input.numel(), static_cast<int64_t>(input.dtype()), root}, [=, this](uint32_t tag) {
                   int64_t n = in.numel();
                   if (n > 0) {
                     with_type(in.dtype(), [&](auto t) {
                       using T = typename decltype(t)::type;
                       gloo::GatherOptions o(context_);
                       o.setInput(static_cast<T*>(in.data_ptr()), static_cast<size_t>(n));
                       if (rank_ == root) o.setOutput(static_cast<T*>(all.data_ptr()), static_cast<size_t>(n * size_));
                       o.setRoot(root);
                       o.setTag(tag);
                       gloo::gather(o);
                     });
                   }
                   if (rank_ == root)
                     for (int r = 0; r < size_; ++r)
                       outputs[r].detach().copy_(all.narrow(0, r * n, n).view(outputs[r].sizes()));
                 });
}

Work ProcessGroupGloo::scatter(const Tensor& output, const std::vector<Tensor>& inputs, int root) {
  check_cpu("scatter", output, "output");
  check_rank("scatter", root, size_, "root");
  if (rank_ == root) check_list("scatter", inputs, output, size_, "inputs");
  else
    NABLA_CHECK(ValueError, inputs.empty(), "scatter: only the root (rank ", root, ") passes inputs; rank ", rank_,
                " passed ", inputs.size());
  check_not_broken();
  std::vector<Tensor> ins;
  for (auto& t : inputs) ins.push_back(contiguous_input(t));
  Tensor buf = contiguous_input(output);
  return enqueue(internal::str("scatter(root ", root, ", ", describe(output), ")"),
                 {kScatter, output.numel(), static_cast<int64_t>(output.dtype()), root}, [=, this](uint32_t tag) {
                   size_t n = static_cast<size_t>(buf.numel());
                   if (n == 0) return;
                   with_type(buf.dtype(), [&](auto t) {
                     using T = typename decltype(t)::type;
                     gloo::ScatterOptions o(context_);
                     std::vector<T*> ptrs;
                     for (auto& x : ins) ptrs.push_back(static_cast<T*>(x.data_ptr()));
                     if (rank_ == root) o.setInputs(ptrs, n);
                     o.setOutput(static_cast<T*>(buf.data_ptr()), n);
                     o.setRoot(root);
                     o.setTag(tag);
                     gloo::scatter(o);
                   });
                   copy_back(output, buf);
                 });
}

Work ProcessGroupGloo::barrier() {
  check_not_broken();
  return enqueue("barrier()", {kBarrier, 0, 0, 0}, [this](uint32_t tag) {
    gloo::BarrierOptions o(context_);
    o.setTag(tag);
    gloo::barrier(o);
  });
}

// ---- point-to-point -------------------------------------------------------------------------------
// Posted at once from the caller's thread (not queued behind collectives: a send waits for the
// matching recv, which the peer may post only after its own send); wait() completes them.

Work ProcessGroupGloo::send(const Tensor& tensor, int dst, uint32_t tag) {
  check_cpu("send", tensor);
  check_rank("send", dst, size_, "destination");
  NABLA_CHECK(ValueError, dst != rank_, "send: rank ", rank_, " cannot send to itself");
  check_not_broken();
  auto state = std::make_shared<Work::State>();
  Tensor buf = contiguous_input(tensor);
  if (buf.numel() == 0) {
    state->done = true;
    return Work(state);
  }
  std::string what = internal::str("send(to rank ", dst, ", tag ", tag, ", ", describe(tensor), ")");
  std::shared_ptr<gloo::transport::UnboundBuffer> ub;
  try {
    ub = context_->createUnboundBuffer(buf.data_ptr(), buf.nbytes());
    ub->send(dst, gloo::Slot::build(kSendRecvSlotPrefix, tag));
  } catch (const std::exception& e) { rethrow_as_distributed(what, e); }
  state->finish = [this, ub, buf, what] {
    try {
      ub->waitSend(options_.timeout);
    } catch (const std::exception& e) { rethrow_as_distributed(what, e); }
  };
  return Work(state);
}

Work ProcessGroupGloo::recv(const Tensor& tensor, int src, uint32_t tag) {
  check_cpu("recv", tensor);
  check_rank("recv", src, size_, "source");
  NABLA_CHECK(ValueError, src != rank_, "recv: rank ", rank_, " cannot receive from itself");
  check_not_broken();
  auto state = std::make_shared<Work::State>();
  Tensor buf = tensor.is_contiguous() ? tensor.detach() : empty(tensor.sizes(), tensor.dtype());
  if (buf.numel() == 0) {
    state->done = true;
    return Work(state);
  }
  std::string what = internal::str("recv(from rank ", src, ", tag ", tag, ", ", describe(tensor), ")");
  std::shared_ptr<gloo::transport::UnboundBuffer> ub;
  try {
    ub = context_->createUnboundBuffer(buf.data_ptr(), buf.nbytes());
    ub->recv(src, gloo::Slot::build(kSendRecvSlotPrefix, tag));
  } catch (const std::exception& e) { rethrow_as_distributed(what, e); }
  state->finish = [this, ub, buf, tensor, what] {
    try {
      ub->waitRecv(options_.timeout);
    } catch (const std::exception& e) { rethrow_as_distributed(what, e); }
    NoGradGuard g;
    copy_back(tensor, buf);
  };
  return Work(state);
}

}  // namespace nabla::distributed
