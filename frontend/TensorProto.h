//===- TensorProto.h - ONNX TensorProto data, checked ---------------------===//
#pragma once

#include "frontend/ConstTensor.h"

#include "llvm/Support/Error.h"

#include <onnx/onnx_pb.h>

#include <optional>

namespace pax {

/// The IR element type of an ONNX data type; std::nullopt when paxc does not
/// support it (strings, complex numbers, 4-bit and 8-bit floats).
std::optional<DType> dtypeFromOnnx(int32_t onnxType);
/// The ONNX data type of \p t (the inverse of dtypeFromOnnx).
int32_t dtypeToOnnx(DType t);
/// The name of ONNX data type \p elem in lower case ("float", "int64").
std::string onnxElemName(int32_t elem);

/// The type of \p t; an error for a negative or oversized dim or an
/// unsupported data type.
llvm::Expected<TensorType> tensorProtoType(const onnx::TensorProto &t);

/// Checks that \p t holds exactly as many values as its shape needs, and
/// that external data lies inside \p modelDir and inside its file.
llvm::Error checkTensorData(const onnx::TensorProto &t,
                            llvm::StringRef modelDir);

/// Reads the values of \p t (inline or external).
llvm::Expected<ConstTensor> readTensorProto(const onnx::TensorProto &t,
                                            llvm::StringRef modelDir);

/// \p v rounded to nearest even as the bits of a bfloat16 (\p bf16) or an
/// IEEE half.
uint16_t roundTo16Bits(double v, bool bf16);

} // namespace pax
