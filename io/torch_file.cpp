// PyTorch's files (nn/torch_file.h): the zip and legacy containers, storages and tensors, and the
// globals a checkpoint may name. The pickle machinery itself is in nn/torch_pickle.cpp.
#include "io/torch_file.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <map>
#include <unordered_set>

#include "core/graph.h"
#include "core/impl.h"
#include "core/ops.h"
#include "io/file.h"
#include "io/torch_pickle.h"
#include "io/zip.h"

namespace nabla::torch_io {

namespace {

using internal::Refused;

// torch.<name> storage classes, in StorageType order, and their element sizes in the file.
constexpr const char* kStorageClass[] = {
    "FloatStorage", "DoubleStorage", "HalfStorage", "BFloat16Storage", "LongStorage",         "IntStorage",
    "ShortStorage", "CharStorage",   "ByteStorage", "BoolStorage",     "ComplexFloatStorage", "ComplexDoubleStorage"};
constexpr size_t kFileElementSize[] = {4, 8, 2, 2, 8, 4, 2, 1, 1, 1, 8, 16};
constexpr int kNumStorageTypes = 12;
constexpr size_t kMaxDims = 64;  // as PyTorch

size_t file_element_size(StorageType t) { return kFileElementSize[static_cast<int>(t)]; }

// "torch.FloatStorage" -> float32.
bool storage_class(const std::string& q, StorageType* out) {
  if (q.rfind("torch.", 0) != 0) return false;
  for (int i = 0; i < kNumStorageTypes; ++i)
    if (q.compare(6, std::string::npos, kStorageClass[i]) == 0) {
      if (out) *out = static_cast<StorageType>(i);
      return true;
    }
  return false;
}

// Names from the file, made safe to print: at most 200 characters, control bytes escaped.
std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s.substr(0, 200)) {
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return s.size() > 200 ? out + "..." : out;
}

const std::unordered_set<std::string>& allowed_globals() {
  static const std::unordered_set<std::string> s = {
      "collections.OrderedDict",
      "torch._utils._rebuild_tensor",
      "torch._utils._rebuild_tensor_v2",
      "torch._utils._rebuild_parameter",
      "torch._utils._rebuild_parameter_with_state",
      "torch._tensor._rebuild_from_type_v2",
      "torch.nn.parameter.Parameter",
      "torch.Tensor",
      "torch.Size",
      "torch.device",
      "_codecs.encode",
      // dtypes (kept as data, e.g. {'dtype': torch.float16})
      "torch.float32",
      "torch.float64",
      "torch.float16",
      "torch.bfloat16",
      "torch.int64",
      "torch.int32",
      "torch.int16",
      "torch.int8",
      "torch.uint8",
      "torch.bool",
      "torch.complex32",
      "torch.complex64",
      "torch.complex128",
      "torch.uint16",
      "torch.uint32",
      "torch.uint64",
      "torch.float8_e4m3fn",
      "torch.float8_e5m2",
  };
  return s;
}

// What PyTorch's weights_only reader allows but nabla cannot represent.
const char* unsupported_reason(const std::string& q) {
  static const std::pair<const char*, const char*> kList[] = {
      {"torch._utils._rebuild_sparse_tensor", "sparse tensors"},
      {"torch._utils._rebuild_sparse_csr_tensor", "sparse tensors"},
      {"torch.serialization._get_layout", "sparse tensors"},
      {"torch._utils._rebuild_qtensor", "quantized tensors"},
      {"torch._utils._rebuild_meta_tensor_no_storage", "meta tensors"},
      {"torch._utils._rebuild_wrapper_subclass", "tensor subclasses"},
      {"torch._utils._rebuild_device_tensor_from_numpy", "tensors of devices without storages"},
      {"torch._utils._rebuild_device_tensor_from_cpu_tensor", "tensors of devices without storages"},
      {"torch._utils._rebuild_tensor_v3", "dtypes without a typed storage"},
      {"torch.UntypedStorage", "dtypes without a typed storage"},
      {"torch.QInt8Storage", "quantized tensors"},
      {"torch.QUInt8Storage", "quantized tensors"},
      {"torch.QInt32Storage", "quantized tensors"},
      {"torch.QUInt4x2Storage", "quantized tensors"},
      {"torch.QUInt2x4Storage", "quantized tensors"},
      {"collections.Counter", "collections.Counter"},
      {"builtins.set", "sets"},
      {"builtins.frozenset", "sets"},
      {"builtins.bytearray", "bytearrays"},
      {"builtins.complex", "complex numbers"},
  };
  for (const auto& [name, why] : kList)
    if (q == name) return why;
  return nullptr;
}

int64_t as_int(const Value& v, const char* what) {
  if (v.kind() != Kind::integer && v.kind() != Kind::boolean)
    throw Refused(internal::str(what, " must be an int, got ", kind_name(v.kind())));
  return v.to_int();
}

Shape as_shape(const Value& v, const char* what) {
  if (!v.is_tuple() && !v.is_list()) throw Refused(internal::str(what, " must be a tuple, got ", kind_name(v.kind())));
  if (v.items().size() > kMaxDims)
    throw Refused(internal::str(what, " has ", v.items().size(), " dimensions (at most ", kMaxDims, ")"));
  Shape s;
  for (const Value& x : v.items()) {
    int64_t n = as_int(x, what);
    if (n < 0) throw Refused(internal::str(what, " holds the negative value ", n));
    s.push_back(n);
  }
  return s;
}

// ---- loading --------------------------------------------------------------------------------------

struct Storage {
  std::string key;
  StorageType type = StorageType::float32;
  uint64_t numel = 0;
  Tensor base;                        // 1-D, numel elements of nabla_dtype(type)
  const zip::Entry* entry = nullptr;  // zip: its record
};

class Hooks final : public internal::UnpickleHooks {
 public:
  // zip: storages are the records <prefix>data/<key>. legacy (zip == nullptr): they follow the
  // pickles, and all of them together must fit in `budget` bytes.
  Hooks(const zip::Reader* zip, std::string prefix, uint64_t budget, const LoadOptions& limits)
      : zip_(zip), prefix_(std::move(prefix)), budget_(budget), limits_(limits) {}

