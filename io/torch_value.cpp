// torch_io::Value: the Python values of a PyTorch file (nn/torch_file.h).
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <unordered_map>

#include "io/torch_pickle.h"

namespace nabla::torch_io {

namespace {

struct StorageInfo {
  const char* name;
  DType dtype;
};
constexpr StorageInfo kStorage[] = {
    {"float32", DType::f32}, {"float64", DType::f64},  {"float16", DType::f16},   {"bfloat16", DType::bf16},
    {"int64", DType::i64},   {"int32", DType::i32},    {"int16", DType::i32},     {"int8", DType::i32},
    {"uint8", DType::u8},    {"bool", DType::boolean}, {"complex64", DType::c64}, {"complex128", DType::c128},
};

std::shared_ptr<Value::Node> new_node(Kind k) { return std::make_shared<Value::Node>(k); }

[[noreturn]] void wrong_kind(Kind have, const char* want) {
  throw ValueError(internal::str("torch_io::Value: expected ", want, ", got ", kind_name(have)));
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

// The name a dict key or list index gives its value in a dotted path.
std::string path_part(const Value& key) {
  switch (key.kind()) {
    case Kind::string: return key.to_string();
    case Kind::integer: return std::to_string(key.to_int());
    default: return key.repr();
  }
}

uint64_t saturating_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }
uint64_t saturating_mul(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

bool is_container(Kind k) { return k == Kind::list || k == Kind::tuple || k == Kind::dict; }

// What flatten() would produce below a value: its leaves (counting shared subtrees each time) and
// the bytes of their names relative to it (each part and its dot) plus the bytes of the strings
// they hold. Computed once per distinct node, bottom up, without recursion.
struct FlatSize {
  uint64_t leaves = 0, bytes = 0;
};

FlatSize flat_size(const Value& root) {
  auto leaf_size = [](const Value& v) -> FlatSize {
    return {1, v.kind() == Kind::string || v.kind() == Kind::bytes ? v.to_string().size() : 0};
  };
  if (!is_container(root.kind()) || root.size() == 0) return leaf_size(root);
  std::unordered_map<const Value::Node*, FlatSize> done;
  std::unordered_map<const Value::Node*, uint64_t> key_bytes;  // parts of keys that are neither str nor int
  auto part_bytes = [&](const Value* key, size_t index) -> uint64_t {
    if (!key) return index < 10 ? 1 : static_cast<uint64_t>(std::to_string(index).size());
    if (key->kind() == Kind::string) return key->to_string().size();
    if (key->kind() == Kind::integer) return std::to_string(key->to_int()).size();
    if (!key->node()) return path_part(*key).size();
    auto [it, fresh] = key_bytes.emplace(key->node().get(), 0);
    if (fresh) it->second = path_part(*key).size();  // tuple keys are bounded (internal::kMaxKeyValues)
    return it->second;
  };
  // Children of a container: (key or nullptr for an index, value).
  auto child = [](const Value& c, size_t i, const Value** key) -> const Value& {
    if (c.kind() == Kind::dict) {
      *key = &c.node()->entries[i].first;
      return c.node()->entries[i].second;
    }
    *key = nullptr;
    return c.node()->items[i];
  };
  struct Frame {
    const Value* v;
    size_t next = 0;
    FlatSize sum{};
  };
  std::vector<Frame> stack{{&root}};
  while (true) {
    Frame& f = stack.back();
    const Value& c = *f.v;
    if (f.next < c.size()) {
      const Value* key = nullptr;
      const size_t i = f.next++;
      const Value& x = child(c, i, &key);
      FlatSize s;
      if (!is_container(x.kind()) || x.size() == 0) {
        s = leaf_size(x);
      } else if (auto it = done.find(x.node().get()); it != done.end()) {
        s = it->second;
      } else {
        --f.next;  // come back to this child once it is summed
        stack.push_back({&x});
        continue;
      }
      f.sum.leaves = saturating_add(f.sum.leaves, s.leaves);
      f.sum.bytes =
          saturating_add(f.sum.bytes, saturating_add(s.bytes, saturating_mul(s.leaves, part_bytes(key, i) + 1)));
      continue;
    }
    FlatSize s = f.sum;
    done.emplace(c.node().get(), s);
    stack.pop_back();
    if (stack.empty()) return s;
  }
}

// Python's repr, appended to `out` until it holds more than `limit` bytes (then "..." ends it).
void repr_into(const Value& v, std::string& out, size_t limit);
std::string scalar_repr(const Value& v);  // of a value that is not a container

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
    case DType::c64: return StorageType::complex64;
    case DType::c128: return StorageType::complex128;
  }
  throw DTypeError(internal::str("torch_io: no storage type for ", d));
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

Value::Value(std::string s) : kind_(Kind::string), node_(new_node(Kind::string)) { node_->str = std::move(s); }

Value::Value(Tensor t) : kind_(Kind::tensor), node_(new_node(Kind::tensor)) {
  NABLA_CHECK(ValueError, t.defined(), "torch_io::Value: undefined tensor");
  node_->storage_type = storage_type_of(t.dtype());
  node_->tensor = std::move(t);
}

Value::Value(const nn::StateDict& state_dict) : kind_(Kind::dict), node_(new_node(Kind::dict)) {
  node_->ordered = true;
  for (const auto& [name, t] : state_dict) set(Value(name), Value(t));
}

Value Value::bytes(std::string b) {
  Value v(Kind::bytes, new_node(Kind::bytes));
  v.node_->str = std::move(b);
  return v;
}

Value Value::list(std::vector<Value> items) {
  Value v(Kind::list, new_node(Kind::list));
  for (auto& x : items) v.append(std::move(x));
  return v;
}

Value Value::tuple(std::vector<Value> items) {
  Value v(Kind::tuple, new_node(Kind::tuple));
  v.node_->items = std::move(items);
  return v;
}

Value Value::dict(std::vector<std::pair<Value, Value>> entries, bool ordered) {
  Value v(Kind::dict, new_node(Kind::dict));
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
  NABLA_CHECK(DTypeError, nabla_dtype(as) == v.node_->tensor.dtype(), "torch_io::Value::tensor: a ",
              v.node_->tensor.dtype(), " tensor cannot be saved as ", storage_type_name(as), " (that needs a ",
              nabla_dtype(as), " tensor)");
  v.node_->storage_type = as;
  return v;
}

Value Value::global(std::string qualified_name) {
  Value v(Kind::global, new_node(Kind::global));
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
  NABLA_CHECK(IndexError, i < it.size(), "torch_io::Value: index ", i, " out of range for a ", kind_name(kind_), " of ",
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
  return node_->attributes();
}

const Value* Value::find(std::string_view key) const {
  if (kind_ != Kind::dict) return nullptr;
  return internal::dict_find(*node_, internal::string_key_hash(Kind::string, key),
                             [&](const Value& k) { return k.kind() == Kind::string && k.node()->str == key; });
}

const Value* Value::find(int64_t key) const {
  if (kind_ != Kind::dict) return nullptr;
  return internal::dict_find(*node_, internal::int_key_hash(key), [&](const Value& k) {
    if (k.kind() == Kind::integer || k.kind() == Kind::boolean) return k.num_ == key;
    return k.kind() == Kind::floating && std::trunc(k.real_) == k.real_ && std::fabs(k.real_) < 9.2e18 &&
           static_cast<int64_t>(k.real_) == key;
  });
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
    keys += (keys.empty() ? "" : ", ") + k.repr(100);
  }
  throw IndexError(internal::str("torch_io::Value: no key '", key.substr(0, 200), key.size() > 200 ? "...'" : "'",
                                 " (the dict has: ", keys.empty() ? "nothing" : keys, ")"));
}

size_t Value::size() const {
  if (kind_ == Kind::dict) return node_->entries.size();
  return items().size();
}

Value& Value::append(Value v) {
  if (kind_ != Kind::list) wrong_kind(kind_, "a list");
  NABLA_CHECK(ValueError, v.node_ != node_, "torch_io::Value: a list cannot contain itself");
  node_->items.push_back(std::move(v));
  return *this;
}

Value& Value::set(Value key, Value v) {
  if (kind_ != Kind::dict) wrong_kind(kind_, "a dict");
  NABLA_CHECK(ValueError, v.node_ != node_ && key.node_ != node_, "torch_io::Value: a dict cannot contain itself");
  internal::dict_set(*node_, std::move(key), std::move(v));
  return *this;
}

std::vector<std::pair<std::string, Value>> Value::flatten(const std::string& prefix, uint64_t max_bytes) const {
  // First what it would produce, from the shared structure (each distinct node once), so that a
  // file of shared subtrees is refused before a single name is built.
  const FlatSize size = flat_size(*this);
  constexpr uint64_t kLeafBytes = sizeof(std::pair<std::string, Value>);
  const uint64_t total = saturating_add(size.bytes, saturating_mul(size.leaves, kLeafBytes + prefix.size() + 1));
  if (total > max_bytes)
    throw ValueError(
        internal::str("torch_io::Value::flatten: the value has ", size.leaves, size.leaves == 1 ? " leaf" : " leaves",
                      " (counting shared subtrees once per path) whose dotted names and strings would take ",
                      total == UINT64_MAX ? std::string("more than 2^64") : std::to_string(total),
                      " bytes, more than the limit of ", max_bytes, " (Value::flatten's max_bytes)"));
  std::vector<std::pair<std::string, Value>> out;
  out.reserve(static_cast<size_t>(size.leaves));
  // Depth first, in order, with one path buffer: each frame remembers where its part ends.
  struct Frame {
    const Value* v;
    size_t next;
    size_t path_len;
  };
  std::string path = prefix;
  auto leaf = [](const Value& v) { return !is_container(v.kind_) || v.size() == 0; };
  if (leaf(*this)) {
    out.emplace_back(path, *this);
    return out;
  }
  std::vector<Frame> stack{{this, 0, path.size()}};
  while (!stack.empty()) {
    Frame& f = stack.back();
    const Value& c = *f.v;
    if (f.next == c.size()) {
      stack.pop_back();
      continue;
    }
    const size_t i = f.next++;
    path.resize(f.path_len);
    if (!path.empty()) path += '.';
    const Value* x;
    if (c.kind_ == Kind::dict) {
      const auto& e = c.node_->entries[i];
      const Kind k = e.first.kind_;
      if (k == Kind::string) path += e.first.node_->str;
      else if (k == Kind::integer) path += std::to_string(e.first.num_);
      else path += path_part(e.first);
      x = &e.second;
    } else {
      path += std::to_string(i);
      x = &c.node_->items[i];
    }
    if (leaf(*x)) out.emplace_back(path, *x);
    else stack.push_back({x, 0, path.size()});
  }
  return out;
}

nn::StateDict Value::flatten_tensors(const std::string& prefix, uint64_t max_bytes) const {
  nn::StateDict sd;
  for (auto& [path, v] : flatten(prefix, max_bytes)) {
    if (!v.is_tensor()) continue;
    NABLA_CHECK(ValueError, !sd.contains(path), "torch_io::Value::flatten_tensors: two tensors are named '",
                path.substr(0, 200), path.size() > 200 ? "...'" : "'");
    sd.insert(path, v.to_tensor());
  }
  return sd;
}

std::string Value::repr() const { return repr(SIZE_MAX); }

std::string Value::repr(size_t max_chars) const {
  std::string out;
  repr_into(*this, out, max_chars);
  if (out.size() > max_chars) {
    out.resize(max_chars);
    out += "...";
  }
  return out;
}

namespace {

void repr_into(const Value& v, std::string& out, size_t limit) {
  if (out.size() > limit) return;
  switch (v.kind()) {
    case Kind::string:
    case Kind::bytes: {
      const std::string& s = v.to_string();
      // At most the part that can still show (each byte is at most 4 characters).
      const size_t room = limit == SIZE_MAX ? s.size() : std::min(s.size(), (limit - out.size()) + 1);
      if (v.kind() == Kind::bytes) out += 'b';
      out += python_repr(room == s.size() ? s : s.substr(0, room), v.kind() == Kind::bytes);
      return;
    }
    case Kind::list:
    case Kind::tuple: {
      const auto& items = v.items();
      out += v.kind() == Kind::list ? "[" : "(";
      for (size_t i = 0; i < items.size() && out.size() <= limit; ++i) {
        if (i) out += ", ";
        repr_into(items[i], out, limit);
      }
      if (v.kind() == Kind::tuple && items.size() == 1) out += ",";
      out += v.kind() == Kind::list ? "]" : ")";
      return;
    }
    case Kind::dict: {
      const bool ordered = v.is_ordered_dict();
      out += ordered ? "OrderedDict({" : "{";
      bool first = true;
      for (const auto& [k, x] : v.entries()) {
        if (out.size() > limit) break;
        if (!first) out += ", ";
        first = false;
        repr_into(k, out, limit);
        out += ": ";
        repr_into(x, out, limit);
      }
      out += ordered ? "})" : "}";
      return;
    }
    default: out += scalar_repr(v);
  }
}

std::string scalar_repr(const Value& v) {
  switch (v.kind()) {
    case Kind::none: return "None";
    case Kind::boolean: return v.to_bool() ? "True" : "False";
    case Kind::integer: return std::to_string(v.to_int());
    case Kind::floating: {
      const double real = v.to_double();
      if (std::isnan(real)) return "nan";
      if (std::isinf(real)) return real > 0 ? "inf" : "-inf";
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%.17g", real);
      // The shortest that reads back, as Python prints floats.
      for (int p = 1; p <= 17; ++p) {
        char t[32];
        std::snprintf(t, sizeof(t), "%.*g", p, real);
        if (std::strtod(t, nullptr) == real) {
          std::snprintf(buf, sizeof(buf), "%s", t);
          break;
        }
      }
      std::string s = buf;
      if (s.find_first_of(".en") == std::string::npos) s += ".0";
      return s;
    }
    case Kind::global: return v.global_name();
    case Kind::tensor:
      return internal::str(v.is_parameter() ? "Parameter(" : "tensor(", storage_type_name(v.storage_type()), ", ",
                           v.to_tensor().sizes(), ")");
    default: return "?";
  }
}

// ---- dict keys ------------------------------------------------------------------------------------

}  // namespace

namespace internal {

namespace {

// SipHash-1-3 (as CPython hashes str and bytes) under a key drawn once per process, so that a file
// cannot choose keys that collide in the tables of dicts and make loading it quadratic.
struct SipKey {
  uint64_t k0, k1;
};

const SipKey& sip_key() {
  static const SipKey key = [] {
    uint64_t a = 0, b = 0;
    try {
      std::random_device rd;
      a = (uint64_t(rd()) << 32) ^ rd();
      b = (uint64_t(rd()) << 32) ^ rd();
    } catch (...) {}
    const uint64_t t = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    return SipKey{a ^ t ^ reinterpret_cast<uintptr_t>(&a), b ^ (t * 0x9e3779b97f4a7c15ull)};
  }();
  return key;
}

uint64_t siphash13(const void* data, size_t n, uint64_t tweak) {
  const SipKey& key = sip_key();
  uint64_t v0 = key.k0 ^ 0x736f6d6570736575ull, v1 = (key.k1 ^ tweak) ^ 0x646f72616e646f6dull;
  uint64_t v2 = key.k0 ^ 0x6c7967656e657261ull, v3 = (key.k1 ^ tweak) ^ 0x7465646279746573ull;
  auto round = [&] {
    v0 += v1, v1 = std::rotl(v1, 13), v1 ^= v0, v0 = std::rotl(v0, 32);
    v2 += v3, v3 = std::rotl(v3, 16), v3 ^= v2;
    v0 += v3, v3 = std::rotl(v3, 21), v3 ^= v0;
    v2 += v1, v1 = std::rotl(v1, 17), v1 ^= v2, v2 = std::rotl(v2, 32);
  };
  const auto* p = static_cast<const unsigned char*>(data);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t m;
    std::memcpy(&m, p + i, 8);
    if constexpr (std::endian::native == std::endian::big) m = __builtin_bswap64(m);
    v3 ^= m, round(), v0 ^= m;
  }
  uint64_t b = static_cast<uint64_t>(n) << 56;
  for (size_t k = 0; i + k < n; ++k) b |= static_cast<uint64_t>(p[i + k]) << (8 * k);
  v3 ^= b, round(), v0 ^= b;
  v2 ^= 0xff, round(), round(), round();
  const uint64_t h = v0 ^ v1 ^ v2 ^ v3;
  return h ? h : 1;  // 0 marks a hash not computed yet
}

// A key's number, canonical as Python compares numbers: integral floats are the int they equal.
bool integral(const Value& k, int64_t* out) {
  if (k.kind() == Kind::integer || k.kind() == Kind::boolean) {
    *out = k.to_int();
    return true;
  }
  const double d = k.to_double();
  if (std::isfinite(d) && d == std::trunc(d) && std::fabs(d) < 9.2e18) {
    *out = static_cast<int64_t>(d);
    return true;
  }
  return false;
}

// Checks a tuple key's size (values and string bytes, shared ones counted each time) before it is
// hashed or compared: both walk all of it.
void check_tuple_key(const Value& t, uint64_t* values, uint64_t* bytes, int depth) {
  if (depth > static_cast<int>(kMaxKeyValues) || ++*values > kMaxKeyValues)
    throw ValueError(internal::str("a tuple of more than ", kMaxKeyValues,
                                   " values (counting nested and shared ones each time) cannot be a dict key"));
  for (const Value& x : t.items()) {
    if (x.kind() == Kind::tuple) {
      check_tuple_key(x, values, bytes, depth + 1);
    } else {
      ++*values;
      if (x.kind() == Kind::string || x.kind() == Kind::bytes) *bytes += x.to_string().size();
    }
  }
  if (*values > kMaxKeyValues || *bytes > kMaxKeyBytes)
    throw ValueError(internal::str("a tuple of more than ", *values > kMaxKeyValues ? kMaxKeyValues : kMaxKeyBytes,
                                   *values > kMaxKeyValues ? " values" : " bytes of strings",
                                   " (counting nested and shared ones each time) cannot be a dict key"));
}

uint64_t tuple_hash(const Value& t) {
  std::vector<uint64_t> parts;
  parts.reserve(t.items().size());
  for (const Value& x : t.items()) parts.push_back(key_hash(x));
  return siphash13(parts.data(), parts.size() * sizeof(uint64_t), 't');
}

}  // namespace

uint64_t string_key_hash(Kind kind, std::string_view s) {
  return siphash13(s.data(), s.size(), kind == Kind::string ? 's' : kind == Kind::bytes ? 'b' : 'g');
}

uint64_t int_key_hash(int64_t v) { return siphash13(&v, sizeof(v), 'i'); }

uint64_t key_hash(const Value& key) {
  switch (key.kind()) {
    case Kind::none: return siphash13(nullptr, 0, 'N');
    case Kind::boolean:
    case Kind::integer:
    case Kind::floating: {
      int64_t i;
      if (integral(key, &i)) return int_key_hash(i);
      const uint64_t bits = std::bit_cast<uint64_t>(key.to_double());
      return siphash13(&bits, sizeof(bits), 'f');
    }
    case Kind::string:
    case Kind::bytes:
    case Kind::global: {
      Value::Node& n = *key.node();
      if (!n.hash) n.hash = string_key_hash(key.kind(), n.str);
      return n.hash;
    }
    case Kind::tuple: {
      Value::Node& n = *key.node();
      if (!n.hash) {
        uint64_t values = 0, bytes = 0;
        check_tuple_key(key, &values, &bytes, 0);
        n.hash = tuple_hash(key);
      }
      return n.hash;
    }
    default: throw ValueError(internal::str("a ", kind_name(key.kind()), " cannot be a dict key"));
  }
}

bool key_equal(const Value& a, const Value& b) {
  if (a.node() && a.node() == b.node()) return true;
  const bool na = a.is_number(), nb = b.is_number();
  if (na || nb) {
    if (!na || !nb) return false;
    int64_t x, y;
    const bool ia = integral(a, &x), ib = integral(b, &y);
    if (ia || ib) return ia && ib && x == y;
    return std::bit_cast<uint64_t>(a.to_double()) == std::bit_cast<uint64_t>(b.to_double());
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::none: return true;
    case Kind::string:
    case Kind::bytes:
    case Kind::global: return a.node()->str == b.node()->str;
    case Kind::tuple: {
      const auto &x = a.items(), &y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!key_equal(x[i], y[i])) return false;
      return true;
    }
    default: return false;
  }
}

namespace {

void index_insert(DictExtra& ix, uint64_t h, uint32_t position) {
  const size_t mask = ix.slots.size() - 1;
  for (size_t s = h & mask;; s = (s + 1) & mask)
    if (ix.slots[s] == 0) {
      ix.slots[s] = position + 1;
      return;
    }
}

void rebuild_index(DictExtra& ix, size_t slots) {
  ix.slots.assign(slots, 0);
  for (size_t i = 0; i < ix.hashes.size(); ++i) index_insert(ix, ix.hashes[i], static_cast<uint32_t>(i));
}

}  // namespace

bool dict_set(Value::Node& d, Value key, Value value) {
  const uint64_t h = key_hash(key);  // refuses keys that cannot be keys
  auto& e = d.entries;
  NABLA_CHECK(ValueError, e.size() < UINT32_MAX, "torch_io::Value: a dict of more than 2^32 entries");
  if (!d.extra || d.extra->slots.empty()) {
    for (auto& [k, x] : e)
      if (key_hash(k) == h && key_equal(k, key)) {
        x = std::move(value);
        return false;
      }
    e.emplace_back(std::move(key), std::move(value));
    if (e.size() > kLinearKeys) {
      if (!d.extra) d.extra = std::make_unique<DictExtra>();
      for (const auto& kv : e) d.extra->hashes.push_back(key_hash(kv.first));
      rebuild_index(*d.extra, 4 * std::bit_ceil(e.size()));
    }
    return true;
  }
  DictExtra& ix = *d.extra;
  const size_t mask = ix.slots.size() - 1;
  for (size_t s = h & mask; ix.slots[s] != 0; s = (s + 1) & mask) {
    const uint32_t pos = ix.slots[s] - 1;
    if (ix.hashes[pos] == h && key_equal(e[pos].first, key)) {
      e[pos].second = std::move(value);
      return false;
    }
  }
  e.emplace_back(std::move(key), std::move(value));
  ix.hashes.push_back(h);
  if (2 * e.size() > ix.slots.size()) rebuild_index(ix, 2 * ix.slots.size());
  else index_insert(ix, h, static_cast<uint32_t>(e.size() - 1));
  return true;
}

}  // namespace internal

}  // namespace nabla::torch_io
