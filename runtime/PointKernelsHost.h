//===- PointKernelsHost.h - Describing computes for the point kernels -*- C++ -*-===//
#ifndef PAX_RUNTIME_POINTKERNELSHOST_H
#define PAX_RUNTIME_POINTKERNELSHOST_H

#include "codegen/plan/Kernels.h"
#include "runtime/PointKernels.h"
#include "runtime/Prepared.h"

#include "llvm/Support/Error.h"

namespace pax::runtime {

/// Describes compute \p p (prepared: maps compiled against its buffers),
/// whose kernel is \p id, as plain data for the point kernels: every kernel
/// but gemm (on BLAS; its contraction when its maps are no BLAS call) and
/// the recurrent ones. An error names the compute where it does not fit
/// (too many operands, a malformed trilu or pool).
llvm::Error describeGeneric(const Prepared &p, plan::KernelId id,
                            Generic &g);

/// Describes the copy of gemm \p p's C (input 2) into its output through
/// the maps, broadcast over what C does not index, before BLAS computes
/// alpha A B + beta C in place.
void describeGemmBias(const Prepared &p, Generic &g);

/// Runs \p g (compute \p c) on the host, one outer point after another:
/// the CUDA kernels' walk, for the cuda-emulated backend. A lookup outside
/// its table is an error naming \p c.
llvm::Error emulateGeneric(const plan::Compute &c, const Generic &g);

} // namespace pax::runtime

#endif // PAX_RUNTIME_POINTKERNELSHOST_H
