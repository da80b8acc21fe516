//===- CudaKernels.h - The CUDA backend's own kernels -----------*- C++ -*-===//
//
// What CudaDevice launches besides cuBLAS: box copies between buffers (the
// collectives' and slices' overlaps) and the generic kernel, the GPU twin of
// the CPU's: it walks a compute's iteration space (one thread per outer
// point, the inner points in order) and reads and writes through the access
// maps, with the element math of ScalarMath.h, ReduceMath.h and Elements.h
// that the CPU runs too, so both backends compute the same values.
//
// Plain structs in, so the host side (CudaDevice.cpp) needs no CUDA
// compiler; the kernels are in CudaKernels.cu.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_CUDA_CUDAKERNELS_H
#define PAX_RUNTIME_CUDA_CUDAKERNELS_H

#include "runtime/FlatMaps.h"
#include "runtime/PaddedWindow.h"
#include "runtime/RecurrentMath.h"
#include "runtime/ReduceMath.h"
#include "runtime/ScalarMath.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace pax::runtime::cuda {

/// The most inputs and outputs of one generic compute.
inline constexpr int kMaxInputs = 8;
inline constexpr int kMaxOutputs = 4;

/// Copies (or adds) the overlap of two row-major buffers of one dtype:
/// `size` elements per dim, starting at `srcOffset` / `dstOffset` elements,
/// stepping by the strides.
struct BoxCopy {
  int32_t rank = 0;
  int32_t dtype = 0; // elements::Type
  bool add = false;
  int64_t elements = 0; // the product of size
  int64_t size[flat::kMaxRank] = {};
  int64_t srcStride[flat::kMaxRank] = {}, dstStride[flat::kMaxRank] = {};
  int64_t srcOffset = 0, dstOffset = 0;
};

/// Launches \p b on \p stream.
cudaError_t launchBoxCopy(const BoxCopy &b, const void *src, void *dst,
                          cudaStream_t stream);

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
  Random,      // counter-based uniform numbers (RandomMath.h)
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

/// Runs \p g on \p stream: copies it to \p scratch (device memory of
/// sizeof(Generic), reusable once the stream passes this launch) and
/// launches the kernel. \p status (device memory, zeroed by the caller)
/// receives the first bad lookup; read it after synchronizing.
cudaError_t launchGeneric(const Generic &g, Generic *scratch,
                          GenericStatus *status, cudaStream_t stream);

/// Runs every (direction, batch row) of LSTM or GRU layer \p l (its
/// gradient op with \p grad), a thread each, on \p stream: copies \p l
/// to \p scratch (device memory of sizeof(Layer)) and gives each row its
/// forwardScratch / gradScratch doubles of \p work (device memory).
cudaError_t launchRecurrent(const recurrent::Layer &l, bool grad,
                            recurrent::Layer *scratch, double *work,
                            cudaStream_t stream);

} // namespace pax::runtime::cuda

#endif // PAX_RUNTIME_CUDA_CUDAKERNELS_H
