//===- FuseAttention.cpp - Scaled-dot-product attention as one op ---------===//
#include "passes/FuseAttention.h"

#include "passes/BasicPasses.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"

#include <optional>

namespace pax {
namespace {

/// Where an op's iteration dim lands in the attention op: one of its dims
/// (the scores' tensor dims, in order), a head dim read whole, or nowhere.
constexpr int kWhole = -2, kNowhere = -1;
using DimMap = llvm::SmallVector<int, 8>;

/// How a mask edits the scores (the `masks` attribute of `attention`).
enum MaskKind : int64_t { AddMask = 1, KeepIfTrue = 2, KeepIfFalse = 3 };

/// One attention chain, found from its softmax.
struct Chain {
  llvm::SmallVector<int64_t, 4> scores; ///< the scores' shape
  Op *pv = nullptr;
  std::vector<Op *> dead; ///< every op the attention op replaces
  Operand q, k, v;
  AccessMap out;
  /// The masks from the scores outwards (reversed once found).
  std::vector<Operand> masks;
  std::vector<int64_t> kinds;
  std::vector<float> fills;
  double scale = 1;
  bool nanToZero = false;
};

/// \p m with each op dim replaced by its attention dim (DimMap); nullopt
/// when it reads something other than plain dims, broadcasts and whole
/// dims, or a dim with no place in the attention op.
std::optional<AccessMap> translate(const AccessMap &m, const DimMap &to) {
  AccessMap out;
  for (const AccessExpr &e : m) {
    if (e.kind == AccessExpr::Kind::Broadcast ||
        e.kind == AccessExpr::Kind::Full) {
      out.push_back(e);
      continue;
    }
    if (!e.isPlainDim() || to[e.dims[0]] == kNowhere)
      return std::nullopt;
    int d = to[e.dims[0]];
    out.push_back(d == kWhole ? AccessExpr::full() : AccessExpr::dim(d));
  }
  return out;
}

/// How many dims of \p m are read whole.
unsigned wholeDims(const AccessMap &m) {
  return unsigned(llvm::count_if(
      m, [](const AccessExpr &e) { return e.kind == AccessExpr::Kind::Full; }));
}

/// True when \p m reads the batch dims and \p row (queries or keys) of an
/// attention op of \p rank dims plainly, each once, and one head dim
/// whole: a map the gradients can write through.
bool readsRows(const AccessMap &m, size_t rank, int row) {
  llvm::SmallVector<bool, 8> seen(rank, false);
  for (const AccessExpr &e : m) {
    if (e.kind == AccessExpr::Kind::Full)
      continue;
    if (!e.isPlainDim() || seen[e.dims[0]])
      return false;
    seen[e.dims[0]] = true;
  }
  for (size_t d = 0; d < rank; ++d)
    if (seen[d] != (d + 2 < rank || int(d) == row))
      return false;
  return wholeDims(m) == 1;
}

/// The attention dim of each of \p op's dims, read off a plain result map
/// (tensor dim i is attention dim i); nullopt when the map is not plain.
std::optional<DimMap> dimsOfResult(const Op &op, const AccessMap &map) {
  DimMap to(op.iters.size(), kNowhere);
  for (size_t i = 0; i < map.size(); ++i) {
    if (!map[i].isPlainDim() || to[map[i].dims[0]] != kNowhere)
      return std::nullopt;
    to[map[i].dims[0]] = int(i);
  }
  return to;
}

class Fuser {
public:
  explicit Fuser(Module &m) : m(m) { countUses(); }

  unsigned run();

private:
  void countUses();
  bool soleUse(const Value *v) const { return uses.lookup(v) == 1; }
  bool dependsOnParameter(const Value *v);
  std::optional<Chain> match(Op &softmax);
  bool findOutput(Chain &c, Op &softmax);
  bool takeOutput(Chain &c, Op &pv, const Value *p);
  bool walk(Chain &c, Value *x);
  bool edit(Chain &c, const Op &op, unsigned chain, const DimMap &to);
  bool takeScores(Chain &c, Op &qk, DimMap to);
  std::optional<Operand> unscaled(Chain &c, const Operand &o, const DimMap &to,
                                  int row);
  void replace(Chain &c, Op &softmax);

