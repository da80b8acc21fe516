//===- Levers.cpp - How a training step trades time for memory ------------===//
#include "passes/cost/Levers.h"

#include "ir/Soap.h"

#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <deque>
#include <limits>

namespace pax {

std::optional<RecomputePolicy> parseRecompute(llvm::StringRef s) {
  return llvm::StringSwitch<std::optional<RecomputePolicy>>(s)
      .Case("none", RecomputePolicy::None)
      .Case("auto", RecomputePolicy::Auto)
      .Case("all", RecomputePolicy::All)
      .Default(std::nullopt);
}

std::optional<int64_t> parseMicrobatches(llvm::StringRef s) {
  int64_t m = 0;
  if (s == "auto")
    return 0;
  if (s.getAsInteger(10, m) || m < 1)
    return std::nullopt;
  return m;
}

std::optional<int> parseZeroStage(llvm::StringRef s) {
  int z = -1;
  if (s == "auto")
    return -1;
  if (s.getAsInteger(10, z) || z < 0 || z > 3)
    return std::nullopt;
  return z;
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

namespace {
/// The greedy checkpoints under one cap on a run's bytes.
struct Cut {
  std::vector<size_t> kept;
  double cost = 0; ///< longest run after the cuts plus the kept bytes
};
} // namespace

static Cut cutRuns(llvm::ArrayRef<double> bytes, double cap) {
  Cut cut;
  double run = 0, longest = 0;
  std::vector<double> prefix(bytes.size() + 1, 0);
  for (size_t i = 0; i < bytes.size(); ++i)
    prefix[i + 1] = prefix[i] + std::max(bytes[i], 0.0);
  std::deque<size_t> smallest; // increasing bytes, increasing index
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] < 0) {
      run = 0;
      smallest.clear();
      continue;
    }
    run += bytes[i];
    while (!smallest.empty() && bytes[smallest.back()] >= bytes[i])
      smallest.pop_back();
    smallest.push_back(i);
    while (run > cap && !smallest.empty()) {
      size_t j = smallest.front();
      smallest.pop_front();
      cut.kept.push_back(j);
      cut.cost += bytes[j];
      run = prefix[i + 1] - prefix[j + 1];
    }
    longest = std::max(longest, run);
  }
  cut.cost += longest;
  std::sort(cut.kept.begin(), cut.kept.end());
  return cut;
}

std::vector<size_t> checkpoints(llvm::ArrayRef<double> recomputed) {
  double total = 0, least = std::numeric_limits<double>::infinity();
  for (double b : recomputed)
    if (b > 0) {
      total += b;
      least = std::min(least, b);
    }
  if (total <= 0)
    return {};
  Cut best = cutRuns(recomputed, total);
  for (double cap = total / 2; cap >= least / 2; cap /= 2) {
    Cut c = cutRuns(recomputed, cap);
    if (c.cost < best.cost)
      best = std::move(c);
  }
  return best.kept;
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
