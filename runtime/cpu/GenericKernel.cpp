//===- GenericKernel.cpp - Runs a compute by walking its access maps ------===//
#include "runtime/cpu/GenericKernel.h"

#include "runtime/RandomMath.h"

#include "runtime/cpu/KernelContext.h"
#include "runtime/cpu/Reduction.h"
#include "runtime/cpu/ScalarOps.h"
#include "runtime/cpu/Window2D.h"

#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>

namespace pax::runtime {
namespace cpu {

/// Elements of work one TBB task gets at least.
static constexpr int64_t kGrainElements = 16384;

void forEachOuterRun(
    const IterationSpace &s,
    llvm::function_ref<void(llvm::MutableArrayRef<int64_t>, int64_t)> fn) {
  int64_t grain = std::max<int64_t>(1, kGrainElements /
                                           std::max<int64_t>(1, s.innerPoints));
  size_t rank = s.extents.size();
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, s.outerPoints, grain),
                    [&](const tbb::blocked_range<int64_t> &r) {
                      llvm::SmallVector<int64_t, 8> point(rank, 0);
                      s.setOuter(r.begin(), point);
                      for (int64_t i = r.begin(); i < r.end();) {
                        int64_t count = 1;
                        if (!s.outer.empty()) {
                          unsigned last = s.outer.back();
                          count = std::min(s.extents[last] - point[last],
                                           r.end() - i);
                        }
                        fn(point, count);
                        // Step to the run's last point, then past it.
                        if (!s.outer.empty())
                          point[s.outer.back()] += count - 1;
                        s.nextOuter(point);
                        i += count;
                      }
                    });
}

void forEachOuter(const IterationSpace &s,
                  llvm::function_ref<void(llvm::MutableArrayRef<int64_t>)> fn) {
  forEachOuterRun(s, [&](llvm::MutableArrayRef<int64_t> point, int64_t count) {
    if (s.outer.empty())
      return fn(point);
    unsigned last = s.outer.back();
    int64_t start = point[last];
    for (int64_t j = 0; j < count; ++j) {
      point[last] = start + j;
      fn(point);
    }
    point[last] = start;
  });
}

/// Trilu's (row, col) dims: those writing the result's last two dims.
static llvm::Expected<std::pair<unsigned, unsigned>>
triluDims(const plan::Compute &c) {
  if (c.outputs_size() != 1 || c.outputs(0).exprs_size() < 2)
    return computeError(c, "needs one result of rank 2 or more");
  const plan::Access &out = c.outputs(0);
  const plan::AccessExpr &row = out.exprs(out.exprs_size() - 2);
  const plan::AccessExpr &col = out.exprs(out.exprs_size() - 1);
  if (row.kind() != plan::AccessExpr::AFFINE || row.dims_size() != 1 ||
      col.kind() != plan::AccessExpr::AFFINE || col.dims_size() != 1)
    return computeError(c, "result's last two dims must be written by one "
                           "iteration dim each");
  return std::make_pair(unsigned(row.dims(0)), unsigned(col.dims(0)));
}

/// One point of an elementwise op, computed in \p T (double or int64).
template <typename T>
static void elementwisePoint(const Prepared &p, ScalarOp op,
                             const ScalarParams &params,
                             llvm::ArrayRef<int64_t> point, bool dropped) {
  llvm::SmallVector<T, 4> args;
  bool anyIn = p.ins.empty();
  for (size_t k = 0; k < p.ins.size(); ++k) {
    int64_t i = p.inMaps[k].index(point);
    anyIn |= i >= 0;
    if constexpr (std::is_same_v<T, double>)
      args.push_back(i >= 0 ? p.ins[k]->real(i) : 0.0);
    else
      args.push_back(i >= 0 ? p.ins[k]->integer(i) : 0);
  }
  if (!anyIn)
    return;
  T v = 0;
  if (!dropped) {
    if constexpr (std::is_same_v<T, double>)
      v = applyReal(op, args, params);
    else
      v = applyInteger(op, args, params);
  }
  for (size_t r = 0; r < p.outs.size(); ++r) {
    int64_t o = p.outMaps[r].index(point);
    if (o < 0)
      continue;
    if constexpr (std::is_same_v<T, double>)
      p.outs[r]->setReal(o, v);
    else
      p.outs[r]->setInteger(o, v);
  }
}

