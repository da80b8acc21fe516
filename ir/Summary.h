//===- Summary.h - Model statistics: parameters, FLOPs, op counts ---------===//
#pragma once

#include "ir/Module.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

namespace pax {

/// What `paxc --emit=summary` reports about a module.
struct ModelSummary {
  std::string name;
  int64_t parameters = 0;     ///< elements of all parameter tensors
  int64_t parameterBytes = 0; ///< bytes of all parameter tensors
  double flops = 0;           ///< forward FLOPs (a multiply-add counts 2)
  int64_t computeOps = 0;
  std::map<std::string, int64_t> ops;      ///< count per op kind
  std::map<std::string, double> flopsByOp; ///< forward FLOPs per op kind
  std::vector<std::string> unsupportedOps; ///< source op types, sorted
  std::vector<std::pair<std::string, TensorType>> inputs, outputs;
};

ModelSummary summarize(const Module &m);
llvm::json::Value summaryToJson(const ModelSummary &s);
void printSummaryText(const ModelSummary &s, llvm::raw_ostream &os);

} // namespace pax
