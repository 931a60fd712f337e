// CUDA unary elementwise ops, generated from the op lists of core/elementwise_ops.h with the
// per-element math of core/scalar_math.h (the same formulas as the CPU kernels). Each op is a
// functor run by the generic kernel of cuda/loops.cuh; 16-bit floats compute in float.
#include "core/elementwise_ops.h"
#include "core/scalar_math.h"
#include "cuda/kernels.h"
#include "cuda/loops.cuh"

namespace nabla::cuda {
namespace {
using namespace nabla::scalar;

// Functors: T is the compute type.
#define NABLA_FLOAT_FUNCTOR(name, fwd, ...) \
  struct U_##name {                         \
    double p0, p1;                          \
    template <class T>                      \
    __device__ T operator()(T x) const {    \
      return static_cast<T>(fwd);           \
    }                                       \
  };
NABLA_UNARY_FLOAT_OPS(NABLA_FLOAT_FUNCTOR)
NABLA_UNARY_PARAM_OPS(NABLA_FLOAT_FUNCTOR)
NABLA_UNARY_SAME_OPS(NABLA_FLOAT_FUNCTOR)
#undef NABLA_FLOAT_FUNCTOR

#define NABLA_PRED_FUNCTOR(name, fwd, ...)  \
  struct U_##name {                         \
    double p0, p1;                          \
    template <class T>                      \
    __device__ bool operator()(T x) const { \
      return static_cast<bool>(fwd);        \
    }                                       \
  };
NABLA_UNARY_BOOL_OPS(NABLA_PRED_FUNCTOR)
#undef NABLA_PRED_FUNCTOR

template <class T>
struct U_clamp {
  T lo, hi;
  __device__ T operator()(T x) const { return scalar::clamp(x, lo, hi); }
};

// out = op(x): In and Out are the stored types, the op computes in opmath_t<In>.
template <class Out, class In, class Op>
struct UnaryFn {
  Op op;
  __device__ void operator()(char** p) const {
    using C = opmath_t<In>;
    C x = static_cast<C>(load<In>(p[1]));
    store<Out>(p[0], static_cast<Out>(op(x)));
  }
};

template <class Out, class In, class Op>
void run(const Tensor& x, const Tensor& out, Op op) {
  IterPlan plan = plan_iter({&out, &x});
  launch_elementwise<2>(plan, stream_of(out), UnaryFn<Out, In, Op>{op});
}

template <class Op>
void float_op(const Tensor& x, const Tensor& out, const char* name, Op op) {
  visit_cuda_float(x.dtype(), name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    run<T, T>(x, out, op);
  });
}

template <class Op>
void same_op(const Tensor& x, const Tensor& out, const char* name, Op op) {
  visit_cuda_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) {
      throw DTypeError(internal::str(name, ": not supported for bool tensors"));
    } else {
      run<T, T>(x, out, op);
    }
  });
}

template <class Op>
void pred_op(const Tensor& x, const Tensor& out, Op op) {
  visit_cuda_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    run<bool, T>(x, out, op);
  });
}

}  // namespace

void unary(UnaryOp op, const Tensor& x, const Tensor& out, double p0, double p1) {
  if (out.numel() == 0) return;
  DeviceScope ds(out);
  switch (op) {
#define NABLA_FLOAT_CASE(name, fwd, ...) \
  case UnaryOp::name: return float_op(x, out, #name, U_##name{p0, p1});
    NABLA_UNARY_FLOAT_OPS(NABLA_FLOAT_CASE)
    NABLA_UNARY_PARAM_OPS(NABLA_FLOAT_CASE)
#undef NABLA_FLOAT_CASE
#define NABLA_SAME_CASE(name, fwd, ...) \
  case UnaryOp::name: return same_op(x, out, #name, U_##name{p0, p1});
    NABLA_UNARY_SAME_OPS(NABLA_SAME_CASE)
#undef NABLA_SAME_CASE
#define NABLA_PRED_CASE(name, fwd, ...) \
  case UnaryOp::name: return pred_op(x, out, U_##name{p0, p1});
    NABLA_UNARY_BOOL_OPS(NABLA_PRED_CASE)
#undef NABLA_PRED_CASE
    case UnaryOp::clamp:
      return visit_cuda_dtype(x.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (std::is_same_v<T, bool>) {
          throw DTypeError("clamp: not supported for bool tensors");
        } else {
          using C = opmath_t<T>;
          run<T, T>(x, out, U_clamp<C>{nabla::scalar::saturate<C>(p0), nabla::scalar::saturate<C>(p1)});
        }
      });
  }
  throw NotImplemented(internal::str("unary op ", static_cast<int>(op), ": not implemented on CUDA"));
}

}  // namespace nabla::cuda
