//===- Scan.h - Running results along a seq dim ----------------*- C++ -*-===//
#ifndef PAX_RUNTIME_CPU_SCAN_H
#define PAX_RUNTIME_CPU_SCAN_H

#include "runtime/cpu/KernelContext.h"

namespace pax::runtime::cpu {

/// True for the scan kinds (`"cum_sum"`).
bool isScanKind(llvm::StringRef kind);

/// CumSum: for each point of the parallel dims, the running sum of input 0
/// along the op's one `seq` dim (backwards with `reverse`, each element
/// left out of its own sum with `exclusive`), in double for floats and
/// int64 for integers, in order, so results do not depend on threads.
llvm::Error runScan(const Prepared &p);

/// TopK: for each point of the parallel dims, the `k` best elements of
/// input 0 along its `seq` dim `axis` (largest or smallest, equal values
/// by lower index; TopKMath.h), written in order along the last dim (`k`,
/// `seq`): values to output 0, their indices along the axis to output 1.
llvm::Error runTopK(const Prepared &p);

} // namespace pax::runtime::cpu

#endif // PAX_RUNTIME_CPU_SCAN_H
