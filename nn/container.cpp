#include "nn/container.h"

namespace nabla::nn {

Sequential::Sequential(const OrderedDict<std::shared_ptr<Module>>& named) {
  for (const auto& [n, m] : named) push_back(n, m);
}

void Sequential::push_back(const std::string& n, std::shared_ptr<Module> m) {
  register_module(n, m);
  modules_.push_back(std::move(m));
}

Tensor Sequential::forward(Tensor x) {
  for (const auto& m : modules_) x = (*m)(std::move(x));
  return x;
}

std::shared_ptr<Module> Sequential::operator[](size_t i) const {
  check<IndexError>(i < modules_.size(), "Sequential: index ", i, " is out of range for ", modules_.size(), " modules");
  return modules_[i];
}

void ModuleList::add(std::shared_ptr<Module> m) {
  register_module(std::to_string(modules_.size()), m);
  modules_.push_back(std::move(m));
}

void ModuleList::extend(const ModuleList& other) {
  for (const auto& m : other.modules_) add(m);
}

std::shared_ptr<Module> ModuleList::operator[](size_t i) const {
  check<IndexError>(i < modules_.size(), "ModuleList: index ", i, " is out of range for ", modules_.size(), " modules");
  return modules_[i];
}

ModuleDict::ModuleDict(const OrderedDict<std::shared_ptr<Module>>& modules) {
  for (const auto& [k, m] : modules) add(k, m);
}

void ModuleDict::add(const std::string& key, std::shared_ptr<Module> m) {
  register_module(key, m);
  modules_.insert(key, std::move(m));
}

std::shared_ptr<Module> ModuleDict::operator[](const std::string& key) const {
  const auto* m = modules_.find(key);
  check<IndexError>(m != nullptr, "ModuleDict: no module named '", key, "'");
  return *m;
}

}  // namespace nabla::nn
