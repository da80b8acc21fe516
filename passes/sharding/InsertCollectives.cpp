//===- InsertCollectives.cpp - A strategy's moves as collective ops -------===//
#include "passes/sharding/InsertCollectives.h"

#include "passes/cost/Cluster.h"

#include "llvm/ADT/DenseMap.h"

#include <map>

namespace pax {

llvm::Expected<Config> configOf(const Op &op) {
  auto it = op.attrs.find("config");
  if (it == op.attrs.end())
    return Config(op.iters.size(), 1);
  const auto *list = std::get_if<std::vector<int64_t>>(&it->second);
  if (!list || list->size() != op.iters.size())
    return llvm::createStringError("op '" + op.name() +
                                   "': its config must list one factor per "
                                   "iteration dim (" +
                                   std::to_string(op.iters.size()) + ")");
  Config c(list->begin(), list->end());
  for (size_t d = 0; d < c.size(); ++d)
    if (c[d] < 1 || op.iters[d].extent % c[d])
      return llvm::createStringError(
          "op '" + op.name() + "': config factor " + std::to_string(c[d]) +
          " does not divide the extent " + std::to_string(op.iters[d].extent) +
          " of '" + op.iters[d].name + "'");
  return c;
}

static OpKind collectiveKind(ReshardStep::Kind k) {
  switch (k) {
  case ReshardStep::Kind::AllReduce:
    return OpKind::AllReduce;
  case ReshardStep::Kind::ReduceScatter:
    return OpKind::ReduceScatter;
  case ReshardStep::Kind::AllToAll:
    return OpKind::AllToAll;
  case ReshardStep::Kind::AllGather:
    return OpKind::AllGather;
  case ReshardStep::Kind::Slice:
    return OpKind::LocalSlice;
  case ReshardStep::Kind::Halo:
    return OpKind::HaloExchange;
  case ReshardStep::Kind::Broadcast:
    return OpKind::Broadcast;
  case ReshardStep::Kind::SendRecv:
    return OpKind::SendRecv;
  }
  llvm_unreachable("unknown step kind");
}

namespace {
/// Builds the collective ops of one module.
class Inserter {
public:
  Inserter(Module &m, int64_t devices, int64_t perNode)
      : m(m), devices(devices), perNode(perNode) {}

  llvm::Error run();

private:
  /// A new collective op of \p kind reading \p in, an identity on its type.
  /// \p layout numbers devices from \p layoutOffset, \p space from
  /// \p groupOffset.
  Op *collective(OpKind kind, Value *in, llvm::StringRef name,
                 llvm::ArrayRef<unsigned> positions,
                 llvm::ArrayRef<int64_t> space, llvm::ArrayRef<Digit> layout,
                 llvm::ArrayRef<int64_t> halo, int64_t bytes,
                 int64_t layoutOffset = 0, int64_t groupOffset = 0);

  /// Where each value came from: its compute op, result and config.
  struct Source {
    const Op *op;
    unsigned result;
    Config config;
    int64_t offset; ///< its first device
  };
  /// Where \p s leaves its result.
  static TensorLayout layoutOf(const Source &s) {
    return placedAt(resultLayout(*s.op, s.config, s.result), s.offset);
  }
  /// The moves of planReshard from \p from to \p to of \p v, as
  /// collectives named from \p base; the moved value.
  Value *moveTo(Value *v, const TensorLayout &from, const TensorLayout &to,
                const std::string &base);
  /// moveTo, made once per value and pair of layouts between ops placed
  /// apart (a pipeline stage's input that several of its ops read crosses
  /// once).
  Value *moveOnce(Value *v, const TensorLayout &from, const TensorLayout &to,
                  const std::string &base);

  /// A global a training step updates, kept between steps in one layout.
  struct Stored {
    TensorLayout layout;
  };
  /// The layouts the updated globals are kept in: the update's own (ZeRO-3)
  /// or, by default, the first reader's (the update moves there).
  llvm::Error findStored();
  /// Operand \p k of \p q, reading stored global \p st in layout \p to:
  /// where the kept blocks do not cover it, loads them and moves them.
  void readStored(Op &q, unsigned k, Stored &st, const TensorLayout &to);
  /// An error unless \p q's config \p c from device \p at fits the plan.
  llvm::Error checkPlacement(const Op &q, const Config &c, int64_t at) const;
  /// Moves each returned result to where it leaves the step.
  llvm::Error placeReturns(const llvm::DenseSet<const Op *> &constants);

