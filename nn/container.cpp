#include "nn/container.h"

namespace nabla::nn {

namespace {
// Index i of n children, i < 0 counting from the end (Python's seq[-1]).
size_t child_index(const Module& self, int64_t i, size_t n) {
  const auto count = static_cast<int64_t>(n);
  NABLA_CHECK(IndexError, i >= -count && i < count, self.name(), ": index ", i, " is out of range for ", n, " modules");
  return static_cast<size_t>(i < 0 ? i + count : i);
}
}  // namespace

Module& ChildSlot::checked() const {
  NABLA_CHECK(IndexError, module_ != nullptr, parent_->name(), ": no module named '", key_, "'");
  return *module_;
}

void ChildSlot::assign(std::shared_ptr<Module> m) {
  if (module_) parent_->replace_module(key_, m);
  else parent_->register_module(key_, m);
  module_ = std::move(m);
}

Sequential::Sequential(const OrderedDict<std::shared_ptr<Module>>& named) {
  for (const auto& [n, m] : named) push_back(n, m);
}

void Sequential::push_back(const std::string& n, std::shared_ptr<Module> m) { add_child(n, std::move(m)); }

Tensor Sequential::forward(Tensor x) {
  for (const auto& [n, m] : child_dict()) x = (*m)(std::move(x));
  return x;
}

ChildSlot Sequential::operator[](int64_t i) {
  const auto& item = child_dict().items()[child_index(*this, i, size())];
  return ChildSlot(*this, item.first, item.second);
}

std::shared_ptr<Module> Sequential::operator[](int64_t i) const {
  return child_dict().items()[child_index(*this, i, size())].second;
}

void ModuleList::add(std::shared_ptr<Module> m) { add_child(std::to_string(size()), std::move(m)); }

void ModuleList::extend(const ModuleList& other) {
  // A copy first: list.extend(list) appends each child once.
  std::vector<std::shared_ptr<Module>> more(other.begin(), other.end());
  for (auto& m : more) add(std::move(m));
}

ChildSlot ModuleList::operator[](int64_t i) {
  const auto& item = child_dict().items()[child_index(*this, i, size())];
  return ChildSlot(*this, item.first, item.second);
}

std::shared_ptr<Module> ModuleList::operator[](int64_t i) const {
  return child_dict().items()[child_index(*this, i, size())].second;
}

ModuleDict::ModuleDict(const OrderedDict<std::shared_ptr<Module>>& modules) {
  for (const auto& [k, m] : modules) add_child(k, m);
}

ChildSlot ModuleDict::operator[](const std::string& key) {
  const auto* m = child_dict().find(key);
  return ChildSlot(*this, key, m ? *m : nullptr);
}

std::shared_ptr<Module> ModuleDict::operator[](const std::string& key) const {
  const auto* m = child_dict().find(key);
  NABLA_CHECK(IndexError, m != nullptr, "ModuleDict: no module named '", key, "'");
  return *m;
}

}  // namespace nabla::nn
