//===- Rnn.h - ONNX's RNN unrolled into matrix products -----------*- C++ -*-===//
//
// ONNX's simple RNN, H_t = f(X_t W^T + H_{t-1} R^T + Wb + Rb), written
// before import as its steps: X W^T for every step at once (one MatMul),
// then per step a MatMul by R^T, the activation (Tanh, Relu or Sigmoid;
// `clip` first), and with sequence_lens a mask that keeps each batch
// entry's state past its length and writes zeros to Y there. Forward,
// reverse and bidirectional; both layouts. The steps split, run and
// differentiate as the ops they are (LSTM and GRU import as whole
// recurrent ops instead). At most kMaxRnnSteps steps are unrolled.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/Support/Error.h"

#include <onnx/onnx_pb.h>

namespace pax {

/// The longest sequence an RNN node is unrolled over.
inline constexpr int64_t kMaxRnnSteps = 1024;

/// Replaces each RNN node of \p model's graph (default-domain opset
/// \p opset). Errors name \p path and the node: shapes that are not
/// static, unknown activations, sequence_lens with a reverse direction,
/// sequences longer than kMaxRnnSteps.
llvm::Error lowerRnns(llvm::StringRef path, onnx::ModelProto &model,
                      int64_t opset);

} // namespace pax
