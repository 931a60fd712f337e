// Containers: Sequential (calls its modules in order), ModuleList and ModuleDict (hold modules so
// their parameters are registered; you call them yourself).
//
//   auto net = std::make_shared<nn::Sequential>(nn::Linear(784, 128), nn::ReLU(), nn::Linear(128, 10));
//   auto net2 = nn::Sequential(nn::Conv2d(1, 8, 3), nn::ReLU());   // by value: net2(x), net2->size()
//   net->at<nn::Linear>(2)->out_features;                           // 10
//   (*net)[2] = std::make_shared<nn::Linear>(128, 2);               // a new head: forward uses it
//   (*net)[-1] = nn::Linear(128, 2);                                // the last child, as in Python
//
// A container's children are the module's registered children (Module::named_children()): one
// list, so replacing a child (container[i] = ..., replace_module("1", ...)) changes what forward
// calls, what parameters() and state_dict() return and what prints, all at once. Modules given by
// value must be temporaries (or std::move'd in); a named module by value is a compile-time error
// that shows the handle spelling (see Module::register_module).
//
// A container held by value also takes libtorch's handle spelling, seq->size() and (*seq)(x),
// since `auto seq = nn::Sequential(...)` is how libtorch code makes one.
#pragma once

#include <iterator>
#include <memory>
#include <type_traits>

#include "module.h"

namespace nabla::nn {

namespace internal {
// A module by value, or a shared_ptr (or handle) to one.
template <class M>
concept ModuleLike =
    std::is_base_of_v<Module, std::decay_t<M>> || std::is_convertible_v<std::decay_t<M>, std::shared_ptr<Module>>;

// A module given by shared_ptr or handle is used as is; one given by value (a temporary) is moved
// into a new shared_ptr.
template <class M>
std::shared_ptr<Module> to_module_ptr(M&& m) {
  using D = std::decay_t<M>;
  if constexpr (std::is_convertible_v<D, std::shared_ptr<Module>>) {
    return std::shared_ptr<Module>(std::forward<M>(m));
  } else {
    static_assert(std::is_base_of_v<Module, D>, "expected an nn::Module or a shared_ptr to one");
    require_temporary_module<M>();
    return std::make_shared<D>(std::move(m));
  }
}
template <class T, class Self>
std::shared_ptr<T> cast_module(const std::shared_ptr<Module>& m, const Self& self, const std::string& key) {
  auto p = std::dynamic_pointer_cast<T>(m);
  NABLA_CHECK(ValueError, p != nullptr, self.name(), ": module '", key, "' is a ", m->name(),
              ", not the requested type");
  return p;
}

// Iterates a container's children as std::shared_ptr<Module> (for (auto& m : seq)).
class ChildIterator {
 public:
  using Base = std::vector<OrderedDictItem<std::shared_ptr<Module>>>::const_iterator;
  using value_type = std::shared_ptr<Module>;
  using reference = const std::shared_ptr<Module>&;
  using pointer = const std::shared_ptr<Module>*;
  using difference_type = std::ptrdiff_t;
  using iterator_category = std::random_access_iterator_tag;
  ChildIterator() = default;
  explicit ChildIterator(Base it) : it_(it) {}
  reference operator*() const { return it_->second; }
  pointer operator->() const { return &it_->second; }
  ChildIterator& operator++() { return ++it_, *this; }
  ChildIterator operator++(int) { return ChildIterator(it_++); }
  ChildIterator& operator--() { return --it_, *this; }
  ChildIterator operator+(difference_type n) const { return ChildIterator(it_ + n); }
  difference_type operator-(const ChildIterator& o) const { return it_ - o.it_; }
  bool operator==(const ChildIterator& o) const = default;

 private:
  Base it_{};
};

// The handle spelling for a container held by value: seq->size(), (*seq)(x).
template <class Self>
struct HandleSpelling {
  Self* operator->() { return static_cast<Self*>(this); }
  const Self* operator->() const { return static_cast<const Self*>(this); }
  Self& operator*() { return static_cast<Self&>(*this); }
  const Self& operator*() const { return static_cast<const Self&>(*this); }
};
}  // namespace internal

// What container[i] (and dict[key]) gives on a container you may change: the child in that slot,
// used as the std::shared_ptr<Module> it converts to (seq[0]->name(), *seq[0], seq[0].as<nn::Linear>(),
// std::shared_ptr<nn::Module> m = seq[0]), and assignable, which replaces the child (Python's
// `model.classifier[1] = nn.Linear(1280, 2)`):
//   seq[1] = std::make_shared<nn::Linear>(1280, 2);   // a shared_ptr, a handle or a temporary module
// Only the slot itself can be assigned: `auto m = seq[1]; m = ...;` does not compile (keep a module
// as std::shared_ptr<nn::Module> m = seq[1]).
class ChildSlot {
 public:
  ChildSlot(Module& parent, std::string key, std::shared_ptr<Module> current)
      : parent_(&parent), key_(std::move(key)), module_(std::move(current)) {}
  ChildSlot(const ChildSlot&) = default;
  operator std::shared_ptr<Module>() const { return module_; }  // NOLINT(google-explicit-constructor)
  const std::shared_ptr<Module>& ptr() const { return module_; }
  Module* operator->() const { return &checked(); }
  Module& operator*() const { return checked(); }
  // The child as a T (nullptr when it is not one), as libtorch's module->as<T>().
  template <class T>
  T* as() const {
    return dynamic_cast<T*>(module_.get());
  }
  // Replaces the child (a ModuleDict slot whose key is new inserts it).
  template <class M>
  requires internal::ModuleLike<M> ChildSlot& operator=(M&& m) && {
    assign(internal::to_module_ptr(std::forward<M>(m)));
    return *this;
  }
  ChildSlot& operator=(const ChildSlot& other) && {  // seq[0] = seq[1]: the same module in both
    assign(other.module_);
    return *this;
  }
  friend bool operator==(const ChildSlot& a, const std::shared_ptr<Module>& b) { return a.module_ == b; }
  friend std::ostream& operator<<(std::ostream& os, const ChildSlot& s) { return os << s.module_; }

