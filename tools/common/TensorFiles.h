//===- TensorFiles.h - ONNX tensor files and runtime tensors for tools ----===//
#pragma once

#include "frontend/ConstTensor.h"
#include "runtime/Tensor.h"

#include "llvm/Support/Error.h"

#include <onnx/onnx_pb.h>

namespace pax {

/// Reads a TensorProto file (ONNX's test-data layout), its name into
/// \p name where given; errors say "cannot read <what> 'path'" or what is
/// wrong with the data.
llvm::Expected<ConstTensor> readTensorFile(llvm::StringRef path,
                                           llvm::StringRef what,
                                           std::string *name = nullptr);

/// readTensorFile of the file's \p bytes; \p path names it in errors.
llvm::Expected<ConstTensor> parseTensorFile(llvm::StringRef bytes,
                                            llvm::StringRef path,
                                            std::string *name = nullptr);

/// Reads a NumPy `.npy` file (format 1.0-3.0, little-endian bool, int8-64,
/// uint8-64, float16/32/64, C order); errors name \p what and the path.
llvm::Expected<runtime::Tensor> readNpyFile(llvm::StringRef path,
                                            llvm::StringRef what);

/// readNpyFile of the file's \p data; \p path names it in errors.
llvm::Expected<runtime::Tensor> parseNpy(llvm::StringRef data,
                                         llvm::StringRef path);

/// Writes \p t as a `.npy` file (format 1.0).
llvm::Error writeNpyFile(llvm::StringRef path, const runtime::Tensor &t);

/// \p t as an ONNX TensorProto named \p name (raw little-endian data).
onnx::TensorProto toTensorProto(llvm::StringRef name, const runtime::Tensor &t);

/// Writes \p t as an ONNX TensorProto file named \p name, keeping its
/// element type (raw little-endian data, as ONNX's test data stores it).
llvm::Error writeTensorFile(llvm::StringRef path, llvm::StringRef name,
                            const runtime::Tensor &t);

/// Copies \p c's values into \p out (same element count), converting to
/// out's element type.
void copyValues(const ConstTensor &c, runtime::Tensor &out);

/// \p c as a runtime tensor of the same type and shape.
runtime::Tensor toRuntimeTensor(const ConstTensor &c);

} // namespace pax
