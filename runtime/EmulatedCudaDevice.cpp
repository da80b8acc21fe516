//===- EmulatedCudaDevice.cpp - The CUDA kernels' walk on the host ------===//
//
// The cuda-emulated backend: host memory, and for every compute what the
// CUDA backend runs, on the host, one point after another: the same
// descriptions (describeGeneric, describeGemmBias, prepareRecurrent), the
// same per-point functions (PointKernels.h, RecurrentMath.h), the same
// attention blocks (AttentionTiles.h, a block's threads in turn) and the same
// BLAS calls (matchGemm, run by referenceGemm in double). paxrun --verify
// against the CPU checks the GPU kernels' logic on machines without a GPU;
// only the launches, cuBLAS itself and the transports are left to a GPU.
//
//===----------------------------------------------------------------------===//
#include "runtime/AttentionTiles.h"
#include "runtime/GemmShape.h"
#include "runtime/GenerateKernels.h"
#include "runtime/HostKernels.h"
#include "runtime/HostMemoryDevice.h"
#include "runtime/PointKernelsHost.h"
#include "runtime/ScalarMath.h"
#include "runtime/cpu/Attention.h"
#include "runtime/cpu/Recurrent.h"

#include <memory>
#include <vector>

namespace pax::runtime {

namespace {

/// Attention compute \p p over tiles, as the CUDA backend's thread blocks
/// run it, a block after another.
template <int D, attention::Pass P>
void runAttentionTiles(const attention::Problem &p) {
  using namespace attention::tiles;
  auto tile = std::make_unique<Tile<D>>();
  std::vector<Row<D, P>> rows(kQueries);
  int64_t n = p.space.extents[rowDim(p)];
  for (int64_t b = 0; b < batchPoints(p); ++b)
    for (int64_t r0 = 0; r0 < n; r0 += kQueries)
      runBlock(p, b, r0, *tile, rows.data());
}

template <int D> void runAttentionTiles(const attention::Problem &p) {
  using attention::Pass;
  if (p.pass == Pass::Forward)
    return runAttentionTiles<D, Pass::Forward>(p);
  if (p.pass == Pass::GradQ)
    return runAttentionTiles<D, Pass::GradQ>(p);
  return runAttentionTiles<D, Pass::GradKV>(p);
}

/// Attention compute \p p as the CUDA backend runs it: over tiles where it
/// can, else a row at a time, as the CUDA kernel's threads run them.
void runAttention(const attention::Problem &p) {
  switch (attention::tiles::tiled(p) ? attention::tiles::headBucket(p) : 0) {
  case 32:
    return runAttentionTiles<32>(p);
  case 64:
    return runAttentionTiles<64>(p);
  case 128:
    return runAttentionTiles<128>(p);
  default:
    break;
  }
  std::vector<double> work(
      size_t(std::max<int64_t>(1, attention::rowScratch(p))));
  for (int64_t r = 0; r < p.space.outerPoints; ++r)
    attention::runRows(p, r, 1, work.data());
}

class EmulatedCudaDevice final : public HostMemoryDevice {
public:
  Backend backend() const override { return Backend::CudaEmulated; }

  llvm::Error launch(const plan::Compute &c,
                     llvm::ArrayRef<const Tensor *> inputs,
                     llvm::ArrayRef<Tensor *> outputs) override {
    auto id = plan::computeKernel(c);
    if (!id)
      return id.takeError();
    using plan::KernelId;
    if (*id == KernelId::Recurrent || *id == KernelId::RecurrentGrad) {
      bool grad = *id == KernelId::RecurrentGrad;
      auto l = cpu::prepareRecurrent(c, inputs, outputs);
      if (!l)
        return l.takeError();
      std::vector<double> work(
          size_t(std::max<int64_t>(1, cpu::rowScratch(*l, grad))));
      for (int64_t db = 0; db < l->dirs * l->batch; ++db)
        grad ? recurrent::gradRow(*l, db / l->batch, db % l->batch, work.data())
             : recurrent::forwardRow(*l, db / l->batch, db % l->batch,
                                     work.data());
      return llvm::Error::success();
    }
    if (*id == KernelId::Attention) {
      auto a = cpu::prepareAttention(c, inputs, outputs);
      if (!a)
        return a.takeError();
      runAttention(*a);
      return llvm::Error::success();
    }
    auto p = prepare(c, inputs, outputs);
    if (!p)
      return p.takeError();
    if (*id == KernelId::Gemm) {
      auto shape = matchGemm(*p);
      if (shape)
        return gemm(*p, *shape);
      llvm::consumeError(shape.takeError());
    }
    Generic g;
    if (auto err = describeGeneric(*p, *id, g))
      return err;
    return emulateGeneric(c, g);
  }

