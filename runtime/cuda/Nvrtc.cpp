//===- Nvrtc.cpp - Generated kernels compiled by NVRTC --------------------===//
#include "runtime/cuda/Nvrtc.h"

#include "runtime/GenerateKernels.h"
#include "runtime/GeneratedKernel.h"
#include "runtime/HostKernels.h"
#include "runtime/KernelCache.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nvrtc.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <vector>

namespace pax::runtime::cuda {

namespace {

/// NVRTC's entry points, from the library loaded at first use (not linked:
/// paxrun starts, and its other backends run, where CUDA has no NVRTC).
#define PAX_NVRTC_FUNCTIONS(X)                                                 \
  X(nvrtcGetErrorString)                                                       \
  X(nvrtcVersion)                                                              \
  X(nvrtcCreateProgram)                                                        \
  X(nvrtcCompileProgram)                                                       \
  X(nvrtcGetProgramLogSize)                                                    \
  X(nvrtcGetProgramLog)                                                        \
  X(nvrtcGetCUBINSize)                                                         \
  X(nvrtcGetCUBIN)                                                             \
  X(nvrtcDestroyProgram)
struct NvrtcApi {
#define PAX_NVRTC_FN(name) decltype(&::name) name = nullptr;
  PAX_NVRTC_FUNCTIONS(PAX_NVRTC_FN)
#undef PAX_NVRTC_FN
  std::string error; // why it could not be loaded
};

const NvrtcApi &nvrtc() {
  static const NvrtcApi api = [] {
    NvrtcApi a;
    void *lib = nullptr;
    for (const char *name : {"libnvrtc.so." PAX_NVRTC_MAJOR, "libnvrtc.so"})
      if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)))
        break;
    if (!lib) {
      a.error = std::string("no NVRTC (libnvrtc.so." PAX_NVRTC_MAJOR
                            ") to compile the plan's generated kernels: ") +
                dlerror() +
                " (put CUDA's libraries on LD_LIBRARY_PATH, or compile the "
                "plan with paxc --fuse-kernels=false)";
      return a;
    }
#define PAX_NVRTC_FN(name)                                                     \
  a.name = reinterpret_cast<decltype(a.name)>(dlsym(lib, #name));              \
  if (!a.name && a.error.empty())                                              \
    a.error = "NVRTC has no " #name;
    PAX_NVRTC_FUNCTIONS(PAX_NVRTC_FN)
#undef PAX_NVRTC_FN
    return a;
  }();
  return api;
}

/// The compiler's options for \p arch: unannotated functions (the shared
/// headers' host helpers) compile for the device.
std::vector<std::string> options(llvm::StringRef arch) {
  return {"--gpu-architecture=" + arch.str(), "--std=c++17", "-default-device"};
}

llvm::Error nvrtcFailure(const plan::GeneratedKernel &k, nvrtcResult r,
                         llvm::StringRef log) {
  return llvm::createStringError(
      llvm::formatv("NVRTC failed on generated kernel {0} ({1}): {2}\n{3}",
                    k.name(), llvm::join(k.ops(), ", "),
                    nvrtc().nvrtcGetErrorString(r), log)
          .str());
}

/// Compiles \p k with NVRTC and writes its cubin to \p path.
llvm::Error compile(const plan::GeneratedKernel &k, llvm::StringRef arch,
                    llvm::StringRef path) {
  std::vector<const char *> names, texts;
  for (const KernelHeader &h : kernelHeaders()) {
    names.push_back(h.name);
    texts.push_back(h.text);
  }
  nvrtcProgram prog;
  std::string file = k.name() + ".cu";
  nvrtcResult r =
      nvrtc().nvrtcCreateProgram(&prog, k.source().c_str(), file.c_str(),
                                 int(names.size()), texts.data(), names.data());
  if (r != NVRTC_SUCCESS)
    return nvrtcFailure(k, r, "");
  std::vector<std::string> opts = options(arch);
  std::vector<const char *> optPtrs;
  for (const std::string &o : opts)
    optPtrs.push_back(o.c_str());
  r = nvrtc().nvrtcCompileProgram(prog, int(optPtrs.size()), optPtrs.data());
  size_t logSize = 0;
  nvrtc().nvrtcGetProgramLogSize(prog, &logSize);
  std::string log(logSize, '\0');
  if (logSize)
    nvrtc().nvrtcGetProgramLog(prog, log.data());
  std::string cubin;
  if (r == NVRTC_SUCCESS) {
    size_t n = 0;
    r = nvrtc().nvrtcGetCUBINSize(prog, &n);
    cubin.resize(n);
    if (r == NVRTC_SUCCESS)
      r = nvrtc().nvrtcGetCUBIN(prog, cubin.data());
  }
  nvrtc().nvrtcDestroyProgram(&prog);
  if (r != NVRTC_SUCCESS)
    return nvrtcFailure(k, r, llvm::StringRef(log).rtrim('\0'));
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec)
    return llvm::createStringError(ec, "cannot write " + path);
  os << cubin;
  return llvm::Error::success();
}

} // namespace

