//===- DnnlMatmul.cpp - Matrix products on oneDNN's matmul primitive ------===//
#include "runtime/cpu/DnnlMatmul.h"

#ifdef PAX_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>

#include "runtime/cpu/DnnlType.h"

#include "llvm/ADT/STLExtras.h"

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>
#endif

namespace pax::runtime::cpu {

#ifdef PAX_HAVE_DNNL
namespace {
using dnnl::memory;

/// The fewest rows of a block: oneDNN's kernels reuse a packed block of
/// B over the rows, and blocks of 32 x 128 ran 10% slower than of 128 x
/// 384 (2 cores, [128, 768] x [768, 3072]).
constexpr int64_t kMinRowBlock = 128;
/// The fewest rows of a product whose weight is packed on each call.
constexpr int64_t kMinRowsPackedPerCall = 32;

/// How gemm's C joins the product: none, as the primitive's bias (C reads
/// along the columns only), or as a binary post-op (any other C).
enum class CJoins { None, Bias, Added };

/// A matrix's sizes, strides and element type, its data apart.
struct Layout {
  int64_t rows = 0, cols = 0, rowStride = 0, colStride = 0;
  memory::data_type type = memory::data_type::f32;
  bool operator==(const Layout &o) const {
    return rows == o.rows && cols == o.cols && rowStride == o.rowStride &&
           colStride == o.colStride && type == o.type;
  }
  /// The block of \p r x \p c elements (one where the matrix has one
  /// row or column: a broadcast one).
  memory::desc block(int64_t r, int64_t c) const {
    r = rows == 1 ? 1 : r;
    c = cols == 1 ? 1 : c;
    int64_t col = c > 1 ? colStride : 1;
    return memory::desc({r, c}, type, {r > 1 ? rowStride : c * col, col});
  }
  /// Elements from the matrix's first to the block at (\p r0, \p c0).
  int64_t offset(int64_t r0, int64_t c0) const {
    return r0 * rowStride + c0 * colStride;
  }
  /// Bytes of one element.
  int64_t bytes() const { return type == memory::data_type::f32 ? 4 : 2; }
};

/// The element at \p elements past \p t's first, \p lay's type.
void *elementOf(const Tensor &t, int64_t elements, const Layout &lay) {
  return const_cast<uint8_t *>(t.data.data()) + elements * lay.bytes();
}

/// The operands' layouts a product was compiled for.
struct MatmulLayouts {
  Layout src, weights, dst, c;
  CJoins cJoins = CJoins::None;
  Activation activation = Activation::None;
  bool added = false;
  bool operator==(const MatmulLayouts &o) const {
    return src == o.src && weights == o.weights && dst == o.dst && c == o.c &&
           cJoins == o.cJoins && activation == o.activation && added == o.added;
  }
};

/// One block shape's compiled primitive.
struct BlockPrimitive {
  int64_t rows = 0, cols = 0;
  dnnl::matmul primitive;
  memory::desc scratchpad;
};

/// A matrix product's blocking, its block shapes' primitives and its weight
/// packed per column block.
struct MatmulEntry final : DnnlCache::Entry {
  bool compiled() const override { return !shapes.empty(); }
  MatmulLayouts layouts;
  GemmBlocking blocking;
  llvm::SmallVector<BlockPrimitive, 4> shapes;
  /// B's columns of each column block, in their primitives' layout.
  std::vector<memory> packed;
  PackedFrom packedFrom;
  size_t scratchBytes = 0;
  /// oneDNN has no fast kernel for these layouts: not asked again.
  bool refused = false;

