// Internal to nn/torch_*.cpp: Python's pickle format as torch.save uses it, read by a restricted
// stack machine and written at protocol 2. Not installed as API (see nn/torch_file.h).
//
// The unpickler executes nothing. Globals, calls (REDUCE, NEWOBJ), persistent ids and BUILD are
// handed to UnpickleHooks, which decide what a global means and refuse what they do not know.
// It runs as an explicit stack machine (no recursion), and checks every length against the bytes
// left before reading or allocating, every memo index, every stack access, and LoadOptions' limits:
// values pushed (max_objects), memo entries (max_memo) and container nesting (max_depth, which also
// bounds MARK nesting). A list or dict may not change after it was placed inside another value,
// so the result has no cycles and its depth and expanded size are known as it grows (a pickle that
// shares one list a million times in a tree cannot make flatten() produce 2^1000 names).
#pragma once

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>

#include "torch_file.h"

namespace nabla::torch_io {

namespace internal {
// The library's private helpers (internal::str, ...) are reachable from here as well.
using namespace ::nabla::internal;
// What only some dicts need: open addressing over the entries of one with more than kLinearKeys of
// them (slots hold entry position + 1, 0: empty; hashes the hash of each entry's key), and the
// attributes of an OrderedDict.
struct DictExtra {
  std::vector<uint64_t> hashes;
  std::vector<uint32_t> slots;  // empty, or a power of two at most half full
  Value attributes;             // BUILD state of an OrderedDict (a state dict's _metadata)
};
}  // namespace internal

// One Python object: what a Value of the same kind points to. Its payload depends on the kind (a
// union, so that the ten million containers a pickle may hold take 96 bytes each, not 200).
struct Value::Node {
  explicit Node(Kind k) : kind(k) {
    switch (k) {
      case Kind::string:
      case Kind::bytes:
      case Kind::global: new (&str) std::string(); break;
      case Kind::list:
      case Kind::tuple: new (&items) std::vector<Value>(); break;
      case Kind::dict: new (&entries) std::vector<std::pair<Value, Value>>(); break;
      case Kind::tensor: new (&tensor) Tensor(); break;
      default: throw ValueError("torch_io::Value: a node for a value that has none");
    }
  }
  ~Node() {
    switch (kind) {
      case Kind::string:
      case Kind::bytes:
      case Kind::global: str.~basic_string(); break;
      case Kind::list:
      case Kind::tuple: items.~vector(); break;
      case Kind::dict: entries.~vector(); break;
      case Kind::tensor: tensor.~Tensor(); break;
      default: break;
    }
  }
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  const Kind kind;
  union {
    std::string str;           // strings, bytes, global names
    std::vector<Value> items;  // lists and tuples
    // dicts: the entries in insertion order, found through extra's table once there are more than
    // internal::kLinearKeys (smaller dicts are searched in order). Keys are compared as Python does
    // (1 == 1.0 == True) without copying them: one long key shared by many dicts costs its bytes once.
    std::vector<std::pair<Value, Value>> entries;
    Tensor tensor;  // tensors
  };
  std::unique_ptr<internal::DictExtra> extra;  // dicts
  // Bookkeeping of the unpickler (and checks of the pickler).
  uint64_t expanded = 1;  // values in the tree below, counting shared ones each time
  uint64_t hash = 0;      // of a string, bytes, global or tuple used as a dict key (0: not computed yet)
  uint32_t depth = 1;     // 1 + the depth of the deepest child
  StorageType storage_type = StorageType::float32;  // tensors
  bool parameter = false;
  bool is_storage = false;  // a storage from a persistent id (an argument of the rebuild functions)
  bool ordered = false;     // dicts: an OrderedDict
  bool sealed = false;      // placed inside another value: may not change any more

