//===- Backend.h - The device interface the interpreter runs on -*- C++ -*-===//
//
// runDevice (Device.h) interprets one device's program against a Device
// (its arena, its kernels) and a Communicator (its collectives); each
// backend of Backends.def is one Device implementation.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_BACKEND_H
#define PAX_RUNTIME_BACKEND_H

#include "codegen/plan/LibraryEpilogue.h"
#include "codegen/plan/Plan.pb.h"
#include "runtime/Tensor.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace pax::runtime {

enum class Backend {
#define PAX_BACKEND(Id, Name, Description) Id,
#include "runtime/Backends.def"
};

/// The backend named \p name ("cpu"), if there is one.
std::optional<Backend> parseBackend(llvm::StringRef name);
llvm::StringRef backendName(Backend b);
/// "cpu|cuda", for messages and --help.
std::string backendNames();

/// One device of a backend. Its buffers are Tensors whose bytes are views
/// of the device's arena: host memory the kernels and the host read
/// directly where hostAccessible(), device memory (never dereferenced on
/// the host) otherwise.
/// One compute of a chain a device may run as one kernel, with its
/// buffers (Device::launchChain).
struct ChainLink {
  const plan::Compute *compute = nullptr;
  llvm::SmallVector<const Tensor *, 5> inputs;
  llvm::SmallVector<Tensor *, 1> outputs;
};

class Device {
public:
  virtual ~Device();
  virtual Backend backend() const = 0;
  /// Whether the host reads and writes the buffers directly (no staging).
  virtual bool hostAccessible() const = 0;
  /// Makes the arena at least \p bytes long; kept from run to run, its
  /// contents too while it need not grow, and the buffers of the last run
  /// stay valid until the next reserve.
  virtual llvm::Error reserve(int64_t bytes) = 0;
  /// The buffer of \p dtype and \p shape at \p offset of the arena,
  /// zero-filled when \p zero (else holding what the arena holds there).
  /// The caller checked it lies inside.
  virtual Tensor allocate(plan::DType dtype, std::vector<int64_t> shape,
                          int64_t offset, bool zero) = 0;
  /// Copies host tensor \p from into buffer \p to (same dtype and size).
  virtual llvm::Error upload(const Tensor &from, Tensor &to) = 0;
  /// Copies buffer \p from into host tensor \p to (same dtype and size).
  virtual llvm::Error download(const Tensor &from, Tensor &to) = 0;
  /// Runs compute \p c over buffers.
  virtual llvm::Error launch(const plan::Compute &c,
                             llvm::ArrayRef<const Tensor *> inputs,
                             llvm::ArrayRef<Tensor *> outputs) = 0;
  /// Copies (with \p add: adds) the overlap of buffer \p in (its box
  /// starting at \p inLo) into buffer \p out (starting at \p outLo), as
  /// moveOverlap does. \p in may be another device's buffer where
  /// canRead(that device).
  virtual llvm::Error copyOverlap(const Tensor &in,
                                  llvm::ArrayRef<int64_t> inLo, Tensor &out,
                                  llvm::ArrayRef<int64_t> outLo, bool add) = 0;
  /// Sets every element of buffer \p t to zero.
  virtual llvm::Error zero(Tensor &t) = 0;
  /// Whether copyOverlap on this device reads \p other's buffers directly
  /// (one address space: the CPU's devices, or streams of one GPU).
  virtual bool canRead(const Device &other) const = 0;
  /// Waits until the device's work so far is done.
  virtual llvm::Error synchronize() = 0;

  /// How many computes of \p chain, from the first, the device runs as one
  /// kernel (launchChain); 1 when none. In a chain each compute reads the
  /// result of the one before, its only output, which nothing else reads
  /// and the program does not return. \p results: each compute's result
  /// element type.
  virtual size_t fuses(llvm::ArrayRef<const plan::Compute *> chain,
                       llvm::ArrayRef<plan::DType> results) {
    (void)chain;
    (void)results;
    return 1;
  }
  /// Runs \p chain (as many computes as fuses said) as one kernel: only
  /// the last compute's outputs are written. False, having written
  /// nothing, where it cannot after all (the caller runs each compute).
  virtual llvm::Expected<bool> launchChain(llvm::ArrayRef<ChainLink> chain) {
    (void)chain;
    return false;
  }

  /// Called before each run of a program. \p resident: the previous run
  /// was the same program, and its buffers marked Tensor::resident hold
  /// the same values at the same addresses; else whatever the device
  /// derived from buffers (packed weights) is dropped.
  virtual void beginRun(bool resident) { (void)resident; }

  /// Whether it runs a plan's generated kernels (DeviceProgram.kernels) in
  /// place of the computes they cover; the CPU backend runs the computes.
  virtual bool runsGeneratedKernels() const { return false; }
  /// Compiles (or finds compiled) \p prog's generated kernels, before its
  /// first run; again for the same program is a no-op.
  virtual llvm::Error loadKernels(const plan::DeviceProgram &prog) {
    return llvm::Error::success();
  }
  /// Runs loaded kernel \p k over \p params, its buffers in order.
  virtual llvm::Error launchKernel(const plan::GeneratedKernel &k,
                                   llvm::ArrayRef<Tensor *> params);

  /// Whether it runs a product and the epilogue a library runs with it
  /// (plan::libraryEpilogues) as one call, in place of the epilogue's
  /// generated kernel.
  virtual bool runsLibraryEpilogues() const { return false; }
  /// Runs product \p c over its \p inputs with epilogue \p e: \p addend
  /// (null when none; it may be \p out itself) added, then e.activation,
  /// into \p out; the product itself is never stored.
  virtual llvm::Error launchWithEpilogue(const plan::Compute &c,
                                         llvm::ArrayRef<const Tensor *> inputs,
                                         const plan::LibraryEpilogue &e,
                                         const Tensor *addend, Tensor &out);
};

/// A device of backend \p b; \p ordinal picks among the machine's devices
/// of that kind (a GPU's index). An error says why there is none (a
/// backend not built in, no such device).
llvm::Expected<std::unique_ptr<Device>> makeDevice(Backend b,
                                                   unsigned ordinal = 0);

/// Lets the CUDA backend's f32 matrix products use TF32 tensor cores
/// (paxrun --allow-tf32; off by default, so results stay comparable with
/// the CPU's). No effect without the CUDA backend.
void setAllowTf32(bool on);

/// The CPU backend's device (cpu/CpuDevice.cpp).
std::unique_ptr<Device> makeCpuDevice();
/// The cuda-emulated backend's device (EmulatedCudaDevice.cpp).
std::unique_ptr<Device> makeEmulatedCudaDevice();
/// The CUDA backend's device (cuda/CudaDevice.cpp), or why there is none.
llvm::Expected<std::unique_ptr<Device>> makeCudaDevice(unsigned ordinal);

} // namespace pax::runtime

#endif // PAX_RUNTIME_BACKEND_H
