// nccl_plan.h: how a collective on a nabla tensor maps to NCCL's data types and reductions.
// Plain C++ without NCCL's header, so that tests/distributed checks it on every machine (CI has
// no GPU); process_group_nccl.cpp static_asserts that these values are NCCL's own.
//
//   reduction(ReduceOp::sum, kBool, "all_reduce")  -> {NcclType::uint8, NcclOp::max}   (or)
//   reduction(ReduceOp::avg, kFloat16, "...")      -> {NcclType::float16, NcclOp::avg} (ncclAvg)
//   reduction(ReduceOp::avg, kInt64, "all_reduce") -> DTypeError, as the gloo backend
#pragma once

#include "../core/dtype.h"
#include "process_group.h"

namespace nabla::distributed::nccl_plan {

// ncclDataType_t and ncclRedOp_t values (nccl.h, NCCL 2.10 and later).
enum class NcclType : int {
  int8 = 0,
  uint8 = 1,
  int32 = 2,
  uint32 = 3,
  int64 = 4,
  uint64 = 5,
  float16 = 6,
  float32 = 7,
  float64 = 8,
  bfloat16 = 9
};
enum class NcclOp : int { sum = 0, prod = 1, max = 2, min = 3, avg = 4 };

const char* type_name(NcclType t);  // "ncclFloat32"
const char* op_name(NcclOp o);      // "ncclSum"

// The NCCL type that carries `d` (bool as its bytes, uint8). Every nabla dtype has one; a dtype NCCL
// cannot carry throws DTypeError naming `collective`.
NcclType data_type(DType d, const char* collective);

struct Reduction {
  NcclType type;
  NcclOp op;
  friend bool operator==(const Reduction& a, const Reduction& b) { return a.type == b.type && a.op == b.op; }
};
// The NCCL reduction that computes `op` on `d`, with the gloo backend's meaning: on bool, sum and
// max are a logical or (NCCL's max over 0/1 bytes), product and min a logical and (min); avg is
// ncclAvg, on floating dtypes only (DTypeError otherwise, naming `collective`); integer sums and
// products wrap.
Reduction reduction(ReduceOp op, DType d, const char* collective);

}  // namespace nabla::distributed::nccl_plan
