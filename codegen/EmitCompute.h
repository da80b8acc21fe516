//===- EmitCompute.h - IR ops as plan instructions ------------------------===//
#pragma once

#include "codegen/plan/Plan.pb.h"
#include "ir/Module.h"

#include "llvm/ADT/ArrayRef.h"

namespace pax {

/// The plan's element type for \p t.
plan::DType toPlanDType(DType t);
/// The IR element type of a plan's (the inverse of toPlanDType).
DType fromPlanDType(plan::DType t);

/// \p op as a plan Compute instruction over its whole iteration space:
/// kind, iteration dims, access maps, attributes and source name. Operand i
/// reads buffer \p inputs[i]; result i writes buffer \p outputs[i].
plan::Compute emitCompute(const Op &op, llvm::ArrayRef<uint32_t> inputs,
                          llvm::ArrayRef<uint32_t> outputs);

} // namespace pax
