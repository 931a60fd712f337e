// The restricted unpickler and the protocol-2 pickler of nn/torch_pickle.h.
// Opcodes as CPython's Lib/pickle.py defines them; the ones a tensor checkpoint never needs and that
// would create arbitrary objects (INST, OBJ, EXT*, NEWOBJ_EX, out-of-band buffers) are refused.
#include "io/torch_pickle.h"

#include <bit>
#include <cmath>
#include <cstring>

namespace nabla::torch_io::internal {

namespace {

// Opcodes (pickle.py).
enum Op : unsigned char {
  MARK = '(',
  STOP = '.',
  POP = '0',
  POP_MARK = '1',
  DUP = '2',
  FLOAT = 'F',
  INT = 'I',
  BININT = 'J',
  BININT1 = 'K',
  LONG = 'L',
  BININT2 = 'M',
  NONE = 'N',
  PERSID = 'P',
  BINPERSID = 'Q',
  REDUCE = 'R',
  STRING = 'S',
  BINSTRING = 'T',
  SHORT_BINSTRING = 'U',
  UNICODE = 'V',
  BINUNICODE = 'X',
  APPEND = 'a',
  BUILD = 'b',
  GLOBAL = 'c',
  DICT = 'd',
  EMPTY_DICT = '}',
  APPENDS = 'e',
  GET = 'g',
  BINGET = 'h',
  INST = 'i',
  LONG_BINGET = 'j',
  LIST = 'l',
  EMPTY_LIST = ']',
  OBJ = 'o',
  PUT = 'p',
  BINPUT = 'q',
  LONG_BINPUT = 'r',
  SETITEM = 's',
  TUPLE = 't',
  EMPTY_TUPLE = ')',
  SETITEMS = 'u',
  BINFLOAT = 'G',
  PROTO = 0x80,
  NEWOBJ = 0x81,
  EXT1 = 0x82,
  EXT2 = 0x83,
  EXT4 = 0x84,
  TUPLE1 = 0x85,
  TUPLE2 = 0x86,
  TUPLE3 = 0x87,
  NEWTRUE = 0x88,
  NEWFALSE = 0x89,
  LONG1 = 0x8a,
  LONG4 = 0x8b,
  BINBYTES = 'B',
  SHORT_BINBYTES = 'C',
  SHORT_BINUNICODE = 0x8c,
  BINUNICODE8 = 0x8d,
  BINBYTES8 = 0x8e,
  EMPTY_SET = 0x8f,
  ADDITEMS = 0x90,
  FROZENSET = 0x91,
  NEWOBJ_EX = 0x92,
  STACK_GLOBAL = 0x93,
  MEMOIZE = 0x94,
  FRAME = 0x95,
  BYTEARRAY8 = 0x96,
  NEXT_BUFFER = 0x97,
  READONLY_BUFFER = 0x98,
};

std::string op_name(unsigned char c) {
  if (c >= 0x21 && c < 0x7f) return internal::str("'", static_cast<char>(c), "'");
  char buf[8];
  std::snprintf(buf, sizeof(buf), "0x%02x", c);
  return buf;
}

class Machine {
 public:
  Machine(const char* data, size_t size, UnpickleHooks& hooks, const LoadOptions& limits, const std::string& what,
          bool* ran_out)
      : p_(reinterpret_cast<const unsigned char*>(data)),
        size_(size),
        hooks_(hooks),
        limits_(limits),
        what_(what),
        ran_out_(ran_out) {}

  Value run(size_t* end);

 private:
  // One opcode of each family, run by run()'s dispatch; false when op_ is not of the family.
  bool scalar_op();
  bool container_op();
  bool object_op();

