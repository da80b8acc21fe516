//===- Pointwise.cpp - f32 fast paths of the pointwise kernels ------------===//
#include "runtime/cpu/Pointwise.h"

#include "runtime/cpu/PointwiseVector.h"
#include "runtime/cpu/VectorWidth.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace pax::runtime::cpu {
namespace {

/// Points of a run one task piece holds at most.
constexpr int64_t kPiece = 16384;
/// Points the kernels below hold in their stack buffers.
constexpr int64_t kLanes = 1024;
/// Inputs an elementwise fast path takes at most.
constexpr size_t kMaxArgs = 4;

/// \p n points of an operand stepping by \p step from \p p, contiguous:
/// the tensor itself when it is, otherwise a copy in \p buf.
const float *contiguous(const float *p, int64_t step, int64_t n, float *buf) {
  if (step == 1)
    return p;
  for (int64_t j = 0; j < n; ++j)
    buf[j] = p[j * step];
  return buf;
}

/// Stores \p n contiguous values to \p o stepping by \p step, unless they
/// are already there.
void scatter(const float *v, float *o, int64_t step, int64_t n) {
  if (v == o)
    return;
  for (int64_t j = 0; j < n; ++j)
    o[j * step] = v[j];
}

/// The vectorized ops on the widest vectors this processor has
/// (VectorWidth.h); false for the others.
bool applyVector(ScalarOp op, const ScalarParams &params,
                 llvm::ArrayRef<const float *> a, float *o, int64_t n) {
  if (wideVectors())
    return applyVectorWide(op, params, a.data(), a.size(), o, n);
  return applyVectorOf<V4>(op, params, a.data(), a.size(), o, n);
}

/// Every op, point by point through applyReal, as the generic kernel.
void applyScalar(ScalarOp op, const ScalarParams &params,
                 llvm::ArrayRef<const float *> a, float *o, int64_t n) {
  double args[kMaxArgs];
  for (int64_t j = 0; j < n; ++j) {
    for (size_t k = 0; k < a.size(); ++k)
      args[k] = a[k][j];
    o[j] = float(applyReal(op, llvm::ArrayRef(args, a.size()), params));
  }
}

} // namespace

void applyElementwise(ScalarOp op, const ScalarParams &params,
                      llvm::ArrayRef<const float *> args, float *out,
                      int64_t n) {
  if (!applyVector(op, params, args, out, n))
    applyScalar(op, params, args, out, n);
}

namespace {

/// True for the comparisons of two floats, whose results are bools.
bool comparison(ScalarOp op) {
  return op == ScalarOp::Equal || op == ScalarOp::Less ||
         op == ScalarOp::LessOrEqual || op == ScalarOp::Greater ||
         op == ScalarOp::GreaterOrEqual;
}

/// True when every tensor of \p p is f32 and every map linear; where's
/// condition (input 0) may be bool when \p op is where, and a comparison's
/// or a cast's result is bool.
bool linearF32(const Prepared &p, ScalarOp op = ScalarOp::Add) {
  auto f32 = [](const Tensor *t) { return t->dtype == plan::F32; };
  auto linear = [](const AccessIndexer &m) { return m.isLinear(); };
  bool boolCond =
      op == ScalarOp::Where && !p.ins.empty() && p.ins[0]->dtype == plan::I1;
  auto out = [&](const Tensor *t) {
    return f32(t) ||
           (t->dtype == plan::I1 && (comparison(op) || op == ScalarOp::Cast));
  };
  return llvm::all_of(p.ins.drop_front(boolCond ? 1 : 0), f32) &&
         llvm::all_of(p.outs, out) && llvm::all_of(p.inMaps, linear) &&
         llvm::all_of(p.outMaps, linear);
}

/// True when \p a and \p b index the same element at every point.
bool sameIndex(const AccessIndexer &a, const AccessIndexer &b, size_t rank) {
  llvm::SmallVector<int64_t, 8> origin(rank, 0);
  if (a.index(origin) != b.index(origin))
    return false;
  for (unsigned d = 0; d < rank; ++d)
    if (a.step(d) != b.step(d))
      return false;
  return true;
}

const float *dataF32(const Tensor *t) {
  return reinterpret_cast<const float *>(t->data.data());
}

float *dataF32(Tensor *t) { return reinterpret_cast<float *>(t->data.data()); }

} // namespace

