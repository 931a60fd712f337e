// CUDA binary elementwise ops (from NABLA_BINARY_*_OPS of core/elementwise_ops.h) and where().
// Operands arrive expanded to the output's shape and converted to one dtype. An operand that is a
// host tensor (a wrapped C++ number, 0-dim) is read here and passed to the kernel by value.
#include "core/elementwise_ops.h"
#include "core/scalar_math.h"
#include "cuda/kernels.h"
#include "cuda/loops.cuh"

namespace nabla::cuda {
namespace {
using namespace nabla::scalar;

#define NABLA_ARITH_FUNCTOR(name, kind, fwd, ...)                           \
  template <class T>                                                        \
  struct B_##name {                                                         \
    T alpha;                                                                \
    __device__ T operator()(T a, T b) const { return static_cast<T>(fwd); } \
  };
NABLA_BINARY_ARITH_OPS(NABLA_ARITH_FUNCTOR)
#undef NABLA_ARITH_FUNCTOR

#define NABLA_BOOL_FUNCTOR(name, fwd, ...)                                        \
  template <class T>                                                              \
  struct B_##name {                                                               \
    T alpha;                                                                      \
    __device__ bool operator()(T a, T b) const { return static_cast<bool>(fwd); } \
  };
NABLA_BINARY_BOOL_OPS(NABLA_BOOL_FUNCTOR)
#undef NABLA_BOOL_FUNCTOR

// Bool tensors: add/maximum are "or", mul/minimum are "and" (as on the CPU).
struct B_or {
  bool alpha;
  __device__ bool operator()(bool a, bool b) const { return a || b; }
};
struct B_and {
  bool alpha;
  __device__ bool operator()(bool a, bool b) const { return a && b; }
};

// out = op(a, b). T is the operands' stored type, R the output's; an operand on the host has
// been read into sa/sb.
template <class R, class T, class Op>
struct BinaryFn {
  Op op;
  opmath_t<T> sa, sb;
  bool a_host, b_host;
  __device__ void operator()(char** p) const {
    using C = opmath_t<T>;
    C a = a_host ? sa : static_cast<C>(load<T>(p[1]));
    C b = b_host ? sb : static_cast<C>(load<T>(p[2]));
    store<R>(p[0], static_cast<R>(op(a, b)));
  }
};

// The value of a host operand (a wrapped C++ number, broadcast to the output's shape with stride 0)
// as the compute type.
template <class T>
opmath_t<T> host_value(const Tensor& t) {
  bool single = true;
  for (int64_t d = 0; d < t.dim(); ++d) single = single && (t.sizes()[d] <= 1 || t.strides()[d] == 0);
  NABLA_CHECK(DeviceError, single,
              "binary op: a host operand of a CUDA op must be a single number, got a tensor of shape ", t.sizes(),
              " on the CPU (move it with .to(device))");
  return static_cast<opmath_t<T>>(*static_cast<const T*>(t.data_ptr()));
}

template <class R, class T, class Op>
void run(const Tensor& a, const Tensor& b, const Tensor& out, Op op) {
  BinaryFn<R, T, Op> f{op, {}, {}, a.is_cpu(), b.is_cpu()};
  if (f.a_host) f.sa = host_value<T>(a);
  if (f.b_host) f.sb = host_value<T>(b);
  IterPlan plan = plan_iter({&out, &a, &b}, (f.a_host ? 2u : 0u) | (f.b_host ? 4u : 0u));
  launch_elementwise<3>(plan, stream_of(out), f);
}

template <class T>
struct WhereFn {
  __device__ void operator()(char** p) const { store<T>(p[0], load<bool>(p[1]) ? load<T>(p[2]) : load<T>(p[3])); }
};

// An arithmetic op on bool operands, by its `bool` column (core/elementwise_ops.h).
void bool_binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  switch (bool_rule(op)) {
    case BoolRule::either: return run<bool, bool>(a, b, out, B_or{false});
    case BoolRule::both: return run<bool, bool>(a, b, out, B_and{false});
    default: throw DTypeError(internal::str(op_name(op), ": not supported for bool tensors"));
  }
}

}  // namespace

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out, Scalar alpha_s) {
  if (out.numel() == 0) return;
  DeviceScope ds(out);
  const DType dt = a.dtype();
  NABLA_CHECK(DTypeError, b.dtype() == dt, op_name(op), ": operands must share one dtype, got ", dt, " and ",
              b.dtype());
  visit_cuda_dtype(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = opmath_t<T>;
    C alpha;
    if constexpr (is_half_v<T>) alpha = static_cast<float>(alpha_s.to_double());
    else alpha = alpha_s.to<T>();
    switch (op) {
#define NABLA_ARITH_CASE(name, kind, fwd, ...)         \
  case BinaryOp::name:                                 \
    if constexpr (std::is_same_v<T, bool>) {           \
      return bool_binary(op, a, b, out);               \
    } else {                                           \
      return run<T, T>(a, b, out, B_##name<C>{alpha}); \
    }
      NABLA_BINARY_ARITH_OPS(NABLA_ARITH_CASE)
#undef NABLA_ARITH_CASE
#define NABLA_BOOL_CASE(name, fwd, ...) \
  case BinaryOp::name: return run<bool, T>(a, b, out, B_##name<C>{alpha});
      // clang-format off
      NABLA_BINARY_BOOL_OPS(NABLA_BOOL_CASE)
#undef NABLA_BOOL_CASE
      // clang-format on
    }
  });
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  if (out.numel() == 0) return;
  DeviceScope ds(out);
  NABLA_CHECK(DeviceError, cond.is_cuda() && a.is_cuda() && b.is_cuda(), "where: all operands must be on ",
              out.device());
  IterPlan plan = plan_iter({&out, &cond, &a, &b});
  // The select moves bytes: one kernel per element size serves every dtype.
  switch (out.element_size()) {
    case 1: return launch_elementwise<4>(plan, stream_of(out), WhereFn<uint8_t>{});
    case 2: return launch_elementwise<4>(plan, stream_of(out), WhereFn<uint16_t>{});
    case 4: return launch_elementwise<4>(plan, stream_of(out), WhereFn<uint32_t>{});
    case 8: return launch_elementwise<4>(plan, stream_of(out), WhereFn<uint64_t>{});
  }
  throw NotImplemented("where: unsupported element size");
}

}  // namespace nabla::cuda