  [[noreturn]] void fail(const std::string& msg) const {
    throw IOError(internal::str(what_, ": ", msg, " (opcode ", op_name(op_), " at byte ", op_pos_, ")"));
  }
  void ran_out() const {
    if (ran_out_) *ran_out_ = true;
  }
  void need(uint64_t n) const {
    if (size_ - pos_ < n) {
      ran_out();
      fail(
          internal::str("the pickle ends early: ", n, " more bytes needed, ", size_ - pos_, " left (truncated file?)"));
    }
  }
  uint64_t le(size_t n) {
    need(n);
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;) v = (v << 8) | p_[pos_ + i];
    pos_ += n;
    return v;
  }
  std::string bytes(uint64_t n) {
    need(n);
    charge(kNodeBytes + (n > 15 ? n + 1 : 0));  // the string's node and its characters
    std::string s(reinterpret_cast<const char*>(p_ + pos_), static_cast<size_t>(n));
    pos_ += n;
    return s;
  }
  std::string line() {
    const void* nl = std::memchr(p_ + pos_, '\n', std::min<size_t>(size_ - pos_, 4096));
    if (!nl) {
      if (size_ - pos_ < 4096) {
        ran_out();
        fail("the pickle ends early, inside a text argument (truncated file?)");
      }
      fail("a text argument has no end of line within 4096 bytes");
    }
    size_t n = static_cast<const unsigned char*>(nl) - (p_ + pos_);
    std::string s(reinterpret_cast<const char*>(p_ + pos_), n);
    pos_ += n + 1;
    return s;
  }
  int64_t decimal(const std::string& s) {
    std::string t = s;
    if (!t.empty() && t.back() == 'L') t.pop_back();
    if (t.empty() || t.size() > 20) fail("bad integer '" + s + "'");
    size_t i = (t[0] == '-' || t[0] == '+') ? 1 : 0;
    if (i == t.size()) fail("bad integer '" + s + "'");
    for (size_t k = i; k < t.size(); ++k)
      if (t[k] < '0' || t[k] > '9') fail("bad integer '" + s + "'");
    errno = 0;
    long long v = std::strtoll(t.c_str(), nullptr, 10);
    if (errno == ERANGE) fail("integer " + s + " does not fit in 64 bits");
    return v;
  }
  // A little-endian two's-complement integer of n bytes (LONG1, LONG4).
  int64_t long_bytes(uint64_t n) {
    need(n);
    const unsigned char* b = p_ + pos_;
    pos_ += n;
    if (n == 0) return 0;
    bool negative = b[n - 1] & 0x80;
    for (uint64_t i = 8; i < n; ++i)
      if (b[i] != (negative ? 0xff : 0x00)) fail(internal::str("a ", n, "-byte integer does not fit in 64 bits"));
    if (n > 8 && ((b[7] & 0x80) != 0) != negative) fail("an integer does not fit in 64 bits");
    uint64_t v = negative ? ~uint64_t(0) : 0;
    for (uint64_t i = std::min<uint64_t>(n, 8); i-- > 0;) v = (v << 8) | b[i];
    if (n < 8 && negative) v |= ~uint64_t(0) << (8 * n);
    return static_cast<int64_t>(v);
  }

  // The memory the values take, as they are created (an upper bound: what a pickle discards is
  // not given back), plus the stack as it is now, against LoadOptions::max_value_bytes.
  static constexpr uint64_t kNodeBytes =
      sizeof(Value::Node) + 32;  // with shared_ptr's control block and malloc's header
  static constexpr uint64_t kTensorBytes = 256, kStorageBytes = 384;  // a TensorImpl (and a StorageImpl)
  void charge(uint64_t n) {
    used_ += n;
    check_memory();
  }
  void check_memory(uint64_t more = 0) {
    if (used_ + stack_.capacity() * sizeof(Value) + more > limits_.max_value_bytes)
      fail(internal::str(
          "the pickle's values take more than ", limits_.max_value_bytes,
          " bytes of memory (LoadOptions::max_value_bytes; by default 64 MiB plus twice the file's size)"));
  }

