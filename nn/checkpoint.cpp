#include "nn/checkpoint.h"

namespace nabla::nn {

Tensor checkpoint_sequential(const std::vector<std::shared_ptr<Module>>& modules, int segments, const Tensor& input,
                             autograd::CheckpointOptions opts) {
  const auto n = static_cast<int64_t>(modules.size());
  NABLA_CHECK(ValueError, segments >= 1 && segments <= n,
              "checkpoint_sequential: segments must be between 1 and the number "
              "of modules (",
              n, "), got ", segments);
  // modules[begin, end) applied in order to x.
  auto run = [&modules](int64_t begin, int64_t end) {
    std::vector<std::shared_ptr<Module>> part(modules.begin() + begin, modules.begin() + end);
    return [part = std::move(part)](const Tensor& x) {
      Tensor y = x;
      for (const auto& m : part) y = (*m)(std::move(y));
      return y;
    };
  };
  const int64_t size = n / segments;
  Tensor x = input;
  int64_t begin = 0;
  for (int s = 0; s + 1 < segments; ++s, begin += size) x = autograd::checkpoint(run(begin, begin + size), x, opts);
  return run(begin, n)(x);
}

Tensor checkpoint_sequential(const Sequential& seq, int segments, const Tensor& input,
                             autograd::CheckpointOptions opts) {
  return checkpoint_sequential(std::vector<std::shared_ptr<Module>>(seq.begin(), seq.end()), segments, input, opts);
}

Tensor checkpoint_sequential(const ModuleList& list, int segments, const Tensor& input,
                             autograd::CheckpointOptions opts) {
  return checkpoint_sequential(std::vector<std::shared_ptr<Module>>(list.begin(), list.end()), segments, input, opts);
}

}  // namespace nabla::nn
