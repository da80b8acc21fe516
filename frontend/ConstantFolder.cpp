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

std::optional<std::vector<ConstTensor>>
foldOp(const Op &op, llvm::ArrayRef<const ConstTensor *> in) {
  OpFamily fam = opKindFamily(op.kind);
  bool elementwise = fam == OpFamily::Elementwise;
  bool layout = fam == OpFamily::Layout;
  bool lookup = fam == OpFamily::Lookup;
  bool reduce = fam == OpFamily::Reduction && op.kind != OpKind::ArgMax &&
                op.kind != OpKind::ArgMin;
  bool matmul = op.kind == OpKind::MatMul;
  if (!(elementwise || layout || lookup || reduce || matmul))
    return std::nullopt;
  for (const Operand &o : op.operands)
    for (const AccessExpr &e : o.map)
      if (e.kind == AccessExpr::Kind::Full)
        return std::nullopt;

  std::vector<ConstTensor> out;
  // Splats stay splats: a 7-billion element fill folds in O(1).
  bool allSplat =
      llvm::all_of(in, [](const ConstTensor *c) { return c->count() == 1; });
  // (Asked of splats only: an empty constant holds no value to compare.)
  bool splatSafe =
      allSplat && ((elementwise && op.kind != OpKind::Trilu) || lookup ||
                   (layout && op.kind != OpKind::Pad &&
                    llvm::all_of(in, [&](const ConstTensor *c) {
                      return c->real(0) == in[0]->real(0);
                    })));
  ElementwiseFn fn(op);
  if (elementwise && !fn.valid())
    return std::nullopt;
  if (allSplat && splatSafe) {
    bool copy = layout || lookup;
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

  double points = 1;
  llvm::SmallVector<int64_t, 8> extents;
  for (const IterDim &d : op.iters)
    extents.push_back(d.extent);
  // Lookup dims are not walked: their index comes from the indices operand.
  llvm::SmallVector<bool, 8> isLookupDim(op.iters.size(), false);
  for (const Operand &o : op.operands)
    for (const AccessExpr &e : o.map)
      if (e.kind == AccessExpr::Kind::Lookup)
        isLookupDim[e.dims[0]] = true, extents[e.dims[0]] = 1;
  for (int64_t e : extents)
    points *= double(e);
  if (points > kFoldPoints)
    return std::nullopt;
  for (const Result &r : op.results) {
    if (r.value->type.numel() > kFoldElements)
      return std::nullopt;
    out.push_back(ConstTensor::zeros(r.value->type));
  }
  if (reduce)
    for (ConstTensor &t : out)
      for (int64_t i = 0; i < t.numel(); ++i)
        t.set(i, op.kind == OpKind::ReduceProd  ? 1
                 : op.kind == OpKind::ReduceMax ? -INFINITY
                 : op.kind == OpKind::ReduceMin ? INFINITY
                                                : 0);

  const ConstTensor *indices = lookup ? in[1] : nullptr;
  double reducedPoints = 1;
  for (size_t d = 0; d < op.iters.size(); ++d)
    if (op.iters[d].kind == IterKind::Reduction && !isLookupDim[d])
      reducedPoints *= double(op.iters[d].extent);

  Odometer it(extents);
  llvm::SmallVector<int64_t, 4> idx(in.size());
  do {
    bool anyIn = false;
    for (size_t k = 0; k < in.size(); ++k) {
      int64_t lookFlat = indices ? elementIndex(op.operands[1].map, in[1]->type,
                                                op.iters, it.point, nullptr, 0)
                                 : 0;
      idx[k] = elementIndex(op.operands[k].map, in[k]->type, op.iters, it.point,
                            k == 0 ? indices : nullptr, lookFlat);
      anyIn |= idx[k] >= 0;
    }
    for (size_t r = 0; r < out.size(); ++r) {
      int64_t o = elementIndex(op.results[r].map, out[r].type, op.iters,
                               it.point, nullptr, 0);
      if (o < 0)
        continue;
      ConstTensor &t = out[r];
      if (layout || lookup) {
        // Copy from the one operand that covers this point (concat inputs
        // cover disjoint ranges); Pad writes its value elsewhere.
        int src = -1;
        for (size_t k = 0; k < in.size() && src < 0; ++k)
          if (idx[k] >= 0 && (op.kind != OpKind::Pad || k == 0))
            src = int(k);
        if (src < 0) {
          t.set(o, float(op.floatAttr("value", 0)));
        } else if (!t.isReal() && !in[src]->isReal()) {
          t.ints[o] = in[src]->integer(idx[src]);
        } else {
          t.set(o, in[src]->real(idx[src]));
        }
        continue;
      }
      if (!anyIn)
        continue;
      if (matmul) {
        t.set(o, t.real(o) + in[0]->real(idx[0]) * in[1]->real(idx[1]));
        continue;
      }
      if (reduce) {
        double v = in[0]->real(idx[0]), acc = t.real(o);
        switch (op.kind) {
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
        t.set(o, acc);
        continue;
      }
      storeElementwise(fn, in, idx, t, o);
      if (op.kind == OpKind::Trilu) {
        // Keep the element when its (row, col) lies on the kept side.
        const AccessMap &m = op.results[r].map;
        int64_t row = it.point[m[m.size() - 2].dims[0]];
        int64_t col = it.point[m[m.size() - 1].dims[0]];
        int64_t k = int64_t(float(op.floatAttr("k", 0)));
        bool keep = op.intAttr("upper", 1) ? col - row >= k : col - row <= k;
        if (!keep)
          t.set(o, 0);
      }
    }
  } while (it.next());
  if (op.kind == OpKind::ReduceL2)
    for (ConstTensor &t : out)
      for (int64_t i = 0; i < t.numel(); ++i)
        t.set(i, std::sqrt(t.real(i)));
  return out;
}

} // namespace pax
