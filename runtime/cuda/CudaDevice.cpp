//===- CudaDevice.cpp - The CUDA backend's device -------------------------===//
//
// A device of a plan on one GPU: its own stream, its arena in the GPU's
// memory (one cudaMalloc, buffers at the plan's offsets), cuBLAS for the
// matrix products, cuDNN for convolutions, a block per row for softmax and
// norm rows, and the generic kernel (CudaKernels.cu) for elementwise ops,
// data movement, gathers, reductions and scatter-adds.
// Several devices may share one GPU (virtual devices: a stream and an arena
// each), and exchange by device-to-device copies on the thread transport,
// as devices on GPUs with peer access do.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/CudaDevice.h"
#include "runtime/Backend.h"
#include "runtime/Exchange.h"
#include "runtime/GemmShape.h"
#include "runtime/PointKernelsHost.h"
#include "runtime/WindowShape.h"
#include "runtime/cpu/Attention.h"
#include "runtime/cpu/KernelContext.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/Recurrent.h"
#include "runtime/cpu/Reduction.h"
#include "runtime/cpu/ScalarOps.h"
#include "runtime/cuda/CudaGemm.h"
#ifdef PAX_HAVE_CUDNN
#include "runtime/cuda/CudaDnn.h"
#endif
#include "runtime/GenerateKernels.h"
#include "runtime/cuda/CudaKernels.h"
#include "runtime/cuda/Nvrtc.h"

#include "codegen/plan/Kernels.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

namespace pax::runtime {

namespace {

std::atomic<bool> allowTf32{false};

/// PAX_CUDA_GENERIC=1 runs every compute but the matrix products on the
/// generic kernel, the reference the library and row kernels are checked
/// against.
bool genericOnly() {
  static const bool on = [] {
    const char *v = std::getenv("PAX_CUDA_GENERIC");
    return v && *v && std::string(v) != "0";
  }();
  return on;
}

llvm::Error cudaError(cudaError_t e, const llvm::Twine &what) {
  return llvm::createStringError(what + ": " + cudaGetErrorString(e));
}

/// Whether GPU \p gpu reads GPU \p peer's memory, enabling peer access
/// the first time a pair is asked.
bool enablePeer(int gpu, int peer) {
  static std::mutex m;
  static std::map<std::pair<int, int>, bool> known;
  std::lock_guard<std::mutex> lock(m);
  auto [it, fresh] = known.try_emplace({gpu, peer}, false);
  if (!fresh)
    return it->second;
  int can = 0;
  if (cudaDeviceCanAccessPeer(&can, gpu, peer) != cudaSuccess || !can)
    return false;
  int current = 0;
  cudaGetDevice(&current);
  cudaSetDevice(gpu);
  cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled) {
    cudaGetLastError(); // not an error here
    e = cudaSuccess;
  }
  cudaSetDevice(current);
  return it->second = e == cudaSuccess;
}

class CudaDevice final : public Device {
public:
  explicit CudaDevice(int gpu) : gpu(gpu) {}
  ~CudaDevice() override {
    cudaSetDevice(gpu);
    if (stream)
      cudaStreamSynchronize(stream);
    cudaFree(arena);
    cudaFree(scratch);
    cudaFree(status);
    gemm.reset();
    generated.reset(); // its libraries, while the GPU is current
#ifdef PAX_HAVE_CUDNN
    dnn.reset();
#endif
    if (stream)
      cudaStreamDestroy(stream);
  }

  llvm::Error init() {
    if (cudaError_t e = cudaSetDevice(gpu))
      return cudaError(e, "GPU " + llvm::Twine(gpu));
    if (cudaError_t e =
            cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking))
      return cudaError(e, "a stream on GPU " + llvm::Twine(gpu));
    if (cudaError_t e = cudaMalloc(&scratch, sizeof(Generic)))
      return cudaError(e, "GPU " + llvm::Twine(gpu));
    if (cudaError_t e = cudaMalloc(&status, sizeof(GenericStatus)))
      return cudaError(e, "GPU " + llvm::Twine(gpu));
    auto g = cuda::CudaGemm::create(stream);
    if (!g)
      return g.takeError();
    gemm = std::move(*g);
#ifdef PAX_HAVE_CUDNN
    auto d = cuda::CudaDnn::create(stream);
    if (!d)
      return d.takeError();
    dnn = std::move(*d);
#endif
    return llvm::Error::success();
  }

  Backend backend() const override { return Backend::Cuda; }
  bool hostAccessible() const override { return false; }

