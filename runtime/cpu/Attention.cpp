//===- Attention.cpp - Attention and its gradients ------------------------===//
#include "runtime/cpu/Attention.h"

#include "runtime/cpu/Gemm.h"
#include "runtime/cpu/PointwiseVector.h"
#include "runtime/cpu/VectorWidth.h"

#include "runtime/IterationSpace.h"
#include "runtime/Prepared.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace pax::runtime::cpu {
namespace {

using attention::Access;
using attention::Pass;
using attention::Problem;

std::optional<Pass> passOf(llvm::StringRef kind) {
  if (kind == "attention")
    return Pass::Forward;
  if (kind == "attention_grad_q")
    return Pass::GradQ;
  if (kind == "attention_grad_kv")
    return Pass::GradKV;
  return std::nullopt;
}

/// Compiles \p access for tensor \p t into \p a; \p head receives the
/// extent of the dim it reads whole (1 when none).
llvm::Error compileAccess(const plan::Compute &c, const plan::Access &access,
                          const Tensor *t, const IterationSpace &space,
                          const llvm::Twine &what, Access &a, int64_t &head) {
  if (!t || int64_t(t->data.size()) != t->bytes())
    return computeError(c, what + " is missing or has the wrong size");
  auto m = AccessIndexer::compile(c, access, t->shape, space, what,
                                  /*fullFromZero=*/true);
  if (!m)
    return m.takeError();
  // Rows are read at one index plus head steps: the map must stay inside
  // the tensor everywhere.
  if (!m->isLinear())
    return computeError(c, what + " is not read through plain dims inside "
                                  "the tensor");
  a.data = const_cast<uint8_t *>(t->data.data());
  a.type = int32_t(t->dtype);
  a.map = m->flatMap();
  head = 1;
  a.inner = 0;
  for (int i = 0; i < access.exprs_size(); ++i) {
    const plan::AccessExpr &e = access.exprs(i);
    bool inGroup = e.kind() == plan::AccessExpr::GROUP && e.whole() > 1;
    if (e.kind() != plan::AccessExpr::FULL && !inGroup)
      continue;
    if (a.inner)
      return computeError(c, what + " reads more than one dim whole");
    // `*`: the whole dim; `(h, *64)`: 64 from each head's index on.
    head = inGroup ? e.whole() : t->shape[size_t(i)];
    a.inner = 1;
    for (size_t j = size_t(i) + 1; j < t->shape.size(); ++j)
      a.inner *= t->shape[j];
  }
  return llvm::Error::success();
}

/// The masks: kinds and fills from the attributes, operands after
/// \p first.
llvm::Error readMasks(const plan::Compute &c,
                      llvm::ArrayRef<const Tensor *> ins, size_t first,
                      const IterationSpace &space, Problem &p) {
  std::vector<int64_t> kinds = attrInts(c, "masks");
  std::vector<double> fills;
  if (const plan::Attr *f = findAttr(c, "fills"); f && f->has_floats())
    fills.assign(f->floats().values().begin(), f->floats().values().end());
  if (ins.size() != first + kinds.size())
    return computeError(c, "has " + llvm::Twine(ins.size()) +
                               " operands; its masks attribute needs " +
                               llvm::Twine(first + kinds.size()));
  if (kinds.size() > size_t(attention::kMaxMasks))
    return computeError(c, "has more than " +
                               llvm::Twine(attention::kMaxMasks) + " masks");
  p.masks = int32_t(kinds.size());
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (kinds[i] < attention::AddMask || kinds[i] > attention::KeepIfFalse)
      return computeError(c, "mask kind " + llvm::Twine(kinds[i]) +
                                 " is not 1 (add), 2 or 3 (keep)");
    if (kinds[i] != attention::AddMask && fills.size() != kinds.size())
      return computeError(c, "a where mask needs the fills attribute");
    p.maskKind[i] = int32_t(kinds[i]);
    p.fill[i] = i < fills.size() ? fills[i] : 0.0;
    int64_t head = 1;
    if (auto err =
            compileAccess(c, c.inputs(int(first + i)), ins[first + i], space,
                          "mask " + llvm::Twine(i), p.mask[i], head))
      return err;
    if (p.mask[i].inner)
      return computeError(c, "a mask reads a dim whole");
  }
  return llvm::Error::success();
}

