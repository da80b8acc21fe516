//===- FuseBias.h - A matmul and the add after it as one gemm ---*- C++ -*-===//
//
// Exporters write a linear layer as MatMul then Add (a bias, or a residual).
// fuseBias makes each such pair one `gemm` op over the matmul's dims with
// the added tensor as C (alpha = beta = 1): the product is never stored
// and read back, and every backend adds C where it computes the product
// (the CPU's GEMM, cuBLAS with beta = 1, a split reduction's first block
// only). The gemm writes the add's result and stands for its source node.
//
// A pair is left as it is when the product has another reader or is
// returned, when the add broadcasts the product (its result is larger),
// when the types differ, when the added tensor's map is not plain dims and
// broadcasts, or when the added tensor is computed after the matmul.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

namespace pax {

/// Makes every matmul whose only reader is an add one gemm with the add's
/// other operand as C; returns how many it fused.
unsigned fuseBias(Module &m);

} // namespace pax
