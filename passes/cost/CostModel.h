//===- CostModel.h - Predicted step time and memory of a strategy ---------===//
//
// PaSE's cost (eq. 1), extended: the cost of a strategy is the sum over ops
// of the op's cost in its configuration (compute of the largest part at the
// device's rate, plus the communication inside the op: normalization
// statistics, and in training the gradient synchronization of replicated
// weights) plus the sum over edges of the resharding cost between producer
// and consumer (the plan of planReshard, priced with the alpha-beta
// collective model, which reduces partial sums where the consumer needs
// them; in training also its transpose for the gradient going back), plus
// the all_reduce of a returned result's partial sums.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/cost/Cluster.h"
#include "passes/cost/Collectives.h"
#include "passes/cost/Levers.h"
#include "passes/sharding/Reshard.h"

#include <memory>

namespace pax {

/// What is priced: a training step (forward, backward, gradient
/// synchronization) or inference (forward only).
enum class CostMode : uint8_t { Train, Infer };

/// Seconds of one op in one configuration, split by kind.
struct OpCost {
  double compute = 0;       ///< forward (and backward) arithmetic
  double forward = 0;       ///< of compute, the forward pass's (once)
  double communication = 0; ///< inside the op: reductions, gradient sync
  /// Of communication, the gradient synchronization of replicated weights:
  /// nothing in the forward pass waits for it (the simulator overlaps it
  /// with what follows).
  double gradientSync = 0;
  /// The blocks its collectives move, each counted once per collective.
  double gradientSyncBytes = 0;
  double total() const { return compute + communication; }
};

/// The cost model over one cluster.
class CostModel {
public:
  CostModel(const Cluster &cluster, CostMode mode)
      : cluster(cluster), mode(mode) {}

  /// Training: what the step may do to fit (Levers.h), run as \p
  /// microbatches microbatches; \p samples says which ops and values carry
  /// the sample dim (sampleInfo). Inference ignores the levers.
  void setLevers(const LeverOptions &levers, int64_t microbatches,
                 std::shared_ptr<const SampleInfo> samples);
  const LeverOptions &getLevers() const { return levers; }
  /// Microbatches per training step (1 for inference).
  int64_t microbatches() const;
  /// How many times a step moves \p v, 1/repeats of it each time: the
  /// microbatch count for a value that carries the sample dim, else 1 (a
  /// weight's resharded copy serves every microbatch; its gradient moves
  /// back once, accumulated).
  int64_t repeats(const Value *v) const;
  /// Whether \p op has the sample dim in its iteration space (so that each
  /// microbatch runs 1/M of it; an op without one runs whole in each).
  bool isSampleOp(const Op &op) const;

  /// The cost of \p op in configuration \p c, with the levers of \p choice.
  OpCost opCost(const Op &op, const Config &c, OpChoice choice = {}) const;

  /// The measured seconds of \p op's block in configuration \p c (the
  /// cluster's cost database), if measured.
  std::optional<double> measuredSeconds(const Op &op, const Config &c) const;

  /// Seconds of a plan, run \p repeats times on 1/repeats of the bytes.
  double planSeconds(llvm::ArrayRef<ReshardStep> plan,
                     int64_t repeats = 1) const;

  /// Seconds to move a tensor of type \p t from layout \p from to \p to;
  /// in training, plus the gradient's way back: the consumer's gradient is
  /// partial over the digits it read replicated, and is reduced into the
  /// producer's layout (the transpose of an all_gather is a
  /// reduce_scatter, of a replicated read an all_reduce).
  /// The tensor moves \p repeats times, 1/repeats each (repeats()).
  double edgeSeconds(const TensorLayout &from, const TensorLayout &to,
                     const TensorType &t, int64_t repeats = 1) const;
  /// The same, given reducedLayout(from) (which many pairs share).
  /// Of the edge carrying value \p v (its gradient back in
  /// gradientType(v)), given reducedLayout(from) (which many pairs share).
  double edgeSeconds(const TensorLayout &from, const TensorLayout &reducedFrom,
                     const TensorLayout &to, const Value &v) const;

