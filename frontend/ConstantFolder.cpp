//===- ConstantFolder.cpp - Evaluates ops whose operands are all known ----===//
#include "frontend/ConstantFolder.h"

#include "runtime/cpu/ScalarOps.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>

namespace pax {

/// Largest folded result (elements) that is not a splat, and largest
/// iteration space walked to fold. Larger computations stay in the graph.
static constexpr int64_t kFoldElements = 1 << 16;
static constexpr double kFoldPoints = double(1 << 22);

ElementwiseFn::ElementwiseFn(const Op &op)
    : scalar(runtime::cpu::parseScalarOp(opKindName(op.kind))) {
  if (!scalar)
    return;
  params = runtime::cpu::scalarParams(
      *scalar,
      [&](llvm::StringRef name) -> std::optional<double> {
        auto it = op.attrs.find(name);
        if (it == op.attrs.end())
          return std::nullopt;
        if (auto *f = std::get_if<float>(&it->second))
          return double(*f);
        if (auto *i = std::get_if<int64_t>(&it->second))
          return double(*i);
        return std::nullopt;
      },
      [&](llvm::StringRef name) -> std::optional<std::string> {
        auto it = op.attrs.find(name);
        if (it == op.attrs.end())
          return std::nullopt;
        if (auto *t = std::get_if<std::string>(&it->second))
          return *t;
        return std::nullopt;
      });
}

double ElementwiseFn::real(llvm::ArrayRef<double> args) const {
  return scalar ? runtime::cpu::applyReal(*scalar, args, params) : NAN;
}

int64_t ElementwiseFn::integer(llvm::ArrayRef<int64_t> args) const {
  return scalar ? runtime::cpu::applyInteger(*scalar, args, params) : 0;
}

/// Applies \p fn to the elements \p idx of \p in and stores the result at
/// \p o of \p t: in double when an operand is a float (or, with none, the
/// result is), else in int64, as the kernels do.
static void storeElementwise(const ElementwiseFn &fn,
                             llvm::ArrayRef<const ConstTensor *> in,
                             llvm::ArrayRef<int64_t> idx, ConstTensor &t,
                             int64_t o) {
  bool real =
      in.empty()
          ? t.isReal()
          : llvm::any_of(in, [](const ConstTensor *c) { return c->isReal(); });
  if (!real) {
    llvm::SmallVector<int64_t, 3> args;
    for (size_t k = 0; k < in.size(); ++k)
      args.push_back(in[k]->integer(idx[k]));
    int64_t v = fn.integer(args);
    if (t.isReal())
      t.set(o, double(v));
    else
      t.ints[o] = v;
    return;
  }
  llvm::SmallVector<double, 3> args;
  for (size_t k = 0; k < in.size(); ++k)
    args.push_back(in[k]->real(idx[k]));
  t.set(o, fn.real(args));
}

namespace {
/// Walks every point of an iteration space.
struct Odometer {
  llvm::SmallVector<int64_t, 8> extent, point;
  explicit Odometer(llvm::ArrayRef<int64_t> e)
      : extent(e), point(e.size(), 0) {}
  bool next() {
    for (int d = int(extent.size()) - 1; d >= 0; --d) {
      if (++point[d] < extent[d])
        return true;
      point[d] = 0;
    }
    return false;
  }
};
} // namespace

/// Row-major index of the element \p map addresses at \p point; -1 when the
/// point falls outside the tensor (padding, another concat input).
static int64_t elementIndex(const AccessMap &map, const TensorType &type,
                            llvm::ArrayRef<IterDim> iters,
                            llvm::ArrayRef<int64_t> point,
                            const ConstTensor *lookupIndex,
                            int64_t lookupFlat) {
  int64_t flat = 0;
  for (size_t i = 0; i < map.size(); ++i) {
    const AccessExpr &e = map[i];
    int64_t idx = 0;
    switch (e.kind) {
    case AccessExpr::Kind::Broadcast:
      idx = 0;
      break;
    case AccessExpr::Kind::Full:
      return -1;
    case AccessExpr::Kind::Affine:
      idx = e.stride * point[e.dims[0]] + e.offset;
      if (e.dims.size() > 1)
        idx += e.dilation * point[e.dims[1]];
      break;
    case AccessExpr::Kind::Group:
      for (unsigned d : e.dims)
        idx = idx * iters[d].extent + point[d];
      idx += e.offset;
      break;
    case AccessExpr::Kind::Lookup:
      idx = lookupIndex ? lookupIndex->integer(lookupFlat) : 0;
      if (idx < 0)
        idx += type.shape[i];
      break;
    }
    if (idx < 0 || idx >= type.shape[i])
      return -1;
    flat = flat * type.shape[i] + idx;
  }
  return flat;
}

namespace {
/// The kinds of op that foldOp evaluates, as flags on one op.
struct FoldKind {
  bool elementwise = false;
  bool layout = false;
  bool lookup = false;
  bool reduce = false;
  bool matmul = false;

