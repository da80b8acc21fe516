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

/// The dim of a 2-D convolution's result that holds its channels: the
/// last of a channels-last result, the second of an NCHW one; -1 where
/// \p c is not such a convolution.
int convChannelDim(const plan::Compute &c) {
  if (c.kind() != "conv" || c.outputs_size() != 1 || c.inputs_size() < 2)
    return -1;
  const plan::Access &y = c.outputs(0);
  bool grouped = attrInt(c, "group", 1) > 1;
  if (y.exprs_size() != 4)
    return -1;
  for (int d : {3, 1})
    if (isChannel(y.exprs(d), grouped ? 1 : -1, grouped ? 2 : 1))
      return d;
  return -1;
}

/// True when batch norm \p c reads its four parameters along its result's
/// channel, the result's dim 1 (NCHW) or 3 (channels-last).
bool normAlongChannel(const plan::Compute &c) {
  const plan::Access &y = c.outputs(0);
  if (y.exprs_size() != 4)
    return false;
  auto along = [&](int d) {
    for (int k = 1; k < 5; ++k)
      if (c.inputs(k).exprs_size() != 1 ||
          c.inputs(k).exprs(0).SerializeAsString() !=
              y.exprs(d).SerializeAsString())
        return false;
    return true;
  };
  return along(3) || along(1);
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
      if (!denseLike(*epi.residual, out))
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

size_t convChainLength(llvm::ArrayRef<const plan::Compute *> chain,
                       bool sixteenBit) {
  int channel = chain.empty() ? -1 : convChannelDim(*chain[0]);
  // An f32 NCHW convolution runs faster as im2col and a GEMM, one link at
  // a time; 16-bit ones run on oneDNN in every layout.
  if (gemmBackend() != "onednn" || channel < 0 || (channel == 1 && !sixteenBit))
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
  std::optional<Window2DShape> s = matchConv2D(
      *p, attrInt(*conv.compute, "group", 1), p->ins[0]->dtype != plan::F32);
  ConvEpilogue epi;
  if (!s || !(s->yLast || p->ins[0]->dtype != plan::F32) ||
      !epilogue(links, *s, *outs[0], epi) || !apart(conv, epi, *outs[0]))
    return false;
  std::optional<Tensor> copy; // (a residual added in place)
  copyIfInPlace(epi.residual, *outs[0], copy);
  return runConvDnnl(*p, *s, &cache, epi, links.back().compute);
}

} // namespace pax::runtime::cpu
