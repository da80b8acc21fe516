//===- Rewrites.h - paxc's graph-level rewrites after import ----*- C++ -*-===//
//
// The rewrites paxc applies to an imported model before it searches or
// plans, each behind its own flag (--fuse-attention, --fuse-gelu,
// --fuse-bias, --fold-copies, --channels-last, --precision).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"

namespace pax::paxc {

/// paxc's main option category (its --help).
extern llvm::cl::OptionCategory paxcCategory;

/// What the rest of the command line says about the program.
struct RewriteContext {
  /// --mode=train: a training step (priced or planned).
  bool trainMode = false;
  /// A backward pass follows (a training step, or --gradients).
  bool backward = false;
  /// --emit=onnx-sharded: the source model's layout is kept.
  bool onnxSharded = false;
  bool quiet = false;
  /// The devices a master weight's cast may run on at once (its replica
  /// dim's extent, AutocastOptions::replicas).
  int64_t replicas = 1;
};

/// Applies the rewrites the flags ask for to \p m, in order: attention
/// chains, GELUs, each matmul with the add after it, copies read through
/// (by attention and products too, unless a backward pass follows); for
/// an inference, channels-last activations where asked for; last the
/// precision (--precision): bf16 or fp16 autocast, with fp32 master
/// weights where a backward pass follows; tf32 marks the module so its
/// plans let f32 products use TF32.
llvm::Error rewriteImported(Module &m, const RewriteContext &c);

/// The low precision --precision asks for (bf16, fp16); nullopt for fp32
/// and tf32.
std::optional<DType> lowPrecision();

} // namespace pax::paxc
