//===- Runnable.h - Which IR ops the CPU runtime can run -------*- C++ -*-===//
#pragma once

#include "ir/Module.h"

#include "llvm/Support/Error.h"

#include <string>

namespace pax {

/// The op's kind as the plan names it, and for an op imported as `opaque`,
/// the ONNX op type it stands for (`IsNaN`), for messages.
std::string describeOpKind(const Op &op);

/// True when the CPU runtime has a kernel for \p op's kind.
bool hasCpuKernel(const Op &op);

/// An error naming every op of \p m's main function the CPU runtime has no
/// kernel for (by node name and ONNX type), so that no plan holding one is
/// ever written; success when there is none.
llvm::Error checkRunnable(const Module &m);

} // namespace pax