  const BlockPrimitive &shape(int64_t rows, int64_t cols) const {
    for (const BlockPrimitive &b : shapes)
      if (b.rows == rows && b.cols == cols)
        return b;
    return shapes.front();
  }
};

/// \p m's sizes and strides (one row or column: stride 0).
template <typename T> Layout layoutOf(const MatrixView<T> &m) {
  return {m.rowStride ? m.rows : 1, m.colStride ? m.cols : 1, m.rowStride,
          m.colStride};
}

/// \p d with its batch dims that \p p's A, output and C walk right above the
/// rows (and B not at all) merged into the rows, and those of one point
/// dropped: a batch of sequences is one product.
MatmulDims foldBatch(const Prepared &p, MatmulDims d) {
  const IterationSpace &s = p.space;
  for (size_t i = d.batch.size(); i-- > 0;) {
    unsigned dim = d.batch[i];
    bool folds = s.extents[dim] == 1 || p.inMaps[1].step(dim) == 0;
    for (size_t k = 0; k < p.ins.size() && folds; ++k)
      if (k != 1)
        folds = p.inMaps[k].step(dim) == p.inMaps[k].step(*d.m) * d.mExtent;
    folds &= s.extents[dim] == 1 ||
             p.outMaps[0].step(dim) == p.outMaps[0].step(*d.m) * d.mExtent;
    if (!folds)
      break;
    d.mExtent *= s.extents[dim];
    d.batchPoints /= s.extents[dim];
    d.batch.erase(d.batch.begin() + i);
  }
  return d;
}

/// The layouts of \p p's product at \p point (any batch point: they are
/// the same at all) with \p epi.
MatmulLayouts layoutsOf(const Prepared &p, const MatmulDims &d,
                        llvm::ArrayRef<int64_t> point,
                        const MatmulEpilogue &epi) {
  const IterationSpace &s = p.space;
  auto at = [&](size_t k, std::optional<unsigned> rows,
                std::optional<unsigned> cols) {
    return layoutOf(matrixAt(static_cast<const float *>(nullptr), p.inMaps[k],
                             point, s, d, rows, cols));
  };
  MatmulLayouts l;
  l.src = at(0, d.m, d.k);
  l.src.type = dnnlType(*p.ins[0]);
  l.weights = at(1, d.k, d.n);
  l.weights.type = dnnlType(*p.ins[1]);
  l.dst = layoutOf(matrixAt(static_cast<float *>(nullptr), p.outMaps[0], point,
                            s, d, d.m, d.n));
  l.dst.type = dnnlType(*p.outs[0]);
  if (p.ins.size() > 2) {
    l.c = at(2, d.m, d.n);
    l.c.type = dnnlType(*p.ins[2]);
    l.cJoins = l.c.rows == 1 && l.c.cols > 1 ? CJoins::Bias : CJoins::Added;
  }
  l.activation = epi.activation;
  l.added = epi.addend != nullptr;
  return l;
}

/// C where it is a binary post-op, the activation and the addend, as
/// oneDNN's post-ops on a block of \p r x \p c.
dnnl::primitive_attr postOps(const MatmulLayouts &l, int64_t r, int64_t c) {
  dnnl::post_ops ops;
  auto eltwise = [&](dnnl::algorithm a) {
#if DNNL_VERSION_MAJOR >= 3
    ops.append_eltwise(a, 0.0f, 0.0f);
#else
    ops.append_eltwise(1.0f, a, 0.0f, 0.0f);
#endif
  };
  if (l.cJoins == CJoins::Added)
    ops.append_binary(dnnl::algorithm::binary_add, l.c.block(r, c));
  if (l.activation == Activation::GeluErf)
    eltwise(dnnl::algorithm::eltwise_gelu_erf);
  if (l.activation == Activation::GeluTanh)
    eltwise(dnnl::algorithm::eltwise_gelu_tanh);
  if (l.activation == Activation::Relu)
    eltwise(dnnl::algorithm::eltwise_relu);
  if (l.added)
    ops.append_binary(dnnl::algorithm::binary_add, l.dst.block(r, c));
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

/// The primitive of an \p r x \p c block with its weight in \p weights
/// (format `any`: oneDNN's choice); throws where oneDNN has only its
/// reference kernel.
dnnl::matmul::primitive_desc describeBlock(const MatmulLayouts &l, int64_t r,
                                           int64_t c,
                                           const memory::desc &weights) {
  memory::desc bias =
      l.cJoins == CJoins::Bias ? l.c.block(r, c) : memory::desc();
  memory::desc src = l.src.block(r, l.src.cols), dst = l.dst.block(r, c);
  dnnl::primitive_attr attr = postOps(l, r, c);
#if DNNL_VERSION_MAJOR >= 3
  dnnl::matmul::primitive_desc pd(dnnlEngine(), src, weights, bias, dst, attr);
#else
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, weights, bias, dst),
                                  attr, dnnlEngine());
#endif
  if (std::string(pd.impl_info_str()).rfind("ref", 0) == 0)
    throw dnnl::error(dnnl_unimplemented, "only the reference kernel");
  return pd;
}

/// The distinct sizes of \p count blocks of \p size out of \p total.
llvm::SmallVector<int64_t, 2> blockSizes(int64_t total, int64_t size,
                                         int64_t count) {
  llvm::SmallVector<int64_t, 2> sizes{std::min(size, total)};
  int64_t last = total - (count - 1) * size;
  if (last != sizes[0])
    sizes.push_back(last);
  return sizes;
}

/// Compiles \p e's primitives for \p l: one per block shape, those of a
/// column width sharing the weight layout its first chose; and the packed
/// weight's memory per column block.
void build(const MatmulLayouts &l, MatmulEntry &e) {
  e.layouts = l;
  e.blocking =
      GemmBlocking::of(l.dst.rows, l.dst.cols, l.src.cols, false, kMinRowBlock);
  const GemmBlocking &g = e.blocking;
  e.shapes.clear();
  e.packed.clear();
  e.scratchBytes = 0;
  int64_t k = l.src.cols;
  llvm::SmallVector<std::pair<int64_t, memory::desc>, 2> weightsOf;
  for (int64_t c : blockSizes(g.n, g.colBlock, g.colBlocks)) {
    memory::desc w({k, c}, l.weights.type, memory::format_tag::any);
    for (int64_t r : blockSizes(g.m, g.rowBlock, g.rowBlocks)) {
      auto pd = describeBlock(l, r, c, w);
      w = pd.weights_desc();
      e.shapes.push_back({r, c, dnnl::matmul(pd), pd.scratchpad_desc()});
      e.scratchBytes =
          std::max(e.scratchBytes, pd.scratchpad_desc().get_size());
    }
    weightsOf.push_back({c, w});
  }
  for (int64_t j = 0; j < g.colBlocks; ++j) {
    auto [c0, c1] = g.cols(j);
    for (auto &[c, w] : weightsOf)
      if (c == c1 - c0) {
        e.packed.emplace_back(w, dnnlEngine());
        break;
      }
  }
  e.packedFrom.clear();
  e.scratchBytes = (e.scratchBytes + 63) / 64 * 64;
}

/// The batch point of \p p's flat batch index \p b.
llvm::SmallVector<int64_t, 8> batchPoint(const Prepared &p, const MatmulDims &d,
                                         int64_t b) {
  llvm::SmallVector<int64_t, 8> point(p.space.extents.size(), 0);
  for (size_t i = d.batch.size(); i-- > 0;) {
    int64_t extent = p.space.extents[d.batch[i]];
    point[d.batch[i]] = b % extent;
    b /= extent;
  }
  return point;
}

/// Runs block \p block at batch point \p point of \p p on \p e's
/// primitive for its shape, on the calling thread, with \p epi's addend and
/// \p scratch.
void runBlock(const Prepared &p, llvm::ArrayRef<int64_t> point, int64_t block,
              const MatmulEpilogue &epi, const MatmulEntry &e, void *scratch) {
  const MatmulLayouts &l = e.layouts;
  // Plain variables, not a structured binding: lambdas capture them.
  std::pair<int64_t, int64_t> rows = e.blocking.rows(block),
                              cols = e.blocking.cols(block);
  int64_t r0 = rows.first, r1 = rows.second, c0 = cols.first, c1 = cols.second;
  const BlockPrimitive &b = e.shape(r1 - r0, c1 - c0);
  auto at = [&](const Tensor &t, const AccessIndexer &map, const Layout &lay,
                int64_t r, int64_t c) {
    return memory(lay.block(r1 - r0, c1 - c0), dnnlEngine(),
                  elementOf(t, map.index(point) + lay.offset(r, c), lay));
  };
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC,
       memory(l.src.block(r1 - r0, l.src.cols), dnnlEngine(),
              elementOf(*p.ins[0],
                        p.inMaps[0].index(point) + l.src.offset(r0, 0),
                        l.src))},
      {DNNL_ARG_WEIGHTS, e.packed[size_t(block % e.blocking.colBlocks)]},
      {DNNL_ARG_DST, at(*p.outs[0], p.outMaps[0], l.dst, r0, c0)},
      {DNNL_ARG_SCRATCHPAD, memory(b.scratchpad, dnnlEngine(), scratch)}};
  if (l.cJoins != CJoins::None)
    args.emplace(l.cJoins == CJoins::Bias
                     ? DNNL_ARG_BIAS
                     : DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1,
                 at(*p.ins[2], p.inMaps[2], l.c, r0, c0));
  int addendIndex =
      int(l.cJoins == CJoins::Added) + int(l.activation != Activation::None);
  if (epi.addend)
    args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(addendIndex) | DNNL_ARG_SRC_1,
                 at(*epi.addend, p.outMaps[0], l.dst, r0, c0));
  dnnl::stream st(dnnlEngine());
  b.primitive.execute(st, args);
  st.wait();
}

