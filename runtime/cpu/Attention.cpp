//===- Attention.cpp - Attention and its gradients ------------------------===//
#include "runtime/cpu/Attention.h"

#include "runtime/IterationSpace.h"
#include "runtime/Prepared.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <vector>

namespace pax::runtime::cpu {
namespace {

using attention::Access;
using attention::Pass;
using attention::Problem;

std::optional<Pass> passOf(llvm::StringRef kind) {
  if (kind == "attention")
    return Pass::Forward;
  if (kind == "attention_grad_q")
    return Pass::GradQ;
  if (kind == "attention_grad_kv")
    return Pass::GradKV;
  return std::nullopt;
}

/// Compiles \p access for tensor \p t into \p a; \p head receives the
/// extent of the dim it reads whole (1 when none).
llvm::Error compileAccess(const plan::Compute &c, const plan::Access &access,
                          const Tensor *t, const IterationSpace &space,
                          const llvm::Twine &what, Access &a, int64_t &head) {
  if (!t || int64_t(t->data.size()) != t->bytes())
    return computeError(c, what + " is missing or has the wrong size");
  auto m = AccessIndexer::compile(c, access, t->shape, space, what,
                                  /*fullFromZero=*/true);
  if (!m)
    return m.takeError();
  a.data = const_cast<uint8_t *>(t->data.data());
  a.type = int32_t(t->dtype);
  a.map = m->flatMap();
  head = 1;
  a.inner = 0;
  for (int i = 0; i < access.exprs_size(); ++i) {
    if (access.exprs(i).kind() != plan::AccessExpr::FULL)
      continue;
    if (a.inner)
      return computeError(c, what + " reads more than one dim whole");
    head = t->shape[size_t(i)];
    a.inner = 1;
    for (size_t j = size_t(i) + 1; j < t->shape.size(); ++j)
      a.inner *= t->shape[j];
  }
  return llvm::Error::success();
}

/// The masks: kinds and fills from the attributes, operands after
/// \p first.
llvm::Error readMasks(const plan::Compute &c,
                      llvm::ArrayRef<const Tensor *> ins, size_t first,
                      const IterationSpace &space, Problem &p) {
  std::vector<int64_t> kinds = attrInts(c, "masks");
  std::vector<double> fills;
  if (const plan::Attr *f = findAttr(c, "fills"); f && f->has_floats())
    fills.assign(f->floats().values().begin(), f->floats().values().end());
  if (ins.size() != first + kinds.size())
    return computeError(c, "has " + llvm::Twine(ins.size()) +
                               " operands; its masks attribute needs " +
                               llvm::Twine(first + kinds.size()));
  if (kinds.size() > size_t(attention::kMaxMasks))
    return computeError(c, "has more than " +
                               llvm::Twine(attention::kMaxMasks) + " masks");
  p.masks = int32_t(kinds.size());
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (kinds[i] < attention::AddMask || kinds[i] > attention::KeepIfFalse)
      return computeError(c, "mask kind " + llvm::Twine(kinds[i]) +
                                 " is not 1 (add), 2 or 3 (keep)");
    if (kinds[i] != attention::AddMask && fills.size() != kinds.size())
      return computeError(c, "a where mask needs the fills attribute");
    p.maskKind[i] = int32_t(kinds[i]);
    p.fill[i] = i < fills.size() ? fills[i] : 0.0;
    int64_t head = 1;
    if (auto err =
            compileAccess(c, c.inputs(int(first + i)), ins[first + i], space,
                          "mask " + llvm::Twine(i), p.mask[i], head))
      return err;
    if (p.mask[i].inner)
      return computeError(c, "a mask reads a dim whole");
  }
  return llvm::Error::success();
}

/// Q, K, V (and the gradients' dO, lse, D): their head dims agree.
llvm::Error readInputs(const plan::Compute &c,
                       llvm::ArrayRef<const Tensor *> ins,
                       const IterationSpace &space, Problem &p) {
  bool grad = p.pass != Pass::Forward;
  if (ins.size() < (grad ? 6u : 3u))
    return computeError(c, grad ? "needs Q, K, V, dO, the log-sum-exp and D"
                                : "needs Q, K and V");
  int64_t ek = 0, dv = 0, one = 0;
  if (auto err = compileAccess(c, c.inputs(0), ins[0], space, "q", p.q, p.e))
    return err;
  if (auto err = compileAccess(c, c.inputs(1), ins[1], space, "k", p.k, ek))
    return err;
  if (auto err = compileAccess(c, c.inputs(2), ins[2], space, "v", p.val, p.v))
    return err;
  if (!p.q.inner || !p.k.inner || !p.val.inner || p.e != ek)
    return computeError(c, "q, k and v must each read one head dim whole, "
                           "q's and k's of one extent");
  if (grad) {
    if (auto err =
            compileAccess(c, c.inputs(3), ins[3], space, "d_out", p.dout, dv))
      return err;
    if (auto err =
            compileAccess(c, c.inputs(4), ins[4], space, "lse", p.lse, one))
      return err;
    if (auto err =
            compileAccess(c, c.inputs(5), ins[5], space, "delta", p.delta, one))
      return err;
    if (dv != p.v || p.lse.inner || p.delta.inner)
      return computeError(c, "d_out, the log-sum-exp and D do not match v");
  }
  return readMasks(c, ins, grad ? 6 : 3, space, p);
}

/// The results: O and lse; dQ; dK and dV.
llvm::Error readOutputs(const plan::Compute &c, llvm::ArrayRef<Tensor *> outs,
                        const IterationSpace &space, Problem &p) {
  size_t want = p.pass == Pass::GradQ ? 1 : 2;
  if (outs.size() != want)
    return computeError(c, "needs " + llvm::Twine(want) + " outputs, has " +
                               llvm::Twine(outs.size()));
  int64_t heads[2] = {p.pass == Pass::Forward ? p.v : p.e,
                      p.pass == Pass::Forward ? 1 : p.v};
  for (size_t i = 0; i < want; ++i) {
    int64_t head = 1;
    if (auto err = compileAccess(c, c.outputs(int(i)), outs[i], space,
                                 "output " + llvm::Twine(i), p.out[i], head))
      return err;
    if (head != heads[i])
      return computeError(c, "output " + llvm::Twine(i) +
                                 " does not match the head dims");
  }
  return llvm::Error::success();
}

} // namespace

