// ProcessGroup: the collectives of one group of processes, independent of the library that carries
// them. ProcessGroupGloo (process_group_gloo.h) runs them on CPU tensors over TCP; an NCCL group for
// CUDA tensors implements the same interface.
//
// Every collective returns a Work. Collectives run in the order they were issued, on the group's
// own thread, so a caller can overlap them with computation (DDP launches gradient buckets while
// backward continues) and wait() later; wait() rethrows what failed, as a DistributedError naming
// the collective, this rank, the peer where Gloo says which, and the timeout.
//
// Conventions (as torch.distributed): all_reduce, broadcast, recv and scatter write into their
// tensors in place; every rank calls the same collectives in the same order with tensors of the
// same shapes and dtypes. Inputs are read when the call is made (a non-contiguous tensor is copied
// then); outputs are written before wait() returns. Wait for every Work before destroying its group.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../core/tensor.h"
#include "store.h"

namespace nabla::distributed {

// The reductions of all_reduce and reduce_scatter (torch.distributed.ReduceOp SUM, AVG, ...).
// On bool: sum and max are logical or, product and min logical and. avg: floating dtypes only.
enum class ReduceOp { sum, avg, min, max, product };
const char* reduce_op_name(ReduceOp op);

// A handle to a collective in flight.
class Work {
 public:
  struct State;
  Work() = default;
  explicit Work(std::shared_ptr<State> s) : state_(std::move(s)) {}
  // Blocks until the collective has finished; rethrows its error. An empty Work is complete.
  void wait() const;
  bool is_completed() const;

 private:
  std::shared_ptr<State> state_;
};

struct Work::State {
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  std::exception_ptr error;
  // Point-to-point work completes in wait(), on the caller's thread (see ProcessGroupGloo::send).
  std::function<void()> finish;
  void complete(std::exception_ptr e);
};

class ProcessGroup {
 public:
  ProcessGroup(int rank, int size) : rank_(rank), size_(size) {}
  virtual ~ProcessGroup() = default;
  int rank() const { return rank_; }
  int size() const { return size_; }
  virtual std::string backend() const = 0;

  // tensor <- reduce(tensor of every rank).
  virtual Work all_reduce(const Tensor& tensor, ReduceOp op) = 0;
  // tensor <- tensor of rank `root`.
  virtual Work broadcast(const Tensor& tensor, int root) = 0;
  // outputs[r] <- input of rank r; outputs: size() tensors shaped as input.
  virtual Work all_gather(const std::vector<Tensor>& outputs, const Tensor& input) = 0;
  // output <- reduce over ranks of their inputs[rank()]; inputs: size() tensors shaped as output.
  virtual Work reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op) = 0;
  // On root: outputs[r] <- input of rank r; other ranks pass no outputs.
  virtual Work gather(const std::vector<Tensor>& outputs, const Tensor& input, int root) = 0;
  // output <- inputs[rank()] of root; only root passes inputs.
  virtual Work scatter(const Tensor& output, const std::vector<Tensor>& inputs, int root) = 0;
  // Point-to-point; a send to rank d with tag t matches the recv of rank d from this rank with tag t.
  virtual Work send(const Tensor& tensor, int dst, uint32_t tag) = 0;
  virtual Work recv(const Tensor& tensor, int src, uint32_t tag) = 0;
  virtual Work barrier() = 0;

 protected:
  int rank_, size_;
};

}  // namespace nabla::distributed
