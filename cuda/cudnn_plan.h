// cuDNN decisions without cuDNN's types, so that the rules are tested on every machine
// (tests/cuda/test_plan.cpp) while cuda/cudnn.cpp feeds them cuDNN's answers: which convolution
// algorithm runs, and which batch norms cuDNN takes.
//
// cuDNN ranks its algorithms (by measurement under cudnn::benchmark(), by heuristics otherwise), but
// an algorithm it ranks first can still fail to run: NOT_SUPPORTED or EXECUTION_FAILED for some
// shapes, or a workspace larger than the free memory. As PyTorch does, nabla keeps the ranked list of
// acceptable algorithms, tries them in order, skips those whose workspace cannot be had, and caches
// the first that runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "../core/error.h"

namespace nabla::cuda::conv_algo {

// One entry of cuDNN's ranked list (a cudnnConvolution*AlgoPerf_t), best first.
struct Candidate {
  int algo = 0;
  bool usable = true;         // status == CUDNN_STATUS_SUCCESS
  bool deterministic = true;  // determinism == CUDNN_DETERMINISTIC
  int math = 0;               // the cudnnMathType_t it was ranked with (and runs with)
  size_t workspace = 0;       // bytes it needs
};

// What the caller asks for: only deterministic algorithms (cudnn::deterministic()), and only
// `fma_math` (float32 without TF32: a math type that rounds as plain float FMA does).
struct Want {
  bool deterministic = false;
  bool strict_math = false;
  int fma_math = 0;  // CUDNN_FMA_MATH
};

// The candidates to try, in order: the usable ones (deterministic ones only, when wanted). Under
// strict math, those ranked in FMA math come first, then the others with FMA math forced on them.
inline std::vector<Candidate> acceptable(const std::vector<Candidate>& ranked, const Want& want) {
  std::vector<Candidate> out, forced;
  for (const Candidate& c : ranked) {
    if (!c.usable || (want.deterministic && !c.deterministic)) continue;
    if (!want.strict_math || c.math == want.fma_math) {
      out.push_back(c);
    } else {
      Candidate f = c;
      f.math = want.fma_math;
      forced.push_back(f);
    }
  }
  out.insert(out.end(), forced.begin(), forced.end());
  return out;
}

// What trying one candidate gave.
enum class Outcome { ran, not_supported, execution_failed, out_of_memory };

inline const char* outcome_name(Outcome o) {
  switch (o) {
    case Outcome::ran: return "ran";
    case Outcome::not_supported: return "not supported";
    case Outcome::execution_failed: return "execution failed";
    case Outcome::out_of_memory: return "workspace out of memory";
  }
  return "?";
}

// Tries `list` in order with `attempt` (which allocates the workspace and runs the convolution),
// skipping candidates whose workspace exceeds `workspace_limit` (the free plus cached memory) without
// trying them. Returns the index of the first that ran; throws CudaError naming `op` and what
// happened to each candidate when none did (or when the list is empty).
inline size_t first_that_runs(const std::vector<Candidate>& list, size_t workspace_limit,
                              const std::function<Outcome(const Candidate&)>& attempt, const char* op) {
  std::string why;
  for (size_t i = 0; i < list.size(); ++i) {
    const Candidate& c = list[i];
    Outcome o = c.workspace > workspace_limit ? Outcome::out_of_memory : attempt(c);
    if (o == Outcome::ran) return i;
    why += internal::str(
        why.empty() ? "" : "; ", "algorithm ", c.algo, " (workspace ", c.workspace,
        " bytes): ", c.workspace > workspace_limit ? "workspace larger than the memory available" : outcome_name(o));
  }
  throw CudaError(internal::str(op, ": no cuDNN convolution algorithm ran for this configuration",
                                list.empty() ? " (cuDNN offered none that is usable" : " (", list.empty() ? "" : why,
                                list.empty() ? " with the requested determinism)" : ")"));
}

}  // namespace nabla::cuda::conv_algo

namespace nabla::cuda {

// cuDNN takes at most 2^31 - 1 elements per tensor (its descriptors hold int). A larger convolution
// runs as several calls over slices of the batch (as PyTorch): the most images per call such that
// each call's input and output fit; 0 when a single image is already too large.
inline int64_t conv_batch_chunk(int64_t batch, int64_t in_per_image, int64_t out_per_image) {
  constexpr int64_t kMaxElements = 2147483647;
  const int64_t per = in_per_image > out_per_image ? in_per_image : out_per_image;
  if (per <= 0) return batch;
  const int64_t most = kMaxElements / per;
  return most < batch ? most : batch;
}

// Batch norm goes to cuDNN only within PyTorch's limits for it (aten's _batch_norm_impl_index):
// inputs of 3 or more dims, a batch of at most 880801 when training and 65535 in evaluation, eps of
// at least cuDNN's minimum and fewer than 2^31 - 1 elements; elsewhere the front-end's composition
// runs.
inline bool batch_norm_in_cudnn_limits(int64_t dim, int64_t batch, int64_t numel, bool training, double eps,
                                       double min_eps) {
  if (dim < 3 || numel == 0 || numel >= 2147483647 || eps < min_eps) return false;
  return training ? batch <= 880801 : batch <= 65535;
}

}  // namespace nabla::cuda
