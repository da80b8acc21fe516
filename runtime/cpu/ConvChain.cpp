//===- ConvChain.cpp - A convolution and its epilogue as one kernel -------===//
#include "runtime/cpu/ConvChain.h"

#include "runtime/WindowShape.h"
#include "runtime/cpu/Epilogue.h"
#include "runtime/cpu/Gemm.h"

#include <optional>

namespace pax::runtime::cpu {
namespace {

/// The links after the convolution, in the order they may come.
enum class Link { Norm, Relu, Add, ReluAfter };

/// True for a 2-D convolution whose result is channels-last.
bool channelsLastConv(const plan::Compute &c) {
  if (c.kind() != "conv" || c.outputs_size() != 1 || c.inputs_size() < 2)
    return false;
  const plan::Access &y = c.outputs(0);
  bool grouped = attrInt(c, "group", 1) > 1;
  return y.exprs_size() == 4 &&
         isChannel(y.exprs(3), grouped ? 1 : -1, grouped ? 2 : 1);
}

/// True when batch norm \p c reads its four parameters along its result's
/// channel (the last dim of a channels-last result).
bool normAlongChannel(const plan::Compute &c) {
  const plan::Access &y = c.outputs(0);
  if (y.exprs_size() != 4)
    return false;
  for (int k = 1; k < 5; ++k)
    if (c.inputs(k).exprs_size() != 1 ||
        c.inputs(k).exprs(0).SerializeAsString() !=
            y.exprs(3).SerializeAsString())
      return false;
  return true;
}

/// What \p c is as the link after \p stage (the last link so far; none
/// right after the convolution), reading \p buffer, the result before it.
std::optional<Link> linkAfter(std::optional<Link> stage, const plan::Compute &c,
                              uint32_t buffer) {
  int in = pointwiseInput(c, buffer);
  if (in < 0)
    return std::nullopt;
  auto before = [&](Link l) { return !stage || *stage < l; };
  const std::string &kind = c.kind();
  if (kind == "batch_norm" && before(Link::Norm) && in == 0 &&
      c.inputs_size() == 5 && normAlongChannel(c))
    return Link::Norm;
  if (kind == "relu" && c.inputs_size() == 1) {
    if (before(Link::Relu))
      return Link::Relu;
    if (stage == Link::Add)
      return Link::ReluAfter;
  }
  if ((kind == "add" || kind == "sum") && c.inputs_size() == 2 &&
      before(Link::Add) && sameExprs(c.inputs(1 - in), c.outputs(0)))
    return Link::Add;
  return std::nullopt;
}

/// \p links' epilogue, from the buffers; false where they do not fit the
/// convolution of \p s writing \p out.
bool epilogue(llvm::ArrayRef<ChainLink> links, const Window2DShape &s,
              const Tensor &out, ConvEpilogue &epi) {
  std::optional<Link> stage;
  for (size_t k = 1; k < links.size(); ++k) {
    const plan::Compute &c = *links[k].compute;
    uint32_t buffer = links[k - 1].compute->outputs(0).buffer();
    stage = linkAfter(stage, c, buffer);
    if (!stage)
      return false;
    if (*stage == Link::Norm) {
      for (int j = 0; j < 4; ++j) {
        epi.norm[j] = links[k].inputs[size_t(j + 1)];
        if (!denseF32(*epi.norm[j], s.g * s.co))
          return false;
      }
      epi.epsilon = attrReal(c, "epsilon", 1e-5);
    } else if (*stage == Link::Add) {
      epi.residual = links[k].inputs[size_t(1 - pointwiseInput(c, buffer))];
      if (epi.residual->shape != out.shape ||
          !denseF32(*epi.residual, out.numel()))
        return false;
    }
    epi.relu |= *stage == Link::Relu;
    epi.reluAfter |= *stage == Link::ReluAfter;
  }
  return true;
}

/// True when \p out shares no byte with what the chain reads (the residual
/// may lie exactly where the result goes).
bool apart(const ChainLink &conv, const ConvEpilogue &epi, const Tensor &out) {
  for (const Tensor *t : conv.inputs)
    if (t->sharesBytes(out))
      return false;
  for (const Tensor *t : epi.norm)
    if (t && t->sharesBytes(out))
      return false;
  return !epi.residual || !epi.residual->sharesBytes(out) ||
         (epi.residual->data.data() == out.data.data() &&
          epi.residual->data.size() == out.data.size());
}

} // namespace

size_t convChainLength(llvm::ArrayRef<const plan::Compute *> chain) {
  if (chain.empty() || gemmBackend() != "onednn" ||
      !channelsLastConv(*chain[0]))
    return 1;
  return chainLength<Link>(chain, linkAfter);
}

llvm::Expected<bool> runConvChain(llvm::ArrayRef<ChainLink> links,
                                  DnnlCache &cache) {
  if (links.size() < 2 || links.back().outputs.size() != 1)
    return false;
  const ChainLink &conv = links[0];
  Tensor *outs[1] = {links.back().outputs[0]};
  std::optional<Prepared> p = prepareHead(conv, outs);
  if (!p)
    return false;
  std::optional<Window2DShape> s =
      matchConv2D(*p, attrInt(*conv.compute, "group", 1));
  ConvEpilogue epi;
  if (!s || !s->yLast || !epilogue(links, *s, *outs[0], epi) ||
      !apart(conv, epi, *outs[0]))
    return false;
  return runConvDnnl(*p, *s, &cache, epi, links.back().compute);
}

} // namespace pax::runtime::cpu
