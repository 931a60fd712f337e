// Containers: Sequential (calls its modules in order), ModuleList and ModuleDict (hold modules so
// their parameters are registered; you call them yourself).
//
//   auto net = std::make_shared<nn::Sequential>(nn::Linear(784, 128), nn::ReLU(), nn::Linear(128, 10));
//   auto net2 = std::make_shared<nn::Sequential>(std::make_shared<nn::Conv2d>(1, 8, 3), std::make_shared<nn::ReLU>());
#pragma once

#include <memory>
#include <type_traits>

#include "module.h"

namespace nabla::nn {

namespace internal {
// A module by value, or a shared_ptr to one.
template <class M>
concept ModuleLike = std::is_base_of_v<Module, std::decay_t<M>> ||
                     std::is_convertible_v<std::decay_t<M>, std::shared_ptr<Module>>;

// A module given by shared_ptr is used as is; one given by value is moved into a new shared_ptr.
template <class M>
std::shared_ptr<Module> to_module_ptr(M&& m) {
  using D = std::decay_t<M>;
  if constexpr (std::is_convertible_v<D, std::shared_ptr<Module>>) {
    return std::shared_ptr<Module>(std::forward<M>(m));
  } else {
    static_assert(std::is_base_of_v<Module, D>, "expected an nn::Module or a shared_ptr to one");
    return std::make_shared<D>(std::forward<M>(m));
  }
}
template <class T, class Self>
std::shared_ptr<T> cast_module(const std::shared_ptr<Module>& m, const Self& self, const std::string& key) {
  auto p = std::dynamic_pointer_cast<T>(m);
  check<ValueError>(p != nullptr, self.name(), ": module '", key, "' is a ", m->name(), ", not the requested type");
  return p;
}
}  // namespace internal

class Sequential : public Module {
 public:
  Sequential() = default;
  template <class... M>
    requires(sizeof...(M) > 0 && ((internal::ModuleLike<M> && !std::is_same_v<std::decay_t<M>, Sequential>) && ...))
  explicit Sequential(M&&... modules) {
    (push_back(std::forward<M>(modules)), ...);
  }
  // Named children: Sequential({{"conv", conv}, {"relu", relu}}).
  explicit Sequential(const OrderedDict<std::shared_ptr<Module>>& named);

  template <class M>
  void push_back(M&& m) {
    push_back(std::to_string(modules_.size()), internal::to_module_ptr(std::forward<M>(m)));
  }
  void push_back(const std::string& name, std::shared_ptr<Module> m);

  // x -> m0(x) -> m1(...) -> ...; each module is called with hooks.
  Tensor forward(Tensor x) override;

  size_t size() const { return modules_.size(); }
  bool is_empty() const { return modules_.empty(); }
  std::shared_ptr<Module> operator[](size_t i) const;
  template <class T>
  std::shared_ptr<T> at(size_t i) const {
    return internal::cast_module<T>((*this)[i], *this, std::to_string(i));
  }
  // libtorch's spellings: ptr(i) is (*this)[i], ptr<T>(i) is at<T>(i).
  std::shared_ptr<Module> ptr(size_t i) const { return (*this)[i]; }
  template <class T>
  std::shared_ptr<T> ptr(size_t i) const {
    return at<T>(i);
  }
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

class ModuleList : public Module {
 public:
  ModuleList() = default;
  template <class... M>
    requires(sizeof...(M) > 0 && ((internal::ModuleLike<M> && !std::is_same_v<std::decay_t<M>, ModuleList>) && ...))
  explicit ModuleList(M&&... modules) {
    (push_back(std::forward<M>(modules)), ...);
  }
  template <class M>
  void push_back(M&& m) {
    add(internal::to_module_ptr(std::forward<M>(m)));
  }
  void extend(const ModuleList& other);

  size_t size() const { return modules_.size(); }
  bool is_empty() const { return modules_.empty(); }
  std::shared_ptr<Module> operator[](size_t i) const;
  template <class T>
  std::shared_ptr<T> at(size_t i) const {
    return internal::cast_module<T>((*this)[i], *this, std::to_string(i));
  }
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 private:
  void add(std::shared_ptr<Module> m);
  std::vector<std::shared_ptr<Module>> modules_;
};

class ModuleDict : public Module {
 public:
  ModuleDict() = default;
  explicit ModuleDict(const OrderedDict<std::shared_ptr<Module>>& modules);
  template <class M>
  void insert(const std::string& key, M&& m) {
    add(key, internal::to_module_ptr(std::forward<M>(m)));
  }
  bool contains(const std::string& key) const { return modules_.contains(key); }
  std::shared_ptr<Module> operator[](const std::string& key) const;
  template <class T>
  std::shared_ptr<T> at(const std::string& key) const {
    return internal::cast_module<T>((*this)[key], *this, key);
  }
  size_t size() const { return modules_.size(); }
  bool is_empty() const { return modules_.empty(); }
  std::vector<std::string> keys() const { return modules_.keys(); }
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 private:
  void add(const std::string& key, std::shared_ptr<Module> m);
  OrderedDict<std::shared_ptr<Module>> modules_;
};

}  // namespace nabla::nn
