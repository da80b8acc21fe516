//===- BatchStats.h - BatchNormalization over the batch's statistics ------===//
//
// A BatchNormalization in training mode (`training_mode=1`, or every one
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
// node is rewritten into those ONNX ops before import, so the statistics are
// ordinary reductions: split over the batch, they are partial sums
// all-reduced over the devices, the statistics of the whole global batch
// however it is split, and their gradients come from the reductions' rules.
// With running-statistics updates asked for (a training step), each running
// statistic held in an initializer gets a graph output `update/NAME`, which
// paxrun writes back after each step like an optimizer's update.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/Support/Error.h"

#include <onnx/onnx_pb.h>

namespace pax {

struct BatchNormOptions {
  /// Every BatchNormalization uses batch statistics (`--batchnorm=batch-stats`),
  /// not only those in training mode.
  bool batchStats = false;
  /// Append `update/NAME` outputs for the running statistics.
  bool updateRunningStats = false;
};

/// Rewrites \p model's batch-statistics BatchNormalization nodes (see the
/// file comment). \p opset is the default-domain opset. Errors name \p path
/// and the node.
llvm::Error rewriteBatchNorm(llvm::StringRef path, onnx::ModelProto &model,
                             int64_t opset, const BatchNormOptions &options);

} // namespace pax