llvm::Expected<Problem> prepareAttention(const plan::Compute &c,
                                         llvm::ArrayRef<const Tensor *> ins,
                                         llvm::ArrayRef<Tensor *> outs) {
  std::optional<Pass> pass = passOf(c.kind());
  if (!pass)
    return computeError(c, "not an attention compute");
  Problem p;
  p.pass = *pass;
  IterationSpace space = IterationSpace::of(c);
  int rank = c.iters_size();
  if (rank < 2 || space.inner.size() != 1 ||
      space.inner[0] != unsigned(rank - 1))
    return computeError(c, "needs iteration dims [batch..., rows, walked] "
                           "with the walked one its only reduction");
  p.qDim = *pass == Pass::GradKV ? rank - 1 : rank - 2;
  p.kDim = *pass == Pass::GradKV ? rank - 2 : rank - 1;
  p.scale = attrReal(c, "scale", 1.0);
  p.nanToZero = attrInt(c, "nan_to_zero", 0) != 0;
  p.causal = attrInt(c, "causal", 0) != 0;
  if (auto err = readInputs(c, ins, space, p))
    return err;
  if (auto err = readOutputs(c, outs, space, p))
    return err;
  p.space = space.flatten();
  flat::setDividers(p.space);
  return p;
}

llvm::Error runAttention(const plan::Compute &c,
                         llvm::ArrayRef<const Tensor *> ins,
                         llvm::ArrayRef<Tensor *> outs) {
  auto p = prepareAttention(c, ins, outs);
  if (!p)
    return p.takeError();
  const Problem &pr = *p;
  int64_t rows = pr.space.outerPoints, tile = attention::kTile;
  int64_t each = attention::rowScratch(pr);
  tbb::parallel_for(int64_t(0), (rows + tile - 1) / tile, [&](int64_t t) {
    std::vector<double> scratch(size_t(tile * each));
    int64_t first = t * tile;
    attention::runRows(pr, first, std::min(tile, rows - first), scratch.data());
  });
  return llvm::Error::success();
}

} // namespace pax::runtime::cpu
