// nn::Module: the base of every layer and model, in the style of PyTorch's C++ frontend.
//
//   struct Net : nn::Module {
//     Net() {
//       fc1 = register_module("fc1", std::make_shared<nn::Linear>(784, 128));
//       fc2 = register_module("fc2", std::make_shared<nn::Linear>(128, 10));
//     }
//     Tensor forward(Tensor x) override { return fc2->forward(relu(fc1->forward(x))); }
//     std::shared_ptr<nn::Linear> fc1, fc2;
//   };
//   auto net = std::make_shared<Net>();
//   Tensor y = (*net)(x);          // runs forward hooks, then forward
//   std::cout << *net;             // Net(\n  (fc1): Linear(in_features=784, ...)\n ...)
//
// A module owns named parameters (tensors that require grad), buffers (state that is saved but not
// trained, e.g. BatchNorm's running_mean) and child modules, all kept in registration order. Names
// of nested tensors are dotted: "features.0.weight".
//
// Calling a module, (*m)(x), runs its forward pre-hooks, forward, then its forward hooks; calling
// m->forward(x) directly skips the hooks (as in PyTorch). Modules taking one tensor override
// `Tensor forward(Tensor x)`; modules taking two (Bilinear, the losses) override
// `Tensor forward(Tensor a, Tensor b)`.
//
// to(device)/to(dtype) and load_state_dict() change tensors in place (their TensorImpl), so handles
// held elsewhere (an optimizer's parameter list, a member `Tensor weight`) stay valid.
#pragma once

#include <concepts>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <vector>

#include "../core/ops.h"
#include "../core/ordered_dict.h"
#include "../core/tensor.h"

namespace nabla::nn {

class Module;
template <class T>
class ModuleHolder;

using ForwardPreHook = std::function<void(Module& module, std::vector<Tensor>& inputs)>;  // may modify inputs
using ForwardHook = std::function<void(Module& module, const std::vector<Tensor>& inputs, Tensor& output)>;

namespace internal {
// The library's private helpers (internal::str, ...) are reachable from here as well.
using namespace ::nabla::internal;
// Where a module is taken by value (register_module, replace_module, the containers), a named
// object is refused at compile time: it would be copied, and the object the caller keeps using
// would miss train()/eval() (a Dropout member would stay on in eval mode).
template <class M>
constexpr void require_temporary_module() {
  static_assert(!std::is_lvalue_reference_v<M>,
                "nabla::nn: this module is a named object held by value, so it would be copied, and "
                "train()/eval()/to() would reach the copy, not the object your forward calls (a Dropout "
                "member would stay on in eval mode). Hold it by handle: `std::shared_ptr<nn::Dropout> drop;` "
                "then `drop = register_module(\"drop\", std::make_shared<nn::Dropout>(0.5));` (or "
                "nn::ModuleHolder<nn::Dropout>), pass a temporary (`nn::Dropout(0.5)`), or std::move it in "
                "and use the handle that is returned");
}

struct HookStore {
  size_t next_id = 0;
  std::vector<std::pair<size_t, ForwardPreHook>> pre;
  std::vector<std::pair<size_t, ForwardHook>> post;
};
}  // namespace internal

// Returned by register_forward_(pre_)hook; remove() unregisters the hook (safe after the module died).
class RemovableHandle {
 public:
  RemovableHandle() = default;
  RemovableHandle(std::weak_ptr<internal::HookStore> store, size_t id) : store_(std::move(store)), id_(id) {}
  void remove();
  size_t id() const { return id_; }

 private:
  std::weak_ptr<internal::HookStore> store_;
  size_t id_ = 0;
};

// What load_state_dict(strict = false) reports.
struct LoadStateDictResult {
  std::vector<std::string> missing_keys, unexpected_keys;
};

class Module : public std::enable_shared_from_this<Module> {
 public:
  Module() = default;
  // A name for printing; by default the C++ class name ("Linear", "Net").
  explicit Module(std::string name) : name_(std::move(name)) {}
  virtual ~Module() = default;
  // A copy shares the original's tensors and children (handles are copied, not data), with its own
  // copy of the hooks; it is how modules given by value enter containers.
  Module(const Module& other);
  Module(Module&&) = default;
  Module& operator=(const Module& other);
  Module& operator=(Module&&) = default;

  // ---- forward ----------------------------------------------------------------------------------
  virtual Tensor forward(Tensor x);
  virtual Tensor forward(Tensor a, Tensor b);
  Tensor operator()(Tensor x);
  Tensor operator()(Tensor a, Tensor b);