/// Q, K, V (and the gradients' dO, lse, D): their head dims agree.
llvm::Error readInputs(const plan::Compute &c,
                       llvm::ArrayRef<const Tensor *> ins,
                       const IterationSpace &space, Problem &p) {
  bool grad = p.pass != Pass::Forward;
  if (ins.size() < (grad ? 6u : 3u))
    return computeError(c, grad ? "needs Q, K, V, dO, the log-sum-exp and D"
                                : "needs Q, K and V");
  int64_t ek = 0, dv = 0, one = 0;
  if (auto err = compileAccess(c, c.inputs(0), ins[0], space, "q", p.q, p.e))
    return err;
  if (auto err = compileAccess(c, c.inputs(1), ins[1], space, "k", p.k, ek))
    return err;
  if (auto err = compileAccess(c, c.inputs(2), ins[2], space, "v", p.val, p.v))
    return err;
  if (!p.q.inner || !p.k.inner || !p.val.inner || p.e != ek)
    return computeError(c, "q, k and v must each read one head dim whole, "
                           "q's and k's of one extent");
  if (grad) {
    if (auto err =
            compileAccess(c, c.inputs(3), ins[3], space, "d_out", p.dout, dv))
      return err;
    if (auto err =
            compileAccess(c, c.inputs(4), ins[4], space, "lse", p.lse, one))
      return err;
    if (auto err =
            compileAccess(c, c.inputs(5), ins[5], space, "delta", p.delta, one))
      return err;
    if (dv != p.v || p.lse.inner || p.delta.inner)
      return computeError(c, "d_out, the log-sum-exp and D do not match v");
  }
  return readMasks(c, ins, grad ? 6 : 3, space, p);
}

/// The results: O and lse; dQ; dK and dV.
llvm::Error readOutputs(const plan::Compute &c, llvm::ArrayRef<Tensor *> outs,
                        const IterationSpace &space, Problem &p) {
  size_t want = p.pass == Pass::GradQ ? 1 : 2;
  if (outs.size() != want)
    return computeError(c, "needs " + llvm::Twine(want) + " outputs, has " +
                               llvm::Twine(outs.size()));
  int64_t heads[2] = {p.pass == Pass::Forward ? p.v : p.e,
                      p.pass == Pass::Forward ? 1 : p.v};
  for (size_t i = 0; i < want; ++i) {
    int64_t head = 1;
    if (auto err = compileAccess(c, c.outputs(int(i)), outs[i], space,
                                 "output " + llvm::Twine(i), p.out[i], head))
      return err;
    if (head != heads[i])
      return computeError(c, "output " + llvm::Twine(i) +
                                 " does not match the head dims");
  }
  return llvm::Error::success();
}

} // namespace

llvm::Expected<Problem> prepareAttention(const plan::Compute &c,
                                         llvm::ArrayRef<const Tensor *> ins,
                                         llvm::ArrayRef<Tensor *> outs) {
  std::optional<Pass> pass = passOf(c.kind());
  if (!pass)
    return computeError(c, "not an attention compute");
  Problem p;
  p.pass = *pass;
  IterationSpace space = IterationSpace::of(c);
  int rank = c.iters_size();
  if (rank < 2 || space.inner.size() != 1 ||
      space.inner[0] != unsigned(rank - 1))
    return computeError(c, "needs iteration dims [batch..., rows, walked] "
                           "with the walked one its only reduction");
  p.qDim = *pass == Pass::GradKV ? rank - 1 : rank - 2;
  p.kDim = *pass == Pass::GradKV ? rank - 2 : rank - 1;
  p.scale = attrReal(c, "scale", 1.0);
  p.nanToZero = attrInt(c, "nan_to_zero", 0) != 0;
  p.causal = attrInt(c, "causal", 0) != 0;
  if (auto err = readInputs(c, ins, space, p))
    return err;
  if (auto err = readOutputs(c, outs, space, p))
    return err;
  p.space = space.flatten();
  flat::setDividers(p.space);
  return p;
}

