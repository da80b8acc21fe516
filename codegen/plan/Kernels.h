//===- Kernels.h - The kernels of a plan's computes ------------*- C++ -*-===//
//
// The kernel ids of Kernels.def, shared by codegen (which chooses one per
// compute) and the runtime's backends (which dispatch on it).
//
//===----------------------------------------------------------------------===//
#ifndef PAX_CODEGEN_PLAN_KERNELS_H
#define PAX_CODEGEN_PLAN_KERNELS_H

#include "codegen/plan/Plan.pb.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>

namespace pax::plan {

enum class KernelId {
#define PAX_KERNEL(Id, Name, Description) Id,
#include "codegen/plan/Kernels.def"
};

/// The kernel named \p name ("gemm"), if there is one.
std::optional<KernelId> parseKernelId(llvm::StringRef name);
llvm::StringRef kernelName(KernelId k);
/// What the kernel computes, for --help and the docs.
llvm::StringRef kernelDescription(KernelId k);

/// The kernel that runs computes of op kind \p kind ("matmul": gemm), if
/// any: codegen's choice.
std::optional<KernelId> kernelForKind(llvm::StringRef kind);

/// Whether kernel \p k runs computes of \p kind.
bool kernelTakesKind(KernelId k, llvm::StringRef kind);

/// The kernel compute \p c names, checked against its kind; the error names
/// the compute.
llvm::Expected<KernelId> computeKernel(const Compute &c);

} // namespace pax::plan

#endif // PAX_CODEGEN_PLAN_KERNELS_H
