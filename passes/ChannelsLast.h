//===- ChannelsLast.h - Convolution activations stored NHWC -----*- C++ -*-===//
//
// A 2-D convolution's activations are stored [n, c, h, w] as ONNX writes
// them; a CPU (oneDNN's brgemm kernels) and a GPU's tensor cores (cuDNN)
// compute convolutions fastest on [n, h, w, c]. channelsLast stores the
// activations around convolutions channels-last. It changes storage only:
// each chosen value's type is permuted and every map that reads or writes
// it is permuted alike, so every op computes what it did, point by point.
// Ops that write a chosen value point by point (batch norm, relu, the
// residual add) also walk their iteration space in the new order, so their
// innermost dim is the contiguous one.
//
// Chosen: the 4-D activations a 2-D convolution reads or writes, and those
// joined to them through point-by-point ops of the same shape, pools and
// concats. Never a
// function argument or a returned value (the model's interface keeps its
// layout: the first convolution reads NCHW and writes NHWC), nor a value
// some op reads or writes through a map whose meaning is not its indices
// alone (a whole-dim `*` or a lookup), or whose kind is not one whose
// kernels are defined by the maps alone (elementwise, layout, reductions,
// convolution, pools, batch norm, LRN; not an average pool that counts
// padding, whose `pads` name trailing dims).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

namespace pax {

/// Stores the activations around \p m's 2-D convolutions channels-last;
/// returns how many values it changed.
unsigned channelsLast(Module &m);

} // namespace pax