  size_t base() const { return marks_.empty() ? 0 : marks_.back(); }
  void push(Value v) {
    if (++pushed_ > limits_.max_objects)
      fail(internal::str("the pickle creates more than ", limits_.max_objects, " values (LoadOptions::max_objects)"));
    if (stack_.size() == stack_.capacity()) {
      // The stack grows by half (not doubling): while it moves, the old and the new one both exist.
      const size_t grown = std::max<size_t>(64, stack_.capacity() + stack_.capacity() / 2);
      check_memory(grown * sizeof(Value));
      stack_.reserve(grown);
    }
    stack_.push_back(std::move(v));
  }
  Value pop() {
    if (stack_.size() <= base()) fail("the pickle pops from an empty stack");
    Value v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  Value& top() {
    if (stack_.size() <= base()) fail("the pickle reads an empty stack");
    return stack_.back();
  }
  std::vector<Value> pop_mark() {
    if (marks_.empty()) fail("the pickle closes a MARK it never opened");
    size_t b = marks_.back();
    marks_.pop_back();
    std::vector<Value> items(std::make_move_iterator(stack_.begin() + static_cast<std::ptrdiff_t>(b)),
                             std::make_move_iterator(stack_.end()));
    stack_.resize(b);
    return items;
  }
  Value make(Kind kind) {
    charge(kNodeBytes);
    return Value(kind, std::make_shared<Value::Node>(kind));
  }

  // `child` becomes part of `parent`: it is sealed, and the parent's depth and size follow.
  void adopt(Value::Node& parent, const Value& child) {
    uint32_t d = 1;
    uint64_t e = 1;
    if (const auto& n = child.node()) {
      if (n.get() == &parent) fail("a value contains itself (recursive structures are not supported)");
      n->sealed = true;
      d = n->depth;
      e = n->expanded;
    }
    if (d + 1 > parent.depth) {
      parent.depth = d + 1;
      if (parent.depth > static_cast<uint32_t>(limits_.max_depth))
        fail(internal::str("values nested more than ", limits_.max_depth, " levels deep (LoadOptions::max_depth)"));
    }
    parent.expanded += e;
    if (parent.expanded > limits_.max_objects)
      fail(internal::str("the pickle's values expand to more than ", limits_.max_objects,
                         " values once shared ones are counted each time (LoadOptions::max_objects)"));
  }
  Value::Node& mutable_container(Value& v, Kind kind, const char* what) {
    if (v.kind() != kind) fail(internal::str(what, " needs a ", kind_name(kind), " but finds a ", kind_name(v.kind())));
    Value::Node& n = *v.node();
    if (n.sealed)
      fail(internal::str(what, " changes a ", kind_name(kind),
                         " that is already part of another value (recursive structures are not supported)"));
    return n;
  }
  Value tuple(std::vector<Value> items) {
    Value t = make(Kind::tuple);
    charge(items.size() * sizeof(Value));
    for (const Value& v : items) adopt(*t.node(), v);
    t.node()->items = std::move(items);
    return t;
  }
  void set_item(Value& dict, Value key, Value value) {
    Value::Node& d = mutable_container(dict, Kind::dict, "SETITEM");
    adopt(d, key);
    adopt(d, value);
    // What the entries' vector and the index grow by.
    const auto bytes = [&] {
      uint64_t n = d.entries.capacity() * sizeof(std::pair<Value, Value>);
      if (d.extra) n += sizeof(DictExtra) + 32 + d.extra->hashes.capacity() * 8 + d.extra->slots.capacity() * 4;
      return n;
    };
    const uint64_t before = bytes();
    try {
      dict_set(d, std::move(key), std::move(value));
    } catch (const ValueError& e) { fail(e.what()); }
    charge(bytes() - before);
  }
  void append(Value& list, Value item) {
    Value::Node& l = mutable_container(list, Kind::list, "APPEND");
    adopt(l, item);
    if (l.items.size() == l.items.capacity()) reserve(l, 1);
    l.items.push_back(std::move(item));
  }
  // Room for `more` items in a list (at least half again what it holds), charged before it is taken.
  void reserve(Value::Node& l, size_t more) {
    const size_t want = l.items.size() + more;
    if (want <= l.items.capacity()) return;
    const size_t grown = std::max(want, l.items.size() + l.items.size() / 2);
    charge((grown - l.items.capacity()) * sizeof(Value));
    l.items.reserve(grown);
  }
  // The memo: a vector while the indices come in order (as picklers write them), a map for the
  // others.
  size_t memo_size() const { return memo_count_; }
  void memo_put(uint64_t index) {
    Value v = top();
    if (index < memo_.size()) {
      memo_[index] = std::move(v);
      return;
    }
    if (memo_count_ >= limits_.max_memo && !sparse_.count(index))
      fail(internal::str("the pickle memoizes more than ", limits_.max_memo, " values (LoadOptions::max_memo)"));
    if (index == memo_.size()) {
      const size_t capacity = memo_.capacity();
      memo_.push_back(std::move(v));
      charge((memo_.capacity() - capacity) * sizeof(Value));
      ++memo_count_;
      return;
    }
    auto [it, fresh] = sparse_.insert_or_assign(index, std::move(v));
    if (fresh) {
      charge(sizeof(Value) + 48);  // a node of the map and its bucket
      ++memo_count_;
    }
  }
  void memo_get(uint64_t index) {
    if (index < memo_.size()) return push(memo_[index]);
    auto it = sparse_.find(index);
    if (it == sparse_.end()) fail(internal::str("memo index ", index, " was never stored (", memo_size(), " entries)"));
    push(it->second);
  }
  // Runs a hook; what it refuses becomes an error at this opcode.
  template <class F>
  auto hook(F&& f) {
    try {
      return f();
    } catch (const Refused& e) { fail(e.what()); } catch (const IOError&) {
      throw;
    } catch (const Error& e) { fail(e.what()); }
  }
  void global(const std::string& module, const std::string& name) {
    push(hook([&] { return hooks_.find_global(module, name); }));
    charge(kNodeBytes + module.size() + name.size() + 2);
  }

  const unsigned char* p_;
  size_t size_, pos_ = 0, op_pos_ = 0;
  unsigned char op_ = 0;
  UnpickleHooks& hooks_;
  const LoadOptions& limits_;
  const std::string& what_;
  std::vector<Value> stack_;
  std::vector<size_t> marks_;
  std::vector<Value> memo_;
  std::unordered_map<uint64_t, Value> sparse_;
  size_t memo_count_ = 0;
  uint64_t pushed_ = 0, used_ = 0;
  bool* ran_out_;
};

// Numbers, strings and bytes: true when op_ is one of them (and it ran).
bool Machine::scalar_op() {
  switch (op_) {
    // ---- scalars ----
    case NONE: push(Value()); return true;
    case NEWTRUE: push(Value(true)); return true;
    case NEWFALSE: push(Value(false)); return true;
    case BININT: push(Value(static_cast<int64_t>(static_cast<int32_t>(le(4))))); return true;
    case BININT1: push(Value(static_cast<int64_t>(le(1)))); return true;
    case BININT2: push(Value(static_cast<int64_t>(le(2)))); return true;
    case LONG1: push(Value(long_bytes(le(1)))); return true;
    case LONG4: {
      uint64_t n = le(4);
      if (n > 0x7fffffff) fail("negative LONG4 length");
      push(Value(long_bytes(n)));
      return true;
    }
    case INT: {
      std::string s = line();
      if (s == "01") push(Value(true));
      else if (s == "00") push(Value(false));
      else push(Value(decimal(s)));
      return true;
    }
    case LONG: push(Value(decimal(line()))); return true;
    case FLOAT: {
      std::string s = line();
      char* e = nullptr;
      double d = std::strtod(s.c_str(), &e);
      if (s.empty() || *e != '\0') fail("bad float '" + s + "'");
      push(Value(d));
      return true;
    }
    case BINFLOAT: {
      need(8);
      uint64_t bits = 0;
      for (int i = 0; i < 8; ++i) bits = (bits << 8) | p_[pos_ + i];  // big-endian
      pos_ += 8;
      push(Value(std::bit_cast<double>(bits)));
      return true;
    }

    // ---- strings and bytes (Python 2's str, as torch.load: text) ----
    case SHORT_BINUNICODE:
    case SHORT_BINSTRING: push(Value(bytes(le(1)))); return true;
    case BINUNICODE:
    case BINSTRING: push(Value(bytes(le(4)))); return true;
    case BINUNICODE8: push(Value(bytes(le(8)))); return true;
    case SHORT_BINBYTES: push(Value::bytes(bytes(le(1)))); return true;
    case BINBYTES: push(Value::bytes(bytes(le(4)))); return true;
    case BINBYTES8:
    case BYTEARRAY8: push(Value::bytes(bytes(le(8)))); return true;
    case STRING:
    case UNICODE: fail("protocol-0 text strings are not supported (torch.save writes protocol 2)");

    default: return false;
  }
}

// Lists, tuples and dicts: true when op_ is one of them.
bool Machine::container_op() {
  switch (op_) {
    // ---- containers ----
    case EMPTY_LIST: push(make(Kind::list)); return true;
    case EMPTY_DICT: push(make(Kind::dict)); return true;
    case EMPTY_TUPLE: push(make(Kind::tuple)); return true;
    case LIST: {
      std::vector<Value> items = pop_mark();
      Value l = make(Kind::list);
      reserve(*l.node(), items.size());
      for (Value& v : items) append(l, std::move(v));
      push(std::move(l));
      return true;
    }
    case TUPLE: push(tuple(pop_mark())); return true;
    case TUPLE1: {
      Value a = pop();
      push(tuple({std::move(a)}));
      return true;
    }
    case TUPLE2: {
      Value b = pop(), a = pop();
      push(tuple({std::move(a), std::move(b)}));
      return true;
    }
    case TUPLE3: {
      Value c = pop(), b = pop(), a = pop();
      push(tuple({std::move(a), std::move(b), std::move(c)}));
      return true;
    }
    case DICT: {
      std::vector<Value> items = pop_mark();
      if (items.size() % 2) fail("DICT with an odd number of items");
      Value d = make(Kind::dict);
      for (size_t i = 0; i < items.size(); i += 2) set_item(d, std::move(items[i]), std::move(items[i + 1]));
      push(std::move(d));
      return true;
    }
    case APPEND: {
      Value v = pop();
      append(top(), std::move(v));
      return true;
    }
    case APPENDS: {
      std::vector<Value> items = pop_mark();
      Value& l = top();
      if (l.kind() == Kind::list && !l.node()->sealed) reserve(*l.node(), items.size());
      for (Value& v : items) append(l, std::move(v));
      return true;
    }
    case SETITEM: {
      Value v = pop(), k = pop();
      set_item(top(), std::move(k), std::move(v));
      return true;
    }
    case SETITEMS: {
      std::vector<Value> items = pop_mark();
      if (items.size() % 2) fail("SETITEMS with an odd number of items");
      Value& d = top();
      for (size_t i = 0; i < items.size(); i += 2) set_item(d, std::move(items[i]), std::move(items[i + 1]));
      return true;
    }
    case EMPTY_SET:
    case ADDITEMS:
    case FROZENSET: fail("Python sets are not supported in tensor checkpoints");

    default: return false;
  }
}

// The memo, and what the hooks decide (globals, calls, persistent ids), and the opcodes refused outright.
bool Machine::object_op() {
  switch (op_) {
    // ---- memo ----
    case PUT: memo_put(static_cast<uint64_t>(decimal(line()))); return true;
    case BINPUT: memo_put(le(1)); return true;
    case LONG_BINPUT: memo_put(le(4)); return true;
    case MEMOIZE: memo_put(memo_size()); return true;
    case GET: memo_get(static_cast<uint64_t>(decimal(line()))); return true;
    case BINGET: memo_get(le(1)); return true;
    case LONG_BINGET: memo_get(le(4)); return true;

    // ---- what the hooks decide ----
    case GLOBAL: {
      std::string module = line();
      std::string name = line();
      global(module, name);
      return true;
    }
    case STACK_GLOBAL: {
      Value name = pop(), module = pop();
      if (!name.is_string() || !module.is_string()) fail("STACK_GLOBAL needs two strings");
      global(module.to_string(), name.to_string());
      return true;
    }
    case REDUCE:
    case NEWOBJ: {
      Value args = pop();
      Value callable = pop();
      if (!args.is_tuple())
        fail(internal::str("the arguments of a call are a ", kind_name(args.kind()), ", not a tuple"));
      push(hook([&] { return hooks_.call(callable, args, op_ == NEWOBJ); }));
      charge(kNodeBytes + (stack_.back().is_tensor() ? kTensorBytes : 0));
      return true;
    }
    case BUILD: {
      Value state = pop();
      Value& obj = top();
      hook([&] { hooks_.build(obj, state); });
      return true;
    }
    case BINPERSID: {
      Value pid = pop();
      push(hook([&] { return hooks_.persistent_load(pid); }));
      charge(kNodeBytes + kStorageBytes);
      return true;
    }
    case PERSID: fail("text persistent ids are not supported (torch.save writes binary ones)");
    case INST:
    case OBJ:
    case NEWOBJ_EX:
    case EXT1:
    case EXT2:
    case EXT4: fail("this opcode creates arbitrary objects and is not allowed");
    case NEXT_BUFFER:
    case READONLY_BUFFER: fail("out-of-band buffers are not supported");
    default: return false;
  }
}

Value Machine::run(size_t* end) {
  while (true) {
    op_pos_ = pos_;
    if (pos_ >= size_) {
      ran_out();
      fail("the pickle ends without STOP (truncated file?)");
    }
    op_ = p_[pos_++];
    switch (op_) {
      case PROTO: {
        uint64_t v = le(1);
        if (v > 5) fail(internal::str("unknown pickle protocol ", v));
        break;
      }
      case FRAME: need(le(8)); break;  // a length hint for buffered readers; the data follows as usual
      case STOP: {
        Value v = pop();
        if (end) *end = pos_;
        return v;
      }
      case MARK:
        if (marks_.size() >= static_cast<size_t>(limits_.max_depth))
          fail(internal::str("MARKs nested more than ", limits_.max_depth, " levels deep (LoadOptions::max_depth)"));
        marks_.push_back(stack_.size());
        break;
      case POP: pop(); break;
      case POP_MARK: pop_mark(); break;
      case DUP: push(top()); break;

      default:
        if (!scalar_op() && !container_op() && !object_op()) fail("unknown opcode (corrupt pickle?)");
    }
  }
}

}  // namespace

Value unpickle(const char* data, size_t size, UnpickleHooks& hooks, const LoadOptions& limits, const std::string& what,
               size_t* end, bool* ran_out) {
  Machine m(data, size, hooks, limits, what, ran_out);
  return m.run(end);
}

// ---- pickler --------------------------------------------------------------------------------------

Pickler::Pickler(TensorWriter tensor_writer, int max_depth)
    : tensor_writer_(std::move(tensor_writer)), max_depth_(max_depth) {}

void Pickler::proto() {
  out_.push_back(static_cast<char>(PROTO));
  out_.push_back(2);
}

void Pickler::stop() { out_.push_back(STOP); }

void Pickler::global(std::string_view module, std::string_view name) {
  out_.push_back(GLOBAL);
  out_.append(module);
  out_.push_back('\n');
  out_.append(name);
  out_.push_back('\n');
}

void Pickler::integer(int64_t v) {
  auto le = [&](uint64_t x, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<char>((x >> (8 * i)) & 0xff));
  };
  if (v >= 0 && v < 256) {
    out_.push_back(BININT1);
    le(static_cast<uint64_t>(v), 1);
  } else if (v >= 0 && v < 65536) {
    out_.push_back(BININT2);
    le(static_cast<uint64_t>(v), 2);
  } else if (v >= INT32_MIN && v <= INT32_MAX) {
    out_.push_back(BININT);
    le(static_cast<uint64_t>(v), 4);
  } else {  // LONG1: the shortest two's complement
    int n = 8;
    while (n > 1) {
      int64_t shifted = v >> (8 * (n - 1) - 1);  // the top byte and the sign bit below it
      if (shifted != 0 && shifted != -1) break;
      --n;
    }
    out_.push_back(static_cast<char>(LONG1));
    out_.push_back(static_cast<char>(n));
    le(static_cast<uint64_t>(v), n);
  }
}