bool nvrtcAvailable(std::string &why) {
  why = nvrtc().error;
  return why.empty();
}

std::string compilerVersion() {
  int major = 0, minor = 0;
  if (nvrtc().nvrtcVersion)
    nvrtc().nvrtcVersion(&major, &minor);
  return std::to_string(major) + "." + std::to_string(minor);
}

llvm::Expected<std::string> compileGenerated(const plan::GeneratedKernel &k,
                                             llvm::StringRef arch) {
  if (auto err = checkGenerated(k))
    return err;
  if (!nvrtc().error.empty())
    return llvm::createStringError(nvrtc().error);
  std::vector<std::string> opts = options(arch);
  std::string version = compilerVersion();
  llvm::SmallVector<llvm::StringRef, 8> parts = {"nvrtc", version,
                                                 generatorId(), k.source()};
  for (const std::string &o : opts)
    parts.push_back(o);
  auto path = cachedEntry(cacheKey(parts), ".cubin", [&](llvm::StringRef out) {
    return compile(k, arch, out);
  });
  if (!path)
    return path.takeError();
  auto buf = llvm::MemoryBuffer::getFile(*path, /*IsText=*/false,
                                         /*RequiresNullTerminator=*/false);
  if (!buf)
    return llvm::createStringError(buf.getError(), "cannot read " + *path);
  return (*buf)->getBuffer().str();
}

llvm::Expected<std::unique_ptr<GpuKernels>>
GpuKernels::load(const plan::DeviceProgram &prog, int gpu) {
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, gpu) ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, gpu))
    return llvm::createStringError("GPU " + std::to_string(gpu) +
                                   ": no compute capability");
  std::string arch = "sm_" + std::to_string(major * 10 + minor);
  size_t n = size_t(prog.kernels_size());
  std::vector<llvm::Expected<std::string>> cubins;
  for (size_t i = 0; i < n; ++i)
    cubins.emplace_back(std::string());
  tbb::parallel_for(size_t(0), n, [&](size_t i) {
    cubins[i] = compileGenerated(prog.kernels(int(i)), arch);
  });
  std::unique_ptr<GpuKernels> g(new GpuKernels());
  llvm::Error failed = llvm::Error::success();
  for (size_t i = 0; i < n; ++i) {
    const plan::GeneratedKernel &k = prog.kernels(int(i));
    if (!cubins[i]) {
      failed = llvm::joinErrors(std::move(failed), cubins[i].takeError());
      continue;
    }
    cudaLibrary_t lib = nullptr;
    cudaKernel_t kernel = nullptr;
    cudaError_t e = cudaLibraryLoadData(&lib, cubins[i]->data(), nullptr,
                                        nullptr, 0, nullptr, nullptr, 0);
    if (e == cudaSuccess) {
      g->libraries.push_back(lib);
      e = cudaLibraryGetKernel(&kernel, lib, k.name().c_str());
    }
    if (e != cudaSuccess)
      return llvm::createStringError(
          "generated kernel " + k.name() + ": cannot load it on GPU " +
          std::to_string(gpu) + ": " + cudaGetErrorString(e));
    g->kernels[k.name()] = kernel;
  }
  if (failed)
    return failed;
  return g;
}

GpuKernels::~GpuKernels() {
  for (void *lib : libraries)
    cudaLibraryUnload(static_cast<cudaLibrary_t>(lib));
}

llvm::Error GpuKernels::launch(const plan::GeneratedKernel &k,
                               llvm::ArrayRef<Tensor *> params,
                               void *stream) const {
  void *kernel = kernels.lookup(k.name());
  if (!kernel)
    return llvm::createStringError("generated kernel " + k.name() +
                                   " is not loaded");
  gen::Args args{};
  for (size_t i = 0; i < params.size() && i < size_t(gen::kMaxParams); ++i)
    args.buf[i] = params[i]->data.data();
  int64_t begin = 0, end = k.points();
  // A thread per point, or (a row kernel) a block per row; grid-stride
  // loops take what a grid of at most kMaxBlocks leaves.
  constexpr int64_t kMaxBlocks = 1 << 20;
  int64_t threads = k.rows() ? gen::kRowThreads : 256;
  int64_t blocks = k.rows() ? end : (end + threads - 1) / threads;
  dim3 grid(unsigned(std::clamp<int64_t>(blocks, 1, kMaxBlocks)));
  void *argv[] = {&args, &begin, &end};
  cudaError_t e = cudaLaunchKernel(static_cast<const void *>(kernel), grid,
                                   dim3(unsigned(threads)), argv, 0,
                                   static_cast<cudaStream_t>(stream));
  if (e != cudaSuccess)
    return llvm::createStringError("generated kernel " + k.name() + ": " +
                                   cudaGetErrorString(e));
  return llvm::Error::success();
}

} // namespace pax::runtime::cuda
