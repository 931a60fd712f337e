// What fully_sharded_data_parallel.cpp and fsdp_checkpoint.cpp share: a unit's state, and the checks
// both use. Not a public header.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "fully_sharded_data_parallel.h"

namespace nabla::nn::parallel {

struct FullyShardedDataParallel::Unit {
  std::string name;  // the module's qualified name; "" for the root
  Module* module = nullptr;
  bool root = false;
  int group = 0;  // FSDPOptions::param_group's value for its parameters
  // The trainable parameters whose values live in the flat buffer, their module names and offsets.
  std::vector<Tensor> params;
  std::vector<std::string> names;
  std::vector<int64_t> offsets;
  int64_t numel = 0, padded = 0, shard_numel = 0;
  Tensor full;   // (padded,): the flat buffer the parameters view (param_dtype); its memory exists while gathered
  Tensor shard;  // (shard_numel,): this rank's slice, a leaf: what the optimizer steps
  bool gathered = false, pending = false;  // pending: an all_gather into `full` is under way
  uint32_t version = 0;                    // the storage's version counter when it was freed
  distributed::Work gather_work, rs_work;
  DType reduce_dtype = DType::f32;  // the flat gradient's and the reduce-scatter's dtype
  Tensor flat_grad, rs_out;         // the backward's flat gradient and this rank's averaged slice of it
  std::vector<char> expect, ready;  // per parameter: the backward reaches it; its gradient came
  size_t waiting = 0;               // expected gradients still to come
  std::vector<size_t> hook_ids;     // post-accumulate-grad hooks on the parameters
  RemovableHandle pre, post;        // the module's forward hooks
};

using Units = std::vector<std::unique_ptr<FullyShardedDataParallel::Unit>>;

// Every rank must have made the same units (names and sizes): a DistributedError names the first
// that differs.
void check_same_units(distributed::ProcessGroup& group, const Units& units, const char* who);
// A forward after a backward that left some expected gradients missing throws, naming them.
void check_no_partial_backward(const Units& units, size_t done, size_t expecting, const char* who);

}  // namespace nabla::nn::parallel
