//===- Scan.cpp - Running results along a seq dim -------------------------===//
#include "runtime/cpu/Scan.h"

#include "runtime/TopKMath.h"

namespace pax::runtime::cpu {

bool isScanKind(llvm::StringRef kind) { return kind == "cum_sum"; }

template <typename T>
static void scanPoint(const Prepared &p, llvm::MutableArrayRef<int64_t> point,
                      unsigned axis, int64_t n, bool reverse, bool exclusive) {
  T acc = 0;
  for (int64_t step = 0; step < n; ++step) {
    point[axis] = reverse ? n - 1 - step : step;
    int64_t i = p.inMaps[0].index(point), o = p.outMaps[0].index(point);
    T v = 0;
    if (i >= 0) {
      if constexpr (std::is_same_v<T, double>)
        v = p.ins[0]->real(i);
      else
        v = p.ins[0]->integer(i);
    }
    if (exclusive) {
      if (o >= 0)
        p.outs[0]->setReal(o, double(acc));
      acc += v;
    } else {
      acc += v;
      if (o < 0)
        continue;
      if constexpr (std::is_same_v<T, double>)
        p.outs[0]->setReal(o, acc);
      else
        p.outs[0]->setInteger(o, acc);
    }
  }
  point[axis] = 0;
}

llvm::Error runScan(const Prepared &p) {
  if (p.ins.size() != 1 || p.outs.size() != 1)
    return computeError(p.c, "takes one input and one output");
  int axis = -1;
  for (int d = 0; d < p.c.iters_size(); ++d)
    if (p.c.iters(d).kind() == plan::IterDim::SEQ)
      axis = axis < 0 ? d : -2;
  if (axis < 0)
    return computeError(p.c, "needs exactly one seq dim to scan along");
  bool reverse = attrInt(p.c, "reverse", 0) != 0;
  bool exclusive = attrInt(p.c, "exclusive", 0) != 0;
  int64_t n = p.space.extents[unsigned(axis)];
  bool real = isFloatDType(p.ins[0]->dtype);
  forEachOuter(p.space, [&](llvm::MutableArrayRef<int64_t> point) {
    if (real)
      scanPoint<double>(p, point, unsigned(axis), n, reverse, exclusive);
    else
      scanPoint<int64_t>(p, point, unsigned(axis), n, reverse, exclusive);
  });
  return llvm::Error::success();
}

llvm::Error runTopK(const Prepared &p) {
  int kDim = p.c.iters_size() - 1;
  int64_t axis = attrInt(p.c, "axis", -1);
  if (p.ins.size() != 1 || p.outs.size() != 2 || axis < 0 || axis >= kDim ||
      p.c.iters(int(axis)).kind() != plan::IterDim::SEQ ||
      p.c.iters(kDim).kind() != plan::IterDim::SEQ)
    return computeError(p.c, "takes one input, two outputs, a seq dim `axis` "
                             "and the seq dim `k` last");
  int64_t n = p.space.extents[size_t(axis)], k = p.space.extents[size_t(kDim)];
  bool largest = attrInt(p.c, "largest", 1) != 0;
  forEachOuter(p.space, [&](llvm::MutableArrayRef<int64_t> point) {
    auto read = [&](int64_t i) {
      point[size_t(axis)] = i;
      int64_t x = p.inMaps[0].index(point);
      return x >= 0 ? p.ins[0]->real(x) : 0.0;
    };
    auto write = [&](int64_t j, double v, int64_t i) {
      point[size_t(kDim)] = j;
      if (int64_t o = p.outMaps[0].index(point); o >= 0)
        p.outs[0]->setReal(o, v);
      if (int64_t o = p.outMaps[1].index(point); o >= 0)
        p.outs[1]->setInteger(o, i);
    };
    topk::select(n, k, largest, read, write);
    point[size_t(axis)] = 0;
    point[size_t(kDim)] = 0;
  });
  return llvm::Error::success();
}

} // namespace pax::runtime::cpu
