//===- CostModel.cpp - Predicted step time and memory of a strategy -------===//
#include "passes/cost/CostModel.h"

#include "ir/Printer.h"

#include "llvm/ADT/STLExtras.h"

namespace pax {

/// Backward of a forward pass costs about twice the forward pass: a
/// gradient for the inputs and one for the weights.
static constexpr double kBackwardFactor = 2.0;

double CostModel::collective(ReshardStep::Kind kind, int64_t groupSize,
                             int64_t groupPerNode, double bytes) const {
  // (A point-to-point move reaches one device too: placed apart, from
  // another's.)
  bool pointToPoint =
      kind == ReshardStep::Kind::SendRecv || kind == ReshardStep::Kind::Halo;
  if ((groupSize <= 1 && !pointToPoint) || bytes <= 0)
    return 0;
  Group g{unsigned(groupSize), unsigned(std::max<int64_t>(groupPerNode, 1))};
  switch (kind) {
  case ReshardStep::Kind::AllReduce:
    return allReduce(cluster, g, bytes);
  case ReshardStep::Kind::ReduceScatter:
    return reduceScatter(cluster, g, bytes);
  case ReshardStep::Kind::AllGather:
    return allGather(cluster, g, bytes);
  case ReshardStep::Kind::AllToAll:
    return allToAll(cluster, g, bytes);
  case ReshardStep::Kind::Broadcast:
    return broadcast(cluster, g, bytes);
  case ReshardStep::Kind::Halo:
  case ReshardStep::Kind::SendRecv:
    return sendRecv(cluster, groupPerNode < groupSize, bytes);
  case ReshardStep::Kind::Slice:
    return 0;
  }
  llvm_unreachable("unknown step kind");
}

double CostModel::stepSeconds(const ReshardStep &s) const {
  return collective(s.kind, s.groupSize, s.groupPerNode, double(s.bytes));
}

void CostModel::setLevers(const LeverOptions &l, int64_t microbatches,
                          std::shared_ptr<const SampleInfo> info) {
  assert(microbatches >= 1 && "a step runs at least one microbatch");
  levers = l;
  micro = microbatches;
  samples = std::move(info);
}

int64_t CostModel::microbatches() const { return training() ? micro : 1; }

int64_t CostModel::repeats(const Value *v) const {
  return microbatches() > 1 && samples && samples->values.contains(v) ? micro
                                                                      : 1;
}

bool CostModel::isSampleOp(const Op &op) const {
  return samples && samples->ops.contains(&op);
}

double CostModel::planSeconds(llvm::ArrayRef<ReshardStep> plan,
                              int64_t repeats) const {
  double t = 0;
  for (const ReshardStep &s : plan)
    t += double(repeats) * collective(s.kind, s.groupSize, s.groupPerNode,
                                      double(s.bytes) / double(repeats));
  return t;
}

TensorType CostModel::gradientType(const Value &v) const {
  const Op *def = v.def;
  if (!levers.fp32Gradients || !def || def->kind != OpKind::Cast ||
      def->operands.empty())
    return v.type;
  TensorType t = v.type;
  t.elem = def->operands[0].value->type.elem;
  return t;
}

std::pair<llvm::SmallVector<ReshardStep, 4>, llvm::SmallVector<ReshardStep, 4>>
CostModel::edgePlans(const TensorLayout &from, const TensorLayout &to,
                     const Value &v) const {
  auto forward = planReshard(from, to, v.type, cluster.gpusPerNode);
  llvm::SmallVector<ReshardStep, 4> backward;
  if (mode == CostMode::Train && isFloat(v.type.elem))
    backward = planReshard(to, reducedLayout(from), gradientType(v),
                           cluster.gpusPerNode,
                           /*fromReplicatedIsPartial=*/true);
  return {forward, backward};
}

/// Seconds of an edge's moves: \p t forward, its gradient of type \p grad
/// back (training).
static double edgeMoves(const CostModel &m, const TensorLayout &from,
                        const TensorLayout &reducedFrom,
                        const TensorLayout &to, const TensorType &t,
                        const TensorType &grad, int64_t repeats) {
  unsigned perNode = m.getCluster().gpusPerNode;
  double s = m.planSeconds(planReshard(from, to, t, perNode), repeats);
  if (m.getMode() == CostMode::Train && isFloat(t.elem))
    s += m.planSeconds(planReshard(to, reducedFrom, grad, perNode,
                                   /*fromReplicatedIsPartial=*/true),
                       repeats);
  return s;
}

double CostModel::edgeSeconds(const TensorLayout &from, const TensorLayout &to,
                              const TensorType &t, int64_t repeats) const {
  return edgeMoves(*this, from, reducedLayout(from), to, t, t, repeats);
}

double CostModel::edgeSeconds(const TensorLayout &from,
                              const TensorLayout &reducedFrom,
                              const TensorLayout &to, const Value &v) const {
  return edgeMoves(*this, from, reducedFrom, to, v.type, gradientType(v),
                   repeats(&v));
}

/// Elements of an op's iteration space one device computes.
static double pointsPerDevice(const Op &op, const Config &c) {
  // A replica dim's split devices each compute the whole op.
  double devices = 1;
  for (size_t d = 0; d < c.size(); ++d)
    if (!op.isReplicaDim(unsigned(d)))
      devices *= double(c[d]);
  return op.flops() / devices;
}

/// The statistics of normalizations (red dims the result keeps) inside the
/// op. Partial sums (red dims the result drops) are handed on: each
/// consumer's plan reduces them where it needs them (all_reduce, or
/// reduce_scatter into a split reader), and a returned result is reduced
/// by returnStep.
double CostModel::reduceInside(const Op &op, const Config &c) const {
  double t = 0;
  for (unsigned r = 0; r < op.results.size(); ++r) {
    TensorLayout l = resultLayout(op, c, r);
    const AccessMap &map = op.results[r].map;
    const TensorType &type = op.results[r].value->type;
    // The split normalized dims (reductions the result keeps).
    auto normalized = [&](int dim) {
      return !map[dim].dims.empty() &&
             op.iters[map[dim].dims[0]].kind == IterKind::Reduction;
    };
    int64_t stats = 1, statsNode = 1, pos = 1;
    for (const Digit &d : l.digits) {
      int64_t inNode =
          pos * d.size <= int64_t(cluster.gpusPerNode) ? d.size : 1;
      if (d.role == Digit::Role::Split && normalized(d.tensorDim)) {
        stats *= d.size;
        statsNode *= inNode;
      }
      pos *= d.size;
    }
    double block = double(l.blockElements(type));
    if (stats == 1)
      continue;
    // Every microbatch reduces its own rows' statistics.
    int64_t times = repeats(op.results[r].value.get());
    // A split normalized dim: its statistics (max and sum, or mean and
    // variance: two small all-reduces, one f32 per row) cross the split.
    double rows = block;
    for (size_t i = 0; i < map.size(); ++i)
      if (normalized(int(i)))
        rows /= double(std::max<int64_t>(1, type.shape[i] / l.parts[i]));
    t += 2 * double(times) *
         collective(ReshardStep::Kind::AllReduce, stats, statsNode,
                    rows * 4 / double(times));
  }
  return t;
}

ReshardStep CostModel::returnStep(const Op &op, const Config &c,
                                  unsigned result) const {
  return reducePartials(resultLayout(op, c, result),
                        op.results[result].value->type, cluster.gpusPerNode);
}

using WeightBlock = CostModel::WeightBlock;

/// The weights \p op reads in \p c, each with its replicated digits. A
/// training step's cast of a parameter (mixed precision's master weight)
/// holds the parameter's state; its copy's readers' gradients are summed
/// in the copy's precision on the way back to the cast, priced on those
/// edges, and the copy is what ZeRO gathers.
static llvm::SmallVector<WeightBlock, 4> weightBlocks(const Op &op,
                                                      const Config &c,
                                                      unsigned gpusPerNode,
                                                      bool training) {
  llvm::SmallVector<WeightBlock, 4> out;
  for (unsigned k = 0; k < op.operands.size(); ++k) {
    const Value *v = op.operands[k].value;
    if (!v->global || !v->global->isParameter)
      continue;
    TensorLayout l = operandLayout(op, c, k);
    int64_t rep = 1, perNode = 1, pos = 1;
    for (const Digit &d : l.digits) {
      if (d.role == Digit::Role::Replicated) {
        rep *= d.size;
        perNode *= pos * d.size <= int64_t(gpusPerNode) ? d.size : 1;
      }
      pos *= d.size;
    }
    double elements = double(l.blockElements(v->type));
    double bytes = elements * dtypeBytes(v->type.elem);
    bool master = training && op.kind == OpKind::Cast;
    double copy =
        master ? elements * dtypeBytes(op.results[0].value->type.elem) : bytes;
    out.push_back({v, copy, bytes, rep, perNode, master});
  }
  return out;
}

/// Training: the gradient of a weight replicated across some of the op's
/// devices is summed across them (Parallax's dense aggregation): an
/// all-reduce once per step, accumulated over the microbatches (ZeRO-1: a
/// reduce-scatter into the optimizer's shards and an all-gather of the new
/// weights). ZeRO-2 reduce-scatters every microbatch (no device holds the
/// whole gradient); ZeRO-3 also all-gathers the weight before the op's
/// forward and again before its backward, every microbatch, and never
/// gathers the new weights.
double CostModel::gradientSync(llvm::ArrayRef<WeightBlock> weights,
                               unsigned zero, double *bytes) const {
  using K = ReshardStep::Kind;
  double t = 0, m = double(microbatches());
  for (const WeightBlock &w : weights) {
    if (w.replicas <= 1)
      continue;
    auto run = [&](K kind, double times) {
      *bytes += times * w.bytes;
      return times * collective(kind, w.replicas, w.replicasPerNode, w.bytes);
    };
    if (w.master) { // summed at its readers; ZeRO gathers the copy
      t += zero == 0 ? 0 : run(K::AllGather, zero < 3 ? 1 : 2 * m);
      continue;
    }
    switch (zero) {
    case 0:
      t += run(K::AllReduce, 1);
      break;
    case 1:
      t += run(K::ReduceScatter, 1) + run(K::AllGather, 1);
      break;
    case 2:
      t += run(K::ReduceScatter, m) + run(K::AllGather, 1);
      break;
    default:
      t += run(K::AllGather, 2 * m) + run(K::ReduceScatter, m);
      break;
    }
  }
  return t;
}

std::optional<double> CostModel::measuredSeconds(const Op &op,
                                                 const Config &c) const {
  if (!cluster.measured)
    return std::nullopt;
  return cluster.measured->seconds(opBlockKey(op, localExtents(op, c)));
}

/// What an op's levers change, computed once for all its choices.
struct CostModel::OpParts {
  double forward = 0; ///< one forward pass, every microbatch
  double inside = 0;  ///< reductions inside the op
  llvm::SmallVector<WeightBlock, 4> weights;
  llvm::SmallVector<double, 2> results; ///< bytes of one microbatch's
};

CostModel::OpParts CostModel::parts(const Op &op, const Config &c) const {
  OpParts p;
  // An op without the sample dim runs whole in every microbatch. A
  // measured block is priced by its measurement (the forward pass, which a
  // training step's backward is assumed to cost twice of).
  double runs = training() && !isSampleOp(op) ? double(microbatches()) : 1;
  std::optional<double> measured = measuredSeconds(op, c);
  p.forward = runs * (measured ? *measured
                               : computeSeconds(cluster, pointsPerDevice(op, c),
                                                runsOn16BitRate(op)));
  p.inside = reduceInside(op, c);
  p.weights = weightBlocks(op, c, cluster.gpusPerNode, training());
  for (unsigned r = 0; r < op.results.size(); ++r) {
    const Value *v = op.results[r].value.get();
    p.results.push_back(double(resultLayout(op, c, r).blockElements(v->type)) *
                        dtypeBytes(v->type.elem) / double(repeats(v)));
  }
  return p;
}

OpCost CostModel::costOf(const OpParts &p, OpChoice choice) const {
  OpCost cost;
  // Training: forward, backward (twice the forward), and a recomputed
  // result's second forward.
  double passes = training() ? 1 + kBackwardFactor + choice.recompute : 1;
  cost.compute = passes * p.forward;
  cost.forward = p.forward;
  // Reducing partial sums needs nothing on the way back (the gradient of a
  // sum reaches every term as is).
  cost.communication = p.inside;
  if (training()) {
    cost.gradientSync =
        gradientSync(p.weights, choice.zero, &cost.gradientSyncBytes);
    cost.communication += cost.gradientSync;
  }
  return cost;
}

OpMemory CostModel::memoryOf(const OpParts &p, OpChoice choice) const {
  OpMemory m;
  for (const WeightBlock &w : p.weights)
    m.persistent += training() ? weightState(w.stateBytes, w.replicas,
                                             choice.zero, &m.gathered)
                               : w.stateBytes;
  for (double bytes : p.results) {
    if (training())
      m.activation = std::max(m.activation, bytes);
    (choice.recompute ? m.recomputed : m.persistent) += bytes;
  }
  return m;
}

OpCost CostModel::opCost(const Op &op, const Config &c, OpChoice choice) const {
  return costOf(parts(op, c), choice);
}

/// Bytes of one weight's state on one device: the weight, its gradient and
/// the optimizer state, each sharded over the replicas as \p zero says;
/// ZeRO-3 gathers the whole block for the op (\p gathered).
double CostModel::weightState(double block, int64_t replicas, unsigned zero,
                              double *gathered) const {
  double k = levers.optimizerSlots, r = double(replicas);
  switch (zero) {
  case 0:
    return block * (2 + k);
  case 1:
    return block * 2 + block * k / r;
  case 2:
    return block + block * (1 + k) / r;
  default:
    if (replicas > 1)
      *gathered += block;
    return block * (2 + k) / r;
  }
}

OpMemory CostModel::opMemory(const Op &op, const Config &c,
                             OpChoice choice) const {
  return memoryOf(parts(op, c), choice);
}

llvm::SmallVector<OpChoice, 8> CostModel::choices(const Op &op) const {
  llvm::SmallVector<OpChoice, 8> out;
  if (!training())
    return {OpChoice{}};
  bool weights = llvm::any_of(op.operands, [](const Operand &o) {
    return o.value->global && o.value->global->isParameter;
  });
  llvm::SmallVector<uint8_t, 4> stages;
  if (!weights)
    stages = {0};
  else if (levers.zero < 0)
    stages = {0, 1, 2, 3};
  else
    stages = {uint8_t(levers.zero)};
  bool mayRecompute = isSampleOp(op) && !op.results.empty();
  llvm::SmallVector<bool, 2> recompute = {false};
  if (mayRecompute && levers.recompute == RecomputePolicy::Auto)
    recompute.push_back(true);
  if (mayRecompute && levers.recompute == RecomputePolicy::All &&
      !op.reducesAway())
    recompute = {true};
  for (bool r : recompute)
    for (uint8_t z : stages)
      out.push_back({r, z});
  return out;
}

llvm::SmallVector<PricedChoice, 8>
CostModel::pricedChoices(const Op &op, const Config &c) const {
  OpParts p = parts(op, c);
  llvm::SmallVector<PricedChoice, 8> out;
  for (const OpChoice &choice : choices(op))
    out.push_back({choice, costOf(p, choice).total(), memoryOf(p, choice)});
  return out;
}

OpChoice CostModel::choose(const Op &op, const Config &c, double lambda) const {
  auto all = pricedChoices(op, c);
  return all[cheapestChoice(all, lambda)].choice;
}

double workFloorSeconds(const Func &f, const Cluster &cluster,
                        bool withBackward) {
  if (cluster.measured || cluster.gpus <= 0)
    return 0;
  double seconds = 0;
  for (const auto &op : f.ops)
    seconds += computeSeconds(cluster, op->flops() / double(cluster.gpus),
                              runsOn16BitRate(*op));
  double passes = withBackward ? 1 + kBackwardFactor : 1;
  return passes * seconds;
}

} // namespace pax