/// Runs every block of \p p at every batch point in parallel, each on one
/// thread with its own part of \p scratch.
void execute(const Prepared &p, const MatmulDims &d, const MatmulEpilogue &epi,
             const MatmulEntry &e, uint8_t *scratch) {
  int64_t blocks = e.blocking.count();
  tbb::parallel_for(int64_t(0), d.batchPoints * blocks, [&](int64_t t) {
    useOneThread();
    int thread = std::max(0, tbb::this_task_arena::current_thread_index());
    runBlock(p, batchPoint(p, d, t / blocks), t % blocks, epi, e,
             scratch + size_t(thread) * e.scratchBytes);
  });
}

/// Reorders each column block of \p p's weight into \p e's packed layout,
/// unless it is the resident one packed already.
void pack(const Prepared &p, MatmulEntry &e) {
  const Tensor *sources[1] = {p.ins[1]};
  if (e.packedFrom.current(sources))
    return;
  llvm::SmallVector<int64_t, 8> origin(p.space.extents.size(), 0);
  const Layout &w = e.layouts.weights;
  int64_t base = p.inMaps[1].index(origin);
  dnnl::stream st(dnnlEngine());
  for (int64_t j = 0; j < e.blocking.colBlocks; ++j) {
    auto [c0, c1] = e.blocking.cols(j);
    memory user(w.block(w.rows, c1 - c0), dnnlEngine(),
                elementOf(*p.ins[1], base + w.offset(0, c0), w));
    dnnl::reorder(user, e.packed[size_t(j)])
        .execute(st, user, e.packed[size_t(j)]);
  }
  st.wait();
  e.packedFrom.packed(sources);
}

