//===- MaxPoolGrad.h - A max pool's gradient as one kernel ------*- C++ -*-===//
//
// Autodiff writes a max pool's input gradient as three computes over the
// window points [n, c, oh, ow, kh, kw] (passes/autodiff/WindowRules.cpp):
// `equal` of each point's input with its window's maximum, `where` that
// routes dy to the points that are equal (a constant to the others), and
// `scatter_add` of the points back through the window. Run one by one they
// store a bool and an f32 per window point and read the input through a
// padded window on the generic kernel. The CPU device (Device::fuses,
// Device::launchChain) runs the three as one pass over each (image,
// channel) plane, adding the points in the order the scatter adds them, so
// the gradient is the same bit for bit.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_CPU_MAXPOOLGRAD_H
#define PAX_RUNTIME_CPU_MAXPOOLGRAD_H

#include "runtime/Backend.h"

namespace pax::runtime::cpu {

/// 3 when \p chain starts with such an equal, where and scatter_add (the
/// input read NCHW through a 2-D window, the maximum and dy [n, c, oh,
/// ow], the constant one value), else 1.
size_t maxPoolGradChainLength(llvm::ArrayRef<const plan::Compute *> chain);

/// Runs \p links (as maxPoolGradChainLength took them) as one kernel.
/// False, having written nothing, where the buffers do not fit (not dense
/// f32, the gradient another shape than the input).
llvm::Expected<bool> runMaxPoolGradChain(llvm::ArrayRef<ChainLink> links);

} // namespace pax::runtime::cpu

#endif // PAX_RUNTIME_CPU_MAXPOOLGRAD_H