  Value find_global(const std::string& module_in, const std::string& name) override {
    // Python 2's names, as pickle does.
    std::string module = module_in == "__builtin__" ? "builtins" : module_in == "copy_reg" ? "copyreg" : module_in;
    std::string q = module + "." + name;
    if (allowed_globals().count(q) || storage_class(q, nullptr)) return Value::global(q);
    if (const char* why = unsupported_reason(q))
      throw Refused(internal::str("global ", q, ": ", why, " are not supported by nabla"));
    std::string hint;
    if (module.rfind("__torch__", 0) == 0)
      hint = " (this is a TorchScript archive: in Python, torch.save(module.state_dict()) instead)";
    else if (module == "__main__" || module.rfind("torch.nn.modules", 0) == 0 || module.rfind("torch.optim", 0) == 0)
      hint = " (the file pickles a Python object such as a whole model: save model.state_dict() instead)";
    throw Refused("refusing GLOBAL " + printable(q) +
                  ": only the globals of tensor checkpoints are allowed, as torch.load(weights_only=True) does;"
                  " nothing was called" +
                  hint);
  }

  Value call(const Value& f, const Value& args, bool newobj) override {
    if (f.kind() != Kind::global)
      throw Refused(internal::str("the pickle calls a ", kind_name(f.kind()), ", not a function"));
    const std::string& q = f.global_name();
    const std::vector<Value>& a = args.items();
    auto nargs = [&](size_t lo, size_t hi) {
      if (a.size() < lo || a.size() > hi)
        throw Refused(internal::str(q, " takes ", lo == hi ? std::to_string(lo) : internal::str(lo, " to ", hi),
                                    " arguments, got ", a.size()));
    };
    if (newobj && q != "torch.nn.parameter.Parameter") throw Refused("NEWOBJ of " + q + " is not allowed");
    if (q == "collections.OrderedDict") {
      nargs(0, 0);
      return Value::dict({}, true);
    }
    if (q == "torch._utils._rebuild_tensor_v2") {  // (storage, offset, size, stride, requires_grad, hooks[, metadata])
      nargs(6, 7);
      return rebuild(a[0], a[1], a[2], a[3], as_int(a[4], "requires_grad") != 0);
    }
    if (q == "torch._utils._rebuild_tensor") {  // (storage, offset, size, stride)
      nargs(4, 4);
      return rebuild(a[0], a[1], a[2], a[3], false);
    }
    if (q == "torch._utils._rebuild_parameter") {  // (data, requires_grad, hooks)
      nargs(3, 3);
      return parameter(a[0], a[1]);
    }
    if (q == "torch._utils._rebuild_parameter_with_state") {  // (data, requires_grad, hooks, state)
      nargs(4, 4);
      return parameter(a[0], a[1]);
    }
    if (q == "torch.nn.parameter.Parameter") {  // Parameter(data[, requires_grad])
      nargs(1, 2);
      return parameter(a[0], a.size() > 1 ? a[1] : Value(true));
    }
    if (q == "torch._tensor._rebuild_from_type_v2") {  // (func, type, args, state)
      nargs(4, 4);
      if (a[1].kind() != Kind::global ||
          (a[1].global_name() != "torch.Tensor" && a[1].global_name() != "torch.nn.parameter.Parameter"))
        throw Refused("_rebuild_from_type_v2 of a type other than torch.Tensor or torch.nn.Parameter");
      if (!a[2].is_tuple()) throw Refused("_rebuild_from_type_v2 without an argument tuple");
      Value t = call(a[0], a[2], false);
      if (!t.is_tensor()) throw Refused("_rebuild_from_type_v2 did not make a tensor");
      if (a[1].global_name() == "torch.nn.parameter.Parameter")
        return parameter(t, Value(t.to_tensor().requires_grad()));
      return t;
    }
    if (q == "torch.Size") {
      nargs(1, 1);
      std::vector<Value> dims;
      for (int64_t d : as_shape(a[0], "torch.Size")) dims.emplace_back(d);
      return Value::tuple(std::move(dims));
    }
    if (q == "torch.device") {  // device('cuda:0') or device('cuda', 0)
      nargs(1, 2);
      if (!a[0].is_string()) throw Refused("torch.device needs a string");
      return Value(a.size() == 1 ? a[0].to_string()
                                 : a[0].to_string() + ":" + std::to_string(as_int(a[1], "device index")));
    }
    if (q == "_codecs.encode") {  // Python 3 bytes at protocol 2: encode('<latin-1 text>', 'latin1')
      nargs(2, 2);
      if (!a[0].is_string() || !a[1].is_string() || (a[1].to_string() != "latin1" && a[1].to_string() != "latin-1"))
        throw Refused("_codecs.encode is only allowed as encode(text, 'latin1')");
      return Value::bytes(latin1(a[0].to_string()));
    }
    throw Refused("calling " + q + " is not supported");
  }

