//===- Gemm.h - Blocked f32 matrix products for the CPU kernels -*- C++ -*-===//
#ifndef PAX_RUNTIME_CPU_GEMM_H
#define PAX_RUNTIME_CPU_GEMM_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <utility>

namespace pax::runtime::cpu {

/// A strided f32 matrix: element (i, j) is `data[i * rowStride + j *
/// colStride]`.
template <typename T> struct MatrixView {
  T *data = nullptr;
  int64_t rows = 0, cols = 0, rowStride = 0, colStride = 1;
};
using ConstMatrixF32 = MatrixView<const float>;
using MatrixF32 = MatrixView<float>;

/// How C = A * B is cut into blocks of C. It depends on the sizes only, so
/// every element of C is computed by the same code in the same order
/// whatever the number of threads, and blocks can run in any order.
struct GemmBlocking {
  int64_t m = 1, n = 1;
  int64_t rowBlock = 1, colBlock = 1, rowBlocks = 1, colBlocks = 1;

  /// The blocking of an [m, k] x [k, n] product: enough blocks of about
  /// the same work for the threads of a large machine, each big enough to
  /// run near a core's peak. \p bByColumns: B is stored by columns (its
  /// rows contiguous, a transposed weight), which a GEMM packs slowly, once
  /// per row block: the row blocks are then taller. \p minRowBlock, where
  /// positive: the fewest rows of a block (unless C has fewer).
  static GemmBlocking of(int64_t m, int64_t n, int64_t k,
                         bool bByColumns = false, int64_t minRowBlock = 0);

  /// Whether \p b is stored by columns, as `of` means it.
  template <typename T> static bool byColumns(const MatrixView<T> &b) {
    return b.colStride != 1 && b.rowStride == 1 && b.cols > 1;
  }

  int64_t count() const { return rowBlocks * colBlocks; }
  /// The rows [begin, end) of C that block \p b covers.
  std::pair<int64_t, int64_t> rows(int64_t b) const;
  /// The columns [begin, end) of C that block \p b covers.
  std::pair<int64_t, int64_t> cols(int64_t b) const;
};

/// What computes a block: oneDNN when paxc is built with it and the
/// operands fit its layouts (one contiguous dimension each), else the
/// built-in kernel; or the built-in kernel always.
enum class GemmEngine { Best, Builtin };

/// Computes C = alpha * A * B on the calling thread, all of \p c (its
/// elements are overwritten): the kernel each block of a blocked product
/// runs. \p a is [m, k], \p b is [k, n] and \p c is [m, n]; any strides.
void gemmTileF32(ConstMatrixF32 a, ConstMatrixF32 b, MatrixF32 c, float alpha,
                 GemmEngine engine = GemmEngine::Best);

/// Computes block \p block of C = alpha * A * B on the calling thread (C's
/// elements in the block are overwritten). \p a is [m, k], \p b is [k, n]
/// and \p c is [m, n] for the m and n of \p blocking; any strides.
void gemmBlockF32(ConstMatrixF32 a, ConstMatrixF32 b, MatrixF32 c, float alpha,
                  const GemmBlocking &blocking, int64_t block,
                  GemmEngine engine = GemmEngine::Best);

/// C = alpha * A * B, the blocks of GemmBlocking::of in parallel.
void gemmF32(ConstMatrixF32 a, ConstMatrixF32 b, MatrixF32 c,
             float alpha = 1.0f, GemmEngine engine = GemmEngine::Best);

/// What GemmEngine::Best uses when it can: "onednn" or "builtin".
llvm::StringRef gemmBackend();

} // namespace pax::runtime::cpu

#endif // PAX_RUNTIME_CPU_GEMM_H
