//===- ScalarOps.h - Per-element functions ---------------------*- C++ -*-===//
#ifndef PAX_RUNTIME_CPU_SCALAROPS_H
#define PAX_RUNTIME_CPU_SCALAROPS_H

#include "codegen/plan/Plan.pb.h"
#include "runtime/ScalarMath.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

namespace pax::runtime::cpu {

using runtime::ScalarOp;
using runtime::ScalarParams;

/// The scalar op of an elementwise kind (`"leaky_relu"`), if it is one.
std::optional<ScalarOp> parseScalarOp(llvm::StringRef kind);

/// Looks up a numeric attribute by name (ints and floats alike).
using NumberAttr = llvm::function_ref<std::optional<double>(llvm::StringRef)>;
/// Looks up a string attribute by name.
using StringAttr =
    llvm::function_ref<std::optional<std::string>(llvm::StringRef)>;

/// Reads the attributes \p op needs through \p number and \p text, with
/// ONNX's defaults. The constant folder reads IR attributes through it, the
/// kernels a plan's, so folding and running agree.
ScalarParams scalarParams(ScalarOp op, NumberAttr number, StringAttr text);

/// Reads the attributes \p op needs from \p c, with ONNX's defaults.
ScalarParams scalarParams(ScalarOp op, const plan::Compute &c);

/// Applies \p op to \p args in double precision (float tensors), as
/// runtime::applyReal (ScalarMath.h). Trilu returns its input; the kernel
/// zeroes the dropped side.
double applyReal(ScalarOp op, llvm::ArrayRef<double> args,
                 const ScalarParams &p);

/// Applies \p op to \p args in int64 (integer and bool tensors). Division
/// truncates toward zero like C++ (ONNX's Div on integers), a zero divisor
/// gives 0; ops with no integer meaning go through applyReal.
int64_t applyInteger(ScalarOp op, llvm::ArrayRef<int64_t> args,
                     const ScalarParams &p);

} // namespace pax::runtime::cpu

#endif // PAX_RUNTIME_CPU_SCALAROPS_H
