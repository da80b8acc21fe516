//===- FoldCopies.cpp - Copies read through, not run ----------------------===//
#include "passes/FoldCopies.h"

#include "llvm/ADT/DenseMap.h"
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

/// Per tensor dim of \p op's result, the iteration dim it is, when the
/// result is plain dims covering every (parallel) iteration dim once, its
/// shape their extents.
std::optional<llvm::SmallVector<unsigned, 6>> plainResult(const Op &op) {
  const Result &r = op.results[0];
  if (r.map.size() != op.iters.size())
    return std::nullopt;
  llvm::SmallVector<unsigned, 6> dims;
  for (size_t j = 0; j < r.map.size(); ++j) {
    const AccessExpr &e = r.map[j];
    if (!e.isPlainDim() || llvm::is_contained(dims, e.dims[0]) ||
        op.iters[e.dims[0]].kind != IterKind::Parallel ||
        op.iters[e.dims[0]].extent != r.value->type.shape[j])
      return std::nullopt;
    dims.push_back(e.dims[0]);
  }
  return dims;
}

/// \p e (an expression over the inner copy's dims) with each inner dim i
/// replaced by \p x[i] (over the outer copy's dims, whose dims are
/// \p outer); nullopt where the result is no expression.
std::optional<AccessExpr> substitute(const AccessExpr &e,
                                     llvm::ArrayRef<AccessExpr> x,
                                     llvm::ArrayRef<IterDim> inner,
                                     llvm::ArrayRef<IterDim> outer) {
  using K = AccessExpr::Kind;
  if (e.kind == K::Broadcast)
    return e;
  if (e.kind == K::Group) {
    if (e.offset != 0)
      return std::nullopt;
    llvm::SmallVector<unsigned, 4> dims;
    for (unsigned d : e.dims) {
      const AccessExpr &s = x[d];
      if (!s.isPlainDim() || outer[s.dims[0]].extent != inner[d].extent)
        return std::nullopt;
      dims.push_back(s.dims[0]);
    }
    return AccessExpr::group(dims);
  }
  if (e.kind != K::Affine || e.dims.size() != 1)
    return std::nullopt;
  const AccessExpr &s = x[e.dims[0]];
  if (s.kind == K::Affine && s.dims.size() == 1)
    return AccessExpr::shifted(s.dims[0], e.stride * s.stride,
                               e.stride * s.offset + e.offset);
  if (e.stride == 1 && e.offset == 0 &&
      (s.kind == K::Broadcast || s.kind == K::Group))
    return s;
  return std::nullopt;
}

/// \p outer's read \p read of \p inner's result, composed with \p inner's
/// read of its input; nullopt where some expression does not compose.
std::optional<AccessMap> compose(const Op &inner, const AccessMap &read,
                                 const Op &outer) {
  auto dims = plainResult(inner);
  if (!dims || read.size() != dims->size())
    return std::nullopt;
  llvm::SmallVector<AccessExpr, 6> x(inner.iters.size());
  for (size_t j = 0; j < dims->size(); ++j)
    x[(*dims)[j]] = read[j];
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

class Folder {
public:
  explicit Folder(Module &m) : m(m) {}
  unsigned run();

private:
  /// Every operand reading \p from reads \p to (returned values aside).
  void replaceReads(const Value *from, Value *to);
  /// Makes each operand of an outer copy that reads an inner copy's result
  /// read its input; true where one changed.
  bool foldReads(Op &op);
  /// Removes the copies whose results no one reads; how many.
  unsigned removeUnread();

  Module &m;
  llvm::DenseMap<const Value *, unsigned> uses;
};

void Folder::replaceReads(const Value *from, Value *to) {
  for (const auto &op : m.main.ops)
    for (Operand &o : op->operands)
      if (o.value == from)
        o.value = to;
}

bool Folder::foldReads(Op &op) {
  bool changed = false;
  for (Operand &o : op.operands) {
    const Value *v = o.value;
    // Only a copy this is the one reader of: a value the split would leave
    // read in two layouts gains nothing.
    if (v->kind != Value::Kind::Result || !innerCopy(*v->def) ||
        uses.lookup(v) != 1)
      continue;
    const Op &inner = *v->def;
    if (auto map = compose(inner, o.map, op)) {
      --uses[v];
      o.value = inner.operands[0].value;
      ++uses[o.value];
      o.map = std::move(*map);
      changed = true;
    }
  }
  return changed;
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
      replaceReads(op->results[0].value.get(), op->operands[0].value);
  // In program order: a copy of a copy of a copy folds twice.
  uses = m.main.countUses();
  for (const auto &op : m.main.ops)
    if (outerCopy(*op))
      foldReads(*op);
  return removeUnread();
}

} // namespace

unsigned foldCopies(Module &m) { return Folder(m).run(); }

} // namespace pax
