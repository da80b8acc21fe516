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
  if (groupSize <= 1 || bytes <= 0)
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

double CostModel::planSeconds(llvm::ArrayRef<ReshardStep> plan) const {
  double t = 0;
  for (const ReshardStep &s : plan)
    t += stepSeconds(s);
  return t;
}

std::pair<llvm::SmallVector<ReshardStep, 4>, llvm::SmallVector<ReshardStep, 4>>
CostModel::edgePlans(const TensorLayout &from, const TensorLayout &to,
                     const TensorType &t) const {
  auto forward = planReshard(from, to, t, cluster.gpusPerNode);
  llvm::SmallVector<ReshardStep, 4> backward;
  if (mode == CostMode::Train && isFloat(t.elem))
    backward = planReshard(to, reducedLayout(from), t, cluster.gpusPerNode,
                           /*fromReplicatedIsPartial=*/true);
  return {forward, backward};
}

double CostModel::edgeSeconds(const TensorLayout &from, const TensorLayout &to,
                              const TensorType &t) const {
  return edgeSeconds(from, reducedLayout(from), to, t);
}

double CostModel::edgeSeconds(const TensorLayout &from,
                              const TensorLayout &reducedFrom,
                              const TensorLayout &to,
                              const TensorType &t) const {
  double s = planSeconds(planReshard(from, to, t, cluster.gpusPerNode));
  if (mode == CostMode::Train && isFloat(t.elem))
    s += planSeconds(planReshard(to, reducedFrom, t, cluster.gpusPerNode,
                                 /*fromReplicatedIsPartial=*/true));
  return s;
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
    // A split normalized dim: its statistics (max and sum, or mean and
    // variance: two small all-reduces, one f32 per row) cross the split.
    double rows = block;
    for (size_t i = 0; i < map.size(); ++i)
      if (normalized(int(i)))
        rows /= double(std::max<int64_t>(1, type.shape[i] / l.parts[i]));
    t += 2 *
         collective(ReshardStep::Kind::AllReduce, stats, statsNode, rows * 4);
  }
  return t;
}

ReshardStep CostModel::returnStep(const Op &op, const Config &c,
                                  unsigned result) const {
  return reducePartials(resultLayout(op, c, result),
                        op.results[result].value->type, cluster.gpusPerNode);
}

/// Training: the gradient of a weight replicated across some of the op's
/// devices is summed across them (Parallax's dense aggregation).
double CostModel::gradientSync(const Op &op, const Config &c) const {
  double t = 0;
  for (unsigned k = 0; k < op.operands.size(); ++k) {
    const Value *v = op.operands[k].value;
    if (!v->global || !v->global->isParameter)
      continue;
    TensorLayout l = operandLayout(op, c, k);
    int64_t rep = 1, perNode = 1, pos = 1;
    for (const Digit &d : l.digits) {
      if (d.role == Digit::Role::Replicated) {
        rep *= d.size;
        perNode *= pos * d.size <= int64_t(cluster.gpusPerNode) ? d.size : 1;
      }
      pos *= d.size;
    }
    double bytes = double(l.blockElements(v->type)) * dtypeBytes(v->type.elem);
    t += collective(ReshardStep::Kind::AllReduce, rep, perNode, bytes);
  }
  return t;
}

std::optional<double> CostModel::measuredSeconds(const Op &op,
                                                 const Config &c) const {
  if (!cluster.measured)
    return std::nullopt;
  return cluster.measured->seconds(opBlockKey(op, localExtents(op, c)));
}

OpCost CostModel::opCost(const Op &op, const Config &c) const {
  OpCost cost;
  double passes = mode == CostMode::Train ? 1 + kBackwardFactor : 1;
  // A measured block is priced by its measurement (the forward pass, which
  // a training step's backward is assumed to cost twice of).
  std::optional<double> measured = measuredSeconds(op, c);
  cost.compute =
      passes *
      (measured ? *measured : computeSeconds(cluster, pointsPerDevice(op, c)));
  // Reducing partial sums needs nothing on the way back (the gradient of a
  // sum reaches every term as is).
  cost.communication = reduceInside(op, c);
  if (mode == CostMode::Train) {
    cost.gradientSync = gradientSync(op, c);
    cost.communication += cost.gradientSync;
  }
  return cost;
}

double CostModel::memoryBytes(const Op &op, const Config &c) const {
  bool train = mode == CostMode::Train;
  double bytes = 0;
  for (unsigned k = 0; k < op.operands.size(); ++k) {
    const Value *v = op.operands[k].value;
    if (!v->global || !v->global->isParameter)
      continue;
    double block = double(operandLayout(op, c, k).blockElements(v->type)) *
                   dtypeBytes(v->type.elem);
    // Weights, and when training their gradients and two Adam moments.
    bytes += block * (train ? 4 : 1);
  }
  for (unsigned r = 0; r < op.results.size(); ++r) {
    const TensorType &t = op.results[r].value->type;
    bytes +=
        double(resultLayout(op, c, r).blockElements(t)) * dtypeBytes(t.elem);
  }
  return bytes;
}

} // namespace pax
