//===- DnnlConv.h - 2-D convolutions on oneDNN's primitives -----*- C++ -*-===//
//
// Channels-last convolutions (passes/ChannelsLast.h) run on oneDNN's
// convolution primitive, whose brgemm kernels compute [n, h, w, c]
// activations at about twice the rate of im2col and a GEMM on NCHW ones.
// The primitive wants its weights in a blocked layout of its choosing: they
// are reordered from the model's [co, ci, kh, kw] once per weight that stays
// the same from run to run (Tensor::resident), kept in the device's
// DnnlCache with the compiled primitive, and once per call otherwise.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_CPU_DNNLCONV_H
#define PAX_RUNTIME_CPU_DNNLCONV_H

#include "runtime/WindowShape.h"
#include "runtime/cpu/DnnlCache.h"

namespace pax::runtime::cpu {

/// What a chain of computes after a convolution does to its result, run
/// by oneDNN with it (cpu/ConvChain.h): a batch norm folded into the
/// weights and bias, a relu, a residual added, a relu.
struct ConvEpilogue {
  /// The batch norm's scale, bias, mean and variance (f32 [channels]),
  /// or none.
  const Tensor *norm[4] = {};
  double epsilon = 0;
  bool relu = false;
  /// Added after the relu (the output's shape and layout), or null.
  const Tensor *residual = nullptr;
  bool reluAfter = false;
};

/// Runs \p p, a 2-D f32 convolution of shape \p s (matchConv2D), input and
/// output each NCHW or channels-last as \p s says, and \p epi after it on
/// oneDNN's primitive, its primitive and packed weights kept in \p cache
/// where given (under \p key, else the compute). Returns false, having
/// written nothing, where paxc is built without oneDNN or oneDNN takes no
/// such convolution.
bool runConvDnnl(const Prepared &p, const Window2DShape &s, DnnlCache *cache,
                 const ConvEpilogue &epi = {}, const void *key = nullptr);

} // namespace pax::runtime::cpu

#endif // PAX_RUNTIME_CPU_DNNLCONV_H
