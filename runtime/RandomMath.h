//===- RandomMath.h - Counter-based random numbers, host and device -*- C++ -*-===//
//
// random_uniform's numbers: each element's u in [0, 1) comes from 53 bits
// of XXH3-64 (seed 0, the default secret) of four little-endian words
// (seed, key, step, the element's index in the whole result), so any
// block of a split result, on any backend, holds the unsplit result's
// numbers. XXH3 of a 32-byte input is its 17-to-128-byte path, written
// here so the CUDA kernels compute it too; the unit tests check it against
// llvm::xxh3_64bits.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_RANDOMMATH_H
#define PAX_RUNTIME_RANDOMMATH_H

#include "runtime/HostDevice.h"

namespace pax::runtime {

namespace xxh3 {
inline constexpr uint64_t kPrime64_1 = 11400714785074694791ULL;
inline constexpr uint64_t kPrimeMx1 = 0x165667919E3779F9ULL;
/// The first 32 bytes of XXH3's default secret, as little-endian words
/// (scalars: nvcc reads constexpr scalars in device code, not arrays).
inline constexpr uint64_t kSecret0 = 0xbe4ba423396cfeb8ULL;
inline constexpr uint64_t kSecret1 = 0x1cad21f72c81017cULL;
inline constexpr uint64_t kSecret2 = 0xdb979083e96dd4deULL;
inline constexpr uint64_t kSecret3 = 0x1f67b3b7a4a44072ULL;

/// The 128-bit product of \p a and \p b, its halves XORed.
PAX_HD inline uint64_t mulFold(uint64_t a, uint64_t b) {
#if defined(__CUDA_ARCH__)
  return (a * b) ^ __umul64hi(a, b);
#else
  unsigned __int128 p = (unsigned __int128)a * b;
  return uint64_t(p) ^ uint64_t(p >> 64);
#endif
}

PAX_HD inline uint64_t avalanche(uint64_t h) {
  h ^= h >> 37;
  h *= kPrimeMx1;
  h ^= h >> 32;
  return h;
}
} // namespace xxh3

/// XXH3-64 (seed 0) of the 32 bytes of \p w, four little-endian words.
PAX_HD inline uint64_t xxh3Of4Words(const uint64_t w[4]) {
  using namespace xxh3;
  uint64_t acc = 32 * kPrime64_1;
  acc += mulFold(w[0] ^ kSecret0, w[1] ^ kSecret1);
  uint64_t end = mulFold(w[2] ^ kSecret2, w[3] ^ kSecret3);
  return avalanche(acc + end);
}

/// The uniform number in [0, 1) of element \p index of random_uniform
/// (\p seed, \p key) at training step \p step.
PAX_HD inline double uniformAt(uint64_t seed, uint64_t key, uint64_t step,
                               uint64_t index) {
  uint64_t w[4] = {seed, key, step, index};
  return double(xxh3Of4Words(w) >> 11) * 0x1.0p-53;
}

} // namespace pax::runtime

#endif // PAX_RUNTIME_RANDOMMATH_H
