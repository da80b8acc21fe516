//===- Checkpoint.h - A training session's checkpoint files -----*- C++ -*-===//
//
// `paxrun --train --checkpoint=DIR` writes DIR/checkpoint.txt (the plan's
// fingerprint and the next step) and DIR/tensor_N.pb (each updated weight
// and optimizer state as an ONNX TensorProto); `--resume=DIR` reads them
// back. The readers check everything against the plan they resume: a
// checkpoint of another plan, a tensor the plan never loads, or one of
// another shape or element type is an error.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/plan/Plan.pb.h"
#include "runtime/Tensor.h"

#include "llvm/Support/Error.h"

#include <string>
#include <utility>

namespace pax {

/// A fingerprint of \p plan: a checkpoint resumes only the plan it came
/// from.
std::string planFingerprint(const plan::Plan &plan);

/// The step a checkpoint index (checkpoint.txt's \p text) resumes at, after
/// checking that it was written for the plan of \p fingerprint; \p origin
/// names it in errors.
llvm::Expected<unsigned> parseCheckpointIndex(llvm::StringRef text,
                                              llvm::StringRef origin,
                                              llvm::StringRef fingerprint);

/// A checkpoint tensor file's \p bytes (\p path names it and its folder
/// holds its external data), checked against \p plan: a weight the plan
/// loads, with that weight's shape and element type.
llvm::Expected<std::pair<std::string, runtime::Tensor>>
parseCheckpointTensor(llvm::StringRef bytes, llvm::StringRef path,
                      const plan::Plan &plan);

} // namespace pax