  Module &m;
  llvm::DenseMap<const Value *, unsigned> uses;
  llvm::DenseMap<const Value *, bool> parameterDependent;
};

void Fuser::countUses() { uses = m.main.countUses(); }

bool Fuser::dependsOnParameter(const Value *v) {
  if (v->kind == Value::Kind::Global)
    return v->global->isParameter;
  if (v->kind != Value::Kind::Result)
    return false;
  auto it = parameterDependent.find(v);
  if (it != parameterDependent.end())
    return it->second;
  bool any = llvm::any_of(v->def->operands, [&](const Operand &o) {
    return dependsOnParameter(o.value);
  });
  parameterDependent[v] = any;
  return any;
}

/// The chain through \p op's operand \p chain (the scores) one step back
/// from the softmax: a scale, an added mask or a `where` mask.
bool Fuser::edit(Chain &c, const Op &op, unsigned chain, const DimMap &to) {
  auto other = [&](unsigned i) -> const Operand & { return op.operands[i]; };
  auto mask = [&](unsigned i, MaskKind kind, float fill) {
    auto map = translate(other(i).map, to);
    if (!map || wholeDims(*map) || dependsOnParameter(other(i).value))
      return false;
    c.masks.push_back({other(i).value, *map});
    c.kinds.push_back(kind);
    c.fills.push_back(fill);
    return true;
  };
  switch (op.kind) {
  case OpKind::Mul:
  case OpKind::Div: {
    if (op.operands.size() != 2 || (op.kind == OpKind::Div && chain != 0))
      return false;
    auto s = scalarConstant(other(1 - chain).value);
    if (!s || (op.kind == OpKind::Div && *s == 0))
      return false;
    c.scale = op.kind == OpKind::Mul ? c.scale * *s : c.scale / *s;
    return true;
  }
  case OpKind::Add:
    return op.operands.size() == 2 && mask(1 - chain, AddMask, 0);
  case OpKind::Where: {
    if (op.operands.size() != 3 || chain == 0)
      return false;
    auto fill = scalarConstant(other(3 - chain).value);
    return fill && mask(0, chain == 1 ? KeepIfTrue : KeepIfFalse, float(*fill));
  }
  default:
    return false;
  }
}

/// Walks back from the softmax's input \p x to Q.K^T through scales and
/// masks; each step's other operand decides which of its operands is the
/// scores (an add of two score-shaped tensors tries both).
bool Fuser::walk(Chain &c, Value *x) {
  if (x->kind != Value::Kind::Result || !soleUse(x) ||
      x->type.shape != llvm::ArrayRef<int64_t>(c.scores))
    return false;
  Op &op = *x->def;
  if (op.results.size() != 1)
    return false;
  auto to = dimsOfResult(op, op.results[0].map);
  if (!to)
    return false;
  if (op.kind == OpKind::MatMul)
    return takeScores(c, op, *to);
  for (unsigned i = 0; i < op.operands.size(); ++i) {
    if (op.operands[i].value != x && op.operands[i].map == op.results[0].map) {
      Chain t = c;
      if (edit(t, op, i, *to) && walk(t, op.operands[i].value)) {
        t.dead.push_back(&op);
        c = std::move(t);
        return true;
      }
    }
  }
  return false;
}

/// Q (or K) as the matmul reads it, through a scale by a constant scalar
/// (folded into the attention's scale) when that is all that made it.
std::optional<Operand> Fuser::unscaled(Chain &c, const Operand &o,
                                       const DimMap &to, int row) {
  Operand read = o;
  const Value *v = o.value;
  if (v->kind == Value::Kind::Result && soleUse(v) &&
      v->def->kind == OpKind::Mul && v->def->operands.size() == 2) {
    Op &mul = *v->def;
    for (unsigned i = 0; i < 2; ++i) {
      auto s = scalarConstant(mul.operands[1 - i].value);
      if (s && mul.operands[i].map == mul.results[0].map) {
        c.scale *= *s;
        c.dead.push_back(&mul);
        read.value = mul.operands[i].value;
        break;
      }
    }
  }
  auto map = translate(read.map, to);
  if (!map || !readsRows(*map, c.scores.size(), row))
    return std::nullopt;
  read.map = *map;
  return read;
}

/// The scores' matmul: its one reduction dim is the head dim of Q and K.
bool Fuser::takeScores(Chain &c, Op &qk, DimMap to) {
  if (qk.operands.size() != 2)
    return false;
  int head = -1;
  for (size_t d = 0; d < qk.iters.size(); ++d) {
    if (to[d] != kNowhere)
      continue;
    if (head >= 0 || qk.iters[d].kind != IterKind::Reduction)
      return false;
    head = int(d);
  }
  if (head < 0)
    return false;
  to[size_t(head)] = kWhole;
  int rank = int(c.scores.size());
  auto q = unscaled(c, qk.operands[0], to, rank - 2);
  auto k = q ? unscaled(c, qk.operands[1], to, rank - 1) : std::nullopt;
  if (!k)
    return false;
  c.q = *q;
  c.k = *k;
  c.dead.push_back(&qk);
  return true;
}

/// P.V: P (the probabilities \p p) read plainly with the keys as its
/// reduction dim; the one dim P does not index is V's head dim.
bool Fuser::takeOutput(Chain &c, Op &pv, const Value *p) {
  if (pv.kind != OpKind::MatMul || pv.operands.size() != 2 ||
      pv.operands[0].value != p || pv.operands[1].value == p)
    return false;
  auto to = dimsOfResult(pv, pv.operands[0].map);
  if (!to)
    return false;
  int head = -1;
  for (size_t d = 0; d < pv.iters.size(); ++d) {
    bool isKey = (*to)[d] == int(c.scores.size()) - 1;
    if (isKey != (pv.iters[d].kind == IterKind::Reduction))
      return false;
    if ((*to)[d] != kNowhere)
      continue;
    if (head >= 0)
      return false;
    head = int(d);
  }
  if (head < 0)
    return false;
  (*to)[size_t(head)] = kWhole;
  auto v = translate(pv.operands[1].map, *to);
  auto out = translate(pv.results[0].map, *to);
  int rank = int(c.scores.size());
  if (!v || !out || !readsRows(*v, size_t(rank), rank - 1) ||
      !readsRows(*out, size_t(rank), rank - 2))
    return false;
  c.v = {pv.operands[1].value, *v};
  c.out = *out;
  c.pv = &pv;
  c.dead.push_back(&pv);
  return true;
}

/// Where the softmax's probabilities go: straight into P.V, or through
/// Where(IsNaN(p), 0, p) first (fully masked rows give zeros).
bool Fuser::findOutput(Chain &c, Op &softmax) {
  const Value *p = softmax.results[0].value.get();
  llvm::SmallVector<Op *, 2> readers;
  for (const auto &op : m.main.ops)
    if (llvm::any_of(op->operands,
                     [&](const Operand &o) { return o.value == p; }))
      readers.push_back(op.get());
  if (llvm::is_contained(m.main.returns, p))
    return false;
  if (readers.size() == 1)
    return uses.lookup(p) == 1 && takeOutput(c, *readers[0], p);
  if (readers.size() != 2 || uses.lookup(p) != 2)
    return false;
  Op *isNan = readers[0]->kind == OpKind::IsNaN ? readers[0] : readers[1];
  Op *guard = isNan == readers[0] ? readers[1] : readers[0];
  if (isNan->kind != OpKind::IsNaN || guard->kind != OpKind::Where ||
      guard->operands.size() != 3 || isNan->results.size() != 1 ||
      guard->operands[0].value != isNan->results[0].value.get() ||
      !soleUse(isNan->results[0].value.get()) ||
      guard->operands[2].value != p ||
      scalarConstant(guard->operands[1].value) != 0.0 ||
      isNan->operands[0].map != isNan->results[0].map ||
      guard->operands[0].map != guard->results[0].map ||
      guard->operands[2].map != guard->results[0].map ||
      isNan->results[0].map != guard->results[0].map)
    return false;
  const Value *q = guard->results[0].value.get();
  if (!soleUse(q) || llvm::is_contained(m.main.returns, q))
    return false;
  for (const auto &op : m.main.ops)
    if (llvm::any_of(op->operands,
                     [&](const Operand &o) { return o.value == q; }))
      if (!takeOutput(c, *op, q))
        return false;
  c.nanToZero = true;
  c.dead.push_back(isNan);
  c.dead.push_back(guard);
  return c.pv != nullptr;
}

std::optional<Chain> Fuser::match(Op &softmax) {
  if (softmax.kind != OpKind::Softmax || softmax.operands.size() != 1 ||
      softmax.results.size() != 1)
    return std::nullopt;
  const AccessMap &map = softmax.results[0].map;
  auto to = dimsOfResult(softmax, map);
  // Softmax over the last dim alone, read as it is written.
  if (!to || map.size() < 2 || softmax.operands[0].map != map)
    return std::nullopt;
  for (size_t d = 0; d < softmax.iters.size(); ++d)
    if ((softmax.iters[d].kind == IterKind::Reduction) !=
        ((*to)[d] == int(map.size()) - 1))
      return std::nullopt;
  Chain c;
  c.scores.assign(softmax.results[0].value->type.shape.begin(),
                  softmax.results[0].value->type.shape.end());
  if (!findOutput(c, softmax) || !walk(c, softmax.operands[0].value))
    return std::nullopt;
  c.dead.push_back(&softmax);
  std::reverse(c.masks.begin(), c.masks.end());
  std::reverse(c.kinds.begin(), c.kinds.end());
  std::reverse(c.fills.begin(), c.fills.end());
  return c;
}

/// The attention op's name: the softmax's scope and `Attention`.
std::string attentionName(llvm::StringRef softmax) {
  size_t slash = softmax.rfind('/');
  if (slash == llvm::StringRef::npos)
    return softmax.empty() ? "attention" : (softmax + "/attention").str();
  return (softmax.take_front(slash + 1) + "Attention").str();
}

/// Puts the attention op in place of P.V and redirects P.V's readers.
void Fuser::replace(Chain &c, Op &softmax) {
  auto op = std::make_unique<Op>(OpKind::Attention);
  size_t rank = c.scores.size();
  for (size_t i = 0; i < rank; ++i)
    op->iters.push_back(
        {i + 2 < rank    ? "b" + std::to_string(i)
         : i + 2 == rank ? "q"
                         : "k",
         c.scores[i],
         i + 1 == rank ? IterKind::Reduction : IterKind::Parallel});
  op->operands = {c.q, c.k, c.v};
  op->sources = 0;
  for (const Op *gone : llvm::DenseSet<const Op *>(c.dead.begin(), c.dead.end()))
    op->sources += gone->sources;
  op->sources = std::max(op->sources, 1u);
  op->operands.append(c.masks.begin(), c.masks.end());
  Value *old = c.pv->results[0].value.get();
  Value *out = op->addResult(old->type, c.out);
  AccessMap rows;
  for (unsigned i = 0; i + 1 < rank; ++i)
    rows.push_back(AccessExpr::dim(i));
  op->addResult(TensorType{old->type.elem,
                           llvm::SmallVector<int64_t, 4>(c.scores.begin(),
                                                         c.scores.end() - 1)},
                rows);
  op->attrs["name"] = attentionName(softmax.name());
  // The source node whose output the op writes (--emit=onnx-sharded).
  if (!c.pv->name().empty())
    op->attrs["onnx_node"] = c.pv->name().str();
  op->attrs["scale"] = float(c.scale);
  if (!c.kinds.empty())
    op->attrs["masks"] = c.kinds;
  if (llvm::any_of(c.kinds, [](int64_t k) { return k != AddMask; }))
    op->attrs["fills"] = c.fills;
  if (c.nanToZero)
    op->attrs["nan_to_zero"] = int64_t(1);
  for (auto &reader : m.main.ops)
    for (Operand &o : reader->operands)
      if (o.value == old)
        o.value = out;
  for (Value *&r : m.main.returns)
    if (r == old)
      r = out;
  auto at = llvm::find_if(m.main.ops, [&](const std::unique_ptr<Op> &p) {
    return p.get() == c.pv;
  });
  m.main.ops.insert(at, std::move(op));
}

unsigned Fuser::run() {
  std::vector<Op *> softmaxes;
  for (const auto &op : m.main.ops)
    if (op->kind == OpKind::Softmax)
      softmaxes.push_back(op.get());
  unsigned fused = 0;
  for (Op *softmax : softmaxes) {
    std::optional<Chain> c = match(*softmax);
    if (!c)
      continue;
    replace(*c, *softmax);
    llvm::DenseSet<const Op *> dead(c->dead.begin(), c->dead.end());
    llvm::erase_if(m.main.ops, [&](const std::unique_ptr<Op> &op) {
      return dead.count(op.get());
    });
    ++fused;
    uses.clear();
    countUses();
  }
  if (fused)
    eliminateDeadCode(m);
  return fused;
}

} // namespace

unsigned fuseAttention(Module &m) { return Fuser(m).run(); }

} // namespace pax
