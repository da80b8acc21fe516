//===- AttentionTiles.h - Forward attention over tiles, host and device -*- C++
//-*-===//
//
// The forward `attention` op (AttentionMath.h) over tiles: a block of
// kQueries threads takes kQueries consecutive queries of one batch point (a
// thread each, its query row and output row in registers) and walks the
// keys kKeys at a time. Each key tile's K and V rows are read once for all
// the block's queries (loadKeys, the block's threads together); each
// thread then scores the tile (tileScores, the scores kept beside the tile,
// never in global memory) and folds it into its online softmax, rescaled
// once per tile (foldTile). Under the causal mask the tiles past the
// block's last query are not walked (keysEnd).
//
// The CUDA backend runs a block as a thread block (cuda/CudaAttention.cu:
// the tiles in shared memory, a barrier on each side of loadKeys); the
// cuda-emulated backend runs the same steps with the block's threads one
// after another (runBlock), so the host checks the GPU's arithmetic.
//
// The math is AttentionMath.h's (mask edits in order, a NaN or +inf score
// making the row invalid, a fully masked row NaN or 0 under nan_to_zero) in
// float. It takes the problems `tiled` accepts: the forward pass, linear
// accesses, K and V rows independent of the query (Q's, O's and the
// log-sum-exp's of the key), and head dims of at most kMaxHead; the others
// walk AttentionMath.h's rows.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_ATTENTIONTILES_H
#define PAX_RUNTIME_ATTENTIONTILES_H

#include "runtime/AttentionMath.h"