void Pickler::string(std::string_view s) {
  out_.push_back(BINUNICODE);
  uint64_t n = s.size();
  NABLA_CHECK(ValueError, n <= 0xffffffffu, "torch_io::save: a string of ", n,
              " bytes is too long for pickle protocol 2");
  for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out_.append(s);
}

void Pickler::boolean(bool b) { out_.push_back(static_cast<char>(b ? NEWTRUE : NEWFALSE)); }

void Pickler::tuple_from_mark() { out_.push_back(TUPLE); }

// BINPUT/BINGET i (one byte) or LONG_BINPUT/LONG_BINGET i (four).
void Pickler::memo_op(char short_op, char long_op, uint32_t i) {
  out_.push_back(i < 256 ? short_op : long_op);
  for (int k = 0; k < (i < 256 ? 1 : 4); ++k) out_.push_back(static_cast<char>((i >> (8 * k)) & 0xff));
}

void Pickler::memo_put(const Value& v) {
  // The memo keeps its values alive: a node freed during pickling could be reallocated at the same
  // address for another value, which would then be written as a reference to the first.
  kept_.push_back(v.node());
  uint32_t i = static_cast<uint32_t>(memo_.size());
  memo_.emplace(v.node().get(), i);
  memo_op(BINPUT, LONG_BINPUT, i);
}

