//===- DnnlMatmul.h - Matrix products on oneDNN's matmul primitive -*- C++
//-*-===//
//
// oneDNN's blocked GEMM (dnnl_sgemm, cpu/Gemm.h) packs its operands on every
// call, and on a product with few rows (an inference batch of one sequence)
// packing the weight costs as much as the multiply: [128, 768] x [768, 768]
// ran at about 90 GFLOP/s on 2 cores. The matmul primitive takes its
// weight in a blocked layout of its choosing, packed once per resident
// weight (Tensor::resident) and kept with the compiled primitive in the
// device's DnnlCache, and ran the same product at about 190 GFLOP/s. It
// also adds gemm's C (a bias along the columns, or a whole matrix) and an
// epilogue (cpu/MatmulChain.h) as post-ops, so that the result is written
// once.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_CPU_DNNLMATMUL_H
#define PAX_RUNTIME_CPU_DNNLMATMUL_H

#include "runtime/cpu/DnnlCache.h"
#include "runtime/cpu/Matmul.h"

namespace pax::runtime::cpu {

/// An elementwise function of a product's result that oneDNN applies as
/// the result is written.
enum class Activation { None, GeluErf, GeluTanh, Relu };

/// What a chain of computes after a matrix product does to its result, run
/// by oneDNN with it, in this order: an activation, then an addend (the
/// output's shape and strides) added.
struct MatmulEpilogue {
  Activation activation = Activation::None;
  const Tensor *addend = nullptr;
};

/// Runs \p p, a matmul or gemm of shape \p d (matchMatmul) with factor
/// \p alpha and \p beta, and \p epi after it on oneDNN's matmul primitive,
/// its primitive and packed weight kept in \p cache where given (under
/// \p key, else the compute). Returns false, having written nothing,
/// where paxc is built without oneDNN or the product does not suit the
/// primitive: alpha or beta other than 1, no rows or columns, a B that
/// differs between batch points, too few rows for a B packed on each call
/// (one that is not resident) to pay, or no fast kernel for the layouts.
bool runMatmulDnnl(const Prepared &p, const MatmulDims &d, float alpha,
                   float beta, DnnlCache *cache, const MatmulEpilogue &epi = {},
                   const void *key = nullptr);

} // namespace pax::runtime::cpu

#endif // PAX_RUNTIME_CPU_DNNLMATMUL_H
