//===- PointKernels.h - Kernels as one walk per output point -----*- C++
//-*-===//
//
// The CUDA backend's generic kernel, backend-neutral: a compute described
// as plain data (Generic: its space, its operands' flat maps, dtypes and
// buffers, and what to compute), and per outer point the walk the CPU's
// generic kernels make (the inner points in the same order, the element
// math of ScalarMath.h, ReduceMath.h, RandomMath.h and Elements.h). The
// CUDA kernels run runOuterPoint a thread per point; the cuda-emulated
// backend runs the same functions on the host, so the GPU kernels' logic
// is tested without a GPU. describeGeneric (PointKernels.cpp) fills a
// Generic from a compute.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_POINTKERNELS_H
#define PAX_RUNTIME_POINTKERNELS_H

#include "runtime/Elements.h"
#include "runtime/FlatMaps.h"
#include "runtime/PaddedWindow.h"
#include "runtime/RandomMath.h"
#include "runtime/ReduceMath.h"
#include "runtime/ScalarMath.h"
#include "runtime/TopKMath.h"

namespace pax::runtime {

/// The most inputs and outputs of one generic compute.
inline constexpr int kMaxInputs = 8;
inline constexpr int kMaxOutputs = 4;

/// What the generic kernel computes at each point.
enum class GenericOp : int32_t {
  Pointwise,   // outputs = scalar(inputs), where any input is inside
  Copy,        // the first source inside, else `fill` (concat, pad, ...)
  Gather,      // input 0 looked up by input 1's index tuples
  Reduce,      // input 0 folded over the inner dims
  ScatterAdd,  // input 0 added into the output, points in order
  SoftmaxRows, // softmax / log-softmax over the inner dims
  NormRows,    // instance / layer / RMS normalization over the inner dims
  BatchNorm,   // (x - mean) / sqrt(var + eps) * scale + bias, per point
  Contract,    // alpha * sum of in0 * in1 over the inner dims (+ beta in2)
  Pool,        // max or average over the inner (window) dims
  Lrn,         // local response normalization across channels
  Scan,        // running sums along the seq dim
  TopK,   // the k best along the seq dim `scanAxis`, written along `topKDim`
  Random, // counter-based uniform numbers (RandomMath.h)
};

/// One generic compute: the space, each operand's map, dtype and buffer.
struct Generic {
  GenericOp op = GenericOp::Pointwise;
  flat::Space space;
  int32_t inputs = 0, outputs = 0;
  flat::Map in[kMaxInputs];
  flat::Map out[kMaxOutputs];
  int32_t inType[kMaxInputs] = {}, outType[kMaxOutputs] = {};
  const uint8_t *inData[kMaxInputs] = {};
  uint8_t *outData[kMaxOutputs] = {};
  int64_t outElements[kMaxOutputs] = {};

