// Gradient clipping when the ranks hold disjoint parts of the gradients (ZeRO's shards, FSDP's flat
// shards): nn::utils::clip_grad_norm_'s total norm over all of them, from one all_reduce.
#pragma once

#include <vector>

#include "../core/tensor.h"
#include "process_group.h"

namespace nabla::distributed {

// grads: this rank's part (undefined ones are skipped). As nn::utils::clip_grad_norm_: each
// gradient's norm in its dtype, then the norm of the norms in float64, here each rank's share of
// it (the sum of norm^p, or the max) reduced over the group; every gradient is scaled by
// min(1, max_norm / (total + 1e-6)). Returns the total norm. A collective. `who` names the caller
// in errors.
double clip_sharded_grad_norm_(ProcessGroup& group, const std::vector<Tensor>& grads, double max_norm, double norm_type,
                               const char* who);

}  // namespace nabla::distributed