  Value persistent_load(const Value& pid) override {
    // zip: ('storage', torch.FloatStorage, key, location, numel)
    // legacy: the same and view_metadata: None, or (view_key, offset, size) of a part of the storage
    if (!pid.is_tuple()) throw Refused(internal::str("a persistent id is a ", kind_name(pid.kind()), ", not a tuple"));
    const auto& a = pid.items();
    const bool legacy = zip_ == nullptr;
    if (a.empty() || (a[0].kind() != Kind::string && a[0].kind() != Kind::bytes) || a[0].to_string() != "storage")
      throw Refused("only storages may be persistent ids, got " + printable(pid.repr(200)));
    if (a.size() != (legacy ? 6u : 5u))
      throw Refused(internal::str("a storage's persistent id has ", a.size(), " fields, not ", legacy ? 6 : 5));
    StorageType type{};
    if (a[1].kind() != Kind::global || !storage_class(a[1].global_name(), &type))
      throw Refused("a storage of unknown type " + printable(a[1].repr(200)));
    std::string key = a[2].kind() == Kind::integer ? std::to_string(a[2].to_int())
                      : a[2].is_string()           ? a[2].to_string()
                                                   : throw Refused("a storage key must be a string");
    if (!a[3].is_string()) throw Refused("a storage location must be a string");
    int64_t numel = as_int(a[4], "a storage's size");
    if (numel < 0) throw Refused(internal::str("storage '", printable(key), "' has negative size ", numel));
    const Storage& s = storage(key, type, static_cast<uint64_t>(numel));
    Tensor view = s.base;
    if (legacy && !a[5].is_none()) {
      if (!a[5].is_tuple() || a[5].items().size() != 3) throw Refused("malformed storage view metadata");
      int64_t off = as_int(a[5].items()[1], "a storage view's offset"),
              n = as_int(a[5].items()[2], "a storage view's size");
      if (off < 0 || n < 0 || static_cast<uint64_t>(off) > s.numel || static_cast<uint64_t>(n) > s.numel - off)
        throw Refused(internal::str("a view [", off, ", +", n, ") of storage '", printable(key), "' is outside its ",
                                    s.numel, " elements"));
      view = nabla::internal::make_view(s.base, {n}, {1}, off);
    }
    Value v(view);
    v.node()->storage_type = type;
    v.node()->is_storage = true;
    return v;
  }

  void build(Value& obj, const Value& state) override {
    if (obj.is_dict()) {  // an OrderedDict's attributes: a state dict's _metadata
      if (state.is_none()) return;
      if (!state.is_dict())
        throw Refused(internal::str("BUILD sets a dict's attributes from a ", kind_name(state.kind())));
      Value::Node& n = *obj.node();
      if (n.sealed) throw Refused("BUILD changes a dict that is already part of another value");
      if (state.node() == obj.node())
        throw Refused("a dict's attributes are the dict itself (recursive structures are not supported)");
      state.node()->sealed = true;
      if (n.attributes().is_none()) {
        n.set_attributes(state);
      } else {
        Value merged = Value::dict({}, false);
        for (const auto& [k, v] : n.attributes().entries()) merged.set(k, v);
        for (const auto& [k, v] : state.entries()) merged.set(k, v);
        n.set_attributes(merged);
      }
      n.depth = std::max(n.depth, state.node()->depth + 1);
      n.expanded += state.node()->expanded;
      if (n.depth > static_cast<uint32_t>(limits_.max_depth) || n.expanded > limits_.max_objects)
        throw Refused("a dict's attributes nest too deep or hold too many values");
      return;
    }
    if (obj.is_tensor() && (state.is_none() || (state.is_dict() && state.size() == 0))) return;
    throw Refused(internal::str("BUILD of a ", kind_name(obj.kind()), " with a ", kind_name(state.kind()),
                                " is not supported (objects with Python state)"));
  }

