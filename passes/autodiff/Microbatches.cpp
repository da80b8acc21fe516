//===- Microbatches.cpp - A training step's batch in microbatches ---------===//
#include "passes/autodiff/Microbatches.h"

#include "ir/Order.h"
#include "ir/Soap.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>

namespace pax {

namespace {

/// A parallel iteration space over \p shape (d0, d1, ...) and the identity
/// map of its tensors.
llvm::SmallVector<IterDim, 6> parallelIters(llvm::ArrayRef<int64_t> shape) {
  llvm::SmallVector<IterDim, 6> iters;
  for (size_t d = 0; d < shape.size(); ++d)
    iters.push_back({"d" + std::to_string(d), shape[d], IterKind::Parallel});
  return iters;
}

AccessMap identity(unsigned rank) {
  AccessMap m;
  for (unsigned d = 0; d < rank; ++d)
    m.push_back(AccessExpr::dim(d));
  return m;
}

class Splitter {
public:
  Splitter(Module &m, int64_t count, bool wholeResults = false)
      : f(m.main), count(count), wholeResults(wholeResults),
        samples(sampleIters(m.main)) {}
  llvm::Error run();

private:
  bool isSample(const Op &op, unsigned d) const {
    auto it = samples.find(&op);
    return it != samples.end() && d < it->second.size() && it->second[d];
  }
  bool hasSample(const Op &op) const {
    for (unsigned d = 0; d < op.iters.size(); ++d)
      if (isSample(op, d))
        return true;
    return false;
  }
  /// The tensor dim of \p map that a sample dim of \p op carries, or -1.
  int sampleDim(const Op &op, const AccessMap &map) const {
    for (size_t j = 0; j < map.size(); ++j) {
      int d = carrierDim(map[j]);
      if (d >= 0 && isSample(op, unsigned(d)))
        return int(j);
    }
    return -1;
  }
  llvm::Error fail(const Op &op, const llvm::Twine &why) const {
    return llvm::createStringError(
        llvm::formatv("--microbatches={0}: op '{1}' ({2}): {3}", count,
                      op.name(), opKindName(op.kind), why.str())
            .str());
  }
  llvm::Error splittable(const Op &op) const;
  llvm::Error split(const Op &op);
  llvm::Expected<Op *> copy(const Op &op, int64_t k);
  llvm::Expected<Value *> operand(const Op &op, const Operand &o, int64_t k);
  Value *slice(Value *v, unsigned dim, int64_t k);
  Value *whole(const Value *v);
  llvm::Error combine(const Op &op, unsigned result,
                      llvm::ArrayRef<Value *> partials);
  llvm::Error remapReturns();

