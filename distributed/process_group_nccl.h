// ProcessGroupNccl: collectives on CUDA tensors with NCCL (the library PyTorch's "nccl" backend
// uses). Compiled when nabla is built with its CUDA backend and the toolkit has nccl.h;
// `nccl_built()` says whether this build has it. libnccl.so.2 is opened at construction (as the
// CUDA backend is a plugin), so a CUDA build of libnabla_distributed loads on machines without NCCL
// and init_process_group({.backend = "nccl"}) says why it cannot run there.
//
// Construction: rank 0 makes NCCL's unique id and puts it in the store; the other ranks read it;
// every rank joins the communicator on its device (NcclOptions::device, default the current device:
// call cuda::set_device(dist::get_local_rank()) first, one GPU per rank, as with PyTorch; NCCL refuses
// two ranks on one GPU). The communicator is non-blocking (ncclCommInitRankConfig with blocking = 0,
// NCCL 2.14 and later): its setup, every NCCL call that answers ncclInProgress and the destructor's
// ncclCommFinalize are watched within `timeout` (nccl_watch.h), so a peer that dies or never arrives
// gives a DistributedError naming the setup (and the ranks that never reached it) or the collective,
// and the communicator is aborted, instead of a hang. With an older NCCL the setup blocks
// (ncclCommInitRank) until every rank has joined.
//
// How a collective flows: on the caller's thread, the checks (CUDA tensors on the group's device,
// avg on a floating dtype, ranks in range) and a contiguous copy of a non-contiguous input, made on
// the caller's current stream; the group's own stream waits for an event recorded there (the
// inputs are ready), the NCCL call is queued on the group's stream, copies into non-contiguous or
// per-rank outputs follow on that stream, and an event marks the end. The tensors are recorded on
// the group's stream for the caching allocator. Work::wait() blocks the host until that event has
// completed (as PyTorch with TORCH_NCCL_BLOCKING_WAIT=1, whose default instead only makes the
// current stream wait), polling NCCL's asynchronous error; after `timeout` or on an error it aborts
// the communicator and throws a DistributedError naming the collective, the rank and the device
// (NCCL does not say which peer failed). Then the caller's current stream waits for the event.
// A failed group is broken: later calls throw the first error again.
//
// Differences from the gloo backend: send/recv ignore the tag (NCCL matches point-to-point calls
// between two ranks in the order they are issued) and a send does not finish before the peer's
// matching recv has been queued, on one stream per group: in a ring, let even ranks send first and
// odd ranks receive first. min/max on NaN follow NCCL's arithmetic.
#pragma once

#include <memory>

#include "process_group.h"

namespace nabla::distributed {

struct NcclOptions {
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};  // construction's store wait, every wait()
  int device = -1;  // the CUDA device of this rank; -1: the current device (cuda::current_device())
};

// Whether this build has the NCCL process group.
bool nccl_built();
// The version of the NCCL library the nccl backend opens ("2.28.9"); needs no GPU. Throws
// DistributedError saying why it cannot be loaded, ValueError in a build without the backend.
std::string nccl_version();

class ProcessGroupNccl : public ProcessGroup {
 public:
  // Throws DeviceError without a usable CUDA device, DistributedError when NCCL cannot be loaded or
  // the communicator cannot be made, ValueError for a device out of range.
  ProcessGroupNccl(Store& store, int rank, int size, NcclOptions options = {});
  ~ProcessGroupNccl() override;
  std::string backend() const override { return "nccl"; }
  int device() const { return device_; }

  struct Impl;  // the communicator, the group's stream and its state (process_group_nccl.cpp)

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
  // Queues `body` (the NCCL calls and the copies that follow them, on the group's stream) after the
  // caller's current stream; `tensors` are what the group's stream uses.
  Work launch(const std::string& what, const std::vector<Tensor>& tensors, const std::function<void()>& body);
  void check_tensor(const char* op, const Tensor& t, const char* name) const;
  void check_not_broken() const;

  NcclOptions options_;
  int device_ = 0;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nabla::distributed