  std::vector<Storage> storages;
  std::unordered_map<std::string, size_t> by_key;

 private:
  static std::string latin1(const std::string& utf8) {
    std::string out;
    for (size_t i = 0; i < utf8.size(); ++i) {
      auto c = static_cast<unsigned char>(utf8[i]);
      if (c < 0x80) {
        out.push_back(static_cast<char>(c));
      } else if ((c & 0xe0) == 0xc0 && i + 1 < utf8.size() && c <= 0xc3) {
        out.push_back(static_cast<char>(((c & 0x1f) << 6) | (static_cast<unsigned char>(utf8[++i]) & 0x3f)));
      } else {
        throw Refused("_codecs.encode: the text is not latin-1");
      }
    }
    return out;
  }

  const Storage& storage(const std::string& key, StorageType type, uint64_t numel) {
    auto it = by_key.find(key);
    if (it != by_key.end()) {
      const Storage& s = storages[it->second];
      if (s.type != type || s.numel != numel)
        throw Refused(internal::str("storage '", printable(key), "' appears as ", s.numel, " ",
                                    storage_type_name(s.type), " and as ", numel, " ", storage_type_name(type)));
      return s;
    }
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(numel, static_cast<uint64_t>(file_element_size(type)), &bytes) ||
        numel > static_cast<uint64_t>(INT64_MAX) / 8)
      throw Refused(internal::str("storage '", printable(key), "' of ", numel, " elements is too large"));
    Storage s;
    s.key = key;
    s.type = type;
    s.numel = numel;
    if (zip_) {
      std::string name = prefix_ + "data/" + key;
      s.entry = zip_->find(name);
      if (!s.entry)
        throw Refused("storage '" + printable(key) + "' has no record '" + printable(name) + "' in the archive");
      if (s.entry->size != bytes)
        throw Refused(internal::str("record '", printable(name), "' holds ", s.entry->size,
                                    " bytes but its storage of ", numel, " ", storage_type_name(type), " needs ",
                                    bytes));
    } else {
      used_ += 8;  // each storage is preceded by its size
      if (bytes > budget_ || used_ > budget_ - bytes)
        throw Refused(internal::str("storage '", printable(key), "' of ", numel, " ", storage_type_name(type),
                                    " needs more bytes than the file holds (", budget_, ")"));
      used_ += bytes;
    }
    s.base = nabla::internal::make_empty({static_cast<int64_t>(numel)}, nabla_dtype(type), kCPU);
    by_key.emplace(key, storages.size());
    storages.push_back(std::move(s));
    return storages.back();
  }

  Value rebuild(const Value& storage, const Value& offset_v, const Value& size_v, const Value& stride_v,
                bool requires_grad) {
    if (!storage.is_tensor() || !storage.node()->is_storage)
      throw Refused(internal::str("a tensor's storage is a ", kind_name(storage.kind()), ", not a storage"));
    const Tensor& base = storage.node()->tensor;  // 1-D
    const uint64_t avail = static_cast<uint64_t>(base.numel());
    int64_t offset = as_int(offset_v, "a tensor's storage offset");
    Shape sizes = as_shape(size_v, "a tensor's size"), strides = as_shape(stride_v, "a tensor's stride");
    if (offset < 0) throw Refused(internal::str("a tensor has the negative storage offset ", offset));
    if (sizes.size() != strides.size())
      throw Refused(internal::str("a tensor has size ", sizes, " but stride ", strides));
    // The last element it views: offset + sum((size - 1) * stride), computed without overflow.
    uint64_t numel = 1, last = static_cast<uint64_t>(offset);
    bool overflow = false;
    for (size_t i = 0; i < sizes.size(); ++i) {
      overflow |= __builtin_mul_overflow(numel, static_cast<uint64_t>(sizes[i]), &numel);
      if (sizes[i] > 0) {
        uint64_t reach = 0;
        overflow |=
            __builtin_mul_overflow(static_cast<uint64_t>(sizes[i] - 1), static_cast<uint64_t>(strides[i]), &reach);
        overflow |= __builtin_add_overflow(last, reach, &last);
      }
    }
    if (overflow || numel > static_cast<uint64_t>(INT64_MAX))
      throw Refused(internal::str("a tensor of size ", sizes, " and stride ", strides, " overflows"));
    if (numel == 0 ? static_cast<uint64_t>(offset) > avail : last >= avail)
      throw Refused(internal::str("a tensor of size ", sizes, ", stride ", strides, " and offset ", offset,
                                  " reaches element ", last, " of a storage of ", avail,
                                  " (the storage is shorter than the tensor needs)"));
    Tensor t = nabla::internal::make_view(base, std::move(sizes), std::move(strides), base.storage_offset() + offset);
    if (requires_grad) t.requires_grad_(true);
    Value v(t);
    v.node()->storage_type = storage.node()->storage_type;
    return v;
  }