 private:
  Module& checked() const;
  void assign(std::shared_ptr<Module> m);
  Module* parent_;
  std::string key_;
  std::shared_ptr<Module> module_;  // null for a ModuleDict key that is not there yet
};

class Sequential : public Module, public internal::HandleSpelling<Sequential> {
 public:
  Sequential() = default;
  template <class... M>
  requires(sizeof...(M) > 0 &&
           ((internal::ModuleLike<M> &&
             !std::is_same_v<std::decay_t<M>, Sequential>)&&...)) explicit Sequential(M&&... modules) {
    (push_back(std::forward<M>(modules)), ...);
  }
  // Named children: Sequential({{"conv", conv}, {"relu", relu}}).
  explicit Sequential(const OrderedDict<std::shared_ptr<Module>>& named);

  template <class M>
  void push_back(M&& m) {
    push_back(std::to_string(size()), internal::to_module_ptr(std::forward<M>(m)));
  }
  void push_back(const std::string& name, std::shared_ptr<Module> m);

  // x -> m0(x) -> m1(...) -> ...; each module is called with hooks.
  Tensor forward(Tensor x) override;

  size_t size() const { return child_dict().size(); }
  bool is_empty() const { return child_dict().empty(); }
  // seq[i] (i < 0 counts from the end, as in Python); see ChildSlot for assigning to it.
  ChildSlot operator[](int64_t i);
  std::shared_ptr<Module> operator[](int64_t i) const;
  template <class T>
  std::shared_ptr<T> at(int64_t i) const {
    return internal::cast_module<T>((*this)[i], *this, std::to_string(i));
  }
  // libtorch's spellings: ptr(i) is (*this)[i], ptr<T>(i) is at<T>(i).
  std::shared_ptr<Module> ptr(int64_t i) const { return (*this)[i]; }
  template <class T>
  std::shared_ptr<T> ptr(int64_t i) const {
    return at<T>(i);
  }
  internal::ChildIterator begin() const { return internal::ChildIterator(child_dict().begin()); }
  internal::ChildIterator end() const { return internal::ChildIterator(child_dict().end()); }
};

class ModuleList : public Module, public internal::HandleSpelling<ModuleList> {
 public:
  ModuleList() = default;
  template <class... M>
  requires(sizeof...(M) > 0 &&
           ((internal::ModuleLike<M> &&
             !std::is_same_v<std::decay_t<M>, ModuleList>)&&...)) explicit ModuleList(M&&... modules) {
    (push_back(std::forward<M>(modules)), ...);
  }
  template <class M>
  void push_back(M&& m) {
    add(internal::to_module_ptr(std::forward<M>(m)));
  }
  void extend(const ModuleList& other);

  size_t size() const { return child_dict().size(); }
  bool is_empty() const { return child_dict().empty(); }
  // list[i] (i < 0 counts from the end); see ChildSlot for assigning to it.
  ChildSlot operator[](int64_t i);
  std::shared_ptr<Module> operator[](int64_t i) const;
  template <class T>
  std::shared_ptr<T> at(int64_t i) const {
    return internal::cast_module<T>((*this)[i], *this, std::to_string(i));
  }
  internal::ChildIterator begin() const { return internal::ChildIterator(child_dict().begin()); }
  internal::ChildIterator end() const { return internal::ChildIterator(child_dict().end()); }

 private:
  void add(std::shared_ptr<Module> m);
};

class ModuleDict : public Module, public internal::HandleSpelling<ModuleDict> {
 public:
  ModuleDict() = default;
  explicit ModuleDict(const OrderedDict<std::shared_ptr<Module>>& modules);
  template <class M>
  void insert(const std::string& key, M&& m) {
    add_child(key, internal::to_module_ptr(std::forward<M>(m)));
  }
  bool contains(const std::string& key) const { return child_dict().contains(key); }
  // dict[key]; assigning to it replaces the module there, or adds a new key (Python's dict[key] = m).
  ChildSlot operator[](const std::string& key);
  std::shared_ptr<Module> operator[](const std::string& key) const;
  template <class T>
  std::shared_ptr<T> at(const std::string& key) const {
    return internal::cast_module<T>((*this)[key], *this, key);
  }
  size_t size() const { return child_dict().size(); }
  bool is_empty() const { return child_dict().empty(); }
  std::vector<std::string> keys() const { return child_dict().keys(); }
  // Iterates (key, module) items, in insertion order.
  auto begin() const { return child_dict().begin(); }
  auto end() const { return child_dict().end(); }
};

}  // namespace nabla::nn
