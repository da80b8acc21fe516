//===- ConstantFolder.h - Evaluates ops whose operands are all known ------===//
#pragma once

#include "frontend/ConstTensor.h"

#include "ir/Module.h"
#include "runtime/cpu/ScalarOps.h"

#include <optional>

namespace pax {

/// Evaluates \p op on known operands, reading and writing through its access
/// maps: the same maps every pass relies on, so folding also exercises them.
/// Returns one tensor per result, or std::nullopt when the op is not
/// foldable (normalizations, windows, recurrences) or too large to fold.
std::optional<std::vector<ConstTensor>>
foldOp(const Op &op, llvm::ArrayRef<const ConstTensor *> operands);

/// The scalar function of an elementwise op: the CPU kernels' own
/// (runtime/cpu/ScalarOps.h), so a folded constant equals what the plan
/// would have computed.
class ElementwiseFn {
public:
  explicit ElementwiseFn(const Op &op);
  /// False for ops that are not elementwise.
  bool valid() const { return scalar.has_value(); }
  /// In double precision (float operands).
  double real(llvm::ArrayRef<double> args) const;
  /// In int64 (integer and bool operands and result).
  int64_t integer(llvm::ArrayRef<int64_t> args) const;

private:
  std::optional<runtime::cpu::ScalarOp> scalar;
  runtime::cpu::ScalarParams params;
};

} // namespace pax
