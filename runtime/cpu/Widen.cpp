//===- Widen.cpp - 16-bit float tensors through the f32 kernels -----------===//
#include "runtime/cpu/Widen.h"

#include "runtime/Elements.h"
#include "runtime/cpu/DnnlCache.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <tbb/parallel_for.h>

#include <deque>

namespace pax::runtime::cpu {
namespace {
using namespace elements;

bool is16BitFloat(const Tensor &t) {
  return t.dtype == plan::F16 || t.dtype == plan::BF16;
}

/// Elements per task of the conversions.
constexpr int64_t kGrain = 1 << 15;

/// A resident tensor's f32 copy, kept under the tensor's data address.
struct WideEntry final : DnnlCache::Entry {
  bool compiled() const override { return false; }
  Tensor wide;
};

/// \p t's f32 copy: \p cache's where \p t is resident and was copied
/// before, else a new one (kept when resident).
const Tensor *wideInput(const Tensor &t, DnnlCache *cache,
                        std::deque<Tensor> &own) {
  if (!cache || !t.resident) {
    own.push_back(widenToF32(t));
    return &own.back();
  }
  auto &e = cache->entry<WideEntry>(t.data.data());
  if (e.wide.data.empty() || e.wide.shape != t.shape) {
    e.wide = widenToF32(t);
    e.wide.resident = true;
  }
  return &e.wide;
}

} // namespace

bool holds16BitFloats(llvm::ArrayRef<const Tensor *> inputs,
                      llvm::ArrayRef<Tensor *> outputs) {
  return llvm::any_of(inputs,
                      [](const Tensor *t) { return is16BitFloat(*t); }) ||
         llvm::any_of(outputs,
                      [](const Tensor *t) { return is16BitFloat(*t); });
}

Tensor widenToF32(const Tensor &from) {
  Tensor out = Tensor::zeros(plan::F32, from.shape);
  const auto *in = reinterpret_cast<const uint16_t *>(from.data.data());
  auto *y = reinterpret_cast<float *>(out.data.data());
  bool bf16 = from.dtype == plan::BF16;
  tbb::parallel_for(int64_t(0), from.numel(), kGrain, [&](int64_t i0) {
    int64_t i1 = std::min(from.numel(), i0 + kGrain);
    if (bf16)
      for (int64_t i = i0; i < i1; ++i)
        y[i] = floatOfBits(uint32_t(in[i]) << 16);
    else
      for (int64_t i = i0; i < i1; ++i)
        y[i] = halfToFloat(in[i]);
  });
  return out;
}

void narrowFromF32(const Tensor &wide, Tensor &to) {
  const auto *x = reinterpret_cast<const float *>(wide.data.data());
  auto *out = reinterpret_cast<uint16_t *>(to.data.data());
  bool bf16 = to.dtype == plan::BF16;
  tbb::parallel_for(int64_t(0), to.numel(), kGrain, [&](int64_t i0) {
    int64_t i1 = std::min(to.numel(), i0 + kGrain);
    if (bf16)
      for (int64_t i = i0; i < i1; ++i)
        out[i] = floatToBf16(x[i]);
    else
      for (int64_t i = i0; i < i1; ++i)
        out[i] = floatToHalf(x[i]);
  });
}

bool holds16BitFloats(llvm::ArrayRef<ChainLink> chain) {
  return llvm::any_of(chain, [](const ChainLink &l) {
    auto wide = [](const Tensor *t) { return t && is16BitFloat(*t); };
    return llvm::any_of(l.inputs, wide) || llvm::any_of(l.outputs, wide);
  });
}

llvm::Expected<bool> runChainWidened(llvm::ArrayRef<ChainLink> chain,
                                     DnnlCache *cache, ChainOnTensors run) {
  std::deque<Tensor> own;
  // Each 16-bit result's f32 stand-in (between links: type and shape).
  llvm::DenseMap<const Tensor *, Tensor *> wideOf;
  llvm::SmallVector<ChainLink, 8> wide(chain.begin(), chain.end());
  for (ChainLink &l : wide) {
    for (const Tensor *&t : l.inputs) {
      if (auto it = wideOf.find(t); it != wideOf.end())
        t = it->second;
      else if (t && is16BitFloat(*t))
        t = wideInput(*t, cache, own);
    }
    for (Tensor *&t : l.outputs) {
      if (!is16BitFloat(*t))
        continue;
      Tensor &w = own.emplace_back();
      w.dtype = plan::F32;
      w.shape = t->shape;
      if (&l == &wide.back()) // written whole by the chain
        w = Tensor::zeros(plan::F32, t->shape);
      wideOf[t] = &w;
      t = &w;
    }
  }
  llvm::Expected<bool> ran = run(wide);
  if (!ran || !*ran)
    return ran;
  for (size_t k = 0; k < chain.back().outputs.size(); ++k)
    if (wide.back().outputs[k] != chain.back().outputs[k])
      narrowFromF32(*wide.back().outputs[k], *chain.back().outputs[k]);
  return true;
}

llvm::Error runWidened(llvm::ArrayRef<const Tensor *> inputs,
                       llvm::ArrayRef<Tensor *> outputs, DnnlCache *cache,
                       KernelOnTensors run) {
  std::deque<Tensor> own;
  llvm::SmallVector<const Tensor *, 6> ins;
  for (const Tensor *t : inputs)
    ins.push_back(is16BitFloat(*t) ? wideInput(*t, cache, own) : t);
  // Outputs start from their values: a compute may write part of one.
  llvm::SmallVector<Tensor *, 2> outs;
  for (Tensor *t : outputs) {
    if (!is16BitFloat(*t)) {
      outs.push_back(t);
      continue;
    }
    own.push_back(widenToF32(*t));
    outs.push_back(&own.back());
  }
  if (auto err = run(ins, outs))
    return err;
  for (size_t k = 0; k < outputs.size(); ++k)
    if (outs[k] != outputs[k])
      narrowFromF32(*outs[k], *outputs[k]);
  return llvm::Error::success();
}

} // namespace pax::runtime::cpu
