//===- FuseKernels.h - Ops grouped into fused kernels -----------*- C++ -*-===//
//
// The first step of fusion as an IR concept: runs of consecutive ops that
// one kernel can compute point by point or row by row, found from the
// iteration spaces and access maps alone, each marked `kernel = "kN"`
// (printed as a `fused "kN" { ... }` region, IR.md). An op joins the
// kernel of the ops before it when
//
//   - it computes each point of its space alone (no reduction dims:
//     elementwise, broadcast and transpose-like ops) or each row (a
//     normalization or a reduction whose reduction dims are its operands'
//     and results' last dims, kept or dropped to `_`: softmax, layer and
//     RMS norm, a mean over the last dim), its results written through
//     plain dims (or `_`) that cover its parallel dims, or (a reshape)
//     through row-major groups of dims that cover its space;
//   - each value it reads from the kernel is read at exactly the point
//     that wrote it: both maps plain over dims of equal extent, split the
//     same way (`config`) from the same device (`offset`), the reader's
//     other dims unsplit; through row-major groups only where the dims
//     either side groups are unsplit (a value also read outside the
//     kernel, or returned, is written out as well);
//   - it reads some value of the kernel, or it iterates the same space as
//     the kernel's first op, split the same way (a sibling, such as GELU's
//     0.5 * x, that a later op of the kernel reads).
//
// A contraction (matmul, gemm, convolution) joins no kernel but heads one
// of its elementwise epilogue (a bias, an activation, an inference batch
// norm, a residual add: what cuBLASLt and cuDNN fuse, and what the CPU
// backend folds into a convolution, runtime/cpu/ConvChain.h), unless its
// reduction is split (its result is partial sums, added up first).
//
// A collective, a contraction, a reduction over other than the last dims, a
// read through another map (an offset, a window, a lookup) or any other op
// ends a kernel. paxc runs this on a plan's partitioned IR; codegen
// generates kernels for the groups (runtime/GenerateKernels.h).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/Support/raw_ostream.h"

namespace pax {

/// Marks \p m's fused kernels (replacing any marks); returns how many
/// kernels of two or more ops it found. With \p remarks, says for each op
/// that ends a kernel why it does not join it (`fuse-kernels: KIND 'NAME'
/// does not join the kernel of KIND 'NAME': WHY`, the name where the op
/// has one).
unsigned fuseKernels(Module &m, llvm::raw_ostream *remarks = nullptr);

} // namespace pax
