//===- AttentionTiles.h - Forward attention over tiles, host and device -*- C++
//-*-===//
//
// The `attention` op and its gradients (AttentionMath.h) over tiles: a
// block of kQueries threads takes kQueries consecutive rows of one batch
// point (queries; keys for dK and dV), a thread each, its rows and sums in
// registers, and walks the other side (keys; queries) kKeys at a time.
// Each tile of the walked side is read once for all the block's rows
// (loadWalked, the block's threads together); each thread then walks it
// (walkTile): the forward pass scores the tile (the scores kept beside it,
// never in global memory) and folds it into its online softmax, rescaled
// once per tile; dQ and dK/dV recompute each score and add its terms.
// Under the causal mask the tiles no row of the block sees are not walked
// (walkRange).
//
// The CUDA backend runs a block as a thread block (cuda/CudaAttention.cu:
// the tile in shared memory, a barrier on each side of its load); the
// cuda-emulated backend runs the same steps with the block's threads one
// after another (runBlock), so the host checks the GPU's arithmetic.
//
// The math is AttentionMath.h's (mask edits in order, a NaN or +inf score
// making a forward row invalid, a fully masked row NaN or 0 under
// nan_to_zero, no gradient through Q.K where a mask replaced the score) in
// float. It takes the problems `tiled` accepts: linear accesses, the rows'
// independent of the walked dim and the walked side's of the rows', and
// head dims of at most kMaxHead; the others walk AttentionMath.h's rows.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_ATTENTIONTILES_H
#define PAX_RUNTIME_ATTENTIONTILES_H

#include "runtime/AttentionMath.h"

