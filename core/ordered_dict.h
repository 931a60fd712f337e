// OrderedDict: a string-keyed map that remembers insertion order (like Python's dict). Modules keep
// their parameters, buffers and children in one, and state_dict() returns one (StateDict).
//
//   nn::StateDict sd = model->state_dict();
//   for (const auto& [name, t] : sd) std::cout << name << " " << t.sizes() << "\n";
//   Tensor w = sd["fc1.weight"];
#pragma once

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "error.h"
#include "tensor.h"

namespace nabla {

// One entry: a (key, value) pair, also readable as item.key() and item.value() (libtorch's
// spelling); structured bindings work too: for (auto& [name, t] : model->named_parameters()).
template <class V>
struct OrderedDictItem : std::pair<std::string, V> {
  using std::pair<std::string, V>::pair;
  const std::string& key() const { return this->first; }
  V& value() { return this->second; }
  const V& value() const { return this->second; }
};

template <class V>
class OrderedDict {
 public:
  using Item = OrderedDictItem<V>;
  using iterator = typename std::vector<Item>::iterator;
  using const_iterator = typename std::vector<Item>::const_iterator;

  OrderedDict() = default;
  OrderedDict(std::initializer_list<Item> items) {
    for (const auto& it : items) insert(it.first, it.second);
  }

  // Adds a new key; throws ValueError if it is already there.
  V& insert(std::string key, V value) {
    NABLA_CHECK(ValueError, !index_.count(key), "OrderedDict: key '", key, "' already exists");
    index_.emplace(key, items_.size());
    items_.emplace_back(std::move(key), std::move(value));
    return items_.back().second;
  }
  // Adds or replaces (keeping the original position when replacing).
  V& insert_or_assign(const std::string& key, V value) {
    if (V* v = find(key)) return *v = std::move(value);
    return insert(key, std::move(value));
  }
  V* find(const std::string& key) {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &items_[it->second].second;
  }
  const V* find(const std::string& key) const {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &items_[it->second].second;
  }
  bool contains(const std::string& key) const { return index_.count(key) != 0; }
  // Throws IndexError naming the key when it is missing.
  V& operator[](const std::string& key) { return *checked(key); }
  const V& operator[](const std::string& key) const { return *const_cast<OrderedDict*>(this)->checked(key); }
  const V& at(const std::string& key) const { return (*this)[key]; }
  // Removes a key (keeping the order of the rest); returns whether it was there.
  bool erase(const std::string& key) {
    auto it = index_.find(key);
    if (it == index_.end()) return false;
    items_.erase(items_.begin() + static_cast<std::ptrdiff_t>(it->second));
    index_.clear();
    for (size_t i = 0; i < items_.size(); ++i) index_.emplace(items_[i].first, i);
    return true;
  }
  void clear() {
    items_.clear();
    index_.clear();
  }

  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  iterator begin() { return items_.begin(); }
  iterator end() { return items_.end(); }
  const_iterator begin() const { return items_.begin(); }
  const_iterator end() const { return items_.end(); }
  const std::vector<Item>& items() const { return items_; }
  std::vector<std::string> keys() const {
    std::vector<std::string> k;
    k.reserve(items_.size());
    for (const auto& it : items_) k.push_back(it.first);
    return k;
  }
  std::vector<V> values() const {
    std::vector<V> v;
    v.reserve(items_.size());
    for (const auto& it : items_) v.push_back(it.second);
    return v;
  }

 private:
  V* checked(const std::string& key) {
    V* v = find(key);
    if (!v) throw IndexError(internal::str("OrderedDict: key '", key, "' not found"));
    return v;
  }
  std::vector<Item> items_;
  std::unordered_map<std::string, size_t> index_;
};

// Named tensors: what Module::state_dict(), Optimizer::state_dict() and
// LRScheduler::state_dict() return, and what safetensors files hold.
using StateDict = OrderedDict<Tensor>;

}  // namespace nabla

// nn:: is where modules use them (nn::StateDict, as libtorch's torch::OrderedDict is used from torch::nn).
namespace nabla::nn {
using ::nabla::OrderedDict;
using ::nabla::OrderedDictItem;
using ::nabla::StateDict;
}  // namespace nabla::nn
