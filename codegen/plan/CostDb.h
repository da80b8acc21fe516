//===- CostDb.h - Measured op costs: the cost database file -----*- C++ -*-===//
//
// What one op block (a device's part of an op in one configuration) takes
// on a machine, measured by `paxrun --write-cost-db` running a cost probe
// (paxc --emit=cost-probe) or any plan, and read by `paxc --cost-db`, whose
// cost model and simulator then price each block by its measurement instead
// of the device's peak rate (FlexFlow's measured task times). Entries are
// keyed by the block's signature hash (opBlockKey in ir/Printer.h), which
// the plan carries as Compute.cost_key.
//
// The file is JSON (docs/USER_GUIDE.md):
//   {"format": "paxc-cost-db", "version": 1, "backend": "cpu",
//    "threads": 1, "runs": 5,
//    "ops": [{"key": "9f0c...", "op": "matmul [b: 4, ...]",
//             "seconds": 1.2e-05, "calls": 5}, ...]}
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <optional>
#include <string>

namespace pax {

struct CostDb {
  /// Where it was measured: the backend, its worker threads per process
  /// (0: every core) and the runs averaged.
  std::string backend;
  unsigned threads = 0;
  unsigned runs = 0;
  struct Entry {
    std::string op; ///< what the block computes, for people
    double seconds; ///< mean seconds of one call
    int64_t calls;  ///< calls measured
  };
  /// By cost key.
  llvm::StringMap<Entry> ops;

  /// Seconds of the block with cost key \p key, if measured.
  std::optional<double> seconds(llvm::StringRef key) const;
};

/// Reads a cost database from JSON \p text; \p origin (the file) prefixes
/// errors, which name the entry and field.
llvm::Expected<CostDb> parseCostDb(llvm::StringRef text,
                                   llvm::StringRef origin);
/// Reads the cost database file \p path.
llvm::Expected<CostDb> readCostDb(llvm::StringRef path);

/// \p db as the JSON parseCostDb reads (entries sorted by key).
llvm::json::Value costDbToJson(const CostDb &db);

} // namespace pax
