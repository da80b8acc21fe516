//===- ConstantFolder.h - Evaluates ops whose operands are all known ------===//
#pragma once

#include "frontend/ConstTensor.h"

#include "ir/Module.h"

#include <optional>

namespace pax {

/// Evaluates \p op on known operands, reading and writing through its access
/// maps: the same maps every pass relies on, so folding also exercises them.
/// Returns one tensor per result, or std::nullopt when the op is not
/// foldable (normalizations, windows, recurrences) or too large to fold.
std::optional<std::vector<ConstTensor>>
foldOp(const Op &op, llvm::ArrayRef<const ConstTensor *> operands);

/// The scalar function of an elementwise op kind, in double precision.
double applyElementwise(const Op &op, llvm::ArrayRef<double> args);

} // namespace pax
