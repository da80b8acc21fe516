//===- Window2D.cpp - f32 NCHW convolution and pooling --------------------===//
#include "runtime/cpu/Window2D.h"

#include "runtime/WindowShape.h"
#include "runtime/cpu/Gemm.h"
#include "runtime/cpu/VectorMath.h"

#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

namespace pax::runtime::cpu {
namespace {

/// A conv's input, weights, bias (or null) and output.
struct ConvData {
  const float *x, *wt, *bias;
  float *y;
};
static ConvData convData(const Prepared &p) {
  auto in = [&](size_t i) {
    return reinterpret_cast<const float *>(p.ins[i]->data.data());
  };
  return {in(0), in(1), p.ins.size() > 2 ? in(2) : nullptr,
          reinterpret_cast<float *>(p.outs[0]->data.data())};
}

/// Depthwise convolution (one input channel per group): each output plane
/// sums its window directly, over kh then kw, skipping padding.
void runDepthwise(const Prepared &p, const Window2DShape &s) {
  // Named, not bound: the lambdas below capture them.
  const ConvData d = convData(p);
  const float *x = d.x, *wt = d.wt, *bias = d.bias;
  float *y = d.y;
  const WindowDim &r = s.rows, &c = s.cols;
  int64_t planes = s.n * s.g * s.co;
  tbb::parallel_for(int64_t(0), planes, [&](int64_t plane) {
    int64_t n = plane / (s.g * s.co), gc = plane % (s.g * s.co);
    const float *in = x + (n * s.g + gc / s.co) * r.size * c.size;
    const float *k = wt + gc * r.kernel * c.kernel;
    float b = bias ? bias[gc] : 0.0f;
    float *out = y + plane * r.out * c.out;
    for (int64_t oh = 0; oh < r.out; ++oh) {
      auto [kh0, kh1] = r.inside(oh);
      for (int64_t ow = 0; ow < c.out; ++ow) {
        auto [kw0, kw1] = c.inside(ow);
        float acc = 0.0f;
        for (int64_t kh = kh0; kh < kh1; ++kh) {
          const float *row = in + r.at(oh, kh) * c.size;
          for (int64_t kw = kw0; kw < kw1; ++kw)
            acc += row[c.at(ow, kw)] * k[kh * c.kernel + kw];
        }
        out[oh * c.out + ow] = acc + b;
      }
    }
  });
}

/// Unrolls the windows of one image's group \p x into \p col: row (ci, kh,
/// kw) holds the input each output position reads there (0 for padding).
void unrollRows(const float *x, const Window2DShape &s, int64_t r0, int64_t r1,
                float *col, int64_t ld = 0) {
  const WindowDim &r = s.rows, &c = s.cols;
  int64_t np = r.out * c.out, kk = r.kernel * c.kernel;
  if (ld == 0)
    ld = np;
  for (int64_t row = r0; row < r1; ++row) {
    int64_t ci = row / kk, kh = (row % kk) / c.kernel, kw = row % c.kernel;
    const float *plane = x + ci * r.size * c.size;
    float *dst = col + row * ld;
    int64_t owLo = 0, owHi = c.out;
    while (owLo < owHi && c.at(owLo, kw) < 0)
      ++owLo;
    while (owHi > owLo && c.at(owHi - 1, kw) >= c.size)
      --owHi;
    for (int64_t oh = 0; oh < r.out; ++oh) {
      int64_t ih = r.at(oh, kh);
      float *out = dst + oh * c.out;
      if (ih < 0 || ih >= r.size) {
        std::fill(out, out + c.out, 0.0f);
        continue;
      }
      const float *in = plane + ih * c.size;
      std::fill(out, out + owLo, 0.0f);
      for (int64_t ow = owLo; ow < owHi; ++ow)
        out[ow] = in[c.at(ow, kw)];
      std::fill(out + owHi, out + c.out, 0.0f);
    }
  }
}

/// Groups (images times groups) per thread from which each group runs on
/// one thread rather than all threads sharing each group's blocks. Either
/// way every block is computed alike, so this choice changes no result.
constexpr int64_t kGroupsPerThread = 2;

/// Convolution as im2col plus the blocked GEMM: for each image and group,
/// [co, ci*kh*kw] weights times the [ci*kh*kw, oh*ow] unrolled input, then
/// the bias. A 1x1 stride-1 window over whole rows reads the input as it is.
void runGemmConv(const Prepared &p, const Window2DShape &s) {
  // Named, not bound: the lambdas below capture them.
  const ConvData d = convData(p);
  const float *x = d.x, *wt = d.wt, *bias = d.bias;
  float *y = d.y;
  const WindowDim &r = s.rows, &c = s.cols;
  int64_t kk = s.ci * r.kernel * c.kernel, np = r.out * c.out;
  int64_t planeSize = r.size * c.size;
  bool direct = r.kernel == 1 && c.kernel == 1 && r.stride == 1 &&
                c.stride == 1 && c.offset == 0 && c.out == c.size &&
                r.offset >= 0 && r.offset + r.out <= r.size;
  GemmBlocking blocking = GemmBlocking::of(s.co, np, kk);
  auto input = [&](int64_t n, int64_t g) {
    return x + (n * s.g + g) * s.ci * planeSize;
  };
  // One block of one image's group: the product, then the bias.
  auto multiply = [&](int64_t n, int64_t g, const float *col, int64_t block) {
    ConstMatrixF32 a{wt + g * s.co * kk, s.co, kk, kk, 1};
    ConstMatrixF32 b{col, kk, np, np, 1};
    if (direct)
      b = {input(n, g) + r.offset * c.size, kk, np, planeSize, 1};
    MatrixF32 out{y + (n * s.g + g) * s.co * np, s.co, np, np, 1};
    gemmBlockF32(a, b, out, 1.0f, blocking, block);
    if (!bias)
      return;
    auto [r0, r1] = blocking.rows(block);
    auto [c0, c1] = blocking.cols(block);
    for (int64_t i = r0; i < r1; ++i) {
      float bv = bias[g * s.co + i];
      float *row = out.data + i * np;
      for (int64_t j = c0; j < c1; ++j)
        row[j] += bv;
    }
  };
  if (s.n * s.g >= kGroupsPerThread * tbb::this_task_arena::max_concurrency()) {
    tbb::enumerable_thread_specific<std::vector<float>> cols;
    tbb::parallel_for(int64_t(0), s.n * s.g, [&](int64_t ng) {
      int64_t n = ng / s.g, g = ng % s.g;
      std::vector<float> &col = cols.local();
      if (!direct) {
        col.resize(size_t(kk * np));
        unrollRows(input(n, g), s, 0, kk, col.data());
      }
      for (int64_t b = 0; b < blocking.count(); ++b)
        multiply(n, g, col.data(), b);
    });
    return;
  }
  std::vector<float> col(direct ? 0 : size_t(kk * np));
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t g = 0; g < s.g; ++g) {
      if (!direct)
        tbb::parallel_for(int64_t(0), kk, [&](int64_t row) {
          unrollRows(input(n, g), s, row, row + 1, col.data());
        });
      tbb::parallel_for(int64_t(0), blocking.count(),
                        [&](int64_t b) { multiply(n, g, col.data(), b); });
    }
}

/// The shape of \p p when it is a convolution's weight gradient as autodiff
/// builds it: a matmul over the convolution's dims [n, (g), co, oh, ow, ci,
/// kh, kw] of dy [n, co, oh, ow] and the input's windows, written [co, ci,
/// kh, kw] (n, oh and ow summed).
std::optional<Window2DShape> matchConvWeightGrad(const Prepared &p) {
  const plan::Compute &c = p.c;
  bool grouped = c.iters_size() == 8;
  if (!allDenseF32(p) || p.ins.size() != 2 || p.outs.size() != 1)
    return std::nullopt;
  auto s = matchConvMaps(c, grouped, c.inputs(1), *p.ins[1], c.outputs(0),
                         *p.outs[0], c.inputs(0), *p.ins[0]);
  if (!s || !s->nchw())
    return std::nullopt;
  unsigned dco = grouped ? 2 : 1;
  for (unsigned d : {0u, dco + 1, dco + 2}) // n, oh, ow: summed
    if (c.iters(int(d)).kind() != plan::IterDim::RED)
      return std::nullopt;
  return s;
}

/// A scatter_add of per-window values back through a 2-D window (a
/// convolution's or a pool's input gradient): input [.., oh, ow, .., kh,
/// kw] read plainly over every iteration dim, result [n, c, s*oh + d*kh +
/// o, s*ow + d*kw + o] with c a dim or a group (g, c).
struct Col2Im {
  unsigned n, g, c, oh, ow, kh, kw;
  bool grouped;
  WindowDim rows, cols;
};

std::optional<Col2Im> matchCol2Im(const Prepared &p) {
  const plan::Compute &c = p.c;
  if (!allDenseF32(p) || p.ins.size() != 1 || p.outs.size() != 1)
    return std::nullopt;
  const plan::Access &ia = c.inputs(0), &oa = c.outputs(0);
  const Tensor &out = *p.outs[0];
  if (out.shape.size() != 4 || oa.exprs_size() != 4 ||
      ia.exprs_size() != c.iters_size())
    return std::nullopt;
  for (int d = 0; d < c.iters_size(); ++d)
    if (!isPlainDim(ia.exprs(d), unsigned(d)))
      return std::nullopt;
  Col2Im m{};
  const plan::AccessExpr &e0 = oa.exprs(0), &e1 = oa.exprs(1),
                         &e2 = oa.exprs(2), &e3 = oa.exprs(3);
  if (e0.kind() != plan::AccessExpr::AFFINE || e0.dims_size() != 1 ||
      !isPlainDim(e0, e0.dims(0)))
    return std::nullopt;
  m.n = e0.dims(0);
  if (e1.kind() == plan::AccessExpr::GROUP && e1.dims_size() == 2 &&
      e1.whole() <= 1 && e1.offset() == 0) {
    m.grouped = true, m.g = e1.dims(0), m.c = e1.dims(1);
  } else if (e1.kind() == plan::AccessExpr::AFFINE && e1.dims_size() == 1 &&
             isPlainDim(e1, e1.dims(0))) {
    m.grouped = false, m.g = m.c = e1.dims(0);
  } else {
    return std::nullopt;
  }
  if (e2.dims_size() != 2 || e3.dims_size() != 2)
    return std::nullopt;
  m.oh = e2.dims(0), m.kh = e2.dims(1), m.ow = e3.dims(0), m.kw = e3.dims(1);
  // Each (image, channel) plane is summed into alone, its points in
  // iteration order (oh, ow, kh, kw, as the generic loop adds them).
  if (!(m.oh < m.ow && m.ow < m.kh && m.kh < m.kw))
    return std::nullopt;
  auto rows = matchWindow(c, e2, m.oh, m.kh, out.shape[2]);
  auto cols = matchWindow(c, e3, m.ow, m.kw, out.shape[3]);
  if (!rows || !cols)
    return std::nullopt;
  m.rows = *rows, m.cols = *cols;
  int used = 6 + (m.grouped ? 1 : 0);
  if (c.iters_size() != used)
    return std::nullopt;
  return m;
}

/// Max pool of NCHW planes, one (image, channel) plane per task. As the
/// generic pool: NaN wins, and a window with nothing inside is NaN.
void maxPoolPlanes(const float *x, float *y, const Window2DShape &s) {
  const WindowDim &r = s.rows, &c = s.cols;
  tbb::parallel_for(int64_t(0), s.n * s.ci, [&](int64_t plane) {
    const float *in = x + plane * r.size * c.size;
    float *out = y + plane * r.out * c.out;
    for (int64_t oh = 0; oh < r.out; ++oh) {
      auto [kh0, kh1] = r.inside(oh);
      for (int64_t ow = 0; ow < c.out; ++ow) {
        auto [kw0, kw1] = c.inside(ow);
        float best = -std::numeric_limits<float>::infinity();
        for (int64_t kh = kh0; kh < kh1; ++kh) {
          const float *row = in + r.at(oh, kh) * c.size;
          for (int64_t kw = kw0; kw < kw1; ++kw) {
            float v = row[c.at(ow, kw)];
            best = std::isnan(v) || v > best ? v : best;
          }
        }
        bool empty = kh0 >= kh1 || kw0 >= kw1;
        out[oh * c.out + ow] =
            empty ? std::numeric_limits<float>::quiet_NaN() : best;
      }
    }
  });
}

/// out[k] = max(out[k], in[k]) for \p n channels, NaN winning, four at a
/// time.
void maxInto(const float *in, float *out, int64_t n) {
  int64_t k = 0;
  for (; k + 4 <= n; k += 4) {
    V4 v = loadV4(in + k), o = loadV4(out + k);
    storeV4(out + k, (v > o) | (v != v) ? v : o);
  }
  for (; k < n; ++k) {
    float v = in[k];
    out[k] = v > out[k] || v != v ? v : out[k];
  }
}

/// Calls \p fn(position, inputs) for each output position of channels-last
/// window op \p s (its index among the output's [n, oh, ow]), with the
/// input positions its window reads inside the input, in window order; one
/// output row per task.
template <typename F>
void forEachWindowChannelsLast(const Window2DShape &s, F fn) {
  const WindowDim &r = s.rows, &c = s.cols;
  tbb::parallel_for(int64_t(0), s.n * r.out, [&](int64_t job) {
    int64_t n = job / r.out, oh = job % r.out;
    auto [kh0, kh1] = r.inside(oh);
    llvm::SmallVector<int64_t, 16> inputs;
    for (int64_t ow = 0; ow < c.out; ++ow) {
      auto [kw0, kw1] = c.inside(ow);
      inputs.clear();
      for (int64_t kh = kh0; kh < kh1; ++kh)
        for (int64_t kw = kw0; kw < kw1; ++kw)
          inputs.push_back((n * r.size + r.at(oh, kh)) * c.size + c.at(ow, kw));
      fn(job * c.out + ow, llvm::ArrayRef<int64_t>(inputs));
    }
  });
}

/// Max pool of channels-last images, the channels of each position side by
/// side (as maxPoolPlanes per channel).
void maxPoolChannelsLast(const float *x, float *y, const Window2DShape &s) {
  int64_t ch = s.ci;
  forEachWindowChannelsLast(s, [&](int64_t at, llvm::ArrayRef<int64_t> in) {
    float *out = y + at * ch;
    std::fill(out, out + ch,
              in.empty() ? std::numeric_limits<float>::quiet_NaN()
                         : -std::numeric_limits<float>::infinity());
    for (int64_t i : in)
      maxInto(x + i * ch, out, ch);
  });
}

/// Average pool of channels-last images over the window positions inside
/// the input, each channel summed in double in window order (as the
/// generic pool).
void averagePoolChannelsLast(const float *x, float *y, const Window2DShape &s) {
  int64_t ch = s.ci;
  forEachWindowChannelsLast(s, [&](int64_t at, llvm::ArrayRef<int64_t> in) {
    std::vector<double> sum(static_cast<size_t>(ch), 0.0);
    for (int64_t i : in)
      for (int64_t k = 0; k < ch; ++k)
        sum[size_t(k)] += double(x[i * ch + k]);
    float *out = y + at * ch;
    for (int64_t k = 0; k < ch; ++k)
      out[k] = in.empty() ? std::numeric_limits<float>::quiet_NaN()
                          : float(sum[size_t(k)] / double(in.size()));
  });
}

} // namespace

