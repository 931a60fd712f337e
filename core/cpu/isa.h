// The instruction sets nabla's CPU kernels use, chosen once at start-up (register.cpp) from what the
// processor supports. Every kernel file is compiled twice (CMakeLists.txt): a portable build and an
// AVX2/FMA build. Some kernels of the AVX2 build (the GEMM micro-kernels, the direct convolutions,
// 2x2 max pooling) also have AVX-512 paths, compiled there with target attributes; they run on CPUs
// with AVX-512 F/DQ/VL/BW.
//
// Overrides, to test the other paths on one machine:
// - NABLA_CPU_ISA=base: the portable build;
// - NABLA_GEMM_KERNEL=avx2 (or any value but avx512): the AVX2 build without its AVX-512 paths;
//   NABLA_GEMM_KERNEL=generic: the same, with the GEMM on its portable micro-kernel.
#pragma once

namespace nabla::cpu {

enum class Isa { base, avx2, avx512 };

// The build whose kernels run: Isa::base or Isa::avx2 (CPUs with AVX-512 run the AVX2 build too).
Isa isa();
// The widest instructions the kernels use: base, avx2 or avx512 (the AVX2 build's AVX-512 paths).
Isa vector_isa();
// The GEMM micro-kernels' instruction set: vector_isa(), or base under NABLA_GEMM_KERNEL=generic.
Isa gemm_isa();

const char* isa_name(Isa isa);  // "base", "avx2", "avx512"

}  // namespace nabla::cpu

// Calls `fn(args...)` of the CPU build that runs (isa()): `base::fn` or `avx2::fn`, looked up from the
// namespace of the call, which declares both (each kernel file is compiled into both). The one place
// that turns isa() into a build: the kernel table (register.cpp) and optim/'s fused steps use it.
#if defined(NABLA_HAVE_AVX2_BUILD)
#define NABLA_CPU_BUILD_CALL(fn, ...) \
  (::nabla::cpu::isa() == ::nabla::cpu::Isa::avx2 ? avx2::fn(__VA_ARGS__) : base::fn(__VA_ARGS__))
#else
#define NABLA_CPU_BUILD_CALL(fn, ...) base::fn(__VA_ARGS__)
#endif