namespace pax::runtime::attention::tiles {

inline constexpr int kQueries = 64; ///< rows (threads) per block
inline constexpr int kKeys = 32;    ///< walked rows per tile
inline constexpr int kMaxHead = 128;

/// A block's tile of the walked side: K and V rows (forward, dQ) or Q and
/// dO rows with the queries' log-sum-exp and D (dK, dV), zeros past the
/// head dims and past the tile's rows; and (forward) each thread's scores
/// of them, a column each.
template <int D> struct Tile {
  alignas(16) float a[kKeys][D];
  alignas(16) float b[kKeys][D];
  float lse[kKeys], delta[kKeys];
  float ss[kKeys][kQueries];
};

/// One thread's row (a query; a key for dK, dV): where it reads and
/// writes, its rows x (Q; K) and y (dO for dQ; V for dK, dV), and what it
/// accumulates: the forward pass's output row and running softmax, dQ, or
/// dK (acc) and dV (acc2).
template <int D, Pass P> struct Row {
  int64_t index = 0;
  bool active = false;
  int64_t o0 = 0, o1 = 0;
  int64_t maskAt[kMaxMasks] = {};
  float x[D], acc[D];
  float y[P == Pass::Forward ? 1 : D];
  float acc2[P == Pass::GradKV ? D : 1];
  float m = -INFINITY, l = 0; ///< forward: the running maximum and sum
  float lse = 0, delta = 0;   ///< dQ: the query's log-sum-exp and D
  bool bad = false;
};

/// The iteration dims of a block's rows and of the walked side.
PAX_HD inline int32_t rowDim(const Problem &p) {
  return p.pass == Pass::GradKV ? p.kDim : p.qDim;
}
PAX_HD inline int32_t walkDim(const Problem &p) {
  return p.pass == Pass::GradKV ? p.qDim : p.kDim;
}

/// The head dim bucket a problem's rows take (32, 64 or 128).
PAX_HD inline int headBucket(const Problem &p) {
  int64_t head = p.e > p.v ? p.e : p.v;
  return head <= 32 ? 32 : head <= 64 ? 64 : 128;
}

/// The batch points: every dim's extent but the query and key dims'.
PAX_HD inline int64_t batchPoints(const Problem &p) {
  int64_t batch = 1;
  for (int32_t d = 0; d < p.space.rank; ++d)
    if (d != p.qDim && d != p.kDim)
      batch *= p.space.extents[d];
  return batch;
}

/// True where \p a is linear and its index does not move along \p fixed
/// (-1: any dim may move it).
PAX_HD inline bool linearAlong(const Access &a, int32_t fixed) {
  return a.map.linear && (fixed < 0 || a.map.coef[fixed] == 0);
}

/// True where the accesses of \p p's pass are linear, the rows' not moving
/// along the walked dim and the walked side's not along the rows'.
PAX_HD inline bool accessesTile(const Problem &p) {
  int32_t r = rowDim(p), w = walkDim(p);
  bool ok = linearAlong(p.out[0], w);
  for (int32_t i = 0; i < p.masks; ++i)
    ok = ok && linearAlong(p.mask[i], -1);
  switch (p.pass) {
  case Pass::Forward:
    return ok && linearAlong(p.q, w) && linearAlong(p.out[1], w) &&
           linearAlong(p.k, r) && linearAlong(p.val, r);
  case Pass::GradQ:
    return ok && linearAlong(p.q, w) && linearAlong(p.dout, w) &&
           linearAlong(p.lse, w) && linearAlong(p.delta, w) &&
           linearAlong(p.k, r) && linearAlong(p.val, r);
  default:
    return ok && linearAlong(p.k, w) && linearAlong(p.val, w) &&
           linearAlong(p.out[1], w) && linearAlong(p.q, r) &&
           linearAlong(p.dout, r) && linearAlong(p.lse, r) &&
           linearAlong(p.delta, r);
  }
}

/// True where \p p runs over tiles (the header's conditions).
PAX_HD inline bool tiled(const Problem &p) {
  int32_t r = rowDim(p);
  if (p.e > kMaxHead || p.v > kMaxHead || p.space.innerCount != 1 ||
      p.space.inner[0] != uint32_t(walkDim(p)) ||
      batchPoints(p) * p.space.extents[r] != p.space.outerPoints)
    return false;
  return accessesTile(p);
}

/// Batch point \p b's coordinates in \p point (every dim but the query and
/// key dims, the last fastest); those two are 0.
PAX_HD inline void batchPoint(const Problem &p, int64_t b, int64_t *point) {
  for (int32_t d = p.space.rank; d-- > 0;) {
    point[d] = 0;
    if (d == p.qDim || d == p.kDim)
      continue;
    int64_t e = p.space.extents[d];
    point[d] = b % e;
    b /= e;
  }
}

/// The walked rows [begin, end) a block of rows from \p r0 needs: all, or
/// under the causal mask the keys up to its last query (the queries from
/// its first key, for dK and dV).
PAX_HD inline void walkRange(const Problem &p, int64_t r0, int64_t &begin,
                             int64_t &end) {
  int64_t rows = p.space.extents[rowDim(p)];
  int64_t walked = p.space.extents[walkDim(p)];
  int64_t shift = p.space.globalOffsets[p.qDim] - p.space.globalOffsets[p.kDim];
  begin = 0;
  end = walked;
  if (!p.causal)
    return;
  if (p.pass == Pass::GradKV) { // queries q with q + shift >= r0
    begin = r0 - shift;
    begin = begin < 0 ? 0 : (begin > walked ? walked : begin);
    return;
  }
  int64_t last = (r0 + kQueries < rows ? r0 + kQueries : rows) - 1;
  end = last + shift + 1;
  end = end < 0 ? 0 : (end > walked ? walked : end);
}

// One element read or written through an access, out of line on the GPU:
// the unrolled loops over a row's registers stay a call (or a load) per
// element rather than the element types' switch each.
#if defined(__CUDA_ARCH__)
#define PAX_TILES_OUT_OF_LINE __noinline__
#else
#define PAX_TILES_OUT_OF_LINE
#endif
PAX_HD PAX_TILES_OUT_OF_LINE inline float readOne(const Access &a, int64_t base,
                                                  int64_t h) {
  return float(a.read(base, h));
}
PAX_HD PAX_TILES_OUT_OF_LINE inline void writeOne(const Access &a, int64_t base,
                                                  int64_t h, double v) {
  a.write(base, h, v);
}

/// Head values [0, D) of \p a's row at \p base: zeros past \p n.
template <int D>
PAX_HD void readRow(const Access &a, int64_t base, int64_t n, bool active,
                    float *to) {
  PAX_UNROLL
  for (int h = 0; h < D; ++h)
    to[h] = active && h < n ? readOne(a, base, h) : 0.f;
}

/// Thread \p tid's row of the block of rows from \p r0 at batch point
/// \p batch (batchPoint's): its addresses, its rows, its sums at zero.
template <int D, Pass P>
PAX_HD void startRow(const Problem &p, const int64_t *batch, int64_t r0,
                     int tid, Row<D, P> &r) {
  int64_t point[flat::kMaxDims];
  for (int32_t d = 0; d < p.space.rank; ++d)
    point[d] = batch[d];
  r.index = r0 + tid;
  r.active = r.index < p.space.extents[rowDim(p)];
  point[rowDim(p)] = r.active ? r.index : 0;
  for (int32_t i = 0; i < p.masks; ++i)
    r.maskAt[i] = flat::index(p.mask[i].map, point);
  r.o0 = flat::index(p.out[0].map, point);
  r.o1 = P == Pass::GradQ ? 0 : flat::index(p.out[1].map, point);
  const Access &x = P == Pass::GradKV ? p.k : p.q;
  readRow<D>(x, flat::index(x.map, point), p.e, r.active, r.x);
  if constexpr (P == Pass::GradQ)
    readRow<D>(p.dout, flat::index(p.dout.map, point), p.v, r.active, r.y);
  if constexpr (P == Pass::GradKV)
    readRow<D>(p.val, flat::index(p.val.map, point), p.v, r.active, r.y);
  PAX_UNROLL
  for (int h = 0; h < D; ++h) {
    r.acc[h] = 0;
    if constexpr (P == Pass::GradKV)
      r.acc2[h] = 0;
  }
  r.m = -INFINITY;
  r.l = 0;
  r.bad = false;
  if (P == Pass::GradQ && r.active) {
    r.lse = float(p.lse.read(flat::index(p.lse.map, point), 0));
    r.delta = float(p.delta.read(flat::index(p.delta.map, point), 0));
  }
}

/// Walked rows [j0, j0 + n) of batch point \p batch into the tile: thread
/// \p tid of \p threads takes every threads-th element.
template <int D, Pass P>
PAX_HD void loadWalked(const Problem &p, const int64_t *batch, int64_t j0,
                       int n, Tile<D> &t, int tid, int threads) {
  const Access &a = P == Pass::GradKV ? p.q : p.k;
  const Access &b = P == Pass::GradKV ? p.dout : p.val;
  int32_t w = walkDim(p);
  int64_t ab = flat::index(a.map, batch), bb = flat::index(b.map, batch);
  for (int i = tid; i < kKeys * D; i += threads) {
    int j = i / D, h = i % D;
    t.a[j][h] = j < n && h < p.e
                    ? float(a.read(ab + (j0 + j) * a.map.coef[w], h))
                    : 0.f;
    t.b[j][h] = j < n && h < p.v
                    ? float(b.read(bb + (j0 + j) * b.map.coef[w], h))
                    : 0.f;
  }
  if (P != Pass::GradKV)
    return;
  int64_t lb = flat::index(p.lse.map, batch),
          db = flat::index(p.delta.map, batch);
  for (int j = tid; j < n; j += threads) {
    t.lse[j] = float(p.lse.read(lb + (j0 + j) * p.lse.map.coef[w], 0));
    t.delta[j] = float(p.delta.read(db + (j0 + j) * p.delta.map.coef[w], 0));
  }
}

/// Four floats from \p at (16-byte aligned): one vector load on the GPU.
PAX_HD inline void load4(const float *at, float &a, float &b, float &c,
                         float &d) {
#if defined(__CUDA_ARCH__)
  float4 v = *reinterpret_cast<const float4 *>(at);
  a = v.x, b = v.y, c = v.z, d = v.w;
#else
  a = at[0], b = at[1], c = at[2], d = at[3];
#endif
}

/// The dot product of \p x (registers) and \p row (the tile's).
template <int D> PAX_HD float dot(const float *x, const float *row) {
  float d0 = 0, d1 = 0, d2 = 0, d3 = 0;
  PAX_UNROLL
  for (int h = 0; h < D; h += 4) {
    float a, b, c, d;
    load4(&row[h], a, b, c, d);
    d0 += x[h] * a;
    d1 += x[h + 1] * b;
    d2 += x[h + 2] * c;
    d3 += x[h + 3] * d;
  }
  return (d0 + d1) + (d2 + d3);
}

/// \p acc += \p w times \p row (the tile's).
template <int D> PAX_HD void addScaled(float *acc, float w, const float *row) {
  PAX_UNROLL
  for (int h = 0; h < D; h += 4) {
    float a, b, c, d;
    load4(&row[h], a, b, c, d);
    acc[h] += w * a;
    acc[h + 1] += w * b;
    acc[h + 2] += w * c;
    acc[h + 3] += w * d;
  }
}

/// The score of \p r's row and the tile's row \p j (walked row \p walked):
/// AttentionMath.h's score, -inf where the causal mask hides it; \p flows
/// false where a mask replaced it.
template <int D, Pass P>
PAX_HD float score(const Problem &p, const Row<D, P> &r, const Tile<D> &t,
                   int j, int64_t walked, bool &flows) {
  int64_t query = P == Pass::GradKV ? walked : r.index;
  int64_t key = P == Pass::GradKV ? r.index : walked;
  flows = false;
  if (p.causal && key + p.space.globalOffsets[p.kDim] >
                      query + p.space.globalOffsets[p.qDim])
    return -INFINITY;
  flows = true;
  float s = dot<D>(r.x, t.a[j]) * float(p.scale);
  int32_t w = walkDim(p);
  for (int32_t i = 0; i < p.masks; ++i) {
    float m =
        float(p.mask[i].read(r.maskAt[i] + walked * p.mask[i].map.coef[w], 0));
    if (p.maskKind[i] == AddMask) {
      s += m;
    } else if ((m != 0) != (p.maskKind[i] == KeepIfTrue)) {
      s = float(p.fill[i]);
      flows = false;
    }
  }
  return s;
}

/// Forward: thread \p tid's scores of the tile's \p n rows from \p j0
/// into its column of the tile, -inf where masked or past n; returns their
/// maximum.
template <int D>
PAX_HD float tileScores(const Problem &p, Row<D, Pass::Forward> &r, int64_t j0,
                        int n, Tile<D> &t, int tid) {
  float best = -INFINITY;
  for (int j = 0; j < kKeys; ++j) {
    float s = -INFINITY;
    bool flows;
    if (r.active && j < n) {
      s = score(p, r, t, j, j0 + j, flows);
      if (std::isnan(s) || s == INFINITY) {
        r.bad = true;
        s = -INFINITY;
      }
    }
    t.ss[j][tid] = s;
    best = s > best ? s : best;
  }
  return best;
}

/// Forward: the tile's scores folded into thread \p tid's row: rescaled
/// once to the new maximum \p best, then each key's V row weighted.
template <int D>
PAX_HD void foldTile(Row<D, Pass::Forward> &r, float best, int n,
                     const Tile<D> &t, int tid) {
  if (best > r.m) {
    float c = expf(r.m - best);
    r.l *= c;
    PAX_UNROLL
    for (int h = 0; h < D; ++h)
      r.acc[h] *= c;
    r.m = best;
  }
  if (r.m == -INFINITY)
    return;
  for (int j = 0; j < n; ++j) {
    float w = expf(t.ss[j][tid] - r.m);
    r.l += w;
    addScaled<D>(r.acc, w, t.b[j]);
  }
}

/// dQ: the tile's keys' contributions to \p r (AttentionMath.h's
/// foldGradQ).
template <int D>
PAX_HD void gradQTile(const Problem &p, Row<D, Pass::GradQ> &r, int64_t j0,
                      int n, const Tile<D> &t) {
  for (int j = 0; j < n && r.active; ++j) {
    bool flows;
    float s = score(p, r, t, j, j0 + j, flows);
    if (!flows)
      continue;
    float pr = expf(s - r.lse);
    if (pr == 0)
      continue;
    float ds = pr * (dot<D>(r.y, t.b[j]) - r.delta) * float(p.scale);
    addScaled<D>(r.acc, ds, t.a[j]);
  }
}

/// dK and dV: the tile's queries' contributions to \p r (AttentionMath.h's
/// foldGradKV).
template <int D>
PAX_HD void gradKVTile(const Problem &p, Row<D, Pass::GradKV> &r, int64_t j0,
                       int n, const Tile<D> &t) {
  for (int j = 0; j < n && r.active; ++j) {
    bool flows;
    float s = score(p, r, t, j, j0 + j, flows);
    float pr = expf(s - t.lse[j]);
    if (pr == 0)
      continue;
    addScaled<D>(r.acc2, pr, t.b[j]);
    if (!flows)
      continue;
    float ds = pr * (dot<D>(r.y, t.b[j]) - t.delta[j]) * float(p.scale);
    addScaled<D>(r.acc, ds, t.a[j]);
  }
}

/// Thread \p tid's step over a loaded tile of \p n rows from \p j0.
template <int D, Pass P>
PAX_HD void walkTile(const Problem &p, Row<D, P> &r, int64_t j0, int n,
                     Tile<D> &t, int tid) {
  if constexpr (P == Pass::Forward)
    foldTile(r, tileScores(p, r, j0, n, t, tid), n, t, tid);
  else if constexpr (P == Pass::GradQ)
    gradQTile(p, r, j0, n, t);
  else
    gradKVTile(p, r, j0, n, t);
}

/// Writes \p n values of \p v to \p a's row at \p base.
template <int D>
PAX_HD void writeRow(const Access &a, int64_t base, int64_t n, const float *v) {
  PAX_UNROLL
  for (int h = 0; h < D; ++h)
    if (h < n)
      writeOne(a, base, h, double(v[h]));
}

/// \p r's results: the forward pass's output row and log-sum-exp
/// (AttentionMath.h's forwardFinish), dQ, or dK and dV.
template <int D, Pass P>
PAX_HD void finishRow(const Problem &p, const Row<D, P> &r) {
  if (!r.active)
    return;
  if constexpr (P == Pass::GradQ) {
    writeRow<D>(p.out[0], r.o0, p.e, r.acc);
  } else if constexpr (P == Pass::GradKV) {
    writeRow<D>(p.out[0], r.o0, p.e, r.acc);
    writeRow<D>(p.out[1], r.o1, p.v, r.acc2);
  } else {
    bool none = r.bad || r.m == -INFINITY;
    double invalid = p.nanToZero ? 0.0 : NAN;
    PAX_UNROLL
    for (int h = 0; h < D; ++h)
      if (h < p.v)
        writeOne(p.out[0], r.o0, h, none ? invalid : double(r.acc[h] / r.l));
    double lse =
        none ? (p.nanToZero ? INFINITY : NAN) : double(r.m) + log(double(r.l));
    p.out[1].write(r.o1, 0, lse);
  }
}

/// A block run on the host, its threads one after another between the
/// GPU's barriers: the rows from \p r0 of batch point \p b.
template <int D, Pass P>
void runBlock(const Problem &p, int64_t b, int64_t r0, Tile<D> &t,
              Row<D, P> *rows) {
  int64_t batch[flat::kMaxDims];
  batchPoint(p, b, batch);
  for (int tid = 0; tid < kQueries; ++tid)
    startRow(p, batch, r0, tid, rows[tid]);
  int64_t begin, end;
  walkRange(p, r0, begin, end);
  for (int64_t j0 = begin; j0 < end; j0 += kKeys) {
    int n = int(end - j0 < kKeys ? end - j0 : kKeys);
    loadWalked<D, P>(p, batch, j0, n, t, 0, 1);
    for (int tid = 0; tid < kQueries; ++tid)
      walkTile(p, rows[tid], j0, n, t, tid);
  }
  for (int tid = 0; tid < kQueries; ++tid)
    finishRow(p, rows[tid]);
}

} // namespace pax::runtime::attention::tiles

#endif // PAX_RUNTIME_ATTENTIONTILES_H
