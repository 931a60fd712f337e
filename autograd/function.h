// Custom differentiable functions, in libtorch's style:
//
//   struct Cube : autograd::Function<Cube> {
//     static Tensor forward(autograd::Context& ctx, const Tensor& x) {
//       ctx.save_for_backward({x});
//       return x * x * x;
//     }
//     static GradList backward(autograd::Context& ctx, GradList grads) {
//       Tensor x = ctx.saved()[0];
//       return {grads[0] * 3 * x * x};     // one gradient per Tensor argument of forward
//     }
//   };
//   Tensor y = Cube::apply(x);
//
// forward runs without recording; its Tensor arguments become the node's inputs, and backward
// returns one gradient per Tensor argument, or one per argument (as libtorch), with undefined
// Tensors for the non-Tensor ones. An undefined gradient means "no gradient" for that input, and
// undefined gradients past the last argument are ignored (libtorch accepts them too); fewer than one
// per Tensor argument, or a defined gradient for a non-Tensor argument, is an AutogradError.
// backward may use any differentiable ops, so double backward works too.
#pragma once

#include <algorithm>
#include <any>
#include <map>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "../core/graph.h"

namespace nabla::autograd {

class Context {
 public:
  // Tensors needed by backward; in-place changes to them before backward are reported.
  void save_for_backward(std::vector<Tensor> tensors) { to_save_ = std::move(tensors); }
  // The saved tensors (throws if one was modified in place since forward).
  std::vector<Tensor> saved() const;
  // Marks outputs that have no gradient (e.g. indices); they do not require grad.
  void mark_non_differentiable(std::vector<Tensor> outputs) { non_diff_ = std::move(outputs); }
  // Whether forward input (Tensor argument) i needs a gradient.
  bool needs_input_grad(size_t i) const { return node_ && node_->needs_input_grad(i); }
  // Anything else backward needs: ctx.data["k"] = 2.0; ... std::any_cast<double>(ctx.data["k"])
  std::map<std::string, std::any> data;

 private:
  template <class T>
  friend class CustomNode;
  template <class T>
  friend struct Function;
  std::vector<Tensor> to_save_;
  std::vector<SavedTensor> saved_;
  std::vector<Tensor> non_diff_;
  const Node* node_ = nullptr;
};

template <class T>
class CustomNode final : public Node {
 public:
  CustomNode(size_t num_args, std::vector<int> tensor_pos) : num_args_(num_args), tensor_pos_(std::move(tensor_pos)) {
    ctx_.node_ = this;
  }
  const char* name() const override { return name_.c_str(); }
  std::string torch_name() const override { return name_; }  // PyTorch's custom Functions: "CubeBackward"
  GradList apply(GradList&& grads) override {
    if (released_) throw_graph_freed(name());
    GradList r = T::backward(ctx_, std::move(grads));
    const size_t nt = tensor_pos_.size();
    // Undefined gradients past the last argument are "no gradient", as in libtorch (which drops
    // them); a defined one there is an error.
    size_t used = r.size();
    while (used > std::max(nt, num_args_) && !r[used - 1].defined()) --used;
    if (used == nt) {
      r.resize(nt);
      return r;
    }
    NABLA_CHECK(AutogradError, used == num_args_, name(), ": backward returned ", r.size(), " gradients; expected ", nt,
                " (one per Tensor argument of forward) or ", num_args_,
                " (one per argument), optionally followed by undefined ones");
    GradList out;
    size_t next = 0;  // the next Tensor argument's position in tensor_pos_
    for (size_t i = 0; i < num_args_; ++i) {
      if (next < nt && tensor_pos_[next] == static_cast<int>(i)) {
        out.push_back(r[i]);
        ++next;
      } else {
        NABLA_CHECK(AutogradError, !r[i].defined(), name(), ": backward returned a defined gradient at position ", i,
                    ", but forward's argument ", i, " is not a Tensor (return an undefined Tensor there)");
      }
    }
    return out;
  }
  void release_saved() override {
    ctx_.saved_.clear();
    released_ = true;
  }
  Context ctx_;
  std::string name_;

 private:
  size_t num_args_;
  std::vector<int> tensor_pos_;
  bool released_ = false;
};

std::string demangled_type_name(const char* mangled);

template <class T>
struct Function {
  template <class... Args>
  static auto apply(Args&&... args) {
    // Collect the Tensor arguments (they become the node's inputs).
    std::vector<Tensor> inputs;
    std::vector<int> positions;
    int pos = 0;
    auto collect = [&](const auto& a) {
      if constexpr (std::is_same_v<std::decay_t<decltype(a)>, Tensor>) {
        inputs.push_back(a);
        positions.push_back(pos);
      }
      ++pos;
    };
    (collect(args), ...);
    bool grad = false;
    for (const Tensor& t : inputs) grad = grad || needs_grad(t);

    auto* node = new CustomNode<T>(sizeof...(Args), positions);
    intrusive_ptr<Node> hold(node);
    node->name_ = demangled_type_name(typeid(T).name()) + "Backward";
    using Out = decltype(T::forward(node->ctx_, std::forward<Args>(args)...));
    Out result;
    {
      NoGradGuard ng;
      result = T::forward(node->ctx_, std::forward<Args>(args)...);
    }
    if (!grad) return result;
    std::vector<Tensor> outs = as_list(result), returned = outs;
    // An output that is an input (or has history of its own) is returned as an alias: connecting
    // the node to the tensor itself would rewrite the input's history (PyTorch returns a view).
    bool aliased = false;
    for (Tensor& o : outs) {
      if (!o.defined()) continue;
      bool is_input = false;
      for (const Tensor& t : inputs) is_input = is_input || o.is_same(t);
      if (is_input || o.requires_grad()) {
        o = o.detach();
        aliased = true;
      }
    }
    connect(node, inputs, outs);
    Context& ctx = node->ctx_;
    for (const Tensor& t : ctx.non_diff_)
      for (size_t k = 0; k < outs.size(); ++k)
        if (returned[k].is_same(t)) {
          outs[k].impl()->grad_fn.reset();
          outs[k].impl()->requires_grad = false;
        }
    if (aliased) from_list(result, outs);
    for (const Tensor& t : ctx.to_save_) {
      bool is_output = false;
      for (const Tensor& o : outs) is_output = is_output || (t.defined() && o.is_same(t));
      ctx.saved_.emplace_back(t, is_output);
    }
    ctx.to_save_.clear();
    return result;
  }

 private:
  static std::vector<Tensor> as_list(const Tensor& t) { return {t}; }
  static std::vector<Tensor> as_list(const std::vector<Tensor>& v) { return v; }
  template <class... Ts>
  static std::vector<Tensor> as_list(const std::tuple<Ts...>& t) {
    return std::apply([](const auto&... x) { return std::vector<Tensor>{x...}; }, t);
  }
  static void from_list(Tensor& r, const std::vector<Tensor>& v) { r = v[0]; }
  static void from_list(std::vector<Tensor>& r, const std::vector<Tensor>& v) { r = v; }
  template <class... Ts>
  static void from_list(std::tuple<Ts...>& r, const std::vector<Tensor>& v) {
    size_t i = 0;
    std::apply([&](auto&... x) { ((x = v[i++]), ...); }, r);
  }
};

inline std::vector<Tensor> Context::saved() const {
  std::vector<Tensor> out;
  if (!saved_.empty() || to_save_.empty()) {
    for (const SavedTensor& s : saved_) out.push_back(s.unpack(*node_));
    return out;
  }
  return to_save_;
}

}  // namespace nabla::autograd
