// PyTorch's own files: what torch.save writes and torch.load reads (.pt, .pth, .bin, .ckpt).
//
//   # Python
//   torch.save(model.state_dict(), "model.pt")
//   // C++
//   model->load_state_dict(torch_io::load("model.pt").flatten_tensors());
//
//   torch_io::Value ck = torch_io::load("checkpoint.pt");   // {'model': sd, 'optimizer': ..., 'epoch': 3}
//   model->load_state_dict(ck["model"].flatten_tensors());
//   opt.load_state_dict(ck["optimizer"]);                   // optim/optimizer.h: PyTorch's layout
//   int64_t epoch = ck["epoch"].to_int();
//
//   torch_io::save("out.pt", model->state_dict());          // torch.load("out.pt", weights_only=True)
//   torch_io::save("ck.pt", torch_io::Value::dict({{"model", model->state_dict()}, {"epoch", 4}}));
//
// Formats read: the zip archive of PyTorch >= 1.6 (`<name>/data.pkl`, storages in `<name>/data/<key>`,
// `version`, and `byteorder` for big-endian files), and the legacy stream of older versions
// (`_use_new_zipfile_serialization=False`: magic number, protocol, system info, the pickle, then the
// storages one after another; big-endian too). `save` writes the zip format, pickle protocol 2, as
// torch.save does: PyTorch 1.13 and 2.x read it, with weights_only=True too (1.13's weights_only
// reader cannot read float values such as a loss or a learning rate, in PyTorch's own files either).
//
// Safety: the pickle is read by a restricted stack machine (nn/torch_pickle.cpp) that executes no
// code. Only the globals tensor checkpoints use are accepted (collections.OrderedDict, torch's
// tensor and parameter rebuild functions, storage types, dtypes, torch.Size, torch.device and
// _codecs.encode for bytes: what torch.load(weights_only=True) allows); any other global (os.system,
// builtins.eval, a model's class) is refused with an IOError naming it, before anything could run.
// Every size, offset, count and shape is checked against the file before allocating; nesting depth,
// object and memo counts are limited (LoadOptions); a tensor whose view reaches outside its storage,
// a storage of the wrong size, a bad CRC or a truncated file is an IOError naming the file and the
// entry, never a read out of bounds.
//
// Tensors: every storage dtype PyTorch saves for the types below. nabla has no int8 and int16: those
// load widened to int32 (exactly), remember their file dtype (Value::storage_type) and are narrowed
// back when saved (values that no longer fit are an error). Tensors that share a storage in the file
// stay views of one nabla storage (and are saved as one storage again); offsets, strides, 0-d and
// empty tensors load as they were. nn.Parameter becomes a tensor with requires_grad (and
// is_parameter()). Everything loads to the CPU, whatever device it was saved from.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "../core/ordered_dict.h"
#include "../core/tensor.h"

namespace nabla::torch_io {

// The element types of PyTorch's storages (torch.FloatStorage, ...), in the order of their names.
enum class StorageType : uint8_t {
  float32,
  float64,
  float16,
  bfloat16,
  int64,
  int32,
  int16,
  int8,
  uint8,
  boolean,
  complex64,
  complex128
};
// "float32", ..., as torch prints dtypes without "torch.".
const char* storage_type_name(StorageType t);
// The dtype a storage loads as in nabla (int8 and int16: int32).
DType nabla_dtype(StorageType t);
// The storage type of a nabla dtype.
StorageType storage_type_of(DType d);

enum class Kind : uint8_t { none, boolean, integer, floating, string, bytes, tensor, list, tuple, dict, global };
const char* kind_name(Kind k);

// A Python value as torch.load returns it. A handle: copies share lists and dicts (as Python names
// do), so a dict built with Value::dict() can be filled in place with set().
class Value {
 public:
  struct Node;

  Value() = default;  // None
  Value(std::nullptr_t) {}
  Value(bool b) : kind_(Kind::boolean), num_(b ? 1 : 0) {}
  Value(int v) : kind_(Kind::integer), num_(v) {}
  Value(int64_t v) : kind_(Kind::integer), num_(v) {}
  Value(double v) : kind_(Kind::floating), real_(v) {}
  Value(const char* s) : Value(std::string(s)) {}
  Value(std::string s);
  Value(Tensor t);
  // An OrderedDict of the tensors: what model.state_dict() is in PyTorch.
  Value(const nn::StateDict& state_dict);

  static Value bytes(std::string b);
  static Value list(std::vector<Value> items = {});
  static Value tuple(std::vector<Value> items = {});
  // A dict (ordered: a collections.OrderedDict); keys are None, bools, numbers, strings or tuples.
  static Value dict(std::vector<std::pair<Value, Value>> entries = {}, bool ordered = false);
  // A tensor saved as nn.Parameter.
  static Value parameter(Tensor t, bool requires_grad = true);
  // A tensor saved with another storage type (e.g. int8 for an int32 tensor of small values).
  static Value tensor(Tensor t, StorageType as);
  // A module-level name such as "torch.float16" (dtypes, classes kept as data).
  static Value global(std::string qualified_name);

  Kind kind() const { return kind_; }
  bool is_none() const { return kind_ == Kind::none; }
  bool is_tensor() const { return kind_ == Kind::tensor; }
  bool is_dict() const { return kind_ == Kind::dict; }
  bool is_list() const { return kind_ == Kind::list; }
  bool is_tuple() const { return kind_ == Kind::tuple; }
  bool is_string() const { return kind_ == Kind::string; }
  bool is_number() const { return kind_ == Kind::integer || kind_ == Kind::floating || kind_ == Kind::boolean; }

