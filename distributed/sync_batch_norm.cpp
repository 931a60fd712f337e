#include "distributed/sync_batch_norm.h"

#include "autograd/function.h"
#include "core/graph.h"
#include "core/ops.h"
#include "distributed/distributed.h"
#include "nn/functional.h"
#include "nn/init.h"

namespace nabla::nn {

namespace dist = nabla::distributed;

// ---- the differentiable all_reduce ----------------------------------------------------------------

namespace {

struct AllReduceFunction : autograd::Function<AllReduceFunction> {
  // y = op over ranks of x (a new tensor); dx = op over ranks of dy.
  // group: null for the default group, looked up again in backward (so a backward after
  // destroy_process_group throws DistributedError instead of using a group that is gone).
  static Tensor forward(autograd::Context& ctx, const Tensor& x, dist::ReduceOp op, dist::ProcessGroup* group) {
    ctx.data["op"] = op;
    ctx.data["group"] = group;
    ctx.data["shape"] = Shape(x.sizes().begin(), x.sizes().end());
    ctx.data["options"] = TensorOptions(x.dtype()).device(x.device());
    Tensor y = x.clone().contiguous();
    (group ? *group : dist::default_group()).all_reduce(y, op).wait();
    return y;
  }
  static autograd::GradList backward(autograd::Context& ctx, autograd::GradList grads) {
    auto op = std::any_cast<dist::ReduceOp>(ctx.data["op"]);
    auto* group = std::any_cast<dist::ProcessGroup*>(ctx.data["group"]);
    // Every rank runs this backward (the same graph), so the collective pairs up: a rank whose
    // output got no gradient takes part with zeros. It goes through apply again, so a double
    // backward all-reduces too.
    Tensor g = grads[0];
    if (!g.defined())
      g = zeros(std::any_cast<Shape>(ctx.data["shape"]), std::any_cast<TensorOptions>(ctx.data["options"]));
    return {AllReduceFunction::apply(g, op, group)};
  }
};

}  // namespace

namespace parallel {

Tensor differentiable_all_reduce(const Tensor& tensor, dist::ReduceOp op, dist::ProcessGroup* group) {
  NABLA_CHECK(ValueError, tensor.defined(), "differentiable_all_reduce: the tensor is undefined");
  NABLA_CHECK(ValueError, op == dist::ReduceOp::sum || op == dist::ReduceOp::avg,
              "differentiable_all_reduce: op must be sum or avg (their gradient is the same reduction), got ",
              dist::reduce_op_name(op));
  if (!group) dist::default_group();  // throws when there is none, before anything is recorded
  return AllReduceFunction::apply(tensor, op, group);
}

}  // namespace parallel

// ---- SyncBatchNorm --------------------------------------------------------------------------------

SyncBatchNorm::SyncBatchNorm(int64_t n, BatchNormOptions o, dist::ProcessGroup* group)
    : BatchNorm(n, o, "SyncBatchNorm"), process_group(group) {}

// The BatchNorm's own tensors (shared: an optimizer or a checkpoint sees one set), its mode.
SyncBatchNorm::SyncBatchNorm(const BatchNorm& bn, dist::ProcessGroup* group)
    : BatchNorm(bn, "SyncBatchNorm"), process_group(group) {}

void SyncBatchNorm::check_input(const Tensor& x) const {
  NABLA_CHECK(ShapeError, x.defined() && x.dim() >= 2 && x.dim() <= 5,
              "SyncBatchNorm: expected input (N, C, *) with 2 to 5 dims, got ",
              x.defined() ? internal::str(x.sizes()) : std::string("an undefined tensor"));
}

dist::ProcessGroup* SyncBatchNorm::active_group() const {
  if (!training_) return nullptr;
  dist::ProcessGroup* g = process_group;
  if (!g) {
    if (!dist::is_initialized()) return nullptr;
    g = &dist::default_group();
  }
  return g->size() > 1 ? g : nullptr;
}

Tensor SyncBatchNorm::forward(Tensor x) {
  if (!active_group()) return BatchNorm::forward(x);  // exactly BatchNorm
  check_input(x);
  NABLA_CHECK(ShapeError, x.size(1) == num_features, "SyncBatchNorm: expected ", num_features,
              " channels (dim 1), got input of shape ", x.sizes());
  NABLA_CHECK(DTypeError, is_floating(x.dtype()), "SyncBatchNorm: expected a floating input, got ", x.dtype());
  for (const Tensor* p : {&weight, &bias, &running_mean, &running_var})
    if (p->defined())
      NABLA_CHECK(DeviceError, p->device() == x.device(), "SyncBatchNorm: the input is on ", x.device(),
                  " but the module's parameters and buffers are on ", p->device());
  const double factor = running_stats_factor();
  // x: (N, C, *); statistics over every dim but C, in float32 at least (a float16 count or sum of
  // squares would round), the output in x's dtype.
  const DType in_dtype = x.dtype();
  if (in_dtype == kFloat16 || in_dtype == kBFloat16) x = x.to(kFloat32);
  const int64_t C = num_features;
  Shape dims{0}, cshape{1, C};
  for (int64_t d = 2; d < x.dim(); ++d) {
    dims.push_back(d);
    cshape.push_back(1);
  }
  const double local_count = static_cast<double>(x.numel() / C);
  // Pass 1: [sum over (N, *) per channel, count] summed over the ranks -> the global mean.
  Tensor local = cat({x.sum(dims), full({1}, local_count, TensorOptions(x.dtype()).device(x.device()))});
  Tensor global = parallel::differentiable_all_reduce(local, dist::ReduceOp::sum, process_group);  // (C + 1)
  const double count = global.narrow(0, C, 1).detach().cpu().item<double>();
  NABLA_CHECK(ValueError, count > 1, "SyncBatchNorm: expected more than 1 value per channel when training, got ", count,
              " over all ranks (this rank's input has shape ", x.sizes(), ")");
  Tensor mean = global.narrow(0, 0, C) / count;  // (C)
  // Pass 2: sum of squared deviations from the global mean, summed over the ranks -> biased variance.
  Tensor xc = x - mean.view(cshape);
  Tensor var =
      parallel::differentiable_all_reduce((xc * xc).sum(dims), dist::ReduceOp::sum, process_group) / count;  // (C)
  Tensor y = xc * rsqrt(var + options.eps).view(cshape);
  if (weight.defined()) y = y * weight.view(cshape);
  if (bias.defined()) y = y + bias.view(cshape);

  if (options.track_running_stats) {
    autograd::NoGradGuard ng;
    Tensor m = mean.detach().to(running_mean.dtype());
    Tensor v = (var.detach() * (count / (count - 1))).to(running_var.dtype());  // unbiased
    running_mean.mul_(1 - factor).add_(m, factor);
    running_var.mul_(1 - factor).add_(v, factor);
  }
  return y.dtype() == in_dtype ? y : y.to(in_dtype);
}

// ---- convert_sync_batchnorm -----------------------------------------------------------------------

namespace {

std::shared_ptr<Module> convert_tree(const std::shared_ptr<Module>& module, dist::ProcessGroup* group, bool is_root) {
  if (std::dynamic_pointer_cast<SyncBatchNorm>(module)) return module;
  if (auto bn = std::dynamic_pointer_cast<BatchNorm>(module)) {
    auto sync = std::make_shared<SyncBatchNorm>(*bn, group);
    // The BatchNorm may still be called by a parent that holds it: it forwards to its replacement.
    if (!is_root) bn->delegate = [sync](const Tensor& x) { return sync->forward(x); };
    return sync;
  }
  for (const auto& [name, child] : module->named_children()) {
    std::shared_ptr<Module> converted = convert_tree(child, group, false);
    if (converted != child) module->replace_module(name, converted);
  }
  return module;
}

}  // namespace

std::shared_ptr<Module> SyncBatchNorm::convert_sync_batchnorm(std::shared_ptr<Module> module,
                                                              dist::ProcessGroup* process_group) {
  NABLA_CHECK(ValueError, module != nullptr, "SyncBatchNorm::convert_sync_batchnorm: the module is null");
  return convert_tree(module, process_group, true);
}

}  // namespace nabla::nn
