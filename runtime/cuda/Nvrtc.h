//===- Nvrtc.h - Generated kernels compiled by NVRTC -----------*- C++ -*-===//
//
// The CUDA backend's compiler for a plan's generated kernels: NVRTC, with
// the headers their sources include given from the binary (kernelHeaders),
// to a cubin for the GPU's architecture, kept in the kernel cache
// (KernelCache.h). It needs no GPU, so the kernels of any plan can be
// compiled (and checked) on a machine without one.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_CUDA_NVRTC_H
#define PAX_RUNTIME_CUDA_NVRTC_H

#include "codegen/plan/Plan.pb.h"
#include "runtime/Tensor.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <string>
#include <vector>

namespace pax::runtime::cuda {

/// Whether NVRTC could be loaded; else \p why says why.
bool nvrtcAvailable(std::string &why);

/// NVRTC's version, "13.0".
std::string compilerVersion();

/// The cubin of \p k for \p arch ("sm_90"), from the cache or compiled. An
/// error names the kernel, its ops and NVRTC's log.
llvm::Expected<std::string> compileGenerated(const plan::GeneratedKernel &k,
                                             llvm::StringRef arch);

/// One device program's generated kernels, compiled for one GPU (all at
/// once, in parallel) and loaded through the runtime API's libraries.
class GpuKernels {
public:
  /// Compiles (or finds in the cache) and loads \p prog's kernels on GPU
  /// \p gpu, the thread's current one.
  static llvm::Expected<std::unique_ptr<GpuKernels>>
  load(const plan::DeviceProgram &prog, int gpu);
  ~GpuKernels();
  GpuKernels(const GpuKernels &) = delete;
  GpuKernels &operator=(const GpuKernels &) = delete;

  /// Launches kernel \p k over \p params (device buffers, in order) on
  /// \p stream (a cudaStream_t).
  llvm::Error launch(const plan::GeneratedKernel &k,
                     llvm::ArrayRef<Tensor *> params, void *stream) const;

private:
  GpuKernels() = default;
  std::vector<void *> libraries;   // cudaLibrary_t
  llvm::StringMap<void *> kernels; // cudaKernel_t
};

} // namespace pax::runtime::cuda

#endif // PAX_RUNTIME_CUDA_NVRTC_H
