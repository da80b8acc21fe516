//===- Matmul.cpp - Matrix products read off iteration spaces -------------===//
#include "runtime/cpu/Matmul.h"

#include "runtime/WindowShape.h"

#include "llvm/ADT/STLExtras.h"

#include <tbb/parallel_for.h>

namespace pax::runtime::cpu {
namespace {

/// Whether every input walks the inner dims as one run: each inner dim's
/// step is the next one's times the next one's extent.
bool innerDimsMerge(const Prepared &p) {
  const IterationSpace &s = p.space;
  for (const AccessIndexer &m : p.inMaps)
    for (size_t i = 0; i + 1 < s.inner.size(); ++i)
      if (m.step(s.inner[i]) !=
          m.step(s.inner[i + 1]) * s.extents[s.inner[i + 1]])
        return false;
  return true;
}

/// Sets \p d's k to the inner dims as one (the last of them, spanning all
/// their points); false when the output \p y indexes one of them.
bool mergeInnerDims(const IterationSpace &s, const AccessIndexer &y,
                    MatmulDims &d) {
  d.k = s.inner.back();
  for (unsigned dim : s.inner) {
    d.kExtent *= s.extents[dim];
    if (y.usesDim(dim))
      return false;
  }
  return true;
}

/// Collects the outer dims only \p a reads into \p onlyA and those only
/// \p b reads into \p onlyB; false when the output \p y skips an outer
/// dim.
bool splitOuterDims(const IterationSpace &s, const AccessIndexer &a,
                    const AccessIndexer &b, const AccessIndexer &y,
                    llvm::SmallVectorImpl<unsigned> &onlyA,
                    llvm::SmallVectorImpl<unsigned> &onlyB) {
  for (unsigned dim : s.outer) {
    if (!y.usesDim(dim))
      return false;
    bool inA = a.usesDim(dim), inB = b.usesDim(dim);
    if (inA != inB)
      (inA ? onlyA : onlyB).push_back(dim);
  }
  return true;
}

/// Where the longest run at the end of \p dims starts that both \p in
/// and \p y walk as one: each dim's step is the next one's times the next
/// one's extent.
size_t mergedRunStart(const IterationSpace &s, llvm::ArrayRef<unsigned> dims,
                      const AccessIndexer &in, const AccessIndexer &y) {
  size_t first = dims.size() - 1;
  while (first > 0) {
    unsigned hi = dims[first - 1], lo = dims[first];
    bool ok = true;
    for (const AccessIndexer *m : {&in, &y})
      ok &= m->step(hi) == m->step(lo) * s.extents[lo];
    if (!ok)
      break;
    --first;
  }
  return first;
}

/// Sets \p side and \p extent to the rows (or columns) of \p dims, the
/// dims only input \p in reads: their merged run when it spans at least
/// as many points as the largest one, else the largest; appends the dims
/// chosen to \p merged.
void pickSide(const IterationSpace &s, llvm::ArrayRef<unsigned> dims,
              const AccessIndexer &in, const AccessIndexer &y,
              std::optional<unsigned> &side, int64_t &extent,
              llvm::SmallVectorImpl<unsigned> &merged) {
  if (dims.empty())
    return;
  size_t first = mergedRunStart(s, dims, in, y);
  int64_t run = 1;
  for (size_t i = first; i < dims.size(); ++i)
    run *= s.extents[dims[i]];
  unsigned largest = dims.back();
  for (unsigned dim : dims)
    if (s.extents[dim] >= s.extents[largest])
      largest = dim;
  if (run >= s.extents[largest]) {
    side = dims.back();
    extent = run;
    merged.append(dims.begin() + first, dims.end());
    return;
  }
  side = largest;
  extent = s.extents[largest];
  merged.push_back(largest);
}

} // namespace

std::optional<MatmulDims> matchMatmul(const Prepared &p, bool sixteenBit) {
  const IterationSpace &s = p.space;
  auto linear = [](const AccessIndexer &m) { return m.isLinear(); };
  if (s.inner.empty() || !productTypes(p, sixteenBit) ||
      !llvm::all_of(p.inMaps, linear) || !p.outMaps[0].isLinear() ||
      !innerDimsMerge(p))
    return std::nullopt;
  const AccessIndexer &a = p.inMaps[0], &b = p.inMaps[1], &y = p.outMaps[0];
  MatmulDims d;
  if (!mergeInnerDims(s, y, d))
    return std::nullopt;
  // Rows are the dims of A only, columns those of B only: the longest run
  // of them, ending at the least significant, that both the input and the
  // output walk as one; else the largest one. Any other outer dim is a
  // batch dim (each batch point is one GEMM).
  llvm::SmallVector<unsigned, 6> onlyA, onlyB;
  if (!splitOuterDims(s, a, b, y, onlyA, onlyB))
    return std::nullopt;
  llvm::SmallVector<unsigned, 6> merged;
  pickSide(s, onlyA, a, y, d.m, d.mExtent, merged);
  pickSide(s, onlyB, b, y, d.n, d.nExtent, merged);
  for (unsigned dim : s.outer)
    if (!llvm::is_contained(merged, dim)) {
      d.batch.push_back(dim);
      d.batchPoints *= s.extents[dim];
    }
  return d;
}

void runMatmulF32(const Prepared &p, const MatmulDims &d, float alpha,
                  float beta) {
  const IterationSpace &s = p.space;
  auto in = [&](size_t k) {
    return reinterpret_cast<const float *>(p.ins[k]->data.data());
  };
  float *y = reinterpret_cast<float *>(p.outs[0]->data.data());
  int64_t rows = d.m ? d.mExtent : 1, cols = d.n ? d.nExtent : 1;
  llvm::SmallVector<int64_t, 8> origin(s.extents.size(), 0);
  GemmBlocking blocking =
      GemmBlocking::of(rows, cols, d.kExtent,
                       GemmBlocking::byColumns(matrixAt(
                           in(1), p.inMaps[1], origin, s, d, d.k, d.n)));
  int64_t blocks = blocking.count();
  tbb::parallel_for(int64_t(0), d.batchPoints * blocks, [&](int64_t t) {
    llvm::SmallVector<int64_t, 8> point(s.extents.size(), 0);
    int64_t rest = t / blocks;
    for (size_t i = d.batch.size(); i-- > 0;) {
      point[d.batch[i]] = rest % s.extents[d.batch[i]];
      rest /= s.extents[d.batch[i]];
    }
    ConstMatrixF32 a = matrixAt(in(0), p.inMaps[0], point, s, d, d.m, d.k);
    ConstMatrixF32 b = matrixAt(in(1), p.inMaps[1], point, s, d, d.k, d.n);
    MatrixF32 out = matrixAt(y, p.outMaps[0], point, s, d, d.m, d.n);
    gemmBlockF32(a, b, out, alpha, blocking, t % blocks);
    if (p.ins.size() < 3)
      return;
    ConstMatrixF32 c = matrixAt(in(2), p.inMaps[2], point, s, d, d.m, d.n);
    auto [r0, r1] = blocking.rows(t % blocks);
    auto [c0, c1] = blocking.cols(t % blocks);
    for (int64_t i = r0; i < r1; ++i)
      for (int64_t j = c0; j < c1; ++j)
        out.data[i * out.rowStride + j * out.colStride] +=
            beta * c.data[i * c.rowStride + j * c.colStride];
  });
}

} // namespace pax::runtime::cpu
