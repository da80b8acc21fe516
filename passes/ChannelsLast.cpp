//===- ChannelsLast.cpp - Convolution activations stored NHWC -------------===//
#include "passes/ChannelsLast.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <array>

namespace pax {
namespace {

/// Channels-last dim j holds NCHW dim kFrom[j]; NCHW dim i is stored at
/// channels-last dim kTo[i].
constexpr unsigned kFrom[4] = {0, 2, 3, 1};
constexpr unsigned kTo[4] = {0, 3, 1, 2};

/// True where \p m is `[d0, d1, d2, d3]`.
bool isIdentity4(const AccessMap &m) {
  if (m.size() != 4)
    return false;
  for (unsigned j = 0; j < 4; ++j)
    if (!m[j].isPlainDim() || m[j].dims[0] != j)
      return false;
  return true;
}

/// True when every expr of \p m is an index (no whole-dim read, no
/// lookup): the map alone says which element each point touches.
bool byIndex(const AccessMap &m) {
  return llvm::none_of(m, [](const AccessExpr &e) {
    return e.kind == AccessExpr::Kind::Full ||
           e.kind == AccessExpr::Kind::Lookup;
  });
}

/// True when every backend's kernel for \p op reads and writes its tensors
/// through its maps alone, so that permuting a tensor's dims and its maps
/// alike computes the same values.
bool definedByMaps(const Op &op) {
  switch (opKindFamily(op.kind)) {
  case OpFamily::Elementwise:
  case OpFamily::Layout:
  case OpFamily::Reduction:
    return true;
  default:
    break;
  }
  switch (op.kind) {
  case OpKind::Conv:
  case OpKind::MaxPool:
  case OpKind::BatchNorm:
  case OpKind::Lrn:
    return true;
  case OpKind::AveragePool:
    return op.intAttr("count_include_pad", 0) == 0;
  default:
    return false;
  }
}

/// True for a 2-D convolution: a 4-D input and result.
bool isConv2D(const Op &op) {
  return op.kind == OpKind::Conv && op.operands.size() >= 2 &&
         op.results.size() == 1 && op.operands[0].map.size() == 4 &&
         op.results[0].map.size() == 4;
}

/// True for an op that computes each point of its 4-D results from the
/// same point of its inputs: elementwise ops and batch norm over [n, c,
/// h, w], every result written plainly.
bool isPointwise4(const Op &op) {
  if (opKindFamily(op.kind) != OpFamily::Elementwise &&
      op.kind != OpKind::BatchNorm)
    return false;
  if (op.iters.size() != 4 || op.results.empty())
    return false;
  return llvm::all_of(
             op.iters,
             [](const IterDim &d) { return d.kind == IterKind::Parallel; }) &&
         llvm::all_of(op.results,
                      [](const Result &r) { return isIdentity4(r.map); });
}

/// True for a 2-D pool.
bool isPool(const Op &op) {
  return (op.kind == OpKind::MaxPool || op.kind == OpKind::AveragePool) &&
         op.operands.size() == 1 && op.operands[0].map.size() == 4;
}

/// Permutes an NCHW-indexed \p map into channels-last order.
void permuteMap(AccessMap &map) {
  AccessMap old = map;
  for (unsigned j = 0; j < 4; ++j)
    map[j] = old[kFrom[j]];
}

/// Walks pointwise \p op in [n, h, w, c] order: its iteration dims
/// permuted, and every map's dims renumbered to match.
void walkChannelsLast(Op &op) {
  auto old = op.iters;
  for (unsigned j = 0; j < 4; ++j)
    op.iters[j] = old[kFrom[j]];
  auto renumber = [](AccessMap &map) {
    for (AccessExpr &e : map)
      for (unsigned &d : e.dims)
        if (d < 4)
          d = kTo[d];
  };
  for (Operand &o : op.operands)
    renumber(o.map);
  for (Result &r : op.results)
    renumber(r.map);
}

class Chooser {
public:
  explicit Chooser(Module &m);
  unsigned run();

private:
  /// Whether \p v may be stored channels-last (the header's conditions).
  bool eligible(const Value *v) const;
  /// Chooses \p v when eligible; true when newly chosen.
  bool choose(Value *v) { return eligible(v) && chosen.insert(v).second; }
  /// Chooses the other activations \p op joins when one is chosen: those
  /// a pointwise op reads point by point and writes, a pool's or a
  /// concat's inputs and result. True when any was newly chosen.
  bool join(Op &op);
  void rewrite();

  Module &m;
  llvm::DenseSet<const Value *> returned;
  /// The maps through which each value is read or written, and their ops.
  llvm::DenseMap<const Value *,
                 llvm::SmallVector<std::pair<const Op *, const AccessMap *>, 4>>
      touches;
  llvm::DenseSet<Value *> chosen;
};

Chooser::Chooser(Module &m) : m(m) {
  returned.insert(m.main.returns.begin(), m.main.returns.end());
  for (const auto &op : m.main.ops) {
    for (const Operand &o : op->operands)
      touches[o.value].push_back({op.get(), &o.map});
    for (const Result &r : op->results)
      touches[r.value.get()].push_back({op.get(), &r.map});
  }
}

bool Chooser::eligible(const Value *v) const {
  if (v->kind != Value::Kind::Result || v->type.rank() != 4 ||
      returned.count(v))
    return false;
  auto it = touches.find(v);
  return it != touches.end() && llvm::all_of(it->second, [](const auto &t) {
           return definedByMaps(*t.first) && byIndex(*t.second);
         });
}

bool Chooser::join(Op &op) {
  llvm::SmallVector<Value *, 4> joined;
  if (isPointwise4(op)) {
    // The operands read point by point, of the result's shape.
    for (Operand &o : op.operands)
      if (isIdentity4(o.map) &&
          o.value->type.shape == op.results[0].value->type.shape)
        joined.push_back(o.value);
  } else if (isPool(op) || op.kind == OpKind::Concat) {
    for (Operand &o : op.operands)
      if (o.map.size() == 4)
        joined.push_back(o.value);
  } else {
    return false;
  }
  for (Result &r : op.results)
    joined.push_back(r.value.get());
  if (llvm::none_of(joined, [&](Value *v) { return chosen.count(v); }))
    return false;
  bool grew = false;
  for (Value *v : joined)
    grew |= choose(v);
  return grew;
}

void Chooser::rewrite() {
  for (Value *v : chosen) {
    auto &shape = v->type.shape;
    std::array<int64_t, 4> old;
    std::copy_n(shape.begin(), 4, old.begin());
    for (unsigned j = 0; j < 4; ++j)
      shape[j] = old[kFrom[j]];
  }
  for (auto &op : m.main.ops) {
    bool pointwise = isPointwise4(*op);
    for (Operand &o : op->operands)
      if (chosen.count(o.value))
        permuteMap(o.map);
    for (Result &r : op->results)
      if (chosen.count(r.value.get()))
        permuteMap(r.map);
    if (pointwise && llvm::all_of(op->results, [&](const Result &r) {
          return chosen.count(r.value.get());
        }))
      walkChannelsLast(*op);
  }
}

unsigned Chooser::run() {
  for (auto &op : m.main.ops)
    if (isConv2D(*op)) {
      choose(op->operands[0].value);
      choose(op->results[0].value.get());
    }
  if (chosen.empty())
    return 0;
  for (bool grew = true; grew;) {
    grew = false;
    for (auto &op : m.main.ops)
      grew |= join(*op);
  }
  rewrite();
  return unsigned(chosen.size());
}

} // namespace

unsigned channelsLast(Module &m) { return Chooser(m).run(); }

} // namespace pax