bool Pickler::memo_get(const Value::Node* node) {
  auto it = memo_.find(node);
  if (it == memo_.end()) return false;
  memo_op(BINGET, LONG_BINGET, it->second);
  return true;
}

void Pickler::value(const Value& v) { value(v, 1); }

void Pickler::value(const Value& v, int depth) {
  NABLA_CHECK(ValueError, depth <= max_depth_, "torch_io::save: values nested more than ", max_depth_, " levels deep");
  const Value::Node* node = v.node().get();
  if (node && in_progress_.count(node))
    throw ValueError(internal::str("torch_io::save: a ", kind_name(v.kind()), " contains itself"));
  if (node && memo_get(node)) return;
  switch (v.kind()) {
    case Kind::none: out_.push_back(NONE); return;
    case Kind::boolean: boolean(v.to_bool()); return;
    case Kind::integer: integer(v.to_int()); return;
    case Kind::floating: {
      uint64_t bits = std::bit_cast<uint64_t>(v.to_double());
      out_.push_back(BINFLOAT);
      for (int i = 7; i >= 0; --i) out_.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
      return;
    }
    case Kind::string:
      string(v.to_string());
      memo_put(v);
      return;
    case Kind::bytes: {
      // Protocol 2 has no bytes: Python 3 writes _codecs.encode(<latin-1 text>, 'latin1').
      global("_codecs", "encode");
      std::string text;
      for (unsigned char c : v.to_string()) {
        if (c < 0x80) {
          text.push_back(static_cast<char>(c));
        } else {
          text.push_back(static_cast<char>(0xc0 | (c >> 6)));
          text.push_back(static_cast<char>(0x80 | (c & 0x3f)));
        }
      }
      string(text);
      string("latin1");
      out_.push_back(static_cast<char>(TUPLE2));
      out_.push_back(REDUCE);
      memo_put(v);
      return;
    }
    case Kind::global: {
      const std::string& q = v.global_name();
      size_t dot = q.rfind('.');
      NABLA_CHECK(ValueError, dot != std::string::npos && dot > 0 && dot + 1 < q.size(), "torch_io::save: global '", q,
                  "' is not module.name");
      global(std::string_view(q).substr(0, dot), std::string_view(q).substr(dot + 1));
      memo_put(v);
      return;
    }
    case Kind::tensor:
      tensor_writer_(*this, v);
      memo_put(v);
      return;
    case Kind::list: {
      out_.push_back(EMPTY_LIST);
      memo_put(v);
      in_progress_[node] = true;
      if (!v.items().empty()) {
        out_.push_back(MARK);
        for (const Value& x : v.items()) value(x, depth + 1);
        out_.push_back(APPENDS);
      }
      in_progress_.erase(node);
      return;
    }
    case Kind::tuple: {
      in_progress_[node] = true;
      const auto& items = v.items();
      if (items.empty()) {
        out_.push_back(EMPTY_TUPLE);
      } else if (items.size() <= 3) {
        for (const Value& x : items) value(x, depth + 1);
        out_.push_back(static_cast<char>(TUPLE1 + items.size() - 1));
      } else {
        out_.push_back(MARK);
        for (const Value& x : items) value(x, depth + 1);
        out_.push_back(TUPLE);
      }
      in_progress_.erase(node);
      memo_put(v);
      return;
    }
    case Kind::dict: {
      if (v.is_ordered_dict()) {
        global("collections", "OrderedDict");
        out_.push_back(EMPTY_TUPLE);
        out_.push_back(REDUCE);
      } else {
        out_.push_back(EMPTY_DICT);
      }
      memo_put(v);
      in_progress_[node] = true;
      if (!v.entries().empty()) {
        out_.push_back(MARK);
        for (const auto& [k, x] : v.entries()) {
          value(k, depth + 1);
          value(x, depth + 1);
        }
        out_.push_back(SETITEMS);
      }
      Value attrs = v.attributes();
      if (!attrs.is_none()) {
        value(attrs, depth + 1);
        out_.push_back(BUILD);
      }
      in_progress_.erase(node);
      return;
    }
  }
}

}  // namespace nabla::torch_io::internal
