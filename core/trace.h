// Op tracing: while a Tracer is installed on the current thread, the op front-ends that know how
// to describe themselves report each call (its OpId, input and output tensors, and its attributes as
// the op's typed struct) to it. onnx::export_model is the user: it runs a model's forward once under
// a Tracer and turns the record into an ONNX graph.
//
// The cost when nothing traces is one load of a thread-local pointer and a predictable branch per
// hooked front-end. Only the front-end .cpp files include this header (never tensor.h or ops.h), so
// changing it rebuilds those files only.
//
// A hooked front-end reads:
//
//   Tensor log_softmax(const Tensor& x, int64_t dim) {
//     if (trace::Tracer* t = trace::active()) [[unlikely]]
//       return trace::traced<OpId::log_softmax>(t, {x}, {.dim = dim}, [&] { return log_softmax(x, dim); });
//     ...
//   }
//
// The attributes' type is the op's row's (core/op_schema.h): another struct does not compile.
// `traced` runs the op again with tracing suspended (so the ops it is made of are not reported),
// then reports the call as one op. Ops that have no hook are not reported; the tracer notices them
// from the autograd history of the tensors they produce (onnx/README.md).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "op_schema.h"
#include "tensor.h"

namespace nabla::trace {

class Tracer {
 public:
  virtual ~Tracer() = default;
  // One op call: `inputs` as the caller passed them (an undefined tensor is an absent optional
  // input, e.g. a bias), `outputs` as returned, `attrs` holding the op's struct (op_attrs_t<op>).
  // May throw (the op then fails with that error).
  virtual void record(OpId op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                      const OpAttrs& attrs) = 0;
  // `t` was just given an autograd node by an op that has no hook (outside any traced call). An op
  // implemented with hooked parts can finish with one (a clone of its untraced result): what the
  // tracer recorded for t is then not t's value.
  virtual void on_history(const Tensor& t) {}
  // `t`'s value was read on the host (`what`: "item"): the traced program's result then depends on
  // a number the record holds as a constant. compile falls back to eager; the exporter ignores it
  // (a constant, as torch.onnx's tracer makes it).
  virtual void on_host_read(const Tensor& t, const char* what) {}
  // A generator handed out random numbers while tracing (outside a traced op's own call): an op
  // the tracer may not see drew them (randn_like, dropout in training). compile falls back.
  virtual void on_random_draw() {}
  // An op checks `t`'s values before using them (an index in range, probabilities in [0, 1]):
  // check(t) throws when they are wrong. compile keeps it and runs it again in each replay; the
  // exporter ignores it. (value_check below calls this and runs the check.)
  virtual void on_value_check(const Tensor& t, const std::function<void(const Tensor&)>& check) {}
  // Whether the tracer takes the hooked op `op` as the ops it is made of (its hook steps aside, as
  // under StepAside below) rather than as one call: compile does for ops it has no replay rule for.
  virtual bool records_parts(OpId op) const { return false; }
};

// The tracer of this thread (null when not tracing).
extern constinit thread_local Tracer* tl_current;
extern constinit thread_local bool tl_step_aside;
inline Tracer* active() {
  Tracer* t = tl_current;
  if (t && tl_step_aside) [[unlikely]] {  // StepAside: this hook lets the op run as its parts
    tl_step_aside = false;
    return nullptr;
  }
  return t;
}

// While tracing, the next hooked front-end called on this thread runs as the ops it is made of:
// its hook steps aside once and the ops inside stay traced. How an exporter traces a composite op's
// parts where it has no mapping for the op itself (grid_sample below opset 16). Call the op right
// after constructing this (nothing else hooked in between).
class StepAside {
 public:
  StepAside() { tl_step_aside = true; }
  ~StepAside() { tl_step_aside = false; }
  StepAside(const StepAside&) = delete;
  StepAside& operator=(const StepAside&) = delete;
};

// Installs `t` as this thread's tracer for its scope.
class TracerGuard {
 public:
  explicit TracerGuard(Tracer* t) : prev_(tl_current) { tl_current = t; }
  ~TracerGuard() { tl_current = prev_; }
  TracerGuard(const TracerGuard&) = delete;
  TracerGuard& operator=(const TracerGuard&) = delete;

 private:
  Tracer* prev_;
};

// Suspends tracing for its scope (the ops inside a traced call).
class Suspend : public TracerGuard {
 public:
  Suspend() : TracerGuard(nullptr) {}
};

// Runs check(t), a check of t's values that reads them on the host, while tracing (call it where
// trace::tl_current is set, building the closure only then): the tracer is told of the check,
// and the check's own reads and ops are not reported as the forward's.
inline void value_check(const Tensor& t, const std::function<void(const Tensor&)>& check) {
  if (Tracer* tr = tl_current) tr->on_value_check(t, check);
  Suspend s;
  check(t);
}

// A list argument as an attribute field.
inline std::vector<int64_t> ints(IntArrayRef v) { return {v.begin(), v.end()}; }

// The index in OpAttrs of op's attribute struct.
template <class T, class V>
struct VariantIndex;
template <class T, class... A>
struct VariantIndex<T, std::variant<A...>> {
  static constexpr size_t value = [] {
    constexpr bool same[] = {std::is_same_v<T, A>...};
    for (size_t i = 0; i < sizeof...(A); ++i)
      if (same[i]) return i;
    return sizeof...(A);
  }();
};
size_t attrs_index(OpId op);  // VariantIndex<op_attrs_t<op>, OpAttrs>, at run time

// Runs f() untraced and reports it to `t` as the op `op` (f returns a Tensor, a tuple of two
// Tensors or a vector of Tensors). The op is known where the call is written: its attributes'
// type is checked at compile time.
template <class R>
void report(Tracer* t, OpId op, const std::vector<Tensor>& inputs, const R& result, const OpAttrs& attrs) {
  if constexpr (std::is_same_v<R, Tensor>) t->record(op, inputs, {result}, attrs);
  else if constexpr (std::is_same_v<R, std::vector<Tensor>>) t->record(op, inputs, result, attrs);
  else t->record(op, inputs, {std::get<0>(result), std::get<1>(result)}, attrs);
}
template <OpId op, class F>
auto traced(Tracer* t, std::vector<Tensor> inputs, const op_attrs_t<op>& attrs, F&& f) {
  if (t->records_parts(op)) {
    StepAside aside;  // f() calls the op again: its hook steps aside, its parts are traced
    return f();
  }
  auto result = [&] {
    Suspend s;
    return f();
  }();
  report(t, op, inputs, result, OpAttrs(attrs));
  return result;
}
// The same where the op is chosen at run time (the elementwise front-ends, one per list): the
// attributes must be the op's struct (an internal error otherwise).
template <class F>
auto traced(Tracer* t, OpId op, std::vector<Tensor> inputs, const OpAttrs& attrs, F&& f) {
  if (attrs.index() != attrs_index(op)) [[unlikely]]
    throw Error(internal::str("trace: internal: op '", op_name(op), "' traced with the wrong attribute struct"));
  if (t->records_parts(op)) {
    StepAside aside;
    return f();
  }
  auto result = [&] {
    Suspend s;
    return f();
  }();
  report(t, op, inputs, result, attrs);
  return result;
}

}  // namespace nabla::trace
