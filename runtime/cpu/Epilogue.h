//===- Epilogue.h - What chains of computes after a product share -*- C++
//-*-===//
//
// A convolution (cpu/ConvChain.h) or a matrix product (cpu/MatmulChain.h)
// runs the computes after it as oneDNN post-ops when each reads the result
// before it point by point. These read that off the computes and check the
// buffers the post-ops read.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_CPU_EPILOGUE_H
#define PAX_RUNTIME_CPU_EPILOGUE_H

#include "codegen/plan/Plan.pb.h"
#include "runtime/Tensor.h"

namespace pax::runtime::cpu {

/// The input of \p c that reads \p buffer point by point (through its
/// result's map), or -1.
int pointwiseInput(const plan::Compute &c, uint32_t buffer);

/// True for a dense f32 tensor of \p numel elements.
bool denseF32(const Tensor &t, int64_t numel);

} // namespace pax::runtime::cpu

#endif // PAX_RUNTIME_CPU_EPILOGUE_H
