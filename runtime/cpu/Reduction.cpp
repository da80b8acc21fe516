//===- Reduction.cpp - Reductions of the generic kernel -------------------===//
#include "runtime/cpu/Reduction.h"

#include "llvm/ADT/StringSwitch.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

namespace pax::runtime::cpu {

std::optional<ReduceOp> parseReduceOp(llvm::StringRef kind) {
  return llvm::StringSwitch<std::optional<ReduceOp>>(kind)
      .Case("reduce_sum", ReduceOp::Sum)
      .Case("reduce_mean", ReduceOp::Mean)
      .Case("reduce_max", ReduceOp::Max)
      .Case("reduce_min", ReduceOp::Min)
      .Case("reduce_prod", ReduceOp::Prod)
      .Case("reduce_l1", ReduceOp::L1)
      .Case("reduce_l2", ReduceOp::L2)
      .Case("reduce_sum_square", ReduceOp::SumSquare)
      .Case("reduce_log_sum_exp", ReduceOp::LogSumExp)
      .Case("arg_max", ReduceOp::ArgMax)
      .Case("arg_min", ReduceOp::ArgMin)
      .Default(std::nullopt);
}

/// Reduces one outer point over the inner dims and stores the result.
template <typename T>
static void reducePoint(const Prepared &p, ReduceOp op, bool selectLast,
                        llvm::MutableArrayRef<int64_t> point) {
  Accumulator<T> a(op, selectLast);
  int64_t pos = 0;
  const Tensor &in = *p.ins[0];
  do {
    int64_t i = p.inMaps[0].index(point);
    if (i >= 0) {
      if constexpr (std::is_same_v<T, double>)
        a.add(in.real(i), pos);
      else
        a.add(in.integer(i), pos);
    }
    ++pos;
  } while (p.space.nextInner(point));
  for (size_t r = 0; r < p.outs.size(); ++r) {
    int64_t o = p.outMaps[r].index(point);
    if (o < 0)
      continue;
    if (op != ReduceOp::ArgMax && op != ReduceOp::ArgMin &&
        std::is_same_v<T, double>)
      p.outs[r]->setReal(o, a.finishReal(p.space.globalInnerPoints()));
    else
      p.outs[r]->setInteger(o, a.finishInteger(p.space.globalInnerPoints()));
  }
}

/// Outputs a column-sum task holds (its doubles stay in L1).
constexpr int64_t kColumns = 256;

/// The outer dim the input walks with step 1 while the innermost inner dim
/// is strided (a bias gradient: sums down the columns of a row-major
/// matrix), or -1.
static int columnDim(const Prepared &p) {
  const AccessIndexer &im = p.inMaps[0];
  if (p.space.inner.empty() || im.step(p.space.inner.back()) == 1)
    return -1;
  for (unsigned d : p.space.outer)
    if (im.step(d) == 1 && p.space.extents[d] >= 16)
      return int(d);
  return -1;
}

/// reduceLinearF32 where columnDim finds a dim: each task sums up to
/// kColumns outputs along it at once, reading the input row by row; each
/// output's inner points are added in the same order, so the sums are the
/// same, bit for bit.
static void reduceColumnsF32(const Prepared &p, ReduceOp op, unsigned col) {
  const IterationSpace &s = p.space;
  const float *in = reinterpret_cast<const float *>(p.ins[0]->data.data());
  float *out = reinterpret_cast<float *>(p.outs[0]->data.data());
  const AccessIndexer &im = p.inMaps[0];
  int64_t cols = s.extents[col], chunks = (cols + kColumns - 1) / kColumns;
  int64_t rest = s.outerPoints / cols;
  double count = double(std::max<int64_t>(1, s.globalInnerPoints()));
  tbb::parallel_for(int64_t(0), rest * chunks, [&](int64_t t) {
    llvm::SmallVector<int64_t, 8> point(s.extents.size(), 0);
    s.setOuter((t / chunks) * cols, point); // col is 0 there
    int64_t c0 = (t % chunks) * kColumns, n = std::min(kColumns, cols - c0);
    point[col] = c0;
    double acc[kColumns] = {};
    if (s.innerPoints > 0)
      do {
        const float *row = in + im.index(point);
        for (int64_t c = 0; c < n; ++c)
          acc[c] += double(row[c]);
      } while (s.nextInner(point));
    for (int64_t c = 0; c < n; ++c) {
      point[col] = c0 + c;
      out[p.outMaps[0].index(point)] =
          float(op == ReduceOp::Mean ? acc[c] / count : acc[c]);
    }
  });
}

/// Sum and mean of f32 through linear maps: the generic walk (in double,
/// the inner points in order) on raw pointers and precomputed strides, so
/// the sums are the generic kernel's, bit for bit.
static bool reduceLinearF32(const Prepared &p, ReduceOp op) {
  if ((op != ReduceOp::Sum && op != ReduceOp::Mean) ||
      p.ins[0]->dtype != plan::F32 || p.outs.size() != 1 ||
      p.outs[0]->dtype != plan::F32 || !p.inMaps[0].isLinear() ||
      !p.outMaps[0].isLinear())
    return false;
  if (int col = columnDim(p); col >= 0) {
    reduceColumnsF32(p, op, unsigned(col));
    return true;
  }
  const IterationSpace &s = p.space;
  const float *in = reinterpret_cast<const float *>(p.ins[0]->data.data());
  float *out = reinterpret_cast<float *>(p.outs[0]->data.data());
  const AccessIndexer &im = p.inMaps[0];
  llvm::SmallVector<int64_t, 8> extents, steps;
  for (unsigned d : s.inner) {
    extents.push_back(s.extents[d]);
    steps.push_back(im.step(d));
  }
  double count = double(std::max<int64_t>(1, s.globalInnerPoints()));
  size_t depth = extents.size();
  forEachOuter(s, [&](llvm::MutableArrayRef<int64_t> point) {
    double acc = 0;
    int64_t base = im.index(point);
    if (llvm::all_of(extents, [](int64_t e) { return e > 0; })) {
      llvm::SmallVector<int64_t, 8> at(depth, 0);
      int64_t i = base;
      while (true) {
        // The innermost dim as one loop.
        int64_t last = extents[depth - 1], step = steps[depth - 1];
        for (int64_t j = 0; j < last; ++j)
          acc += double(in[i + j * step]);
        size_t k = depth - 1;
        bool done = true;
        while (k-- > 0) {
          i += steps[k];
          if (++at[k] < extents[k]) {
            done = false;
            break;
          }
          i -= steps[k] * extents[k];
          at[k] = 0;
        }
        if (done)
          break;
      }
    }
    out[p.outMaps[0].index(point)] =
        float(op == ReduceOp::Mean ? acc / count : acc);
  });
  return true;
}

llvm::Error runReduction(const Prepared &p, ReduceOp op) {
  if (p.ins.size() != 1)
    return computeError(p.c, "a reduction takes one input, has " +
                                 llvm::Twine(p.ins.size()));
  for (size_t r = 0; r < p.outMaps.size(); ++r)
    for (unsigned d : p.space.inner)
      if (p.outMaps[r].usesDim(d))
        return computeError(p.c, "output " + llvm::Twine(r) +
                                     " is indexed by reduced dim '" +
                                     p.c.iters(int(d)).name() + "'");
  bool selectLast = false;
  for (const plan::Attr &a : p.c.attrs())
    if (a.name() == "select_last_index")
      selectLast = a.i() != 0;
  if (!p.space.inner.empty() && reduceLinearF32(p, op))
    return llvm::Error::success();
  // Integers reduce exactly in int64, except where the result is not one.
  bool real = isFloatDType(p.ins[0]->dtype) || op == ReduceOp::L2 ||
              op == ReduceOp::LogSumExp;
  forEachOuter(p.space, [&](llvm::MutableArrayRef<int64_t> point) {
    if (real)
      reducePoint<double>(p, op, selectLast, point);
    else
      reducePoint<int64_t>(p, op, selectLast, point);
  });
  return llvm::Error::success();
}

} // namespace pax::runtime::cpu