  // ---- registration -----------------------------------------------------------------------------
  // Stores `t` (detached if it has history) as a parameter; sets requires_grad. An undefined tensor
  // registers an absent parameter (skipped by parameters() and state_dict(), as PyTorch's None).
  Tensor& register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
  // Buffers are saved in state_dict() unless persistent is false, and follow to(device/dtype).
  Tensor& register_buffer(const std::string& name, Tensor t, bool persistent = true);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    static_assert(std::is_base_of_v<Module, M>, "register_module: M must derive from nn::Module");
    add_child(name, module);
    return module;
  }
  // A module given by value must be a temporary (register_module("fc", nn::Linear(784, 64))): it
  // is moved into a new shared_ptr, which is returned and must be kept, since it is the module that
  // train()/eval()/to()/load_state_dict() reach. A named module held by value is refused at compile
  // time: registering it would register a copy, and the member your forward calls would miss
  // eval() (a Dropout would stay on). Hold such members by handle instead (see the message below).
  template <class M>
  requires std::derived_from<std::remove_cvref_t<M>, Module>
  [[nodiscard]] std::shared_ptr<std::remove_cvref_t<M>> register_module(const std::string& name, M&& module) {
    internal::require_temporary_module<M>();
    return register_module(name, std::make_shared<std::remove_cvref_t<M>>(std::move(module)));
  }
  // A handle (ModuleHolder, NABLA_MODULE) is registered by the module it holds and returned.
  template <class M>
  ModuleHolder<M> register_module(const std::string& name, ModuleHolder<M> module) {
    register_module(name, module.ptr());
    return module;
  }
  // Replaces an already registered child (model surgery, e.g. a new classifier head), keeping its
  // position: forward (of a container), parameters(), state_dict() and printing all see the new one.
  // Accepts what register_module accepts: a shared_ptr, a handle, or a temporary module.
  template <class M>
  std::shared_ptr<M> replace_module(const std::string& name, std::shared_ptr<M> module) {
    static_assert(std::is_base_of_v<Module, M>, "replace_module: M must derive from nn::Module");
    replace_child(name, module);
    return module;
  }
  template <class M>
  requires std::derived_from<std::remove_cvref_t<M>, Module> std::shared_ptr<std::remove_cvref_t<M>> replace_module(
      const std::string& name, M&& module) {
    internal::require_temporary_module<M>();
    return replace_module(name, std::make_shared<std::remove_cvref_t<M>>(std::move(module)));
  }
  template <class M>
  ModuleHolder<M> replace_module(const std::string& name, ModuleHolder<M> module) {
    replace_module(name, module.ptr());
    return module;
  }

  // libtorch's `module->as<nn::Linear>()`: this module as a T, or nullptr when it is not one.
  template <class T>
  T* as() {
    return dynamic_cast<T*>(this);
  }
  template <class T>
  const T* as() const {
    return dynamic_cast<const T*>(this);
  }

  // ---- traversal (registration order, depth first, shared tensors and modules listed once) ------
  std::vector<Tensor> parameters(bool recurse = true) const;
  OrderedDict<Tensor> named_parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  OrderedDict<Tensor> named_buffers(bool recurse = true) const;
  std::vector<std::shared_ptr<Module>> children() const;
  OrderedDict<std::shared_ptr<Module>> named_children() const;
  // This module (first) and all its descendants. `this` is returned as an owning pointer when the
  // module is held by a shared_ptr, else as a non-owning one.
  std::vector<std::shared_ptr<Module>> modules(bool include_self = true);
  OrderedDict<std::shared_ptr<Module>> named_modules(bool include_self = true);
  // Calls fn on every module, children first, then this one (as PyTorch's apply).
  void apply(const std::function<void(Module&)>& fn);

  // ---- modes, devices, gradients ----------------------------------------------------------------
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  // Moves parameters and buffers (and their gradients) in place.
  void to(Device device);
  // Converts floating parameters and buffers (integer buffers such as num_batches_tracked stay).
  void to(DType dtype);
  void to(Device device, DType dtype);
  // PyTorch's module.half() and module.bfloat16(): to(kHalf) / to(kBFloat16), returning the module.
  // (float() and double() are C++ keywords: use to(kFloat32) / to(kFloat64).)
  Module& half() {
    to(DType::f16);
    return *this;
  }
  Module& bfloat16() {
    to(DType::bf16);
    return *this;
  }
  void zero_grad(bool set_to_none = true);
  void requires_grad_(bool requires_grad = true);

  // ---- state ------------------------------------------------------------------------------------
  // Parameters and persistent buffers by dotted name (detached handles sharing their storage).
  StateDict state_dict() const;
  // Copies values in (converting dtype and device). strict: missing and unexpected keys are
  // errors; shape mismatches always are. Throws ValueError listing every problem at once.
  LoadStateDictResult load_state_dict(const StateDict& state, bool strict = true);

