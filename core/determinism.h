// Deterministic algorithms, as torch.use_deterministic_algorithms.
//
//   nabla::use_deterministic_algorithms(true);   // every op now gives bitwise-reproducible results
//
// On the CPU every nabla kernel is deterministic already (for a fixed number of threads): the switch
// changes nothing there. On the GPU it selects, for the ops whose fast path adds with atomics, a
// variant that adds in a fixed order instead:
//   - convolutions: only cuDNN algorithms that are deterministic (as cuda::cudnn::set_deterministic);
//   - index_add, scatter_add (the gradient of gather, index_select, embedding, nll_loss, ...) and
//     max_pool2d's backward: each destination element adds its contributions in index order, the
//     CPU's order, so the results also equal the CPU's bit for bit (up to the GPU's arithmetic);
//     slower than the atomic adds, most of all when many indices hit one destination.
// Every other CUDA kernel of nabla is deterministic in both modes (reductions combine in a fixed
// order; softmax, scans and sorting have no atomics). PyTorch throws for the ops that have no
// deterministic implementation; nabla has none such today, so the switch never throws.
//
// Off by default. A process-wide setting, read when an op runs.
#pragma once

namespace nabla {

void use_deterministic_algorithms(bool on);
bool are_deterministic_algorithms_enabled();

}  // namespace nabla