/// True when every map of \p p is a plain dot product.
static bool allLinear(const Prepared &p) {
  auto linear = [](const AccessIndexer &m) { return m.isLinear(); };
  return llvm::all_of(p.inMaps, linear) && llvm::all_of(p.outMaps, linear);
}

/// A run of \p count points of an elementwise op along dim \p last, every
/// map linear: the indices step by a constant.
template <typename T>
static void
elementwiseRun(const Prepared &p, ScalarOp op, const ScalarParams &params,
               llvm::ArrayRef<int64_t> point, int64_t count, unsigned last) {
  llvm::SmallVector<int64_t, 4> in, inStep, out, outStep;
  for (const AccessIndexer &m : p.inMaps)
    in.push_back(m.index(point)), inStep.push_back(m.step(last));
  for (const AccessIndexer &m : p.outMaps)
    out.push_back(m.index(point)), outStep.push_back(m.step(last));
  llvm::SmallVector<T, 4> args(p.ins.size());
  for (int64_t j = 0; j < count; ++j) {
    for (size_t k = 0; k < p.ins.size(); ++k) {
      int64_t i = in[k] + j * inStep[k];
      if constexpr (std::is_same_v<T, double>)
        args[k] = p.ins[k]->real(i);
      else
        args[k] = p.ins[k]->integer(i);
    }
    for (size_t r = 0; r < p.outs.size(); ++r) {
      int64_t o = out[r] + j * outStep[r];
      if constexpr (std::is_same_v<T, double>)
        p.outs[r]->setReal(o, applyReal(op, args, params));
      else
        p.outs[r]->setInteger(o, applyInteger(op, args, params));
    }
  }
}

/// Elementwise ops: inputs read through their maps (broadcast by `_`).
static llvm::Error runElementwise(const Prepared &p, ScalarOp op) {
  ScalarParams params = scalarParams(op, p.c);
  std::pair<unsigned, unsigned> rowCol{0, 0};
  if (op == ScalarOp::Trilu) {
    auto dims = triluDims(p.c);
    if (!dims)
      return dims.takeError();
    rowCol = *dims;
  }
  bool real = p.ins.empty() ? isFloatDType(p.outs[0]->dtype) : false;
  for (const Tensor *t : p.ins)
    real |= isFloatDType(t->dtype);
  const IterationSpace &s = p.space;
  if (op != ScalarOp::Trilu && s.inner.empty() && !s.outer.empty() &&
      allLinear(p)) {
    unsigned last = s.outer.back();
    forEachOuterRun(s, [&](llvm::MutableArrayRef<int64_t> point, int64_t n) {
      if (real)
        elementwiseRun<double>(p, op, params, point, n, last);
      else
        elementwiseRun<int64_t>(p, op, params, point, n, last);
    });
    return llvm::Error::success();
  }
  forEachOuter(s, [&](llvm::MutableArrayRef<int64_t> point) {
    do {
      bool dropped = false;
      if (op == ScalarOp::Trilu) {
        // Keep the element when its global (row, col) lies on the kept side.
        int64_t row = point[rowCol.first] + s.globalOffsets[rowCol.first];
        int64_t col = point[rowCol.second] + s.globalOffsets[rowCol.second];
        dropped = params.upper ? col - row < params.k : col - row > params.k;
      }
      if (real)
        elementwisePoint<double>(p, op, params, point, dropped);
      else
        elementwisePoint<int64_t>(p, op, params, point, dropped);
    } while (s.nextInner(point));
  });
  return llvm::Error::success();
}

/// Copies element \p i of \p from to element \p o of \p to.
static void copyElement(const Tensor &from, int64_t i, Tensor &to, int64_t o) {
  if (from.dtype == to.dtype) {
    int64_t n = dtypeBytes(to.dtype);
    std::memcpy(to.data.data() + o * n, from.data.data() + i * n, size_t(n));
  } else if (!isFloatDType(from.dtype) && !isFloatDType(to.dtype)) {
    to.setInteger(o, from.integer(i));
  } else {
    to.setReal(o, from.real(i));
  }
}