  // ---- hooks ------------------------------------------------------------------------------------
  RemovableHandle register_forward_pre_hook(ForwardPreHook hook);
  RemovableHandle register_forward_hook(ForwardHook hook);

  // ---- printing ---------------------------------------------------------------------------------
  std::string name() const;
  // The text inside the parentheses of this module's line, e.g. "in_features=784, out_features=128, bias=True".
  virtual std::string extra_repr() const { return ""; }
  // The whole tree, formatted as PyTorch prints modules.
  std::string repr() const;

  // Re-initializes the parameters as the constructor did (layers override it).
  virtual void reset_parameters() {}

 protected:
  bool training_ = true;
  // The children in registration order: what containers iterate and index (their one list of
  // children, so a replaced child is the one forward calls).
  const OrderedDict<std::shared_ptr<Module>>& child_dict() const { return children_; }
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void replace_child(const std::string& name, std::shared_ptr<Module> module);

 private:
  struct Slot {
    Tensor tensor;
    bool persistent = true;
  };
  void check_new_name(const std::string& name, const char* what) const;
  void convert(const std::function<Tensor(const Tensor&)>& fn);
  void collect_state(const std::string& prefix, StateDict& out) const;
  Tensor run_hooks(std::vector<Tensor>& inputs, const std::function<Tensor(std::vector<Tensor>&)>& fwd);

  std::string name_;
  OrderedDict<Tensor> params_;
  OrderedDict<Slot> buffers_;
  OrderedDict<std::shared_ptr<Module>> children_;
  std::shared_ptr<internal::HookStore> hooks_;
};

std::ostream& operator<<(std::ostream& os, const Module& m);
// `std::cout << model` for a module handle prints the module (its tree, as PyTorch's print(model)),
// not the pointer's address.
template <class M>
requires std::derived_from<M, Module> std::ostream& operator<<(std::ostream& os, const std::shared_ptr<M>& m) {
  return m ? os << *m : os << "(null module)";
}

// A shared handle to a module that can be called like one: libtorch's ModuleHolder.
//
//   nn::ModuleHolder<Net> net(10, 2);     // std::make_shared<Net>(10, 2)
//   Tensor y = net(x);                     // (*net)(x): forward with hooks
//   optim::Adam opt(net->parameters());    // -> and * reach the module
//   std::cout << net;                      // prints the module's tree
//
// Copies share the module, as shared_ptr copies do, and a holder converts to std::shared_ptr<Net>
// (or to a pointer to a base), so it goes wherever a module pointer goes: Sequential,
// register_module, functions taking std::shared_ptr<nn::Module>. ModuleHolder<Net>() makes a Net()
// when Net has a default constructor; ModuleHolder<Net>(nullptr) is empty (a member assigned later,
// as libtorch's `nn::Linear fc{nullptr}`). Calling it with arguments that Net's operator() does not
// take (a forward(Tensor, int64_t) of your own) calls forward directly, without hooks.
//
// NABLA_MODULE(Net) declares `Net` as the holder of your class `NetImpl`, as libtorch's
// TORCH_MODULE does; the module prints as "Net" (a trailing "Impl" is dropped from class names).
template <class T>
class ModuleHolder {
  static_assert(std::is_base_of_v<Module, T>, "nn::ModuleHolder<T>: T must derive from nn::Module");

 public:
  using element_type = T;

  ModuleHolder() requires std::default_initializable<T> : impl_(std::make_shared<T>()) {}
  ModuleHolder(std::nullptr_t) {}  // NOLINT(google-explicit-constructor): `Net net = nullptr;`
  template <class U>
  requires std::convertible_to<U*, T*> ModuleHolder(std::shared_ptr<U> module)
      : impl_(std::move(module)) {}  // NOLINT(google-explicit-constructor)
  template <class U>
  requires(std::convertible_to<U*, T*> && !std::same_as<U, T>) ModuleHolder(const ModuleHolder<U>& other)
      : impl_(other.ptr()) {}  // NOLINT(google-explicit-constructor)
  // Constructs the module from the arguments (not from one holder or pointer, which share it).
  template <class A, class... Args>
  requires(std::constructible_from<T, A, Args...> &&
           !(sizeof...(Args) == 0 &&
             (std::is_same_v<std::remove_cvref_t<A>, ModuleHolder> ||
              std::is_same_v<std::remove_cvref_t<A>, std::nullptr_t> ||
              std::is_convertible_v<std::remove_cvref_t<A>, std::shared_ptr<T>>))) explicit ModuleHolder(A&& a,
                                                                                                         Args&&... args)
      : impl_(std::make_shared<T>(std::forward<A>(a), std::forward<Args>(args)...)) {}