  Module &m;
  int64_t devices, perNode;
  std::vector<std::unique_ptr<Op>> out;
  llvm::DenseMap<const Value *, Source> sources;
  llvm::DenseMap<const Value *, Stored> stored;
  std::map<std::pair<const Value *, std::string>, Value *> movedApart;
};
} // namespace

Op *Inserter::collective(OpKind kind, Value *in, llvm::StringRef name,
                         llvm::ArrayRef<unsigned> positions,
                         llvm::ArrayRef<int64_t> space,
                         llvm::ArrayRef<Digit> layout,
                         llvm::ArrayRef<int64_t> halo, int64_t bytes,
                         int64_t layoutOffset, int64_t groupOffset) {
  auto op = std::make_unique<Op>(kind);
  AccessMap identity;
  for (size_t d = 0; d < in->type.rank(); ++d) {
    op->iters.push_back(
        {"d" + std::to_string(d), in->type.shape[d], IterKind::Parallel});
    identity.push_back(AccessExpr::dim(unsigned(d)));
  }
  op->operands.push_back({in, identity});
  op->addResult(in->type, identity);
  op->attrs["name"] = name.str();
  op->attrs["groups"] =
      GroupsAttr{std::vector<int64_t>(space.begin(), space.end()),
                 std::vector<int64_t>(positions.begin(), positions.end())};
  op->attrs["layout"] =
      LayoutAttr{std::vector<Digit>(layout.begin(), layout.end())};
  op->attrs["halo"] = std::vector<int64_t>(halo.begin(), halo.end());
  op->attrs["bytes"] = bytes;
  if (layoutOffset)
    op->attrs["offset"] = layoutOffset;
  if (groupOffset)
    op->attrs["group_offset"] = groupOffset;
  out.push_back(std::move(op));
  return out.back().get();
}

/// What tells two layouts apart: devices, digits, halos, irregularity.
static std::string layoutKey(const TensorLayout &l) {
  std::string key = "@" + std::to_string(l.offset);
  for (const Digit &d : l.digits)
    key += llvm::formatv(" {0}/{1}/{2}/{3}", d.size, int(d.role), d.tensorDim,
                         d.level)
               .str();
  for (size_t d = 0; d < l.haloLo.size(); ++d)
    key += "," + std::to_string(l.haloLo[d]) + ":" +
           std::to_string(d < l.haloHi.size() ? l.haloHi[d] : 0);
  return key + (l.irregular ? "!" : "");
}

Value *Inserter::moveOnce(Value *v, const TensorLayout &from,
                          const TensorLayout &to, const std::string &base) {
  if (from.offset == to.offset)
    return moveTo(v, from, to, base);
  Value *&moved = movedApart[{v, layoutKey(from) + "->" + layoutKey(to)}];
  if (!moved)
    moved = moveTo(v, from, to, base);
  return moved;
}

Value *Inserter::moveTo(Value *v, const TensorLayout &from,
                        const TensorLayout &to, const std::string &base) {
  const TensorType &t = v->type;
  // Partial sums travel as they are: the plan reduces them where this
  // consumer needs them (all_reduce, or reduce_scatter into a block).
  ReshardTrace trace;
  auto steps = planReshard(from, to, t, perNode, false, &trace);
  Value *cur = v;
  if (trace.pointToPoint) {
    if (steps.size() == 2) { // partial sums are reduced first
      llvm::SmallVector<int64_t, 8> space;
      for (const Digit &d : from.digits)
        space.push_back(d.size);
      cur = collective(OpKind::AllReduce, cur, base + "all_reduce",
                       steps[0].digits, space, reducedLayout(from).digits,
                       std::vector<int64_t>(2 * t.rank(), 0), steps[0].bytes,
                       from.offset, from.offset)
                ->results[0]
                .value.get();
    }
    TensorLayout target = to;
    std::vector<int64_t> halo(2 * t.rank(), 0);
    for (Digit &d : target.digits)
      if (to.irregular && d.role == Digit::Role::Split)
        d = Digit{d.size, Digit::Role::Replicated, -1, 0};
    if (!to.irregular)
      for (size_t d = 0; d < t.rank(); ++d)
        halo[2 * d] = to.haloLo[d], halo[2 * d + 1] = to.haloHi[d];
    // Every device of both ops' ranges takes part.
    int64_t first = std::min(from.offset, to.offset);
    int64_t space =
        std::max(from.offset + from.devices(), to.offset + to.devices()) -
        first;
    cur = collective(OpKind::SendRecv, cur, base + "send_recv", {0}, {space},
                     target.digits, halo, steps.back().bytes, to.offset, first)
              ->results[0]
              .value.get();
  } else {
    llvm::SmallVector<int64_t, 8> space;
    for (const Digit &d : trace.start)
      space.push_back(d.size);
    std::vector<int64_t> halo(2 * t.rank(), 0);
    for (size_t i = 0; i < steps.size(); ++i) {
      const ReshardStep &st = steps[i];
      if (st.kind == ReshardStep::Kind::Halo) {
        int dim = to.digits[st.digits[0]].tensorDim;
        halo[2 * dim] = to.haloLo[dim];
        halo[2 * dim + 1] = to.haloHi[dim];
      }
      std::string name =
          base + reshardStepName(st.kind).str() + std::to_string(i);
      cur = collective(collectiveKind(st.kind), cur, name, st.digits, space,
                       trace.after[i], halo, st.bytes, from.offset, from.offset)
                ->results[0]
                .value.get();
    }
  }
  return cur;
}

llvm::Error Inserter::findStored() {
  auto kept = keptLayouts(
      m, [](const Op &op) -> llvm::Expected<std::pair<Config, int64_t>> {
        auto c = configOf(op);
        if (!c)
          return c.takeError();
        return std::pair{*c, op.intAttr("offset", 0)};
      });
  if (!kept)
    return kept.takeError();
  for (auto &[g, l] : *kept)
    stored[g] = {std::move(l)};
  return llvm::Error::success();
}

void Inserter::readStored(Op &q, unsigned k, Stored &st,
                          const TensorLayout &to) {
  Operand &o = q.operands[k];
  ReshardTrace trace;
  auto steps =
      planReshard(st.layout, to, o.value->type, perNode, false, &trace);
  // The device's kept block covers what the op reads, where every device
  // of the op keeps one (planReshard counts devices past a layout's own
  // as holding what its first ones do).
  if (!trace.pointToPoint && st.layout.devices() >= to.devices() &&
      llvm::all_of(steps, [](const ReshardStep &s) {
        return s.kind == ReshardStep::Kind::Slice;
      }))
    return;
  // Read by ops placed apart (a tied weight on another pipeline stage):
  // moved there once.
  std::string key = "kept" + layoutKey(st.layout) + "->" + layoutKey(to);
  if (st.layout.offset != to.offset)
    if (auto it = movedApart.find({o.value, key}); it != movedApart.end()) {
      o.value = it->second;
      return;
    }
  std::string base = q.name().str() + ".in" + std::to_string(k) + ".";
  llvm::SmallVector<int64_t, 8> space;
  for (const Digit &d : st.layout.digits)
    space.push_back(d.size);
  // The kept blocks, loaded as they lie, then moved.
  Value *kept = collective(OpKind::LocalSlice, o.value, base + "kept", {},
                           space, st.layout.digits,
                           std::vector<int64_t>(2 * o.value->type.rank(), 0), 0,
                           st.layout.offset, st.layout.offset)
                    ->results[0]
                    .value.get();
  Value *read = o.value;
  o.value = moveTo(kept, st.layout, to, base);
  if (st.layout.offset != to.offset)
    movedApart[{read, key}] = o.value;
}

llvm::Error Inserter::run() {
  Func &f = m.main;
  llvm::DenseSet<const Op *> constants = constantOps(m);
  if (auto err = findStored())
    return err;
  for (auto &owned : f.ops) {
    Op &q = *owned;
    if (opKindFamily(q.kind) == OpFamily::Collective)
      return llvm::createStringError("op '" + q.name() +
                                     "': the module already has collectives");
    auto cq = configOf(q);
    if (!cq)
      return cq.takeError();
    if (constants.count(&q)) {
      *cq = Config(q.iters.size(), 1);
      q.attrs["config"] = std::vector<int64_t>(cq->begin(), cq->end());
      q.attrs["everywhere"] = int64_t(1);
    }
    int64_t at = constants.count(&q) ? 0 : q.intAttr("offset", 0);
    if (auto err = checkPlacement(q, *cq, at))
      return err;
    for (unsigned k = 0; k < q.operands.size(); ++k) {
      Operand &o = q.operands[k];
      TensorLayout to = placedAt(operandLayout(q, *cq, k), at);
      if (auto st = stored.find(o.value); st != stored.end()) {
        readStored(q, k, st->second, to);
        continue;
      }
      auto src = sources.find(o.value);
      if (src == sources.end() || constants.count(src->second.op))
        continue; // an input, a weight, or computed everywhere
      std::string base = q.name().str() + ".in" + std::to_string(k) + ".";
      o.value = moveOnce(o.value, layoutOf(src->second), to, base);
    }
    out.push_back(std::move(owned));
    for (unsigned r = 0; r < q.results.size(); ++r)
      sources[q.results[r].value.get()] = {&q, r, *cq, at};
  }
  if (auto err = placeReturns(constants))
    return err;
  f.ops = std::move(out);
  m.attrs["devices"] = devices;
  m.attrs["devices_per_node"] = perNode;
  return llvm::Error::success();
}

llvm::Error Inserter::checkPlacement(const Op &q, const Config &c,
                                     int64_t at) const {
  if (configDevices(c) > devices)
    return llvm::createStringError("op '" + q.name() + "': its config uses " +
                                   std::to_string(configDevices(c)) +
                                   " devices, more than the " +
                                   std::to_string(devices) + " of the plan");
  if (at < 0 || at % configDevices(c) || at + configDevices(c) > devices)
    return llvm::createStringError(
        "op '" + q.name() + "': offset " + std::to_string(at) +
        " must be a multiple of its " + std::to_string(configDevices(c)) +
        " device(s) that keeps it inside the plan's " +
        std::to_string(devices));
  return llvm::Error::success();
}

// A returned result leaves reduced (CostModel::returnStep); an update
// leaves where the next step keeps it (findStored).
llvm::Error
Inserter::placeReturns(const llvm::DenseSet<const Op *> &constants) {
  Func &f = m.main;
  llvm::DenseMap<Value *, Value *> reduced;
  for (size_t i = 0; i < f.returns.size(); ++i) {
    Value *&v = f.returns[i];
    auto src = sources.find(v);
    if (src == sources.end() || constants.count(src->second.op))
      continue;
    const Source &s = src->second;
    llvm::StringRef name = f.returnNames[i];
    if (name.consume_front("update/"))
      if (const Global *g = m.findGlobal(name))
        if (auto st = stored.find(&g->value); st != stored.end()) {
          v = moveTo(v, layoutOf(s), st->second.layout,
                     s.op->name().str() + ".next.");
          continue;
        }
    if (auto it = reduced.find(v); it != reduced.end()) {
      v = it->second;
      continue;
    }
    TensorLayout l = resultLayout(*s.op, s.config, s.result);
    ReshardStep step = reducePartials(l, v->type, perNode);
    if (step.digits.empty())
      continue;
    llvm::SmallVector<int64_t, 8> space;
    for (const Digit &d : l.digits)
      space.push_back(d.size);
    Op *ar =
        collective(OpKind::AllReduce, v, s.op->name().str() + ".all_reduce",
                   step.digits, space, reducedLayout(l).digits,
                   std::vector<int64_t>(2 * v->type.rank(), 0), step.bytes,
                   s.offset, s.offset);
    reduced[v] = ar->results[0].value.get();
    v = reduced[v];
  }
  return llvm::Error::success();
}

llvm::Error insertCollectives(Module &m, int64_t devices,
                              int64_t devicesPerNode) {
  return Inserter(m, devices, devicesPerNode).run();
}

llvm::Expected<std::unique_ptr<Pass>>
InsertCollectivesPass::create(const PassOptions &o) {
  auto opts = ShardingPassOptions::parse("pax-insert-collectives", o, false);
  if (!opts)
    return opts.takeError();
  return std::make_unique<InsertCollectivesPass>(std::move(*opts));
}

llvm::Error InsertCollectivesPass::run(Module &m, PassContext &) {
  auto cluster =
      makeCluster(options.cluster, options.gpus, options.gpusPerNode);
  if (!cluster)
    return cluster.takeError();
  return insertCollectives(m, cluster->gpus, cluster->gpusPerNode);
}

} // namespace pax
