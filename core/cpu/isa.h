// The instruction set nabla's CPU kernels use, chosen once at start-up from what the processor
// supports: the AVX2/FMA build where the CPU has AVX2 and FMA, the portable one otherwise.
// NABLA_CPU_ISA=base in the environment forces the portable one (to test it).
#pragma once

namespace nabla::cpu {

enum class Isa { base, avx2 };
Isa isa();
const char* isa_name(Isa isa);  // "base", "avx2"

}  // namespace nabla::cpu