  // Each throws ValueError naming the kind it has when it holds another one.
  bool to_bool() const;
  int64_t to_int() const;                // integers and bools
  double to_double() const;              // any number
  const std::string& to_string() const;  // strings and bytes
  const Tensor& to_tensor() const;
  StorageType storage_type() const;  // tensors: their storage's type in the file
  bool is_parameter() const;         // tensors: saved as nn.Parameter
  const std::string& global_name() const;

  // Lists and tuples.
  const std::vector<Value>& items() const;
  const Value& operator[](size_t i) const;
  const Value& operator[](int i) const { return (*this)[static_cast<size_t>(i < 0 ? SIZE_MAX : i)]; }
  // Dicts, in insertion order.
  const std::vector<std::pair<Value, Value>>& entries() const;
  bool is_ordered_dict() const;
  // Python attributes a dict was saved with (a state dict's `_metadata`); None when there are none.
  Value attributes() const;
  const Value* find(std::string_view key) const;
  const Value* find(int64_t key) const;
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  // Throws IndexError listing the keys there are.
  const Value& operator[](std::string_view key) const;
  const Value& operator[](const char* key) const { return (*this)[std::string_view(key)]; }
  // Items of a list or tuple, entries of a dict.
  size_t size() const;

  // Building (lists and dicts only): append, and set (replacing an existing key in place).
  Value& append(Value v);
  Value& set(Value key, Value v);

  // Every tensor under this value by dotted path: dict keys (ints as digits), list and tuple
  // indices, joined with '.' after `prefix`: {'model': {'fc.weight': t}} -> "model.fc.weight".
  // Throws ValueError if two paths collide.
  nn::StateDict flatten_tensors(const std::string& prefix = "", uint64_t max_bytes = kMaxFlattenBytes) const;
  // Every leaf (tensors, numbers, strings, None, empty containers) by dotted path. A subtree that
  // appears in several places (the same list or dict referenced twice in the file) gives its leaves
  // once per path, as Python would see them; what that would produce (the names, the strings the
  // leaves hold and 64 bytes a leaf) is counted first, from the shared structure, and more than
  // `max_bytes` is a ValueError before anything is built: a few KB of pickle that share subtrees
  // 20 levels deep name a million leaves by paths of 80 KB each.
  static constexpr uint64_t kMaxFlattenBytes = uint64_t(256) << 20;
  std::vector<std::pair<std::string, Value>> flatten(const std::string& prefix = "",
                                                     uint64_t max_bytes = kMaxFlattenBytes) const;

  // Python's repr for scalars and containers; tensors as tensor(float32, [3, 4]). The whole of it:
  // a value that shares subtrees repeats them, as Python's repr does.
  std::string repr() const;
  // At most max_chars characters of it, then "..." (for messages).
  std::string repr(size_t max_chars) const;

  // Internals (the unpickler builds values in place).
  const std::shared_ptr<Node>& node() const { return node_; }
  explicit Value(Kind kind, std::shared_ptr<Node> node) : kind_(kind), node_(std::move(node)) {}

 private:
  Kind kind_ = Kind::none;
  union {
    int64_t num_ = 0;
    double real_;
  };
  std::shared_ptr<Node> node_;  // strings, bytes, tensors, containers, globals
};

struct LoadOptions {
  uint64_t max_pickle_bytes = uint64_t(256) << 20;  // data.pkl (or the legacy pickle)
  uint64_t max_objects = 10'000'000;  // values the pickle may create, counting shared ones as often as they appear
  uint64_t max_memo = 10'000'000;     // memo entries
  int max_depth = 1000;               // nesting of containers (Python's own recursion limit)
  // Memory the pickle's values may take (its lists, dicts, strings, tensor headers, its stack and
  // memo; not the tensors' data, which the file must hold); 0: 64 MiB plus twice the file's size.
  // A 10 MB pickle of ten million empty dicts would take 1.4 GB (PyTorch: 1.1 GB); it is refused
  // once its values pass the 87 MB of its limit. Files of tensors need a fraction of their size;
  // pickled Python objects about 13 times theirs (a list of 100,000 dicts of three strings: 4 MB
  // that need 54 MB), so more than about 5 MB of them need a larger limit here.
  uint64_t max_value_bytes = 0;
  // Check each zip record's CRC-32 (about a quarter of the time a warm load of a large file takes
  // on one core; PyTorch's reader skips it). Sizes, offsets and shapes are checked either way.
  bool check_crc = true;
};

// Reads a file written by torch.save (zip or legacy). Throws IOError naming the file and the problem.
Value load(const std::string& path, const LoadOptions& options = {});
// A file's bytes in memory; `what` names it in errors.
Value load_bytes(const char* data, size_t size, const std::string& what = "<buffer>", const LoadOptions& options = {});

struct SaveOptions {
  // The archive's top folder; by default the file's name without its extension, as torch.save.
  std::string archive_name{};
  // ZIP64 records even when the file is small (for testing readers).
  bool force_zip64 = false;
};

// Writes `value` in torch.save's zip format, atomically. Tensors may be on any device and of any
// layout; tensors sharing a storage are saved as one storage (the part their views cover).
void save(const std::string& path, const Value& value, const SaveOptions& options = {});
// The whole file as bytes.
std::vector<char> serialize(const Value& value, const SaveOptions& options = {});

}  // namespace nabla::torch_io
