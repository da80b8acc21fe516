//===- Kernels.cpp - Contraction, window and normalization CPU kernels ----===//
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/Widen.h"

#include "codegen/plan/Kernels.h"

#include "runtime/cpu/Attention.h"
#include "runtime/cpu/DnnlMatmul.h"
#include "runtime/cpu/Gemm.h"
#include "runtime/cpu/GenericKernel.h"
#include "runtime/cpu/KernelContext.h"
#include "runtime/cpu/Matmul.h"
#include "runtime/cpu/Pointwise.h"
#include "runtime/cpu/Recurrent.h"
#include "runtime/cpu/Rows.h"
#include "runtime/cpu/Scan.h"
#include "runtime/cpu/Window2D.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSwitch.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <optional>
#include <vector>

namespace pax::runtime {
namespace cpu {
namespace {

/// The kinds with a specific kernel.
enum class Kernel {
  MatMul,
  Gemm,
  Conv,
  MaxPool,
  AveragePool,
  Lrn,
  BatchNorm,
  InstanceNorm,
  LayerNorm,
  RmsNorm,
  Softmax,
  LogSoftmax,
};

std::optional<Kernel> parseKernel(llvm::StringRef kind) {
  return llvm::StringSwitch<std::optional<Kernel>>(kind)
      .Case("matmul", Kernel::MatMul)
      .Case("gemm", Kernel::Gemm)
      .Case("conv", Kernel::Conv)
      .Case("max_pool", Kernel::MaxPool)
      .Case("average_pool", Kernel::AveragePool)
      .Case("lrn", Kernel::Lrn)
      .Case("batch_norm", Kernel::BatchNorm)
      .Case("instance_norm", Kernel::InstanceNorm)
      .Case("layer_norm", Kernel::LayerNorm)
      .Case("rms_norm", Kernel::RmsNorm)
      .Case("softmax", Kernel::Softmax)
      .Case("log_softmax", Kernel::LogSoftmax)
      .Default(std::nullopt);
}

/// The fewest and most inputs each kernel takes.
std::pair<size_t, size_t> inputCounts(Kernel k) {
  switch (k) {
  case Kernel::MatMul:
    return {2, 2};
  case Kernel::Gemm:
  case Kernel::Conv:
    return {2, 3};
  case Kernel::BatchNorm:
    return {5, 5};
  case Kernel::InstanceNorm:
    return {3, 3};
  case Kernel::LayerNorm:
    return {1, 3};
  case Kernel::RmsNorm:
    return {1, 2};
  default:
    return {1, 1};
  }
}

/// Input \p k at \p point; \p inside is false (and the value 0) where the
/// map falls outside the tensor.
double readIn(const Prepared &p, size_t k, llvm::ArrayRef<int64_t> point,
              bool *inside = nullptr) {
  int64_t i = p.inMaps[k].index(point);
  if (inside)
    *inside = i >= 0;
  return i >= 0 ? p.ins[k]->real(i) : 0.0;
}

/// Stores \p v at \p point of output 0 (nothing where the map is outside).
void writeOut(const Prepared &p, llvm::ArrayRef<int64_t> point, double v) {
  int64_t o = p.outMaps[0].index(point);
  if (o >= 0)
    p.outs[0]->setReal(o, v);
}

/// Calls \p fn at each inner point of \p point in order; \p point's inner
/// dims are zero again afterwards.
template <typename Fn>
void forEachInner(const IterationSpace &s, llvm::MutableArrayRef<int64_t> point,
                  Fn fn) {
  if (s.innerPoints <= 0)
    return;
  do
    fn();
  while (s.nextInner(point));
}

//===----------------------------------------------------------------------===//
// Contractions: matmul, gemm, conv.
//===----------------------------------------------------------------------===//

/// Matmul and gemm over typed rows when every map is linear and all tensors
/// are \p T: each run of outputs along the last outer dim accumulates in
/// k order, one contiguous row of B at a time when B's rows are.
template <typename T>
void contractRuns(const Prepared &p, double alpha, double beta) {
  const IterationSpace &s = p.space;
  unsigned last = s.outer.back(), kd = s.inner[0];
  int64_t kExtent = s.extents[kd];
  const T *a = reinterpret_cast<const T *>(p.ins[0]->data.data());
  const T *b = reinterpret_cast<const T *>(p.ins[1]->data.data());
  const T *cIn = p.ins.size() > 2
                     ? reinterpret_cast<const T *>(p.ins[2]->data.data())
                     : nullptr;
  T *y = reinterpret_cast<T *>(p.outs[0]->data.data());
  const AccessIndexer &ma = p.inMaps[0], &mb = p.inMaps[1], &my = p.outMaps[0];
  int64_t sak = ma.step(kd), san = ma.step(last);
  int64_t sbk = mb.step(kd), sbn = mb.step(last);
  int64_t syn = my.step(last);
  forEachOuterRun(s, [&](llvm::MutableArrayRef<int64_t> point, int64_t count) {
    std::vector<T> acc(size_t(count), T(0));
    int64_t ia = ma.index(point), ib = mb.index(point);
    for (int64_t k = 0; k < kExtent; ++k) {
      const T *arow = a + ia + k * sak;
      const T *brow = b + ib + k * sbk;
      if (san == 0 && sbn == 1) {
        T av = *arow;
        for (int64_t j = 0; j < count; ++j)
          acc[j] += av * brow[j];
      } else {
        for (int64_t j = 0; j < count; ++j)
          acc[j] += arow[j * san] * brow[j * sbn];
      }
    }
    int64_t iy = my.index(point);
    int64_t ic = cIn ? p.inMaps[2].index(point) : 0;
    int64_t scn = cIn ? p.inMaps[2].step(last) : 0;
    for (int64_t j = 0; j < count; ++j) {
      double v = alpha * double(acc[j]);
      if (cIn)
        v += beta * double(cIn[ic + j * scn]);
      y[iy + j * syn] = T(v);
    }
  });
}

/// Sum over the inner dims of input 0 times input 1 (a point outside either
/// tensor, as in conv's padding, adds nothing), scaled by gemm's alpha; gemm
/// adds beta times C, conv adds the bias.
llvm::Error runContraction(const Prepared &p, Kernel k, DnnlCache *primitives) {
  double alpha = k == Kernel::Gemm ? attrReal(p.c, "alpha", 1.0) : 1.0;
  double beta = k == Kernel::Gemm ? attrReal(p.c, "beta", 1.0) : 1.0;
  const IterationSpace &s = p.space;
  plan::DType dt = p.outs[0]->dtype;
  bool sameType =
      llvm::all_of(p.ins, [&](const Tensor *t) { return t->dtype == dt; });
  bool linear =
      llvm::all_of(p.inMaps, [](const auto &m) { return m.isLinear(); }) &&
      p.outMaps[0].isLinear();
  if (k == Kernel::Conv &&
      runConv2DF32(p, attrInt(p.c, "group", 1), primitives))
    return llvm::Error::success();
  if (k == Kernel::MatMul && runConvWeightGrad2DF32(p))
    return llvm::Error::success();
  if (k != Kernel::Conv) {
    if (std::optional<MatmulDims> d = matchMatmul(p)) {
      if (!runMatmulDnnl(p, *d, float(alpha), float(beta), primitives))
        runMatmulF32(p, *d, float(alpha), float(beta));
      return llvm::Error::success();
    }
  }
  if (k != Kernel::Conv && sameType && linear && s.inner.size() == 1 &&
      !s.outer.empty() && (dt == plan::F32 || dt == plan::F64)) {
    if (dt == plan::F32)
      contractRuns<float>(p, alpha, beta);
    else
      contractRuns<double>(p, alpha, beta);
    return llvm::Error::success();
  }
  bool extra = p.ins.size() > 2;
  forEachOuter(s, [&](llvm::MutableArrayRef<int64_t> point) {
    double acc = 0;
    forEachInner(s, point, [&] {
      int64_t ia = p.inMaps[0].index(point), ib = p.inMaps[1].index(point);
      if (ia >= 0 && ib >= 0)
        acc += p.ins[0]->real(ia) * p.ins[1]->real(ib);
    });
    double v = alpha * acc;
    if (extra)
      v += beta * readIn(p, 2, point);
    writeOut(p, point, v);
  });
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Windows: max_pool, average_pool, lrn.
//===----------------------------------------------------------------------===//

/// Max or average over the window; padding is skipped by max and counted by
/// average only with count_include_pad.
llvm::Error runPool(const Prepared &p, bool isMax) {
  if (isMax ? runMaxPool2DF32(p) : runAveragePool2DF32(p))
    return llvm::Error::success();
  bool includePad = !isMax && attrInt(p.c, "count_include_pad", 0) != 0;
  PaddedWindow window;
  if (auto err = paddedWindow(p.c, p.ins[0]->shape, window))
    return err;
  const IterationSpace &s = p.space;
  forEachOuter(s, [&](llvm::MutableArrayRef<int64_t> point) {
    double best = -std::numeric_limits<double>::infinity(), sum = 0;
    int64_t count = 0, padded = 0;
    forEachInner(s, point, [&] {
      int64_t i = p.inMaps[0].index(point);
      if (i >= 0) {
        double v = p.ins[0]->real(i);
        best = std::isnan(v) || v > best ? v : best;
        sum += v;
        ++count;
      }
      if (includePad && insidePadded(window, point.data()))
        ++padded;
    });
    double v;
    if (isMax)
      v = count ? best : std::numeric_limits<double>::quiet_NaN();
    else
      v = sum / double(includePad ? padded : count);
    writeOut(p, point, v);
  });
  return llvm::Error::success();
}

/// Local response normalization across channels: x / (bias + alpha / size *
/// sum of squares over the window) ^ beta.
llvm::Error runLrn(const Prepared &p) {
  double size = double(attrInt(p.c, "size", 1));
  double alpha = attrReal(p.c, "alpha", 1e-4),
         beta = attrReal(p.c, "beta", 0.75);
  double bias = attrReal(p.c, "bias", 1.0);
  // The window's step (size-1)/2 reads the output's own channel (the
  // input may be a block with halo channels, so not at the output's index).
  int64_t center = (int64_t(size) - 1) / 2;
  const IterationSpace &s = p.space;
  forEachOuter(s, [&](llvm::MutableArrayRef<int64_t> point) {
    double sum = 0, x = 0;
    int64_t step = 0;
    forEachInner(s, point, [&] {
      double v = readIn(p, 0, point);
      if (step++ == center)
        x = v;
      sum += v * v;
    });
    int64_t o = p.outMaps[0].index(point);
    if (o >= 0)
      p.outs[0]->setReal(o, x / std::pow(bias + alpha / size * sum, beta));
  });
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Normalizations and softmax.
//===----------------------------------------------------------------------===//

/// Inference batch norm: (x - mean) / sqrt(var + epsilon) * scale + bias.
llvm::Error runBatchNorm(const Prepared &p) {
  double eps = attrReal(p.c, "epsilon", 1e-5);
  if (runBatchNormF32(p, eps))
    return llvm::Error::success();
  const IterationSpace &s = p.space;
  forEachOuter(s, [&](llvm::MutableArrayRef<int64_t> point) {
    forEachInner(s, point, [&] {
      double x = readIn(p, 0, point), scale = readIn(p, 1, point);
      double bias = readIn(p, 2, point), mean = readIn(p, 3, point);
      double var = readIn(p, 4, point);
      writeOut(p, point, (x - mean) / std::sqrt(var + eps) * scale + bias);
    });
  });
  return llvm::Error::success();
}

/// Instance, layer and RMS norm: statistics over the inner dims of each
/// outer point, then every inner point normalized, scaled and shifted.
llvm::Error runNorm(const Prepared &p, Kernel k) {
  double eps = attrReal(p.c, "epsilon", 1e-5);
  RowOp op = k == Kernel::LayerNorm ? RowOp::LayerNorm
             : k == Kernel::RmsNorm ? RowOp::RmsNorm
                                    : RowOp::InstanceNorm;
  if (runRowsF32(p, op, eps))
    return llvm::Error::success();
  const IterationSpace &s = p.space;
  bool rms = k == Kernel::RmsNorm;
  bool hasScale = p.ins.size() > 1, hasBias = p.ins.size() > 2;
  double n = double(std::max<int64_t>(1, s.innerPoints));
  forEachOuter(s, [&](llvm::MutableArrayRef<int64_t> point) {
    double mean = 0, var = 0;
    if (!rms) {
      forEachInner(s, point, [&] { mean += readIn(p, 0, point); });
      mean /= n;
    }
    forEachInner(s, point, [&] {
      double d = readIn(p, 0, point) - mean;
      var += d * d;
    });
    double inv = 1.0 / std::sqrt(var / n + eps);
    forEachInner(s, point, [&] {
      double y = (readIn(p, 0, point) - mean) * inv;
      if (hasScale)
        y *= readIn(p, 1, point);
      if (hasBias)
        y += readIn(p, 2, point);
      writeOut(p, point, y);
    });
  });
  return llvm::Error::success();
}

/// Softmax and log-softmax over the inner dims, shifted by the maximum.
llvm::Error runSoftmax(const Prepared &p, bool isLog) {
  if (runRowsF32(p, isLog ? RowOp::LogSoftmax : RowOp::Softmax, 0))
    return llvm::Error::success();
  const IterationSpace &s = p.space;
  forEachOuter(s, [&](llvm::MutableArrayRef<int64_t> point) {
    double mx = -std::numeric_limits<double>::infinity();
    forEachInner(s, point, [&] { mx = std::max(mx, readIn(p, 0, point)); });
    double sum = 0;
    forEachInner(s, point, [&] { sum += std::exp(readIn(p, 0, point) - mx); });
    double logSum = std::log(sum);
    forEachInner(s, point, [&] {
      double d = readIn(p, 0, point) - mx;
      writeOut(p, point, isLog ? d - logSum : std::exp(d) / sum);
    });
  });
  return llvm::Error::success();
}

/// Elementwise kinds on their f32 fast path when it applies; every other
/// kind, and every case the fast path leaves, on the generic kernel.
llvm::Error runPointwise(const plan::Compute &c,
                         llvm::ArrayRef<const Tensor *> inputs,
                         llvm::ArrayRef<Tensor *> outputs) {
  if (std::optional<ScalarOp> op = parseScalarOp(c.kind())) {
    auto p = prepare(c, inputs, outputs);
    if (!p)
      llvm::consumeError(p.takeError()); // runGeneric reports it
    else if (runElementwiseF32(*p, *op, scalarParams(*op, c)))
      return llvm::Error::success();
  }
  return runGeneric(c, inputs, outputs);
}

/// An error when kernel \p k does not take \p inputs inputs and one
/// output (\p outputs).
llvm::Error checkOperandCounts(const plan::Compute &c, Kernel k, size_t inputs,
                               size_t outputs) {
  auto [lo, hi] = inputCounts(k);
  if (inputs < lo || inputs > hi || outputs != 1)
    return computeError(
        c, "takes " + llvm::Twine(lo) + " to " + llvm::Twine(hi) +
               " inputs and one output, was given " + llvm::Twine(inputs) +
               " and " + llvm::Twine(outputs));
  return llvm::Error::success();
}

/// The kinds with a specific kernel (Kernel): checks the operand counts,
/// prepares the compute and runs the kernel its kind names.
llvm::Error runSpecificKernel(const plan::Compute &c,
                              llvm::ArrayRef<const Tensor *> inputs,
                              llvm::ArrayRef<Tensor *> outputs,
                              DnnlCache *primitives) {
  std::optional<Kernel> k = parseKernel(c.kind());
  if (!k)
    return computeError(c, "no cpu kernel for kind '" + c.kind() + "'");
  if (llvm::Error err =
          checkOperandCounts(c, *k, inputs.size(), outputs.size()))
    return err;
  auto p = prepare(c, inputs, outputs);
  if (!p)
    return p.takeError();
  switch (*k) {
  case Kernel::MatMul:
  case Kernel::Gemm:
  case Kernel::Conv:
    return runContraction(*p, *k, primitives);
  case Kernel::MaxPool:
  case Kernel::AveragePool:
    return runPool(*p, *k == Kernel::MaxPool);
  case Kernel::Lrn:
    return runLrn(*p);
  case Kernel::BatchNorm:
    return runBatchNorm(*p);
  case Kernel::InstanceNorm:
  case Kernel::LayerNorm:
  case Kernel::RmsNorm:
    return runNorm(*p, *k);
  case Kernel::Softmax:
  case Kernel::LogSoftmax:
    return runSoftmax(*p, *k == Kernel::LogSoftmax);
  }
  return computeError(c, "no cpu kernel for kind '" + c.kind() + "'");
}

} // namespace
} // namespace cpu

namespace {
llvm::Error dispatch(const plan::Compute &c,
                     llvm::ArrayRef<const Tensor *> inputs,
                     llvm::ArrayRef<Tensor *> outputs,
                     cpu::DnnlCache *primitives) {
  using namespace cpu;
  using plan::KernelId;
  auto id = plan::computeKernel(c);
  if (!id)
    return id.takeError();
  switch (*id) {
  case KernelId::Recurrent:
    return runRecurrent(c, *parseRecurrentCell(c.kind()), inputs, outputs);
  case KernelId::RecurrentGrad:
    return runRecurrentGrad(c, *parseRecurrentGradCell(c.kind()), inputs,
                            outputs);
  case KernelId::Attention:
    return runAttention(c, inputs, outputs);
  case KernelId::Scan:
  case KernelId::TopK: {
    auto p = prepare(c, inputs, outputs);
    if (!p)
      return p.takeError();
    return *id == KernelId::Scan ? runScan(*p) : runTopK(*p);
  }
  case KernelId::Pointwise:
    return runPointwise(c, inputs, outputs);
  case KernelId::Reduce:
  case KernelId::Copy:
  case KernelId::ScatterAdd:
  case KernelId::Random:
    return runGeneric(c, inputs, outputs);
  default:
    break;
  }
  return runSpecificKernel(c, inputs, outputs, primitives);
}
/// Whether kernel \p id runs 16-bit float tensors through f32 copies: all
/// but those that move or sum elements of any type as they are (copies,
/// scatter-adds, random numbers, reductions) and the recurrences.
bool widens(plan::KernelId id) {
  using plan::KernelId;
  return id != KernelId::Copy && id != KernelId::ScatterAdd &&
         id != KernelId::Random && id != KernelId::Reduce &&
         id != KernelId::Recurrent && id != KernelId::RecurrentGrad;
}

/// A product of bf16 (or fp16) operands, a matmul, gemm or 2-D conv, on
/// oneDNN's 16-bit primitive (fp32 accumulation), where the processor has
/// one and the maps suit it; false where it did not run.
llvm::Expected<bool> runProduct16(const plan::Compute &c, plan::KernelId id,
                                  llvm::ArrayRef<const Tensor *> inputs,
                                  llvm::ArrayRef<Tensor *> outputs,
                                  cpu::DnnlCache *primitives) {
  if (id != plan::KernelId::Gemm && id != plan::KernelId::Conv2D)
    return false;
  auto p = prepare(c, inputs, outputs);
  if (!p)
    return p.takeError();
  if (id == plan::KernelId::Conv2D)
    return cpu::runConv2D16(*p, attrInt(c, "group", 1), primitives);
  std::optional<cpu::MatmulDims> d = cpu::matchMatmul(*p, /*sixteenBit=*/true);
  bool gemm = c.kind() == "gemm";
  return d && cpu::runMatmulDnnl(
                  *p, *d, gemm ? float(attrReal(c, "alpha", 1.0)) : 1.0f,
                  gemm ? float(attrReal(c, "beta", 1.0)) : 1.0f, primitives);
}

/// dispatch, the 16-bit float tensors of a kernel that widens them in f32
/// (cpu/Widen.h).
llvm::Error dispatchWidening(const plan::Compute &c,
                             llvm::ArrayRef<const Tensor *> inputs,
                             llvm::ArrayRef<Tensor *> outputs,
                             cpu::DnnlCache *primitives) {
  if (cpu::holds16BitFloats(inputs, outputs)) {
    auto id = plan::computeKernel(c);
    if (!id)
      return id.takeError();
    auto done = runProduct16(c, *id, inputs, outputs, primitives);
    if (!done)
      return done.takeError();
    if (*done)
      return llvm::Error::success();
    if (widens(*id))
      return cpu::runWidened(inputs, outputs, primitives,
                             [&](llvm::ArrayRef<const Tensor *> ins,
                                 llvm::ArrayRef<Tensor *> outs) {
                               return dispatch(c, ins, outs, primitives);
                             });
  }
  return dispatch(c, inputs, outputs, primitives);
}
} // namespace

llvm::Error runKernel(const plan::Compute &c,
                      llvm::ArrayRef<const Tensor *> inputs,
                      llvm::ArrayRef<Tensor *> outputs) {
  return dispatchWidening(c, inputs, outputs, nullptr);
}

llvm::Error runDeviceKernel(const plan::Compute &c,
                            llvm::ArrayRef<const Tensor *> inputs,
                            llvm::ArrayRef<Tensor *> outputs,
                            cpu::DnnlCache &primitives) {
  return dispatchWidening(c, inputs, outputs, &primitives);
}

llvm::Error paddedWindow(const plan::Compute &c, llvm::ArrayRef<int64_t> shape,
                         PaddedWindow &window) {
  std::vector<int64_t> pads = attrInts(c, "pads");
  if (pads.size() % 2)
    return computeError(c, "pads has an odd number of values");
  // The trailing exprs of the input, one per padded dim.
  const plan::Access &in = c.inputs(0);
  size_t ns = pads.size() / 2;
  window.count = 0;
  for (size_t i = 0; i < ns; ++i) {
    int t = int(in.exprs_size() - ns + i);
    if (t < 0 || size_t(t) >= shape.size())
      continue;
    const plan::AccessExpr &e = in.exprs(t);
    if (e.kind() != plan::AccessExpr::AFFINE || e.dims_size() < 1)
      continue;
    if (window.count == flat::kMaxRank)
      return computeError(c, "a pool over too many dims");
    PaddedDim &d = window.dims[window.count++];
    d.dim0 = int32_t(e.dims(0));
    d.dim1 = e.dims_size() > 1 ? int32_t(e.dims(1)) : -1;
    d.stride = e.stride();
    d.dilation = e.dilation();
    d.offset = e.offset();
    d.lo = -pads[i];
    d.hi = shape[size_t(t)] + pads[i + ns];
  }
  return llvm::Error::success();
}

bool hasKernel(llvm::StringRef kind) {
  // The CPU backend runs every kernel of the registry.
  return plan::kernelForKind(kind).has_value();
}

} // namespace pax::runtime
