// Registry entries for normalization ops (see opinfo.h). batch_norm is composed from Tensor ops on
// the CPU and one cuDNN call each way on CUDA, so the registry's device-parity and gradcheck suites
// compare the two.
#include "opinfo.h"

namespace nabla::testing {
namespace {

using I = const Inputs&;

// Training mode with fresh running statistics: the normalized tensor (and, with `stats`, the
// updated running mean and variance, which are buffers: no gradient flows into them).
Outputs bn_train(I x, bool stats) {
  int64_t C = x[0].sizes()[1];
  TensorOptions o = dtype(x[0].dtype()).device(x[0].device());
  Tensor rm = zeros({C}, o), rv = ones({C}, o);
  Tensor y = batch_norm(x[0], x[1], x[2], rm, rv, /*training=*/true, 0.1, 1e-5);
  if (!stats) return {y};
  batch_norm(x[0].detach() * 2 + 1, x[1], x[2], rm, rv, true, 0.3, 1e-5);  // a second update
  return {rm, rv};
}

std::vector<OpInfo> norm_ops() {
  std::vector<OpInfo> ops;
  std::vector<Sample> train = {{{arg({4, 3, 3, 2}), arg({3}, 0.5, 1.5), arg({3})}, "4d"},
                               {{arg({5, 2}), arg({2}, 0.5, 1.5), arg({2})}, "2d"},
                               {{arg({3, 2, 4}), arg({2}, 0.5, 1.5), arg({2})}, "3d"}};
  ops.push_back({.name = "batch_norm_train",
                 .ops = {OpId::batch_norm},
                 .torch = "F.batch_norm(x[0], torch.zeros(x[0].shape[1], dtype=x[0].dtype), torch.ones(x[0].shape[1], "
                          "dtype=x[0].dtype), x[1], x[2], True, 0.1, 1e-5)",
                 .fn = [](I x) { return bn_train(x, false); },
                 .samples = train});
  ops.push_back({.name = "batch_norm_running_stats",
                 .ops = {OpId::batch_norm},
                 .torch = "T.batch_norm_running_stats(x)",
                 .fn = [](I x) { return bn_train(x, true); },
                 .samples = train,
                 .differentiable = false});
  ops.push_back({.name = "batch_norm_train_no_affine",
                 .ops = {OpId::batch_norm},
                 .torch = "F.batch_norm(x[0], None, None, training=True)",
                 .fn = [](I x) { return Outputs{batch_norm(x[0], Tensor(), Tensor(), Tensor(), Tensor(), true)}; },
                 .samples = {{{arg({3, 2, 2, 3})}, "4d"}}});
  ops.push_back(
      {.name = "batch_norm_eval",
       .ops = {OpId::batch_norm},
       .torch = "F.batch_norm(x[0], x[3], x[4], x[1], x[2], False)",
       .fn = [](I x) { return Outputs{batch_norm(x[0], x[1], x[2], x[3], x[4], /*training=*/false)}; },
       .samples = {
           {{arg({4, 3, 2, 2}), arg({3}, 0.5, 1.5), arg({3}), const_arg({3}, -0.5, 0.5), const_arg({3}, 0.5, 2)}, "4d"},
           {{arg({2, 3, 2, 2}), arg({3}, 0.5, 1.5), arg({3}), const_arg({3}, -0.5, 0.5), const_arg({3}, 0.5, 2)},
            "4d_small"},
           {{arg({2, 2, 3}), arg({2}, 0.5, 1.5), arg({2}), const_arg({2}, -0.5, 0.5), const_arg({2}, 0.5, 2)},
            "3d_small"},
           {{arg_t({4, 3}), arg({3}, 0.5, 1.5), arg({3}), const_arg({3}, -0.5, 0.5), const_arg({3}, 0.5, 2)},
            "2d_noncontiguous"}}});
  return ops;
}

Registrar norm_registrar(norm_ops());

}  // namespace
}  // namespace nabla::testing