namespace {
/// Side of the square tiles copyTransposed moves at once.
constexpr int64_t kTransposeTile = 32;

/// One tile of a transposed copy: \p rows x \p cols elements, the input
/// contiguous along a row (rows \p inRow apart), the output along a
/// column (columns \p outCol apart). The inner loop walks the side whose
/// lines lie farther apart contiguously: with power-of-two strides the
/// other side's lines share cache sets, and those are the fewer.
template <typename T>
void transposeTile(const T *in, T *out, int64_t rows, int64_t cols,
                   int64_t inRow, int64_t outCol) {
  if (inRow >= outCol) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        out[r + c * outCol] = in[r * inRow + c];
    return;
  }
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t r = 0; r < rows; ++r)
      out[r + c * outCol] = in[r * inRow + c];
}
} // namespace

/// copyRuns of a transposing copy (a Transpose, a layout change): the
/// output contiguous along a dim a, the input along another dim b;
/// copied in square tiles over (a, b), each tile's reads and writes in the
/// cache, tiles and the other dims' points in parallel. False (nothing
/// written) where the maps or the element size do not allow it.
static bool copyTransposed(const Prepared &p) {
  const IterationSpace &s = p.space;
  if (p.outs.size() != 1 || s.outer.size() < 2)
    return false;
  const AccessIndexer &in = p.inMaps[0], &out = p.outMaps[0];
  auto dimWhere = [&](const AccessIndexer &one, const AccessIndexer &other) {
    return llvm::find_if(s.outer, [&](unsigned d) {
      return one.step(d) == 1 && other.step(d) != 1;
    });
  };
  auto ia = dimWhere(out, in), b = dimWhere(in, out);
  if (ia == s.outer.end())
    return false;
  unsigned a = *ia;
  int64_t size = dtypeBytes(p.ins[0]->dtype);
  if (b == s.outer.end() || s.extents[a] < kTransposeTile ||
      s.extents[*b] < kTransposeTile || (size != 4 && size != 8 && size != 2))
    return false;
  int64_t na = s.extents[a], nb = s.extents[*b];
  int64_t tilesA = (na + kTransposeTile - 1) / kTransposeTile,
          tilesB = (nb + kTransposeTile - 1) / kTransposeTile;
  int64_t others = s.outerPoints / (na * nb), inA = in.step(a),
          outB = out.step(*b);
  const uint8_t *from = p.ins[0]->data.data();
  uint8_t *to = p.outs[0]->data.data();
  tbb::parallel_for(int64_t(0), others * tilesB, [&](int64_t job) {
    llvm::SmallVector<int64_t, 8> point(s.extents.size(), 0);
    int64_t rest = job / tilesB; // the other outer dims, row-major
    for (unsigned d : llvm::reverse(s.outer))
      if (d != a && d != *b) {
        point[d] = rest % s.extents[d];
        rest /= s.extents[d];
      }
    int64_t b0 = job % tilesB * kTransposeTile;
    point[*b] = b0;
    int64_t i0 = in.index(point), o0 = out.index(point);
    int64_t cols = std::min(kTransposeTile, nb - b0);
    for (int64_t t = 0; t < tilesA; ++t) {
      int64_t a0 = t * kTransposeTile, rows = std::min(kTransposeTile, na - a0);
      int64_t i = i0 + a0 * inA, o = o0 + a0;
      if (size == 4)
        transposeTile(reinterpret_cast<const uint32_t *>(from) + i,
                      reinterpret_cast<uint32_t *>(to) + o, rows, cols, inA,
                      outB);
      else if (size == 8)
        transposeTile(reinterpret_cast<const uint64_t *>(from) + i,
                      reinterpret_cast<uint64_t *>(to) + o, rows, cols, inA,
                      outB);
      else
        transposeTile(reinterpret_cast<const uint16_t *>(from) + i,
                      reinterpret_cast<uint16_t *>(to) + o, rows, cols, inA,
                      outB);
    }
  });
  return true;
}

