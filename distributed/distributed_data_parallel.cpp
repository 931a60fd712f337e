#include "distributed/distributed_data_parallel.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <unordered_set>

#include "core/cuda_api.h"
#include "core/graph.h"
#include "core/ops.h"
#include "distributed/distributed.h"

namespace nabla::nn::parallel {

namespace dist = nabla::distributed;

struct DistributedDataParallel::Bucket {
  std::vector<size_t> params;  // indices into params_
  Tensor flat;                 // (sum of numels), the params' dtype
  size_t pending = 0;          // gradients still missing this iteration
  dist::Work work;
  bool launched = false;
};

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<Module> module, DDPOptions options)
    : module_(std::move(module)), options_(options) {
  NABLA_CHECK(ValueError, module_ != nullptr, "DistributedDataParallel: the module is null");
  NABLA_CHECK(ValueError, options_.bucket_cap_mb > 0, "DistributedDataParallel: bucket_cap_mb must be positive, got ",
              options_.bucket_cap_mb);
  group_ = options_.process_group ? options_.process_group : &dist::default_group();
  // gloo carries CPU tensors, nccl CUDA tensors (on the group's device, which its collectives check).
  const bool on_cuda = group_->backend() == "nccl";
  for (auto& [name, p] : module_->named_parameters()) {
    NABLA_CHECK(DeviceError, on_cuda ? p.is_cuda() : p.is_cpu(), "DistributedDataParallel: parameter '", name,
                "' is on ", p.device(), "; the ", group_->backend(), " backend takes ", on_cuda ? "CUDA" : "CPU",
                " tensors (move the module before wrapping it)");
    if (comm_device_.is_cpu() && on_cuda) comm_device_ = p.device();
    if (!p.requires_grad()) continue;
    names_.push_back(name);
    params_.push_back(p);
  }
  if (on_cuda && comm_device_.is_cpu()) comm_device_ = Device::cuda(static_cast<int16_t>(cuda::current_device()));
  check_same_parameters();

  // Everyone starts from rank 0's weights and buffers.
  {
    NoGradGuard no_grad;
    std::vector<dist::Work> works;
    for (auto& p : module_->parameters()) works.push_back(group_->broadcast(p, 0));
    for (auto& w : works) w.wait();
  }
  sync_buffers();

  // Buckets in reverse registration order, at most bucket_cap_mb each (a larger parameter gets
  // one of its own), one dtype per bucket.
  const double cap = options_.bucket_cap_mb * 1024 * 1024;
  bucket_of_.resize(params_.size());
  offset_in_bucket_.resize(params_.size());
  double bytes = 0;
  for (size_t k = params_.size(); k-- > 0;) {
    const Tensor& p = params_[k];
    double nb = static_cast<double>(p.nbytes());
    const Tensor* last = buckets_.empty() ? nullptr : &params_[buckets_.back()->params.front()];
    bool fresh = !last || bytes + nb > cap || last->dtype() != p.dtype() || last->device() != p.device();
    if (fresh) {
      buckets_.push_back(std::make_unique<Bucket>());
      bytes = 0;
    }
    Bucket& b = *buckets_.back();
    bucket_of_[k] = buckets_.size() - 1;
    offset_in_bucket_[k] = 0;
    for (size_t q : b.params) offset_in_bucket_[k] += static_cast<size_t>(params_[q].numel());
    b.params.push_back(k);
    bytes += nb;
  }
  for (auto& b : buckets_) {
    int64_t n = 0;
    for (size_t q : b->params) n += params_[q].numel();
    const Tensor& first = params_[b->params.front()];
    b->flat = zeros({n}, TensorOptions(first.dtype()).device(first.device()));
  }
  ready_.assign(params_.size(), false);
  for (size_t k = 0; k < params_.size(); ++k)
    hooks_.push_back(params_[k].register_hook([this, k](const Tensor& g) { return on_grad(k, g); }));
}

DistributedDataParallel::~DistributedDataParallel() {
  for (size_t k = 0; k < params_.size(); ++k) params_[k].remove_hook(hooks_[k]);
  for (auto& b : buckets_)
    if (b->launched) {
      try {
        b->work.wait();
      } catch (const std::exception&) {
        // The error was (or will be) reported by the backward that launched it.
      }
    }
}

std::vector<std::vector<size_t>> DistributedDataParallel::bucket_layout() const {
  std::vector<std::vector<size_t>> out;
  for (auto& b : buckets_) out.push_back(b->params);
  return out;
}

