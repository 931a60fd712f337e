// ProcessGroupGloo: collectives on CPU tensors with Gloo over TCP.
//
// Construction runs Gloo's rendezvous (each pair of ranks exchanges listening addresses through
// the store and connects) and starts the group's worker thread. A collective checks its tensors on
// the caller's thread, copies non-contiguous inputs, and queues the Gloo call; the worker runs the
// queue in order, copies results into non-contiguous outputs and completes the Work.
//
// After a failure (a peer died or timed out) the Gloo connections are in an unknown state: the group
// is broken and every later call throws the first error again.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "process_group.h"

namespace gloo {
class Context;
}

namespace nabla::distributed {

struct GlooOptions {
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};  // every collective, end to end
  // The address peers reach this process on (its listening sockets bind there); empty: the
  // network interface `iface` when set, else the address of the host name.
  std::string hostname;
  std::string iface;
};

class ProcessGroupGloo : public ProcessGroup {
 public:
  ProcessGroupGloo(Store& store, int rank, int size, GlooOptions options);
  ~ProcessGroupGloo() override;
  std::string backend() const override { return "gloo"; }

  Work all_reduce(const Tensor& tensor, ReduceOp op) override;
  Work broadcast(const Tensor& tensor, int root) override;
  Work all_gather(const std::vector<Tensor>& outputs, const Tensor& input) override;
  Work reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op) override;
  Work gather(const std::vector<Tensor>& outputs, const Tensor& input, int root) override;
  Work scatter(const Tensor& output, const std::vector<Tensor>& inputs, int root) override;
  Work send(const Tensor& tensor, int dst, uint32_t tag) override;
  Work recv(const Tensor& tensor, int src, uint32_t tag) override;
  Work barrier() override;

 private:
  // What a collective call is, compared across ranks first under NABLA_DISTRIBUTED_DEBUG=1:
  // the collective, the element count, the dtype, and its root or reduction.
  struct Signature {
    int64_t collective, numel, dtype, detail;
  };
  // Queues fn for the worker thread; `what` names the call in errors ("all_reduce (float32 [4, 5])").
  Work enqueue(std::string what, Signature sig, std::function<void(uint32_t tag)> fn);
  void check_signatures(const std::string& what, const Signature& sig, uint32_t tag);
  void run_worker();
  [[noreturn]] void rethrow_as_distributed(const std::string& what, const std::exception& e) const;
  void check_not_broken() const;

  GlooOptions options_;
  std::shared_ptr<gloo::Context> context_;
  std::map<std::string, int> peer_addresses_;  // "[127.0.0.1]:41234" -> rank, to name peers in errors
  uint32_t next_tag_ = 0;                      // under mutex_
  bool debug_ = false;                         // NABLA_DISTRIBUTED_DEBUG=1: compare signatures first

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  struct Task {
    std::function<void()> run;
  };
  std::deque<Task> queue_;
  bool stop_ = false;
  std::string broken_;  // the first failure, under mutex_
  std::thread worker_;
};

}  // namespace nabla::distributed
