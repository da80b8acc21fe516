//===- AttentionMath.h - Attention rows, host and device -------*- C++ -*-===//
//
// The `attention` op and its gradients (OpKinds.def) over tiles of rows:
// the one definition the CPU kernel (a TBB task per tile of rows) and the
// CUDA kernel (a thread per row) both run. A row is one outer point of the
// op's iteration space (batch dims and queries forward and for dQ; batch
// dims and keys for dK, dV); the inner dim is walked key by key (query by
// query), and the scores of a (query, key) pair are recomputed wherever
// they are needed, never stored. Tensors are read through flat access maps
// at head index 0, the head dim (`*`) `inner` elements apart.
//
// Forward, per row: an online softmax (running maximum m, sum l and the
// weighted sum of V rows, rescaled when m grows), so one pass over the
// keys; the output is acc / l and the row's log-sum-exp m + log l. A row
// whose scores are all -inf (fully masked) has no softmax: its output is
// NaN, as the unfused graph's, or 0 under `nan_to_zero` (the exporters'
// Where(IsNaN(p), 0, p) guard), and so is a row with a NaN or +inf score.
// Its log-sum-exp is +inf under nan_to_zero (the gradients see p = 0), NaN
// otherwise.
//
// Gradients, with P = exp(s - lse), dP = dO.V and D = rowsum(dO * O):
// dS = P (dP - D), dQ = scale dS.K, dK = scale dS^T.Q, dV = P^T.dO. A score
// a `where` mask replaced by its fill has no gradient through Q and K.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_ATTENTIONMATH_H
#define PAX_RUNTIME_ATTENTIONMATH_H

#include "runtime/Elements.h"
#include "runtime/FlatMaps.h"

namespace pax::runtime::attention {

/// Which op: the forward one, dQ, or dK and dV.
enum class Pass : int32_t { Forward, GradQ, GradKV };

/// How a mask edits the scores (the op's `masks` attribute).
enum MaskKind : int32_t { AddMask = 1, KeepIfTrue = 2, KeepIfFalse = 3 };

/// The most masks one op takes.
inline constexpr int kMaxMasks = 4;
/// Rows a CPU task walks the inner dim for at once (a tile: each key's
/// row is read once for all of them).
inline constexpr int kTile = 16;

/// A tensor read or written through a map at head index 0 (unused when
/// data is null).
struct Access {
  uint8_t *data = nullptr;
  int32_t type = 0;
  flat::Map map;
  int64_t inner = 0; ///< elements between head indices

