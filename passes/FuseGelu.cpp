//===- FuseGelu.cpp - A GELU written as elementwise ops as one gelu op ----===//
#include "passes/FuseGelu.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"

#include <array>
#include <cmath>
#include <optional>

namespace pax {
namespace {

/// Where a group's ops are evaluated: both signs, near zero and in the
/// tails, where GELU's two forms differ by 1e-5 to 1e-4.
constexpr std::array<double, 10> kProbes = {-4.0, -2.5, -1.3, -0.7, -0.1,
                                            0.0,  0.2,  0.9,  1.7,  3.1};
using Probe = std::array<double, kProbes.size()>;
/// How many ops after x a group may span.
constexpr size_t kWindow = 24;

enum class Form { None, Erf, Tanh };

double gelu(Form f, double x) {
  if (f == Form::Erf)
    return 0.5 * x * (1.0 + std::erf(x * M_SQRT1_2));
  return 0.5 * x *
         (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

/// Which GELU \p v holds at the probes, if either.
Form formOf(const Probe &v) {
  for (Form f : {Form::Erf, Form::Tanh}) {
    bool all = true;
    for (size_t i = 0; i < kProbes.size() && all; ++i) {
      double g = gelu(f, kProbes[i]);
      all = std::abs(v[i] - g) <= 1e-6 * std::max(1.0, std::abs(g));
    }
    if (all)
      return f;
  }
  return Form::None;
}

/// The operands an elementwise kind takes, or 0 for a kind a group may not
/// hold.
unsigned arity(OpKind k) {
  switch (k) {
  case OpKind::Add:
  case OpKind::Sub:
  case OpKind::Mul:
  case OpKind::Div:
  case OpKind::Pow:
    return 2;
  case OpKind::Erf:
  case OpKind::Tanh:
  case OpKind::Neg:
  case OpKind::Sqrt:
    return 1;
  default:
    return 0;
  }
}

double apply(OpKind k, double a, double b) {
  switch (k) {
  case OpKind::Add:
    return a + b;
  case OpKind::Sub:
    return a - b;
  case OpKind::Mul:
    return a * b;
  case OpKind::Div:
    return a / b;
  case OpKind::Pow:
    return std::pow(a, b);
  case OpKind::Erf:
    return std::erf(a);
  case OpKind::Tanh:
    return std::tanh(a);
  case OpKind::Neg:
    return -a;
  default:
    return std::sqrt(a);
  }
}

class Fuser {
public:
  explicit Fuser(Module &m) : m(m), uses(m.main.countUses()) {}

  unsigned run();

private:
  /// The values of \p op at the probes, where it belongs to the group of
  /// \p x whose values so far are \p values.
  std::optional<Probe>
  evaluate(const Op &op, const Value *x,
           const llvm::DenseMap<const Value *, Probe> &values);
  /// Looks for a GELU of \p x among the ops from index \p start; true
  /// when it replaced one.
  bool fuseFrom(const Value *x, size_t start);
  /// The ops \p root reads through the group's values, itself included.
  llvm::SmallVector<Op *, 12>
  groupOf(Op &root, const llvm::DenseMap<const Value *, Probe> &values);
  /// Makes \p root the gelu of \p x, where nothing outside its group
  /// reads an intermediate; true when it did.
  bool replace(const Value *x, Op &root, Form form,
               const llvm::DenseMap<const Value *, Probe> &values);

  Module &m;
  llvm::DenseMap<const Value *, unsigned> uses;
  llvm::DenseSet<const Op *> dead;
};

std::optional<Probe>
Fuser::evaluate(const Op &op, const Value *x,
                const llvm::DenseMap<const Value *, Probe> &values) {
  unsigned n = arity(op.kind);
  if (n == 0 || op.operands.size() != n || op.results.size() != 1 ||
      op.results[0].value->type != x->type || dead.contains(&op))
    return std::nullopt;
  Probe args[2];
  bool readsGroup = false;
  for (unsigned k = 0; k < n; ++k) {
    const Operand &o = op.operands[k];
    if (std::optional<double> c = scalarConstant(o.value)) {
      args[k].fill(*c);
      continue;
    }
    if (!(o.map == op.results[0].map))
      return std::nullopt;
    if (o.value == x) {
      args[k] = kProbes;
    } else if (auto it = values.find(o.value); it != values.end()) {
      args[k] = it->second;
    } else {
      return std::nullopt;
    }
    readsGroup = true;
  }
  if (!readsGroup)
    return std::nullopt;
  Probe v;
  for (size_t i = 0; i < kProbes.size(); ++i)
    v[i] = apply(op.kind, args[0][i], n > 1 ? args[1][i] : 0.0);
  return v;
}

bool Fuser::fuseFrom(const Value *x, size_t start) {
  llvm::DenseMap<const Value *, Probe> values;
  size_t end = std::min(m.main.ops.size(), start + kWindow);
  for (size_t j = start; j < end; ++j) {
    Op &op = *m.main.ops[j];
    std::optional<Probe> v = evaluate(op, x, values);
    if (!v)
      continue;
    values[op.results[0].value.get()] = *v;
    Form form = formOf(*v);
    if (form != Form::None && replace(x, op, form, values))
      return true;
  }
  return false;
}

llvm::SmallVector<Op *, 12>
Fuser::groupOf(Op &root, const llvm::DenseMap<const Value *, Probe> &values) {
  llvm::SmallVector<Op *, 12> group{&root};
  for (size_t i = 0; i < group.size(); ++i)
    for (const Operand &o : group[i]->operands)
      if (values.count(o.value) && !llvm::is_contained(group, o.value->def))
        group.push_back(o.value->def);
  return group;
}

bool Fuser::replace(const Value *x, Op &root, Form form,
                    const llvm::DenseMap<const Value *, Probe> &values) {
  llvm::SmallVector<Op *, 12> group = groupOf(root, values);
  llvm::DenseMap<const Value *, unsigned> inside;
  for (const Op *op : group)
    for (const Operand &o : op->operands)
      ++inside[o.value];
  for (const Op *op : llvm::drop_begin(group))
    if (inside.lookup(op->results[0].value.get()) !=
        uses.lookup(op->results[0].value.get()))
      return false;
  uses[x] += 1 - inside.lookup(x);
  root.kind = OpKind::Gelu;
  root.operands = {{const_cast<Value *>(x), root.results[0].map}};
  root.attrs["approximate"] = std::string(form == Form::Tanh ? "tanh" : "none");
  for (Op *op : llvm::drop_begin(group)) {
    root.sources += op->sources;
    dead.insert(op);
    op->operands.clear();
    op->results.clear();
  }
  return true;
}

unsigned Fuser::run() {
  unsigned fused = 0;
  auto from = [&](const Value *x, size_t start) {
    if ((x->type.elem == DType::F32 || x->type.elem == DType::F64) &&
        uses.lookup(x) >= 2)
      while (fuseFrom(x, start))
        ++fused;
  };
  for (const auto &arg : m.main.args)
    from(arg.get(), 0);
  for (size_t i = 0; i < m.main.ops.size(); ++i)
    if (!dead.contains(m.main.ops[i].get()))
      for (const Result &r : m.main.ops[i]->results)
        from(r.value.get(), i + 1);
  llvm::erase_if(m.main.ops, [&](const std::unique_ptr<Op> &op) {
    return dead.contains(op.get());
  });
  return fused;
}

} // namespace

unsigned fuseGelu(Module &m) { return Fuser(m).run(); }

} // namespace pax
