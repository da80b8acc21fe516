//===- EmitPlan.h - A whole module as a plan ------------------------------===//
#pragma once

#include "codegen/plan/Plan.pb.h"
#include "ir/Module.h"

#include "llvm/Support/Error.h"

namespace pax {

/// A plan that runs \p m unpartitioned on one device: a buffer per value
/// (laid out one after another; buffer reuse comes with buffer planning),
/// a load per global, a compute per op in order, and bindings of the
/// function's arguments and results. \p source is the ONNX model the
/// weights are read from, relative to where the plan will be written.
plan::Plan emitSingleDevicePlan(const Module &m, llvm::StringRef source);

} // namespace pax