  T* operator->() const { return &checked(); }
  T& operator*() const { return checked(); }
  T* get() const { return impl_.get(); }
  const std::shared_ptr<T>& ptr() const { return impl_; }
  bool is_empty() const { return impl_ == nullptr; }
  explicit operator bool() const { return impl_ != nullptr; }
  template <class U>
  requires std::convertible_to<T*, U*>
  operator std::shared_ptr<U>() const {  // NOLINT(google-explicit-constructor)
    return impl_;
  }

  // net(x): the module's operator() (forward with hooks) when it takes these arguments, else its
  // forward.
  template <class... Args>
  decltype(auto) operator()(Args&&... args) const {
    T& m = checked();
    if constexpr (requires { m(std::forward<Args>(args)...); }) return m(std::forward<Args>(args)...);
    else return m.forward(std::forward<Args>(args)...);
  }
  // net[i] for containers (Sequential, ModuleList, ModuleDict).
  template <class I>
  decltype(auto) operator[](I&& i) const {
    return checked()[std::forward<I>(i)];
  }

 private:
  T& checked() const {
    if (!impl_)
      throw ValueError(internal::str("nn::ModuleHolder<", demangled_holder_name(),
                                     ">: the handle is empty (made from nullptr); ",
                                     "assign a module to it first, e.g. fc = register_module(\"fc\", ...)"));
    return *impl_;
  }
  static std::string demangled_holder_name();
  std::shared_ptr<T> impl_;
};

namespace internal {
std::string module_type_name(const std::type_info& type);  // "Linear", "Net" (without "Impl")
}
template <class T>
std::string ModuleHolder<T>::demangled_holder_name() {
  return internal::module_type_name(typeid(T));
}

template <class T>
std::ostream& operator<<(std::ostream& os, const ModuleHolder<T>& m) {
  return m ? os << *m : os << "(null module)";
}

// Python-style formatting used by extra_repr(): True/False, (3, 3).
std::string repr_bool(bool b);
template <size_t N>
std::string repr_tuple(const std::array<int64_t, N>& v) {
  std::string s = "(";
  for (size_t i = 0; i < N; ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + (N == 1 ? ",)" : ")");
}
std::string repr_double(double v);  // 0.1, 1e-05, 1.0 as Python prints floats

// A list of N integers that also accepts a single value for all: kernel_size = 3 or {3, 5}.
template <size_t N>
struct ExpandingArray {
  ExpandingArray(int64_t v) { values.fill(v); }
  ExpandingArray(std::initializer_list<int64_t> list) {
    NABLA_CHECK(ValueError, list.size() == N || list.size() == 1, "expected ", N, " values or 1, got ", list.size());
    if (list.size() == 1) values.fill(*list.begin());
    else std::copy(list.begin(), list.end(), values.begin());
  }
  ExpandingArray(const std::array<int64_t, N>& v) : values(v) {}
  int64_t operator[](size_t i) const { return values[i]; }
  operator IntArrayRef() const { return IntArrayRef(values.data(), N); }
  // libtorch's builder habit, Conv2dOptions(1, 32, 3).stride(2), stops here with this message.
  template <class... A>
  ExpandingArray& operator()(A&&...) {
    static_assert(sizeof...(A) == static_cast<size_t>(-1),
                  "nabla's options are structs, not builders: instead of Conv2dOptions(1, 32, 3).stride(2) use "
                  "designated initialisers, Conv2dOptions{.in_channels = 1, .out_channels = 32, .kernel_size = 3, "
                  ".stride = 2}, or nn::Conv2d(1, 32, 3, {.stride = 2})");
    return *this;
  }
  std::array<int64_t, N> values{};
};

}  // namespace nabla::nn

// NABLA_MODULE(Net): `Net` is an nn::ModuleHolder of your module class `NetImpl` (libtorch's
// TORCH_MODULE): `Net net(args...)` makes a NetImpl(args...), `net(x)` calls it, `net->` reaches it.
#define NABLA_MODULE(Name)                                            \
  class Name : public ::nabla::nn::ModuleHolder<Name##Impl> {         \
   public:                                                            \
    using ::nabla::nn::ModuleHolder<Name##Impl>::ModuleHolder;        \
    Name() = default;                                                 \
    Name(const ::nabla::nn::ModuleHolder<Name##Impl>& h) /* NOLINT */ \
        : ::nabla::nn::ModuleHolder<Name##Impl>(h) {}                 \
  }
