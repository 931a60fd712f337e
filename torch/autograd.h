// libtorch's custom autograd functions (torch::autograd::Function<T> with an AutogradContext),
// over nabla's (autograd/function.h).
//
//   struct MulConstant : torch::autograd::Function<MulConstant> {
//     static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x, double c) {
//       ctx->saved_data["c"] = c;
//       return x * c;
//     }
//     static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
//                                                    torch::autograd::variable_list grads) {
//       return {grads[0] * ctx->saved_data["c"].toDouble(), torch::Tensor()};  // none for c
//     }
//   };
//   torch::Tensor y = MulConstant::apply(x, 5.5);
//
// backward returns one gradient per argument of forward (undefined ones for the non-Tensor
// arguments), and may return trailing undefined gradients; its node is named "MulConstantBackward".
// An output that did not reach what backward started from gets zeros in backward's list, as in
// libtorch by default (nabla does so whatever set_materialize_grads says).
#pragma once

#include <any>
#include <memory>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../autograd/autograd.h"
#include "../autograd/function.h"
#include "../core/graph.h"
#include "ivalue.h"
#include "types.h"

namespace torch::autograd {

using variable_list = std::vector<Tensor>;
using tensor_list = std::vector<Tensor>;
using Variable = Tensor;
// torch::autograd::grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused)
// and backward(tensors, grad_tensors, retain_graph, create_graph): nabla's, with libtorch's
// signatures (backward without libtorch's `inputs`).
using nabla::autograd::backward;
using nabla::autograd::grad;

class AutogradContext {
 public:
  explicit AutogradContext(nabla::autograd::Context& ctx) : ctx_(&ctx) {}
  // Tensors for backward (undefined ones too); changing one in place before backward is reported.
  void save_for_backward(variable_list to_save) { ctx_->save_for_backward(std::move(to_save)); }
  variable_list get_saved_variables() const { return ctx_->saved(); }
  // Outputs that get no gradient (indices, masks).
  void mark_non_differentiable(const variable_list& outputs) { ctx_->mark_non_differentiable(outputs); }
  // Whether forward's input i (counting its Tensor arguments) needs a gradient.
  bool needs_input_grad(size_t i) const { return ctx_->needs_input_grad(i); }
  // Anything else backward needs: ctx->saved_data["k"] = 2.0; ... .toDouble()
  std::unordered_map<std::string, IValue> saved_data;
  // Accepted for libtorch's code: nabla always hands backward zeros (never undefined tensors) for
  // the outputs that did not reach what backward started from, libtorch's default; backward code
  // written for false (checking .defined()) computes the same with them.
  void set_materialize_grads(bool /*value*/) {}

 private:
  nabla::autograd::Context* ctx_;
};

namespace detail {
inline constexpr const char* kContextKey = "torch.autograd_context";
// The AutogradContext kept with nabla's Context (made by forward, read by backward).
inline AutogradContext* context_of(nabla::autograd::Context& ctx) {
  auto it = ctx.data.find(kContextKey);
  if (it == ctx.data.end()) it = ctx.data.emplace(kContextKey, std::make_shared<AutogradContext>(ctx)).first;
  return std::any_cast<std::shared_ptr<AutogradContext>&>(it->second).get();
}

std::string backward_name(const std::type_info& type);  // "MulConstantBackward"

// Calls fn on each Tensor of what a forward returned (a Tensor, a std::vector or a std::tuple).
template <class F>
void for_each_tensor(const Tensor& t, F&& fn) {
  fn(t);
}
template <class F>
void for_each_tensor(const variable_list& v, F&& fn) {
  for (const Tensor& t : v) fn(t);
}
template <class... Ts, class F>
void for_each_tensor(const std::tuple<Ts...>& tuple, F&& fn) {
  std::apply([&](const auto&... t) { (fn(t), ...); }, tuple);
}

// T's forward and backward in the form nabla's Function calls them.
template <class T>
struct Adapter {
  template <class... Args>
  static auto forward(nabla::autograd::Context& ctx, Args&&... args) {
    return T::forward(context_of(ctx), std::forward<Args>(args)...);
  }
  static nabla::autograd::GradList backward(nabla::autograd::Context& ctx, nabla::autograd::GradList grads) {
    variable_list in(grads.begin(), grads.end());
    variable_list out = T::backward(context_of(ctx), std::move(in));
    nabla::autograd::GradList r;
    for (Tensor& g : out) r.push_back(std::move(g));
    return r;
  }
};

}  // namespace detail

template <class T>
struct Function {
  template <class... Args>
  static auto apply(Args&&... args) {
    auto result = nabla::autograd::Function<detail::Adapter<T>>::apply(std::forward<Args>(args)...);
    detail::for_each_tensor(result, [](const Tensor& t) { rename(t); });
    return result;
  }

 private:
  // The node is named for T (not for the adapter nabla's Function sees).
  static void rename(const Tensor& t) {
    if (!t.defined()) return;
    if (auto* node = dynamic_cast<nabla::autograd::CustomNode<detail::Adapter<T>>*>(t.grad_fn()))
      node->name_ = detail::backward_name(typeid(T));
  }
};

}  // namespace torch::autograd