bool runAveragePool2DF32(const Prepared &p) {
  std::optional<Window2DShape> s = matchPool2D(p);
  if (!s || !s->xLast || attrInt(p.c, "count_include_pad", 0) != 0)
    return false;
  averagePoolChannelsLast(
      reinterpret_cast<const float *>(p.ins[0]->data.data()),
      reinterpret_cast<float *>(p.outs[0]->data.data()), *s);
  return true;
}

bool runConv2DF32(const Prepared &p, int64_t group, DnnlCache *cache) {
  std::optional<Window2DShape> s = matchConv2D(p, group);
  if (!s)
    return false;
  if (!s->nchw())
    return runConvDnnl(p, *s, cache);
  if (s->g > 1 && s->ci == 1)
    runDepthwise(p, *s);
  else
    runGemmConv(p, *s);
  return true;
}

bool runConv2D16(const Prepared &p, int64_t group, DnnlCache *cache) {
  std::optional<Window2DShape> s = matchConv2D(p, group, /*sixteenBit=*/true);
  return s && runConvDnnl(p, *s, cache);
}

bool runConvWeightGrad2DF32(const Prepared &p) {
  std::optional<Window2DShape> m = matchConvWeightGrad(p);
  if (!m)
    return false;
  const Window2DShape &s = *m;
  const float *dy = reinterpret_cast<const float *>(p.ins[0]->data.data());
  const float *x = reinterpret_cast<const float *>(p.ins[1]->data.data());
  float *dw = reinterpret_cast<float *>(p.outs[0]->data.data());
  const WindowDim &r = s.rows, &c = s.cols;
  int64_t kk = s.ci * r.kernel * c.kernel, np = r.out * c.out;
  int64_t planeSize = r.size * c.size;
  // Images per GEMM: their unrolled windows side by side, [kk, nb * np],
  // at most about 8M floats (the order of the sums depends on the sizes
  // only).
  int64_t nb = std::clamp<int64_t>(
      (int64_t(1) << 23) / std::max<int64_t>(1, kk * np), 1, s.n);
  std::vector<float> col(size_t(kk * nb * np)), grads(size_t(s.co * nb * np)),
      part(size_t(s.co * kk));
  for (int64_t g = 0; g < s.g; ++g) {
    float *out = dw + g * s.co * kk;
    for (int64_t n0 = 0; n0 < s.n; n0 += nb) {
      int64_t images = std::min(nb, s.n - n0), k = images * np;
      tbb::parallel_for(int64_t(0), images * kk, [&](int64_t job) {
        int64_t i = job / kk, row = job % kk;
        const float *in = x + ((n0 + i) * s.g + g) * s.ci * planeSize;
        unrollRows(in, s, row, row + 1, col.data() + i * np, k);
      });
      // dy's rows of this group, the images side by side: [co, k].
      tbb::parallel_for(int64_t(0), s.co, [&](int64_t o) {
        for (int64_t i = 0; i < images; ++i)
          std::copy_n(dy + (((n0 + i) * s.g + g) * s.co + o) * np, np,
                      grads.data() + o * k + i * np);
      });
      ConstMatrixF32 a{grads.data(), s.co, k, k, 1};
      ConstMatrixF32 b{col.data(), k, kk, 1, k}; // the windows, transposed
      MatrixF32 target{n0 == 0 ? out : part.data(), s.co, kk, kk, 1};
      gemmF32(a, b, target);
      if (n0 != 0)
        for (int64_t e = 0; e < s.co * kk; ++e)
          out[e] += part[size_t(e)];
    }
  }
  return true;
}