// Ranks must hold the same parameters: compare (count, then every shape and dtype) with rank 0's.
void DistributedDataParallel::check_same_parameters() {
  std::vector<int64_t> sig;
  for (auto& p : params_) {
    sig.push_back(static_cast<int64_t>(p.dtype()));
    sig.push_back(p.dim());
    for (int64_t s : p.sizes()) sig.push_back(s);
  }
  const int n = group_->size(), me = group_->rank();
  const TensorOptions on_comm = TensorOptions(kInt64).device(comm_device_);
  Tensor len = full({1}, static_cast<int64_t>(sig.size()), on_comm);
  std::vector<Tensor> lens;
  for (int r = 0; r < n; ++r) lens.push_back(zeros({1}, on_comm));
  group_->all_gather(lens, len).wait();
  for (int r = 0; r < n; ++r)
    NABLA_CHECK(dist::DistributedError, lens[r].item<int64_t>() == static_cast<int64_t>(sig.size()),
                "DistributedDataParallel: rank ", r, " and rank ", me,
                " disagree on the parameters (their shapes and dtypes differ; this rank has ", params_.size(),
                " parameters requiring grad)");
  if (sig.empty()) return;
  Tensor mine = tensor(sig, kInt64);
  std::vector<Tensor> all;
  for (int r = 0; r < n; ++r) all.push_back(zeros({static_cast<int64_t>(sig.size())}, on_comm));
  group_->all_gather(all, mine.to(comm_device_)).wait();
  for (int r = 0; r < n; ++r) {
    all[r] = all[r].cpu();
    if (equal(all[r], mine)) continue;
    // Name the first parameter whose description differs.
    const int64_t* theirs = all[r].data_ptr<int64_t>();
    size_t at = 0;
    for (size_t k = 0; k < params_.size(); ++k) {
      size_t len_k = 2 + static_cast<size_t>(params_[k].dim());
      for (size_t j = 0; j < len_k; ++j)
        if (theirs[at + j] != sig[at + j]) {
          std::vector<int64_t> shape;
          int64_t dims = theirs[at + 1];
          for (int64_t d = 0; d < dims && at + 2 + static_cast<size_t>(d) < sig.size(); ++d)
            shape.push_back(theirs[at + 2 + d]);
          throw dist::DistributedError(internal::str(
              "DistributedDataParallel: parameter '", names_[k], "' is ", params_[k].dtype(), " ", params_[k].sizes(),
              " on rank ", me, " but rank ", r, " has ", dtype_name(static_cast<DType>(theirs[at])), " ",
              IntArrayRef(shape), " there: every rank must build the same model"));
        }
      at += len_k;
    }
    throw dist::DistributedError(
        internal::str("DistributedDataParallel: rank ", r, " and rank ", me, " disagree on the parameters"));
  }
}

