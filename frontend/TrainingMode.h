//===- TrainingMode.h - ONNX nodes in training mode, rewritten ------------===//
//
// Two ONNX ops mean something else in training: BatchNormalization and
// Dropout. paxc rewrites them before import into ops it already knows, so
// they are split, differentiated and run like any other.
//
// BatchNormalization on batch statistics (`training_mode=1`, or every one
// under `paxc --batchnorm=batch-stats`) normalizes with the mean and the
// (population) variance of its input over every axis but the channels, and
// moves its running statistics toward them:
//
//   mean = ReduceMean(X, axes), var = ReduceMean((X - mean)^2, axes)
//   Y = (X - mean) / sqrt(var + epsilon) * scale + B
//   running_mean' = running_mean * momentum + mean * (1 - momentum)
//   running_var'  = running_var * momentum + var * (1 - momentum)
//
// (ONNX's definition; torch's running variance is the unbiased one). The
// statistics are ordinary reductions: split over the batch, they are
// partial sums all-reduced over the devices, the statistics of the whole
// global batch however it is split. With running-statistics updates asked
// for (a training step), each running statistic held in an initializer gets
// a graph output `update/NAME`, which paxrun writes back after each step
// like an optimizer's update.
//
// Dropout in training mode (`training_mode` a constant true) becomes
//
//   keep = RandomUniformLike(X) >= ratio
//   Y = Where(keep, X / (1 - ratio), 0), mask = keep
//
// where RandomUniformLike is paxc's counter-based generator (keyed by
// `--seed`, the node, the training step and each element's global index:
// see importRandomUniform), so every partition drops the elements one
// device drops, and each step drops others.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/Support/Error.h"

#include <onnx/onnx_pb.h>

namespace pax {

struct TrainingModeOptions {
  /// Every BatchNormalization uses batch statistics (`--batchnorm=batch-stats`),
  /// not only those in training mode.
  bool batchStats = false;
  /// Append `update/NAME` outputs for the running statistics.
  bool updateRunningStats = false;
};

/// Rewrites \p model's training-mode BatchNormalization and Dropout nodes
/// (see the file comment). \p opset is the default-domain opset. Errors
/// name \p path and the node.
llvm::Error rewriteTrainingMode(llvm::StringRef path, onnx::ModelProto &model,
                                int64_t opset,
                                const TrainingModeOptions &options);

} // namespace pax