namespace {

/// Rows a CPU task takes at once, and the walked side's block: scores and
/// products are f32 matrix products of packed tiles (gemmTileF32: oneDNN
/// where built with it), each walked row read once per tile.
constexpr int64_t kCpuTile = 128, kBlock = 128;

/// \p n rows of \p a along iteration dim \p dim from \p first, \p width
/// head values each, as contiguous floats [n][width].
void pack(const Access &a, int64_t *point, int32_t dim, int64_t first,
          int64_t n, int64_t width, std::vector<float> &out) {
  out.resize(size_t(n * width));
  bool f32 = a.type == int32_t(plan::F32);
  for (int64_t i = 0; i < n; ++i) {
    point[dim] = first + i;
    int64_t base = a.at(point);
    float *to = &out[size_t(i * width)];
    if (f32) {
      const float *from = reinterpret_cast<const float *>(a.data) + base;
      for (int64_t h = 0; h < width; ++h)
        to[h] = from[h * a.inner];
    } else {
      for (int64_t h = 0; h < width; ++h)
        to[h] = float(a.read(base, h));
    }
  }
}

/// exp(d), 0 below where a double underflows (the masked scores' fills
/// would otherwise take libm's slow path).
double expOrZero(double d) { return d < -745.0 ? 0.0 : std::exp(d); }

/// S[r][jj] = sum_h A[r][h] * B[j0 + jj][h]: \p rows rows of A
/// ([rows][w]) against \p nb rows of B ([n][w]) from j0.
void product(const float *a, const float *b, int64_t rows, int64_t w,
             int64_t j0, int64_t nb, float *s) {
  gemmTileF32({a, rows, w, w, 1}, {b + j0 * w, w, nb, 1, w},
              {s, rows, nb, nb, 1}, 1.0f);
}

/// acc[r][h] += sum_jj W[r][jj] * B[j0 + jj][h] for \p rows rows (acc's
/// rows \p stride apart), B [n][w].
void accumulate(const float *wts, const float *b, int64_t rows, int64_t nb,
                int64_t j0, int64_t w, double *acc, int64_t stride,
                std::vector<float> &tmp) {
  tmp.resize(size_t(rows * w));
  gemmTileF32({wts, rows, nb, nb, 1}, {b + j0 * w, nb, w, w, 1},
              {tmp.data(), rows, w, w, 1}, 1.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < w; ++h)
      acc[r * stride + h] += tmp[size_t(r * w + h)];
}

/// The walked side of one batch point (keys; queries for dK, dV), packed
/// once for all its tiles: K (Q), V (dO), and dK/dV's queries' log-sum-exp
/// and D.
struct Walked {
  std::vector<float> a, b, lse, delta;

  /// Packs the walked side of the batch point of outer point \p outer.
  Walked(const Problem &p, int64_t outer) {
    bool kv = p.pass == Pass::GradKV;
    int32_t walkDim = kv ? p.qDim : p.kDim;
    int64_t walked = p.space.extents[walkDim];
    int64_t point[flat::kMaxDims] = {};
    flat::setOuter(p.space, outer, point);
    pack(kv ? p.q : p.k, point, walkDim, 0, walked, p.e, a);
    pack(kv ? p.dout : p.val, point, walkDim, 0, walked, p.v, b);
    if (kv) {
      pack(p.lse, point, walkDim, 0, walked, 1, lse);
      pack(p.delta, point, walkDim, 0, walked, 1, delta);
    }
  }
};

/// One task: rows [first, first + count) of one batch point (queries;
/// keys for dK, dV) against every row of the walked side (keys; queries),
/// block by block. Each row's scratch has attention::rowScratch's layout.
struct Tile {
  const Problem &p;
  bool kv;
  int32_t rowDim, walkDim;
  int64_t first = 0, count, walked, each;
  int64_t point[flat::kMaxDims] = {};
  /// Row side: Q (K) and dO (V); the walked side, shared.
  std::vector<float> rowA, rowB, s, s2, tmp;
  const std::vector<float> &walkA, &walkB, &walkLse, &walkDelta;
  std::vector<double> scratch;

  Tile(const Problem &p, const Walked &w, int64_t outer, int64_t count)
      : p(p), kv(p.pass == Pass::GradKV), rowDim(kv ? p.kDim : p.qDim),
        walkDim(kv ? p.qDim : p.kDim), count(count),
        walked(p.space.extents[walkDim]), each(attention::rowScratch(p)),
        walkA(w.a), walkB(w.b), walkLse(w.lse), walkDelta(w.delta) {
    flat::setOuter(p.space, outer, point);
    first = point[rowDim];
  }