void DistributedDataParallel::start_iteration(const Tensor& output) {
  std::fill(ready_.begin(), ready_.end(), false);
  num_ready_ = 0;
  next_bucket_to_launch_ = 0;
  for (auto& b : buckets_) {
    b->pending = b->params.size();
    b->launched = false;
    b->work = dist::Work();
  }
  sync_this_iteration_ = require_sync_;
  expecting_grads_ = sync_this_iteration_ && output.defined() && output.grad_fn() != nullptr;
  if (!expecting_grads_ || !options_.find_unused_parameters) return;
  // The accumulators reachable from the output: the parameters backward will reach.
  std::unordered_set<const autograd::Node*> seen;
  std::vector<autograd::Node*> stack{output.grad_fn()};
  seen.insert(output.grad_fn());
  while (!stack.empty()) {
    autograd::Node* n = stack.back();
    stack.pop_back();
    for (auto& e : n->next_edges)
      if (e.valid() && seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
  }
  for (size_t k = 0; k < params_.size(); ++k) {
    autograd::Edge e = autograd::gradient_edge(params_[k]);
    if (!e.valid() || !seen.count(e.fn.get())) {
      const Tensor& g = params_[k].grad();
      mark_ready(k, g.defined() ? g : zeros_like(params_[k]));
    }
  }
  launch_ready_buckets();
}

Tensor DistributedDataParallel::forward(Tensor x) {
  if (expecting_grads_ && num_ready_ > 0 && num_ready_ < params_.size()) {
    std::string missing;
    for (size_t k = 0; k < params_.size(); ++k)
      if (!ready_[k]) missing += (missing.empty() ? "'" : ", '") + names_[k] + "'";
    throw dist::DistributedError(
        internal::str("DistributedDataParallel: the previous backward produced no gradient for ", missing,
                      ", so the gradients were not averaged; pass find_unused_parameters = true when some parameters "
                      "take no part in the loss, or make sure every output takes part in it"));
  }
  if (options_.broadcast_buffers && group_->size() > 1 && require_forward_param_sync_) sync_buffers();
  Tensor out = (*module_)(std::move(x));
  start_iteration(out);
  require_forward_param_sync_ = autograd::GradMode::is_enabled() && require_sync_;
  return out;
}

namespace {
// A buffer's bytes in a flat byte tensor, rounded up so that the next one starts 16-byte aligned.
int64_t aligned_bytes(const Tensor& b) { return (static_cast<int64_t>(b.nbytes()) + 15) / 16 * 16; }
}  // namespace

// Rank 0's buffers to every rank, coalesced: the buffers are copied into one flat tensor per group
// (kept between steps), broadcast once, and copied back on the other ranks. On the CPU a group is
// every buffer, whatever its dtype, as bytes (a batch-norm model's float running statistics and
// int64 step counters in one broadcast, one synchronization per forward); on a GPU one group per
// dtype (copies there go through typed ops).
void DistributedDataParallel::sync_buffers() {
  NoGradGuard no_grad;
  const bool root = group_->rank() == 0;
  std::vector<Tensor> buffers = module_->buffers();
  std::vector<std::vector<size_t>> groups;  // indices into buffers, per group, first-seen order
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (!buffers[i].defined() || buffers[i].numel() == 0) continue;
    auto same = [&](const std::vector<size_t>& g) {
      const Tensor& f = buffers[g.front()];
      return f.device() == buffers[i].device() && (f.is_cpu() || f.dtype() == buffers[i].dtype());
    };
    auto it = std::find_if(groups.begin(), groups.end(), same);
    if (it == groups.end()) groups.push_back({i});
    else it->push_back(i);
  }
  buffer_flats_.resize(groups.size());
  std::vector<dist::Work> works;
  for (size_t g = 0; g < groups.size(); ++g) {
    const Tensor& first = buffers[groups[g].front()];
    const bool bytes = first.is_cpu();
    int64_t total = 0;
    for (size_t i : groups[g]) total += bytes ? aligned_bytes(buffers[i]) : buffers[i].numel();
    const DType type = bytes ? kUInt8 : first.dtype();
    Tensor& flat = buffer_flats_[g];
    if (!flat.defined() || flat.numel() != total || flat.dtype() != type || flat.device() != first.device())
      flat = zeros({total}, TensorOptions(type).device(first.device()));  // zeros: the padding is sent too
    if (root) {
      int64_t at = 0;
      for (size_t i : groups[g]) {
        if (bytes) {
          Tensor b = buffers[i].contiguous();
          std::memcpy(static_cast<char*>(flat.data_ptr()) + at, b.data_ptr(), b.nbytes());
          at += aligned_bytes(b);
        } else {
          flat.narrow(0, at, buffers[i].numel()).copy_(buffers[i].reshape({-1}));
          at += buffers[i].numel();
        }
      }
    }
    works.push_back(group_->broadcast(flat, 0));
    ++stats_.buffer_broadcasts;
  }
  const auto t0 = std::chrono::steady_clock::now();
  for (auto& w : works) w.wait();
  stats_.buffer_wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (root) return;
  for (size_t g = 0; g < groups.size(); ++g) {
    const Tensor& flat = buffer_flats_[g];
    int64_t at = 0;
    for (size_t i : groups[g]) {
      Tensor& b = buffers[i];
      if (flat.is_cpu()) {  // bytes: this buffer's, seen as its dtype (aligned), into it
        b.copy_(from_blob(static_cast<char*>(flat.data_ptr()) + at, b.sizes(), TensorOptions(b.dtype())));
        at += aligned_bytes(b);
      } else {
        b.copy_(flat.narrow(0, at, b.numel()).view(b.sizes()));
        at += b.numel();
      }
    }
  }
}

Tensor DistributedDataParallel::on_grad(size_t k, const Tensor& g) {
  if (!sync_this_iteration_ || !expecting_grads_ || ready_[k]) return {};
  NoGradGuard no_grad;
  const Tensor& prev = params_[k].grad();
  mark_ready(k, prev.defined() ? prev + g : g);
  launch_ready_buckets();
  if (num_ready_ < params_.size()) return {};
  finalize(k);
  // finalize set this parameter's .grad to the average; accumulation then adds zeros.
  return zeros_like(g);
}

void DistributedDataParallel::mark_ready(size_t k, const Tensor& contribution) {
  Bucket& b = *buckets_[bucket_of_[k]];
  int64_t n = params_[k].numel();
  b.flat.narrow(0, static_cast<int64_t>(offset_in_bucket_[k]), n).copy_(contribution.reshape({-1}));
  ready_[k] = true;
  ++num_ready_;
  --b.pending;
}

void DistributedDataParallel::launch_ready_buckets() {
  // In bucket order on every rank, whatever order the gradients arrive in: collectives must match.
  while (next_bucket_to_launch_ < buckets_.size() && buckets_[next_bucket_to_launch_]->pending == 0) {
    Bucket& b = *buckets_[next_bucket_to_launch_++];
    b.work = group_->all_reduce(b.flat, dist::ReduceOp::avg);
    b.launched = true;
    ++stats_.bucket_all_reduces;
  }
}

void DistributedDataParallel::finalize(size_t current) {
  const auto t0 = std::chrono::steady_clock::now();
  for (auto& b : buckets_) b->work.wait();
  stats_.grad_wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++stats_.synced_backwards;
  for (size_t k = 0; k < params_.size(); ++k) {
    Bucket& b = *buckets_[bucket_of_[k]];
    Tensor avg =
        b.flat.narrow(0, static_cast<int64_t>(offset_in_bucket_[k]), params_[k].numel()).view(params_[k].sizes());
    Tensor& grad = params_[k].mutable_grad();
    if (grad.defined() && k != current) grad.copy_(avg);
    else grad = avg.clone();
  }
  expecting_grads_ = false;
}

}  // namespace nabla::nn::parallel