namespace pax::runtime::attention::tiles {

inline constexpr int kQueries = 64;
inline constexpr int kKeys = 32;
inline constexpr int kMaxHead = 128;

/// A block's key tile: K and V rows (zeros past the head dims and past the
/// tile's keys), and each thread's scores of them (a column each).
template <int D> struct Tile {
  alignas(16) float ks[kKeys][D];
  alignas(16) float vs[kKeys][D];
  float ss[kKeys][kQueries];
};

/// One thread's query: where it reads and writes, and its running softmax
/// over the keys walked so far.
template <int D> struct Row {
  int64_t query = 0;
  bool active = false;
  int64_t ob = 0, lb = 0;
  int64_t maskAt[kMaxMasks] = {};
  float q[D], acc[D];
  float m = -INFINITY, l = 0;
  bool bad = false;
};

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

/// True where \p p runs over tiles (the header's conditions).
PAX_HD inline bool tiled(const Problem &p) {
  if (p.pass != Pass::Forward || p.e > kMaxHead || p.v > kMaxHead ||
      p.space.innerCount != 1 || p.space.inner[0] != uint32_t(p.kDim) ||
      batchPoints(p) * p.space.extents[p.qDim] != p.space.outerPoints)
    return false;
  bool ok = linearAlong(p.q, p.kDim) && linearAlong(p.k, p.qDim) &&
            linearAlong(p.val, p.qDim) && linearAlong(p.out[0], p.kDim) &&
            linearAlong(p.out[1], p.kDim);
  for (int32_t i = 0; i < p.masks; ++i)
    ok = ok && linearAlong(p.mask[i], -1);
  return ok;
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

/// The keys a block of queries from \p q0 walks: all, or under the causal
/// mask those up to its last query.
PAX_HD inline int64_t keysEnd(const Problem &p, int64_t q0) {
  int64_t sq = p.space.extents[p.qDim], sk = p.space.extents[p.kDim];
  if (!p.causal)
    return sk;
  int64_t last = (q0 + kQueries < sq ? q0 + kQueries : sq) - 1;
  int64_t end =
      last + p.space.globalOffsets[p.qDim] - p.space.globalOffsets[p.kDim] + 1;
  return end < 0 ? 0 : (end > sk ? sk : end);
}

/// Thread \p tid's row of the block of queries from \p q0 at batch point
/// \p batch (batchPoint's): its addresses and its query row.
template <int D>
PAX_HD void startRow(const Problem &p, const int64_t *batch, int64_t q0,
                     int tid, Row<D> &r) {
  int64_t point[flat::kMaxDims];
  for (int32_t d = 0; d < p.space.rank; ++d)
    point[d] = batch[d];
  r.query = q0 + tid;
  r.active = r.query < p.space.extents[p.qDim];
  point[p.qDim] = r.active ? r.query : 0;
  int64_t qb = flat::index(p.q.map, point);
  for (int32_t i = 0; i < p.masks; ++i)
    r.maskAt[i] = flat::index(p.mask[i].map, point);
  r.ob = flat::index(p.out[0].map, point);
  r.lb = flat::index(p.out[1].map, point);
  PAX_UNROLL
  for (int h = 0; h < D; ++h) {
    r.q[h] = r.active && h < p.e ? float(p.q.read(qb, h)) : 0.f;
    r.acc[h] = 0;
  }
  r.m = -INFINITY;
  r.l = 0;
  r.bad = false;
}

/// Keys [j0, j0 + n) of batch point \p batch into the tile's K and V rows:
/// thread \p tid of \p threads takes every threads-th element.
template <int D>
PAX_HD void loadKeys(const Problem &p, const int64_t *batch, int64_t j0, int n,
                     Tile<D> &t, int tid, int threads) {
  int64_t kb = flat::index(p.k.map, batch), vb = flat::index(p.val.map, batch);
  int64_t kStep = p.k.map.coef[p.kDim], vStep = p.val.map.coef[p.kDim];
  for (int i = tid; i < kKeys * D; i += threads) {
    int j = i / D, h = i % D;
    float kv = 0, vv = 0;
    if (j < n && h < p.e)
      kv = float(p.k.read(kb + (j0 + j) * kStep, h));
    if (j < n && h < p.v)
      vv = float(p.val.read(vb + (j0 + j) * vStep, h));
    t.ks[j][h] = kv;
    t.vs[j][h] = vv;
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

/// \p qk scaled and edited by the masks in order (AttentionMath.h's
/// editScore), the masks read at \p j keys past \p r's.
template <int D>
PAX_HD float editScore(const Problem &p, const Row<D> &r, int64_t key,
                       float qk) {
  float s = qk * float(p.scale);
  for (int32_t i = 0; i < p.masks; ++i) {
    float m = float(
        p.mask[i].read(r.maskAt[i] + key * p.mask[i].map.coef[p.kDim], 0));
    if (p.maskKind[i] == AddMask)
      s += m;
    else if ((m != 0) != (p.maskKind[i] == KeepIfTrue))
      s = float(p.fill[i]);
  }
  return s;
}

/// Q.K of \p r's query and the tile's key \p j.
template <int D> PAX_HD float dot(const Row<D> &r, const Tile<D> &t, int j) {
  float d0 = 0, d1 = 0, d2 = 0, d3 = 0;
  PAX_UNROLL
  for (int h = 0; h < D; h += 4) {
    float a, b, c, d;
    load4(&t.ks[j][h], a, b, c, d);
    d0 += r.q[h] * a;
    d1 += r.q[h + 1] * b;
    d2 += r.q[h + 2] * c;
    d3 += r.q[h + 3] * d;
  }
  return (d0 + d1) + (d2 + d3);
}

/// Thread \p tid's scores of the tile's \p n keys from \p j0 into its
/// column of the tile, -inf where masked or past n; returns their maximum.
template <int D>
PAX_HD float tileScores(const Problem &p, Row<D> &r, int64_t j0, int n,
                        Tile<D> &t, int tid) {
  int64_t qGlobal = r.query + p.space.globalOffsets[p.qDim];
  int64_t kGlobal = j0 + p.space.globalOffsets[p.kDim];
  float best = -INFINITY;
  for (int j = 0; j < kKeys; ++j) {
    float s = -INFINITY;
    if (r.active && j < n && !(p.causal && kGlobal + j > qGlobal)) {
      s = editScore(p, r, j0 + j, dot(r, t, j));
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

/// Thread \p tid's scores of the tile folded into its row: rescaled once to
/// the new maximum \p best, then each key's V row weighted.
template <int D>
PAX_HD void foldTile(Row<D> &r, float best, int n, const Tile<D> &t, int tid) {
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
    PAX_UNROLL
    for (int h = 0; h < D; h += 4) {
      float a, b, c, d;
      load4(&t.vs[j][h], a, b, c, d);
      r.acc[h] += w * a;
      r.acc[h + 1] += w * b;
      r.acc[h + 2] += w * c;
      r.acc[h + 3] += w * d;
    }
  }
}

/// \p r's output row and log-sum-exp (AttentionMath.h's forwardFinish).
template <int D> PAX_HD void finishRow(const Problem &p, const Row<D> &r) {
  if (!r.active)
    return;
  bool none = r.bad || r.m == -INFINITY;
  double invalid = p.nanToZero ? 0.0 : NAN;
  PAX_UNROLL
  for (int h = 0; h < D; ++h)
    if (h < p.v)
      p.out[0].write(r.ob, h, none ? invalid : double(r.acc[h] / r.l));
  double lse =
      none ? (p.nanToZero ? INFINITY : NAN) : double(r.m) + log(double(r.l));
  p.out[1].write(r.lb, 0, lse);
}

/// A block run on the host, its threads one after another between the
/// GPU's barriers: the queries from \p q0 of batch point \p b.
template <int D>
void runBlock(const Problem &p, int64_t b, int64_t q0, Tile<D> &t,
              Row<D> *rows) {
  int64_t batch[flat::kMaxDims];
  batchPoint(p, b, batch);
  for (int tid = 0; tid < kQueries; ++tid)
    startRow(p, batch, q0, tid, rows[tid]);
  int64_t end = keysEnd(p, q0);
  for (int64_t j0 = 0; j0 < end; j0 += kKeys) {
    int n = int(end - j0 < kKeys ? end - j0 : kKeys);
    loadKeys(p, batch, j0, n, t, 0, 1);
    for (int tid = 0; tid < kQueries; ++tid)
      foldTile(rows[tid], tileScores(p, rows[tid], j0, n, t, tid), n, t, tid);
  }
  for (int tid = 0; tid < kQueries; ++tid)
    finishRow(p, rows[tid]);
}

} // namespace pax::runtime::attention::tiles

#endif // PAX_RUNTIME_ATTENTIONTILES_H
