//===- ConstantFolder.cpp - Evaluates ops whose operands are all known ----===//
#include "frontend/ConstantFolder.h"

#include <cmath>

namespace pax {

/// Largest folded result (elements) that is not a splat, and largest
/// iteration space walked to fold. Larger computations stay in the graph.
static constexpr int64_t kFoldElements = 1 << 16;
static constexpr double kFoldPoints = double(1 << 22);

static float attrF(const Op &op, llvm::StringRef key, float dflt) {
  auto it = op.attrs.find(key);
  if (it == op.attrs.end())
    return dflt;
  if (auto *f = std::get_if<float>(&it->second))
    return *f;
  if (auto *i = std::get_if<int64_t>(&it->second))
    return float(*i);
  return dflt;
}

double applyElementwise(const Op &op, llvm::ArrayRef<double> a) {
  auto x = a.empty() ? 0.0 : a[0];
  auto y = a.size() > 1 ? a[1] : 0.0;
  switch (op.kind) {
  case OpKind::Add:
    return x + y;
  case OpKind::Sub:
    return x - y;
  case OpKind::Mul:
    return x * y;
  case OpKind::Div:
    return x / y;
  case OpKind::Pow:
    return std::pow(x, y);
  case OpKind::Max: {
    double m = x;
    for (double v : a)
      m = std::max(m, v);
    return m;
  }
  case OpKind::Min: {
    double m = x;
    for (double v : a)
      m = std::min(m, v);
    return m;
  }
  case OpKind::Sum: {
    double s = 0;
    for (double v : a)
      s += v;
    return s;
  }
  case OpKind::Mean: {
    double s = 0;
    for (double v : a)
      s += v;
    return s / a.size();
  }
  case OpKind::Where:
    return x != 0 ? y : a[2];
  case OpKind::Equal:
    return x == y;
  case OpKind::Less:
    return x < y;
  case OpKind::LessOrEqual:
    return x <= y;
  case OpKind::Greater:
    return x > y;
  case OpKind::GreaterOrEqual:
    return x >= y;
  case OpKind::And:
    return (x != 0) && (y != 0);
  case OpKind::Or:
    return (x != 0) || (y != 0);
  case OpKind::Xor:
    return (x != 0) != (y != 0);
  case OpKind::Not:
    return x == 0;
  case OpKind::Relu:
    return x > 0 ? x : 0;
  case OpKind::LeakyRelu:
    return x >= 0 ? x : x * attrF(op, "alpha", 0.01f);
  case OpKind::PRelu:
    return x >= 0 ? x : x * y;
  case OpKind::Elu:
    return x >= 0 ? x : attrF(op, "alpha", 1) * (std::exp(x) - 1);
  case OpKind::Sigmoid:
    return 1 / (1 + std::exp(-x));
  case OpKind::Tanh:
    return std::tanh(x);
  case OpKind::Erf:
    return std::erf(x);
  case OpKind::Exp:
    return std::exp(x);
  case OpKind::Log:
    return std::log(x);
  case OpKind::Sqrt:
    return std::sqrt(x);
  case OpKind::Reciprocal:
    return 1 / x;
  case OpKind::Neg:
    return -x;
  case OpKind::Abs:
    return std::fabs(x);
  case OpKind::Sign:
    return x > 0 ? 1 : (x < 0 ? -1 : 0);
  case OpKind::Floor:
    return std::floor(x);
  case OpKind::Ceil:
    return std::ceil(x);
  case OpKind::Round:
    return std::nearbyint(x);
  case OpKind::Cos:
    return std::cos(x);
  case OpKind::Sin:
    return std::sin(x);
  case OpKind::Softplus:
    return std::log1p(std::exp(x));
  case OpKind::Softsign:
    return x / (1 + std::fabs(x));
  case OpKind::Clip: {
    // Bounds are operands from opset 11, attributes `min` and `max` before.
    double lo = a.size() > 1 ? a[1] : attrF(op, "min", -INFINITY);
    double hi = a.size() > 2 ? a[2] : attrF(op, "max", INFINITY);
    return std::min(std::max(x, lo), hi);
  }
  case OpKind::Cast:
    return x;
  default:
    return NAN;
  }
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
  bool splatSafe = (elementwise && op.kind != OpKind::Trilu) || lookup ||
                   (layout && op.kind != OpKind::Pad &&
                    llvm::all_of(in, [&](const ConstTensor *c) {
                      return c->real(0) == in[0]->real(0);
                    }));
  if (allSplat && splatSafe) {
    llvm::SmallVector<double, 3> args;
    for (const ConstTensor *c : in)
      args.push_back(c->real(0));
    bool copy = layout || lookup;
    for (const Result &r : op.results) {
      ConstTensor t = ConstTensor::splat(r.value->type, 0);
      if (copy && !t.isReal() && !in[0]->isReal())
        t.ints[0] = in[0]->ints[0]; // exact for int64 extremes
      else
        t.set(0, copy ? args[0] : applyElementwise(op, args));
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
          t.set(o, attrF(op, "value", 0));
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
      llvm::SmallVector<double, 3> args;
      for (size_t k = 0; k < in.size(); ++k)
        args.push_back(in[k]->real(idx[k]));
      double v = applyElementwise(op, args);
      if (op.kind == OpKind::Trilu) {
        // Keep the element when its (row, col) lies on the kept side.
        const AccessMap &m = op.results[r].map;
        int64_t row = it.point[m[m.size() - 2].dims[0]];
        int64_t col = it.point[m[m.size() - 1].dims[0]];
        int64_t k = int64_t(attrF(op, "k", 0));
        bool keep = op.intAttr("upper", 1) ? col - row >= k : col - row <= k;
        v = keep ? args[0] : 0;
      }
      t.set(o, v);
    }
  } while (it.next());
  if (op.kind == OpKind::ReduceL2)
    for (ConstTensor &t : out)
      for (int64_t i = 0; i < t.numel(); ++i)
        t.set(i, std::sqrt(t.real(i)));
  return out;
}

} // namespace pax