bool runCol2ImF32(const Prepared &p) {
  std::optional<Col2Im> found = matchCol2Im(p);
  if (!found)
    return false;
  const Col2Im &m = *found;
  const plan::Compute &c = p.c;
  const AccessIndexer &in = p.inMaps[0];
  const float *src = reinterpret_cast<const float *>(p.ins[0]->data.data());
  Tensor &outT = *p.outs[0];
  float *dst = reinterpret_cast<float *>(outT.data.data());
  std::fill(dst, dst + outT.numel(), 0.0f);
  auto ext = [&](unsigned d) { return int64_t(c.iters(int(d)).extent()); };
  int64_t groups = m.grouped ? ext(m.g) : 1, chans = ext(m.c),
          images = ext(m.n);
  int64_t channelsOut = outT.shape[1];
  if (outT.shape[0] != images || channelsOut != groups * chans)
    return false;
  const WindowDim &r = m.rows, &w = m.cols;
  int64_t plane = r.size * w.size;
  tbb::parallel_for(int64_t(0), images * groups * chans, [&](int64_t job) {
    int64_t n = job / (groups * chans), gc = job % (groups * chans);
    llvm::SmallVector<int64_t, 8> point(size_t(c.iters_size()), 0);
    point[m.n] = n;
    if (m.grouped)
      point[m.g] = gc / chans;
    point[m.c] = gc % chans;
    float *o = dst + (n * channelsOut + gc) * plane;
    int64_t base = in.index(point);
    int64_t sOh = in.step(m.oh), sOw = in.step(m.ow), sKh = in.step(m.kh),
            sKw = in.step(m.kw);
    for (int64_t oh = 0; oh < r.out; ++oh)
      for (int64_t ow = 0; ow < w.out; ++ow)
        for (int64_t kh = 0; kh < r.kernel; ++kh) {
          int64_t ih = r.at(oh, kh);
          if (ih < 0 || ih >= r.size)
            continue;
          for (int64_t kw = 0; kw < w.kernel; ++kw) {
            int64_t iw = w.at(ow, kw);
            if (iw < 0 || iw >= w.size)
              continue;
            o[ih * w.size + iw] +=
                src[base + oh * sOh + ow * sOw + kh * sKh + kw * sKw];
          }
        }
  });
  return true;
}

bool runMaxPool2DF32(const Prepared &p) {
  std::optional<Window2DShape> s = matchPool2D(p);
  if (!s)
    return false;
  const float *x = reinterpret_cast<const float *>(p.ins[0]->data.data());
  float *y = reinterpret_cast<float *>(p.outs[0]->data.data());
  if (s->xLast)
    maxPoolChannelsLast(x, y, *s);
  else
    maxPoolPlanes(x, y, *s);
  return true;
}

} // namespace pax::runtime::cpu
