//===- MatmulChain.h - A matrix product and its epilogue as one kernel -*- C++
//-*-===//
//
// A linear layer's product is usually followed by its activation (BERT's
// and GPT-2's GELU, a relu) or by the residual add, each reading only the
// result before it. The CPU device (Device::fuses, Device::launchChain)
// runs such a chain as one oneDNN matmul (cpu/DnnlMatmul.h): the
// activation and the add are post-ops, applied as each block of the result
// is written, so the product is never stored and read back. The chain is
// read off the computes' kinds and maps: each link reads the one before
// point by point (the same map as its result's).
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_CPU_MATMULCHAIN_H
#define PAX_RUNTIME_CPU_MATMULCHAIN_H

#include "runtime/Backend.h"
#include "runtime/cpu/DnnlCache.h"

namespace pax::runtime::cpu {

/// How many computes of \p chain, from the first, run as one matrix
/// product with its epilogue: a matmul or gemm, then in this order and
/// each optional a gelu or relu and an add (or sum) of another tensor. 1
/// when none (or paxc is built without oneDNN).
size_t matmulChainLength(llvm::ArrayRef<const plan::Compute *> chain);

/// Runs \p links (as many as matmulChainLength said) as one oneDNN matmul,
/// keeping its primitives and packed weight in \p cache. False, having
/// written nothing, where the product or the buffers do not allow it (see
/// runMatmulDnnl; an addend of another shape, an output that shares bytes
/// with an input).
llvm::Expected<bool> runMatmulChain(llvm::ArrayRef<ChainLink> links,
                                    DnnlCache &cache);

} // namespace pax::runtime::cpu

#endif // PAX_RUNTIME_CPU_MATMULCHAIN_H