/// Data movement from one input of the outputs' dtype, every map linear:
/// strided copies along the last outer dim, one memcpy when both are
/// contiguous.
static void copyRuns(const Prepared &p) {
  unsigned last = p.space.outer.back();
  int64_t n = dtypeBytes(p.ins[0]->dtype);
  const uint8_t *from = p.ins[0]->data.data();
  forEachOuterRun(p.space, [&](llvm::MutableArrayRef<int64_t> point,
                               int64_t count) {
    int64_t i = p.inMaps[0].index(point), is = p.inMaps[0].step(last);
    for (size_t r = 0; r < p.outs.size(); ++r) {
      uint8_t *to = p.outs[r]->data.data();
      int64_t o = p.outMaps[r].index(point), os = p.outMaps[r].step(last);
      if (is == 1 && os == 1) {
        std::memcpy(to + o * n, from + i * n, size_t(count * n));
        continue;
      }
      for (int64_t j = 0; j < count; ++j)
        std::memcpy(to + (o + j * os) * n, from + (i + j * is) * n, size_t(n));
    }
  });
}

using IterBox = llvm::SmallVector<std::pair<int64_t, int64_t>, 8>;

static int64_t boxVolume(const IterBox &b) {
  int64_t v = 1;
  for (auto [lo, hi] : b)
    v *= std::max<int64_t>(0, hi - lo);
  return v;
}

static IterBox intersect(IterBox a, const IterBox &b) {
  for (size_t d = 0; d < a.size(); ++d)
    a[d] = {std::max(a[d].first, b[d].first),
            std::min(a[d].second, b[d].second)};
  return a;
}

/// Copies input \p k to output \p r over the iteration points of \p box
/// (where both maps are inside): runs along the last outer dim, one
/// memcpy each where both are contiguous, rows in parallel.
static void copyBox(const Prepared &p, size_t k, size_t r, const IterBox &box) {
  const IterationSpace &s = p.space;
  if (boxVolume(box) == 0)
    return;
  unsigned last = s.outer.back();
  int64_t length = box[last].second - box[last].first;
  int64_t rows = boxVolume(box) / length;
  int64_t n = dtypeBytes(p.ins[k]->dtype);
  const AccessIndexer &in = p.inMaps[k], &out = p.outMaps[r];
  int64_t is = in.step(last), os = out.step(last);
  const uint8_t *from = p.ins[k]->data.data();
  uint8_t *to = p.outs[r]->data.data();
  int64_t grain = std::max<int64_t>(1, kGrainElements / length);
  tbb::parallel_for(
      tbb::blocked_range<int64_t>(0, rows, grain),
      [&](const tbb::blocked_range<int64_t> &range) {
        llvm::SmallVector<int64_t, 8> point(s.extents.size(), 0);
        for (int64_t row = range.begin(); row < range.end(); ++row) {
          int64_t rest = row;
          for (size_t j = s.outer.size() - 1; j-- > 0;) {
            unsigned d = s.outer[j];
            int64_t e = box[d].second - box[d].first;
            point[d] = box[d].first + rest % e;
            rest /= e;
          }
          point[last] = box[last].first;
          int64_t i = in.index(point), o = out.index(point);
          if (is == 1 && os == 1) {
            std::memcpy(to + o * n, from + i * n, size_t(length * n));
            continue;
          }
          for (int64_t j = 0; j < length; ++j)
            std::memcpy(to + (o + j * os) * n, from + (i + j * is) * n,
                        size_t(n));
        }
      });
}

