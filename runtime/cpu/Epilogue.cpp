//===- Epilogue.cpp - What chains of computes after a product share -------===//
#include "runtime/cpu/Epilogue.h"

#include "runtime/Prepared.h"

namespace pax::runtime::cpu {

int pointwiseInput(const plan::Compute &c, uint32_t buffer) {
  if (c.outputs_size() != 1)
    return -1;
  for (int i = 0; i < c.inputs_size(); ++i)
    if (c.inputs(i).buffer() == buffer && sameExprs(c.inputs(i), c.outputs(0)))
      return i;
  return -1;
}

std::optional<Prepared> prepareHead(const ChainLink &head,
                                    llvm::ArrayRef<Tensor *> outs) {
  auto p = prepare(*head.compute, head.inputs, outs);
  if (!p) {
    llvm::consumeError(p.takeError());
    return std::nullopt;
  }
  return std::move(*p);
}

bool denseLike(const Tensor &t, const Tensor &like) {
  return t.dtype == like.dtype && t.shape == like.shape &&
         int64_t(t.data.size()) == t.bytes();
}

bool denseF32(const Tensor &t, int64_t numel) {
  return t.dtype == plan::F32 && t.numel() == numel &&
         int64_t(t.data.size()) == t.bytes();
}

void copyIfInPlace(const Tensor *&addend, const Tensor &out,
                   std::optional<Tensor> &copy) {
  if (!addend || !addend->sharesBytes(out))
    return;
  copy = Tensor{addend->dtype, addend->shape,
                Bytes(addend->data.begin(), addend->data.end())};
  addend = &*copy;
}

} // namespace pax::runtime::cpu
