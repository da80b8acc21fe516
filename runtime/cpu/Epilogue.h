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
#include "runtime/Backend.h"
#include "runtime/Prepared.h"
#include "runtime/Tensor.h"

#include <optional>

namespace pax::runtime::cpu {

/// The input of \p c that reads \p buffer point by point (through its
/// result's map), or -1.
int pointwiseInput(const plan::Compute &c, uint32_t buffer);

/// How many computes of \p chain, from the first, \p linkAfter (the stage
/// so far, none after the head; the compute; the buffer it reads) takes.
template <typename Stage, typename F>
size_t chainLength(llvm::ArrayRef<const plan::Compute *> chain, F linkAfter) {
  std::optional<Stage> stage;
  size_t n = 1;
  for (; n < chain.size(); ++n) {
    stage = linkAfter(stage, *chain[n], chain[n - 1]->outputs(0).buffer());
    if (!stage)
      break;
  }
  return n;
}

/// The head of a chain prepared to write \p outs (the last link's output,
/// which the Prepared refers to: it must outlive it), or none.
std::optional<Prepared> prepareHead(const ChainLink &head,
                                    llvm::ArrayRef<Tensor *> outs);

/// True for a dense f32 tensor of \p numel elements.
bool denseF32(const Tensor &t, int64_t numel);

/// True for a dense tensor of \p like's shape and type (an epilogue's
/// addend, read as the result is written).
bool denseLike(const Tensor &t, const Tensor &like);

/// Where \p addend (a residual added by a fused kernel's binary post-op)
/// lies where the kernel writes \p out: copies it into \p copy and points
/// \p addend there (oneDNN's kernels may read a binary post-op's source
/// after writing their result over it: AVX2's do).
void copyIfInPlace(const Tensor *&addend, const Tensor &out,
                   std::optional<Tensor> &copy);

} // namespace pax::runtime::cpu

#endif // PAX_RUNTIME_CPU_EPILOGUE_H
