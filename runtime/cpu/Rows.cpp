//===- Rows.cpp - f32 fast paths of the row-wise kernels ------------------===//
#include "runtime/cpu/Rows.h"

#include "runtime/cpu/Pointwise.h"
#include "runtime/cpu/PointwiseVector.h"
#include "runtime/cpu/VectorWidth.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace pax::runtime::cpu {
namespace {

/// One row: where each map starts and how far it steps per point.
struct Row {
  const float *x;
  float *y;
  const float *scale, *bias; // null when absent
  int64_t xs, ys, ss, bs, n;
};

/// Layer, RMS and instance norm of one row, as the generic runNorm.
void normRow(const Row &r, bool rms, double eps) {
  double n = double(std::max<int64_t>(1, r.n));
  double mean = 0, var = 0;
  if (!rms) {
    for (int64_t j = 0; j < r.n; ++j)
      mean += r.x[j * r.xs];
    mean /= n;
  }
  for (int64_t j = 0; j < r.n; ++j) {
    double d = r.x[j * r.xs] - mean;
    var += d * d;
  }
  double inv = 1.0 / std::sqrt(var / n + eps);
  for (int64_t j = 0; j < r.n; ++j) {
    double v = (r.x[j * r.xs] - mean) * inv;
    if (r.scale)
      v *= r.scale[j * r.ss];
    if (r.bias)
      v += r.bias[j * r.bs];
    r.y[j * r.ys] = float(v);
  }
}

/// Softmax or log-softmax of one row: the exponentials e^(x - max) on
/// fastExp into \p e, summed in double (four partial sums, one per lane,
/// then added in lane order); y = e / sum or (x - max) - log(sum), rounded
/// once.
void softmaxRow(const Row &r, bool isLog, std::vector<float> &e) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < r.n; ++j)
    mx = std::max(mx, r.x[j * r.xs]);
  e.resize(size_t(r.n + 4));
  const float *x = r.x;
  if (r.xs != 1) {
    for (int64_t j = 0; j < r.n; ++j)
      e[size_t(j)] = r.x[j * r.xs];
    x = e.data();
  }
  double part[4] = {0, 0, 0, 0};
  int64_t j = 0, wide = r.n & ~int64_t(15);
  // Sixteen lanes where the processor has them: the same values and sums.
  if (wide && wideVectors() && expRowWide(x, wide, mx, e.data(), part))
    j = wide;
  j = expRowOf<V4>(x, j, r.n, mx, e.data(), part);
  for (; j < r.n; ++j) {
    float v = fastExp(splat(x[j] - mx))[0];
    e[size_t(j)] = v;
    part[j % 4] += v;
  }
  double sum = (part[0] + part[1]) + (part[2] + part[3]);
  if (isLog) {
    double logSum = std::log(sum);
    for (int64_t k = 0; k < r.n; ++k)
      r.y[k * r.ys] = float(double(r.x[k * r.xs] - mx) - logSum);
    return;
  }
  double inv = 1 / sum;
  for (int64_t k = 0; k < r.n; ++k)
    r.y[k * r.ys] = float(e[size_t(k)] * inv);
}

} // namespace

bool runRowsF32(const Prepared &p, RowOp op, double epsilon) {
  const IterationSpace &s = p.space;
  bool norm = op != RowOp::Softmax && op != RowOp::LogSoftmax;
  size_t extra = p.ins.size() - 1; // scale and bias
  if (p.outs.size() != 1 || s.inner.empty() || (!norm && extra > 0) ||
      extra > 2)
    return false;
  auto f32 = [](const Tensor *t) { return t->dtype == plan::F32; };
  auto linear = [](const AccessIndexer &m) { return m.isLinear(); };
  if (!llvm::all_of(p.ins, f32) || !f32(p.outs[0]) ||
      !llvm::all_of(p.inMaps, linear) || !p.outMaps[0].isLinear())
    return false;
  llvm::SmallVector<const AccessIndexer *, 4> maps{&p.inMaps[0], &p.outMaps[0]};
  for (size_t k = 1; k < p.ins.size(); ++k)
    maps.push_back(&p.inMaps[k]);
  RunPlan row = RunPlan::of(s, s.inner, maps);
  if (!row.rowDims.empty())
    return false;
  auto data = [&](size_t k) {
    return reinterpret_cast<const float *>(p.ins[k]->data.data());
  };
  float *y = reinterpret_cast<float *>(p.outs[0]->data.data());
  forEachOuter(s, [&](llvm::MutableArrayRef<int64_t> point) {
    Row r{data(0) + maps[0]->index(point),
          y + maps[1]->index(point),
          extra > 0 ? data(1) + maps[2]->index(point) : nullptr,
          extra > 1 ? data(2) + maps[3]->index(point) : nullptr,
          row.steps[0],
          row.steps[1],
          extra > 0 ? row.steps[2] : 0,
          extra > 1 ? row.steps[3] : 0,
          s.innerPoints};
    if (norm) {
      normRow(r, op == RowOp::RmsNorm, epsilon);
      return;
    }
    thread_local std::vector<float> e;
    softmaxRow(r, op == RowOp::LogSoftmax, e);
  });
  return true;
}

} // namespace pax::runtime::cpu
