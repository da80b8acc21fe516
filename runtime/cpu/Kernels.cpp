//===- Kernels.cpp - Contraction, window and normalization CPU kernels ----===//
#include "runtime/cpu/Kernels.h"

#include "runtime/cpu/GenericKernel.h"
#include "runtime/cpu/KernelContext.h"

#include "llvm/ADT/StringSwitch.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
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

const plan::Attr *findAttr(const plan::Compute &c, llvm::StringRef name) {
  for (const plan::Attr &a : c.attrs())
    if (a.name() == name)
      return &a;
  return nullptr;
}

double attrReal(const plan::Compute &c, llvm::StringRef name, double def) {
  const plan::Attr *a = findAttr(c, name);
  if (!a)
    return def;
  return a->has_f() ? double(a->f()) : a->has_i() ? double(a->i()) : def;
}

int64_t attrInt(const plan::Compute &c, llvm::StringRef name, int64_t def) {
  const plan::Attr *a = findAttr(c, name);
  return a && a->has_i() ? a->i() : def;
}

std::vector<int64_t> attrInts(const plan::Compute &c, llvm::StringRef name) {
  const plan::Attr *a = findAttr(c, name);
  if (!a || !a->has_ints())
    return {};
  return {a->ints().values().begin(), a->ints().values().end()};
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

/// The shape of a 2-D f32 NCHW conv whose maps are the standard ones built by
/// the importer: iteration space [n, (g), co, oh, ow, ci, kh, kw].
struct Conv2DShape {
  int64_t n, g, co, oh, ow, ci, kh, kw, h, w;
  int64_t sh, sw, dh, dw, ph, pw;
};

/// True when \p e is `d` (stride 1, no offset).
bool isPlainDim(const plan::AccessExpr &e, unsigned d) {
  return e.kind() == plan::AccessExpr::AFFINE && e.dims_size() == 1 &&
         e.dims(0) == d && e.stride() == 1 && e.offset() == 0;
}

/// True when \p e is the channel expr of dim \p d: `d` or the group `(g, d)`.
bool isChannel(const plan::AccessExpr &e, int g, unsigned d) {
  if (g < 0)
    return isPlainDim(e, d);
  return e.kind() == plan::AccessExpr::GROUP && e.dims_size() == 2 &&
         e.dims(0) == unsigned(g) && e.dims(1) == d;
}

/// The shape of \p p when it is a conv the im2col path handles.
std::optional<Conv2DShape> matchConv2D(const Prepared &p) {
  const plan::Compute &c = p.c;
  if (p.outs[0]->dtype != plan::F32 ||
      !llvm::all_of(p.ins,
                    [](const Tensor *t) {
                      return t->dtype == plan::F32 &&
                             int64_t(t->data.size()) == t->bytes();
                    }) ||
      int64_t(p.outs[0]->data.size()) != p.outs[0]->bytes())
    return std::nullopt;
  bool grouped = attrInt(c, "group", 1) > 1;
  int nIters = grouped ? 8 : 7;
  if (c.iters_size() != nIters || c.inputs_size() != int(p.ins.size()) ||
      c.outputs_size() != 1)
    return std::nullopt;
  int g = grouped ? 1 : -1;
  unsigned dn = 0, dco = grouped ? 2 : 1, doh = dco + 1, dow = dco + 2,
           dci = dco + 3, dkh = dco + 4, dkw = dco + 5;
  const plan::Access &xa = c.inputs(0), &wa = c.inputs(1), &ya = c.outputs(0);
  const Tensor &x = *p.ins[0], &w = *p.ins[1], &y = *p.outs[0];
  if (x.shape.size() != 4 || w.shape.size() != 4 || y.shape.size() != 4 ||
      xa.exprs_size() != 4 || wa.exprs_size() != 4 || ya.exprs_size() != 4)
    return std::nullopt;
  if (!isPlainDim(xa.exprs(0), dn) || !isChannel(xa.exprs(1), g, dci) ||
      !isChannel(wa.exprs(0), g, dco) || !isPlainDim(wa.exprs(1), dci) ||
      !isPlainDim(wa.exprs(2), dkh) || !isPlainDim(wa.exprs(3), dkw) ||
      !isPlainDim(ya.exprs(0), dn) || !isChannel(ya.exprs(1), g, dco) ||
      !isPlainDim(ya.exprs(2), doh) || !isPlainDim(ya.exprs(3), dow))
    return std::nullopt;
  auto isWindow = [](const plan::AccessExpr &e, unsigned o, unsigned k) {
    return e.kind() == plan::AccessExpr::AFFINE && e.dims_size() == 2 &&
           e.dims(0) == o && e.dims(1) == k && e.stride() >= 1 &&
           e.dilation() >= 1 && e.offset() <= 0;
  };
  if (!isWindow(xa.exprs(2), doh, dkh) || !isWindow(xa.exprs(3), dow, dkw))
    return std::nullopt;
  if (p.ins.size() > 2) {
    const plan::Access &ba = c.inputs(2);
    if (ba.exprs_size() != 1 || p.ins[2]->shape.size() != 1 ||
        !isChannel(ba.exprs(0), g, dco))
      return std::nullopt;
  }
  auto ext = [&](unsigned d) { return int64_t(c.iters(int(d)).extent()); };
  Conv2DShape s;
  s.n = ext(dn);
  s.g = grouped ? ext(1) : 1;
  s.co = ext(dco);
  s.oh = ext(doh);
  s.ow = ext(dow);
  s.ci = ext(dci);
  s.kh = ext(dkh);
  s.kw = ext(dkw);
  s.h = x.shape[2];
  s.w = x.shape[3];
  s.sh = xa.exprs(2).stride();
  s.sw = xa.exprs(3).stride();
  s.dh = xa.exprs(2).dilation();
  s.dw = xa.exprs(3).dilation();
  s.ph = -xa.exprs(2).offset();
  s.pw = -xa.exprs(3).offset();
  if (x.shape[0] != s.n || x.shape[1] != s.g * s.ci ||
      w.shape[0] != s.g * s.co || w.shape[1] != s.ci || w.shape[2] != s.kh ||
      w.shape[3] != s.kw || y.shape[0] != s.n || y.shape[1] != s.g * s.co ||
      y.shape[2] != s.oh || y.shape[3] != s.ow ||
      (p.ins.size() > 2 && p.ins[2]->shape[0] != s.g * s.co))
    return std::nullopt;
  if (s.n < 1 || s.g < 1 || s.co < 1 || s.oh < 1 || s.ow < 1 || s.ci < 1 ||
      s.kh < 1 || s.kw < 1)
    return std::nullopt;
  return s;
}

/// Output channels and output positions one GEMM tile covers.
constexpr int64_t ConvRowBlock = 4, ConvColBlock = 256;

/// Reduction steps one pass over a GEMM tile takes, so that its panel of
/// the unrolled input stays in cache.
constexpr int64_t ConvKBlock = 256;

/// Four floats, for the micro-kernel's registers.
typedef float ConvVec __attribute__((vector_size(16)));

ConvVec loadVec(const float *p) {
  ConvVec v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

void storeVec(float *p, ConvVec v) { std::memcpy(p, &v, sizeof(v)); }

/// Adds the products of \p kn rows of packed weights \p wp and \p kn rows
/// of 8 columns of \p b (rows \p ld apart) to columns [j, j + 8) of \p acc,
/// in k order, holding the 4 x 8 sums in registers.
void convMicroTile(const float *b, int64_t ld, int64_t kn,
                   const float (*wp)[ConvRowBlock], float (*acc)[ConvColBlock],
                   int64_t j) {
  ConvVec c[ConvRowBlock][2];
  for (int64_t i = 0; i < ConvRowBlock; ++i) {
    c[i][0] = loadVec(acc[i] + j);
    c[i][1] = loadVec(acc[i] + j + 4);
  }
  for (int64_t k = 0; k < kn; ++k) {
    ConvVec b0 = loadVec(b + k * ld), b1 = loadVec(b + k * ld + 4);
    for (int64_t i = 0; i < ConvRowBlock; ++i) {
      float a = wp[k][i];
      ConvVec av = {a, a, a, a};
      c[i][0] += av * b0;
      c[i][1] += av * b1;
    }
  }
  for (int64_t i = 0; i < ConvRowBlock; ++i) {
    storeVec(acc[i] + j, c[i][0]);
    storeVec(acc[i] + j + 4, c[i][1]);
  }
}

/// 2-D f32 conv as im2col plus GEMM: for each image and group the input
/// windows are unrolled into a [ci*kh*kw, oh*ow] buffer (zeros for padding),
/// then tiles of [ConvRowBlock output channels, ConvColBlock positions] run in
/// parallel, each output summing over ci, kh, kw in that order.
void runConv2DF32(const Prepared &p, const Conv2DShape &s) {
  const float *x = reinterpret_cast<const float *>(p.ins[0]->data.data());
  const float *wt = reinterpret_cast<const float *>(p.ins[1]->data.data());
  const float *bias =
      p.ins.size() > 2 ? reinterpret_cast<const float *>(p.ins[2]->data.data())
                       : nullptr;
  float *y = reinterpret_cast<float *>(p.outs[0]->data.data());
  int64_t kk = s.ci * s.kh * s.kw, np = s.oh * s.ow;
  bool direct = s.kh == 1 && s.kw == 1 && s.sh == 1 && s.sw == 1 && s.ph == 0 &&
                s.pw == 0 && s.oh == s.h && s.ow == s.w;
  std::vector<float> col(direct ? 0 : size_t(kk * np));
  int64_t rowBlocks = (s.co + ConvRowBlock - 1) / ConvRowBlock;
  int64_t colBlocks = (np + ConvColBlock - 1) / ConvColBlock;
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t g = 0; g < s.g; ++g) {
      const float *xg = x + (n * s.g + g) * s.ci * s.h * s.w;
      const float *src = xg;
      if (!direct) {
        tbb::parallel_for(int64_t(0), kk, [&](int64_t r) {
          int64_t ci = r / (s.kh * s.kw), k = r % (s.kh * s.kw);
          int64_t kh = k / s.kw, kw = k % s.kw;
          const float *plane = xg + ci * s.h * s.w;
          float *dst = col.data() + r * np;
          for (int64_t oh = 0; oh < s.oh; ++oh) {
            int64_t ih = oh * s.sh + kh * s.dh - s.ph;
            float *row = dst + oh * s.ow;
            if (ih < 0 || ih >= s.h) {
              std::fill(row, row + s.ow, 0.0f);
              continue;
            }
            const float *in = plane + ih * s.w;
            for (int64_t ow = 0; ow < s.ow; ++ow) {
              int64_t iw = ow * s.sw + kw * s.dw - s.pw;
              row[ow] = iw >= 0 && iw < s.w ? in[iw] : 0.0f;
            }
          }
        });
        src = col.data();
      }
      const float *wg = wt + g * s.co * kk;
      float *yg = y + (n * s.g + g) * s.co * np;
      tbb::parallel_for(int64_t(0), rowBlocks * colBlocks, [&](int64_t t) {
        int64_t r0 = (t / colBlocks) * ConvRowBlock;
        int64_t c0 = (t % colBlocks) * ConvColBlock;
        int64_t rows = std::min(ConvRowBlock, s.co - r0);
        int64_t cols = std::min(ConvColBlock, np - c0);
        alignas(64) float acc[ConvRowBlock][ConvColBlock] = {};
        alignas(64) float wp[ConvKBlock][ConvRowBlock];
        const float *w0 = wg + r0 * kk;
        for (int64_t k0 = 0; k0 < kk; k0 += ConvKBlock) {
          int64_t kn = std::min(ConvKBlock, kk - k0);
          for (int64_t k = 0; k < kn; ++k)
            for (int64_t i = 0; i < ConvRowBlock; ++i)
              wp[k][i] = i < rows ? w0[i * kk + k0 + k] : 0.0f;
          const float *panel = src + k0 * np + c0;
          int64_t j = 0;
          for (; j + 8 <= cols; j += 8)
            convMicroTile(panel + j, np, kn, wp, acc, j);
          for (; j < cols; ++j)
            for (int64_t k = 0; k < kn; ++k) {
              float bv = panel[k * np + j];
              for (int64_t i = 0; i < ConvRowBlock; ++i)
                acc[i][j] += wp[k][i] * bv;
            }
        }
        for (int64_t i = 0; i < rows; ++i) {
          float bv = bias ? bias[g * s.co + r0 + i] : 0.0f;
          float *out = yg + (r0 + i) * np + c0;
          for (int64_t j = 0; j < cols; ++j)
            out[j] = acc[i][j] + bv;
        }
      });
    }
}

/// Sum over the inner dims of input 0 times input 1 (a point outside either
/// tensor, as in conv's padding, adds nothing), scaled by gemm's alpha; gemm
/// adds beta times C, conv adds the bias.
llvm::Error runContraction(const Prepared &p, Kernel k) {
  double alpha = k == Kernel::Gemm ? attrReal(p.c, "alpha", 1.0) : 1.0;
  double beta = k == Kernel::Gemm ? attrReal(p.c, "beta", 1.0) : 1.0;
  const IterationSpace &s = p.space;
  plan::DType dt = p.outs[0]->dtype;
  bool sameType =
      llvm::all_of(p.ins, [&](const Tensor *t) { return t->dtype == dt; });
  bool linear =
      llvm::all_of(p.inMaps, [](const auto &m) { return m.isLinear(); }) &&
      p.outMaps[0].isLinear();
  if (k == Kernel::Conv) {
    if (std::optional<Conv2DShape> cs = matchConv2D(p)) {
      runConv2DF32(p, *cs);
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

/// True when the window position of \p point lies inside the padded input:
/// each spatial expr of input 0 (`s*o + d*k - pad`) within
/// [-padBegin, size + padEnd).
bool insidePadded(const Prepared &p, llvm::ArrayRef<int64_t> pads,
                  llvm::ArrayRef<int64_t> point) {
  const plan::Access &in = p.c.inputs(0);
  size_t ns = pads.size() / 2;
  for (size_t i = 0; i < ns; ++i) {
    int t = int(in.exprs_size() - ns + i);
    if (t < 0)
      continue;
    const plan::AccessExpr &e = in.exprs(t);
    if (e.kind() != plan::AccessExpr::AFFINE || e.dims_size() < 1)
      continue;
    int64_t at = e.stride() * point[e.dims(0)] + e.offset();
    if (e.dims_size() > 1)
      at += e.dilation() * point[e.dims(1)];
    if (at < -pads[i] || at >= p.ins[0]->shape[t] + pads[i + ns])
      return false;
  }
  return true;
}

/// Max or average over the window; padding is skipped by max and counted by
/// average only with count_include_pad.
llvm::Error runPool(const Prepared &p, bool isMax) {
  bool includePad = !isMax && attrInt(p.c, "count_include_pad", 0) != 0;
  std::vector<int64_t> pads = attrInts(p.c, "pads");
  if (pads.size() % 2)
    return computeError(p.c, "pads has an odd number of values");
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
      if (includePad && insidePadded(p, pads, point))
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
  if (p.ins[0]->shape != p.outs[0]->shape)
    return computeError(p.c, "input and output shapes differ");
  const IterationSpace &s = p.space;
  forEachOuter(s, [&](llvm::MutableArrayRef<int64_t> point) {
    double sum = 0;
    forEachInner(s, point, [&] {
      double v = readIn(p, 0, point);
      sum += v * v;
    });
    int64_t o = p.outMaps[0].index(point);
    if (o >= 0)
      p.outs[0]->setReal(o, p.ins[0]->real(o) /
                                std::pow(bias + alpha / size * sum, beta));
  });
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Normalizations and softmax.
//===----------------------------------------------------------------------===//

/// Inference batch norm: (x - mean) / sqrt(var + epsilon) * scale + bias.
llvm::Error runBatchNorm(const Prepared &p) {
  double eps = attrReal(p.c, "epsilon", 1e-5);
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

//===----------------------------------------------------------------------===//
// Recurrent: lstm.
//===----------------------------------------------------------------------===//

double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

/// One ONNX LSTM layer (gates i, o, f, c in W and R; sigmoid and tanh; no
/// clip): each (direction, batch) pair runs its time steps in order, in
/// parallel with the other pairs. Read straight from the tensors by shape,
/// since B and P are read whole (`*`).
llvm::Error runLstm(const plan::Compute &c, llvm::ArrayRef<const Tensor *> ins,
                    llvm::ArrayRef<Tensor *> outs) {
  if (findAttr(c, "activations") || findAttr(c, "activation_alpha") ||
      findAttr(c, "activation_beta"))
    return computeError(c, "custom activations are not supported");
  if (attrReal(c, "clip", 0) != 0 || attrInt(c, "input_forget", 0) != 0)
    return computeError(c, "clip and input_forget are not supported");
  if (ins.size() < 3 || outs.empty() || outs.size() > 3)
    return computeError(c, "needs X, W, R and one to three outputs");
  for (const Tensor *t : ins)
    if (!t || int64_t(t->data.size()) != t->bytes())
      return computeError(c, "an input is missing or has the wrong size");
  for (const Tensor *t : outs)
    if (!t || int64_t(t->data.size()) != t->bytes())
      return computeError(c, "an output is missing or has the wrong size");
  const Tensor &x = *ins[0], &w = *ins[1], &r = *ins[2];
  if (x.shape.size() != 3 || w.shape.size() != 3 || r.shape.size() != 3)
    return computeError(c, "x, w and r must have rank 3");
  bool batchFirst = attrInt(c, "layout", 0) != 0;
  const plan::Attr *dirAttr = findAttr(c, "direction");
  bool reverse = dirAttr && dirAttr->has_s() && dirAttr->s() == "reverse";
  int64_t dirs = w.shape[0], hs = r.shape[2], in = x.shape[2];
  int64_t steps = batchFirst ? x.shape[1] : x.shape[0];
  int64_t batch = batchFirst ? x.shape[0] : x.shape[1];
  if (w.shape[1] != 4 * hs || w.shape[2] != in || r.shape[0] != dirs ||
      r.shape[1] != 4 * hs)
    return computeError(c, "w and r do not match x and the hidden size");
  int64_t present = attrInt(c, "inputs", 0);
  const Tensor *opt[8] = {};
  size_t next = 3;
  for (int i = 3; i < 8; ++i)
    if (present & (int64_t(1) << i)) {
      if (next >= ins.size())
        return computeError(c, "the inputs attribute names more operands "
                               "than there are");
      opt[i] = ins[next++];
    }
  const Tensor *bias = opt[3], *lens = opt[4], *h0 = opt[5], *c0 = opt[6],
               *peep = opt[7];
  auto need = [&](const Tensor *t, int64_t n, const char *what) {
    return !t || t->numel() == n
               ? llvm::Error::success()
               : computeError(c, llvm::Twine(what) + " has the wrong size");
  };
  if (auto e = need(bias, dirs * 8 * hs, "b"))
    return e;
  if (auto e = need(lens, batch, "sequence_lens"))
    return e;
  if (auto e = need(h0, dirs * batch * hs, "initial_h"))
    return e;
  if (auto e = need(c0, dirs * batch * hs, "initial_c"))
    return e;
  if (auto e = need(peep, dirs * 3 * hs, "p"))
    return e;
  if (outs[0]->numel() != steps * dirs * batch * hs)
    return computeError(c, "y has the wrong size");
  for (size_t i = 1; i < outs.size(); ++i)
    if (outs[i]->numel() != dirs * batch * hs)
      return computeError(c, "y_h and y_c must hold the state");
  // State element (d, b, j) in [dirs, batch, H] or [batch, dirs, H].
  auto stateAt = [&](int64_t d, int64_t b, int64_t j) {
    return (batchFirst ? b * dirs + d : d * batch + b) * hs + j;
  };
  tbb::parallel_for(int64_t(0), dirs * batch, [&](int64_t db) {
    int64_t d = db / batch, b = db % batch;
    bool back = reverse || d == 1;
    std::vector<double> h(size_t(hs), 0.0), cell(size_t(hs), 0.0),
        gates(size_t(4 * hs));
    for (int64_t j = 0; j < hs; ++j) {
      if (h0)
        h[j] = h0->real(stateAt(d, b, j));
      if (c0)
        cell[j] = c0->real(stateAt(d, b, j));
    }
    int64_t len =
        lens ? std::clamp<int64_t>(lens->integer(b), 0, steps) : steps;
    for (int64_t step = 0; step < steps; ++step) {
      int64_t t = back ? len - 1 - step : step;
      int64_t yBase =
          (batchFirst ? (b * steps + (step < len ? t : step)) * dirs + d
                      : ((step < len ? t : step) * dirs + d) * batch + b) *
          hs;
      if (step >= len) {
        for (int64_t j = 0; j < hs; ++j)
          outs[0]->setReal(yBase + j, 0.0);
        continue;
      }
      int64_t xBase = (batchFirst ? b * steps + t : t * batch + b) * in;
      for (int64_t g = 0; g < 4 * hs; ++g) {
        double acc = 0;
        int64_t wRow = (d * 4 * hs + g) * in, rRow = (d * 4 * hs + g) * hs;
        for (int64_t k = 0; k < in; ++k)
          acc += w.real(wRow + k) * x.real(xBase + k);
        for (int64_t k = 0; k < hs; ++k)
          acc += r.real(rRow + k) * h[k];
        if (bias)
          acc +=
              bias->real(d * 8 * hs + g) + bias->real(d * 8 * hs + 4 * hs + g);
        gates[g] = acc;
      }
      for (int64_t j = 0; j < hs; ++j) {
        double pi = peep ? peep->real(d * 3 * hs + j) : 0.0;
        double po = peep ? peep->real(d * 3 * hs + hs + j) : 0.0;
        double pf = peep ? peep->real(d * 3 * hs + 2 * hs + j) : 0.0;
        double ig = sigmoid(gates[j] + pi * cell[j]);
        double fg = sigmoid(gates[2 * hs + j] + pf * cell[j]);
        double cg = std::tanh(gates[3 * hs + j]);
        cell[j] = fg * cell[j] + ig * cg;
        double og = sigmoid(gates[hs + j] + po * cell[j]);
        h[j] = og * std::tanh(cell[j]);
        outs[0]->setReal(yBase + j, h[j]);
      }
    }
    for (int64_t j = 0; j < hs; ++j) {
      if (outs.size() > 1)
        outs[1]->setReal(stateAt(d, b, j), h[j]);
      if (outs.size() > 2)
        outs[2]->setReal(stateAt(d, b, j), cell[j]);
    }
  });
  return llvm::Error::success();
}

} // namespace
} // namespace cpu

llvm::Error runKernel(const plan::Compute &c,
                      llvm::ArrayRef<const Tensor *> inputs,
                      llvm::ArrayRef<Tensor *> outputs) {
  using namespace cpu;
  if (c.kind() == "lstm")
    return runLstm(c, inputs, outputs);
  std::optional<Kernel> k = parseKernel(c.kind());
  if (!k)
    return runGeneric(c, inputs, outputs);
  auto [lo, hi] = inputCounts(*k);
  if (inputs.size() < lo || inputs.size() > hi || outputs.size() != 1)
    return computeError(c, "takes " + llvm::Twine(lo) + " to " +
                               llvm::Twine(hi) +
                               " inputs and one output, was given " +
                               llvm::Twine(inputs.size()) + " and " +
                               llvm::Twine(outputs.size()));
  auto p = prepare(c, inputs, outputs);
  if (!p)
    return p.takeError();
  switch (*k) {
  case Kernel::MatMul:
  case Kernel::Gemm:
  case Kernel::Conv:
    return runContraction(*p, *k);
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

} // namespace pax::runtime
