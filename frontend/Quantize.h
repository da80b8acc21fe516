//===- Quantize.h - Quantized ONNX ops as float and integer ops -*- C++ -*-===//
//
// ONNX's linear quantization ops, written before import as the ops that
// define them, so they split, differentiate and run like those:
//
//   DequantizeLinear(x, s, z, axis)  = (x - z) * s   (s, z along axis)
//   QuantizeLinear(x, s, z, axis)    = Cast(Clip(Round(x / s) + z, lo, hi))
//                                      (halves to even; lo, hi: z's type)
//   MatMulInteger(a, b, za, zb)      = Cast<i32>((a - za) @ (b - zb)), in f64
//   ConvInteger(x, w, zx, zw)        = Cast<i32>(Conv(x - zx, w - zw)), in f64
//   QLinearMatMul / QLinearConv      = QuantizeLinear of the product of the
//                                      dequantized operands (and bias), in f64
//
// The products run in f64, where every sum of 8-bit products is exact.
// DynamicQuantizeLinear comes as its ONNX function body, whose
// QuantizeLinear this then lowers. Block quantization (opset 21's
// block_size), float8 and 4-bit types are errors naming the node.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/Support/Error.h"

#include <onnx/onnx_pb.h>

namespace pax {

/// Rewrites the ops above in \p model (default-domain opset \p opset);
/// errors name \p path and the node.
llvm::Error lowerQuantized(llvm::StringRef path, onnx::ModelProto &model,
                           int64_t opset);

} // namespace pax
