//===- Autodiff.cpp - The backward pass of a training step ----------------===//
#include "passes/autodiff/Autodiff.h"

#include "passes/autodiff/GradientBuilder.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Regex.h"

#include <cstring>

namespace pax {

//===----------------------------------------------------------------------===//
// GradientBuilder
//===----------------------------------------------------------------------===//

bool GradientBuilder::needs(unsigned k) const {
  return k < needed.size() && needed[k];
}

std::string GradientBuilder::name(llvm::StringRef what) const {
  llvm::StringRef base = forward ? forward->name() : "";
  return (prefix + "/" + (base.empty() ? llvm::StringRef("op") : base) + "/" +
          what + "#" + llvm::Twine(counter))
      .str();
}

AccessMap GradientBuilder::identity(unsigned rank) {
  AccessMap map;
  for (unsigned d = 0; d < rank; ++d)
    map.push_back(AccessExpr::dim(d));
  return map;
}

/// Whether iteration dim \p d occurs in \p map.
static bool mapUses(const AccessMap &map, unsigned d) {
  return llvm::any_of(map, [&](const AccessExpr &e) { return e.uses(d); });
}

Value *GradientBuilder::over(OpKind kind, llvm::ArrayRef<Read> ins,
                             const AccessMap &out, const TensorType &type,
                             llvm::StringRef what, AttrMap attrs) {
  Op *op = m.main.addOp(kind);
  // The forward op's dims that the new op reads or writes (a dim neither
  // uses would repeat every point), renumbered.
  std::vector<int> index(forward->iters.size(), -1);
  for (unsigned d = 0; d < forward->iters.size(); ++d) {
    bool written = mapUses(out, d);
    if (!written &&
        llvm::none_of(ins, [&](const Read &r) { return mapUses(r.map, d); }))
      continue;
    index[d] = int(op->iters.size());
    IterDim dim = forward->iters[d];
    dim.kind = written ? IterKind::Parallel : IterKind::Reduction;
    op->iters.push_back(dim);
  }
  auto renumber = [&](AccessMap map) {
    for (AccessExpr &e : map)
      for (unsigned &d : e.dims)
        d = unsigned(index[d]);
    return map;
  };
  for (const Read &r : ins)
    op->operands.push_back({r.value, renumber(r.map)});
  op->attrs = std::move(attrs);
  op->attrs["name"] = name(what);
  ++counter;
  tagPass(op);
  if (auto it = forward->attrs.find("config"); it != forward->attrs.end()) {
    const auto &config = std::get<std::vector<int64_t>>(it->second);
    std::vector<int64_t> kept;
    for (unsigned d = 0; d < index.size() && d < config.size(); ++d)
      if (index[d] >= 0)
        kept.push_back(config[d]);
    op->attrs["config"] = kept;
  }
  return op->addResult(type, renumber(out));
}

void GradientBuilder::tagPass(Op *op) const {
  if (!forward)
    return;
  for (llvm::StringRef key : {"microbatch", "stage"})
    if (auto it = forward->attrs.find(key.str()); it != forward->attrs.end())
      op->attrs[key.str()] = it->second;
}

Op *GradientBuilder::newOp(OpKind kind, llvm::ArrayRef<IterDim> iters,
                           llvm::StringRef what) {
  Op *op = m.main.addOp(kind);
  op->iters.assign(iters.begin(), iters.end());
  op->attrs["name"] = name(what);
  ++counter;
  tagPass(op);
  return op;
}

Op *GradientBuilder::newOpLikeForward(OpKind kind, llvm::StringRef what) {
  Op *op = newOp(kind, forward->iters, what);
  if (auto it = forward->attrs.find("config"); it != forward->attrs.end())
    op->attrs["config"] = it->second;
  return op;
}

Value *GradientBuilder::elementwise(OpKind kind, llvm::ArrayRef<Value *> ins,
                                    const TensorType &type,
                                    llvm::StringRef what) {
  Op *op = m.main.addOp(kind);
  for (unsigned d = 0; d < type.rank(); ++d)
    op->iters.push_back(
        {"d" + std::to_string(d), type.shape[d], IterKind::Parallel});
  for (Value *v : ins)
    op->operands.push_back(
        {v, v->type.rank() == 0 ? AccessMap() : identity(type.rank())});
  op->attrs["name"] = name(what);
  ++counter;
  tagPass(op);
  return op->addResult(type, identity(type.rank()));
}

Value *GradientBuilder::padded(Value *x, const AccessMap &read,
                               const TensorType &type, llvm::StringRef what) {
  Op *op = m.main.addOp(OpKind::Pad);
  for (unsigned d = 0; d < type.rank(); ++d)
    op->iters.push_back(
        {"d" + std::to_string(d), type.shape[d], IterKind::Parallel});
  op->operands.push_back({x, read});
  op->attrs["name"] = name(what);
  tagPass(op);
  op->attrs["value"] = 0.0f;
  ++counter;
  return op->addResult(type, identity(type.rank()));
}

Value *GradientBuilder::constant(double value, DType elem) {
  // Exact: two constants share a global only when their values are equal.
  std::string key = llvm::formatv("grad/const/{0}/{1}", dtypeName(elem),
                                  llvm::format("%.17g", value))
                        .str();
  if (Global *g = m.findGlobal(key))
    return &g->value;
  Global *g = m.addGlobal(key, TensorType{elem, {}});
  g->source = DataSource::Fill;
  g->fill = value;
  return &g->value;
}

Value *GradientBuilder::dense(const TensorType &type,
                              llvm::ArrayRef<double> values,
                              llvm::StringRef what) {
  Global *g = m.addGlobal(name(what), type);
  ++counter;
  g->source = DataSource::Dense;
  for (double v : values) {
    uint8_t bytes[8];
    size_t n = type.elem == DType::F64 ? 8 : 4;
    if (n == 8)
      std::memcpy(bytes, &v, 8);
    else {
      float f = float(v);
      std::memcpy(bytes, &f, 4);
    }
    g->bytes.insert(g->bytes.end(), bytes, bytes + n);
  }
  return &g->value;
}

void GradientBuilder::replicate(Op &op, int64_t replicas) {
  if (replicas > 1)
    op.iters.push_back({"r", replicas, IterKind::Parallel});
}

void GradientBuilder::accumulate(const Value *v, Value *g) {
  auto [it, fresh] = grads.try_emplace(v, g);
  if (!fresh)
    it->second = elementwise(OpKind::Add, {it->second, g}, v->type, "sum");
}

void GradientBuilder::accumulateOperand(unsigned k, Value *g) {
  const Operand &x = forward->operands[k];
  if (x.map == resultMap() && x.value->type == g->type) {
    accumulate(x.value, g);
    return;
  }
  // Summed over the dims the operand does not have (broadcasting).
  accumulate(x.value, over(OpKind::ReduceSum, {{g, resultMap()}}, x.map,
                           x.value->type, "unbroadcast"));
}

//===----------------------------------------------------------------------===//
// The backward pass
//===----------------------------------------------------------------------===//

namespace {
llvm::Error autodiffError(const llvm::Twine &msg) {
  return llvm::createStringError("autodiff: " + msg);
}

/// The trainable parameters (float, not frozen by \p options.freeze) into
/// \p params, and every value that depends on one through floats into
/// \p varies.
llvm::Error findVarying(const Module &m, const AutodiffOptions &options,
                        std::vector<const Global *> &params,
                        llvm::DenseSet<const Value *> &varies) {
  std::optional<llvm::Regex> freeze;
  if (!options.freeze.empty()) {
    freeze.emplace(options.freeze);
    std::string err;
    if (!freeze->isValid(err))
      return autodiffError("--freeze='" + options.freeze + "': " + err);
  }
  for (const auto &g : m.globals)
    if (g->isParameter && isFloat(g->value.type.elem) &&
        !(freeze && freeze->match(g->name()))) {
      varies.insert(&g->value);
      params.push_back(g.get());
    }
  for (const auto &op : m.main.ops)
    if (llvm::any_of(op->operands,
                     [&](const Operand &o) { return varies.count(o.value); }))
      for (const Result &r : op->results)
        if (isFloat(r.value->type.elem))
          varies.insert(r.value.get());
  return llvm::Error::success();
}

/// Applies the gradient rule of every op in \p forward, newest first,
/// where a result has a gradient and an operand varies.
llvm::Error backpropagate(GradientBuilder &b,
                          llvm::ArrayRef<const Op *> forward,
                          const llvm::DenseSet<const Value *> &varies) {
  for (auto it = forward.rbegin(); it != forward.rend(); ++it) {
    const Op &op = **it;
    std::vector<Value *> dys;
    for (const Result &r : op.results)
      dys.push_back(b.gradientOf(r.value.get()));
    if (llvm::none_of(dys, [](Value *v) { return v != nullptr; }))
      continue;
    std::vector<bool> needs;
    for (const Operand &o : op.operands)
      needs.push_back(varies.count(o.value) > 0);
    if (llvm::none_of(needs, [](bool n) { return n; }))
      continue;
    b.setForward(&op);
    b.setNeeds(std::move(needs));
    if (llvm::Error err = applyGradientRule(b, op, dys))
      return err;
  }
  return llvm::Error::success();
}
} // namespace

llvm::Error appendBackward(Module &m, const AutodiffOptions &options) {
  Func &f = m.main;
  if (f.returns.empty())
    return autodiffError("the function returns nothing to differentiate");
  const Value *loss = f.returns[0];
  if (!isFloat(loss->type.elem) || loss->type.numel() != 1)
    return autodiffError("the loss, result '" + f.returnNames[0] + "', is " +
                         loss->type.str() +
                         "; it must be a float with one element (see --loss)");
  llvm::DenseSet<const Value *> varies;
  std::vector<const Global *> params;
  if (auto err = findVarying(m, options, params, varies))
    return err;
  if (!varies.count(loss))
    return autodiffError("the loss does not depend on any trainable parameter");
  // The forward ops (backward ops are appended).
  std::vector<const Op *> forward;
  for (const auto &op : f.ops)
    forward.push_back(op.get());
  GradientBuilder b(m);
  b.setReplicas(options.replicas);
  // d loss / d loss = 1 (or the loss scale), as a one-element tensor of
  // the loss's type.
  Value *one = options.seedScale
                   ? const_cast<Value *>(&options.seedScale->value)
                   : b.constant(1.0, loss->type.elem);
  b.accumulate(loss, b.elementwise(OpKind::Expand, {one}, loss->type, "seed"));
  if (auto err = backpropagate(b, forward, varies))
    return err;
  for (const Global *g : params)
    if (Value *grad = b.gradientOf(&g->value)) {
      f.returns.push_back(grad);
      f.returnNames.push_back("grad/" + g->name());
      // Where the gradient is complete: the report says how it is
      // aggregated (Aggregation.h).
      if (grad->kind == Value::Kind::Result &&
          !grad->def->attrs.count("gradient_of"))
        grad->def->attrs["gradient_of"] = g->name();
    }
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<Pass>>
AutodiffPass::create(const PassOptions &o) {
  if (auto err = o.checkKnown("pax-autodiff", {"freeze"}))
    return err;
  AutodiffOptions options;
  options.freeze = o.get("freeze", "");
  return std::make_unique<AutodiffPass>(std::move(options));
}

llvm::Error AutodiffPass::run(Module &m, PassContext &) {
  return appendBackward(m, options);
}

} // namespace pax