  llvm::Error reserve(int64_t bytes) override {
    if (bytes < 0)
      return llvm::createStringError("a negative arena size");
    if (auto err = current())
      return err;
    if (bytes <= capacity)
      return llvm::Error::success();
    if (cudaError_t e = cudaStreamSynchronize(stream))
      return cudaError(e, "GPU " + llvm::Twine(gpu));
    cudaFree(arena);
    arena = nullptr;
    capacity = 0;
    if (cudaError_t e = cudaMalloc(&arena, size_t(bytes)))
      return cudaError(
          e,
          llvm::formatv("an arena of {0} bytes on GPU {1}", bytes, gpu).str());
    capacity = bytes;
    return llvm::Error::success();
  }

  Tensor allocate(plan::DType dtype, std::vector<int64_t> shape, int64_t offset,
                  bool zero) override {
    Tensor t = Tensor::view(dtype, std::move(shape),
                            static_cast<uint8_t *>(arena) + offset, false);
    if (zero && !t.data.empty())
      record(cudaMemsetAsync(t.data.data(), 0, t.data.size(), stream));
    return t;
  }

  // Synchronous both ways: the host tensor may go away when they return.
  llvm::Error upload(const Tensor &from, Tensor &to) override {
    return copy(from, to, cudaMemcpyHostToDevice);
  }
  llvm::Error download(const Tensor &from, Tensor &to) override {
    return copy(from, to, cudaMemcpyDeviceToHost);
  }

  llvm::Error launch(const plan::Compute &c,
                     llvm::ArrayRef<const Tensor *> inputs,
                     llvm::ArrayRef<Tensor *> outputs) override {
    auto id = plan::computeKernel(c);
    if (!id)
      return id.takeError();
    if (auto err = current())
      return err;
    using plan::KernelId;
    if (*id == KernelId::Recurrent || *id == KernelId::RecurrentGrad)
      return runRecurrent(c, inputs, outputs, *id == KernelId::RecurrentGrad);
    if (*id == KernelId::Attention)
      return runAttention(c, inputs, outputs);
    auto p = prepare(c, inputs, outputs);
    if (!p)
      return p.takeError();
    switch (*id) {
    case KernelId::Gemm:
      return runProduct(*p);
    case KernelId::Conv2D: {
#ifdef PAX_HAVE_CUDNN
      // cuDNN where the windows are symmetrically padded, NCHW or
      // channels-last (every convolution of the CNNs seen so far), f32 or
      // 16-bit; otherwise the generic kernel.
      if (!genericOnly())
        if (auto s = matchConv2D(*p, attrInt(c, "group", 1),
                                 p->ins[0]->dtype != plan::F32)) {
          auto done = dnn->conv(*p, *s, allowTf32.load());
          if (!done)
            return done.takeError();
          if (*done)
            return pending(c);
        }
#endif
      return runGeneric(*p, *id);
    }
    case KernelId::Pointwise:
    case KernelId::Copy:
    case KernelId::Reduce:
    case KernelId::ScatterAdd:
    case KernelId::SoftmaxRows:
    case KernelId::NormRows:
      return runGeneric(*p, *id, /*rows=*/!genericOnly());
    case KernelId::BatchNorm:
    case KernelId::Pool2D:
    case KernelId::Lrn:
    case KernelId::Scan:
    case KernelId::TopK:
    case KernelId::Random:
      return runGeneric(*p, *id);
    case KernelId::Recurrent:
    case KernelId::RecurrentGrad:
      return runRecurrent(c, inputs, outputs, *id == KernelId::RecurrentGrad);
    case KernelId::Attention:
      return runAttention(c, inputs, outputs);
    }
    return computeError(c, "kernel '" + c.kernel() +
                               "' does not run on the cuda backend");
  }

