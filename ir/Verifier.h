//===- Verifier.h - Structural checks of the paxc IR ----------------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/Twine.h"

namespace pax {

/// Receives one problem: the op it is about (nullptr for module-level
/// problems) and a lower-case message.
using VerifyReporter =
    llvm::function_ref<void(const Op *op, const llvm::Twine &message)>;

/// Checks the invariants every pass may rely on: values defined before use,
/// access maps that fit their tensors and iteration spaces, unique names,
/// dense data of the right size. Returns true when \p m is valid.
bool verifyModule(const Module &m, VerifyReporter report);

} // namespace pax
