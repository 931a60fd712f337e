// Op tracing: while a Tracer is installed on the current thread, the op front-ends that know how
// to describe themselves report each call (op name, input and output tensors, attributes) to it.
// onnx::export_model is the user: it runs a model's forward once under a Tracer and turns the
// record into an ONNX graph.
//
// The cost when nothing traces is one load of a thread-local pointer and a predictable branch per
// hooked front-end. Only the front-end .cpp files include this header (never tensor.h or ops.h), so
// changing it rebuilds those files only.
//
// A hooked front-end reads:
//
//   Tensor log_softmax(const Tensor& x, int64_t dim) {
//     if (trace::Tracer* t = trace::active()) [[unlikely]]
//       return trace::traced(t, "log_softmax", {x}, {{"dim", dim}}, [&] { return log_softmax(x, dim); });
//     ...
//   }
//
// `traced` runs the op again with tracing suspended (so the ops it is made of are not reported),
// then reports the call as one op. Ops that have no hook are not reported; the tracer notices them
// from the autograd history of the tensors they produce (onnx/README.md).
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "tensor.h"

namespace nabla::trace {

// An attribute of a traced call: dims, sizes, flags, constants, scale factors.
using AttrValue = std::variant<int64_t, double, std::vector<int64_t>, std::string, std::vector<double>>;
struct Attr {
  std::string name;
  AttrValue value;
  Attr(std::string n, int64_t v) : name(std::move(n)), value(v) {}
  Attr(std::string n, int v) : name(std::move(n)), value(int64_t(v)) {}
  Attr(std::string n, bool v) : name(std::move(n)), value(int64_t(v)) {}
  Attr(std::string n, double v) : name(std::move(n)), value(v) {}
  Attr(std::string n, IntArrayRef v) : name(std::move(n)), value(std::vector<int64_t>(v.begin(), v.end())) {}
  Attr(std::string n, std::vector<int64_t> v) : name(std::move(n)), value(std::move(v)) {}
  Attr(std::string n, std::string v) : name(std::move(n)), value(std::move(v)) {}
  Attr(std::string n, const char* v) : name(std::move(n)), value(std::string(v)) {}
  Attr(std::string n, std::vector<double> v) : name(std::move(n)), value(std::move(v)) {}
};
using Attrs = std::vector<Attr>;

class Tracer {
 public:
  virtual ~Tracer() = default;
  // One op call: `inputs` as the caller passed them (an undefined tensor is an absent optional
  // input, e.g. a bias), `outputs` as returned. May throw (the op then fails with that error).
  virtual void record(const char* op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                      const Attrs& attrs) = 0;
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

// Runs f() untraced and reports it to `t` as the op `op` (f returns a Tensor, a tuple of two
// Tensors or a vector of Tensors).
template <class F>
auto traced(Tracer* t, const char* op, std::vector<Tensor> inputs, const Attrs& attrs, F&& f) {
  using R = std::invoke_result_t<F&>;
  R result = [&] {
    Suspend s;
    return f();
  }();
  if constexpr (std::is_same_v<R, Tensor>) t->record(op, inputs, {result}, attrs);
  else if constexpr (std::is_same_v<R, std::vector<Tensor>>) t->record(op, inputs, result, attrs);
  else t->record(op, inputs, {std::get<0>(result), std::get<1>(result)}, attrs);
  return result;
}

}  // namespace nabla::trace
