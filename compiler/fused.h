// A fused elementwise program: a chain of float32 elementwise ops run in one pass over memory
// (compiler/cpu/fused.cpp). The pass compiler/passes.cpp builds one from a run of traced
// elementwise nodes; the replay runs it over blocks of 256 elements held in registers' worth of
// stack arrays, so the intermediate tensors are never written to memory.
//
// Registers 0..n_inputs-1 hold the inputs; each instruction writes one register; `outs` are written
// to memory (the values read after the program: usually one, the chain's result).
// An input is read whole (the output's shape), as one number (a 0-d operand such as `x * 0.5`), or
// repeated with a period (a trailing-dims broadcast: a bias [C] over [N, C]).
#pragma once

#include <cstdint>
#include <vector>

#include "../core/elementwise_ops.h"
#include "../core/op_schema.h"

namespace nabla::compiler {

// Registers a program may use (inputs included): the pass stops a chain there.
inline constexpr int kMaxFusedRegs = 48;

struct FusedInstr {
  enum Kind : uint8_t { unary, binary, pow_scalar } kind = unary;
  UnaryOp uop{};
  BinaryOp bop{};
  int16_t dst = 0, a = 0, b = 0;
  double p0 = 0, p1 = 0;  // unary: the op's parameters; pow_scalar: p0 is the exponent
  double alpha = 1;       // binary: add's and sub's scale of b
};

struct FusedInput {
  enum Read : uint8_t { whole, one, periodic } read = whole;
  int64_t period = 0;  // periodic: element i reads input[i % period]
};

struct FusedProgram {
  std::vector<FusedInstr> code;
  std::vector<FusedInput> inputs;
  std::vector<int16_t> outs;  // the registers written out (values read after the program), in order
  std::vector<OpId> ops;      // the ops fused, in order (for dumps and errors)
  int n_regs = 0;
};

// Runs p over n elements: in[i] points at input i's data (float32, contiguous), out[j] at output
// j's. Threaded over blocks for large n. The CPU build's instruction set (core/cpu/isa.h).
void run_fused_cpu(const FusedProgram& p, const float* const* in, float* const* out, int64_t n);

}  // namespace nabla::compiler
