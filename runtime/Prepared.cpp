//===- Prepared.cpp - A compute checked against its buffers ---------------===//
#include "runtime/Prepared.h"

#include "llvm/ADT/STLExtras.h"

#include <string>

namespace pax::runtime {

llvm::Error computeError(const plan::Compute &c, const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "compute '" + c.name() + "' (" + c.kind() +
                                     "): " + msg);
}

const plan::Attr *findAttr(const plan::Compute &c, llvm::StringRef name) {
  for (const plan::Attr &a : c.attrs())
    if (a.name() == name)
      return &a;
  return nullptr;
}

double attrReal(const plan::Compute &c, llvm::StringRef name, double def) {
  const plan::Attr *a = findAttr(c, name);
  if (!a)
    return def;
  return a->has_f() ? double(a->f()) : a->has_i() ? double(a->i()) : def;
}

int64_t attrInt(const plan::Compute &c, llvm::StringRef name, int64_t def) {
  const plan::Attr *a = findAttr(c, name);
  return a && a->has_i() ? a->i() : def;
}

std::vector<int64_t> attrInts(const plan::Compute &c, llvm::StringRef name) {
  const plan::Attr *a = findAttr(c, name);
  if (!a || !a->has_ints())
    return {};
  return {a->ints().values().begin(), a->ints().values().end()};
}

/// Checks one tensor against the bytes its shape needs.
static llvm::Error checkTensor(const plan::Compute &c, const Tensor *t,
                               const llvm::Twine &what) {
  if (!t)
    return computeError(c, what + " is missing");
  for (int64_t s : t->shape)
    if (s < 0)
      return computeError(c, what + " has a negative dim " + llvm::Twine(s));
  if (int64_t(t->data.size()) != t->bytes())
    return computeError(c, what + " holds " + llvm::Twine(t->data.size()) +
                               " bytes, its shape needs " +
                               llvm::Twine(t->bytes()));
  return llvm::Error::success();
}

/// Index tuples of \p n elements lie along the indices' last dim, which
/// each point reads whole.
static llvm::Error checkTuples(const Prepared &p, unsigned n) {
  const Tensor &idx = *p.ins[1];
  if (n > 1 &&
      (idx.shape.empty() || idx.shape.back() != int64_t(n) ||
       p.c.inputs(1).exprs_size() != int(idx.shape.size()) ||
       p.c.inputs(1).exprs().rbegin()->kind() != plan::AccessExpr::FULL))
    return computeError(p.c, "data is looked up in " + llvm::Twine(n) +
                                 " dims, but the indices' last dim is not "
                                 "an index tuple of " +
                                 llvm::Twine(n) + " read whole ('*')");
  return llvm::Error::success();
}

/// A lookup may only index gather's data operand, with the indices second,
/// or scatter_add's result, with the values first and the indices second.
static llvm::Error checkLookups(const Prepared &p) {
  if (p.c.kind() == "scatter_add") {
    bool indexed = p.ins.size() == 2 && p.outs.size() == 1 &&
                   p.outMaps[0].hasLookup() && !p.inMaps[0].hasLookup() &&
                   !p.inMaps[1].hasLookup();
    bool affine = p.ins.size() == 1 && p.outs.size() == 1 &&
                  !p.outMaps[0].hasLookup() && !p.inMaps[0].hasLookup();
    if (!indexed && !affine)
      return computeError(p.c, "scatter_add takes values and indices and "
                               "writes one result through gather(), or "
                               "values alone written through affine maps");
    return indexed ? checkTuples(p, p.outMaps[0].lookupCount())
                   : llvm::Error::success();
  }
  for (size_t k = 0; k < p.inMaps.size(); ++k) {
    if (!p.inMaps[k].hasLookup())
      continue;
    if (p.c.kind() != "gather" || k != 0 || p.inMaps.size() < 2 ||
        p.inMaps[1].hasLookup())
      return computeError(p.c, "input " + llvm::Twine(k) +
                                   " has a lookup access outside gather's "
                                   "data operand");
    if (llvm::Error e = checkTuples(p, p.inMaps[0].lookupCount()))
      return e;
  }
  for (size_t r = 0; r < p.outMaps.size(); ++r)
    if (p.outMaps[r].hasLookup())
      return computeError(p.c,
                          "output " + llvm::Twine(r) + " has a lookup access");
  return llvm::Error::success();
}

llvm::Expected<Prepared> prepare(const plan::Compute &c,
                                 llvm::ArrayRef<const Tensor *> inputs,
                                 llvm::ArrayRef<Tensor *> outputs) {
  if (inputs.size() != size_t(c.inputs_size()) ||
      outputs.size() != size_t(c.outputs_size()))
    return computeError(c, "has " + llvm::Twine(c.inputs_size()) +
                               " inputs and " + llvm::Twine(c.outputs_size()) +
                               " outputs, was given " +
                               llvm::Twine(inputs.size()) + " and " +
                               llvm::Twine(outputs.size()));
  Prepared p{c, inputs, outputs, IterationSpace::of(c), {}, {}};
  for (size_t k = 0; k < inputs.size(); ++k) {
    std::string what = "input " + std::to_string(k);
    if (llvm::Error e = checkTensor(c, inputs[k], what))
      return e;
    // A gather's index tuples (indices [..., k]) are read whole per point.
    bool tuples = (c.kind() == "gather" || c.kind() == "scatter_add") && k == 1;
    auto m = AccessIndexer::compile(c, c.inputs(int(k)), inputs[k]->shape,
                                    p.space, what, tuples);
    if (!m)
      return m.takeError();
    p.inMaps.push_back(std::move(*m));
  }
  for (size_t r = 0; r < outputs.size(); ++r) {
    std::string what = "output " + std::to_string(r);
    if (llvm::Error e = checkTensor(c, outputs[r], what))
      return e;
    auto m = AccessIndexer::compile(c, c.outputs(int(r)), outputs[r]->shape,
                                    p.space, what);
    if (!m)
      return m.takeError();
    p.outMaps.push_back(std::move(*m));
  }
  if (llvm::Error e = checkLookups(p))
    return e;
  return p;
}

} // namespace pax::runtime
