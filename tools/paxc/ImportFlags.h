//===- ImportFlags.h - paxc's options of the model's shapes and values ---===//
//
// The flags that fix what an exported model leaves open before import:
// symbolic dims (--dim), the batch (--batch), and graph inputs frozen to
// given values (--bind), checked and read into ImportOptions.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "frontend/OnnxImporter.h"

#include "llvm/Support/Error.h"

namespace pax::paxc {

/// Fills \p options' dims, batch and bindings from the flags (--bind reads
/// its files: `.npy`, or an ONNX TensorProto `.pb`); errors name the flag.
llvm::Error shapeOptionsFromFlags(ImportOptions &options);

} // namespace pax::paxc
