//===- Levers.h - How a training step trades time for memory --------------===//
//
// A training step that does not fit a device's memory can
//  - run its batch as M microbatches, one after the other, accumulating the
//    gradients: a device holds the activations of one microbatch at a time,
//    and every tensor that carries the sample dim moves M times, 1/M each;
//  - recompute an op's result in the backward pass instead of keeping it
//    from the forward pass: one more forward of the op, and the result is
//    held only while the backward of its segment (the run of recomputed ops
//    it belongs to) runs;
//  - shard a weight's state over the devices that hold it replicated (its
//    data-parallel replicas, ZeRO): stage 1 the optimizer state, stage 2
//    also the gradient (reduce-scattered every microbatch), stage 3 also the
//    weight itself (all-gathered before the op's forward and again before
//    its backward, every microbatch).
// The microbatch count is one per step; recomputation and the ZeRO stage
// are chosen per op, in the op's configuration, by the search.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>

namespace pax {

/// `--recompute=`: keep every result (none), let the search choose per op
/// (auto), or recompute every op but contractions (all: matmuls and
/// convolutions, whose results are the dearest to recompute, are kept).
enum class RecomputePolicy : uint8_t { None, Auto, All };

std::optional<RecomputePolicy> parseRecompute(llvm::StringRef s);
/// A microbatch count: "auto" (0) or a positive integer; nullopt otherwise.
std::optional<int64_t> parseMicrobatches(llvm::StringRef s);
/// A ZeRO stage: "auto" (-1) or 0 to 3; nullopt otherwise.
std::optional<int> parseZeroStage(llvm::StringRef s);
llvm::StringRef recomputeName(RecomputePolicy p);

/// What a training step may do to fit (the options of the search).
struct LeverOptions {
  /// Microbatches per step; 0: the search chooses among the counts that
  /// divide every sample split.
  int64_t microbatches = 1;
  RecomputePolicy recompute = RecomputePolicy::None;
  /// The ZeRO stage of every weight, 0..3; -1: the search chooses per op.
  int zero = 0;
  /// Optimizer state per weight element, in the weight's type (Adam: its
  /// two moments).
  double optimizerSlots = 2;
  /// Mixed precision with --grad-reduce=fp32: the gradient of a cast's
  /// result flows back in the cast operand's type (fp32), not its own.
  bool fp32Gradients = false;
};

/// What the search chose for one op.
struct OpChoice {
  bool recompute = false;
  uint8_t zero = 0; ///< ZeRO stage of the weights the op reads
  bool operator==(const OpChoice &o) const {
    return recompute == o.recompute && zero == o.zero;
  }
};

/// Bytes one device holds for one op in a training step.
struct OpMemory {
  /// Held through the whole step: the weights' state (weight, gradient,
  /// optimizer state, each sharded or not) and the results kept for the
  /// backward pass.
  double persistent = 0;
  /// Results recomputed in the backward pass: held while their segment's
  /// backward runs.
  double recomputed = 0;
  /// ZeRO-3: the weight blocks gathered whole for the op's forward and
  /// backward (freed after; the next op's are prefetched meanwhile).
  double gathered = 0;
  /// The results of one microbatch: their gradients are held while the
  /// op's backward runs.
  double activation = 0;
};

/// One lever choice of an op in its configuration, priced.
struct PricedChoice {
  OpChoice choice;
  double seconds = 0; ///< the op's compute and communication
  OpMemory memory;
};

/// The index of the choice of \p options that minimizes seconds + \p
/// lambda * persistent bytes (ties: fewer bytes, then the earlier one).
size_t cheapestChoice(llvm::ArrayRef<PricedChoice> options, double lambda);

/// A device's peak over a step whose ops, in program order, hold \p ops:
/// everything persistent, plus the largest recomputed segment (a run of
/// consecutive recomputed ops), twice the largest gathered weight (one in
/// use, the next prefetched) and the largest result gradient.
double stepPeakBytes(llvm::ArrayRef<OpMemory> ops,
                     llvm::ArrayRef<OpChoice> choices);

/// Checkpoints in runs of recomputed ops (Chen et al.'s, greedily): given
/// each op's recomputed bytes in program order (negative: the op keeps its
/// results), the recomputed ops whose results to keep instead so that a
/// run's bytes plus the kept bytes are least. For each cap on a run's bytes
/// (halving from all of them) a run over the cap keeps its smallest
/// result; the cap whose longest run and kept results add up to least
/// wins. Ascending op indices.
std::vector<size_t> checkpoints(llvm::ArrayRef<double> recomputed);

/// What carries the sample dim: the ops with a SOAP sample dim in their
/// iteration space (with microbatches, each runs 1/M of its points M times;
/// an op without one runs whole every microbatch) and the values their
/// result maps index it in (a device holds and moves 1/M of them at a
/// time).
struct SampleInfo {
  llvm::DenseSet<const Op *> ops;
  llvm::DenseSet<const Value *> values;
};
SampleInfo sampleInfo(const Func &f);

/// "microbatches 4, recompute 96 of 1646 ops, ZeRO-1 for 194 ops" for
/// reports.
std::string describeLevers(int64_t microbatches,
                           llvm::ArrayRef<OpChoice> choices);

} // namespace pax
