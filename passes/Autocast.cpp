//===- Autocast.cpp - Mixed precision: each op in the precision it needs --===//
#include "passes/Autocast.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"

#include <map>

namespace pax {

AutocastPolicy autocastPolicy(OpKind k) {
  switch (k) {
#define PAX_AUTOCAST(Kind, Policy)                                             \
  case OpKind::Kind:                                                           \
    return AutocastPolicy::Policy;
#include "passes/AutocastPolicy.def"
  default:
    return AutocastPolicy::Follow;
  }
}

llvm::Expected<DType> parseLowPrecision(llvm::StringRef text) {
  if (text == "bf16")
    return DType::BF16;
  if (text == "fp16" || text == "f16")
    return DType::F16;
  return llvm::createStringError("unknown low precision '" + text +
                                 "' (expected bf16 or fp16)");
}

namespace {

/// A cast of \p from to \p to over \p from's dims, point by point.
std::unique_ptr<Op> makeCast(Value *from, DType to) {
  auto op = std::make_unique<Op>(OpKind::Cast);
  AccessMap map;
  for (size_t d = 0; d < from->type.shape.size(); ++d) {
    op->iters.push_back(
        {"d" + std::to_string(d), from->type.shape[d], IterKind::Parallel});
    map.push_back(AccessExpr::dim(unsigned(d)));
  }
  op->operands.push_back({from, map});
  TensorType type = from->type;
  type.elem = to;
  op->addResult(type, map);
  return op;
}

class Autocaster {
public:
  Autocaster(Module &m, const AutocastOptions &o) : m(m), o(o) {}
  void run();

private:
  /// Whether \p v takes part: fp32, or made low here.
  bool castable(const Value *v) const {
    return v->type.elem == DType::F32 || lowered.count(v);
  }
  /// Globals every reader of which computes in the low precision, which
  /// may be stored so (not master weights; values not in the IR's bytes).
  void chooseStoredLow();
  /// \p v in type \p t: itself, or its cast (made once, placed before the
  /// op being rewritten).
  Value *as(Value *v, DType t);
  /// The type \p op computes in, by its policy and its operands.
  std::optional<DType> computeType(const Op &op) const;
  void rewrite(std::unique_ptr<Op> op);

