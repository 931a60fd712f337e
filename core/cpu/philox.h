// Philox4x32-10 for many counters at once, for the CPU kernels that draw random numbers (random.cpp,
// the dropout of fused attention in attention.cpp). Internal to core/cpu; compiled into each ISA
// build.
#pragma once

#include <cstdint>

#include "../generator.h"
#include "kernels.h"

namespace nabla::cpu::NABLA_CPU_ISA {

// Philox::block (core/generator.h) for kLanes consecutive counters at once: the same rounds and
// constants (Random.ElementsFollowThePhiloxStream checks the words agree). Each word lives in
// its own array across the lanes, held in 64-bit lanes so that the 32x32->64-bit products
// vectorize (pmuludq takes the low halves: the masks say so), and every round is a few vector
// instructions over all lanes instead of kLanes scalar passes.
inline constexpr int kLanes = 16;
inline void philox_lanes(uint64_t key, uint64_t counter0, uint32_t (&w)[4][kLanes]) {
  constexpr uint64_t kLow = 0xffffffffu;
  uint64_t c0[kLanes], c1[kLanes], c2[kLanes], c3[kLanes];
  for (int l = 0; l < kLanes; ++l) {
    const uint64_t c = counter0 + static_cast<uint64_t>(l);
    c0[l] = c & kLow;
    c1[l] = c >> 32;
    c2[l] = c3[l] = 0;
  }
  uint64_t k0 = key & kLow, k1 = key >> 32;
  for (int r = 0; r < Philox::kRounds; ++r) {
    for (int l = 0; l < kLanes; ++l) {
      const uint64_t p0 = Philox::kMul0 * (c0[l] & kLow), p1 = Philox::kMul1 * (c2[l] & kLow);
      const uint64_t n0 = (p1 >> 32) ^ c1[l] ^ k0, n2 = (p0 >> 32) ^ c3[l] ^ k1;
      c1[l] = p1 & kLow;
      c3[l] = p0 & kLow;
      c0[l] = n0;
      c2[l] = n2;
    }
    k0 = (k0 + Philox::kWeyl0) & kLow;
    k1 = (k1 + Philox::kWeyl1) & kLow;
  }
  for (int l = 0; l < kLanes; ++l) {
    w[0][l] = static_cast<uint32_t>(c0[l]);
    w[1][l] = static_cast<uint32_t>(c1[l]);
    w[2][l] = static_cast<uint32_t>(c2[l]);
    w[3][l] = static_cast<uint32_t>(c3[l]);
  }
}

}  // namespace nabla::cpu::NABLA_CPU_ISA
