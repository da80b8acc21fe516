//===- PeakMemory.cpp - A program's peak memory per device ----------------===//
#include "passes/sharding/PeakMemory.h"

#include "passes/sharding/Layout.h"
#include "passes/sharding/Reshard.h"
#include "passes/sharding/Solve.h"

#include "ir/Layout.h"
#include "ir/Reach.h"

#include "llvm/ADT/DenseMap.h"

namespace pax {

namespace {
/// Bytes live on each device.
class Peak {
public:
  Peak(const Module &m, llvm::ArrayRef<Config> configs,
       llvm::ArrayRef<int64_t> offsets, int64_t devices, int64_t perNode)
      : m(m), configs(configs), offsets(offsets), n(devices), perNode(perNode),
        constants(constantOps(m)), live(size_t(devices), 0),
        extra(size_t(devices), 0), peak(size_t(devices), 0) {}

  double run();

private:
  struct Held {
    TensorLayout layout;
    bool everywhere;
    double bytes;
  };
  /// Where op \p i runs: its config (unsplit when computed everywhere).
  Config configOf(size_t i) const {
    return constants.count(m.main.ops[i].get())
               ? Config(m.main.ops[i]->iters.size(), 1)
               : configs[i];
  }
  TensorLayout placed(TensorLayout l, size_t i) const {
    return placedAt(std::move(l), constants.count(m.main.ops[i].get())
                                      ? 0
                                      : offsetOf(offsets, i));
  }
  /// A block's bytes as the plan's arena holds them (64-byte aligned).
  static double bytesOf(int64_t elements, const TensorType &t) {
    int64_t bytes = elements * int64_t(dtypeBytes(t.elem));
    return double((bytes + 63) / 64 * 64);
  }
  static double bytesOf(const TensorLayout &l, const TensorType &t) {
    return bytesOf(l.blockElements(t), t);
  }
  static double bytesOf(const Box &b, const TensorType &t) {
    return bytesOf(b.elements(), t);
  }
  /// The boxes of operand \p k of op \p i that its devices read (the
  /// plan's buffers of a weight or an input), by device.
  std::vector<std::pair<int64_t, Box>> readBoxes(size_t i, unsigned k) const;
  void add(std::vector<double> &to, const Held &h, double sign) {
    int64_t lo = h.everywhere ? 0 : h.layout.offset;
    int64_t hi = h.everywhere ? n : lo + h.layout.devices();
    for (int64_t d = std::max<int64_t>(0, lo); d < std::min(hi, n); ++d)
      to[size_t(d)] += sign * h.bytes;
  }
  /// Whether moving \p from to \p to makes a new buffer.
  bool moves(const TensorLayout &from, const TensorLayout &to,
             const TensorType &t) const {
    return !planReshard(from, to, t, perNode).empty();
  }
  void findKept();
  /// Whether op \p i's result \p r, in layout \p l, is an update that
  /// EmitPlan computes in place of its weight's carried block: an
  /// elementwise op that reads the weight, if at all, at the points it
  /// writes and is its last reader, the update kept where it is computed.
  bool
  inPlaceUpdate(const Op &op, unsigned r, const TensorLayout &l, size_t i,
                const llvm::DenseMap<const Value *, size_t> &lastUse) const;
  bool gathers(const Value *v, const TensorLayout &to) const;
  /// Every box of a graph input or a weight a device loads: inputs bound
  /// before the first op, weights loaded for the whole program (a training
  /// step's from their first reader), each held to its last reader (each
  /// distinct box of a device once; an updated global that a reader must
  /// gather, in the blocks it is kept in).
  void planLoads();
  /// One device's buffer of a weight or an input.
  struct Load {
    int64_t device;
    double bytes;
    size_t first, last;
  };
  std::vector<Load> loads;
  /// Of the values that several operands read (or that are gathered), each
  /// device's loads by box: readers of the same box share its buffer.
  llvm::DenseMap<std::pair<const Value *, int64_t>,
                 llvm::SmallVector<std::pair<Box, size_t>, 2>>
      shared;
  /// Where a load of \p v's \p box on \p device is in `loads`, if any.
  std::optional<size_t> sharedLoad(const Value *v, int64_t device,
                                   const Box &box) const;
  /// The step's end: each update moved in turn to where it is kept (its
  /// computed block freed after the move), partial sums returned reduced.
  void leaveReturns();
  /// Per device, the bytes of each buffer moving operand \p k of op \p i
  /// to \p to makes, in order; none where it reads the block it has.
  using Buffers = std::vector<std::vector<double>>;
  Buffers operandMoves(size_t i, unsigned k, const TensorLayout &to,
                       bool all) const;
  /// The buffers of planReshard's moves from \p from to \p to, as
  /// insert-collectives makes them: one per step, in the layout the plan
  /// passes through.
  Buffers moveBuffers(const TensorLayout &from, const TensorLayout &to,
                      const TensorType &t) const;
  /// Per device, the bytes of the block of \p digits (numbered from
  /// \p offset) with \p halo around it.
  std::vector<double> blockBytes(llvm::ArrayRef<Digit> digits, int64_t offset,
                                 const TensorType &t,
                                 llvm::ArrayRef<int64_t> halo) const;
  /// Op \p i's operand moves, one after the other: each step's buffer
  /// and the one before it held at once, each operand's last buffer kept
  /// for the op; a source that dies at \p i and that only moves read is
  /// freed after the first step of the last. Returns the sources freed.
  std::vector<double>
  readOperands(size_t i, const Config &c, bool all,
               const llvm::DenseMap<const Value *, size_t> &lastUse);
  /// Per device, the bytes operand \p v of op \p i moves from where op \p i
  /// is their last reader: a result's, or an updated global's kept blocks.
  std::vector<double>
  dyingSource(size_t i, const Value *v,
              const llvm::DenseMap<const Value *, size_t> &lastUse);
  /// Per device, the blocks of updated global \p v as it is kept.
  std::vector<std::pair<int64_t, Box>> keptBoxes(const Value *v) const;
  /// After op \p i: values whose last reader it was, and its results no
  /// one reads, die.
  void release(const Op &op, size_t i,
               const llvm::DenseMap<const Value *, size_t> &lastUse);
  /// Moves through \p steps (moveBuffers'): each step's buffer and the one
  /// before it held at once, \p dies (a source's bytes, per device) freed
  /// after the first step, the last buffer kept in `extra`.
  void moveThrough(const Buffers &steps, llvm::ArrayRef<double> dies,
                   std::vector<double> &freed);
  /// The peak so far against live + extra + \p more - \p less.
  void raisePeak(llvm::ArrayRef<double> more, llvm::ArrayRef<double> less);

