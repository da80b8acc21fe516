//===- Levers.cpp - How a training step trades time for memory ------------===//
#include "passes/cost/Levers.h"

#include "ir/Soap.h"

#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

namespace pax {

std::optional<RecomputePolicy> parseRecompute(llvm::StringRef s) {
  return llvm::StringSwitch<std::optional<RecomputePolicy>>(s)
      .Case("none", RecomputePolicy::None)
      .Case("auto", RecomputePolicy::Auto)
      .Case("all", RecomputePolicy::All)
      .Default(std::nullopt);
}

llvm::StringRef recomputeName(RecomputePolicy p) {
  switch (p) {
  case RecomputePolicy::None:
    return "none";
  case RecomputePolicy::Auto:
    return "auto";
  case RecomputePolicy::All:
    return "all";
  }
  llvm_unreachable("unknown recompute policy");
}

size_t cheapestChoice(llvm::ArrayRef<PricedChoice> options, double lambda) {
  size_t best = 0;
  for (size_t i = 1; i < options.size(); ++i) {
    const PricedChoice &a = options[i], &b = options[best];
    double sa = a.seconds + lambda * a.memory.persistent,
           sb = b.seconds + lambda * b.memory.persistent;
    if (sa < sb || (sa == sb && a.memory.persistent < b.memory.persistent))
      best = i;
  }
  return best;
}

double stepPeakBytes(llvm::ArrayRef<OpMemory> ops,
                     llvm::ArrayRef<OpChoice> choices) {
  double persistent = 0, segment = 0, largestSegment = 0, gathered = 0,
         activation = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const OpMemory &m = ops[i];
    persistent += m.persistent;
    bool recomputed = i < choices.size() && choices[i].recompute;
    segment = recomputed ? segment + m.recomputed : 0;
    largestSegment = std::max(largestSegment, segment);
    gathered = std::max(gathered, m.gathered);
    activation = std::max(activation, m.activation);
  }
  return persistent + largestSegment + 2 * gathered + activation;
}

SampleInfo sampleInfo(const Func &f) {
  auto roles = computeSoapRoles(f);
  SampleInfo out;
  for (const auto &op : f.ops) {
    auto it = roles.find(op.get());
    if (it == roles.end() || !llvm::is_contained(it->second, SoapRole::Sample))
      continue;
    out.ops.insert(op.get());
    for (const Result &r : op->results)
      for (const AccessExpr &e : r.map) {
        int d = carrierDim(e);
        if (d >= 0 && it->second[d] == SoapRole::Sample) {
          out.values.insert(r.value.get());
          break;
        }
      }
  }
  return out;
}

std::string describeLevers(int64_t microbatches,
                           llvm::ArrayRef<OpChoice> choices) {
  size_t recomputed = 0, zero[4] = {0, 0, 0, 0};
  for (const OpChoice &c : choices) {
    recomputed += c.recompute;
    ++zero[std::min<unsigned>(c.zero, 3)];
  }
  std::string s = llvm::formatv("microbatches {0}, recompute {1} of {2} ops",
                                microbatches, recomputed, choices.size());
  for (int z = 1; z <= 3; ++z)
    if (zero[z])
      s += llvm::formatv(", ZeRO-{0} for {1} ops", z, zero[z]).str();
  return s;
}

} // namespace pax