/// Concat, split and pad as copies of boxes, when every map has an
/// in-range box (AccessIndexer::inRangeBox) and each output's box is tiled
/// by its disjoint source boxes (or, for a linear output that the space
/// covers once, the rest is \p fill). False, having written nothing,
/// otherwise.
static bool copyBoxes(const Prepared &p, size_t sources, double fill) {
  const IterationSpace &s = p.space;
  if (!s.inner.empty() || s.outer.empty() ||
      llvm::any_of(p.ins.take_front(sources), [&](const Tensor *t) {
        return t->dtype != p.outs[0]->dtype;
      }))
    return false;
  std::vector<IterBox> in, out;
  for (size_t k = 0; k < sources; ++k) {
    auto b = p.inMaps[k].inRangeBox(s);
    if (!b)
      return false;
    in.push_back(std::move(*b));
  }
  for (const AccessIndexer &m : p.outMaps) {
    auto b = m.inRangeBox(s);
    if (!b)
      return false;
    out.push_back(std::move(*b));
  }
  for (size_t a = 0; a < in.size(); ++a)
    for (size_t b = a + 1; b < in.size(); ++b)
      if (boxVolume(intersect(in[a], in[b])) > 0)
        return false;
  std::vector<bool> fills(out.size(), false);
  for (size_t r = 0; r < out.size(); ++r) {
    int64_t covered = 0;
    for (const IterBox &b : in)
      covered += boxVolume(intersect(b, out[r]));
    if (covered == boxVolume(out[r]))
      continue;
    if (!p.outMaps[r].isLinear() || p.outs[r]->numel() != s.outerPoints)
      return false;
    fills[r] = true;
  }
  for (size_t r = 0; r < out.size(); ++r) {
    if (fills[r]) {
      Tensor &t = *p.outs[r];
      if (fill == 0)
        std::fill(t.data.begin(), t.data.end(), uint8_t(0));
      else
        for (int64_t i = 0; i < t.numel(); ++i)
          t.setReal(i, fill);
    }
    for (size_t k = 0; k < sources; ++k)
      copyBox(p, k, r, intersect(in[k], out[r]));
  }
  return true;
}

/// An index out of its whole table, the first one seen by any thread.
struct BadIndex {
  std::mutex mutex;
  std::optional<std::pair<int64_t, int64_t>> first;
  void note(std::pair<int64_t, int64_t> b) {
    std::lock_guard<std::mutex> guard(mutex);
    first = first ? first : b;
  }
};

/// One gather run of \p count points from \p point along the last walked
/// dim, one index for all of them: a row piece copied at once where it
/// lies inside the table and the result, else point by point as runCopy.
static void gatherRun(const Prepared &p, llvm::MutableArrayRef<int64_t> point,
                      int64_t count, double fill, BadIndex &bad) {
  unsigned last = p.space.outer.back();
  int64_t j = p.inMaps[1].index(point), value = 0;
  bool masked = j < 0;
  if (!masked) {
    value = p.ins[1]->integer(j);
    if (auto out = p.inMaps[0].lookupOutOfRange({value})) {
      bad.note(*out);
      masked = true;
    }
  }
  auto at = [&](int64_t k, bool table) {
    point[last] += k;
    int64_t i = table ? (masked ? -1 : p.inMaps[0].index(point, {value}))
                      : p.outMaps[0].index(point);
    point[last] -= k;
    return i;
  };
  int64_t o0 = at(0, false), i0 = at(0, true);
  Tensor &out = *p.outs[0];
  if (!masked && o0 >= 0 && i0 >= 0 && at(count - 1, false) - o0 == count - 1 &&
      at(count - 1, true) - i0 == count - 1) {
    int64_t n = dtypeBytes(out.dtype);
    std::memcpy(out.data.data() + o0 * n, p.ins[0]->data.data() + i0 * n,
                size_t(count * n));
    return;
  }
  for (int64_t k = 0; k < count; ++k) {
    int64_t o = at(k, false), i = at(k, true);
    if (o >= 0 && i >= 0)
      copyElement(*p.ins[0], i, out, o);
    else if (o >= 0)
      out.setReal(o, fill);
  }
}

/// A gather whose table and result step by one element along the last
/// walked dim, which its indices do not move along: each run reads its
/// index once (gatherRun). False when the maps do not allow it.
static bool gatherRows(const Prepared &p, double fill, BadIndex &bad) {
  const IterationSpace &s = p.space;
  if (s.outer.empty() || s.innerPoints != 1 || p.outs.size() != 1 ||
      p.ins.size() != 2 || p.ins[0]->dtype != p.outs[0]->dtype ||
      p.inMaps[0].lookupCount() != 1)
    return false;
  unsigned last = s.outer.back();
  if (p.inMaps[0].step(last) != 1 || p.outMaps[0].step(last) != 1 ||
      p.inMaps[1].step(last) != 0)
    return false;
  forEachOuterRun(s, [&](llvm::MutableArrayRef<int64_t> point, int64_t n) {
    gatherRun(p, point, n, fill, bad);
  });
  return true;
}