  bool runsGeneratedKernels() const override { return true; }

  /// As the cuda backend decides it, so that the decision is checked on
  /// the host: the product into a host tensor, then the epilogue in double
  /// (the addend may be \p out itself).
  bool runsLibraryEpilogues() const override { return true; }
  llvm::Error launchWithEpilogue(const plan::Compute &c,
                                 llvm::ArrayRef<const Tensor *> inputs,
                                 const plan::LibraryEpilogue &e,
                                 const Tensor *addend, Tensor &out) override {
    addend = plan::addendApart(c, e, addend);
    Tensor product = Tensor::zeros(out.dtype, out.shape);
    if (auto err = launch(c, inputs, {&product}))
      return err;
    ScalarParams params;
    params.tanhGelu = true;
    using Activation = plan::LibraryEpilogue::Activation;
    for (int64_t i = 0; i < out.numel(); ++i) {
      double v = product.real(i) + (addend ? addend->real(i) : 0.0);
      if (e.activation != Activation::None)
        v = scalar::activation(
            e.activation == Activation::Relu ? ScalarOp::Relu : ScalarOp::Gelu,
            v, 0.0, params);
      out.setReal(i, v);
    }
    return llvm::Error::success();
  }

  llvm::Error loadKernels(const plan::DeviceProgram &prog) override {
    if (kernels && loadedFor == kernelsIdentity(prog))
      return llvm::Error::success();
    auto k = HostKernels::load(prog);
    if (!k)
      return k.takeError();
    kernels = std::move(*k);
    loadedFor = kernelsIdentity(prog);
    return llvm::Error::success();
  }

  /// All the kernel's points on the host, in chunks the way the GPU's
  /// blocks take them (each point alone: any order computes the same).
  llvm::Error launchKernel(const plan::GeneratedKernel &k,
                           llvm::ArrayRef<Tensor *> params) override {
    HostKernelEntry f = kernels ? kernels->entry(k.name()) : nullptr;
    if (!f)
      return llvm::createStringError("generated kernel " + k.name() +
                                     " is not loaded");
    gen::Args args{};
    for (size_t i = 0; i < params.size() && i < size_t(gen::kMaxParams); ++i)
      args.buf[i] = params[i]->data.data();
    constexpr int64_t kBlock = 256;
    for (int64_t b = 0; b < k.points(); b += kBlock)
      f(args, b, std::min(k.points(), b + kBlock));
    return llvm::Error::success();
  }

private:
  std::unique_ptr<HostKernels> kernels;
  std::string loadedFor; // kernelsIdentity of what is loaded

  /// The BLAS calls of \p s, in double; gemm's C copied in first.
  static llvm::Error gemm(const Prepared &p, const GemmShape &s) {
    const plan::Compute &c = p.c;
    // The types cuBLAS takes (GemmTypes), refused as the GPU would.
    if (auto types = gemmTypes(p, s); !types)
      return types.takeError();
    auto doubles = [](const Tensor &t) {
      std::vector<double> v(size_t(t.numel()));
      for (int64_t i = 0; i < t.numel(); ++i)
        v[size_t(i)] = t.real(i);
      return v;
    };
    double alpha = c.kind() == "gemm" ? attrReal(c, "alpha", 1.0) : 1.0;
    double beta = 0;
    Tensor &out = *p.outs[0];
    if (p.ins.size() == 3) {
      beta = attrReal(c, "beta", 1.0);
      Generic g;
      describeGemmBias(p, g);
      if (auto err = emulateGeneric(c, g))
        return err;
    }
    std::vector<double> a = doubles(*p.ins[size_t(s.aInput)]);
    std::vector<double> b = doubles(*p.ins[size_t(s.bInput)]);
    std::vector<double> o = doubles(out);
    referenceGemm(s, alpha, a.data(), b.data(), beta, o.data());
    for (int64_t i = 0; i < out.numel(); ++i)
      out.setReal(i, o[size_t(i)]);
    return llvm::Error::success();
  }
};

} // namespace

std::unique_ptr<Device> makeEmulatedCudaDevice() {
  return std::make_unique<EmulatedCudaDevice>();
}

} // namespace pax::runtime
