//===- FoldCopies.cpp - Copies read through, not run ----------------------===//
#include "passes/FoldCopies.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"

#include <optional>

namespace pax {
namespace {

/// True for the copies whose result foldCopies may read through.
bool innerCopy(const Op &op) {
  return (op.kind == OpKind::Reshape || op.kind == OpKind::Transpose ||
          op.kind == OpKind::Slice) &&
         op.operands.size() == 1 && op.results.size() == 1;
}

/// True for the copies that may read another's input through a composed
/// map: each point reads inside the tensor it reads.
bool outerCopy(const Op &op) {
  switch (op.kind) {
  case OpKind::Reshape:
  case OpKind::Transpose:
  case OpKind::Slice:
  case OpKind::Split:
  case OpKind::Expand:
    return op.operands.size() == 1;
  default:
    return false;
  }
}

/// Per tensor dim of \p op's result \p r, the iteration dim it is and the
/// shift back to it (`d`: 0; a split's part `d - 768`: 768), when the
/// result is such dims covering every (parallel) iteration dim once.
std::optional<llvm::SmallVector<std::pair<unsigned, int64_t>, 6>>
plainResult(const Op &op, unsigned r) {
  const Result &res = op.results[r];
  if (res.map.size() != op.iters.size())
    return std::nullopt;
  llvm::SmallVector<std::pair<unsigned, int64_t>, 6> dims;
  for (size_t j = 0; j < res.map.size(); ++j) {
    const AccessExpr &e = res.map[j];
    if (e.kind != AccessExpr::Kind::Affine || e.dims.size() != 1 ||
        e.stride != 1 || e.offset > 0 ||
        llvm::any_of(dims, [&](auto p) { return p.first == e.dims[0]; }))
      return std::nullopt;
    const IterDim &it = op.iters[e.dims[0]];
    int64_t shift = -e.offset, extent = res.value->type.shape[j];
    if (it.kind != IterKind::Parallel || it.extent < extent + shift)
      return std::nullopt;
    dims.push_back({e.dims[0], shift});
  }
  return dims;
}

/// \p e moved \p by along its dim; nullopt where that is no expression.
std::optional<AccessExpr> shifted(AccessExpr e, int64_t by) {
  if (by == 0)
    return e;
  if (e.kind != AccessExpr::Kind::Affine && e.kind != AccessExpr::Kind::Group)
    return std::nullopt;
  e.offset += by;
  return e;
}

/// Group \p e with each inner dim i replaced by \p x[i]: plain dims of the
/// same extents, the last one possibly read whole (`*`).
std::optional<AccessExpr> substituteGroup(const AccessExpr &e,
                                          llvm::ArrayRef<AccessExpr> x,
                                          llvm::ArrayRef<IterDim> inner,
                                          llvm::ArrayRef<IterDim> outer) {
  if (e.readsWhole())
    return std::nullopt;
  llvm::SmallVector<unsigned, 4> dims;
  int64_t whole = 1;
  for (size_t k = 0; k < e.dims.size(); ++k) {
    unsigned d = e.dims[k];
    const AccessExpr &s = x[d];
    if (s.kind == AccessExpr::Kind::Full && k + 1 == e.dims.size() && k > 0) {
      whole = inner[d].extent;
      continue;
    }
    if (!s.isPlainDim() || outer[s.dims[0]].extent != inner[d].extent)
      return std::nullopt;
    dims.push_back(s.dims[0]);
  }
  return AccessExpr::group(dims, whole, e.offset);
}

/// \p e (an expression over the inner copy's dims) with each inner dim i
/// replaced by \p x[i] (over the outer op's dims, whose dims are
/// \p outer); nullopt where the result is no expression.
std::optional<AccessExpr> substitute(const AccessExpr &e,
                                     llvm::ArrayRef<AccessExpr> x,
                                     llvm::ArrayRef<IterDim> inner,
                                     llvm::ArrayRef<IterDim> outer) {
  using K = AccessExpr::Kind;
  if (e.kind == K::Broadcast)
    return e;
  if (e.kind == K::Group)
    return substituteGroup(e, x, inner, outer);
  if (e.kind != K::Affine || e.dims.size() != 1)
    return std::nullopt;
  const AccessExpr &s = x[e.dims[0]];
  if (s.kind == K::Affine && s.dims.size() == 1)
    return AccessExpr::shifted(s.dims[0], e.stride * s.stride,
                               e.stride * s.offset + e.offset);
  if (e.stride == 1 && s.kind == K::Group)
    return shifted(s, e.offset);
  if (e.stride == 1 && e.offset == 0 && s.kind == K::Broadcast)
    return s;
  return std::nullopt;
}

/// \p outer's read \p read of \p inner's result \p r, composed with
/// \p inner's read of its input; nullopt where some expression does not
/// compose.
std::optional<AccessMap> compose(const Op &inner, unsigned r,
                                 const AccessMap &read, const Op &outer) {
  auto dims = plainResult(inner, r);
  if (!dims || read.size() != dims->size())
    return std::nullopt;
  llvm::SmallVector<AccessExpr, 6> x(inner.iters.size());
  for (size_t j = 0; j < dims->size(); ++j) {
    auto s = shifted(read[j], (*dims)[j].second);
    if (!s)
      return std::nullopt;
    x[(*dims)[j].first] = std::move(*s);
  }
  AccessMap out;
  for (const AccessExpr &e : inner.operands[0].map) {
    auto s = substitute(e, x, inner.iters, outer.iters);
    if (!s)
      return std::nullopt;
    out.push_back(std::move(*s));
  }
  return out;
}

/// True when \p op reads its input through the plain dims, in order, it
/// writes a result of the input's type through.
bool identityCopy(const Op &op) {
  if (!innerCopy(op) || op.operands[0].value->type != op.results[0].value->type)
    return false;
  const AccessMap &in = op.operands[0].map, &out = op.results[0].map;
  if (in.size() != out.size() || in.size() != op.iters.size())
    return false;
  for (size_t i = 0; i < in.size(); ++i)
    if (!in[i].isPlainDim() || in[i].dims[0] != i || !(in[i] == out[i]))
      return false;
  return true;
}

/// True for an op whose kernels read and write through any map with heads
/// read whole (`*`, `(h, *64)`): attention's forward.
bool readsThroughMaps(const Op &op) { return op.kind == OpKind::Attention; }

/// True for a matrix product, whose kernels (BLAS's transposes and leading
/// dims, oneDNN's strided memory) read operands through plain dims in any
/// order: a transposed weight where it lies.
bool readsPermuted(const Op &op) {
  return op.kind == OpKind::MatMul || op.kind == OpKind::Gemm;
}

/// Whether \p op's kernels take operand map \p map: a matrix product's
/// plain dims in any order (or `_`); any map for attention and copies.
bool takes(const Op &op, const AccessMap &map) {
  if (!readsPermuted(op))
    return true;
  return llvm::all_of(map, [](const AccessExpr &e) {
    return e.isPlainDim() || e.kind == AccessExpr::Kind::Broadcast;
  });
}

class Folder {
public:
  Folder(Module &m, const FoldCopiesOptions &o) : m(m), options(o) {}
  unsigned run();

private:
  /// Every operand reading \p from reads \p to (returned values aside);
  /// the first such reader stands for identity copy \p copy too.
  void replaceReads(const Value *from, Value *to, const Op &copy);
  /// The copy \p v is a result of, when \p op, its one reader, may read
  /// through it; null otherwise.
  const Op *foldable(const Value *v, const Op &op) const;
  /// Makes each operand of \p op that reads a copy's result read its input,
  /// as many copies deep as compose; true where one changed.
  bool foldReads(Op &op);
  /// Forgets the reads of copy \p c once no one reads its results; \p by,
  /// whose read made it so, stands for it.
  void releaseIfUnread(const Op &c, Op &by);
  /// The copy reading \p op's result 0 as its one reader, when \p op may
  /// write the copy's result instead, through \p map.
  Op *foldableWrite(const Op &op, AccessMap &map) const;
  /// Makes \p op write its result where the one copy reading it writes;
  /// the copy is removed. True where it did.
  bool foldWrite(Op &op);
  /// Removes the copies whose results no one reads; how many.
  unsigned removeUnread();

