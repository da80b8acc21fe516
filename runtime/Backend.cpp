//===- Backend.cpp - The backend registry ---------------------------------===//
#include "runtime/Backend.h"

namespace pax::runtime {

Device::~Device() = default;

llvm::Error Device::launchKernel(const plan::GeneratedKernel &k,
                                 llvm::ArrayRef<Tensor *>) {
  return llvm::createStringError("backend " + backendName(backend()) +
                                 " runs no generated kernels (" + k.name() +
                                 ")");
}

llvm::Error Device::launchWithEpilogue(const plan::Compute &c,
                                       llvm::ArrayRef<const Tensor *>,
                                       const plan::LibraryEpilogue &,
                                       const Tensor *, Tensor &) {
  return llvm::createStringError("backend " + backendName(backend()) +
                                 " runs no library epilogues (" + c.name() +
                                 ")");
}

std::optional<Backend> parseBackend(llvm::StringRef name) {
#define PAX_BACKEND(Id, Name, Description)                                     \
  if (name == Name)                                                            \
    return Backend::Id;
#include "runtime/Backends.def"
  return std::nullopt;
}

llvm::StringRef backendName(Backend b) {
  switch (b) {
#define PAX_BACKEND(Id, Name, Description)                                     \
  case Backend::Id:                                                            \
    return Name;
#include "runtime/Backends.def"
  }
  return "?";
}

std::string backendNames() {
  std::string names;
#define PAX_BACKEND(Id, Name, Description)                                     \
  names += (names.empty() ? "" : "|") + std::string(Name);
#include "runtime/Backends.def"
  return names;
}

#ifndef PAX_HAVE_CUDA
llvm::Expected<std::unique_ptr<Device>> makeCudaDevice(unsigned) {
  return llvm::createStringError(
      "this paxrun was built without the CUDA backend (no CUDA toolkit was "
      "found when it was built)");
}

void setAllowTf32(bool) {}
#endif

llvm::Expected<std::unique_ptr<Device>> makeDevice(Backend b,
                                                   unsigned ordinal) {
  switch (b) {
  case Backend::Cpu:
    return makeCpuDevice();
  case Backend::Cuda:
    return makeCudaDevice(ordinal);
  case Backend::CudaEmulated:
    return makeEmulatedCudaDevice();
  }
  return llvm::createStringError("unknown backend");
}

} // namespace pax::runtime
