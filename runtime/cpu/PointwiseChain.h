//===- PointwiseChain.h - Elementwise ops run tile by tile as one -*- C++
//-*-===//
//
// A chain of elementwise ops, each reading the result before it (GELU as
// exporters write it: div, erf, add, mul, mul), runs as one pass on the CPU
// (Device::fuses, Device::launchChain): tile by tile, each op on the
// vectorized elementwise path over the tile, its result kept in a small
// buffer for the next, so only the chain's inputs and its last result
// touch memory. Each point is computed as the ops one by one compute it.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_CPU_POINTWISECHAIN_H
#define PAX_RUNTIME_CPU_POINTWISECHAIN_H

#include "runtime/Backend.h"

namespace pax::runtime::cpu {

/// How many computes of \p chain, from the first, run as one pass:
/// elementwise ops over one space whose results are written through plain
/// dims in order, each operand read through that same map (the result
/// before it, or an input of the same shape) or as one broadcast element.
/// 1 when fewer than two.
size_t pointwiseChainLength(llvm::ArrayRef<const plan::Compute *> chain);

/// Runs \p links (as many as pointwiseChainLength said) tile by tile.
/// False, having written nothing, where the buffers do not allow it (not
/// f32, other sizes, the result sharing some but not all bytes with an
/// input).
llvm::Expected<bool> runPointwiseChain(llvm::ArrayRef<ChainLink> links);

} // namespace pax::runtime::cpu

#endif // PAX_RUNTIME_CPU_POINTWISECHAIN_H
