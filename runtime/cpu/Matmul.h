//===- Matmul.h - Matrix products read off iteration spaces ------*- C++
//-*-===//
//
// A matmul or gemm compute whose maps are linear is a batch of GEMMs: the
// outer dims only A reads are its rows, those only B reads its columns, the
// inner dims its reduction and the other outer dims its batch. This reads
// that shape off a prepared compute and runs it on the blocked GEMM
// (cpu/Gemm.h) or, for a product with a weight, on oneDNN's matmul
// primitive (cpu/DnnlMatmul.h).
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_CPU_MATMUL_H
#define PAX_RUNTIME_CPU_MATMUL_H

#include "runtime/Prepared.h"
#include "runtime/cpu/Gemm.h"

#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace pax::runtime::cpu {

/// An f32 matmul or gemm as one GEMM per batch point: an outer dim that
/// only A (and the output) uses is the GEMM's rows, one that only B uses its
/// columns; the other outer dims are batch dims.
struct MatmulDims {
  /// The rows and the columns: the least significant of a run of outer
  /// dims that every tensor reading them walks as one (a convolution's
  /// output rows and columns, a weight's input channels and window),
  /// spanning mExtent and nExtent points.
  std::optional<unsigned> m, n;
  int64_t mExtent = 1, nExtent = 1;
  /// The inner dims, as one: each input walks them with one stride (a
  /// weight's gradient sums over batch and sequence together).
  unsigned k = 0;
  int64_t kExtent = 1;
  llvm::SmallVector<unsigned, 4> batch;
  int64_t batchPoints = 1;
};

/// The dims of \p p when every tensor is f32 (with \p sixteenBit: A and B
/// bf16 or fp16, C and the result of their type or f32), every map
/// linear, the inner dims walked as one by both inputs, and the output
/// written once per outer point.
std::optional<MatmulDims> matchMatmul(const Prepared &p,
                                      bool sixteenBit = false);

/// The strided matrix \p map reads at \p point over dims (\p rows, \p
/// cols); a missing dim is one row or column; the merged inner dims
/// (\p d.k) span d.kExtent.
template <typename T>
MatrixView<T> matrixAt(T *data, const AccessIndexer &map,
                       llvm::ArrayRef<int64_t> point, const IterationSpace &s,
                       const MatmulDims &d, std::optional<unsigned> rows,
                       std::optional<unsigned> cols) {
  auto extent = [&](unsigned dim) {
    return dim == d.k   ? d.kExtent
           : dim == d.m ? d.mExtent
           : dim == d.n ? d.nExtent
                        : s.extents[dim];
  };
  return {data + map.index(point), rows ? extent(*rows) : 1,
          cols ? extent(*cols) : 1, rows ? map.step(*rows) : 0,
          cols ? map.step(*cols) : 1};
}

/// Matmul and gemm on the blocked GEMM, every batch point's blocks in
/// parallel; gemm adds beta times C to each block after its product.
void runMatmulF32(const Prepared &p, const MatmulDims &d, float alpha,
                  float beta);

} // namespace pax::runtime::cpu

#endif // PAX_RUNTIME_CPU_MATMUL_H