  PAX_HD int64_t at(const int64_t *point) const {
    return flat::index(map, point);
  }
  PAX_HD double read(int64_t base, int64_t h) const {
    return elements::readReal(data, type, base + h * inner);
  }
  PAX_HD void write(int64_t base, int64_t h, double v) const {
    elements::writeReal(data, type, base + h * inner, v);
  }
};

/// One attention compute on one device's block.
struct Problem {
  Pass pass = Pass::Forward;
  flat::Space space;
  int32_t qDim = 0, kDim = 0; ///< the query and key iteration dims
  int64_t e = 0, v = 0;       ///< head dims of Q and K, and of V
  double scale = 1;
  bool nanToZero = false;
  /// Keys after the query (by their indices in the whole, unsplit op)
  /// masked: ONNX's is_causal.
  bool causal = false;
  int32_t masks = 0;
  int32_t maskKind[kMaxMasks] = {};
  double fill[kMaxMasks] = {};
  Access mask[kMaxMasks];
  Access q, k, val;
  /// The gradients' inputs: dO, the rows' log-sum-exp, D.
  Access dout, lse, delta;
  /// Forward: O, lse; GradQ: dQ; GradKV: dK, dV.
  Access out[2];
};

/// Doubles of scratch one row takes.
PAX_HD inline int64_t rowScratch(const Problem &p) {
  switch (p.pass) {
  case Pass::Forward:
    return p.v + 4;
  case Pass::GradQ:
    return p.e + 2;
  default:
    return p.e + p.v;
  }
}

/// True where the causal mask hides the key from the query at \p point.
PAX_HD inline bool causalMasked(const Problem &p, const int64_t *point) {
  return p.causal && point[p.kDim] + p.space.globalOffsets[p.kDim] >
                         point[p.qDim] + p.space.globalOffsets[p.qDim];
}

/// \p qk (Q.K at \p point) scaled and edited by the masks in order;
/// \p flows is false where a `where` mask or the causal mask replaced it
/// (no gradient through Q.K there).
PAX_HD inline double editScore(const Problem &p, const int64_t *point,
                               double qk, bool &flows) {
  if (causalMasked(p, point)) {
    flows = false;
    return -INFINITY;
  }
  double s = qk * p.scale;
  flows = true;
  for (int32_t i = 0; i < p.masks; ++i) {
    double m = p.mask[i].read(p.mask[i].at(point), 0);
    if (p.maskKind[i] == AddMask) {
      s += m;
    } else if ((m != 0) != (p.maskKind[i] == KeepIfTrue)) {
      s = p.fill[i];
      flows = false;
    }
  }
  return s;
}

/// The score at \p point (its query and key set), as editScore says.
PAX_HD inline double score(const Problem &p, const int64_t *point,
                           bool &flows) {
  if (causalMasked(p, point)) {
    flows = false;
    return -INFINITY;
  }
  int64_t qb = p.q.at(point), kb = p.k.at(point);
  double qk = 0;
  for (int64_t h = 0; h < p.e; ++h)
    qk += p.q.read(qb, h) * p.k.read(kb, h);
  return editScore(p, point, qk, flows);
}

/// Forward: score \p s of a key folded into a row's online softmax
/// (scratch: acc[v], m, l, bad), \p val(h) the key's V row.
template <typename ValueRow>
PAX_HD inline void foldScore(const Problem &p, double s, double *row,
                             ValueRow val) {
  double *acc = row, &m = row[p.v], &l = row[p.v + 1], &bad = row[p.v + 2];
  if (std::isnan(s) || s == INFINITY) {
    bad = 1;
    return;
  }
  if (s == -INFINITY)
    return;
  if (s > m) {
    double c = exp(m - s);
    l *= c;
    for (int64_t h = 0; h < p.v; ++h)
      acc[h] *= c;
    m = s;
  }
  double w = exp(s - m);
  l += w;
  for (int64_t h = 0; h < p.v; ++h)
    acc[h] += w * val(h);
}

/// dQ: a key's contribution to a query's row \p dq, from the score \p s,
/// the row's log-sum-exp and D, and the rows dO (\p dout), V and K.
template <typename Dout, typename ValueRow, typename KeyRow>
PAX_HD inline void foldGradQ(const Problem &p, double s, bool flows, double lse,
                             double delta, double *dq, Dout dout, ValueRow val,
                             KeyRow key) {
  if (!flows)
    return;
  double pr = exp(s - lse);
  if (pr == 0)
    return;
  double dp = 0;
  for (int64_t h = 0; h < p.v; ++h)
    dp += dout(h) * val(h);
  double ds = pr * (dp - delta) * p.scale;
  for (int64_t h = 0; h < p.e; ++h)
    dq[h] += ds * key(h);
}

/// dK and dV: a query's contribution to a key's rows \p dk and \p dv,
/// from the score \p s, the query's log-sum-exp and D, and the rows Q,
/// dO and (the key's) V.
template <typename QueryRow, typename Dout, typename ValueRow>
PAX_HD inline void foldGradKV(const Problem &p, double s, bool flows,
                              double lse, double delta, double *dk, double *dv,
                              QueryRow query, Dout dout, ValueRow val) {
  double pr = exp(s - lse);
  if (pr == 0)
    return;
  double dp = 0;
  for (int64_t h = 0; h < p.v; ++h) {
    double g = dout(h);
    dv[h] += pr * g;
    dp += g * val(h);
  }
  if (!flows)
    return;
  double ds = pr * (dp - delta) * p.scale;
  for (int64_t h = 0; h < p.e; ++h)
    dk[h] += ds * query(h);
}

/// Forward: one key's score folded into a row's online softmax.
PAX_HD inline void forwardStep(const Problem &p, const int64_t *point,
                               double *row) {
  bool flows;
  double s = score(p, point, flows);
  int64_t vb = p.val.at(point);
  foldScore(p, s, row, [&](int64_t h) { return p.val.read(vb, h); });
}

/// dQ: one key's contribution to a row (scratch: dq[e], D, lse).
PAX_HD inline void gradQStep(const Problem &p, const int64_t *point,
                             double *row) {
  bool flows;
  double s = score(p, point, flows);
  int64_t db = p.dout.at(point), vb = p.val.at(point), kb = p.k.at(point);
  foldGradQ(
      p, s, flows, row[p.e + 1], row[p.e], row,
      [&](int64_t h) { return p.dout.read(db, h); },
      [&](int64_t h) { return p.val.read(vb, h); },
      [&](int64_t h) { return p.k.read(kb, h); });
}

/// dK and dV: one query's contribution to a key's row (scratch: dk[e],
/// dv[v]).
PAX_HD inline void gradKVStep(const Problem &p, const int64_t *point,
                              double *row) {
  bool flows;
  double s = score(p, point, flows);
  int64_t db = p.dout.at(point), vb = p.val.at(point), qb = p.q.at(point);
  foldGradKV(
      p, s, flows, p.lse.read(p.lse.at(point), 0),
      p.delta.read(p.delta.at(point), 0), row, row + p.e,
      [&](int64_t h) { return p.q.read(qb, h); },
      [&](int64_t h) { return p.dout.read(db, h); },
      [&](int64_t h) { return p.val.read(vb, h); });
}

/// Forward: a row's output and log-sum-exp from its scratch.
PAX_HD inline void forwardFinish(const Problem &p, const int64_t *point,
                                 const double *row) {
  double m = row[p.v], l = row[p.v + 1];
  bool none = row[p.v + 2] != 0 || m == -INFINITY;
  double invalid = p.nanToZero ? 0.0 : NAN;
  int64_t ob = p.out[0].at(point);
  for (int64_t h = 0; h < p.v; ++h)
    p.out[0].write(ob, h, none ? invalid : row[h] / l);
  double lse = none ? (p.nanToZero ? INFINITY : NAN) : m + log(l);
  p.out[1].write(p.out[1].at(point), 0, lse);
}

/// A row's scratch before its walk.
PAX_HD inline void startRow(const Problem &p, const int64_t *point,
                            double *row) {
  for (int64_t i = 0; i < rowScratch(p); ++i)
    row[i] = 0;
  if (p.pass == Pass::Forward) {
    row[p.v] = -INFINITY;
  } else if (p.pass == Pass::GradQ) {
    row[p.e] = p.delta.read(p.delta.at(point), 0);
    row[p.e + 1] = p.lse.read(p.lse.at(point), 0);
  }
}

/// A row's results after its walk.
PAX_HD inline void finishRow(const Problem &p, const int64_t *point,
                             const double *row) {
  if (p.pass == Pass::Forward)
    return forwardFinish(p, point, row);
  int64_t b0 = p.out[0].at(point);
  for (int64_t h = 0; h < p.e; ++h)
    p.out[0].write(b0, h, row[h]);
  if (p.pass == Pass::GradKV) {
    int64_t b1 = p.out[1].at(point);
    for (int64_t h = 0; h < p.v; ++h)
      p.out[1].write(b1, h, row[p.e + h]);
  }
}

/// Rows [first, first + count) (count <= kTile), walked together over the
/// inner dim, each with rowScratch(p) doubles at scratch.
PAX_HD inline void runRows(const Problem &p, int64_t first, int64_t count,
                           double *scratch) {
  int64_t points[kTile][flat::kMaxDims];
  int64_t each = rowScratch(p);
  int32_t walked = p.pass == Pass::GradKV ? p.qDim : p.kDim;
  for (int64_t r = 0; r < count; ++r) {
    for (int32_t d = 0; d < p.space.rank; ++d)
      points[r][d] = 0;
    flat::setOuter(p.space, first + r, points[r]);
    startRow(p, points[r], scratch + r * each);
  }
  for (int64_t j = 0; j < p.space.extents[walked]; ++j)
    for (int64_t r = 0; r < count; ++r) {
      points[r][walked] = j;
      double *row = scratch + r * each;
      if (p.pass == Pass::Forward)
        forwardStep(p, points[r], row);
      else if (p.pass == Pass::GradQ)
        gradQStep(p, points[r], row);
      else
        gradKVStep(p, points[r], row);
    }
  for (int64_t r = 0; r < count; ++r) {
    points[r][walked] = 0;
    finishRow(p, points[r], scratch + r * each);
  }
}

} // namespace pax::runtime::attention

#endif // PAX_RUNTIME_ATTENTIONMATH_H
