//===- MatmulChain.cpp - A matrix product and its epilogue as one kernel --===//
#include "runtime/cpu/MatmulChain.h"

#include "runtime/cpu/DnnlMatmul.h"
#include "runtime/cpu/Epilogue.h"
#include "runtime/cpu/ScalarOps.h"

#include <optional>

namespace pax::runtime::cpu {
namespace {

/// The links after the product, in the order they may come.
enum class Link { Activation, Add };

/// The activation \p c is, or none.
Activation activationOf(const plan::Compute &c) {
  if (c.inputs_size() != 1)
    return Activation::None;
  if (c.kind() == "relu")
    return Activation::Relu;
  if (c.kind() == "gelu")
    return scalarParams(ScalarOp::Gelu, c).tanhGelu ? Activation::GeluTanh
                                                    : Activation::GeluErf;
  return Activation::None;
}

/// What \p c is as the link after \p stage (the last link so far; none
/// right after the product), reading \p buffer, the result before it.
std::optional<Link> linkAfter(std::optional<Link> stage, const plan::Compute &c,
                              uint32_t buffer) {
  int in = pointwiseInput(c, buffer);
  if (in < 0)
    return std::nullopt;
  if (!stage && activationOf(c) != Activation::None)
    return Link::Activation;
  if ((c.kind() == "add" || c.kind() == "sum") && c.inputs_size() == 2 &&
      stage != Link::Add && sameExprs(c.inputs(1 - in), c.outputs(0)))
    return Link::Add;
  return std::nullopt;
}

/// \p links' epilogue, from the buffers; false where the addend does not
/// lie as \p out does.
bool epilogue(llvm::ArrayRef<ChainLink> links, const Tensor &out,
              MatmulEpilogue &epi) {
  for (size_t k = 1; k < links.size(); ++k) {
    const plan::Compute &c = *links[k].compute;
    uint32_t buffer = links[k - 1].compute->outputs(0).buffer();
    if (activationOf(c) != Activation::None &&
        epi.activation == Activation::None && !epi.addend) {
      epi.activation = activationOf(c);
      continue;
    }
    epi.addend = links[k].inputs[size_t(1 - pointwiseInput(c, buffer))];
    if (!denseLike(*epi.addend, out))
      return false;
  }
  return true;
}

/// True when \p out shares no byte with what the product reads (the addend
/// may lie exactly where the result goes).
bool apart(const ChainLink &product, const MatmulEpilogue &epi,
           const Tensor &out) {
  for (const Tensor *t : product.inputs)
    if (t->sharesBytes(out))
      return false;
  return !epi.addend || !epi.addend->sharesBytes(out) ||
         (epi.addend->data.data() == out.data.data() &&
          epi.addend->data.size() == out.data.size());
}

} // namespace

size_t matmulChainLength(llvm::ArrayRef<const plan::Compute *> chain) {
  if (chain.empty() || gemmBackend() != "onednn" ||
      (chain[0]->kind() != "matmul" && chain[0]->kind() != "gemm") ||
      chain[0]->outputs_size() != 1)
    return 1;
  return chainLength<Link>(chain, linkAfter);
}

llvm::Expected<bool> runMatmulChain(llvm::ArrayRef<ChainLink> links,
                                    DnnlCache &cache) {
  if (links.size() < 2 || links.back().outputs.size() != 1)
    return false;
  const ChainLink &product = links[0];
  Tensor *outs[1] = {links.back().outputs[0]};
  std::optional<Prepared> p = prepareHead(product, outs);
  if (!p)
    return false;
  std::optional<MatmulDims> d = matchMatmul(*p, p->ins[0]->dtype != plan::F32);
  MatmulEpilogue epi;
  if (!d || !epilogue(links, *outs[0], epi) || !apart(product, epi, *outs[0]))
    return false;
  std::optional<Tensor> copy; // (a residual added in place)
  copyIfInPlace(epi.addend, *outs[0], copy);
  const plan::Compute &c = *product.compute;
  bool gemm = c.kind() == "gemm";
  return runMatmulDnnl(*p, *d, gemm ? float(attrReal(c, "alpha", 1.0)) : 1.0f,
                       gemm ? float(attrReal(c, "beta", 1.0)) : 1.0f, &cache,
                       epi, links.back().compute);
}

} // namespace pax::runtime::cpu