  void packSides();
  /// s[r][jj]: the scores of the block from j0 (scaled, masked); with
  /// \p flows, false where a mask replaced them (no gradient).
  void scores(int64_t j0, int64_t nb, std::vector<bool> *flows);
  void editRow(int64_t r, int64_t j0, int64_t nb, float *x,
               std::vector<bool> *flows);
  bool scaleAndAdd(int64_t r, int64_t j0, int64_t nb, float *x);
  void finishForward(int64_t r);
  void gradientScores(int64_t j0, int64_t nb, std::vector<bool> &flows);
  void forwardBlock(int64_t j0, int64_t nb);
  void gradQBlock(int64_t j0, int64_t nb);
  void gradKVBlock(int64_t j0, int64_t nb);
  void walk();
};

void Tile::packSides() {
  pack(kv ? p.k : p.q, point, rowDim, first, count, p.e, rowA);
  if (p.pass != Pass::Forward)
    pack(kv ? p.val : p.dout, point, rowDim, first, count, p.v, rowB);
}

/// A row's scores of the block from j0, scaled and edited as
/// attention::editScore edits one: the causal mask first, then each mask
/// in order, read along the walked dim by its map's step where the map is
/// linear.
void Tile::editRow(int64_t r, int64_t j0, int64_t nb, float *x,
                   std::vector<bool> *flows) {
  point[rowDim] = first + r;
  point[walkDim] = j0;
  if (scaleAndAdd(r, j0, nb, x))
    return;
  int64_t gRow = point[rowDim] + p.space.globalOffsets[rowDim];
  int64_t gWalk = j0 + p.space.globalOffsets[walkDim];
  auto hidden = [&](int64_t jj) {
    int64_t q = kv ? gWalk + jj : gRow, k = kv ? gRow : gWalk + jj;
    return p.causal && k > q;
  };
  for (int64_t jj = 0; jj < nb; ++jj)
    x[jj] = hidden(jj) ? -INFINITY : float(x[jj] * p.scale);
  for (int32_t i = 0; i < p.masks; ++i) {
    const Access &m = p.mask[i];
    point[walkDim] = j0;
    int64_t base = m.at(point), step = m.map.coef[walkDim];
    if (!p.causal && m.map.linear && m.type == int32_t(plan::F32) &&
        p.maskKind[i] == attention::AddMask) {
      // An f32 mask added along the row (the common padding mask).
      const float *add = reinterpret_cast<const float *>(m.data) + base;
      for (int64_t jj = 0; jj < nb; ++jj)
        x[jj] = float(x[jj] + double(add[jj * step]));
      continue;
    }
    for (int64_t jj = 0; jj < nb; ++jj) {
      if (hidden(jj))
        continue;
      point[walkDim] = j0 + jj;
      double v = m.read(m.map.linear ? base + jj * step : m.at(point), 0);
      if (p.maskKind[i] == attention::AddMask) {
        x[jj] = float(x[jj] + v);
      } else if ((v != 0) != (p.maskKind[i] == attention::KeepIfTrue)) {
        x[jj] = float(p.fill[i]);
        if (flows)
          (*flows)[size_t(r * nb + jj)] = false;
      }
    }
  }
  if (flows && p.causal)
    for (int64_t jj = 0; jj < nb; ++jj)
      if (hidden(jj))
        (*flows)[size_t(r * nb + jj)] = false;
}

/// editRow where the scores are only scaled and at most one f32 mask is
/// added along the row (no causal mask): one pass, as editRow computes it
/// (the scaled score rounded to f32, then the sum). False otherwise.
bool Tile::scaleAndAdd(int64_t r, int64_t j0, int64_t nb, float *x) {
  if (p.causal || p.masks > 1)
    return false;
  const float *add = nullptr;
  int64_t step = 0;
  if (p.masks == 1) {
    const Access &m = p.mask[0];
    if (!m.map.linear || m.type != int32_t(plan::F32) ||
        p.maskKind[0] != attention::AddMask)
      return false;
    point[rowDim] = first + r;
    point[walkDim] = j0;
    add = reinterpret_cast<const float *>(m.data) + m.at(point);
    step = m.map.coef[walkDim];
  }
  double scale = p.scale;
  if (!add) {
    for (int64_t jj = 0; jj < nb; ++jj)
      x[jj] = float(x[jj] * scale);
  } else if (step == 1) {
    for (int64_t jj = 0; jj < nb; ++jj)
      x[jj] = float(double(float(x[jj] * scale)) + double(add[jj]));
  } else {
    for (int64_t jj = 0; jj < nb; ++jj)
      x[jj] = float(double(float(x[jj] * scale)) + double(add[jj * step]));
  }
  return true;
}

void Tile::scores(int64_t j0, int64_t nb, std::vector<bool> *flows) {
  s.resize(size_t(count * nb));
  product(rowA.data(), walkA.data(), count, p.e, j0, nb, s.data());
  if (flows)
    flows->assign(size_t(count * nb), true);
  for (int64_t r = 0; r < count; ++r)
    editRow(r, j0, nb, &s[size_t(r * nb)], flows);
}

/// The weights exp(x - m) of \p nb scores \p x, in place, a vector at a
/// time on VectorMath.h's fastExp (within 2 ulp of f32's): 0 for a NaN or +inf
/// score, when \p m is -inf, and where x - m is below -87 (where f32's e^x
/// leaves the normal range; a weight that small is lost against the
/// row's largest, 1). Returns their sum.
double weights(float *x, int64_t nb, double m) {
  if (m == -INFINITY) {
    std::fill(x, x + nb, 0.0f);
    return 0;
  }
  double sum = 0;
  int64_t jj = 0;
  // Sixteen lanes where the processor has them, then four: the same
  // weights, summed in the same order.
  if (wideVectors() && nb >= 16 &&
      expWeightsWide(x, nb & ~int64_t(15), float(m), sum))
    jj = nb & ~int64_t(15);
  jj = expWeightsOf<V4>(x, jj, nb, float(m), sum);
  for (; jj < nb; ++jj) {
    bool skip = std::isnan(x[jj]) || x[jj] == INFINITY;
    double w = skip ? 0.0 : expOrZero(double(x[jj]) - m);
    sum += w;
    x[jj] = float(w);
  }
  return sum;
}

/// The largest of \p nb scores \p x that are neither NaN nor +inf (-inf
/// when none), four at a time; \p bad set to 1 where one is.
float rowMax(const float *x, int64_t nb, double &bad) {
  const V4 inf = splat(INFINITY);
  V4 top = splat(-INFINITY);
  I4 flagged = {};
  int64_t jj = 0;
  for (; jj + 4 <= nb; jj += 4) {
    V4 v = loadV4(x + jj);
    I4 keep = (v == v) & (v != inf);
    flagged |= ~keep;
    top = (keep & (v > top)) ? v : top;
  }
  float best = std::max(std::max(top[0], top[1]), std::max(top[2], top[3]));
  bool any = (flagged[0] | flagged[1] | flagged[2] | flagged[3]) != 0;
  for (; jj < nb; ++jj) {
    if (std::isnan(x[jj]) || x[jj] == INFINITY)
      any = true;
    else
      best = std::max(best, x[jj]);
  }
  if (any)
    bad = 1;
  return best;
}

/// The online softmax over a block: each row's maximum, its rescale, and
/// the block's weights exp(s - m) left in s for P.V.
void Tile::forwardBlock(int64_t j0, int64_t nb) {
  scores(j0, nb, nullptr);
  for (int64_t r = 0; r < count; ++r) {
    double *row = &scratch[size_t(r * each)];
    float *x = &s[size_t(r * nb)];
    double &m = row[p.v], &l = row[p.v + 1], &bad = row[p.v + 2];
    double top = std::max(m, double(rowMax(x, nb, bad)));
    if (top > m) {
      double c = std::exp(m - top);
      l *= c;
      for (int64_t h = 0; h < p.v; ++h)
        row[h] *= c;
      m = top;
    }
    l += weights(x, nb, m);
  }
  accumulate(s.data(), walkB.data(), count, nb, j0, p.v, scratch.data(), each,
             tmp);
}

/// The gradients' scores of the block (s, with where they flow) and
/// dP = dO.V (s2): row side against walked side either way.
void Tile::gradientScores(int64_t j0, int64_t nb, std::vector<bool> &flows) {
  scores(j0, nb, &flows);
  s2.resize(size_t(count * nb));
  product(rowB.data(), walkB.data(), count, p.v, j0, nb, s2.data());
}

/// dS = P (dP - D) scale with P = exp(s - lse), dP = dO.V; dQ += dS.K.
void Tile::gradQBlock(int64_t j0, int64_t nb) {
  std::vector<bool> flows;
  gradientScores(j0, nb, flows);
  for (int64_t r = 0; r < count; ++r) {
    const double *row = &scratch[size_t(r * each)];
    for (int64_t jj = 0; jj < nb; ++jj) {
      size_t i = size_t(r * nb + jj);
      double pr = flows[i] ? expOrZero(double(s[i]) - row[p.e + 1]) : 0.0;
      s[i] = pr == 0 ? 0.0f : float(pr * (s2[i] - row[p.e]) * p.scale);
    }
  }
  accumulate(s.data(), walkA.data(), count, nb, j0, p.e, scratch.data(), each,
             tmp);
}

/// For keys: dV += P^T.dO, dK += dS^T.Q, the queries walked.
void Tile::gradKVBlock(int64_t j0, int64_t nb) {
  std::vector<bool> flows;
  gradientScores(j0, nb, flows);
  for (int64_t r = 0; r < count; ++r)
    for (int64_t jj = 0; jj < nb; ++jj) {
      size_t i = size_t(r * nb + jj), q = size_t(j0 + jj);
      double pr = expOrZero(double(s[i]) - walkLse[q]);
      s[i] = float(pr);
      s2[i] = pr == 0 || !flows[i]
                  ? 0.0f
                  : float(pr * (s2[i] - walkDelta[q]) * p.scale);
    }
  accumulate(s.data(), walkB.data(), count, nb, j0, p.v, scratch.data() + p.e,
             each, tmp);
  accumulate(s2.data(), walkA.data(), count, nb, j0, p.e, scratch.data(), each,
             tmp);
}

void Tile::walk() {
  packSides();
  scratch.assign(size_t(count * each), 0.0);
  for (int64_t r = 0; r < count; ++r) {
    point[rowDim] = first + r;
    attention::startRow(p, point, &scratch[size_t(r * each)]);
  }
  for (int64_t j0 = 0; j0 < walked; j0 += kBlock) {
    int64_t nb = std::min(kBlock, walked - j0);
    if (p.pass == Pass::Forward)
      forwardBlock(j0, nb);
    else if (p.pass == Pass::GradQ)
      gradQBlock(j0, nb);
    else
      gradKVBlock(j0, nb);
  }
  point[walkDim] = 0;
  for (int64_t r = 0; r < count; ++r) {
    point[rowDim] = first + r;
    if (p.pass == Pass::Forward && p.out[0].type == int32_t(plan::F32))
      finishForward(r);
    else
      attention::finishRow(p, point, &scratch[size_t(r * each)]);
  }
}

/// attention::forwardFinish for an f32 output, written directly.
void Tile::finishForward(int64_t r) {
  const double *row = &scratch[size_t(r * each)];
  double m = row[p.v], l = row[p.v + 1];
  bool none = row[p.v + 2] != 0 || m == -INFINITY;
  float *o = reinterpret_cast<float *>(p.out[0].data) + p.out[0].at(point);
  int64_t inner = p.out[0].inner;
  if (none) {
    float invalid = p.nanToZero ? 0.0f : NAN;
    for (int64_t h = 0; h < p.v; ++h)
      o[h * inner] = invalid;
  } else {
    for (int64_t h = 0; h < p.v; ++h)
      o[h * inner] = float(row[h] / l);
  }
  double lse = none ? (p.nanToZero ? INFINITY : NAN) : m + std::log(l);
  p.out[1].write(p.out[1].at(point), 0, lse);
}

} // namespace

llvm::Error runAttention(const plan::Compute &c,
                         llvm::ArrayRef<const Tensor *> ins,
                         llvm::ArrayRef<Tensor *> outs) {
  auto p = prepareAttention(c, ins, outs);
  if (!p)
    return p.takeError();
  const Problem &pr = *p;
  // The row dim is the last outer dim: tiles of it within one batch point.
  int32_t rowDim = pr.pass == Pass::GradKV ? pr.kDim : pr.qDim;
  int64_t rows = pr.space.extents[rowDim];
  int64_t tiles = (rows + kCpuTile - 1) / kCpuTile;
  int64_t batches = rows ? pr.space.outerPoints / rows : 0;
  // Each batch point's walked side is packed once, its tiles in parallel.
  tbb::parallel_for(int64_t(0), batches, [&](int64_t b) {
    Walked w(pr, b * rows);
    tbb::parallel_for(int64_t(0), tiles, [&](int64_t t) {
      int64_t r0 = t * kCpuTile;
      Tile tile(pr, w, b * rows + r0, std::min(kCpuTile, rows - r0));
      tile.walk();
    });
  });
  return llvm::Error::success();
}

} // namespace pax::runtime::cpu