  static Value parameter(const Value& data, const Value& requires_grad) {
    if (!data.is_tensor() || data.node()->is_storage)
      throw Refused(internal::str("a Parameter of a ", kind_name(data.kind()), ", not a tensor"));
    Value p(data.to_tensor());
    p.node()->storage_type = data.node()->storage_type;
    p.node()->parameter = true;
    p.node()->tensor.requires_grad_(as_int(requires_grad, "requires_grad") != 0);
    return p;
  }

  const zip::Reader* zip_;
  std::string prefix_;
  uint64_t budget_, used_ = 0;
  const LoadOptions& limits_;
};

// Hooks for the legacy format's small header pickles: no globals, no calls, no storages.
class PlainHooks final : public internal::UnpickleHooks {
 public:
  Value find_global(const std::string& m, const std::string& n) override {
    throw Refused("refusing GLOBAL " + printable(m + "." + n) + " in a header pickle");
  }
  Value call(const Value&, const Value&, bool) override { throw Refused("a call in a header pickle"); }
  Value persistent_load(const Value&) override { throw Refused("a persistent id in a header pickle"); }
  void build(Value&, const Value&) override { throw Refused("BUILD in a header pickle"); }
};

// Fills a storage from `bytes` bytes of the file (read by `read` into the destination it is given):
// straight into the tensor when the layout matches, else through a buffer (byte swapping, int8 and
// int16 widening). Bools are normalized to 0/1.
template <class Read>
void fill_storage(Storage& s, bool swap, Read&& read) {
  const size_t es = file_element_size(s.type);
  const uint64_t bytes = s.numel * es;
  const bool widen = s.type == StorageType::int8 || s.type == StorageType::int16;
  unsigned char* dst = static_cast<unsigned char*>(s.base.data_ptr());
  if (!widen && !(swap && es > 1)) {
    read(dst);
  } else {
    std::vector<unsigned char> buf(bytes);
    read(buf.data());
    if (swap && es > 1)
      for (uint64_t i = 0; i < bytes; i += es) std::reverse(buf.data() + i, buf.data() + i + es);
    if (s.type == StorageType::int8) {
      auto* d = reinterpret_cast<int32_t*>(dst);
      for (uint64_t i = 0; i < s.numel; ++i) d[i] = static_cast<int8_t>(buf[i]);
    } else if (s.type == StorageType::int16) {
      auto* d = reinterpret_cast<int32_t*>(dst);
      for (uint64_t i = 0; i < s.numel; ++i) {
        int16_t v;
        std::memcpy(&v, buf.data() + 2 * i, 2);
        d[i] = v;
      }
    } else if (bytes) {
      std::memcpy(dst, buf.data(), bytes);
    }
  }
  if (s.type == StorageType::boolean)  // PyTorch reads any non-zero byte as true
    for (uint64_t i = 0; i < bytes; ++i) dst[i] = dst[i] != 0;
}

Value load_zip(const zip::Source& src, const LoadOptions& opt) {
  zip::Reader z(src);
  const std::string& what = src.what();
  if (z.entries().empty()) throw IOError(what + ": the archive is empty (not a torch.save file)");
  // The archive's folder is that of its first entry, as PyTorch decides.
  const std::string& first = z.entries()[0].name;
  size_t slash = first.find('/');
  if (slash == std::string::npos)
    throw IOError(what + ": the archive's entries are not in a folder ('" + printable(first) +
                  "'): not a torch.save file");
  const std::string prefix = first.substr(0, slash + 1);
  const zip::Entry* pkl = z.find(prefix + "data.pkl");
  if (!pkl)
    throw IOError(what + ": no '" + printable(prefix) + "data.pkl' in the archive (not a torch.save file" +
                  (z.find(prefix + "constants.pkl") ? "; a TorchScript archive from torch.jit.save?" : "") + ")");
  bool swap = false;
  if (const zip::Entry* bo = z.find(prefix + "byteorder")) {
    std::vector<char> b = z.read(*bo, 16);
    std::string order(b.begin(), b.end());
    if (order != "little" && order != "big")
      throw IOError(what + ": its byteorder record says '" + printable(order) + "', not 'little' or 'big'");
    swap = (order == "big") != (std::endian::native == std::endian::big);
  }
  // A stored pickle is parsed where it lies (in memory: no copy) and its CRC checked after, or when
  // parsing fails (corruption is then what the error says); a deflated one is inflated first.
  Hooks hooks(&z, prefix, 0, opt);
  Value root;
  if (pkl->method == 0) {
    if (pkl->size > opt.max_pickle_bytes)
      throw IOError(internal::str(what, ": entry '", printable(pkl->name), "' is ", pkl->size,
                                  " bytes, more than the limit of ", opt.max_pickle_bytes,
                                  " (LoadOptions::max_pickle_bytes)"));
    std::shared_ptr<const char> bytes = z.view(*pkl);
    try {
      root = internal::unpickle(bytes.get(), pkl->size, hooks, opt, what + ": " + printable(pkl->name));
    } catch (...) {
      z.check_crc(*pkl, bytes.get());
      throw;
    }
    z.check_crc(*pkl, bytes.get());
  } else {
    std::vector<char> bytes = z.read(*pkl, opt.max_pickle_bytes);
    root = internal::unpickle(bytes.data(), bytes.size(), hooks, opt, what + ": " + printable(pkl->name));
  }
  // The storages, in file order.
  std::vector<Storage*> order;
  for (Storage& s : hooks.storages) order.push_back(&s);
  std::sort(order.begin(), order.end(),
            [](const Storage* a, const Storage* b) { return a->entry->header_offset < b->entry->header_offset; });
  for (Storage* s : order) fill_storage(*s, swap, [&](void* dst) { z.read_into(*s->entry, dst, opt.check_crc); });
  return root;
}

