//===- OnnxImporter.h - ONNX models into the paxc IR ----------------------===//
#pragma once

#include "frontend/Loss.h"
#include "frontend/TrainingMode.h"
#include "ir/Module.h"

#include "llvm/Support/Error.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace pax {

/// How to import a model.
struct ImportOptions {
  /// Values of symbolic dims (`--dim NAME=VALUE`).
  std::map<std::string, int64_t> dims;
  /// The leading (batch) dim of every data input (`--batch=N`).
  std::optional<int64_t> batch;
  /// A training loss to append to the graph (`--loss`, Loss.h).
  LossOptions loss;
  /// BatchNormalization and Dropout in training mode (TrainingMode.h).
  TrainingModeOptions trainingMode;
  /// The seed of random ops (`--seed`): dropout's masks.
  uint64_t seed = 0;
  /// Graph inputs frozen to given values (`--bind NAME=FILE`): each becomes
  /// an initializer holding them, so that shapes, axes and other values
  /// computed from it fold at import.
  std::map<std::string, onnx::TensorProto> bindings;
};

/// A module and the warnings its import produced.
struct ImportResult {
  std::unique_ptr<Module> module;
  std::vector<std::string> warnings;
};

/// Reads an ONNX model (binary protobuf, or protobuf text when the file name
/// ends in `.onnxtxt`, `.txtpb` or `.textproto`) into the IR. Every problem
/// in the model is an error that names the file and the node.
llvm::Expected<ImportResult> importOnnxFile(llvm::StringRef path,
                                            const ImportOptions &options);

/// importOnnxFile of the file \p bytes, as if read from \p path (which
/// names it in errors, says whether it is text, and is where external data
/// is looked for).
llvm::Expected<ImportResult> importOnnxBytes(llvm::StringRef path,
                                             llvm::StringRef bytes,
                                             const ImportOptions &options);

/// The model protobuf of \p path (binary or text, as importOnnxFile reads
/// it), checked as importOnnxFile checks it before importing.
llvm::Expected<onnx::ModelProto> readOnnxModel(llvm::StringRef path);

} // namespace pax