  llvm::Error copyOverlap(const Tensor &in, llvm::ArrayRef<int64_t> inLo,
                          Tensor &out, llvm::ArrayRef<int64_t> outLo,
                          bool add) override {
    if (in.dtype != out.dtype || in.shape.size() != out.shape.size() ||
        inLo.size() != in.shape.size() || outLo.size() != out.shape.size())
      return llvm::createStringError(
          "a copy between buffers of different types or ranks");
    size_t rank = in.shape.size();
    if (rank > size_t(flat::kMaxRank))
      return llvm::createStringError("a copy of rank " + llvm::Twine(rank) +
                                     " (the cuda backend copies " +
                                     llvm::Twine(flat::kMaxRank) + " at most)");
    if (auto err = current())
      return err;
    cuda::BoxCopy b;
    b.rank = int32_t(rank);
    b.dtype = int32_t(in.dtype);
    b.add = add;
    b.elements = 1;
    int64_t inStride = 1, outStride = 1;
    for (size_t i = rank; i-- > 0;) {
      int64_t lo = std::max(inLo[i], outLo[i]);
      int64_t hi = std::min(inLo[i] + in.shape[i], outLo[i] + out.shape[i]);
      if (hi <= lo)
        return llvm::Error::success(); // no overlap
      b.size[i] = hi - lo;
      b.srcStride[i] = inStride;
      b.dstStride[i] = outStride;
      b.srcOffset += (lo - inLo[i]) * inStride;
      b.dstOffset += (lo - outLo[i]) * outStride;
      b.elements *= hi - lo;
      inStride *= in.shape[i];
      outStride *= out.shape[i];
    }
    record(cuda::launchBoxCopy(b, in.data.data(), out.data.data(), stream));
    return sticky();
  }

  llvm::Error zero(Tensor &t) override {
    if (t.data.empty())
      return llvm::Error::success();
    if (auto err = current())
      return err;
    record(cudaMemsetAsync(t.data.data(), 0, t.data.size(), stream));
    return sticky();
  }

  cuda::StreamOf streamOf() const { return {gpu, stream}; }

  /// Another GPU's buffers are read directly where the two GPUs have peer
  /// access (NVLink or PCIe peer-to-peer), enabled here once per pair.
  bool canRead(const Device &other) const override {
    if (other.backend() != Backend::Cuda)
      return false;
    int peer = static_cast<const CudaDevice &>(other).gpu;
    return peer == gpu || enablePeer(gpu, peer);
  }

  llvm::Error synchronize() override {
    if (auto err = current())
      return err;
    record(cudaStreamSynchronize(stream));
    return sticky();
  }

  /// Where NVRTC cannot be loaded, the computes run one by one instead
  /// (said once).
  bool runsGeneratedKernels() const override {
    static const bool available = [] {
      std::string why;
      if (cuda::nvrtcAvailable(why))
        return true;
      llvm::errs() << "paxrun: warning: " << why
                   << "; the CUDA backend runs the computes of the plan's "
                      "generated kernels one by one\n";
      return false;
    }();
    return available;
  }

  llvm::Error loadKernels(const plan::DeviceProgram &prog) override {
    if (generated && loadedFor == kernelsIdentity(prog))
      return llvm::Error::success();
    if (auto err = current())
      return err;
    auto g = cuda::GpuKernels::load(prog, gpu);
    if (!g)
      return g.takeError();
    generated = std::move(*g);
    loadedFor = kernelsIdentity(prog);
    return llvm::Error::success();
  }

  llvm::Error launchKernel(const plan::GeneratedKernel &k,
                           llvm::ArrayRef<Tensor *> params) override {
    if (auto err = current())
      return err;
    if (!generated)
      return llvm::createStringError("generated kernel " + k.name() +
                                     " is not loaded");
    return generated->launch(k, params, stream);
  }

  /// Products with their epilogues on cuBLASLt (not with
  /// PAX_CUDA_GENERIC=1, whose products run apart from their kernels).
  bool runsLibraryEpilogues() const override { return !genericOnly(); }

  llvm::Error launchWithEpilogue(const plan::Compute &c,
                                 llvm::ArrayRef<const Tensor *> inputs,
                                 const plan::LibraryEpilogue &e,
                                 const Tensor *addend, Tensor &out) override {
    if (auto err = current())
      return err;
    Tensor *outs[] = {&out};
    auto p = prepare(c, inputs, outs);
    if (!p)
      return p.takeError();
    auto shape = matchGemm(*p);
    if (shape) {
      auto done =
          gemm->runWithEpilogue(*p, *shape, allowTf32.load(), e, addend);
      if (!done)
        return done.takeError();
      if (*done)
        return pending(c);
    } else {
      llvm::consumeError(shape.takeError());
    }
    return epilogueApart(c, inputs, e, addend, out);
  }

private:
  /// A matmul or gemm: cuBLAS where the maps are a strided batched GEMM
  /// (every matmul of the models seen so far; a row-vector bias as
  /// cuBLASLt's bias epilogue), otherwise the generic contraction.
  llvm::Error runProduct(const Prepared &p) {
    const plan::Compute &c = p.c;
    auto shape = matchGemm(p);
    if (!shape) {
      llvm::consumeError(shape.takeError());
      return runGeneric(p, plan::KernelId::Gemm);
    }
    if (plan::addsRowBias(c)) {
      plan::LibraryEpilogue bias;
      bias.bias = c.inputs(2).buffer();
      auto done =
          gemm->runWithEpilogue(p, *shape, allowTf32.load(), bias, nullptr);
      if (!done)
        return done.takeError();
      if (*done)
        return pending(c);
    }
    if (auto err = gemm->run(p, *shape, allowTf32.load()))
      return err;
    return pending(c);
  }

