//===- StepFlags.h - paxc's training step options ---------------*- C++ -*-===//
//
// The flags of a training step's optimizer, loss scaling and gradient
// precision (--optimizer, --lr, ..., --loss-scale, --grad-reduce), and
// what paxc builds from them.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/autodiff/Optimizer.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"

namespace pax::paxc {

/// The training step options' category (paxc --help).
extern llvm::cl::OptionCategory trainCategory;

/// The optimizer of a training step on \p replicas devices, from the
/// flags; \p lossScale the loss-scale state where the step scales its loss.
llvm::Expected<OptimizerOptions> optimizerFromFlags(int64_t replicas,
                                                    const Global *lossScale);

/// Whether a training step (\p trainingStep) scales its loss
/// (--loss-scale; auto: with --precision=fp16); an error for bad values.
llvm::Expected<bool> lossScaling(bool trainingStep);

/// --loss-scale-init.
double lossScaleInitial();

/// Every training step option's value checked, whatever the path takes
/// (an error names the first malformed or out of range).
llvm::Error checkStepFlagValues();

/// --grad-reduce: whether the gradients are summed in fp32.
llvm::Expected<bool> fp32Gradients();

} // namespace pax::paxc
