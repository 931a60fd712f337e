// torch.distributed for nabla: one default process group per process, and the collectives on it.
//
//   // launched by `nabla-run --nproc-per-node 2 ./train` (or torchrun): RANK, WORLD_SIZE, ... are set
//   namespace dist = nabla::distributed;
//   dist::init_process_group({.backend = "gloo"});            // env://; "nccl" for CUDA tensors
//   Tensor g = ...;
//   dist::all_reduce(g, dist::ReduceOp::sum);                  // every rank now holds the sum
//   auto work = dist::all_reduce(g, dist::ReduceOp::avg, /*async_op=*/true);
//   ...;  work.wait();
//   dist::destroy_process_group();
//
// init_method: "env://" reads MASTER_ADDR, MASTER_PORT (and RANK, WORLD_SIZE unless given);
// "tcp://host:port" names the master directly; "file:///path" rendezvous through files in a
// directory every rank sees. Rank 0 hosts the TCP store, listening only where the master address
// points and, given the job's secret (nabla-run passes one), serving only the job's ranks; its
// bounds: NABLA_STORE_MAX_BYTES (keys and values held; default 64 MiB + 512 bytes x world_size^2)
// and NABLA_STORE_MAX_VALUE_BYTES (a value; default 16 MiB), read on rank 0. Everything that waits
// (the rendezvous, each collective) gives up after `timeout` with a DistributedError that names the
// call, the peer or address and the timeout. Under nabla-run, init also starts the heartbeat its
// liveness check watches (heartbeat.h).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "process_group.h"

namespace nabla::distributed {

struct InitOptions {
  // "gloo": CPU tensors; "nccl": CUDA tensors, one GPU per rank (in builds with the CUDA backend
  // and NCCL; nccl_built() in process_group_nccl.h says whether this one has it).
  std::string backend = "gloo";
  std::string init_method = "env://";                           // "env://", "tcp://host:port", "file:///path"
  int rank = -1;                                                // -1: from RANK
  int world_size = -1;                                          // -1: from WORLD_SIZE
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};  // as torch.distributed's default
  // nccl: this rank's CUDA device; -1: the current device (call cuda::set_device(get_local_rank())
  // first, as with PyTorch).
  int device = -1;
  // The job's secret for the TCP store (env://, tcp://; at least 16 bytes, the same on every rank):
  // the store serves only processes that prove they know it, and proves it back (a challenge-
  // response: the secret never crosses the wire; TCPStoreOptions::secret). Empty: read from the file
  // NABLA_STORE_SECRET_FILE names (readable by its owner only, as nabla-run writes it), else from
  // NABLA_STORE_SECRET. With none, the store serves anyone who reaches it, as PyTorch's TCPStore
  // does, and rank 0 warns on stderr (NABLA_STORE_INSECURE=1 silences the warning). A difference
  // from PyTorch, which has no authentication.
  std::string store_secret;
  // Rank 0's store listens on the addresses MASTER_ADDR resolves to (127.0.0.1: loopback only);
  // true, or NABLA_STORE_LISTEN_ALL=1: on every interface, as PyTorch's TCPStore always does.
  bool store_listen_all = false;
};

// Joins the job: rendezvous, then the backend's connections to every peer (Gloo's TCP pairs, or
// NCCL's communicator, whose unique id travels through the same store). Throws DistributedError
// when the peers do not all arrive within the timeout (naming the missing ranks), disagree on the
// world size, or the master cannot be reached; ValueError for bad options or environment variables
// (and for "nccl" in a build without it); DeviceError for "nccl" on a machine without a GPU.
void init_process_group(const InitOptions& options = {});
bool is_initialized();
void destroy_process_group();  // waits for queued collectives; the group can be initialized again
int get_rank();
int get_world_size();
// LOCAL_RANK / LOCAL_WORLD_SIZE as the launcher set them (0 / 1 when unset).
int get_local_rank();
int get_local_world_size();
// The default group (throws when not initialized).
ProcessGroup& default_group();

// The collectives on the default group (see ProcessGroup). With async_op the returned Work must be
// waited; without, it is complete (errors were thrown).
Work all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::sum, bool async_op = false);
Work broadcast(const Tensor& tensor, int src, bool async_op = false);
Work all_gather(const std::vector<Tensor>& outputs, const Tensor& input, bool async_op = false);
Work reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op = ReduceOp::sum,
                    bool async_op = false);
Work gather(const Tensor& input, const std::vector<Tensor>& outputs, int dst, bool async_op = false);
Work scatter(const Tensor& output, const std::vector<Tensor>& inputs, int src, bool async_op = false);
void send(const Tensor& tensor, int dst, uint32_t tag = 0);
void recv(const Tensor& tensor, int src, uint32_t tag = 0);
Work isend(const Tensor& tensor, int dst, uint32_t tag = 0);
Work irecv(const Tensor& tensor, int src, uint32_t tag = 0);
void barrier();

}  // namespace nabla::distributed
