//===- Aggregation.cpp - How a training step aggregates each gradient -----===//
#include "passes/sharding/Aggregation.h"

#include "passes/cost/Collectives.h"
#include "passes/sharding/Layout.h"
#include "passes/sharding/Reshard.h"
#include "passes/sharding/Solve.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace pax {

namespace {

/// describeAggregation's walk over one gradient: the moves of each
/// contribution on its way to the sum, of the sum to the update, and of
/// the new weights to where the next step reads them; whether partial sums
/// are reduced (dense), rows travel to a scatter (sparse) or the scatter's
/// result stays split (sharded).
class GradientWalk {
public:
  GradientWalk(const Module &m, llvm::ArrayRef<Config> configs,
               const Cluster &cluster)
      : m(m), configs(configs), cluster(cluster) {
    const Func &f = m.main;
    for (size_t i = 0; i < f.ops.size(); ++i)
      index[f.ops[i].get()] = i;
    for (const auto &op : f.ops)
      for (unsigned k = 0; k < op->operands.size(); ++k)
        readers[op->operands[k].value].push_back({op.get(), k});
  }

  /// The aggregation of gradient \p op (its `gradient_of` \p parameter).
  GradientAggregation walk(const Op &op, std::string parameter) {
    a = GradientAggregation();
    a.parameter = std::move(parameter);
    sparse = sharded = dense = false;
    contributions(op);
    // To the update.
    for (auto [reader, k] : readers.lookup(op.results[0].value.get()))
      add(op, 0, *reader, k);
    toNextStep();
    for (auto [flag, name] :
         {std::pair{dense, "dense"}, std::pair{sparse, "sparse"},
          std::pair{sharded, "sharded"}})
      if (flag)
        a.kind += (a.kind.empty() ? "" : "+") + std::string(name);
    if (a.kind.empty())
      a.kind = "local";
    return std::move(a);
  }

private:
  void add(const Op &from, unsigned result, const Op &to, unsigned operand);
  void contributions(const Op &op);
  void toNextStep();

  const Module &m;
  llvm::ArrayRef<Config> configs;
  const Cluster &cluster;
  llvm::DenseMap<const Op *, size_t> index;
  /// Readers of each value: (op, operand).
  llvm::DenseMap<const Value *, std::vector<std::pair<const Op *, unsigned>>>
      readers;
  GradientAggregation a;
  bool sparse = false, sharded = false, dense = false;
};

/// The move of \p from's result \p result into \p to's operand
/// \p operand, as insert-collectives plans it.
void GradientWalk::add(const Op &from, unsigned result, const Op &to,
                       unsigned operand) {
  const Value *v = from.results[result].value.get();
  TensorLayout src = resultLayout(from, configs[index.lookup(&from)], result);
  // Partial sums reduced on the way, whatever collective does it.
  dense |= llvm::any_of(src.digits, [](const Digit &d) {
    return d.role == Digit::Role::Partial;
  });
  auto steps =
      planReshard(src, operandLayout(to, configs[index.lookup(&to)], operand),
                  v->type, int64_t(cluster.gpusPerNode));
  for (const ReshardStep &s : steps) {
    // Rows moved to a scatter: the (index, row) pairs travel.
    sparse |= to.kind == OpKind::ScatterAdd && operand == 0;
    if (s.kind == ReshardStep::Kind::Slice || s.bytes == 0)
      continue;
    a.moves.push_back({reshardStepName(s.kind).str(), s.bytes});
    a.bytes += s.bytes;
    Group group{unsigned(s.groupSize), unsigned(s.groupPerNode)};
    if (s.kind == ReshardStep::Kind::AllReduce && group.nodes() > 1) {
      unsigned inner = allReduceInnerRing(cluster, group, double(s.bytes));
      if (inner > 1)
        a.innerRing = inner, a.nodes = group.nodes();
    }
  }
}

/// The contributions: up the chain of sums of same-typed gradients.
void GradientWalk::contributions(const Op &op) {
  const TensorType &type = op.results[0].value->type;
  std::vector<const Op *> work = {&op};
  llvm::SmallPtrSet<const Op *, 8> seen;
  while (!work.empty()) {
    const Op *c = work.back();
    work.pop_back();
    if (!seen.insert(c).second)
      continue;
    bool sum = c->kind == OpKind::Add && c->name().starts_with("grad/");
    for (unsigned k = 0; k < c->operands.size(); ++k) {
      const Value *in = c->operands[k].value;
      if (in->kind != Value::Kind::Result)
        continue;
      if (sum && in->type == type) {
        add(*in->def, in->index, *c, k);
        work.push_back(in->def);
      } else if (c->kind == OpKind::ScatterAdd && k == 0) {
        // The rows on their way to the scatter (not partial sums).
        bool wasDense = dense;
        add(*in->def, in->index, *c, k);
        dense = wasDense;
      }
    }
    if (c->kind == OpKind::ScatterAdd)
      sharded |= llvm::any_of(
          resultLayout(*c, configs[index.lookup(c)], 0).digits,
          [](const Digit &d) { return d.role == Digit::Role::Split; });
  }
}

/// The new weights to where the next step reads them (an all-gather after
/// a sharded update: ZeRO's shape).
void GradientWalk::toNextStep() {
  const Func &f = m.main;
  for (size_t i = 0; i < f.returns.size(); ++i)
    if (f.returnNames[i] == "update/" + a.parameter)
      for (auto [reader, k] : nextStepReaders(m, i)) {
        const Value *v = f.returns[i];
        bool wasDense = dense;
        add(*v->def, v->index, *reader, k);
        dense = wasDense;
      }
}

} // namespace

std::vector<GradientAggregation>
describeAggregation(const Module &m, llvm::ArrayRef<Config> configs,
                    const Cluster &cluster) {
  GradientWalk walk(m, configs, cluster);
  std::vector<GradientAggregation> out;
  for (const auto &op : m.main.ops)
    if (auto it = op->attrs.find("gradient_of"); it != op->attrs.end())
      out.push_back(walk.walk(*op, std::get<std::string>(it->second)));
  return out;
}

} // namespace pax