/// Whether \p d (batch dims folded) suits the primitive.
bool suits(const Prepared &p, const MatmulDims &d, float alpha, float beta) {
  if (alpha != 1.0f || (p.ins.size() > 2 && beta != 1.0f) || !d.m || !d.n)
    return false;
  for (unsigned dim : d.batch)
    if (p.inMaps[1].step(dim) != 0)
      return false;
  return p.ins[1]->resident || d.mExtent >= kMinRowsPackedPerCall;
}
} // namespace

bool runMatmulDnnl(const Prepared &p, const MatmulDims &dims, float alpha,
                   float beta, DnnlCache *cache, const MatmulEpilogue &epi,
                   const void *key) {
  if (gemmBackend() != "onednn")
    return false;
  MatmulDims d = foldBatch(p, dims);
  if (!suits(p, d, alpha, beta))
    return false;
  MatmulEntry local;
  MatmulEntry &e = cache ? cache->entry<MatmulEntry>(key ? key : &p.c, p.ins[0]->dtype) : local;
  if (e.refused)
    return false;
  try {
    useOneThread();
    MatmulLayouts l = layoutsOf(p, d, batchPoint(p, d, 0), epi);
    if (!e.compiled() || !(e.layouts == l))
      build(l, e);
    pack(p, e);
    size_t threads = size_t(tbb::this_task_arena::max_concurrency());
    Scratch scratch(cache, e.scratchBytes * threads);
    execute(p, d, epi, e, static_cast<uint8_t *>(scratch.get()));
  } catch (const dnnl::error &) {
    // No fast primitive for this product: nothing was written, the caller
    // runs the blocked GEMM.
    e = MatmulEntry();
    e.refused = true;
    return false;
  }
  return true;
}
#else
bool runMatmulDnnl(const Prepared &, const MatmulDims &, float, float,
                   DnnlCache *, const MatmulEpilogue &, const void *) {
  return false;
}
#endif

} // namespace pax::runtime::cpu