RunPlan RunPlan::of(const IterationSpace &s, llvm::ArrayRef<unsigned> dims,
                    llvm::ArrayRef<const AccessIndexer *> maps) {
  RunPlan r;
  r.steps.assign(maps.size(), 0);
  int i = int(dims.size()) - 1;
  bool started = false;
  for (; i >= 0; --i) {
    unsigned d = dims[i];
    int64_t e = s.extents[d];
    if (e == 1)
      continue;
    if (!started) {
      for (size_t m = 0; m < maps.size(); ++m)
        r.steps[m] = maps[m]->step(d);
      r.length = e;
      started = true;
      continue;
    }
    bool even = true;
    for (size_t m = 0; m < maps.size(); ++m)
      even &= maps[m]->step(d) == r.steps[m] * r.length;
    if (!even)
      break;
    r.length *= e;
  }
  for (int j = 0; j <= i; ++j) {
    unsigned d = dims[j];
    if (s.extents[d] != 1) {
      r.rowDims.push_back(d);
      r.rows *= s.extents[d];
    }
  }
  return r;
}

void forEachRunPiece(
    const IterationSpace &s, const RunPlan &plan,
    llvm::ArrayRef<const AccessIndexer *> maps,
    llvm::function_ref<void(llvm::ArrayRef<int64_t>, int64_t)> fn) {
  if (plan.length <= 0 || plan.rows <= 0)
    return;
  int64_t perRow = (plan.length + kPiece - 1) / kPiece;
  int64_t pieceLength = (plan.length + perRow - 1) / perRow;
  int64_t grain = std::max<int64_t>(1, kPiece / pieceLength);
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, plan.rows * perRow, grain),
                    [&](const tbb::blocked_range<int64_t> &range) {
                      llvm::SmallVector<int64_t, 8> point(s.extents.size(), 0);
                      llvm::SmallVector<int64_t, 6> starts(maps.size());
                      for (int64_t t = range.begin(); t < range.end(); ++t) {
                        int64_t row = t / perRow,
                                first = (t % perRow) * pieceLength;
                        for (size_t j = plan.rowDims.size(); j-- > 0;) {
                          unsigned d = plan.rowDims[j];
                          point[d] = row % s.extents[d];
                          row /= s.extents[d];
                        }
                        for (size_t m = 0; m < maps.size(); ++m)
                          starts[m] =
                              maps[m]->index(point) + first * plan.steps[m];
                        fn(starts, std::min(pieceLength, plan.length - first));
                      }
                    });
}

bool runElementwiseF32(const Prepared &p, ScalarOp op,
                       const ScalarParams &params) {
  if (op == ScalarOp::Trilu || p.ins.empty() || p.ins.size() > kMaxArgs ||
      p.outs.size() != 1 || !p.space.inner.empty() || p.space.outer.empty() ||
      !linearF32(p, op))
    return false;
  // A bool condition is read as 0 or 1 into its float buffer.
  const uint8_t *cond =
      p.ins[0]->dtype == plan::I1
          ? reinterpret_cast<const uint8_t *>(p.ins[0]->data.data())
          : nullptr;
  llvm::SmallVector<const AccessIndexer *, 5> maps;
  for (const AccessIndexer &m : p.inMaps)
    maps.push_back(&m);
  maps.push_back(&p.outMaps[0]);
  RunPlan plan = RunPlan::of(p.space, p.space.outer, maps);
  size_t nIn = p.ins.size();
  // A comparison's bools: computed as 1.0f or 0.0f, stored as bytes.
  uint8_t *bools = p.outs[0]->dtype == plan::I1
                       ? reinterpret_cast<uint8_t *>(p.outs[0]->data.data())
                       : nullptr;
  float *out = bools ? nullptr : dataF32(p.outs[0]);
  int64_t outStep = plan.steps[nIn];
  forEachRunPiece(
      p.space, plan, maps, [&](llvm::ArrayRef<int64_t> starts, int64_t count) {
        float bufs[kMaxArgs][kLanes], obuf[kLanes];
        const float *args[kMaxArgs];
        for (int64_t j0 = 0; j0 < count; j0 += kLanes) {
          int64_t n = std::min(kLanes, count - j0);
          for (size_t k = 0; k < nIn; ++k) {
            if (k == 0 && cond) {
              const uint8_t *c = cond + starts[0] + j0 * plan.steps[0];
              for (int64_t j = 0; j < n; ++j)
                bufs[0][j] = c[j * plan.steps[0]] ? 1.0f : 0.0f;
              args[0] = bufs[0];
              continue;
            }
            const float *in =
                dataF32(p.ins[k]) + starts[k] + j0 * plan.steps[k];
            args[k] = contiguous(in, plan.steps[k], n, bufs[k]);
          }
          int64_t at = starts[nIn] + j0 * outStep;
          float *dst = !bools && outStep == 1 ? out + at : obuf;
          llvm::ArrayRef<const float *> a(args, nIn);
          if (!applyVector(op, params, a, dst, n))
            applyScalar(op, params, a, dst, n);
          if (bools)
            for (int64_t j = 0; j < n; ++j)
              bools[at + j * outStep] = dst[j] != 0.0f;
          else
            scatter(dst, out + at, outStep, n);
        }
      });
  return true;
}

