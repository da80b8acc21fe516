//===- Loss.h - A training loss appended to an ONNX graph -----------------===//
//
// `--loss` appends the loss to the model before import, as ONNX nodes the
// importer already knows, so the loss is partitioned like any other op:
//
//   cross-entropy  loss = mean over positions of -log_softmax(y)[labels],
//                  y's last axis the classes, labels int64 of y's shape
//                  without it; with an ignore index, positions labelled with
//                  it count neither in the sum nor in the mean
//   mse            loss = mean over elements of (y - labels)^2, labels of
//                  y's type
//   output         y already is the loss (a float with one element)
//
// y is the model's first output or the one named. `labels` becomes the last
// graph input, and the scalar `loss` the graph's only output.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/Support/Error.h"

#include <onnx/onnx_pb.h>

#include <optional>
#include <string>

namespace pax {

/// What `--loss` asks for.
struct LossOptions {
  enum class Kind { None, CrossEntropy, Mse, Output };
  Kind kind = Kind::None;
  /// The output the loss reads (`--loss-output`); empty for the first.
  std::string output;
  /// Cross-entropy only: a label that marks a position to ignore.
  std::optional<int64_t> ignoreIndex;
};

/// "cross-entropy", "mse", "output"; nullopt otherwise.
std::optional<LossOptions::Kind> parseLossKind(llvm::StringRef name);

/// Appends the loss to \p model's graph (see the file comment). \p opset is
/// the model's default-domain opset. Errors name \p path and say what is
/// wrong with the output, the options or the model.
llvm::Error appendLoss(llvm::StringRef path, onnx::ModelProto &model,
                       int64_t opset, const LossOptions &options);

} // namespace pax