  // Pointwise: the op, its attributes, real (double) or integer math, and
  // trilu's (row, col) dims.
  ScalarOp scalar = ScalarOp::Add;
  ScalarParams params;
  bool real = true;
  bool trilu = false;
  uint32_t triluRow = 0, triluCol = 0;
  // Copy and gather: how many leading inputs are data, the border's value,
  // and the index tuple's length.
  int32_t sources = 1;
  double fill = 0;
  int32_t tuple = 1;
  // Reduce: the fold, arg-reductions' tie rule, and the count a mean
  // divides by (the whole reduction's, when it is split).
  ReduceOp reduce = ReduceOp::Sum;
  bool selectLast = false;
  int64_t globalInnerPoints = 1;
  // Softmax rows: log-softmax.
  bool logSoftmax = false;
  // Norm rows and batch norm: epsilon; RMS (no mean), and whether inputs
  // 1 (scale) and 2 (bias) are there.
  double eps = 1e-5;
  bool rms = false;
  // Contract: gemm's alpha and beta (conv: 1 and 1).
  double alpha = 1, beta = 1;
  // Pool: max or average, and for count_include_pad the padded dims.
  bool maxPool = false, includePad = false;
  PaddedWindow padded;
  // Lrn: size, alpha (in `alpha`), beta (in `beta`), bias, and the window
  // step that reads the output's own channel.
  double lrnSize = 1, lrnBias = 1;
  int64_t lrnCenter = 0;
  // Scan: the seq dim and its length, reversed, exclusive (`real` says
  // double or int64 sums).
  uint32_t scanAxis = 0;
  int64_t scanLength = 0;
  bool reverse = false, exclusive = false;
  // TopK (the axis and its length in scanAxis and scanLength): the dim the
  // results are written along, k, and largest or smallest.
  uint32_t topKDim = 0;
  int64_t topK = 0;
  bool largest = true;
  // Random: the seed and key words, and the range (the step is input 0).
  uint64_t seed = 0, key = 0;
  double low = 0, high = 1;
};

/// What a generic kernel reports back: a lookup index outside its whole
/// table (bad input, as on the CPU).
struct GenericStatus {
  int64_t badLookup = 0; // 1 when an index was out of range
  int64_t index = 0, extent = 0;
};

namespace point {

using namespace elements;

/// Copies element \p i of input \p k to element \p o of output \p r.
PAX_HD inline void copyElement(const Generic &g, int k, int64_t i, int r,
                               int64_t o) {
  int32_t from = g.inType[k], to = g.outType[r];
  if (from == to) {
    int64_t n = bytes(to);
    memcpy(g.outData[r] + o * n, g.inData[k] + i * n, size_t(n));
  } else if (!isFloat(from) && !isFloat(to)) {
    writeInteger(g.outData[r], to, o, readInteger(g.inData[k], from, i));
  } else {
    writeReal(g.outData[r], to, o, readReal(g.inData[k], from, i));
  }
}

PAX_HD inline void reportBadLookup(GenericStatus *status, int64_t index,
                                   int64_t extent) {
#if defined(__CUDA_ARCH__)
  if (atomicCAS(reinterpret_cast<unsigned long long *>(&status->badLookup),
                0ull, 1ull) != 0ull)
    return;
#else
  if (status->badLookup)
    return;
  status->badLookup = 1;
#endif
  status->index = index;
  status->extent = extent;
}

/// One outer point of an elementwise op (the CPU's elementwisePoint).
PAX_HD inline void pointwise(const Generic &g, int64_t *point) {
  const flat::Space &s = g.space;
  do {
    bool dropped = false;
    if (g.trilu) {
      // Keep the element when its global (row, col) lies on the kept side.
      int64_t row = point[g.triluRow] + s.globalOffsets[g.triluRow];
      int64_t col = point[g.triluCol] + s.globalOffsets[g.triluCol];
      dropped =
          g.params.upper ? col - row < g.params.k : col - row > g.params.k;
    }
    bool anyIn = g.inputs == 0;
    if (g.real) {
      double args[kMaxInputs];
      for (int k = 0; k < g.inputs; ++k) {
        int64_t i = flat::index(g.in[k], point);
        anyIn |= i >= 0;
        args[k] = i >= 0 ? readReal(g.inData[k], g.inType[k], i) : 0.0;
      }
      if (!anyIn)
        continue;
      double v = dropped ? 0.0 : applyReal(g.scalar, args, g.inputs, g.params);
      for (int r = 0; r < g.outputs; ++r) {
        int64_t o = flat::index(g.out[r], point);
        if (o >= 0)
          writeReal(g.outData[r], g.outType[r], o, v);
      }
    } else {
      int64_t args[kMaxInputs];
      for (int k = 0; k < g.inputs; ++k) {
        int64_t i = flat::index(g.in[k], point);
        anyIn |= i >= 0;
        args[k] = i >= 0 ? readInteger(g.inData[k], g.inType[k], i) : 0;
      }
      if (!anyIn)
        continue;
      int64_t v =
          dropped ? 0 : applyInteger(g.scalar, args, g.inputs, g.params);
      for (int r = 0; r < g.outputs; ++r) {
        int64_t o = flat::index(g.out[r], point);
        if (o >= 0)
          writeInteger(g.outData[r], g.outType[r], o, v);
      }
    }
  } while (flat::nextInner(s, point));
}

/// Whether \p g may run by linearPoint: an elementwise op (no trilu) or a
/// one-source copy, every map linear (one dot product, provably inside its
/// tensor), no inner dims, and the outer points numbering under 2^31 (the
/// space's dividers).
PAX_HD inline bool linearOnly(const Generic &g) {
  const flat::Space &s = g.space;
  if (!s.outerDividers || s.innerCount != 0)
    return false;
  if (g.op == GenericOp::Pointwise) {
    if (g.trilu)
      return false;
  } else if (g.op != GenericOp::Copy || g.sources != 1 || g.inputs != 1) {
    return false;
  }
  for (int k = 0; k < g.inputs; ++k)
    if (!g.in[k].linear || g.in[k].lookups != 0)
      return false;
  for (int r = 0; r < g.outputs; ++r)
    if (!g.out[r].linear || g.out[r].lookups != 0)
      return false;
  return true;
}

/// Outer point \p p of a compute linearOnly accepts: the same values as
/// runOuterPoint's pointwise or copy, with every operand's element index
/// summed while the point's coordinates are walked out of \p p (a
/// multiply and shift per dim), in registers rather than a point array.
PAX_HD inline void linearPoint(const Generic &g, int64_t p) {
  int64_t in[kMaxInputs], out[kMaxOutputs];
  PAX_UNROLL
  for (int k = 0; k < kMaxInputs; ++k)
    in[k] = g.in[k].base;
  PAX_UNROLL
  for (int r = 0; r < kMaxOutputs; ++r)
    out[r] = g.out[r].base;
  const flat::Space &s = g.space;
  uint32_t f = uint32_t(p);
  for (int32_t i = s.outerCount; i-- > 0;) {
    const flat::Divider &dv = s.outerDiv[i];
    uint32_t q = flat::divide(dv, f);
    int64_t c = int64_t(f - q * dv.divisor);
    f = q;
    uint32_t d = s.outer[i];
    PAX_UNROLL
    for (int k = 0; k < kMaxInputs; ++k)
      if (k < g.inputs)
        in[k] += c * g.in[k].coef[d];
    PAX_UNROLL
    for (int r = 0; r < kMaxOutputs; ++r)
      if (r < g.outputs)
        out[r] += c * g.out[r].coef[d];
  }
  if (g.op == GenericOp::Copy) {
    PAX_UNROLL
    for (int r = 0; r < kMaxOutputs; ++r)
      if (r < g.outputs)
        copyElement(g, 0, in[0], r, out[r]);
    return;
  }
  if (g.real) {
    double args[kMaxInputs];
    PAX_UNROLL
    for (int k = 0; k < kMaxInputs; ++k)
      args[k] = k < g.inputs ? readReal(g.inData[k], g.inType[k], in[k]) : 0.0;
    double v = applyReal(g.scalar, args, g.inputs, g.params);
    PAX_UNROLL
    for (int r = 0; r < kMaxOutputs; ++r)
      if (r < g.outputs)
        writeReal(g.outData[r], g.outType[r], out[r], v);
  } else {
    int64_t args[kMaxInputs];
    PAX_UNROLL
    for (int k = 0; k < kMaxInputs; ++k)
      args[k] = k < g.inputs ? readInteger(g.inData[k], g.inType[k], in[k]) : 0;
    int64_t v = applyInteger(g.scalar, args, g.inputs, g.params);
    PAX_UNROLL
    for (int r = 0; r < kMaxOutputs; ++r)
      if (r < g.outputs)
        writeInteger(g.outData[r], g.outType[r], out[r], v);
  }
}

/// One outer point of data movement or gather (the CPU's runCopy): each
/// result element copies from the first source whose map reaches inside
/// it; the border and masked lookups get `fill`.
PAX_HD inline void copy(const Generic &g, int64_t *point,
                        GenericStatus *status) {
  bool lookup = g.op == GenericOp::Gather;
  int64_t lookupValues[flat::kMaxRank] = {};
  int tuple = lookup ? g.tuple : 0;
  do {
    bool masked = false;
    if (lookup) {
      int64_t j = flat::index(g.in[1], point);
      masked = j < 0;
      for (int t = 0; t < tuple && !masked; ++t)
        lookupValues[t] = readInteger(g.inData[1], g.inType[1], j + t);
      // An index outside the whole table is bad input.
      for (int32_t d = 0; d < g.in[0].rank && !masked; ++d) {
        const flat::Term &term = g.in[0].terms[d];
        if (term.lookupSlot < 0 || term.lookupSlot >= tuple)
          continue;
        int64_t v = lookupValues[term.lookupSlot];
        if (v < -term.lookupExtent || v >= term.lookupExtent) {
          reportBadLookup(status, v, term.lookupExtent);
          masked = true;
        }
      }
    }
    for (int r = 0; r < g.outputs; ++r) {
      int64_t o = flat::index(g.out[r], point);
      if (o < 0)
        continue;
      int64_t i = -1;
      int k = 0;
      for (; k < g.sources && i < 0 && !masked; ++k)
        i = flat::index(g.in[k], point, lookupValues, tuple);
      if (i >= 0)
        copyElement(g, k - 1, i, r, o);
      else
        writeReal(g.outData[r], g.outType[r], o, g.fill);
    }
  } while (flat::nextInner(g.space, point));
}

/// One outer point of a reduction (the CPU's reducePoint).
template <typename T>
PAX_HD inline void reduce(const Generic &g, int64_t *point) {
  Accumulator<T> a(g.reduce, g.selectLast);
  int64_t pos = 0;
  do {
    int64_t i = flat::index(g.in[0], point);
    if (i >= 0) {
      if constexpr (Accumulator<T>::kReal)
        a.add(readReal(g.inData[0], g.inType[0], i), pos);
      else
        a.add(readInteger(g.inData[0], g.inType[0], i), pos);
    }
    ++pos;
  } while (flat::nextInner(g.space, point));
  bool arg = g.reduce == ReduceOp::ArgMax || g.reduce == ReduceOp::ArgMin;
  for (int r = 0; r < g.outputs; ++r) {
    int64_t o = flat::index(g.out[r], point);
    if (o < 0)
      continue;
    if (!arg && Accumulator<T>::kReal)
      writeReal(g.outData[r], g.outType[r], o,
                a.finishReal(g.globalInnerPoints));
    else
      writeInteger(g.outData[r], g.outType[r], o,
                   a.finishInteger(g.globalInnerPoints));
  }
}

/// One outer point of softmax or log-softmax over the inner dims (the
/// CPU's runSoftmax): points outside the input read 0.
PAX_HD inline void softmaxRow(const Generic &g, int64_t *point) {
  if (g.space.innerPoints <= 0)
    return;
  auto at = [&]() {
    int64_t i = flat::index(g.in[0], point);
    return i >= 0 ? readReal(g.inData[0], g.inType[0], i) : 0.0;
  };
  double mx = -INFINITY;
  do {
    double v = at();
    mx = mx < v ? v : mx;
  } while (flat::nextInner(g.space, point));
  double sum = 0;
  do
    sum += exp(at() - mx);
  while (flat::nextInner(g.space, point));
  double logSum = log(sum);
  do {
    double d = at() - mx;
    int64_t o = flat::index(g.out[0], point);
    if (o >= 0)
      writeReal(g.outData[0], g.outType[0], o,
                g.logSoftmax ? d - logSum : exp(d) / sum);
  } while (flat::nextInner(g.space, point));
}

/// Input \p k at \p point, 0 outside it (the CPU kernels' readIn).
PAX_HD inline double readIn(const Generic &g, int k, const int64_t *point) {
  int64_t i = flat::index(g.in[k], point);
  return i >= 0 ? readReal(g.inData[k], g.inType[k], i) : 0.0;
}

/// Stores \p v at \p point of output 0 (nothing where the map is outside).
PAX_HD inline void writeOut(const Generic &g, const int64_t *point, double v) {
  int64_t o = flat::index(g.out[0], point);
  if (o >= 0)
    writeReal(g.outData[0], g.outType[0], o, v);
}

/// One outer point of instance, layer or RMS normalization (the CPU's
/// runNorm): mean and variance over the inner points, then each point.
PAX_HD inline void normRow(const Generic &g, int64_t *point) {
  if (g.space.innerPoints <= 0)
    return;
  double n = double(g.space.innerPoints > 1 ? g.space.innerPoints : 1);
  double mean = 0, var = 0;
  if (!g.rms) {
    do
      mean += readIn(g, 0, point);
    while (flat::nextInner(g.space, point));
    mean /= n;
  }
  do {
    double d = readIn(g, 0, point) - mean;
    var += d * d;
  } while (flat::nextInner(g.space, point));
  double inv = 1.0 / sqrt(var / n + g.eps);
  do {
    double y = (readIn(g, 0, point) - mean) * inv;
    if (g.inputs > 1)
      y *= readIn(g, 1, point);
    if (g.inputs > 2)
      y += readIn(g, 2, point);
    writeOut(g, point, y);
  } while (flat::nextInner(g.space, point));
}

/// One outer point of batch normalization with given statistics (the
/// CPU's runBatchNorm).
PAX_HD inline void batchNorm(const Generic &g, int64_t *point) {
  if (g.space.innerPoints <= 0)
    return;
  do {
    double x = readIn(g, 0, point), scale = readIn(g, 1, point);
    double bias = readIn(g, 2, point), mean = readIn(g, 3, point);
    double var = readIn(g, 4, point);
    writeOut(g, point, (x - mean) / sqrt(var + g.eps) * scale + bias);
  } while (flat::nextInner(g.space, point));
}

/// One outer point of a contraction (the CPU's generic contraction): the
/// sum over the inner points of in0 * in1 where both are inside (conv's
/// padding adds nothing), times alpha, plus beta times in2 where given.
PAX_HD inline void contract(const Generic &g, int64_t *point) {
  double acc = 0;
  if (g.space.innerPoints > 0)
    do {
      int64_t ia = flat::index(g.in[0], point),
              ib = flat::index(g.in[1], point);
      if (ia >= 0 && ib >= 0)
        acc += readReal(g.inData[0], g.inType[0], ia) *
               readReal(g.inData[1], g.inType[1], ib);
    } while (flat::nextInner(g.space, point));
  double v = g.alpha * acc;
  if (g.inputs > 2)
    v += g.beta * readIn(g, 2, point);
  writeOut(g, point, v);
}

/// One outer point of a max or average pool (the CPU's runPool): padding
/// is skipped by max and counted by average only with count_include_pad.
PAX_HD inline void pool(const Generic &g, int64_t *point) {
  double best = -INFINITY, sum = 0;
  int64_t count = 0, padded = 0;
  if (g.space.innerPoints > 0)
    do {
      int64_t i = flat::index(g.in[0], point);
      if (i >= 0) {
        double v = readReal(g.inData[0], g.inType[0], i);
        best = v != v || v > best ? v : best;
        sum += v;
        ++count;
      }
      if (g.includePad && insidePadded(g.padded, point))
        ++padded;
    } while (flat::nextInner(g.space, point));
  double v;
  if (g.maxPool)
    v = count ? best : NAN;
  else
    v = sum / double(g.includePad ? padded : count);
  writeOut(g, point, v);
}

/// One outer point of local response normalization (the CPU's runLrn).
PAX_HD inline void lrn(const Generic &g, int64_t *point) {
  double sum = 0, x = 0;
  int64_t step = 0;
  if (g.space.innerPoints > 0)
    do {
      double v = readIn(g, 0, point);
      if (step++ == g.lrnCenter)
        x = v;
      sum += v * v;
    } while (flat::nextInner(g.space, point));
  writeOut(g, point, x / pow(g.lrnBias + g.alpha / g.lrnSize * sum, g.beta));
}

/// One outer point of a running sum along the seq dim (the CPU's
/// scanPoint).
template <typename T>
PAX_HD inline void scan(const Generic &g, int64_t *point) {
  T acc = 0;
  int64_t n = g.scanLength;
  for (int64_t step = 0; step < n; ++step) {
    point[g.scanAxis] = g.reverse ? n - 1 - step : step;
    int64_t i = flat::index(g.in[0], point), o = flat::index(g.out[0], point);
    T v = 0;
    if (i >= 0) {
      if constexpr (sizeof(T) == 8 && T(0.5) != T(0))
        v = readReal(g.inData[0], g.inType[0], i);
      else
        v = readInteger(g.inData[0], g.inType[0], i);
    }
    if (g.exclusive) {
      if (o >= 0)
        writeReal(g.outData[0], g.outType[0], o, double(acc));
      acc += v;
    } else {
      acc += v;
      if (o < 0)
        continue;
      if constexpr (sizeof(T) == 8 && T(0.5) != T(0))
        writeReal(g.outData[0], g.outType[0], o, acc);
      else
        writeInteger(g.outData[0], g.outType[0], o, acc);
    }
  }
  point[g.scanAxis] = 0;
}

/// One outer point of top_k (the CPU's runTopK).
PAX_HD inline void topKPoint(const Generic &g, int64_t *point) {
  uint32_t axis = g.scanAxis, kd = g.topKDim;
  auto read = [&](int64_t i) {
    point[axis] = i;
    int64_t x = flat::index(g.in[0], point);
    return x >= 0 ? readReal(g.inData[0], g.inType[0], x) : 0.0;
  };
  auto write = [&](int64_t j, double v, int64_t i) {
    point[kd] = j;
    int64_t o = flat::index(g.out[0], point);
    if (o >= 0)
      writeReal(g.outData[0], g.outType[0], o, v);
    o = flat::index(g.out[1], point);
    if (o >= 0)
      writeInteger(g.outData[1], g.outType[1], o, i);
  };
  topk::select(g.scanLength, g.topK, g.largest, read, write);
  point[axis] = 0;
  point[kd] = 0;
}

/// One outer point of random_uniform (the CPU's runRandomUniform): each
/// point's number is keyed by its index in the whole result.
PAX_HD inline void randomUniform(const Generic &g, int64_t *point) {
  const flat::Space &s = g.space;
  uint64_t step = uint64_t(readInteger(g.inData[0], g.inType[0], 0));
  do {
    uint64_t index = 0;
    for (int32_t d = 0; d < s.rank; ++d)
      index = index * uint64_t(s.globalExtents[d]) +
              uint64_t(point[d] + s.globalOffsets[d]);
    double u = uniformAt(g.seed, g.key, step, index);
    writeOut(g, point, g.low + (g.high - g.low) * u);
  } while (flat::nextInner(s, point));
}

/// Runs outer point number \p p of \p g (every op but ScatterAdd, which
/// scatterAddAll walks whole).
PAX_HD inline void runOuterPoint(const Generic &g, int64_t p,
                                 GenericStatus *status) {
  int64_t point[flat::kMaxDims];
  for (int d = 0; d < flat::kMaxDims; ++d)
    point[d] = 0;
  flat::setOuter(g.space, p, point);
  switch (g.op) {
  case GenericOp::Pointwise:
    pointwise(g, point);
    break;
  case GenericOp::Copy:
  case GenericOp::Gather:
    copy(g, point, status);
    break;
  case GenericOp::Reduce:
    if (g.real)
      reduce<double>(g, point);
    else
      reduce<int64_t>(g, point);
    break;
  case GenericOp::SoftmaxRows:
    softmaxRow(g, point);
    break;
  case GenericOp::NormRows:
    normRow(g, point);
    break;
  case GenericOp::BatchNorm:
    batchNorm(g, point);
    break;
  case GenericOp::Contract:
    contract(g, point);
    break;
  case GenericOp::Pool:
    pool(g, point);
    break;
  case GenericOp::Lrn:
    lrn(g, point);
    break;
  case GenericOp::Random:
    randomUniform(g, point);
    break;
  case GenericOp::Scan:
    if (g.real)
      scan<double>(g, point);
    else
      scan<int64_t>(g, point);
    break;
  case GenericOp::TopK:
    topKPoint(g, point);
    break;
  case GenericOp::ScatterAdd:
    break; // scatterAddAll
  }
}

/// scatter_add (the CPU's runScatterAdd): the result is zero but where a
/// point's index names a row this device holds (or, without indices, where
/// its map reaches inside); there the point's value is added, points in
/// order, so the sums are the CPU's bit for bit. One thread walks it all.
PAX_HD inline void scatterAddAll(const Generic &g, GenericStatus *status) {
  int32_t t = g.outType[0];
  uint8_t *out = g.outData[0];
  for (int64_t o = 0; o < g.outElements[0]; ++o)
    writeReal(out, t, o, 0.0);
  bool indexed = g.inputs == 2;
  int tuple = indexed ? g.tuple : 0;
  int64_t lookupValues[flat::kMaxRank] = {};
  int64_t point[flat::kMaxDims];
  for (int64_t p = 0; p < g.space.outerPoints; ++p) {
    for (int d = 0; d < flat::kMaxDims; ++d)
      point[d] = 0;
    flat::setOuter(g.space, p, point);
    do {
      int64_t i = flat::index(g.in[0], point);
      if (i < 0)
        continue;
      if (indexed) {
        int64_t j = flat::index(g.in[1], point);
        if (j < 0)
          continue;
        for (int k = 0; k < tuple; ++k)
          lookupValues[k] = readInteger(g.inData[1], g.inType[1], j + k);
        bool bad = false;
        for (int32_t d = 0; d < g.out[0].rank; ++d) {
          const flat::Term &term = g.out[0].terms[d];
          if (term.lookupSlot < 0 || term.lookupSlot >= tuple)
            continue;
          int64_t v = lookupValues[term.lookupSlot];
          if (v < -term.lookupExtent || v >= term.lookupExtent) {
            reportBadLookup(status, v, term.lookupExtent);
            bad = true;
          }
        }
        if (bad)
          return;
      }
      int64_t o = flat::index(g.out[0], point, lookupValues, tuple);
      if (o >= 0)
        writeReal(out, t, o,
                  readReal(out, t, o) + readReal(g.inData[0], g.inType[0], i));
    } while (flat::nextInner(g.space, point));
  }
}

} // namespace point

} // namespace pax::runtime

#endif // PAX_RUNTIME_POINTKERNELS_H