bool runBatchNormF32(const Prepared &p, double epsilon) {
  if (p.ins.size() != 5 || p.outs.size() != 1 || !p.space.inner.empty() ||
      p.space.outer.empty() || !linearF32(p))
    return false;
  size_t rank = p.space.extents.size();
  for (size_t k = 2; k < 5; ++k)
    if (p.ins[k]->shape != p.ins[1]->shape ||
        !sameIndex(p.inMaps[k], p.inMaps[1], rank))
      return false;
  // Per parameter element: y = x * a + b.
  int64_t channels = p.ins[1]->numel();
  const float *scale = dataF32(p.ins[1]), *bias = dataF32(p.ins[2]);
  const float *mean = dataF32(p.ins[3]), *var = dataF32(p.ins[4]);
  std::vector<float> a(static_cast<size_t>(channels)),
      b(static_cast<size_t>(channels));
  for (int64_t i = 0; i < channels; ++i) {
    double ai = double(scale[i]) / std::sqrt(double(var[i]) + epsilon);
    a[i] = float(ai);
    b[i] = float(double(bias[i]) - double(mean[i]) * ai);
  }
  const AccessIndexer *maps[] = {&p.inMaps[0], &p.outMaps[0], &p.inMaps[1]};
  RunPlan plan = RunPlan::of(p.space, p.space.outer, maps);
  const float *x = dataF32(p.ins[0]);
  float *y = dataF32(p.outs[0]);
  forEachRunPiece(
      p.space, plan, maps, [&](llvm::ArrayRef<int64_t> starts, int64_t count) {
        float xbuf[kLanes], ybuf[kLanes];
        int64_t xs = plan.steps[0], ys = plan.steps[1], cs = plan.steps[2];
        for (int64_t j0 = 0; j0 < count; j0 += kLanes) {
          int64_t n = std::min(kLanes, count - j0);
          const float *in = contiguous(x + starts[0] + j0 * xs, xs, n, xbuf);
          float *o = y + starts[1] + j0 * ys;
          float *dst = ys == 1 ? o : ybuf;
          int64_t c = starts[2] + j0 * cs;
          if (cs == 0) {
            V4 av = splat(a[c]), bv = splat(b[c]);
            map1<V4>(in, dst, n, [&](V4 v) { return v * av + bv; });
          } else if (cs == 1) {
            // Channels innermost (channels-last): a and b step along.
            const float *ac = a.data() + c, *bc = b.data() + c;
            int64_t j = 0;
            for (; j + 4 <= n; j += 4)
              storeV4(dst + j,
                      loadV4(in + j) * loadV4(ac + j) + loadV4(bc + j));
            for (; j < n; ++j)
              dst[j] = in[j] * ac[j] + bc[j];
          } else {
            for (int64_t j = 0; j < n; ++j)
              dst[j] = in[j] * a[c + j * cs] + b[c + j * cs];
          }
          scatter(dst, o, ys, n);
        }
      });
  return true;
}

} // namespace pax::runtime::cpu
