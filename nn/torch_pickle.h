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
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>

#include "torch_file.h"

namespace nabla::torch_io {

struct Value::Node {
  std::string str;  // strings, bytes, global names
  // tensors
  Tensor tensor;
  StorageType storage_type = StorageType::float32;
  bool parameter = false;
  bool is_storage = false;  // a storage from a persistent id (an argument of the rebuild functions)
  // lists and tuples
  std::vector<Value> items;
  // dicts
  std::vector<std::pair<Value, Value>> entries;
  std::unordered_map<std::string, size_t> index;  // key_id(key) -> position in entries
  bool ordered = false;
  Value attributes;  // BUILD state of an OrderedDict
  // Bookkeeping of the unpickler (and checks of the pickler).
  uint32_t depth = 1;      // 1 + the depth of the deepest child
  uint64_t expanded = 1;   // values in the tree below, counting shared ones each time
  bool sealed = false;     // placed inside another value: may not change any more
};

namespace internal {

// tag followed by s (written so because GCC 12 warns falsely on "x" + std::string).
inline std::string tagged(char tag, std::string_view s) {
  std::string out(1, tag);
  out.append(s);
  return out;
}

// A hashable identity of a dict key (Python's equality: 1 == 1.0 == True); throws ValueError for
// values that cannot be keys.
std::string key_id(const Value& key);

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