  /// Where cuBLASLt does not take a product's epilogue: the product into
  /// scratch memory, then the epilogue's own kernel.
  llvm::Error epilogueApart(const plan::Compute &c,
                            llvm::ArrayRef<const Tensor *> inputs,
                            const plan::LibraryEpilogue &e,
                            const Tensor *addend, Tensor &out) {
    addend = plan::addendApart(c, e, addend);
    if (addend && addend->dtype != out.dtype)
      return computeError(c, "a library epilogue adding another type");
    void *scratch = nullptr;
    if (cudaError_t err = cudaMallocAsync(&scratch, out.data.size(), stream))
      return computeError(c, cudaGetErrorString(err));
    Tensor product = Tensor::view(out.dtype, out.shape,
                                  static_cast<uint8_t *>(scratch), false);
    llvm::Error err = launch(c, inputs, {&product});
    if (!err)
      record(cuda::launchEpilogue(product.data.data(),
                                  addend ? addend->data.data() : nullptr,
                                  out.data.data(), int32_t(out.dtype),
                                  out.numel(), int(e.activation), stream));
    record(cudaFreeAsync(scratch, stream));
    if (err)
      return err;
    return pending(c);
  }

  /// Makes this device's GPU the thread's current one.
  llvm::Error current() {
    if (cudaError_t e = cudaSetDevice(gpu))
      return cudaError(e, "GPU " + llvm::Twine(gpu));
    return sticky();
  }

  /// Keeps the first failure; every later call reports it.
  void record(cudaError_t e) {
    if (e != cudaSuccess && failed == cudaSuccess)
      failed = e;
  }
  llvm::Error sticky() {
    if (failed != cudaSuccess)
      return cudaError(failed, "GPU " + llvm::Twine(gpu));
    return llvm::Error::success();
  }
  /// The sticky failure, named after compute \p c.
  llvm::Error pending(const plan::Compute &c) {
    if (failed != cudaSuccess)
      return computeError(c, llvm::Twine("on GPU ") + llvm::Twine(gpu) + ": " +
                                 cudaGetErrorString(failed));
    return llvm::Error::success();
  }

  /// Copies \p from into \p to (same type and size) and waits for it.
  llvm::Error copy(const Tensor &from, Tensor &to, cudaMemcpyKind kind) {
    if (from.dtype != to.dtype || from.data.size() != to.data.size())
      return llvm::createStringError(
          "a copy between tensors of different types or sizes");
    if (from.data.empty())
      return llvm::Error::success();
    if (auto err = current())
      return err;
    record(cudaMemcpyAsync(to.data.data(), from.data.data(), from.data.size(),
                           kind, stream));
    return synchronize();
  }

  /// An LSTM or GRU layer (or its gradient op): a thread per (direction,
  /// batch row), each with its scratch in device memory.
  llvm::Error runRecurrent(const plan::Compute &c,
                           llvm::ArrayRef<const Tensor *> inputs,
                           llvm::ArrayRef<Tensor *> outputs, bool grad) {
    auto l = cpu::prepareRecurrent(c, inputs, outputs);
    if (!l)
      return l.takeError();
    int64_t each = cpu::rowScratch(*l, grad);
    size_t bytes = size_t(std::max<int64_t>(1, l->dirs * l->batch * each)) *
                   sizeof(double);
    void *layer = nullptr, *work = nullptr;
    record(cudaMallocAsync(&layer, sizeof(recurrent::Layer), stream));
    record(cudaMallocAsync(&work, bytes, stream));
    if (auto err = pending(c))
      return err;
    record(cuda::launchRecurrent(*l, grad,
                                 static_cast<recurrent::Layer *>(layer),
                                 static_cast<double *>(work), stream));
    record(cudaFreeAsync(work, stream));
    record(cudaFreeAsync(layer, stream));
    return pending(c);
  }

