//===- Window2D.h - f32 NCHW convolution and pooling -----------*- C++ -*-===//
#ifndef PAX_RUNTIME_CPU_WINDOW2D_H
#define PAX_RUNTIME_CPU_WINDOW2D_H

#include "runtime/cpu/KernelContext.h"

#include "runtime/cpu/DnnlConv.h"

namespace pax::runtime::cpu {

/// Runs \p p as a 2-D f32 NCHW convolution with \p group groups when its
/// maps are the importer's (iteration space [n, (g), co, oh, ow, ci, kh,
/// kw], windows `s*o + d*k + offset` of any offset, so that padding, halo
/// rows and blocks of a larger input all work): depthwise convolutions
/// directly, the others as im2col and the blocked GEMM; with a
/// channels-last input or output, on oneDNN (runConvDnnl, \p cache).
/// Returns false, having written nothing, when \p p is not such a
/// convolution.
bool runConv2DF32(const Prepared &p, int64_t group, DnnlCache *cache);

/// Runs \p p as such a convolution of bf16 (or fp16) x and w, into their
/// type or f32, with fp32 accumulation, on oneDNN's 16-bit primitive
/// whatever the layouts (NCHW ones reordered through oneDNN's blocked
/// layout). Returns false, having written nothing, where the processor has
/// no such primitive or \p p is not such a convolution.
bool runConv2D16(const Prepared &p, int64_t group, DnnlCache *cache);

/// Runs \p p as the weight gradient of such a convolution (a matmul over
/// its dims of dy [n, co, oh, ow] and the input's windows, written [co, ci,
/// kh, kw]): im2col of a few images side by side, then the blocked GEMM
/// with the unrolled windows transposed. Returns false, having written
/// nothing, when \p p is not one.
bool runConvWeightGrad2DF32(const Prepared &p);

/// Runs \p p, a scatter_add of per-window values back through a 2-D
/// window (a convolution's or a pool's input gradient), one (image,
/// channel) plane per task, each plane's points added in the generic
/// loop's order (the same sums, bit for bit). Returns false, having
/// written nothing, when \p p is not one.
bool runCol2ImF32(const Prepared &p);

/// Runs \p p as a 2-D f32 max pool (iteration space [n, c, oh, ow, kh, kw],
/// windows as for runConv2DF32), NCHW or channels-last. Returns false,
/// having written nothing, when \p p is not one.
bool runMaxPool2DF32(const Prepared &p);

/// Runs \p p as a 2-D f32 channels-last average pool that does not count
/// padding (windows as for runMaxPool2DF32). Returns false, having written
/// nothing, when \p p is not one.
bool runAveragePool2DF32(const Prepared &p);

} // namespace pax::runtime::cpu

#endif // PAX_RUNTIME_CPU_WINDOW2D_H
