//===- Aggregation.cpp - How a training step aggregates each gradient -----===//
#include "passes/sharding/Aggregation.h"

#include "passes/cost/Collectives.h"
#include "passes/sharding/Layout.h"
#include "passes/sharding/Reshard.h"
#include "passes/sharding/Solve.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace pax {

std::vector<GradientAggregation>
describeAggregation(const Module &m, llvm::ArrayRef<Config> configs,
                    const Cluster &cluster) {
  int64_t gpusPerNode = cluster.gpusPerNode;
  const Func &f = m.main;
  llvm::DenseMap<const Op *, size_t> index;
  for (size_t i = 0; i < f.ops.size(); ++i)
    index[f.ops[i].get()] = i;
  // Readers of each value: (op, operand).
  llvm::DenseMap<const Value *, std::vector<std::pair<const Op *, unsigned>>>
      readers;
  for (const auto &op : f.ops)
    for (unsigned k = 0; k < op->operands.size(); ++k)
      readers[op->operands[k].value].push_back({op.get(), k});
  std::vector<GradientAggregation> out;
  for (const auto &op : f.ops) {
    auto it = op->attrs.find("gradient_of");
    if (it == op->attrs.end())
      continue;
    GradientAggregation a;
    a.parameter = std::get<std::string>(it->second);
    const TensorType &type = op->results[0].value->type;
    bool sparse = false, sharded = false, dense = false;
    auto add = [&](const Op &from, unsigned result, const Op &to,
                   unsigned operand) {
      const Value *v = from.results[result].value.get();
      TensorLayout src =
          resultLayout(from, configs[index.lookup(&from)], result);
      // Partial sums reduced on the way, whatever collective does it.
      dense |= llvm::any_of(src.digits, [](const Digit &d) {
        return d.role == Digit::Role::Partial;
      });
      auto steps = planReshard(
          src, operandLayout(to, configs[index.lookup(&to)], operand), v->type,
          gpusPerNode);
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
    };
    // The contributions: up the chain of sums of same-typed gradients.
    std::vector<const Op *> work = {op.get()};
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
    // To the update.
    for (auto [reader, k] : readers.lookup(op->results[0].value.get()))
      add(*op, 0, *reader, k);
    // The new weights to where the next step reads them (an all-gather
    // after a sharded update: ZeRO's shape).
    for (size_t i = 0; i < f.returns.size(); ++i)
      if (f.returnNames[i] == "update/" + a.parameter)
        for (auto [reader, k] : nextStepReaders(m, i)) {
          const Value *v = f.returns[i];
          bool wasDense = dense;
          add(*v->def, v->index, *reader, k);
          dense = wasDense;
        }
    for (auto [flag, name] :
         {std::pair{dense, "dense"}, std::pair{sparse, "sparse"},
          std::pair{sharded, "sharded"}})
      if (flag)
        a.kind += (a.kind.empty() ? "" : "+") + std::string(name);
    if (a.kind.empty())
      a.kind = "local";
    out.push_back(std::move(a));
  }
  return out;
}

} // namespace pax