/// runCopy point by point: each result element from the first input whose
/// map reaches inside it, the fill where none does (or a lookup is masked).
static void copyPoints(const Prepared &p, size_t sources, unsigned tuple,
                       double fill, BadIndex &bad) {
  const IterationSpace &s = p.space;
  bool lookup = tuple > 0;
  forEachOuter(s, [&](llvm::MutableArrayRef<int64_t> point) {
    llvm::SmallVector<int64_t, 4> lookupValues(tuple, 0);
    do {
      bool masked = false;
      if (lookup) {
        int64_t j = p.inMaps[1].index(point);
        masked = j < 0;
        for (unsigned t = 0; t < tuple && !masked; ++t)
          lookupValues[t] = p.ins[1]->integer(j + t);
        if (!masked)
          if (auto out = p.inMaps[0].lookupOutOfRange(lookupValues)) {
            bad.note(*out);
            masked = true;
          }
      }
      for (size_t r = 0; r < p.outs.size(); ++r) {
        int64_t o = p.outMaps[r].index(point);
        if (o < 0)
          continue;
        int64_t i = -1;
        size_t k = 0;
        for (; k < sources && i < 0 && !masked; ++k)
          i = p.inMaps[k].index(point, lookupValues);
        if (i >= 0)
          copyElement(*p.ins[k - 1], i, *p.outs[r], o);
        else
          p.outs[r]->setReal(o, fill);
      }
    } while (s.nextInner(point));
  });
}

/// Data movement and gather: each result element copies from the first
/// input whose map reaches inside it (concat inputs cover disjoint ranges);
/// pad's border and masked lookups get the `value` attribute (0).
static llvm::Error runCopy(const Prepared &p) {
  bool lookup = p.c.kind() == "gather";
  // Pad and gather read data from operand 0 only; the rest are indices or
  // pad amounts.
  size_t sources = lookup || p.c.kind() == "pad"
                       ? std::min<size_t>(1, p.ins.size())
                       : p.ins.size();
  double fill = 0;
  for (const plan::Attr &a : p.c.attrs())
    if (a.name() == "value")
      fill = a.has_f() ? a.f() : double(a.i());
  const IterationSpace &s = p.space;
  bool sameDType = llvm::all_of(
      p.outs, [&](const Tensor *t) { return t->dtype == p.ins[0]->dtype; });
  if (!lookup && sources == 1 && s.inner.empty() && !s.outer.empty() &&
      sameDType && allLinear(p)) {
    if (!copyTransposed(p))
      copyRuns(p);
    return llvm::Error::success();
  }
  if (!lookup && sameDType && copyBoxes(p, sources, fill))
    return llvm::Error::success();
  unsigned tuple = lookup ? std::max(1u, p.inMaps[0].lookupCount()) : 0;
  // An index outside the whole table is bad input (a split table masks the
  // rows other devices hold, but no device holds these).
  BadIndex bad;
  if (!(lookup && gatherRows(p, fill, bad)))
    copyPoints(p, sources, tuple, fill, bad);
  if (bad.first)
    return computeError(p.c,
                        llvm::formatv("index {0} is out of range for a "
                                      "dim of {1} (valid: [-{1}, {1}))",
                                      bad.first->first, bad.first->second));
  return llvm::Error::success();
}

/// scatter_add: the result is zero but where a point's index names a row
/// this device holds (or, without indices, where its affine map reaches
/// inside); there, the point's value is added, points in order (so the
/// sums do not depend on threads).
static llvm::Error runScatterAdd(const Prepared &p) {
  Tensor &out = *p.outs[0];
  std::fill(out.data.begin(), out.data.end(), uint8_t(0));
  const IterationSpace &s = p.space;
  bool indexed = p.ins.size() == 2;
  unsigned tuple = indexed ? std::max(1u, p.outMaps[0].lookupCount()) : 0;
  llvm::SmallVector<int64_t, 4> lookupValues(tuple, 0);
  llvm::SmallVector<int64_t, 8> point(s.extents.size(), 0);
  for (int64_t flat = 0; flat < s.outerPoints; ++flat) {
    s.setOuter(flat, point);
    do {
      int64_t i = p.inMaps[0].index(point);
      if (i < 0)
        continue;
      if (!indexed) {
        int64_t o = p.outMaps[0].index(point);
        if (o >= 0)
          out.setReal(o, out.real(o) + p.ins[0]->real(i));
        continue;
      }
      int64_t j = p.inMaps[1].index(point);
      if (j < 0)
        continue;
      for (unsigned t = 0; t < tuple; ++t)
        lookupValues[t] = p.ins[1]->integer(j + t);
      if (auto bad = p.outMaps[0].lookupOutOfRange(lookupValues))
        return computeError(
            p.c, llvm::formatv("index {0} is out of range for a dim of {1} "
                               "(valid: [-{1}, {1}))",
                               bad->first, bad->second));
      int64_t o = p.outMaps[0].index(point, lookupValues);
      if (o >= 0)
        out.setReal(o, out.real(o) + p.ins[0]->real(i));
    } while (s.nextInner(point));
  }
  return llvm::Error::success();
}

