//===- Module.cpp - Values, ops, functions and modules of the paxc IR -----===//
#include "ir/Module.h"

#include "llvm/ADT/STLExtras.h"

#include <cstring>

namespace pax {

namespace {
struct OpKindInfo {
  const char *text;
  OpFamily family;
  unsigned flops;
  PartialCombine partials;
};
constexpr OpKindInfo kOpKinds[] = {
#define PAX_OP(Enum, Text, Family, Flops, Partials)                            \
  {Text, OpFamily::Family, Flops, PartialCombine::Partials},
#include "ir/OpKinds.def"
};
} // namespace

llvm::StringRef opKindName(OpKind k) { return kOpKinds[unsigned(k)].text; }
OpFamily opKindFamily(OpKind k) { return kOpKinds[unsigned(k)].family; }
unsigned opKindFlopsPerPoint(OpKind k) { return kOpKinds[unsigned(k)].flops; }
PartialCombine opKindPartials(OpKind k) {
  return kOpKinds[unsigned(k)].partials;
}

std::optional<OpKind> parseOpKind(llvm::StringRef text) {
  for (unsigned i = 0; i < std::size(kOpKinds); ++i)
    if (text == kOpKinds[i].text)
      return OpKind(i);
  return std::nullopt;
}

Value *Op::addResult(TensorType type, AccessMap map) {
  Result r;
  r.value = std::make_unique<Value>(Value::Kind::Result, std::move(type));
  r.value->def = this;
  r.value->index = results.size();
  r.map = std::move(map);
  results.push_back(std::move(r));
  return results.back().value.get();
}

int Op::findIter(llvm::StringRef name) const {
  for (size_t i = 0; i < iters.size(); ++i)
    if (iters[i].name == name)
      return int(i);
  return -1;
}

llvm::StringRef Op::name() const {
  auto it = attrs.find("name");
  if (it == attrs.end())
    return "";
  if (auto *s = std::get_if<std::string>(&it->second))
    return *s;
  return "";
}

int64_t Op::intAttr(llvm::StringRef key, int64_t dflt) const {
  auto it = attrs.find(key);
  if (it == attrs.end())
    return dflt;
  if (auto *v = std::get_if<int64_t>(&it->second))
    return *v;
  return dflt;
}

double Op::floatAttr(llvm::StringRef key, double dflt) const {
  auto it = attrs.find(key);
  if (it == attrs.end())
    return dflt;
  if (auto *f = std::get_if<float>(&it->second))
    return *f;
  if (auto *i = std::get_if<int64_t>(&it->second))
    return double(*i);
  return dflt;
}

bool Op::isReplicaDim(unsigned d) const {
  auto uses = [&](const AccessMap &m) {
    return llvm::any_of(m, [&](const AccessExpr &e) { return e.uses(d); });
  };
  return llvm::none_of(operands,
                       [&](const Operand &o) { return uses(o.map); }) &&
         llvm::none_of(results, [&](const Result &r) { return uses(r.map); });
}

bool Op::reducesAway() const {
  for (unsigned d = 0; d < iters.size(); ++d) {
    if (iters[d].kind != IterKind::Reduction || iters[d].extent == 1)
      continue;
    bool kept = llvm::any_of(results, [&](const Result &r) {
      return llvm::any_of(r.map, [&](const AccessExpr &e) {
        return llvm::is_contained(e.dims, d);
      });
    });
    if (!kept)
      return true;
  }
  return false;
}

/// The extent of the dim \p o reads whole (`*`), or 1.
static int64_t wholeExtent(const Operand &o) {
  for (size_t i = 0; i < o.map.size(); ++i)
    if (o.map[i].kind == AccessExpr::Kind::Full)
      return o.value->type.shape[i];
  return 1;
}

/// An attention op's multiply-adds per (q, k) point over the head dims:
/// Q.K and P.V forward; the gradients recompute Q.K and form dP = dO.V,
/// then dQ (dK and dV) from them.
static double attentionHeadFlops(const Op &op) {
  if (op.operands.size() < 3)
    return 0;
  double e = double(wholeExtent(op.operands[0]));
  double v = double(wholeExtent(op.operands[2]));
  switch (op.kind) {
  case OpKind::Attention:
    return 2 * e + 2 * v;
  case OpKind::AttentionGradQ:
    return 4 * e + 2 * v;
  default:
    return 4 * e + 4 * v;
  }
}

double Op::flops() const {
  double perPoint = opKindFlopsPerPoint(kind);
  if (opKindFamily(kind) == OpFamily::Attention)
    perPoint += attentionHeadFlops(*this);
  if (perPoint == 0)
    return 0;
  // A dim is a real loop unless every access to it is a lookup.
  llvm::SmallVector<bool, 8> lookupOnly(iters.size(), false);
  for (size_t d = 0; d < iters.size(); ++d) {
    bool lookup = false, other = false;
    auto scan = [&](const AccessMap &m) {
      for (const AccessExpr &e : m)
        if (e.uses(d))
          (e.kind == AccessExpr::Kind::Lookup ? lookup : other) = true;
    };
    for (const Operand &o : operands)
      scan(o.map);
    for (const Result &r : results)
      scan(r.map);
    lookupOnly[d] = (lookup && !other) || (!lookup && !other);
  }
  double points = 1;
  for (size_t d = 0; d < iters.size(); ++d)
    if (!lookupOnly[d])
      points *= double(iters[d].extent);
  return points * perPoint;
}

Value *Func::addArg(std::string name, TensorType type) {
  args.push_back(
      std::make_unique<Value>(Value::Kind::Argument, std::move(type)));
  args.back()->name = std::move(name);
  return args.back().get();
}

Op *Func::addOp(OpKind kind) {
  ops.push_back(std::make_unique<Op>(kind));
  return ops.back().get();
}

Global *Module::addGlobal(std::string name, TensorType type) {
  globals.push_back(std::make_unique<Global>(std::move(type)));
  globals.back()->value.name = std::move(name);
  return globals.back().get();
}

bool Module::isTrainingStep() const {
  return llvm::any_of(main.returnNames, [](const std::string &name) {
    return llvm::StringRef(name).starts_with("update/");
  });
}

Global *Module::findGlobal(llvm::StringRef name) const {
  for (const auto &g : globals)
    if (g->name() == name)
      return g.get();
  return nullptr;
}

llvm::DenseMap<const Value *, unsigned> Func::countUses() const {
  llvm::DenseMap<const Value *, unsigned> uses;
  for (const auto &op : ops)
    for (const Operand &o : op->operands)
      ++uses[o.value];
  for (const Value *v : returns)
    ++uses[v];
  return uses;
}

std::optional<double> scalarConstant(const Value *v) {
  if (v->kind != Value::Kind::Global || v->global->isParameter ||
      v->type.numel() != 1)
    return std::nullopt;
  const Global &g = *v->global;
  if (g.source == DataSource::Fill)
    return g.fill;
  if (g.source != DataSource::Dense && g.source != DataSource::Initializer)
    return std::nullopt;
  if (v->type.elem == DType::F32 && g.bytes.size() == 4) {
    float f;
    std::memcpy(&f, g.bytes.data(), 4);
    return double(f);
  }
  if (v->type.elem == DType::F64 && g.bytes.size() == 8) {
    double d;
    std::memcpy(&d, g.bytes.data(), 8);
    return d;
  }
  return std::nullopt;
}

} // namespace pax
