// Tensor's autograd methods: requires_grad, grad, retain_grad, hooks, backward.
#include <atomic>

#include "autograd/autograd.h"
#include "core/impl.h"

namespace nabla {

using autograd::AutogradMeta;

namespace {
std::atomic<size_t> g_hook_id{0};
AutogradMeta& meta_of(TensorImpl* impl) {
  if (!impl->meta) impl->meta = make_intrusive<AutogradMeta>();
  return *impl->meta;
}
const Tensor& undefined_tensor() {
  static const Tensor t;
  return t;
}
}  // namespace

bool Tensor::requires_grad() const { return autograd::takes_part_in_autograd(*checked()); }

autograd::Node* Tensor::grad_fn() const {
  TensorImpl* s = checked();
  if (s->view_history_is_stale()) internal::refresh_view_history(*this);
  return s->grad_fn.get();
}

Tensor& Tensor::requires_grad_(bool r) {
  TensorImpl* s = checked();
  if (s->grad_fn) {
    NABLA_CHECK(AutogradError, r,
                "requires_grad_: only leaf tensors can stop requiring grad; this tensor was computed by ",
                s->grad_fn->name(), " (use detach() to get a tensor without history)");
    return *this;
  }
  NABLA_CHECK(AutogradError, !r || is_floating(s->dtype) || nabla::is_complex(s->dtype),
              "requires_grad_: only floating-point and complex tensors can require "
              "gradients, this one is ",
              s->dtype);
  s->requires_grad = r;
  return *this;
}

const Tensor& Tensor::grad() const {
  TensorImpl* s = checked();
  return s->meta ? s->meta->grad : undefined_tensor();
}

Tensor& Tensor::mutable_grad() { return meta_of(checked()).grad; }

void Tensor::set_grad(const Tensor& g) {
  if (g.defined())
    NABLA_CHECK(ShapeError, g.sizes() == sizes(), "set_grad: gradient of shape ", g.sizes(),
                " does not match tensor of shape ", sizes());
  meta_of(checked()).grad = g;
}

void Tensor::zero_grad(bool set_to_none) {
  TensorImpl* s = checked();
  if (!s->meta || !s->meta->grad.defined()) return;
  if (set_to_none) {
    s->meta->grad = Tensor();
  } else {
    autograd::NoGradGuard ng;
    s->meta->grad = s->meta->grad.detach();
    s->meta->grad.zero_();
  }
}

void Tensor::retain_grad() const {
  TensorImpl* s = checked();
  NABLA_CHECK(AutogradError, requires_grad(),
              "retain_grad: cannot retain the gradient of a tensor that does not require grad");
  if (!grad_fn()) return;  // leaves keep their gradient anyway
  AutogradMeta& m = meta_of(s);
  if (m.retains_grad) return;
  m.retains_grad = true;
  intrusive_ptr<AutogradMeta> meta = s->meta;
  size_t id = ++g_hook_id;
  m.retain_hook_id = id;
  s->grad_fn->pre_hooks.emplace_back(s->output_nr, id, [meta](const Tensor& g) {
    if (autograd::GradMode::is_enabled()) {
      meta->grad = meta->grad.defined() ? meta->grad + g : g;
    } else if (meta->grad.defined()) {
      meta->grad = meta->grad + g;
    } else {
      meta->grad = g.detach().clone();
    }
    return Tensor();
  });
}

bool Tensor::retains_grad() const {
  TensorImpl* s = checked();
  return s->meta && s->meta->retains_grad;
}

size_t Tensor::register_hook(std::function<Tensor(const Tensor&)> hook) const {
  TensorImpl* s = checked();
  NABLA_CHECK(AutogradError, requires_grad(),
              "register_hook: cannot register a hook on a tensor that does not require grad");
  size_t id = ++g_hook_id;
  if (grad_fn()) {
    // Run before retain_grad's hook so a retained gradient sees the hook's result, as PyTorch.
    auto& hooks = s->grad_fn->pre_hooks;
    auto pos = hooks.end();
    if (s->meta && s->meta->retains_grad)
      for (auto it = hooks.begin(); it != hooks.end(); ++it)
        if (std::get<1>(*it) == s->meta->retain_hook_id) pos = it;
    hooks.insert(pos, {s->output_nr, id, std::move(hook)});
  } else {
    meta_of(s).hooks.emplace_back(id, std::move(hook));
  }
  return id;
}

size_t Tensor::register_post_accumulate_grad_hook(std::function<void(Tensor& grad)> hook) const {
  TensorImpl* s = checked();
  NABLA_CHECK(AutogradError, requires_grad() && !grad_fn(),
              "register_post_accumulate_grad_hook: only a leaf that requires grad accumulates a gradient");
  size_t id = ++g_hook_id;
  meta_of(s).post_accumulate_hooks.emplace_back(id, std::move(hook));
  return id;
}

void Tensor::remove_hook(size_t handle) const {
  TensorImpl* s = checked();
  if (s->grad_fn) {
    auto& hooks = s->grad_fn->pre_hooks;
    std::erase_if(hooks, [&](const auto& h) { return std::get<1>(h) == handle; });
  }
  if (s->meta) {
    std::erase_if(s->meta->hooks, [&](const auto& h) { return h.first == handle; });
    std::erase_if(s->meta->post_accumulate_hooks, [&](const auto& h) { return h.first == handle; });
  }
}

void Tensor::backward(const Tensor& gradient, bool retain_graph, bool create_graph) const {
  // As in PyTorch, building a graph of the gradients also keeps the graph that produced them.
  autograd::backward(*this, gradient, retain_graph || create_graph, create_graph);
}

}  // namespace nabla