  /// Whether the op is of any kind foldOp evaluates.
  bool foldable() const {
    return elementwise || layout || lookup || reduce || matmul;
  }
};
} // namespace

/// Sorts \p op into the kinds foldOp evaluates (ArgMax and ArgMin are
/// reductions it does not).
static FoldKind classifyFold(const Op &op) {
  OpFamily fam = opKindFamily(op.kind);
  FoldKind kind;
  kind.elementwise = fam == OpFamily::Elementwise;
  kind.layout = fam == OpFamily::Layout;
  kind.lookup = fam == OpFamily::Lookup;
  kind.reduce = fam == OpFamily::Reduction && op.kind != OpKind::ArgMax &&
                op.kind != OpKind::ArgMin;
  kind.matmul = op.kind == OpKind::MatMul;
  return kind;
}

/// Whether an operand of \p op reads a whole dimension at each point.
static bool hasFullAccess(const Op &op) {
  for (const Operand &o : op.operands)
    for (const AccessExpr &e : o.map)
      if (e.kind == AccessExpr::Kind::Full)
        return true;
  return false;
}

/// Whether \p op on the splats \p in yields splats: elementwise ops other
/// than Trilu, lookups, and layout ops other than Pad whose operands all
/// hold the same value.
static bool splatFoldable(const Op &op, const FoldKind &kind,
                          llvm::ArrayRef<const ConstTensor *> in) {
  return (kind.elementwise && op.kind != OpKind::Trilu) || kind.lookup ||
         (kind.layout && op.kind != OpKind::Pad &&
          llvm::all_of(in, [&](const ConstTensor *c) {
            return c->real(0) == in[0]->real(0);
          }));
}

/// Folds \p op on the splats \p in into splat results: a copy of the first
/// operand for layout and lookup ops, else \p fn applied once.
static std::vector<ConstTensor>
foldSplat(const Op &op, const FoldKind &kind, const ElementwiseFn &fn,
          llvm::ArrayRef<const ConstTensor *> in) {
  std::vector<ConstTensor> out;
  bool copy = kind.layout || kind.lookup;
  llvm::SmallVector<int64_t, 3> zeros(in.size(), 0);
  for (const Result &r : op.results) {
    ConstTensor t = ConstTensor::splat(r.value->type, 0);
    if (!copy)
      storeElementwise(fn, in, zeros, t, 0);
    else if (!t.isReal() && !in[0]->isReal())
      t.ints[0] = in[0]->ints[0]; // exact for int64 extremes
    else
      t.set(0, in[0]->real(0));
    out.push_back(std::move(t));
  }
  return out;
}

/// Extents of the iteration space to walk for \p op, with its lookup dims
/// set to 1 and marked in \p isLookupDim.
static llvm::SmallVector<int64_t, 8>
walkExtents(const Op &op, llvm::SmallVectorImpl<bool> &isLookupDim) {
  llvm::SmallVector<int64_t, 8> extents;
  for (const IterDim &d : op.iters)
    extents.push_back(d.extent);
  // Lookup dims are not walked: their index comes from the indices operand.
  isLookupDim.assign(op.iters.size(), false);
  for (const Operand &o : op.operands)
    for (const AccessExpr &e : o.map)
      if (e.kind == AccessExpr::Kind::Lookup)
        isLookupDim[e.dims[0]] = true, extents[e.dims[0]] = 1;
  return extents;
}

/// Number of points in the iteration space of \p extents.
static double pointCount(llvm::ArrayRef<int64_t> extents) {
  double points = 1;
  for (int64_t e : extents)
    points *= double(e);
  return points;
}

/// Zero-filled tensors for the results of \p op, or std::nullopt when one
/// is too large to fold.
static std::optional<std::vector<ConstTensor>> zeroResults(const Op &op) {
  std::vector<ConstTensor> out;
  for (const Result &r : op.results) {
    if (r.value->type.numel() > kFoldElements)
      return std::nullopt;
    out.push_back(ConstTensor::zeros(r.value->type));
  }
  return out;
}

/// Fills \p out with the starting value of the reduction \p op.
static void fillReductionIdentity(const Op &op, std::vector<ConstTensor> &out) {
  for (ConstTensor &t : out)
    for (int64_t i = 0; i < t.numel(); ++i)
      t.set(i, op.kind == OpKind::ReduceProd  ? 1
               : op.kind == OpKind::ReduceMax ? -INFINITY
               : op.kind == OpKind::ReduceMin ? INFINITY
                                              : 0);
}

/// Number of points \p op reduces into each result element, not counting
/// lookup dims.
static double reducedPointCount(const Op &op,
                                llvm::ArrayRef<bool> isLookupDim) {
  double reducedPoints = 1;
  for (size_t d = 0; d < op.iters.size(); ++d)
    if (op.iters[d].kind == IterKind::Reduction && !isLookupDim[d])
      reducedPoints *= double(op.iters[d].extent);
  return reducedPoints;
}

namespace {
/// What a walk of an op's iteration space reads and writes.
struct FoldWalk {
  const Op &op;
  FoldKind kind;
  const ElementwiseFn &fn;
  llvm::ArrayRef<const ConstTensor *> in;
  std::vector<ConstTensor> &out;
  /// The indices operand of a lookup; null for other ops.
  const ConstTensor *indices;
  /// Points reduced into each result element (ReduceMean divides by it).
  double reducedPoints;
};
} // namespace

/// Stores in \p idx the element of each operand that \p point reads (-1
/// where it reads none); returns whether any operand is read.
static bool operandIndices(const FoldWalk &w, llvm::ArrayRef<int64_t> point,
                           llvm::MutableArrayRef<int64_t> idx) {
  const Op &op = w.op;
  bool anyIn = false;
  for (size_t k = 0; k < w.in.size(); ++k) {
    int64_t lookFlat = w.indices
                           ? elementIndex(op.operands[1].map, w.in[1]->type,
                                          op.iters, point, nullptr, 0)
                           : 0;
    idx[k] = elementIndex(op.operands[k].map, w.in[k]->type, op.iters, point,
                          k == 0 ? w.indices : nullptr, lookFlat);
    anyIn |= idx[k] >= 0;
  }
  return anyIn;
}

/// Stores at \p o of \p t the operand element that covers the point (per
/// \p idx), or the op's "value" where none does.
static void copyElement(const FoldWalk &w, llvm::ArrayRef<int64_t> idx,
                        ConstTensor &t, int64_t o) {
  // Copy from the one operand that covers this point (concat inputs
  // cover disjoint ranges); Pad writes its value elsewhere.
  int src = -1;
  for (size_t k = 0; k < w.in.size() && src < 0; ++k)
    if (idx[k] >= 0 && (w.op.kind != OpKind::Pad || k == 0))
      src = int(k);
  if (src < 0) {
    t.set(o, float(w.op.floatAttr("value", 0)));
  } else if (!t.isReal() && !w.in[src]->isReal()) {
    t.ints[o] = w.in[src]->integer(idx[src]);
  } else {
    t.set(o, w.in[src]->real(idx[src]));
  }
}

/// Accumulates \p v into \p acc as the reduction \p kind does, dividing by
/// \p reducedPoints for a mean; returns the new accumulator.
static double reduceStep(OpKind kind, double acc, double v,
                         double reducedPoints) {
  switch (kind) {
  case OpKind::ReduceProd:
    acc *= v;
    break;
  case OpKind::ReduceMax:
    acc = std::max(acc, v);
    break;
  case OpKind::ReduceMin:
    acc = std::min(acc, v);
    break;
  case OpKind::ReduceL1:
    acc += std::fabs(v);
    break;
  case OpKind::ReduceL2:
  case OpKind::ReduceSumSquare:
    acc += v * v;
    break;
  case OpKind::ReduceMean:
    acc += v / reducedPoints;
    break;
  default:
    acc += v;
    break;
  }
  return acc;
}

/// Zeroes the element \p o of \p t, written through \p m at \p point, when
/// Trilu \p op does not keep it.
static void maskTrilu(const Op &op, const AccessMap &m,
                      llvm::ArrayRef<int64_t> point, ConstTensor &t,
                      int64_t o) {
  // Keep the element when its (row, col) lies on the kept side.
  int64_t row = point[m[m.size() - 2].dims[0]];
  int64_t col = point[m[m.size() - 1].dims[0]];
  int64_t k = int64_t(float(op.floatAttr("k", 0)));
  bool keep = op.intAttr("upper", 1) ? col - row >= k : col - row <= k;
  if (!keep)
    t.set(o, 0);
}

/// Folds what \p point contributes to result \p r, given the operand
/// elements \p idx it reads (\p anyIn: whether it reads any).
static void foldResultPoint(const FoldWalk &w, size_t r,
                            llvm::ArrayRef<int64_t> point,
                            llvm::ArrayRef<int64_t> idx, bool anyIn) {
  const Op &op = w.op;
  int64_t o = elementIndex(op.results[r].map, w.out[r].type, op.iters, point,
                           nullptr, 0);
  if (o < 0)
    return;
  ConstTensor &t = w.out[r];
  if (w.kind.layout || w.kind.lookup) {
    copyElement(w, idx, t, o);
    return;
  }
  if (!anyIn)
    return;
  if (w.kind.matmul) {
    t.set(o, t.real(o) + w.in[0]->real(idx[0]) * w.in[1]->real(idx[1]));
    return;
  }
  if (w.kind.reduce) {
    double v = w.in[0]->real(idx[0]), acc = t.real(o);
    t.set(o, reduceStep(op.kind, acc, v, w.reducedPoints));
    return;
  }
  storeElementwise(w.fn, w.in, idx, t, o);
  if (op.kind == OpKind::Trilu)
    maskTrilu(op, op.results[r].map, point, t, o);
}

/// Walks every point of \p extents, folding each into the results.
static void walkIterationSpace(const FoldWalk &w,
                               llvm::ArrayRef<int64_t> extents) {
  Odometer it(extents);
  llvm::SmallVector<int64_t, 4> idx(w.in.size());
  do {
    bool anyIn = operandIndices(w, it.point, idx);
    for (size_t r = 0; r < w.out.size(); ++r)
      foldResultPoint(w, r, it.point, idx, anyIn);
  } while (it.next());
}

/// Replaces each element of \p out by its square root (ReduceL2's last step).
static void takeSquareRoots(std::vector<ConstTensor> &out) {
  for (ConstTensor &t : out)
    for (int64_t i = 0; i < t.numel(); ++i)
      t.set(i, std::sqrt(t.real(i)));
}

std::optional<std::vector<ConstTensor>>
foldOp(const Op &op, llvm::ArrayRef<const ConstTensor *> in) {
  FoldKind kind = classifyFold(op);
  if (!kind.foldable())
    return std::nullopt;
  if (hasFullAccess(op))
    return std::nullopt;

  // Splats stay splats: a 7-billion element fill folds in O(1).
  bool allSplat =
      llvm::all_of(in, [](const ConstTensor *c) { return c->count() == 1; });
  // (Asked of splats only: an empty constant holds no value to compare.)
  bool splatSafe = allSplat && splatFoldable(op, kind, in);
  ElementwiseFn fn(op);
  if (kind.elementwise && !fn.valid())
    return std::nullopt;
  if (allSplat && splatSafe)
    return foldSplat(op, kind, fn, in);

  llvm::SmallVector<bool, 8> isLookupDim;
  llvm::SmallVector<int64_t, 8> extents = walkExtents(op, isLookupDim);
  if (pointCount(extents) > kFoldPoints)
    return std::nullopt;
  std::optional<std::vector<ConstTensor>> out = zeroResults(op);
  if (!out)
    return std::nullopt;
  if (kind.reduce)
    fillReductionIdentity(op, *out);

  const ConstTensor *indices = kind.lookup ? in[1] : nullptr;
  FoldWalk walk{
      op, kind, fn, in, *out, indices, reducedPointCount(op, isLookupDim)};
  walkIterationSpace(walk, extents);
  if (op.kind == OpKind::ReduceL2)
    takeSquareRoots(*out);
  return out;
}

} // namespace pax
