//===- Parser.h - Reads the text form of the paxc IR ----------------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/SMLoc.h"
#include "llvm/Support/SourceMgr.h"

#include <memory>

namespace pax {

/// Where each op was parsed, so later diagnostics can point at it.
using OpLocations = llvm::DenseMap<const Op *, llvm::SMLoc>;

/// Parses the module in buffer \p bufferId of \p sm. Errors are reported
/// through \p sm as `file:line:col: error: ...` with a caret; returns nullptr
/// after the first error.
std::unique_ptr<Module> parseModule(llvm::SourceMgr &sm, unsigned bufferId,
                                    OpLocations *locations = nullptr);

} // namespace pax
