//===- Recompute.cpp - Activations computed again in the backward pass ----===//
#include "passes/autodiff/Recompute.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace pax {

namespace {
class Recomputer {
public:
  Recomputer(Func &f, llvm::function_ref<bool(const Op &)> chosen)
      : f(f), chosen(chosen) {}
  size_t run(size_t forwardOps);

private:
  /// Whether \p v is a result of a forward op to recompute.
  bool recomputed(const Value *v) const {
    return v->kind == Value::Kind::Result && forward.contains(v->def) &&
           chosen(*v->def);
  }
  Value *copyOf(Value *v);

  Func &f;
  llvm::function_ref<bool(const Op &)> chosen;
  llvm::DenseSet<const Op *> forward;
  /// Each recomputed forward result: its copy's.
  llvm::DenseMap<const Value *, Value *> copies;
  size_t copied = 0;
};
} // namespace

/// The copy of \p v's op, appended now (after the copies it reads), once.
Value *Recomputer::copyOf(Value *v) {
  if (auto it = copies.find(v); it != copies.end())
    return it->second;
  const Op &op = *v->def;
  llvm::SmallVector<Operand, 4> operands;
  for (const Operand &o : op.operands)
    operands.push_back(
        {recomputed(o.value) ? copyOf(o.value) : o.value, o.map});
  Op *c = f.addOp(op.kind);
  c->iters = op.iters;
  c->sources = op.sources;
  c->attrs = op.attrs;
  c->attrs["recomputed"] = int64_t(1);
  c->operands = std::move(operands);
  for (const Result &r : op.results)
    copies[r.value.get()] = c->addResult(r.value->type, r.map);
  ++copied;
  return copies[v];
}

size_t Recomputer::run(size_t forwardOps) {
  std::vector<std::unique_ptr<Op>> ops = std::move(f.ops);
  f.ops.clear();
  for (size_t i = 0; i < ops.size(); ++i) {
    if (i < forwardOps) {
      forward.insert(ops[i].get());
    } else {
      for (Operand &o : ops[i]->operands)
        if (recomputed(o.value))
          o.value = copyOf(o.value);
    }
    f.ops.push_back(std::move(ops[i]));
  }
  return copied;
}

size_t recomputeInBackward(Func &f, size_t forwardOps,
                           llvm::function_ref<bool(const Op &)> recompute) {
  return Recomputer(f, recompute).run(forwardOps);
}

} // namespace pax
