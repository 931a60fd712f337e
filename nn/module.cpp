#include "nn/module.h"

#include <charconv>
#include <set>
#include <sstream>
#include <unordered_set>

#include "autograd/function.h"
#include "core/graph.h"

namespace nabla::nn {

namespace {

// Replaces the data of `dst` (its storage, layout and dtype) with that of `src`, keeping dst's
// identity: every handle to dst sees the new data, as PyTorch's `param.data = new_data`.
void set_data(const Tensor& dst, const Tensor& src) {
  TensorImpl* d = dst.impl();
  TensorImpl* s = src.impl();
  d->storage = s->storage;
  d->sizes = s->sizes;
  d->strides = s->strides;
  d->offset = s->offset;
  d->numel = s->numel;
  d->dtype = s->dtype;
  d->is_contiguous = s->is_contiguous;
  // The cached gradient accumulator remembers the old dtype/device; a new one is made on demand.
  d->grad_accumulator.reset();
}

std::string indent_lines(const std::string& s, int n) {
  std::string pad(static_cast<size_t>(n), ' ');
  std::string out;
  for (char c : s) {
    out += c;
    if (c == '\n') out += pad;
  }
  return out;
}

}  // namespace

// ---- copies ---------------------------------------------------------------------------------------

Module::Module(const Module& o)
    : std::enable_shared_from_this<Module>(),
      training_(o.training_),
      name_(o.name_),
      params_(o.params_),
      buffers_(o.buffers_),
      children_(o.children_),
      hooks_(o.hooks_ ? std::make_shared<internal::HookStore>(*o.hooks_) : nullptr) {}

Module& Module::operator=(const Module& o) {
  if (this != &o) {
    training_ = o.training_;
    name_ = o.name_;
    params_ = o.params_;
    buffers_ = o.buffers_;
    children_ = o.children_;
    hooks_ = o.hooks_ ? std::make_shared<internal::HookStore>(*o.hooks_) : nullptr;
  }
  return *this;
}

// ---- hooks ----------------------------------------------------------------------------------------

void RemovableHandle::remove() {
  if (auto s = store_.lock()) {
    std::erase_if(s->pre, [&](const auto& h) { return h.first == id_; });
    std::erase_if(s->post, [&](const auto& h) { return h.first == id_; });
  }
}

RemovableHandle Module::register_forward_pre_hook(ForwardPreHook hook) {
  if (!hooks_) hooks_ = std::make_shared<internal::HookStore>();
  size_t id = ++hooks_->next_id;
  hooks_->pre.emplace_back(id, std::move(hook));
  return RemovableHandle(hooks_, id);
}

RemovableHandle Module::register_forward_hook(ForwardHook hook) {
  if (!hooks_) hooks_ = std::make_shared<internal::HookStore>();
  size_t id = ++hooks_->next_id;
  hooks_->post.emplace_back(id, std::move(hook));
  return RemovableHandle(hooks_, id);
}

Tensor Module::run_hooks(std::vector<Tensor>& inputs, const std::function<Tensor(std::vector<Tensor>&)>& fwd) {
  // Copies of the hook lists: a hook may remove itself or register others while running.
  auto pre = hooks_->pre;
  for (auto& [id, h] : pre) h(*this, inputs);
  Tensor out = fwd(inputs);
  auto post = hooks_->post;
  for (auto& [id, h] : post) h(*this, inputs, out);
  return out;
}

// ---- forward --------------------------------------------------------------------------------------

Tensor Module::forward(Tensor) {
  throw NotImplemented(internal::str(name(),
                                     ": forward(Tensor) is not implemented; override "
                                     "`Tensor forward(Tensor x)` to call this module with one tensor"));
}
Tensor Module::forward(Tensor, Tensor) {
  throw NotImplemented(internal::str(name(),
                                     ": forward(Tensor, Tensor) is not implemented; override "
                                     "`Tensor forward(Tensor a, Tensor b)` to call this module with two tensors"));
}

Tensor Module::operator()(Tensor x) {
  if (!hooks_ || (hooks_->pre.empty() && hooks_->post.empty())) return forward(std::move(x));
  std::vector<Tensor> in{std::move(x)};
  return run_hooks(in, [this](std::vector<Tensor>& i) {
    NABLA_CHECK(ValueError, i.size() == 1, name(), ": a forward pre-hook changed the number of inputs to ", i.size());
    return forward(i[0]);
  });
}

Tensor Module::operator()(Tensor a, Tensor b) {
  if (!hooks_ || (hooks_->pre.empty() && hooks_->post.empty())) return forward(std::move(a), std::move(b));
  std::vector<Tensor> in{std::move(a), std::move(b)};
  return run_hooks(in, [this](std::vector<Tensor>& i) {
    NABLA_CHECK(ValueError, i.size() == 2, name(), ": a forward pre-hook changed the number of inputs to ", i.size());
    return forward(i[0], i[1]);
  });
}

// ---- registration ---------------------------------------------------------------------------------

void Module::check_new_name(const std::string& n, const char* what) const {
  NABLA_CHECK(ValueError, !n.empty(), name(), ": ", what, " name must not be empty");
  NABLA_CHECK(ValueError, n.find('.') == std::string::npos, name(), ": ", what, " name '", n,
              "' must not contain '.' (dots separate the levels of nested names)");
  NABLA_CHECK(ValueError, !params_.contains(n) && !buffers_.contains(n) && !children_.contains(n), name(),
              ": cannot register ", what, " '", n, "': the name is already taken");
}

Tensor& Module::register_parameter(const std::string& n, Tensor t, bool requires_grad) {
  check_new_name(n, "parameter");
  if (t.defined()) {
    if (!t.is_leaf()) t = t.detach();
    if (requires_grad)
      NABLA_CHECK(DTypeError, t.is_floating_point(), name(), ": parameter '", n,
                  "' must be floating to require grad, got ", t.dtype());
    t.requires_grad_(requires_grad);
  }
  return params_.insert(n, std::move(t));
}

Tensor& Module::register_buffer(const std::string& n, Tensor t, bool persistent) {
  check_new_name(n, "buffer");
  if (t.defined() && !t.is_leaf()) t = t.detach();
  return buffers_.insert(n, Slot{std::move(t), persistent}).tensor;
}

void Module::add_child(const std::string& n, std::shared_ptr<Module> m) {
  check_new_name(n, "module");
  NABLA_CHECK(ValueError, m != nullptr, name(), ": cannot register module '", n, "': it is null");
  NABLA_CHECK(ValueError, m.get() != this, name(), ": a module cannot be its own child");
  children_.insert(n, std::move(m));
}

void Module::replace_child(const std::string& n, std::shared_ptr<Module> m) {
  NABLA_CHECK(ValueError, m != nullptr, name(), ": cannot replace module '", n, "' by null");
  std::shared_ptr<Module>* slot = children_.find(n);
  NABLA_CHECK(IndexError, slot != nullptr, name(), ": there is no child module '", n, "' to replace");
  *slot = std::move(m);
}

// ---- traversal ------------------------------------------------------------------------------------

namespace {
template <class Get>
void walk_tensors(const Module& m, const std::string& prefix, bool recurse, std::unordered_set<const TensorImpl*>& seen,
                  std::unordered_set<const Module*>& seen_mods, OrderedDict<Tensor>& out, Get get) {
  for (const auto& [n, t] : get(m)) {
    if (!t.defined() || !seen.insert(t.impl()).second) continue;
    out.insert(prefix + n, t);
  }
  if (!recurse) return;
  for (const auto& [n, c] : m.named_children()) {
    if (!seen_mods.insert(c.get()).second) continue;
    walk_tensors(*c, prefix + n + ".", recurse, seen, seen_mods, out, get);
  }
}
}  // namespace

OrderedDict<Tensor> Module::named_parameters(bool recurse) const {
  OrderedDict<Tensor> out;
  std::unordered_set<const TensorImpl*> seen;
  std::unordered_set<const Module*> seen_mods;
  walk_tensors(*this, "", recurse, seen, seen_mods, out, [](const Module& m) { return m.params_.items(); });
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const { return named_parameters(recurse).values(); }

OrderedDict<Tensor> Module::named_buffers(bool recurse) const {
  OrderedDict<Tensor> out;
  std::unordered_set<const TensorImpl*> seen;
  std::unordered_set<const Module*> seen_mods;
  walk_tensors(*this, "", recurse, seen, seen_mods, out, [](const Module& m) {
    std::vector<std::pair<std::string, Tensor>> v;
    for (const auto& [n, s] : m.buffers_) v.emplace_back(n, s.tensor);
    return v;
  });
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const { return named_buffers(recurse).values(); }

std::vector<std::shared_ptr<Module>> Module::children() const { return children_.values(); }
OrderedDict<std::shared_ptr<Module>> Module::named_children() const { return children_; }

OrderedDict<std::shared_ptr<Module>> Module::named_modules(bool include_self) {
  OrderedDict<std::shared_ptr<Module>> out;
  std::unordered_set<const Module*> seen;
  std::function<void(const std::shared_ptr<Module>&, const std::string&)> visit = [&](const std::shared_ptr<Module>& m,
                                                                                      const std::string& prefix) {
    if (!seen.insert(m.get()).second) return;
    out.insert(prefix, m);
    for (const auto& [n, c] : m->children_) visit(c, prefix.empty() ? n : prefix + "." + n);
  };
  std::shared_ptr<Module> self = weak_from_this().lock();
  if (!self) self = std::shared_ptr<Module>(std::shared_ptr<Module>(), this);  // non-owning
  if (include_self) {
    visit(self, "");
  } else {
    seen.insert(this);
    for (const auto& [n, c] : children_) visit(c, n);
  }
  return out;
}

std::vector<std::shared_ptr<Module>> Module::modules(bool include_self) { return named_modules(include_self).values(); }

void Module::apply(const std::function<void(Module&)>& fn) {
  for (auto& [n, c] : children_) c->apply(fn);
  fn(*this);
}

// ---- modes, devices, gradients --------------------------------------------------------------------

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_) c->train(on);
}

void Module::convert(const std::function<Tensor(const Tensor&)>& fn) {
  autograd::NoGradGuard ng;
  auto fix = [&](const Tensor& t) {
    if (!t.defined()) return;
    Tensor n = fn(t);
    if (n.is_same(t)) return;
    Tensor g = t.grad();
    set_data(t, n);
    if (g.defined()) t.impl()->meta->grad = fn(g);
  };
  for (auto& [n, t] : params_) fix(t);
  for (auto& [n, s] : buffers_) fix(s.tensor);
  for (auto& [n, c] : children_) c->convert(fn);
}

void Module::to(Device device) {
  convert([&](const Tensor& t) { return t.to(device); });
}
void Module::to(DType dtype) {
  NABLA_CHECK(DTypeError, is_floating(dtype), name(), ".to: modules can only be converted to a floating dtype, got ",
              dtype);
  convert([&](const Tensor& t) { return t.is_floating_point() ? t.to(dtype) : t; });
}
void Module::to(Device device, DType dtype) {
  NABLA_CHECK(DTypeError, is_floating(dtype), name(), ".to: modules can only be converted to a floating dtype, got ",
              dtype);
  convert([&](const Tensor& t) { return t.is_floating_point() ? t.to(device, dtype) : t.to(device); });
}

void Module::zero_grad(bool set_to_none) {
  for (Tensor& p : parameters()) p.zero_grad(set_to_none);
}

void Module::requires_grad_(bool r) {
  for (Tensor& p : parameters()) p.requires_grad_(r);
}

// ---- state ----------------------------------------------------------------------------------------

void Module::collect_state(const std::string& prefix, StateDict& out) const {
  for (const auto& [n, t] : params_)
    if (t.defined()) out.insert(prefix + n, t.detach());
  for (const auto& [n, s] : buffers_)
    if (s.tensor.defined() && s.persistent) out.insert(prefix + n, s.tensor.detach());
  for (const auto& [n, c] : children_) c->collect_state(prefix + n + ".", out);
}

StateDict Module::state_dict() const {
  StateDict out;
  collect_state("", out);
  return out;
}

LoadStateDictResult Module::load_state_dict(const StateDict& state, bool strict) {
  // The destination tensors, by dotted name (not deduplicated: shared tensors get every name).
  StateDict own = state_dict();
  LoadStateDictResult res;
  std::vector<std::string> mismatches;
  for (const auto& [k, t] : own) {
    const Tensor* src = state.find(k);
    if (!src) {
      res.missing_keys.push_back(k);
      continue;
    }
    if (!src->defined() || src->sizes() != t.sizes())
      mismatches.push_back(internal::str("size mismatch for ", k, ": copying a param with shape ",
                                         src->defined() ? internal::str(src->sizes()) : std::string("(undefined)"),
                                         " from checkpoint, the shape in current model is ", t.sizes(), "."));
  }
  for (const auto& [k, t] : state)
    if (!own.contains(k)) res.unexpected_keys.push_back(k);

  auto quoted = [](const std::vector<std::string>& keys) {
    std::string s;
    for (size_t i = 0; i < keys.size(); ++i) s += (i ? ", \"" : "\"") + keys[i] + "\"";
    return s;
  };
  std::string errors;
  if (strict && !res.unexpected_keys.empty())
    errors += "\n\tUnexpected key(s) in state_dict: " + quoted(res.unexpected_keys) + ".";
  if (strict && !res.missing_keys.empty())
    errors += "\n\tMissing key(s) in state_dict: " + quoted(res.missing_keys) + ".";
  for (const auto& m : mismatches) errors += "\n\t" + m;
  if (!errors.empty()) throw ValueError("Error(s) in loading state_dict for " + name() + ":" + errors);

  autograd::NoGradGuard ng;
  for (const auto& [k, t] : own)
    if (const Tensor* src = state.find(k)) {
      Tensor dst = t;  // a detached handle sharing the parameter's storage
      dst.copy_(*src);
    }
  return res;
}

// ---- printing -------------------------------------------------------------------------------------

namespace internal {
std::string module_type_name(const std::type_info& type) {
  std::string s = autograd::demangled_type_name(type.name());
  constexpr std::string_view kImpl = "Impl";  // NABLA_MODULE's NetImpl prints as Net, as in libtorch
  if (s.size() > kImpl.size() && s.ends_with(kImpl)) s.resize(s.size() - kImpl.size());
  return s;
}
}  // namespace internal

std::string Module::name() const {
  if (!name_.empty()) return name_;
  return internal::module_type_name(typeid(*this));
}

std::string Module::repr() const {
  std::vector<std::string> lines;
  std::string extra = extra_repr();
  size_t n_extra = 0;
  if (!extra.empty()) {
    std::stringstream ss(extra);
    std::string line;
    while (std::getline(ss, line)) {
      lines.push_back(line);
      ++n_extra;
    }
  }
  for (const auto& [n, c] : children_) lines.push_back("(" + n + "): " + indent_lines(c->repr(), 2));
  std::string s = name() + "(";
  if (!lines.empty()) {
    if (n_extra == 1 && children_.empty()) {
      s += lines[0];
    } else {
      s += "\n  ";
      for (size_t i = 0; i < lines.size(); ++i) s += (i ? "\n  " : "") + lines[i];
      s += "\n";
    }
  }
  return s + ")";
}

std::ostream& operator<<(std::ostream& os, const Module& m) { return os << m.repr(); }

std::string repr_bool(bool b) { return b ? "True" : "False"; }

std::string repr_double(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  // Shortest round-trip digits, then Python's layout: exponent form when exp < -4 or exp >= 16.
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string sci(buf, r.ptr);  // e.g. "-1.25e-05"
  auto epos = sci.find('e');
  std::string mant = sci.substr(0, epos);
  int exp = std::stoi(sci.substr(epos + 1));
  bool neg = mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  std::string out;
  if (exp < -4 || exp >= 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char e[16];
    std::snprintf(e, sizeof(e), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += e;
  } else if (exp < 0) {
    out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  } else {
    size_t int_len = static_cast<size_t>(exp) + 1;
    if (digits.size() <= int_len) {
      out = digits + std::string(int_len - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, int_len) + "." + digits.substr(int_len);
    }
  }
  return neg ? "-" + out : out;
}

}  // namespace nabla::nn
