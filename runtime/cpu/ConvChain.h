//===- ConvChain.h - A convolution and its epilogue as one kernel -*- C++
//-*-===//
//
// In an inference plan a channels-last convolution is usually followed by
// a batch norm, a relu, and at the end of a residual block an add of the
// shortcut and another relu, each reading only the result before it. The
// CPU device (Device::fuses, Device::launchChain) runs such a chain as one
// oneDNN convolution: the batch norm folded into the packed weights and the
// bias, the relus and the add as post-ops, so the intermediate results are
// never written. The chain is read off the computes' kinds and maps: each
// link reads the one before point by point (the same map as its result's),
// the batch norm's parameters along the output's channel.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_CPU_CONVCHAIN_H
#define PAX_RUNTIME_CPU_CONVCHAIN_H

#include "runtime/Backend.h"
#include "runtime/cpu/DnnlConv.h"

namespace pax::runtime::cpu {

/// How many computes of \p chain, from the first, run as one convolution
/// with its epilogue: a 2-D convolution with a channels-last result (or,
/// where \p sixteenBit, its result is 16-bit, an NCHW one), then in this
/// order and each optional a batch norm, a relu, an add (or sum) of
/// another tensor and a relu. 1 when none (or paxc is built without
/// oneDNN).
size_t convChainLength(llvm::ArrayRef<const plan::Compute *> chain,
                       bool sixteenBit);

/// Runs \p links (as many as convChainLength said) as one oneDNN
/// convolution, keeping its primitive and packed weights in \p cache.
/// False, having written nothing, where the buffers do not allow it (their
/// types or shapes, an output that shares bytes with an input) or oneDNN
/// takes no such convolution.
llvm::Expected<bool> runConvChain(llvm::ArrayRef<ChainLink> links,
                                  DnnlCache &cache);

} // namespace pax::runtime::cpu

#endif // PAX_RUNTIME_CPU_CONVCHAIN_H