  Module &m;
  AutocastOptions o;
  llvm::DenseSet<const Value *> lowered;
  std::map<std::pair<Value *, DType>, Value *> casts;
  std::vector<std::unique_ptr<Op>> out;
};

void Autocaster::chooseStoredLow() {
  llvm::DenseMap<const Value *, bool> allLow;
  for (const auto &op : m.main.ops) {
    bool low = autocastPolicy(op->kind) == AutocastPolicy::Low;
    for (const Operand &x : op->operands)
      if (x.value->kind == Value::Kind::Global) {
        auto [it, fresh] = allLow.try_emplace(x.value, low);
        it->second = it->second && low;
      }
  }
  for (Value *r : m.main.returns)
    allLow[r] = false;
  for (const auto &g : m.globals) {
    bool stored = g->source != DataSource::Dense && g->bytes.empty() &&
                  !(g->isParameter && o.masterWeights);
    if (g->value.type.elem == DType::F32 && stored &&
        allLow.lookup(&g->value)) {
      g->value.type.elem = o.low;
      lowered.insert(&g->value);
    }
  }
}

Value *Autocaster::as(Value *v, DType t) {
  if (v->type.elem == t)
    return v;
  Value *&c = casts[{v, t}];
  if (!c) {
    out.push_back(makeCast(v, t));
    if (v->global && v->global->isParameter && o.replicas > 1)
      out.back()->iters.push_back({"r", o.replicas, IterKind::Parallel});
    c = out.back()->results[0].value.get();
    if (t == o.low)
      lowered.insert(c);
  }
  return c;
}

std::optional<DType> Autocaster::computeType(const Op &op) const {
  switch (autocastPolicy(op.kind)) {
  case AutocastPolicy::Low:
    return o.low;
  case AutocastPolicy::F32:
    return DType::F32;
  case AutocastPolicy::Keep:
    return std::nullopt;
  case AutocastPolicy::Follow:
    break;
  }
  bool any = false, allLow = true;
  for (const Operand &x : op.operands)
    if (x.value->kind != Value::Kind::Global && castable(x.value)) {
      any = true;
      allLow &= x.value->type.elem == o.low;
    }
  if (!any)
    return std::nullopt;
  return allLow ? o.low : DType::F32;
}

void Autocaster::rewrite(std::unique_ptr<Op> op) {
  std::optional<DType> t = computeType(*op);
  AutocastPolicy policy = autocastPolicy(op->kind);
  if (t)
    for (Operand &x : op->operands) {
      // A following op reads weights and constants as stored.
      bool asStored = policy == AutocastPolicy::Follow &&
                      x.value->kind == Value::Kind::Global;
      if (castable(x.value) && !asStored)
        x.value = as(x.value, *t);
    }
  if (t && *t == o.low)
    for (size_t i = 0; i < op->results.size(); ++i) {
      Value *v = op->results[i].value.get();
      if (v->type.elem != DType::F32 ||
          (policy == AutocastPolicy::Low && i > 0))
        continue;
      v->type.elem = o.low;
      lowered.insert(v);
    }
  out.push_back(std::move(op));
}

void Autocaster::run() {
  Func &f = m.main;
  std::vector<DType> returned;
  for (const Value *r : f.returns)
    returned.push_back(r->type.elem);
  chooseStoredLow();
  std::vector<std::unique_ptr<Op>> ops = std::move(f.ops);
  for (auto &op : ops)
    rewrite(std::move(op));
  for (size_t i = 0; i < f.returns.size(); ++i)
    f.returns[i] = as(f.returns[i], returned[i]);
  f.ops = std::move(out);
}

/// Whether foldCasts may make \p producer write \p cast's type.
bool foldsInto(const Op &producer, const Op &cast, CastFold which) {
  OpFamily fam = opKindFamily(producer.kind);
  if (producer.kind == OpKind::Cast || fam == OpFamily::Layout ||
      fam == OpFamily::Lookup || fam == OpFamily::Collective ||
      fam == OpFamily::Opaque)
    return false;
  DType from = cast.operands[0].value->type.elem;
  DType to = cast.results[0].value->type.elem;
  if (!isFloat(from) || !isFloat(to) || !isIdentityMap(cast.operands[0].map) ||
      !isIdentityMap(cast.results[0].map) ||
      cast.operands[0].map.size() != cast.results[0].value->type.shape.size())
    return false;
  return which == CastFold::All || dtypeBytes(to) < dtypeBytes(from);
}

} // namespace

unsigned foldCasts(Module &m, CastFold which) {
  Func &f = m.main;
  auto uses = f.countUses();
  unsigned folded = 0;
  for (auto &op : f.ops) {
    if (op->kind != OpKind::Cast || op->operands.size() != 1 ||
        op->results.size() != 1)
      continue;
    Value *from = op->operands[0].value;
    if (from->kind != Value::Kind::Result || uses.lookup(from) != 1 ||
        !foldsInto(*from->def, *op, which))
      continue;
    // The producer writes the cast's value, in its type.
    Op &producer = *from->def;
    std::unique_ptr<Value> &slot = producer.results[from->index].value;
    std::unique_ptr<Value> cast = std::move(op->results[0].value);
    cast->def = &producer;
    cast->index = from->index;
    producer.sources += op->sources;
    slot = std::move(cast);
    op->results.clear();
    op->operands.clear();
    ++folded;
  }
  llvm::erase_if(f.ops, [](const std::unique_ptr<Op> &op) {
    return op->kind == OpKind::Cast && op->results.empty();
  });
  return folded;
}

unsigned autocast(Module &m, const AutocastOptions &o) {
  Autocaster(m, o).run();
  foldCasts(m, CastFold::All);
  return unsigned(llvm::count_if(
      m.main.ops, [](const auto &op) { return op->kind == OpKind::Cast; }));
}

} // namespace pax