  Module &m;
  FoldCopiesOptions options;
  llvm::DenseMap<const Value *, unsigned> uses;
  llvm::DenseSet<const Op *> released;
};

void Folder::replaceReads(const Value *from, Value *to, const Op &copy) {
  bool counted = false;
  for (const auto &op : m.main.ops)
    for (Operand &o : op->operands)
      if (o.value == from) {
        o.value = to;
        if (!counted)
          op->sources += copy.sources;
        counted = true;
      }
}

const Op *Folder::foldable(const Value *v, const Op &op) const {
  // Only a copy this is the one reader of: a value the split would leave
  // read in two layouts gains nothing.
  if (v->kind != Value::Kind::Result || uses.lookup(v) != 1)
    return nullptr;
  const Op &inner = *v->def;
  bool split = inner.kind == OpKind::Split && inner.operands.size() == 1 &&
               readsThroughMaps(op);
  return innerCopy(inner) || split ? &inner : nullptr;
}

void Folder::releaseIfUnread(const Op &c, Op &by) {
  if (released.count(&c) || llvm::any_of(c.results, [&](const Result &r) {
        return uses.lookup(r.value.get()) > 0;
      }))
    return;
  released.insert(&c);
  by.sources += c.sources;
  for (const Operand &o : c.operands)
    --uses[o.value];
}

bool Folder::foldReads(Op &op) {
  bool changed = false;
  for (Operand &o : op.operands) {
    while (const Op *inner = foldable(o.value, op)) {
      auto map = compose(*inner, o.value->index, o.map, op);
      if (!map || !takes(op, *map))
        break;
      --uses[o.value];
      o.value = inner->operands[0].value;
      ++uses[o.value];
      o.map = std::move(*map);
      releaseIfUnread(*inner, op);
      changed = true;
    }
  }
  return changed;
}

Op *Folder::foldableWrite(const Op &op, AccessMap &map) const {
  const Value *v = op.results[0].value.get();
  if (uses.lookup(v) != 1 || llvm::is_contained(m.main.returns, v))
    return nullptr;
  Op *copy = nullptr;
  for (const auto &c : m.main.ops)
    if (innerCopy(*c) && c->operands[0].value == v)
      copy = c.get();
  if (!copy || copy->operands[0].map.size() != copy->iters.size())
    return nullptr;
  // The copy reads each of its dims plainly, all of them: its points are
  // the result's, each of its dims one of op's expressions.
  llvm::SmallVector<AccessExpr, 6> y(copy->iters.size());
  llvm::SmallVector<bool, 6> seen(copy->iters.size(), false);
  for (size_t j = 0; j < copy->operands[0].map.size(); ++j) {
    const AccessExpr &e = copy->operands[0].map[j];
    if (!e.isPlainDim() || seen[e.dims[0]] ||
        copy->iters[e.dims[0]].extent != v->type.shape[j])
      return nullptr;
    seen[e.dims[0]] = true;
    y[e.dims[0]] = op.results[0].map[j];
  }
  map.clear();
  for (const AccessExpr &e : copy->results[0].map) {
    auto s = substitute(e, y, copy->iters, op.iters);
    if (!s)
      return nullptr;
    map.push_back(std::move(*s));
  }
  return copy;
}

bool Folder::foldWrite(Op &op) {
  AccessMap map;
  Op *copy = foldableWrite(op, map);
  if (!copy)
    return false;
  op.sources += copy->sources;
  Result &mine = op.results[0], &its = copy->results[0];
  std::swap(mine.value, its.value);
  mine.value->def = &op;
  mine.value->index = 0;
  mine.map = std::move(map);
  // The copy now reads its own result: it goes, and with it the old value.
  its.value->def = copy;
  uses[its.value.get()] = 0;
  llvm::erase_if(m.main.ops, [&](const auto &c) { return c.get() == copy; });
  return true;
}

unsigned Folder::removeUnread() {
  auto uses = m.main.countUses();
  size_t before = m.main.ops.size();
  // Last to first: a copy read only by copies removed after it goes too.
  for (size_t i = m.main.ops.size(); i-- > 0;) {
    Op &op = *m.main.ops[i];
    if (!innerCopy(op) && !outerCopy(op))
      continue;
    if (llvm::any_of(op.results, [&](const Result &r) {
          return uses.lookup(r.value.get()) > 0;
        }))
      continue;
    for (const Operand &o : op.operands)
      --uses[o.value];
    m.main.ops.erase(m.main.ops.begin() + std::ptrdiff_t(i));
  }
  return unsigned(before - m.main.ops.size());
}

unsigned Folder::run() {
  auto returned = [&](const Value *v) {
    return llvm::is_contained(m.main.returns, v);
  };
  for (const auto &op : m.main.ops)
    if (identityCopy(*op) && !returned(op->results[0].value.get()))
      replaceReads(op->results[0].value.get(), op->operands[0].value, *op);
  // In program order: a copy of a copy of a copy folds twice.
  uses = m.main.countUses();
  for (const auto &op : m.main.ops)
    if (outerCopy(*op) ||
        (options.inference && (readsThroughMaps(*op) || readsPermuted(*op))))
      foldReads(*op);
  unsigned removed = 0;
  if (options.inference)
    for (size_t i = 0; i < m.main.ops.size(); ++i)
      if (readsThroughMaps(*m.main.ops[i]) && foldWrite(*m.main.ops[i]))
        ++removed;
  return removed + removeUnread();
}

} // namespace

unsigned foldCopies(Module &m, const FoldCopiesOptions &options) {
  return Folder(m, options).run();
}

} // namespace pax