  /// The plans of edgeSeconds for value \p v: forward, and (training)
  /// backward.
  std::pair<llvm::SmallVector<ReshardStep, 4>,
            llvm::SmallVector<ReshardStep, 4>>
  edgePlans(const TensorLayout &from, const TensorLayout &to,
            const Value &v) const;

  /// The type \p v's gradient flows back in: its own, or with
  /// LeverOptions::fp32Gradients a cast's operand's.
  TensorType gradientType(const Value &v) const;

  /// Seconds of one step in the forward direction.
  double stepSeconds(const ReshardStep &s) const;

  /// Bytes one device holds for \p op in configuration \p c: its blocks of
  /// the weights it reads (with gradients and optimizer state when
  /// training, each sharded as \p choice's ZeRO stage says) and of its
  /// results (of one microbatch; kept for the backward pass in training,
  /// unless recomputed).
  OpMemory opMemory(const Op &op, const Config &c, OpChoice choice = {}) const;
  /// opMemory's persistent bytes with the default choice.
  double memoryBytes(const Op &op, const Config &c) const {
    return opMemory(op, c).persistent;
  }

  /// The choices the levers allow \p op; the first keeps every result and
  /// takes the forced ZeRO stage (0 unless --zero says otherwise).
  llvm::SmallVector<OpChoice, 8> choices(const Op &op) const;
  /// choices(op), each priced in \p c.
  llvm::SmallVector<PricedChoice, 8> pricedChoices(const Op &op,
                                                   const Config &c) const;
  /// Of choices(op), the one that minimizes seconds + \p lambda * persistent
  /// bytes in \p c (ties: fewer bytes, then the earlier choice).
  OpChoice choose(const Op &op, const Config &c, double lambda) const;

  /// What a returned result of \p op in configuration \p c needs before it
  /// leaves: the all_reduce of the partial sums of split reductions it
  /// drops (bytes 0 and no digits when it has none). Other partial sums are
  /// reduced on the edges, where the consumer needs them.
  ReshardStep returnStep(const Op &op, const Config &c, unsigned result) const;

  const Cluster &getCluster() const { return cluster; }
  CostMode getMode() const { return mode; }

  /// A weight block an op reads, and the devices that hold it alike.
  /// A weight's block an op reads: the parameter, the bytes its gradient
  /// is summed and gathered in (a master weight's cast: its low-precision
  /// copy's), the bytes of the block (its state), over how many devices
  /// it is replicated, and whether it is a master weight's cast (whose
  /// copy's readers sum the gradient).
  struct WeightBlock {
    const Value *value;
    double bytes, stateBytes;
    int64_t replicas, replicasPerNode;
    bool master = false;
  };

private:
  struct OpParts;
  OpParts parts(const Op &op, const Config &c) const;
  OpCost costOf(const OpParts &p, OpChoice choice) const;
  OpMemory memoryOf(const OpParts &p, OpChoice choice) const;
  double collective(ReshardStep::Kind kind, int64_t groupSize,
                    int64_t groupPerNode, double bytes) const;
  double reduceInside(const Op &op, const Config &c) const;
  /// Seconds of \p weights' gradient synchronization under ZeRO stage
  /// \p zero; adds the blocks its collectives move to \p bytes.
  double gradientSync(llvm::ArrayRef<WeightBlock> weights, unsigned zero,
                      double *bytes) const;
  double weightState(double block, int64_t replicas, unsigned zero,
                     double *gathered) const;
  bool training() const { return mode == CostMode::Train; }

  const Cluster &cluster;
  CostMode mode;
  LeverOptions levers;
  int64_t micro = 1;
  std::shared_ptr<const SampleInfo> samples;
};

/// The least a step of \p f can take on \p cluster: every op's arithmetic
/// spread evenly over all of its devices at their peak rate, nothing
/// recomputed and nothing communicated (\p withBackward: a training step
/// priced per op, its backward twice the forward). No strategy's predicted
/// or simulated step is shorter. 0 where a cost database prices the ops.
double workFloorSeconds(const Func &f, const Cluster &cluster,
                        bool withBackward);

} // namespace pax
