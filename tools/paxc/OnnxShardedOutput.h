//===- OnnxShardedOutput.h - paxc --emit=onnx-sharded -----------*- C++ -*-===//
#pragma once

#include "passes/sharding/StrategyIO.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

namespace pax::paxc {

/// --emit=onnx-sharded: the source model at \p inputPath, each node that
/// became ops of \p m annotated with the sharding of its outputs under
/// \p r: those of the node's last op, reduced (the layout the consumers
/// read it in), written to \p os (\p outputPath named in paxc's line).
llvm::Error writeOnnxSharded(const Module &m, const StrategyReport &r,
                             llvm::StringRef inputPath,
                             llvm::StringRef outputPath, bool quiet,
                             llvm::raw_ostream &os);

} // namespace pax::paxc