  /// An attention compute (or a gradient), tiled (CudaAttention.cu).
  llvm::Error runAttentionTiled(const plan::Compute &c,
                                const attention::Problem &p) {
    void *problem = nullptr;
    record(cudaMallocAsync(&problem, sizeof(attention::Problem), stream));
    if (auto err = pending(c))
      return err;
    record(cuda::launchAttentionTiled(
        p, static_cast<attention::Problem *>(problem), stream));
    record(cudaFreeAsync(problem, stream));
    return pending(c);
  }

  /// An attention compute (or a gradient): a thread per row, each with its
  /// scratch in device memory.
  llvm::Error runAttention(const plan::Compute &c,
                           llvm::ArrayRef<const Tensor *> inputs,
                           llvm::ArrayRef<Tensor *> outputs) {
    auto p = cpu::prepareAttention(c, inputs, outputs);
    if (!p)
      return p.takeError();
    if (cuda::attentionTiled(*p))
      return runAttentionTiled(c, *p);
    size_t bytes = size_t(std::max<int64_t>(1, p->space.outerPoints *
                                                   attention::rowScratch(*p))) *
                   sizeof(double);
    void *problem = nullptr, *work = nullptr;
    record(cudaMallocAsync(&problem, sizeof(attention::Problem), stream));
    record(cudaMallocAsync(&work, bytes, stream));
    if (auto err = pending(c))
      return err;
    record(cuda::launchAttention(*p, static_cast<attention::Problem *>(problem),
                                 static_cast<double *>(work), stream));
    record(cudaFreeAsync(work, stream));
    record(cudaFreeAsync(problem, stream));
    return pending(c);
  }

  /// Runs \p p on the generic kernel, or with \p rows (softmax and norm
  /// rows) a thread block per row.
  llvm::Error runGeneric(const Prepared &p, plan::KernelId id,
                         bool rows = false) {
    const plan::Compute &c = p.c;
    Generic g;
    if (auto err = describeGeneric(p, id, g))
      return err;
    if (rows &&
        (g.op == GenericOp::SoftmaxRows || g.op == GenericOp::NormRows)) {
      record(cuda::launchRows(g, stream));
      return pending(c);
    }
    bool lookups = g.op == GenericOp::Gather ||
                   (g.op == GenericOp::ScatterAdd && g.inputs == 2);
    if (lookups)
      record(cudaMemsetAsync(status, 0, sizeof(GenericStatus), stream));
    record(cuda::launchGeneric(g, static_cast<Generic *>(scratch),
                               static_cast<GenericStatus *>(status), stream,
                               /*linear=*/!genericOnly()));
    if (!lookups)
      return pending(c);
    // A lookup outside its table is bad input: read the kernel's report.
    GenericStatus s;
    record(
        cudaMemcpyAsync(&s, status, sizeof s, cudaMemcpyDeviceToHost, stream));
    record(cudaStreamSynchronize(stream));
    if (auto err = pending(c))
      return err;
    if (s.badLookup)
      return computeError(
          c, llvm::formatv("index {0} is out of range for a dim of {1} "
                           "(valid: [-{1}, {1}))",
                           s.index, s.extent)
                 .str());
    return llvm::Error::success();
  }

  int gpu;
  cudaStream_t stream = nullptr;
  std::unique_ptr<cuda::GpuKernels> generated;
  std::string loadedFor; // kernelsIdentity of what is loaded
  void *arena = nullptr;
  int64_t capacity = 0;
  void *scratch = nullptr, *status = nullptr;
  std::unique_ptr<cuda::CudaGemm> gemm;
#ifdef PAX_HAVE_CUDNN
  std::unique_ptr<cuda::CudaDnn> dnn;
#endif
  cudaError_t failed = cudaSuccess;
};

} // namespace

void setAllowTf32(bool on) { allowTf32 = on; }

std::optional<cuda::StreamOf> cuda::streamOf(Device &d) {
  if (d.backend() != Backend::Cuda)
    return std::nullopt;
  return static_cast<CudaDevice &>(d).streamOf();
}

llvm::Expected<std::unique_ptr<Device>> makeCudaDevice(unsigned ordinal) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0)
    return llvm::createStringError(
        llvm::Twine("--backend=cuda: no CUDA device on this machine (") +
        (err != cudaSuccess ? cudaGetErrorString(err) : "none found") + ")");
  // Devices beyond the machine's GPUs share them round-robin: virtual
  // devices, each with its own stream and arena.
  auto d = std::make_unique<CudaDevice>(int(ordinal % unsigned(count)));
  if (auto e = d->init())
    return llvm::createStringError("--backend=cuda: " +
                                   llvm::toString(std::move(e)));
  return d;
}

} // namespace pax::runtime