// The legacy stream: pickles of the magic number, the protocol version and the system info, the
// object's pickle, the pickle of the storage keys, then each storage as a little-endian int64 count
// and its little-endian bytes (PyTorch wrote storages little-endian whatever the machine).
Value parse_legacy(const zip::Source& src, const std::vector<char>& head, const LoadOptions& opt, bool* ran_out) {
  const std::string& what = src.what();
  auto bad = [&](const std::string& msg) { return IOError(what + ": " + msg); };
  const auto* p = reinterpret_cast<const unsigned char*>(head.data());
  size_t pos = 0;
  // 1. The magic number 0x1950a86a20f9469cfc6c as a pickled LONG1 (too large for the unpickler's int64).
  static const unsigned char kMagic[10] = {0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
  if (head.size() < 2 || p[0] != 0x80) throw bad("not a PyTorch file");
  pos = 2;
  if (head.size() > pos && p[pos] == 0x95) pos += 9;  // FRAME (protocol 4)
  if (head.size() < pos + 13 || p[pos] != 0x8a || p[pos + 1] != 10 || std::memcmp(p + pos + 2, kMagic, 10) != 0 ||
      p[pos + 12] != '.')
    throw bad("not a PyTorch file (a pickle, but not torch.save's legacy format: no magic number)");
  pos += 13;
  PlainHooks plain;
  auto next = [&](internal::UnpickleHooks& h, const char* part) {
    size_t end = 0;
    Value v = internal::unpickle(head.data() + pos, head.size() - pos, h, opt, what + ": " + part, &end, ran_out);
    pos += end;
    return v;
  };
  // 2. The protocol version.
  Value version = next(plain, "legacy protocol version");
  if (version.kind() != Kind::integer || version.to_int() != 1001)
    throw bad("unsupported legacy protocol version " + printable(version.repr(200)) + " (expected 1001)");
  // 3. System info: {'protocol_version': 1001, 'little_endian': True, 'type_sizes': {...}}; the
  // storages are little-endian whatever it says.
  Value info = next(plain, "legacy system info");
  if (!info.is_dict()) throw bad("malformed legacy system info");
  // 4. The object.
  Hooks hooks(nullptr, "", src.size(), opt);
  Value root = next(hooks, "legacy pickle");
  // 5. The storage keys, in the order their data follows.
  Value keys = next(plain, "legacy storage keys");
  if (!keys.is_list()) throw bad("malformed legacy storage key list");
  uint64_t off = pos;
  std::unordered_set<std::string> seen;
  for (const Value& k : keys.items()) {
    std::string key = k.is_string() ? k.to_string() : k.kind() == Kind::integer ? std::to_string(k.to_int()) : "";
    auto it = hooks.by_key.find(key);
    if (it == hooks.by_key.end()) throw bad("storage key '" + printable(key) + "' is listed but no tensor uses it");
    if (!seen.insert(key).second) throw bad("storage key '" + printable(key) + "' is listed twice");
    Storage& s = hooks.storages[it->second];
    unsigned char n8[8];
    src.read(n8, 8, off, "reading the size of storage '" + printable(key) + "'");
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | n8[i];
    if (n != s.numel)
      throw bad(internal::str("storage '", printable(key), "' holds ", n, " elements in the file but the pickle says ",
                              s.numel));
    off += 8;
    const uint64_t bytes = s.numel * file_element_size(s.type);
    fill_storage(s, std::endian::native == std::endian::big,
                 [&](void* dst) { src.read(dst, bytes, off, "reading storage '" + printable(key) + "'"); });
    off += bytes;
  }
  if (seen.size() != hooks.storages.size())
    throw bad(internal::str("the pickle uses ", hooks.storages.size(), " storages but the file holds ", seen.size()));
  return root;
}

Value load_legacy(const zip::Source& src, const LoadOptions& opt) {
  // The pickles come first and are small: read a part of the file, more when they do not fit in it.
  const uint64_t limit = std::min<uint64_t>(src.size(), opt.max_pickle_bytes);
  uint64_t have = std::min<uint64_t>(limit, uint64_t(1) << 20);
  while (true) {
    std::vector<char> head(have);
    src.read(head.data(), have, 0, "reading the pickles");
    bool ran_out = false;
    try {
      return parse_legacy(src, head, opt, &ran_out);
    } catch (const IOError&) {
      if (!ran_out || have == limit) throw;
    }
    have = std::min(limit, have * 8);
  }
}

Value load_source(const zip::Source& src, const LoadOptions& options) {
  LoadOptions opt = options;
  if (opt.max_value_bytes == 0)  // 64 MiB + 2 x the file's size
    opt.max_value_bytes = (uint64_t(64) << 20) + std::min<uint64_t>(src.size(), uint64_t(1) << 60) * 2;
  unsigned char magic[4] = {};
  if (src.size() >= 4) src.read(magic, 4, 0, "reading its first bytes");
  if (magic[0] == 'P' && magic[1] == 'K' && ((magic[2] == 3 && magic[3] == 4) || (magic[2] == 5 && magic[3] == 6)))
    return load_zip(src, opt);
  if (src.size() > 262) {
    char ustar[5];
    src.read(ustar, 5, 257, "reading its header");
    if (std::memcmp(ustar, "ustar", 5) == 0)
      throw IOError(src.what() + ": the tar format of PyTorch < 0.1.10 is not supported (re-save it with torch.save)");
  }
  if (magic[0] == 0x80) return load_legacy(src, opt);
  throw IOError(src.what() + ": not a PyTorch file (neither a zip archive nor a pickle stream)");
}

// ---- saving ---------------------------------------------------------------------------------------

// The storages a value's tensors view: one per (nabla storage, file type), with the span of elements
// its tensors cover, saved as data/<key>.
struct SaveGroup {
  std::string key;
  StorageType type;
  Tensor any;  // a tensor viewing it
  int64_t begin = INT64_MAX, end = 0;
};

struct SavePlan {
  std::map<std::pair<const StorageImpl*, int>, size_t> index;
  std::vector<SaveGroup> groups;

  SaveGroup& group_of(const Value& v) {
    const Tensor& t = v.to_tensor();
    auto k = std::make_pair(t.impl()->storage.get(), static_cast<int>(v.storage_type()));
    auto [it, fresh] = index.emplace(k, groups.size());
    if (fresh) groups.push_back(SaveGroup{std::to_string(groups.size()), v.storage_type(), t});
    return groups[it->second];
  }

  explicit SavePlan(const Value& root) {
    std::vector<const Value*> todo{&root};
    std::unordered_set<const Value::Node*> seen;
    while (!todo.empty()) {
      const Value* v = todo.back();
      todo.pop_back();
      if (!v->node() || !seen.insert(v->node().get()).second) continue;
      switch (v->kind()) {
        case Kind::tensor: {
          const Tensor& t = v->to_tensor();
          SaveGroup& g = group_of(*v);
          if (t.numel() > 0) {
            int64_t last = t.storage_offset();
            for (int64_t d = 0; d < t.dim(); ++d) last += (t.sizes()[d] - 1) * t.strides()[d];
            g.begin = std::min(g.begin, t.storage_offset());
            g.end = std::max(g.end, last + 1);
          }
          break;
        }
        case Kind::list:
        case Kind::tuple:
          for (const Value& x : v->items()) todo.push_back(&x);
          break;
        case Kind::dict:
          for (const auto& [k, x] : v->entries()) {
            todo.push_back(&k);
            todo.push_back(&x);
          }
          if (v->node()->attributes().node()) todo.push_back(&v->node()->attributes());
          break;
        default: break;
      }
    }
    for (SaveGroup& g : groups)
      if (g.begin > g.end) g.begin = g.end = 0;  // only empty tensors
  }
};

void write_tensor(internal::Pickler& pk, SavePlan& plan, const Value& v) {
  const Tensor& t = v.to_tensor();
  SaveGroup& g = plan.group_of(v);
  const bool param = v.is_parameter();
  if (param) pk.global("torch._utils", "_rebuild_parameter");
  pk.global("torch._utils", "_rebuild_tensor_v2");
  pk.op('(');
  {  // the storage's persistent id
    pk.op('(');
    pk.string("storage");
    pk.global("torch", kStorageClass[static_cast<int>(g.type)]);
    pk.string(g.key);
    pk.string("cpu");
    pk.integer(g.end - g.begin);
    pk.tuple_from_mark();
    pk.op('Q');  // BINPERSID
  }
  pk.integer(t.numel() == 0 ? 0 : t.storage_offset() - g.begin);
  std::vector<Value> sizes, strides;
  for (int64_t d = 0; d < t.dim(); ++d) {
    sizes.emplace_back(t.sizes()[d]);
    strides.emplace_back(t.strides()[d]);
  }
  pk.value(Value::tuple(std::move(sizes)));
  pk.value(Value::tuple(std::move(strides)));
  pk.boolean(!param && t.requires_grad());
  pk.value(Value::dict({}, true));  // backward hooks
  pk.tuple_from_mark();
  pk.op('R');
  if (param) {
    pk.boolean(t.requires_grad());
    pk.value(Value::dict({}, true));
    pk.op('\x87');  // TUPLE3
    pk.op('R');
  }
}

// The bytes of a storage span as the file stores them (native order, int8/int16 narrowed).
const void* storage_bytes(const SaveGroup& g, std::vector<char>& scratch, Tensor& host) {
  const int64_t n = g.end - g.begin;
  if (n == 0) return nullptr;
  autograd::NoGradGuard ng;
  Tensor span = nabla::internal::make_view(g.any, {n}, {1}, g.begin);
  host = span.device().is_cpu() ? span : span.to(kCPU);
  if (g.type != StorageType::int8 && g.type != StorageType::int16) return host.data_ptr();
  const int32_t* src = host.data_ptr<int32_t>();
  const bool i8 = g.type == StorageType::int8;
  scratch.resize(static_cast<size_t>(n) * (i8 ? 1 : 2));
  for (int64_t i = 0; i < n; ++i) {
    int32_t x = src[i];
    NABLA_CHECK(ValueError, i8 ? (x >= -128 && x <= 127) : (x >= -32768 && x <= 32767),
                "torch_io::save: a tensor saved as ", storage_type_name(g.type), " holds ", x, ", which does not fit");
    if (i8) {
      scratch[static_cast<size_t>(i)] = static_cast<char>(static_cast<int8_t>(x));
    } else {
      int16_t y = static_cast<int16_t>(x);
      std::memcpy(scratch.data() + 2 * i, &y, 2);
    }
  }
  return scratch.data();
}

std::string archive_name_for(const std::string& path, const SaveOptions& opt) {
  std::string name = opt.archive_name;
  if (name.empty()) {  // as PyTorch: the file's name without directory and extension
    name = path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
    if (size_t dot = name.rfind('.'); dot != std::string::npos && dot > 0) name.resize(dot);
  }
  for (char& c : name)
    if (c == '/' || c == '\\' || static_cast<unsigned char>(c) < 0x20) c = '_';
  return name.empty() ? "archive" : name;
}

void write_archive(std::FILE* f, const std::string& path, const Value& value, const SaveOptions& opt,
                   const std::string& archive) {
  SavePlan plan(value);
  internal::Pickler pk([&](internal::Pickler& p, const Value& v) { write_tensor(p, plan, v); });
  pk.proto();
  pk.value(value);
  pk.stop();
  const std::string prefix = archive + "/";
  zip::Writer w(f, path, opt.force_zip64);
  w.add(prefix + "data.pkl", pk.bytes().data(), pk.bytes().size());
  const std::string order = std::endian::native == std::endian::little ? "little" : "big";
  w.add(prefix + "byteorder", order.data(), order.size());
  for (const SaveGroup& g : plan.groups) {
    std::vector<char> scratch;
    Tensor host;
    const void* data = storage_bytes(g, scratch, host);
    w.add(prefix + "data/" + g.key, data, static_cast<size_t>(g.end - g.begin) * file_element_size(g.type));
  }
  const std::string version = "3\n";
  w.add(prefix + "version", version.data(), version.size());
  w.finish();
}

}  // namespace

Value load(const std::string& path, const LoadOptions& options) {
  zip::Source src(path);
  return load_source(src, options);
}

Value load_bytes(const char* data, size_t size, const std::string& what, const LoadOptions& options) {
  zip::Source src(data, size, what);
  return load_source(src, options);
}

void save(const std::string& path, const Value& value, const SaveOptions& options) {
  const std::string archive = archive_name_for(path, options);
  io::atomic_write(path, [&](std::FILE* f) { write_archive(f, path, value, options, archive); });
}

std::vector<char> serialize(const Value& value, const SaveOptions& options) {
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* f = ::open_memstream(&buf, &len);
  NABLA_CHECK(IOError, f != nullptr, "torch_io::serialize: cannot open a memory stream");
  try {
    write_archive(f, "<memory>", value, options, options.archive_name.empty() ? "archive" : options.archive_name);
  } catch (...) {
    std::fclose(f);
    std::free(buf);
    throw;
  }
  std::fclose(f);
  std::vector<char> out(buf, buf + len);
  std::free(buf);
  return out;
}

}  // namespace nabla::torch_io