/// random_uniform: each point's value is low + (high - low) * u, u in [0, 1)
/// from 53 bits of the xxh3 hash of (seed, key, step, the point's index in
/// the whole result), so the blocks of a split result hold the numbers of
/// the unsplit one.
static llvm::Error runRandomUniform(const Prepared &p) {
  if (p.ins.size() != 1 || p.outs.size() != 1 || p.ins[0]->numel() != 1)
    return computeError(p.c, "takes the step (one integer) and has one "
                             "result");
  uint64_t words[4] = {uint64_t(attrInt(p.c, "seed", 0)),
                       uint64_t(attrInt(p.c, "key", 0)),
                       uint64_t(p.ins[0]->integer(0)), 0};
  double low = attrReal(p.c, "low", 0), high = attrReal(p.c, "high", 1);
  const IterationSpace &s = p.space;
  Tensor &out = *p.outs[0];
  forEachOuter(s, [&](llvm::MutableArrayRef<int64_t> point) {
    llvm::SmallVector<int64_t, 8> at(point.begin(), point.end());
    do {
      uint64_t flat = 0;
      for (size_t d = 0; d < at.size(); ++d)
        flat = flat * uint64_t(s.globalExtents[d]) +
               uint64_t(at[d] + s.globalOffsets[d]);
      double u = uniformAt(words[0], words[1], words[2], flat);
      int64_t o = p.outMaps[0].index(at);
      if (o >= 0)
        out.setReal(o, low + (high - low) * u);
    } while (s.nextInner(at));
  });
  return llvm::Error::success();
}

/// The data-movement kinds runCopy handles.
static bool isCopyKind(llvm::StringRef kind) {
  return llvm::StringSwitch<bool>(kind)
      .Cases("reshape", "transpose", "concat", "split", "slice", true)
      .Cases("expand", "pad", "tile", "gather", true)
      .Default(false);
}

} // namespace cpu

bool genericHasKernel(llvm::StringRef kind) {
  using namespace cpu;
  return parseScalarOp(kind) || parseReduceOp(kind) || isCopyKind(kind) ||
         kind == "scatter_add" || kind == "random_uniform";
}

llvm::Error runGeneric(const plan::Compute &c,
                       llvm::ArrayRef<const Tensor *> inputs,
                       llvm::ArrayRef<Tensor *> outputs) {
  using namespace cpu;
  std::optional<ScalarOp> scalar = parseScalarOp(c.kind());
  std::optional<ReduceOp> reduce = parseReduceOp(c.kind());
  bool scatter = c.kind() == "scatter_add";
  bool random = c.kind() == "random_uniform";
  if (!scalar && !reduce && !isCopyKind(c.kind()) && !scatter && !random)
    return computeError(c, "no generic cpu kernel for kind '" + c.kind() + "'");
  auto p = prepare(c, inputs, outputs);
  if (!p)
    return p.takeError();
  if (scatter)
    return runCol2ImF32(*p) ? llvm::Error::success() : runScatterAdd(*p);
  if (random)
    return runRandomUniform(*p);
  if (scalar) {
    if (outputs.empty())
      return computeError(c, "has no outputs");
    return runElementwise(*p, *scalar);
  }
  if (reduce)
    return runReduction(*p, *reduce);
  return runCopy(*p);
}

} // namespace pax::runtime
