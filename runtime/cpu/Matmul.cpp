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
  d.k = s.inner.back();
  for (unsigned dim : s.inner) {
    d.kExtent *= s.extents[dim];
    if (y.usesDim(dim))
      return std::nullopt;
  }
  // Rows are the dims of A only, columns those of B only: the longest run
  // of them, ending at the least significant, that both the input and the
  // output walk as one; else the largest one. Any other outer dim is a
  // batch dim (each batch point is one GEMM).
  llvm::SmallVector<unsigned, 6> onlyA, onlyB;
  for (unsigned dim : s.outer) {
    if (!y.usesDim(dim))
      return std::nullopt;
    bool inA = a.usesDim(dim), inB = b.usesDim(dim);
    if (inA != inB)
      (inA ? onlyA : onlyB).push_back(dim);
  }
  llvm::SmallVector<unsigned, 6> merged;
  auto pick = [&](llvm::ArrayRef<unsigned> dims, const AccessIndexer &in,
                  std::optional<unsigned> &side, int64_t &extent) {
    if (dims.empty())
      return;
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
  };
  pick(onlyA, a, d.m, d.mExtent);
  pick(onlyB, b, d.n, d.nExtent);
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
