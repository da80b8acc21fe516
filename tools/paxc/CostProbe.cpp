//===- CostProbe.cpp - The blocks paxc --emit=cost-probe measures ---------===//
#include "tools/paxc/CostProbe.h"

#include "ir/Printer.h"
#include "passes/sharding/Solve.h"

#include "llvm/ADT/StringSet.h"

namespace pax::paxc {

ProbeSet probeBlocks(const Module &m, const ConfigOptions &co) {
  llvm::DenseSet<const Op *> everywhere = constantOps(m);
  ProbeSet out;
  llvm::StringSet<> seen;
  for (const auto &op : m.main.ops) {
    // An op computed from constants runs whole, each time: the blocks
    // after it read its values.
    bool constant = everywhere.contains(op.get());
    std::vector<Config> space =
        constant ? std::vector<Config>{Config(op->iters.size(), 1)}
                 : enumerateConfigs(*op, co);
    out.configs += space.size();
    for (Config &c : space)
      if (seen.insert(opBlockKey(*op, localExtents(*op, c))).second || constant)
        out.blocks.push_back({op.get(), std::move(c), constant});
  }
  out.distinct = seen.size();
  return out;
}

} // namespace pax::paxc
