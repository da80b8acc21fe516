//===- PeakMemory.cpp - A program's peak memory per device ----------------===//
#include "passes/sharding/PeakMemory.h"

#include "passes/sharding/Layout.h"
#include "passes/sharding/Reshard.h"
#include "passes/sharding/Solve.h"

#include "llvm/ADT/DenseMap.h"

#include <map>

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
  static double bytesOf(const TensorLayout &l, const TensorType &t) {
    int64_t bytes = l.blockElements(t) * int64_t(dtypeBytes(t.elem));
    return double((bytes + 63) / 64 * 64);
  }
  void add(std::vector<double> &to, const Held &h, double sign) {
    int64_t lo = h.everywhere ? 0 : h.layout.offset;
    int64_t hi = h.everywhere ? n : lo + h.layout.devices();
    for (int64_t d = std::max<int64_t>(0, lo); d < std::min(hi, n); ++d)
      to[size_t(d)] += sign * h.bytes;
  }
  /// One load of a weight: its layout (the same blocks, the same buffer).
  static std::string keyOf(const TensorLayout &l, bool all) {
    return l.str() + "@" + std::to_string(l.offset) + (all ? "*" : "");
  }
  /// Whether moving \p from to \p to makes a new buffer.
  bool moves(const TensorLayout &from, const TensorLayout &to,
             const TensorType &t) const {
    return !planReshard(from, to, t, perNode).empty();
  }
  void findKept();
  bool gathers(const Value *v, const TensorLayout &to) const;
  /// Every block of a graph input or a weight a reader loads: inputs bound
  /// before the first op, weights loaded for the whole program (a training
  /// step's from their first reader), each held to its last reader (each
  /// distinct layout once; an updated global that a reader must gather, in
  /// its kept layout).
  void planLoads();
  struct Load {
    Held held;
    size_t first, last;
  };
  std::map<std::pair<const Value *, std::string>, Load> loads;
  /// The step's end: each update moved in turn to where it is kept (its
  /// computed block freed after the move), partial sums returned reduced.
  void leaveReturns();
  bool readOperand(size_t i, unsigned k, const TensorLayout &to, bool all);
  /// The blocks of op \p i's operands that only moved copies read and that
  /// die at \p i: freed once the moves are done, before \p i's results.
  void release(const Op &op, size_t i,
               const llvm::DenseMap<const Value *, size_t> &lastUse);
  std::vector<double>
  movedAway(size_t i, llvm::ArrayRef<bool> copied,
            const llvm::DenseMap<const Value *, size_t> &lastUse);

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

/// Operand \p k of op \p i, read in layout \p to (\p all: the op runs
/// on every device): a moved copy while the op runs, where it needs one;
/// whether it made one.
bool Peak::readOperand(size_t i, unsigned k, const TensorLayout &to, bool all) {
  const Value *v = m.main.ops[i]->operands[k].value;
  bool copy = false;
  if (v->kind == Value::Kind::Result) {
    auto it = results.find(v);
    copy = it != results.end() && !it->second.everywhere &&
           moves(it->second.layout, to, v->type);
  } else if (v->kind == Value::Kind::Global) {
    copy = gathers(v, to);
  }
  if (copy)
    add(extra, {to, all, bytesOf(to, v->type)}, 1);
  return copy;
}

std::vector<double>
Peak::movedAway(size_t i, llvm::ArrayRef<bool> copied,
                const llvm::DenseMap<const Value *, size_t> &lastUse) {
  std::vector<double> freed(size_t(n), 0);
  const Op &op = *m.main.ops[i];
  llvm::DenseSet<const Value *> direct, done;
  for (unsigned k = 0; k < op.operands.size(); ++k)
    if (!copied[k])
      direct.insert(op.operands[k].value);
  for (unsigned k = 0; k < op.operands.size(); ++k) {
    const Value *v = op.operands[k].value;
    auto it = results.find(v);
    if (copied[k] && !direct.count(v) && it != results.end() &&
        lastUse.lookup(v) == i && done.insert(v).second)
      add(freed, it->second, 1);
  }
  return freed;
}

void Peak::planLoads() {
  const Func &f = m.main;
  // A repeated inference run keeps its weights; a training step's load
  // from its first reader to its last.
  bool persistent = !m.isTrainingStep();
  for (size_t i = 0; i < f.ops.size(); ++i) {
    const Op &op = *f.ops[i];
    Config c = configOf(i);
    bool all = constants.count(&op) > 0;
    for (unsigned k = 0; k < op.operands.size(); ++k) {
      const Value *v = op.operands[k].value;
      if (v->kind == Value::Kind::Result)
        continue;
      TensorLayout l = placed(operandLayout(op, c, k), i);
      bool whole = all;
      if (v->kind == Value::Kind::Global && gathers(v, l))
        l = kept.find(v)->second, whole = false; // the kept block
      bool input = v->kind == Value::Kind::Argument;
      auto [it, fresh] = loads.try_emplace(
          {v, keyOf(l, whole)},
          Load{{l, whole, bytesOf(l, v->type)}, input ? 0 : i, i});
      it->second.last = i;
      if (persistent && !input)
        it->second.first = 0, it->second.last = f.ops.size();
    }
  }
}

void Peak::leaveReturns() {
  const Func &f = m.main;
  std::fill(extra.begin(), extra.end(), 0);
  std::vector<double> turn(size_t(n), 0); // the largest one move holds
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
      if (moves(h.layout, k->second, v->type)) {
        add(extra, {k->second, false, bytesOf(k->second, v->type)}, 1);
        add(extra, h, -1);
        std::vector<double> one(size_t(n), 0);
        add(one, h, 1);
        for (size_t d = 0; d < size_t(n); ++d)
          turn[d] = std::max(turn[d], one[d]);
      }
    } else if (llvm::any_of(h.layout.digits, [](const Digit &d) {
                 return d.role == Digit::Role::Partial;
               })) {
      add(extra, h, 1);
    }
  }
  for (size_t d = 0; d < size_t(n); ++d)
    peak[d] = std::max(peak[d], live[d] + extra[d] + turn[d]);
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

double Peak::run() {
  const Func &f = m.main;
  findKept();
  planLoads();
  // Loads by the op before which they start and after which they end.
  std::vector<std::vector<const Held *>> starts(f.ops.size() + 1),
      ends(f.ops.size() + 1);
  for (auto &[key, load] : loads) {
    starts[load.first].push_back(&load.held);
    ends[load.last].push_back(&load.held);
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
    for (const Held *h : starts[i])
      add(live, *h, 1);
    llvm::SmallVector<bool, 8> copied;
    for (unsigned k = 0; k < op.operands.size(); ++k)
      copied.push_back(
          readOperand(i, k, placed(operandLayout(op, c, k), i), all));
    // The moves run first, sources and copies both held; a source that
    // only moves read is freed before the op's results are made.
    for (size_t d = 0; d < size_t(n); ++d)
      peak[d] = std::max(peak[d], live[d] + extra[d]);
    std::vector<double> freed = movedAway(i, copied, lastUse);
    for (unsigned r = 0; r < op.results.size(); ++r) {
      const Value *v = op.results[r].value.get();
      TensorLayout l = placed(resultLayout(op, c, r), i);
      Held h{l, all, bytesOf(l, v->type)};
      add(live, h, 1);
      results[v] = h;
    }
    for (size_t d = 0; d < size_t(n); ++d)
      peak[d] = std::max(peak[d], live[d] - freed[d] + extra[d]);
    release(op, i, lastUse);
    for (const Held *h : ends[i])
      add(live, *h, -1);
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
