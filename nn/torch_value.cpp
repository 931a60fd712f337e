// torch_io::Value: the Python values of a PyTorch file (nn/torch_file.h).
#include <cmath>
#include <cstdio>
#include <unordered_set>

#include "nn/torch_pickle.h"

namespace nabla::torch_io {

namespace {

struct StorageInfo {
  const char* name;
  DType dtype;
};
constexpr StorageInfo kStorage[] = {
    {"float32", DType::f32}, {"float64", DType::f64}, {"float16", DType::f16}, {"bfloat16", DType::bf16},
    {"int64", DType::i64},   {"int32", DType::i32},   {"int16", DType::i32},   {"int8", DType::i32},
    {"uint8", DType::u8},    {"bool", DType::boolean},
};

std::shared_ptr<Value::Node> new_node() { return std::make_shared<Value::Node>(); }

[[noreturn]] void wrong_kind(Kind have, const char* want) {
  throw ValueError(detail::str("torch_io::Value: expected ", want, ", got ", kind_name(have)));
}

// Python's repr of a str (UTF-8 passed through) or of bytes (bytes >= 0x80 escaped too).
std::string python_repr(const std::string& s, bool bytes = false) {
  std::string out = "'";
  for (unsigned char c : s) {
    if (c == '\'' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f || (bytes && c >= 0x80)) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "'";
}

std::string path_part(const Value& key) {
  switch (key.kind()) {
    case Kind::string: return key.to_string();
    case Kind::integer: return std::to_string(key.to_int());
    default: return key.repr();
  }
}

std::string join(const std::string& prefix, const std::string& part) {
  return prefix.empty() ? part : prefix + "." + part;
}

}  // namespace

const char* storage_type_name(StorageType t) { return kStorage[static_cast<int>(t)].name; }
DType nabla_dtype(StorageType t) { return kStorage[static_cast<int>(t)].dtype; }

StorageType storage_type_of(DType d) {
  switch (d) {
    case DType::f32: return StorageType::float32;
    case DType::f64: return StorageType::float64;
    case DType::f16: return StorageType::float16;
    case DType::bf16: return StorageType::bfloat16;
    case DType::i64: return StorageType::int64;
    case DType::i32: return StorageType::int32;
    case DType::u8: return StorageType::uint8;
    case DType::boolean: return StorageType::boolean;
  }
  throw DTypeError(detail::str("torch_io: no storage type for ", d));
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::none: return "None";
    case Kind::boolean: return "bool";
    case Kind::integer: return "int";
    case Kind::floating: return "float";
    case Kind::string: return "str";
    case Kind::bytes: return "bytes";
    case Kind::tensor: return "tensor";
    case Kind::list: return "list";
    case Kind::tuple: return "tuple";
    case Kind::dict: return "dict";
    case Kind::global: return "global";
  }
  return "?";
}

Value::Value(std::string s) : kind_(Kind::string), node_(new_node()) { node_->str = std::move(s); }

Value::Value(Tensor t) : kind_(Kind::tensor), node_(new_node()) {
  check<ValueError>(t.defined(), "torch_io::Value: undefined tensor");
  node_->storage_type = storage_type_of(t.dtype());
  node_->tensor = std::move(t);
}

Value::Value(const nn::StateDict& state_dict) : kind_(Kind::dict), node_(new_node()) {
  node_->ordered = true;
  for (const auto& [name, t] : state_dict) set(Value(name), Value(t));
}

Value Value::bytes(std::string b) {
  Value v(Kind::bytes, new_node());
  v.node_->str = std::move(b);
  return v;
}

Value Value::list(std::vector<Value> items) {
  Value v(Kind::list, new_node());
  for (auto& x : items) v.append(std::move(x));
  return v;
}

Value Value::tuple(std::vector<Value> items) {
  Value v(Kind::tuple, new_node());
  v.node_->items = std::move(items);
  return v;
}

Value Value::dict(std::vector<std::pair<Value, Value>> entries, bool ordered) {
  Value v(Kind::dict, new_node());
  v.node_->ordered = ordered;
  for (auto& [k, x] : entries) v.set(std::move(k), std::move(x));
  return v;
}

Value Value::parameter(Tensor t, bool requires_grad) {
  Value v(std::move(t));
  v.node_->parameter = true;
  v.node_->tensor.requires_grad_(requires_grad);
  return v;
}

Value Value::tensor(Tensor t, StorageType as) {
  Value v(std::move(t));
  check<DTypeError>(nabla_dtype(as) == v.node_->tensor.dtype(), "torch_io::Value::tensor: a ", v.node_->tensor.dtype(),
                    " tensor cannot be saved as ", storage_type_name(as), " (that needs a ", nabla_dtype(as),
                    " tensor)");
  v.node_->storage_type = as;
  return v;
}

Value Value::global(std::string qualified_name) {
  Value v(Kind::global, new_node());
  v.node_->str = std::move(qualified_name);
  return v;
}

bool Value::to_bool() const {
  if (kind_ != Kind::boolean) wrong_kind(kind_, "a bool");
  return num_ != 0;
}

int64_t Value::to_int() const {
  if (kind_ != Kind::integer && kind_ != Kind::boolean) wrong_kind(kind_, "an int");
  return num_;
}

double Value::to_double() const {
  if (kind_ == Kind::floating) return real_;
  if (kind_ == Kind::integer || kind_ == Kind::boolean) return static_cast<double>(num_);
  wrong_kind(kind_, "a number");
}

const std::string& Value::to_string() const {
  if (kind_ != Kind::string && kind_ != Kind::bytes) wrong_kind(kind_, "a str");
  return node_->str;
}

const Tensor& Value::to_tensor() const {
  if (kind_ != Kind::tensor) wrong_kind(kind_, "a tensor");
  return node_->tensor;
}

StorageType Value::storage_type() const {
  if (kind_ != Kind::tensor) wrong_kind(kind_, "a tensor");
  return node_->storage_type;
}

bool Value::is_parameter() const { return kind_ == Kind::tensor && node_->parameter; }

const std::string& Value::global_name() const {
  if (kind_ != Kind::global) wrong_kind(kind_, "a global");
  return node_->str;
}

const std::vector<Value>& Value::items() const {
  if (kind_ != Kind::list && kind_ != Kind::tuple) wrong_kind(kind_, "a list or tuple");
  return node_->items;
}

const Value& Value::operator[](size_t i) const {
  const auto& it = items();
  check<IndexError>(i < it.size(), "torch_io::Value: index ", i, " out of range for a ", kind_name(kind_), " of ",
                    it.size());
  return it[i];
}

const std::vector<std::pair<Value, Value>>& Value::entries() const {
  if (kind_ != Kind::dict) wrong_kind(kind_, "a dict");
  return node_->entries;
}

bool Value::is_ordered_dict() const { return kind_ == Kind::dict && node_->ordered; }

Value Value::attributes() const {
  if (kind_ != Kind::dict) return Value();
  return node_->attributes;
}

const Value* Value::find(std::string_view key) const {
  if (kind_ != Kind::dict) return nullptr;
  auto it = node_->index.find(internal::tagged('s', std::string(key)));
  return it == node_->index.end() ? nullptr : &node_->entries[it->second].second;
}

const Value* Value::find(int64_t key) const {
  if (kind_ != Kind::dict) return nullptr;
  auto it = node_->index.find(internal::tagged('i', std::to_string(key)));
  return it == node_->index.end() ? nullptr : &node_->entries[it->second].second;
}

const Value& Value::operator[](std::string_view key) const {
  if (kind_ != Kind::dict) wrong_kind(kind_, "a dict");
  if (const Value* v = find(key)) return *v;
  std::string keys;
  size_t n = 0;
  for (const auto& [k, x] : node_->entries) {
    if (n++ == 20) {
      keys += ", ...";
      break;
    }
    keys += (keys.empty() ? "" : ", ") + k.repr();
  }
  throw IndexError(detail::str("torch_io::Value: no key '", key, "' (the dict has: ", keys.empty() ? "nothing" : keys, ")"));
}

size_t Value::size() const {
  if (kind_ == Kind::dict) return node_->entries.size();
  return items().size();
}

Value& Value::append(Value v) {
  if (kind_ != Kind::list) wrong_kind(kind_, "a list");
  check<ValueError>(v.node_ != node_, "torch_io::Value: a list cannot contain itself");
  node_->items.push_back(std::move(v));
  return *this;
}

Value& Value::set(Value key, Value v) {
  if (kind_ != Kind::dict) wrong_kind(kind_, "a dict");
  check<ValueError>(v.node_ != node_ && key.node_ != node_, "torch_io::Value: a dict cannot contain itself");
  std::string id = internal::key_id(key);
  auto [it, fresh] = node_->index.emplace(std::move(id), node_->entries.size());
  if (fresh) node_->entries.emplace_back(std::move(key), std::move(v));
  else node_->entries[it->second].second = std::move(v);
  return *this;
}

std::vector<std::pair<std::string, Value>> Value::flatten(const std::string& prefix) const {
  std::vector<std::pair<std::string, Value>> out;
  // Iterative, depth first, in order (values from load are depth-limited; built ones may not be).
  struct Item {
    const Value* v;
    std::string path;
  };
  std::vector<Item> todo{{this, prefix}};
  uint64_t visited = 0;
  while (!todo.empty()) {
    Item it = std::move(todo.back());
    todo.pop_back();
    const Value& v = *it.v;
    bool container = v.kind_ == Kind::list || v.kind_ == Kind::tuple || v.kind_ == Kind::dict;
    if (!container || v.size() == 0) {
      out.emplace_back(std::move(it.path), v);
      continue;
    }
    check<ValueError>(++visited < 100'000'000, "torch_io::Value::flatten: too many values (does it contain itself?)");
    if (v.kind_ == Kind::dict) {
      const auto& e = v.node_->entries;
      for (size_t i = e.size(); i-- > 0;) todo.push_back({&e[i].second, join(it.path, path_part(e[i].first))});
    } else {
      const auto& items = v.node_->items;
      for (size_t i = items.size(); i-- > 0;) todo.push_back({&items[i], join(it.path, std::to_string(i))});
    }
  }
  return out;
}

nn::StateDict Value::flatten_tensors(const std::string& prefix) const {
  nn::StateDict sd;
  for (auto& [path, v] : flatten(prefix)) {
    if (!v.is_tensor()) continue;
    check<ValueError>(!sd.contains(path), "torch_io::Value::flatten_tensors: two tensors are named '", path, "'");
    sd.insert(path, v.to_tensor());
  }
  return sd;
}

std::string Value::repr() const {
  switch (kind_) {
    case Kind::none: return "None";
    case Kind::boolean: return num_ ? "True" : "False";
    case Kind::integer: return std::to_string(num_);
    case Kind::floating: {
      if (std::isnan(real_)) return "nan";
      if (std::isinf(real_)) return real_ > 0 ? "inf" : "-inf";
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%.17g", real_);
      // The shortest that reads back, as Python prints floats.
      for (int p = 1; p <= 17; ++p) {
        char t[32];
        std::snprintf(t, sizeof(t), "%.*g", p, real_);
        if (std::strtod(t, nullptr) == real_) {
          std::snprintf(buf, sizeof(buf), "%s", t);
          break;
        }
      }
      std::string s = buf;
      if (s.find_first_of(".en") == std::string::npos) s += ".0";
      return s;
    }
    case Kind::string: return python_repr(node_->str);
    case Kind::bytes: return internal::tagged('b', python_repr(node_->str, true));
    case Kind::global: return node_->str;
    case Kind::tensor: {
      const Tensor& t = node_->tensor;
      return detail::str(node_->parameter ? "Parameter(" : "tensor(", storage_type_name(node_->storage_type), ", ",
                         t.sizes(), ")");
    }
    case Kind::list:
    case Kind::tuple: {
      std::string s = kind_ == Kind::list ? "[" : "(";
      for (size_t i = 0; i < node_->items.size(); ++i) s += (i ? ", " : "") + node_->items[i].repr();
      if (kind_ == Kind::tuple && node_->items.size() == 1) s += ",";
      return s + (kind_ == Kind::list ? "]" : ")");
    }
    case Kind::dict: {
      std::string s = node_->ordered ? "OrderedDict({" : "{";
      bool first = true;
      for (const auto& [k, v] : node_->entries) {
        s += (first ? "" : ", ") + k.repr() + ": " + v.repr();
        first = false;
      }
      return s + (node_->ordered ? "})" : "}");
    }
  }
  return "?";
}

}  // namespace nabla::torch_io