  const Module &m;
  llvm::ArrayRef<Config> configs;
  llvm::ArrayRef<int64_t> offsets;
  int64_t n, perNode;
  llvm::DenseSet<const Op *> constants;
  /// Blocks live now, moved operands of the op now running, the largest
  /// sum of both so far.
  std::vector<double> live, extra, peak;
  llvm::DenseMap<const Value *, Held> results;
  llvm::DenseMap<const Value *, TensorLayout> kept;
  /// The global each returned update (`update/NAME`) updates.
  llvm::DenseMap<const Value *, const Global *> updateOf;
};
} // namespace

/// The layout each updated global is kept in between steps (as
/// insert-collectives keeps it).
void Peak::findKept() {
  const Func &f = m.main;
  llvm::DenseMap<const Op *, size_t> index;
  for (size_t i = 0; i < f.ops.size(); ++i)
    index[f.ops[i].get()] = i;
  auto found = keptLayouts(
      m, [&](const Op &op) -> llvm::Expected<std::pair<Config, int64_t>> {
        size_t i = index.lookup(&op);
        return std::pair{configOf(i), placed(TensorLayout(), i).offset};
      });
  // The strategy's configurations are checked: nothing here fails.
  for (auto &[g, l] : llvm::cantFail(std::move(found)))
    kept[g] = std::move(l);
  for (size_t r = 0; r < f.returns.size(); ++r) {
    llvm::StringRef name = f.returnNames[r];
    if (name.consume_front("update/"))
      if (const Global *g = m.findGlobal(name))
        updateOf[f.returns[r]] = g;
  }
}

/// Whether operand \p v, an updated global kept in \p kept, reaches a
/// reader in \p to only by a collective (a gathered copy, not a slice).
bool Peak::gathers(const Value *v, const TensorLayout &to) const {
  auto it = kept.find(v);
  return it != kept.end() &&
         llvm::any_of(planReshard(it->second, to, v->type, perNode),
                      [](const ReshardStep &s) {
                        return s.kind != ReshardStep::Kind::Slice;
                      });
}

Peak::Buffers Peak::operandMoves(size_t i, unsigned k, const TensorLayout &to,
                                 bool all) const {
  const Value *v = m.main.ops[i]->operands[k].value;
  const TensorLayout *from = nullptr;
  if (v->kind == Value::Kind::Result) {
    auto it = results.find(v);
    if (it != results.end() && !it->second.everywhere)
      from = &it->second.layout;
  } else if (v->kind == Value::Kind::Global && gathers(v, to)) {
    from = &kept.find(v)->second;
  }
  if (!from || !moves(*from, to, v->type))
    return {};
  if (!all)
    return moveBuffers(*from, to, v->type);
  // An op computed everywhere reads its copy on every device.
  return {std::vector<double>(size_t(n), bytesOf(to, v->type))};
}

Peak::Buffers Peak::moveBuffers(const TensorLayout &from,
                                const TensorLayout &to,
                                const TensorType &t) const {
  ReshardTrace trace;
  auto steps = planReshard(from, to, t, perNode, false, &trace);
  Buffers out;
  std::vector<int64_t> halo(2 * t.rank(), 0);
  if (trace.pointToPoint) {
    if (steps.size() == 2) // the partial sums reduced first
      out.push_back(
          blockBytes(reducedLayout(from).digits, from.offset, t, halo));
    llvm::SmallVector<Digit, 8> target = to.digits;
    for (Digit &d : target)
      if (to.irregular && d.role == Digit::Role::Split)
        d = Digit{d.size, Digit::Role::Replicated, -1, 0};
    if (!to.irregular)
      for (size_t d = 0; d < t.rank(); ++d)
        halo[2 * d] = to.haloLo[d], halo[2 * d + 1] = to.haloHi[d];
    out.push_back(blockBytes(target, to.offset, t, halo));
    return out;
  }
  for (size_t s = 0; s < steps.size(); ++s) {
    if (steps[s].kind == ReshardStep::Kind::Halo) {
      int dim = to.digits[steps[s].digits[0]].tensorDim;
      halo[2 * dim] = to.haloLo[dim];
      halo[2 * dim + 1] = to.haloHi[dim];
    }
    out.push_back(blockBytes(trace.after[s], from.offset, t, halo));
  }
  return out;
}

std::vector<double> Peak::blockBytes(llvm::ArrayRef<Digit> digits,
                                     int64_t offset, const TensorType &t,
                                     llvm::ArrayRef<int64_t> halo) const {
  std::vector<double> out(size_t(n), 0);
  LayoutAttr l{std::vector<Digit>(digits.begin(), digits.end())};
  for (int64_t d = 0; d < l.devices() && offset + d < n; ++d) {
    auto b = l.block(t.shape, d);
    int64_t elements = 1;
    if (!b) { // blocks that do not divide: count the whole tensor
      llvm::consumeError(b.takeError());
      elements = t.numel();
    } else if (!b->held) {
      continue;
    } else {
      for (size_t i = 0; i < t.rank(); ++i)
        elements *=
            std::min(t.shape[i], b->lo[i] + b->size[i] + halo[2 * i + 1]) -
            std::max<int64_t>(0, b->lo[i] - halo[2 * i]);
    }
    int64_t bytes = elements * int64_t(dtypeBytes(t.elem));
    out[size_t(offset + d)] = double((bytes + 63) / 64 * 64);
  }
  return out;
}

void Peak::raisePeak(llvm::ArrayRef<double> more, llvm::ArrayRef<double> less) {
  for (size_t d = 0; d < size_t(n); ++d)
    peak[d] = std::max(peak[d], live[d] + extra[d] + more[d] - less[d]);
}

std::vector<double>
Peak::dyingSource(size_t i, const Value *v,
                  const llvm::DenseMap<const Value *, size_t> &lastUse) {
  std::vector<double> out(size_t(n), 0);
  if (auto it = results.find(v); it != results.end()) {
    if (lastUse.lookup(v) == i)
      add(out, it->second, 1);
    return out;
  }
  if (v->kind != Value::Kind::Global || !kept.count(v))
    return out;
  for (auto &[device, box] : keptBoxes(v))
    if (auto at = sharedLoad(v, device, box); at && loads[*at].last == i)
      out[size_t(device)] += loads[*at].bytes;
  return out;
}

std::optional<size_t> Peak::sharedLoad(const Value *v, int64_t device,
                                       const Box &box) const {
  auto it = shared.find({v, device});
  if (it != shared.end())
    for (const auto &[b, at] : it->second)
      if (b == box)
        return at;
  return std::nullopt;
}

std::vector<std::pair<int64_t, Box>> Peak::keptBoxes(const Value *v) const {
  const TensorLayout &l = kept.find(v)->second;
  LayoutAttr attr{std::vector<Digit>(l.digits.begin(), l.digits.end())};
  std::vector<std::pair<int64_t, Box>> out;
  for (int64_t d = 0; d < l.devices() && l.offset + d < n; ++d) {
    auto block = attr.block(v->type.shape, d);
    if (!block) { // checked when the plan is made
      llvm::consumeError(block.takeError());
      continue;
    }
    Box box{{block->lo.begin(), block->lo.end()},
            {block->size.begin(), block->size.end()},
            !block->held};
    if (box.elements() > 0)
      out.push_back({l.offset + d, std::move(box)});
  }
  return out;
}

std::vector<double>
Peak::readOperands(size_t i, const Config &c, bool all,
                   const llvm::DenseMap<const Value *, size_t> &lastUse) {
  const Op &op = *m.main.ops[i];
  std::vector<Buffers> moved;
  llvm::DenseSet<const Value *> direct;
  llvm::DenseMap<const Value *, unsigned> lastMove;
  for (unsigned k = 0; k < op.operands.size(); ++k) {
    moved.push_back(
        operandMoves(i, k, placed(operandLayout(op, c, k), i), all));
    if (moved.back().empty())
      direct.insert(op.operands[k].value);
    else
      lastMove[op.operands[k].value] = k;
  }
  std::vector<double> freed(size_t(n), 0), none(size_t(n), 0);
  for (unsigned k = 0; k < op.operands.size(); ++k) {
    const Value *v = op.operands[k].value;
    std::vector<double> dies = lastMove.lookup(v) == k && !direct.count(v)
                                   ? dyingSource(i, v, lastUse)
                                   : none;
    moveThrough(moved[k], dies, freed);
  }
  raisePeak(none, freed);
  return freed;
}

void Peak::moveThrough(const Buffers &steps, llvm::ArrayRef<double> dies,
                       std::vector<double> &freed) {
  const std::vector<double> *before = nullptr;
  for (const std::vector<double> &buffer : steps) {
    std::vector<double> both = buffer;
    for (size_t d = 0; d < size_t(n) && before; ++d)
      both[d] += (*before)[d];
    raisePeak(both, freed);
    for (size_t d = 0; d < size_t(n) && !before; ++d)
      freed[d] += dies[d]; // its last reader has read it
    before = &buffer;
  }
  for (size_t d = 0; d < size_t(n) && before; ++d)
    extra[d] += (*before)[d];
}

void Peak::planLoads() {
  const Func &f = m.main;
  // A repeated inference run keeps its weights; a training step's load
  // from its first reader to its last, but for the blocks it updates.
  bool persistent = !m.isTrainingStep();
  llvm::DenseMap<const Value *, unsigned> readers;
  for (const auto &op : f.ops)
    for (const Operand &o : op->operands)
      if (o.value->kind != Value::Kind::Result)
        ++readers[o.value];
  // A training step's load of a block an updated global is kept in stays
  // in the device's arena from step to step (the plan carries the update
  // into it): held for the whole program.
  llvm::DenseMap<const Value *, std::vector<std::pair<int64_t, Box>>> keptAt;
  auto carried = [&](const Value *v, int64_t device, const Box &box) {
    if (persistent || !kept.count(v))
      return false;
    auto [it, fresh] = keptAt.try_emplace(v);
    if (fresh)
      it->second = keptBoxes(v);
    return llvm::is_contained(it->second, std::pair{device, box});
  };
  auto load = [&](const Value *v, int64_t device, const Box &box, size_t i,
                  bool share) {
    bool input = v->kind == Value::Kind::Argument;
    bool whole = (persistent && !input) || carried(v, device, box);
    std::optional<size_t> at =
        share ? sharedLoad(v, device, box) : std::nullopt;
    if (!at) {
      at = loads.size();
      loads.push_back({device, bytesOf(box, v->type), input ? 0 : i, i});
      if (whole)
        loads.back().first = 0;
      if (share)
        shared[{v, device}].push_back({box, *at});
    }
    loads[*at].last = whole ? f.ops.size() : i;
  };
  for (size_t i = 0; i < f.ops.size(); ++i) {
    const Op &op = *f.ops[i];
    Config c = configOf(i);
    for (unsigned k = 0; k < op.operands.size(); ++k) {
      const Value *v = op.operands[k].value;
      if (v->kind == Value::Kind::Result)
        continue;
      TensorLayout l = placed(operandLayout(op, c, k), i);
      bool gathered = v->kind == Value::Kind::Global && gathers(v, l);
      for (auto &[device, box] : gathered ? keptBoxes(v) : readBoxes(i, k))
        load(v, device, box, i, gathered || readers.lookup(v) > 1);
    }
  }
}

std::vector<std::pair<int64_t, Box>> Peak::readBoxes(size_t i,
                                                     unsigned k) const {
  const Op &op = *m.main.ops[i];
  bool all = constants.count(&op) > 0;
  Config c = configOf(i);
  int64_t at = placed(TensorLayout(), i).offset, devs = 1;
  for (int64_t f : c)
    devs *= f;
  if (all)
    devs = n;
  std::vector<std::pair<int64_t, Box>> out;
  const Operand &o = op.operands[k];
  for (int64_t d = 0; d < devs && at + d < n; ++d) {
    Box box = reachedBox(op, o.map, o.value->type, iterBlock(op, c, d));
    if (box.elements() > 0)
      out.push_back({at + d, std::move(box)});
  }
  return out;
}

void Peak::leaveReturns() {
  const Func &f = m.main;
  std::fill(extra.begin(), extra.end(), 0);
  std::vector<double> freed(size_t(n), 0), none(size_t(n), 0);
  for (size_t r = 0; r < f.returns.size(); ++r) {
    const Value *v = f.returns[r];
    auto it = results.find(v);
    if (it == results.end() || it->second.everywhere)
      continue;
    const Held &h = it->second;
    llvm::StringRef name = f.returnNames[r];
    const Global *g =
        name.consume_front("update/") ? m.findGlobal(name) : nullptr;
    auto k = g ? kept.find(&g->value) : kept.end();
    if (k != kept.end()) {
      if (!moves(h.layout, k->second, v->type))
        continue;
      std::vector<double> computed(size_t(n), 0);
      add(computed, h, 1); // freed once moved
      moveThrough(moveBuffers(h.layout, k->second, v->type), computed, freed);
    } else if (llvm::any_of(h.layout.digits, [](const Digit &d) {
                 return d.role == Digit::Role::Partial;
               })) {
      add(extra, h, 1); // reduced into a buffer of its own
      raisePeak(none, freed);
    }
  }
}

/// After op \p i: values whose last reader it was, and its results no one
/// reads, die.
void Peak::release(const Op &op, size_t i,
                   const llvm::DenseMap<const Value *, size_t> &lastUse) {
  for (const Operand &o : op.operands)
    if (auto it = results.find(o.value);
        it != results.end() && lastUse.lookup(o.value) == i) {
      add(live, it->second, -1);
      results.erase(it);
    }
  for (const Result &r : op.results)
    if (!lastUse.count(r.value.get())) {
      add(live, results[r.value.get()], -1);
      results.erase(r.value.get());
    }
}

bool Peak::inPlaceUpdate(
    const Op &op, unsigned r, const TensorLayout &l, size_t i,
    const llvm::DenseMap<const Value *, size_t> &lastUse) const {
  const Value *v = op.results[r].value.get();
  auto it = updateOf.find(v);
  if (it == updateOf.end() || opKindFamily(op.kind) != OpFamily::Elementwise ||
      op.results.size() != 1)
    return false;
  const Value *w = &it->second->value;
  auto k = kept.find(w);
  if (k == kept.end() || moves(l, k->second, v->type) || lastUse.lookup(w) > i)
    return false;
  return llvm::all_of(op.operands, [&](const Operand &o) {
    return o.value != w || o.map == op.results[r].map;
  });
}

double Peak::run() {
  const Func &f = m.main;
  findKept();
  planLoads();
  // Loads by the op before which they start and after which they end.
  std::vector<std::vector<const Load *>> starts(f.ops.size() + 1),
      ends(f.ops.size() + 1);
  for (const Load &load : loads) {
    starts[load.first].push_back(&load);
    ends[load.last].push_back(&load);
  }
  llvm::DenseMap<const Value *, size_t> lastUse;
  for (size_t i = 0; i < f.ops.size(); ++i)
    for (const Operand &o : f.ops[i]->operands)
      lastUse[o.value] = i;
  for (const Value *v : f.returns)
    lastUse[v] = f.ops.size();
  for (size_t i = 0; i < f.ops.size(); ++i) {
    const Op &op = *f.ops[i];
    Config c = configOf(i);
    bool all = constants.count(&op) > 0;
    std::fill(extra.begin(), extra.end(), 0);
    for (const Load *l : starts[i])
      live[size_t(l->device)] += l->bytes;
    // The moves run first; a source that only moves read is freed before
    // the op's results are made.
    std::vector<double> freed = readOperands(i, c, all, lastUse);
    for (unsigned r = 0; r < op.results.size(); ++r) {
      const Value *v = op.results[r].value.get();
      TensorLayout l = placed(resultLayout(op, c, r), i);
      Held h{l, all,
             inPlaceUpdate(op, r, l, i, lastUse) ? 0 : bytesOf(l, v->type)};
      add(live, h, 1);
      results[v] = h;
    }
    raisePeak(std::vector<double>(size_t(n), 0), freed);
    release(op, i, lastUse);
    for (const Load *l : ends[i])
      live[size_t(l->device)] -= l->bytes;
  }
  leaveReturns();
  return *std::max_element(peak.begin(), peak.end());
}

double programPeakBytes(const Module &m, llvm::ArrayRef<Config> configs,
                        llvm::ArrayRef<int64_t> offsets, int64_t devices,
                        int64_t perNode) {
  return Peak(m, configs, offsets, std::max<int64_t>(1, devices),
              std::max<int64_t>(1, perNode))
      .run();
}

} // namespace pax
