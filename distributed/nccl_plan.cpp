#include "distributed/nccl_plan.h"

#include "core/error.h"

namespace nabla::distributed::nccl_plan {

const char* type_name(NcclType t) {
  switch (t) {
    case NcclType::int8: return "ncclInt8";
    case NcclType::uint8: return "ncclUint8";
    case NcclType::int32: return "ncclInt32";
    case NcclType::uint32: return "ncclUint32";
    case NcclType::int64: return "ncclInt64";
    case NcclType::uint64: return "ncclUint64";
    case NcclType::float16: return "ncclFloat16";
    case NcclType::float32: return "ncclFloat32";
    case NcclType::float64: return "ncclFloat64";
    case NcclType::bfloat16: return "ncclBfloat16";
  }
  return "?";
}

const char* op_name(NcclOp o) {
  switch (o) {
    case NcclOp::sum: return "ncclSum";
    case NcclOp::prod: return "ncclProd";
    case NcclOp::max: return "ncclMax";
    case NcclOp::min: return "ncclMin";
    case NcclOp::avg: return "ncclAvg";
  }
  return "?";
}

NcclType data_type(DType d, const char* collective) {
  switch (d) {
    case DType::f32: return NcclType::float32;
    case DType::f64: return NcclType::float64;
    case DType::i64: return NcclType::int64;
    case DType::i32: return NcclType::int32;
    case DType::u8: return NcclType::uint8;
    case DType::boolean: return NcclType::uint8;  // one byte, 0 or 1
    case DType::f16: return NcclType::float16;
    case DType::bf16: return NcclType::bfloat16;
    case DType::c64:
    case DType::c128: break;
  }
  throw DTypeError(internal::str(collective, ": the nccl backend has no NCCL data type for dtype ", dtype_name(d),
                                 " (view_as_real(x) communicates the float pairs)"));
}

Reduction reduction(ReduceOp op, DType d, const char* collective) {
  NcclType t = data_type(d, collective);
  if (op == ReduceOp::avg) {
    NABLA_CHECK(DTypeError, is_floating(d), collective, ": ReduceOp::avg needs a floating dtype, got ", d,
                " (as torch.distributed: reduce with sum and divide)");
    return {t, NcclOp::avg};
  }
  if (d == DType::boolean) {  // 0/1 bytes: or is max, and is min
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::max: return {t, NcclOp::max};
      case ReduceOp::product:
      case ReduceOp::min: return {t, NcclOp::min};
      case ReduceOp::avg: break;
    }
  }
  switch (op) {
    case ReduceOp::sum: return {t, NcclOp::sum};
    case ReduceOp::product: return {t, NcclOp::prod};
    case ReduceOp::min: return {t, NcclOp::min};
    case ReduceOp::max: return {t, NcclOp::max};
    case ReduceOp::avg: break;
  }
  throw ValueError(internal::str(collective, ": unknown ReduceOp ", static_cast<int>(op)));
}

}  // namespace nabla::distributed::nccl_plan