  Func &f;
  int64_t count;
  /// A result carrying the sample dim is the copies' concatenated (an
  /// inference's), not an error (a training step's).
  bool wholeResults;
  /// Per op, the iteration dims the batch reaches.
  llvm::DenseMap<const Op *, llvm::SmallVector<bool, 6>> samples;
  /// A value that carries the sample dim: its M microbatch copies, the
  /// tensor dim the sample dim indexes, and the copies concatenated for a
  /// reader that needs every sample (made once).
  llvm::DenseMap<const Value *, llvm::SmallVector<Value *, 8>> copies;
  llvm::DenseMap<const Value *, unsigned> copyDim;
  llvm::DenseMap<const Value *, Value *> wholes;
  /// A value reduced over the sample dim: the combination of its copies.
  llvm::DenseMap<const Value *, Value *> combined;
  std::map<std::tuple<const Value *, unsigned, int64_t>, Value *> slices;
};
} // namespace

/// Slice \p k of \p v along its dim \p dim, made once.
Value *Splitter::slice(Value *v, unsigned dim, int64_t k) {
  auto key = std::make_tuple((const Value *)v, dim, k);
  if (auto it = slices.find(key); it != slices.end())
    return it->second;
  TensorType t = v->type;
  int64_t block = t.shape[dim] / count;
  t.shape[dim] = block;
  Op *s = f.addOp(OpKind::Slice);
  s->iters = parallelIters(t.shape);
  AccessMap in = identity(t.rank());
  in[dim] = AccessExpr::shifted(dim, 1, k * block);
  s->operands.push_back({v, in});
  std::string name =
      v->kind == Value::Kind::Result && v->def ? v->def->name().str() : v->name;
  s->attrs["name"] = llvm::formatv("pax_microbatch/{0}/{1}", name, k).str();
  s->attrs["microbatch"] = k;
  Value *out = s->addResult(t, identity(t.rank()));
  slices[key] = out;
  return out;
}

/// The copies of \p v concatenated along its sample dim: for an op that
/// reads every sample (a lookup into the batch), as microbatch 0's.
Value *Splitter::whole(const Value *v) {
  if (auto it = wholes.find(v); it != wholes.end())
    return it->second;
  const TensorType &t = v->type;
  unsigned dim = copyDim[v];
  Op *c = f.addOp(OpKind::Concat);
  c->iters = parallelIters(t.shape);
  int64_t block = t.shape[dim] / count;
  for (int64_t k = 0; k < count; ++k) {
    AccessMap m = identity(t.rank());
    m[dim] = AccessExpr::shifted(dim, 1, -k * block);
    c->operands.push_back({copies[v][size_t(k)], m});
  }
  c->attrs["axis"] = int64_t(dim);
  c->attrs["microbatch"] = int64_t(0);
  std::string name = v->def ? v->def->name().str() : v->name;
  c->attrs["name"] = llvm::formatv("pax_microbatch/{0}/whole", name).str();
  Value *out = c->addResult(t, identity(t.rank()));
  wholes[v] = out;
  return out;
}

/// What copy \p k of \p op reads through \p o.
llvm::Expected<Value *> Splitter::operand(const Op &op, const Operand &o,
                                          int64_t k) {
  if (auto it = combined.find(o.value); it != combined.end())
    return it->second;
  int dim = sampleDim(op, o.map);
  if (auto it = copies.find(o.value); it != copies.end())
    return dim < 0 ? whole(o.value) : it->second[size_t(k)];
  if (dim < 0)
    return o.value;
  const AccessExpr &e = o.map[unsigned(dim)];
  if (!(e.isPlainDim() || e.kind == AccessExpr::Kind::Group))
    return fail(op, "it reads the sample dim through " +
                        accessExprStr(e, op.iters));
  return slice(o.value, unsigned(dim), k);
}

/// Copy \p k of \p op: its sample dims 1/M as long.
llvm::Expected<Op *> Splitter::copy(const Op &op, int64_t k) {
  // The operands first: the slices they need go before the copy.
  llvm::SmallVector<Operand, 4> operands;
  for (const Operand &o : op.operands) {
    auto v = operand(op, o, k);
    if (!v)
      return v.takeError();
    operands.push_back({*v, o.map});
  }
  Op *c = f.addOp(op.kind);
  c->attrs = op.attrs;
  c->sources = op.sources;
  c->attrs["name"] = llvm::formatv("{0}/mb{1}", op.name(), k).str();
  c->attrs["microbatch"] = k;
  c->iters = op.iters;
  for (unsigned d = 0; d < c->iters.size(); ++d)
    if (isSample(op, d))
      c->iters[d].extent /= count;
  c->operands = std::move(operands);
  for (const Result &r : op.results) {
    TensorType t = r.value->type;
    int dim = sampleDim(op, r.map);
    if (dim >= 0) {
      const AccessExpr &e = r.map[unsigned(dim)];
      if (!(e.isPlainDim() || e.kind == AccessExpr::Kind::Group))
        return fail(op, "it writes the sample dim through " +
                            accessExprStr(e, op.iters));
      t.shape[unsigned(dim)] /= count;
    }
    c->addResult(t, r.map);
  }
  return c;
}

/// One `mean` (a reduce_mean's copies) or `sum` (any other sum) of the
/// copies' \p partials of \p op's result \p result.
llvm::Error Splitter::combine(const Op &op, unsigned result,
                              llvm::ArrayRef<Value *> partials) {
  OpKind kind;
  if (op.kind == OpKind::ReduceMean)
    kind = OpKind::Mean;
  else if (opKindPartials(op.kind) == PartialCombine::Sum)
    kind = OpKind::Sum;
  else
    return fail(op, "it reduces the sample dim by other than a sum or a "
                    "mean, which microbatches cannot split");
  const TensorType &t = op.results[result].value->type;
  Op *c = f.addOp(kind);
  c->iters = parallelIters(t.shape);
  for (Value *p : partials)
    c->operands.push_back({p, identity(t.rank())});
  c->attrs["name"] = llvm::formatv("{0}/microbatches", op.name()).str();
  combined[op.results[result].value.get()] =
      c->addResult(t, identity(t.rank()));
  return llvm::Error::success();
}

/// Whether copies of \p op over slices of the batch compute what it does:
/// one dim carries the batch, \p count divides it, and no result folds it
/// into another dim.
llvm::Error Splitter::splittable(const Op &op) const {
  unsigned sampleIters = 0;
  for (unsigned d = 0; d < op.iters.size(); ++d)
    sampleIters += isSample(op, d);
  if (sampleIters > 1)
    return fail(op, "it pairs the batch's samples with each other (two of "
                    "its dims carry the batch); it would compute otherwise "
                    "over microbatches");
  for (unsigned d = 0; d < op.iters.size(); ++d)
    if (isSample(op, d) && op.iters[d].extent % count)
      return fail(op,
                  llvm::formatv("{0} microbatches do not divide its "
                                "sample dim '{1}' ({2})",
                                count, op.iters[d].name, op.iters[d].extent));
  for (const Result &r : op.results)
    if (sampleDim(op, r.map) < 0)
      for (unsigned d = 0; d < op.iters.size(); ++d)
        if (isSample(op, d) &&
            llvm::any_of(r.map, [&](const AccessExpr &e) { return e.uses(d); }))
          return fail(op, "it folds the batch into a dim the batch does not "
                          "lead (is dim 0 of the model's inputs the batch?)");
  return llvm::Error::success();
}

/// \p op as M copies, the last microbatch's first (autodiff, visiting ops
/// newest first, then sums each weight's gradient from microbatch 0 on).
llvm::Error Splitter::split(const Op &op) {
  if (auto err = splittable(op))
    return err;
  std::vector<llvm::SmallVector<Value *, 8>> partials(op.results.size());
  for (int64_t k = count - 1; k >= 0; --k) {
    auto c = copy(op, k);
    if (!c)
      return c.takeError();
    for (unsigned i = 0; i < op.results.size(); ++i) {
      Value *v = (*c)->results[i].value.get();
      if (sampleDim(op, op.results[i].map) >= 0) {
        const Value *orig = op.results[i].value.get();
        auto &list = copies[orig];
        list.resize(size_t(count));
        list[size_t(k)] = v;
        copyDim[orig] = unsigned(sampleDim(op, op.results[i].map));
      } else {
        partials[i].push_back(v);
      }
    }
  }
  for (unsigned i = 0; i < op.results.size(); ++i)
    if (!partials[i].empty())
      if (auto err = combine(op, i, partials[i]))
        return err;
  return llvm::Error::success();
}

llvm::Error Splitter::remapReturns() {
  for (size_t i = 0; i < f.returns.size(); ++i) {
    if (auto it = combined.find(f.returns[i]); it != combined.end())
      f.returns[i] = it->second;
    else if (copies.count(f.returns[i]) && wholeResults)
      f.returns[i] = whole(f.returns[i]);
    else if (copies.count(f.returns[i]))
      return llvm::createStringError(llvm::formatv(
          "--microbatches={0}: result '{1}' carries the sample dim; a "
          "training step in microbatches returns what it reduces over the "
          "batch (the loss)",
          count, f.returnNames[i]));
  }
  return llvm::Error::success();
}

llvm::Error Splitter::run() {
  std::vector<std::unique_ptr<Op>> old = std::move(f.ops);
  f.ops.clear();
  for (std::unique_ptr<Op> &op : old) {
    if (hasSample(*op)) {
      if (auto err = split(*op))
        return err;
      continue;
    }
    for (Operand &o : op->operands) {
      if (auto it = combined.find(o.value); it != combined.end())
        o.value = it->second;
      else if (copies.count(o.value))
        o.value = whole(o.value);
    }
    f.ops.push_back(std::move(op));
  }
  return remapReturns();
}

llvm::Error splitMicrobatches(Module &m, int64_t count) {
  if (count <= 1)
    return llvm::Error::success();
  return Splitter(m, count).run();
}

llvm::Error splitInferenceBatch(Module &m, int64_t count) {
  if (count <= 1)
    return llvm::Error::success();
  return Splitter(m, count, /*wholeResults=*/true).run();
}

void orderMicrobatches(Func &f) {
  auto producers = producersOf(f);
  // Each op's microbatch: its own, or the latest its operands come from.
  // A microbatch's op runs with its microbatch even when it reads what all
  // of them share; any other op runs with the latest it reads.
  std::vector<double> key(f.ops.size(), 0);
  bool any = false;
  for (size_t i = 0; i < f.ops.size(); ++i) {
    key[i] = double(f.ops[i]->intAttr("microbatch", -1) + 1);
    any |= key[i] > 0;
    if (key[i] == 0)
      for (size_t p : producers[i])
        key[i] = std::max(key[i], key[p]);
  }
  if (any)
    orderByKey(f, key);
}

} // namespace pax