  const Value& attributes() const {
    static const Value none{};
    return extra ? extra->attributes : none;
  }
  void set_attributes(Value v) {
    if (!extra) extra = std::make_unique<internal::DictExtra>();
    extra->attributes = std::move(v);
  }
};

namespace internal {

// tag followed by s (written so because GCC 12 warns falsely on "x" + std::string).
inline std::string tagged(char tag, std::string_view s) {
  std::string out(1, tag);
  out.append(s);
  return out;
}

// ---- dict keys ----
// Dicts of up to kLinearKeys entries are searched in order; larger ones through DictExtra's table.
inline constexpr size_t kLinearKeys = 8;
// A tuple used as a dict key may hold at most this many values (nested ones and shared ones counted
// each time): hashing and comparing it walks them all.
inline constexpr uint64_t kMaxKeyValues = 4096;
inline constexpr uint64_t kMaxKeyBytes = 65536;  // of strings in such a tuple

// Python's hash and equality of dict keys (None, bools, numbers, str, bytes, globals, tuples of
// them; 1 == 1.0 == True). key_hash throws ValueError for values that cannot be keys (lists, dicts,
// tensors, tuples of more than kMaxKeyValues values); it caches the hash in the key's node.
uint64_t key_hash(const Value& key);
bool key_equal(const Value& a, const Value& b);
uint64_t string_key_hash(Kind kind, std::string_view s);  // of a str, bytes or global key
uint64_t int_key_hash(int64_t v);
// Sets dict[key] = value (replacing the value of an equal key in place): the one way entries are
// added, by Value::set and by the unpickler. Returns whether the key was new.
bool dict_set(Value::Node& dict, Value key, Value value);
// The value of the key that `eq` accepts, whose key_hash is `h`; nullptr when there is none.
template <class Eq>
const Value* dict_find(const Value::Node& d, uint64_t h, Eq&& eq) {
  if (!d.extra || d.extra->slots.empty()) {
    for (const auto& [k, x] : d.entries)
      if (eq(k)) return &x;
    return nullptr;
  }
  const DictExtra& ix = *d.extra;
  const size_t mask = ix.slots.size() - 1;
  for (size_t s = h & mask; ix.slots[s] != 0; s = (s + 1) & mask) {
    const uint32_t pos = ix.slots[s] - 1;
    if (ix.hashes[pos] == h && eq(d.entries[pos].first)) return &d.entries[pos].second;
  }
  return nullptr;
}

// What hooks throw to refuse something; the unpickler turns it into an IOError naming the file and
// the byte where the pickle asked for it.
struct Refused : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class UnpickleHooks {
 public:
  virtual ~UnpickleHooks() = default;
  // GLOBAL / STACK_GLOBAL: a Value of kind global, or an exception refusing it.
  virtual Value find_global(const std::string& module, const std::string& name) = 0;
  // REDUCE (callable(*args)) and NEWOBJ (cls.__new__(cls, *args)); args is a tuple.
  virtual Value call(const Value& callable, const Value& args, bool newobj) = 0;
  virtual Value persistent_load(const Value& pid) = 0;
  // BUILD: obj.__setstate__(state) (obj is the value on the stack, modified in place).
  virtual void build(Value& obj, const Value& state) = 0;
};

// Runs one pickle from data[0, size) to its STOP; *end receives the offset after it. Errors are
// IOError "<what>: <problem> (opcode X at byte N)"; *ran_out is set when the error is that the data
// ended (a caller holding only part of a file may then retry with more).
Value unpickle(const char* data, size_t size, UnpickleHooks& hooks, const LoadOptions& limits, const std::string& what,
               size_t* end = nullptr, bool* ran_out = nullptr);

// Writes protocol 2 pickles. Values are written as Python's pickler does, memoizing lists, dicts
// and tensors so shared ones stay shared; tensors go to the hook (which writes their rebuild call).
class Pickler {
 public:
  using TensorWriter = std::function<void(Pickler&, const Value&)>;
  explicit Pickler(TensorWriter tensor_writer, int max_depth = 1000);

  void proto();
  void stop();
  void value(const Value& v);
  // Primitives for the tensor writer.
  void global(std::string_view module, std::string_view name);
  void op(char c) { out_.push_back(c); }
  void integer(int64_t v);
  void string(std::string_view s);
  void boolean(bool b);
  // `n` values already written, as one tuple.
  void tuple_from_mark();

  const std::string& bytes() const { return out_; }

 private:
  void value(const Value& v, int depth);
  void memo_put(const Value& v);
  void memo_op(char short_op, char long_op, uint32_t i);
  bool memo_get(const Value::Node* node);

  std::string out_;
  TensorWriter tensor_writer_;
  int max_depth_;
  std::unordered_map<const Value::Node*, uint32_t> memo_;
  std::unordered_map<const Value::Node*, bool> in_progress_;
  std::vector<std::shared_ptr<Value::Node>> kept_;
};

}  // namespace internal
}  // namespace nabla::torch_io
