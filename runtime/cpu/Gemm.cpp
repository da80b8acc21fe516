//===- Gemm.cpp - Blocked f32 matrix products -----------------------------===//
//
// C = A * B cut into blocks of C that depend on the sizes only. Each block is
// computed on one thread, by oneDNN's sgemm when paxc is built with it and
// the operands have a contiguous dimension, otherwise by the built-in
// register-blocked kernel; either way an element's sum runs in an order
// fixed by the sizes, so results do not depend on the thread count.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Gemm.h"
#include "runtime/cpu/DnnlCache.h"

#ifdef PAX_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace pax::runtime::cpu {
namespace {

/// Blocks are cut in rows and columns of these multiples.
constexpr int64_t kRowGranule = 16, kColGranule = 64;
/// A block is cut no smaller than this on either side (unless C is): a
/// GEMM packs a panel of A per column block and of B per row block, and
/// blocks of 64 columns ran a long reduction at half the speed of blocks
/// of 128; against a B stored by columns, blocks of 16 x 64 ran 8x slower
/// than of 128 x 128.
constexpr int64_t kMinRowBlock = 32, kMinColBlock = 128;
/// Multiply-adds a block gets at least (a few tens of microseconds).
constexpr int64_t kBlockWork = int64_t(1) << 23;
/// The least rows of a block when B is stored by columns.
constexpr int64_t kMinRowBlockBByColumns = 128;
constexpr int64_t kMaxBlocks = 1024;

/// The built-in kernel's tile of C (rows x columns) and its reduction
/// steps per pass, so that the panel of B stays in cache.
constexpr int64_t TileRows = 4, TileCols = 256, TileDepth = 256;

/// Four floats, for the micro-kernel's registers.
typedef float Vec4 __attribute__((vector_size(16)));

Vec4 loadVec(const float *p) {
  Vec4 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

void storeVec(float *p, Vec4 v) { std::memcpy(p, &v, sizeof(v)); }

/// Adds the products of \p kn rows of packed A \p ap and \p kn rows of 8
/// columns of \p b (rows \p ld apart) to columns [j, j + 8) of \p acc, in k
/// order, holding the 4 x 8 sums in registers.
void microTile(const float *b, int64_t ld, int64_t kn,
               const float (*ap)[TileRows], float (*acc)[TileCols], int64_t j) {
  Vec4 c[TileRows][2];
  for (int64_t i = 0; i < TileRows; ++i) {
    c[i][0] = loadVec(acc[i] + j);
    c[i][1] = loadVec(acc[i] + j + 4);
  }
  for (int64_t k = 0; k < kn; ++k) {
    Vec4 b0 = loadVec(b + k * ld), b1 = loadVec(b + k * ld + 4);
    for (int64_t i = 0; i < TileRows; ++i) {
      float a = ap[k][i];
      Vec4 av = {a, a, a, a};
      c[i][0] += av * b0;
      c[i][1] += av * b1;
    }
  }
  for (int64_t i = 0; i < TileRows; ++i) {
    storeVec(acc[i] + j, c[i][0]);
    storeVec(acc[i] + j + 4, c[i][1]);
  }
}

/// One tile of the built-in kernel: rows [i0, i0 + rows) and columns
/// [j0, j0 + cols) of C, each element summing over k in order.
void builtinTile(ConstMatrixF32 a, ConstMatrixF32 b, MatrixF32 c, float alpha,
                 int64_t i0, int64_t rows, int64_t j0, int64_t cols,
                 std::vector<float> &panel) {
  int64_t kk = a.cols;
  alignas(64) float acc[TileRows][TileCols] = {};
  alignas(64) float ap[TileDepth][TileRows];
  for (int64_t k0 = 0; k0 < kk; k0 += TileDepth) {
    int64_t kn = std::min(TileDepth, kk - k0);
    for (int64_t k = 0; k < kn; ++k)
      for (int64_t i = 0; i < TileRows; ++i)
        ap[k][i] = i < rows
                       ? a.data[(i0 + i) * a.rowStride + (k0 + k) * a.colStride]
                       : 0.0f;
    const float *src = b.data + k0 * b.rowStride + j0 * b.colStride;
    int64_t ld = b.rowStride;
    if (b.colStride != 1) {
      // Columns of B that are not contiguous are packed first.
      panel.resize(size_t(kn * cols));
      for (int64_t k = 0; k < kn; ++k)
        for (int64_t j = 0; j < cols; ++j)
          panel[k * cols + j] = src[k * b.rowStride + j * b.colStride];
      src = panel.data();
      ld = cols;
    }
    int64_t j = 0;
    for (; j + 8 <= cols; j += 8)
      microTile(src + j, ld, kn, ap, acc, j);
    for (; j < cols; ++j)
      for (int64_t k = 0; k < kn; ++k) {
        float bv = src[k * ld + j];
        for (int64_t i = 0; i < TileRows; ++i)
          acc[i][j] += ap[k][i] * bv;
      }
  }
  for (int64_t i = 0; i < rows; ++i) {
    float *out = c.data + (i0 + i) * c.rowStride + j0 * c.colStride;
    for (int64_t j = 0; j < cols; ++j)
      out[j * c.colStride] = alpha * acc[i][j];
  }
}

/// The built-in kernel over rows [r0, r1) and columns [c0, c1) of C.
void builtinBlock(ConstMatrixF32 a, ConstMatrixF32 b, MatrixF32 c, float alpha,
                  int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  std::vector<float> panel;
  for (int64_t i0 = r0; i0 < r1; i0 += TileRows)
    for (int64_t j0 = c0; j0 < c1; j0 += TileCols)
      builtinTile(a, b, c, alpha, i0, std::min(TileRows, r1 - i0), j0,
                  std::min(TileCols, c1 - j0), panel);
}

#ifdef PAX_HAVE_DNNL
/// oneDNN's row-major view of \p m: not transposed (`'N'`) when its columns
/// are contiguous, transposed (`'T'`) when its rows are, with the leading
/// dimension; false when neither is.
template <typename T>
bool dnnlLayout(const MatrixView<T> &m, char &trans, int64_t &ld) {
  if (m.colStride == 1 || m.cols == 1) {
    trans = 'N';
    ld = m.rows > 1 ? m.rowStride : m.cols;
    return ld >= std::max<int64_t>(1, m.cols);
  }
  if (m.rowStride == 1 || m.rows == 1) {
    trans = 'T';
    ld = m.cols > 1 ? m.colStride : m.rows;
    return ld >= std::max<int64_t>(1, m.rows);
  }
  return false;
}

/// The block on oneDNN's sgemm, on the calling thread only; false when the
/// operands do not fit its layouts.
template <typename T> MatrixView<T> transposed(MatrixView<T> m) {
  return {m.data, m.cols, m.rows, m.colStride, m.rowStride};
}

bool dnnlBlock(ConstMatrixF32 a, ConstMatrixF32 b, MatrixF32 c, float alpha) {
  char ta, tb, tc;
  int64_t lda, ldb, ldc;
  if (!dnnlLayout(a, ta, lda) || !dnnlLayout(b, tb, ldb) ||
      !dnnlLayout(c, tc, ldc))
    return false;
  // C stored by columns (a weight's gradient written transposed): C^T =
  // B^T A^T, which oneDNN writes by rows.
  if (tc != 'N')
    return c.rowStride == 1 &&
           dnnlBlock(transposed(b), transposed(a), transposed(c), alpha);
  // One oneDNN thread per block: the blocks are this library's parallelism.
  useOneThread();
  return dnnl_sgemm(ta, tb, c.rows, c.cols, a.cols, alpha, a.data, lda, b.data,
                    ldb, 0.0f, c.data, ldc) == dnnl_success;
}
#endif

} // namespace

GemmBlocking GemmBlocking::of(int64_t m, int64_t n, int64_t k, bool bByColumns,
                              int64_t minRowBlock) {
  int64_t minRows = minRowBlock > 0 ? minRowBlock
                    : bByColumns    ? kMinRowBlockBByColumns
                                    : kMinRowBlock;
  GemmBlocking g;
  g.m = m;
  g.n = n;
  if (m <= 0 || n <= 0) {
    g.rowBlocks = g.colBlocks = 0;
    return g;
  }
  g.rowBlock = m;
  g.colBlock = n;
  int64_t want = std::clamp<int64_t>(
      m * n * std::max<int64_t>(k, 1) / kBlockWork, 1, kMaxBlocks);
  auto halve = [](int64_t v, int64_t granule) {
    return (v / 2 + granule - 1) / granule * granule;
  };
  // Halve the side with more minimal blocks until there are enough blocks.
  while (g.count() < want) {
    bool colsLeft = halve(g.colBlock, kColGranule) >= kMinColBlock,
         rowsLeft = halve(g.rowBlock, kRowGranule) >= minRows;
    if (colsLeft &&
        (!rowsLeft || g.colBlock / kMinColBlock >= g.rowBlock / minRows))
      g.colBlock = halve(g.colBlock, kColGranule);
    else if (rowsLeft)
      g.rowBlock = halve(g.rowBlock, kRowGranule);
    else
      break;
    g.rowBlocks = (m + g.rowBlock - 1) / g.rowBlock;
    g.colBlocks = (n + g.colBlock - 1) / g.colBlock;
  }
  return g;
}

std::pair<int64_t, int64_t> GemmBlocking::rows(int64_t b) const {
  int64_t r0 = (b / colBlocks) * rowBlock;
  return {r0, std::min(m, r0 + rowBlock)};
}

std::pair<int64_t, int64_t> GemmBlocking::cols(int64_t b) const {
  int64_t c0 = (b % colBlocks) * colBlock;
  return {c0, std::min(n, c0 + colBlock)};
}

void gemmTileF32(ConstMatrixF32 a, ConstMatrixF32 b, MatrixF32 c, float alpha,
                 GemmEngine engine) {
  if (c.rows <= 0 || c.cols <= 0)
    return;
  if (a.cols <= 0) {
    for (int64_t i = 0; i < c.rows; ++i)
      for (int64_t j = 0; j < c.cols; ++j)
        c.data[i * c.rowStride + j * c.colStride] = 0.0f;
    return;
  }
#ifdef PAX_HAVE_DNNL
  if (engine == GemmEngine::Best && dnnlBlock(a, b, c, alpha))
    return;
#else
  (void)engine;
#endif
  builtinBlock(a, b, c, alpha, 0, c.rows, 0, c.cols);
}

void gemmBlockF32(ConstMatrixF32 a, ConstMatrixF32 b, MatrixF32 c, float alpha,
                  const GemmBlocking &blocking, int64_t block,
                  GemmEngine engine) {
  auto [r0, r1] = blocking.rows(block);
  auto [c0, c1] = blocking.cols(block);
  gemmTileF32(
      {a.data + r0 * a.rowStride, r1 - r0, a.cols, a.rowStride, a.colStride},
      {b.data + c0 * b.colStride, b.rows, c1 - c0, b.rowStride, b.colStride},
      {c.data + r0 * c.rowStride + c0 * c.colStride, r1 - r0, c1 - c0,
       c.rowStride, c.colStride},
      alpha, engine);
}

void gemmF32(ConstMatrixF32 a, ConstMatrixF32 b, MatrixF32 c, float alpha,
             GemmEngine engine) {
  GemmBlocking g =
      GemmBlocking::of(c.rows, c.cols, a.cols, GemmBlocking::byColumns(b));
  tbb::parallel_for(int64_t(0), g.count(), [&](int64_t i) {
    gemmBlockF32(a, b, c, alpha, g, i, engine);
  });
}

llvm::StringRef gemmBackend() {
#ifdef PAX_HAVE_DNNL
  return "onednn";
#else
  return "builtin";
#endif
}

} // namespace pax::runtime::cpu
