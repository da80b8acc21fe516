//===- Optimizer.cpp - Parameter updates of a training step ---------------===//
#include "passes/autodiff/Optimizer.h"

#include "passes/autodiff/GradientBuilder.h"

#include "llvm/ADT/StringSwitch.h"

namespace pax {

std::optional<OptimizerOptions::Kind> parseOptimizerKind(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<OptimizerOptions::Kind>>(name)
      .Case("sgd", OptimizerOptions::Kind::Sgd)
      .Case("adam", OptimizerOptions::Kind::Adam)
      .Case("adamw", OptimizerOptions::Kind::AdamW)
      .Default(std::nullopt);
}

namespace {

/// Elementwise arithmetic over one parameter's shape (scalars broadcast).
class Updates {
public:
  Updates(Module &m, int64_t replicas)
      : m(m), b(m, "optimizer"), replicas(replicas) {}

  Value *op(OpKind kind, llvm::ArrayRef<Value *> ins, llvm::StringRef what) {
    const TensorType *type = &ins[0]->type;
    for (Value *v : ins)
      if (v->type.rank() > type->rank())
        type = &v->type;
    Value *v = b.elementwise(kind, ins, *type, what);
    GradientBuilder::replicate(*v->def, replicas);
    tag(*v->def, *type);
    return v;
  }
  Value *c(double v, DType elem) { return b.constant(v, elem); }
  /// An elementwise op whose result is of \p type.
  Value *typed(OpKind kind, llvm::ArrayRef<Value *> ins, const TensorType &type,
               llvm::StringRef what) {
    Value *v = b.elementwise(kind, ins, type, what);
    GradientBuilder::replicate(*v->def, replicas);
    tag(*v->def, type);
    return v;
  }
  /// \p a where \p cond holds, else \p b (of \p a's type).
  Value *where(Value *cond, Value *a, Value *b, llvm::StringRef what) {
    const TensorType &type =
        a->type.rank() >= b->type.rank() ? a->type : b->type;
    return typed(OpKind::Where, {cond, a, b}, type, what);
  }

  /// The sum of every element of \p x, as a scalar.
  Value *sumAll(Value *x, llvm::StringRef what) {
    Op *o = m.main.addOp(OpKind::ReduceSum);
    AccessMap map;
    for (unsigned d = 0; d < x->type.rank(); ++d) {
      o->iters.push_back(
          {"d" + std::to_string(d), x->type.shape[d], IterKind::Reduction});
      map.push_back(AccessExpr::dim(d));
    }
    o->operands.push_back({x, map});
    o->attrs["name"] = ("optimizer/" + what).str();
    GradientBuilder::replicate(*o, replicas);
    tag(*o, x->type);
    return o->addResult(TensorType{x->type.elem, {}}, {});
  }

  /// The ops built from now on over \p g's shape belong to its update
  /// (attribute `parameter`: ZeRO shards them with the parameter's state);
  /// nullptr: to no one parameter.
  void forParameter(const Global *g) { param = g; }

  /// A global holding optimizer state, zero at the first step.
  Global *state(const std::string &name, const TensorType &type) {
    Global *g = m.addGlobal(name, type);
    g->source = DataSource::Fill;
    g->fill = 0;
    return g;
  }

private:
  void tag(Op &op, const TensorType &over) const {
    if (param && over.shape == param->value.type.shape)
      op.attrs["parameter"] = param->name();
  }

  Module &m;
  GradientBuilder b;
  int64_t replicas;
  const Global *param = nullptr;
};

} // namespace

namespace {
/// The ops of one optimizer: the state it adds, the updates it returns.
class Builder {
public:
  Builder(Module &m, const OptimizerOptions &o)
      : m(m), o(o), u(m, o.replicas) {}

  /// Updates of \p params (parameter, gradient), in order.
  void build(std::vector<std::pair<Global *, Value *>> &params);

  /// (name, value) of each new parameter, then of each piece of state.
  std::vector<std::pair<std::string, Value *>> updates, states;

private:
  using Kind = OptimizerOptions::Kind;
  void clipByGlobalNorm(std::vector<std::pair<Global *, Value *>> &params);
  /// Divides each gradient by the loss scale; returns whether any of them
  /// holds an inf or a NaN (an i1 scalar).
  Value *unscale(std::vector<std::pair<Global *, Value *>> &params);
  /// \p v, or where the step is skipped, \p g's value as it was.
  Value *unlessSkipped(const Global *g, Value *v);
  /// The loss scale's and its growth count's next values.
  void updateScale();
  void adamCorrections();
  /// The new value of \p g from its (decayed, clipped) gradient \p d.
  Value *sgd(Global *g, Value *d);
  Value *adam(Global *g, Value *d);

  Module &m;
  const OptimizerOptions &o;
  Updates u;
  DType elem = DType::F32;
  Value *bias1 = nullptr, *bias2Sqrt = nullptr;
  /// With loss scaling: whether this step is skipped.
  Value *found = nullptr;
};
} // namespace

/// Clipping by the global norm of all the gradients.
void Builder::clipByGlobalNorm(
    std::vector<std::pair<Global *, Value *>> &params) {
  Value *total = nullptr;
  for (auto &[g, grad] : params) {
    u.forParameter(g);
    Value *sq =
        u.sumAll(u.op(OpKind::Mul, {grad, grad}, "square"), "sum_squares");
    total = total ? u.op(OpKind::Add, {total, sq}, "total") : sq;
  }
  u.forParameter(nullptr);
  Value *norm = u.op(OpKind::Sqrt, {total}, "norm");
  Value *coef = u.op(OpKind::Div,
                     {u.c(o.clipNorm, elem),
                      u.op(OpKind::Add, {norm, u.c(1e-6, elem)}, "norm_eps")},
                     "clip_coef");
  coef = u.op(OpKind::Min, {coef, u.c(1, elem)}, "clip_coef_clamped");
  for (auto &[g, grad] : params) {
    u.forParameter(g);
    grad = u.op(OpKind::Mul, {grad, coef}, "clipped");
  }
  u.forParameter(nullptr);
}

Value *Builder::unscale(std::vector<std::pair<Global *, Value *>> &params) {
  Value *inv = u.op(OpKind::Div,
                    {u.c(1, elem), const_cast<Value *>(&o.lossScale->value)},
                    "inv_loss_scale");
  // A sum of each gradient times 0 is NaN exactly where an element is inf
  // or NaN, and sums across the devices as any partial sum does.
  Value *probe = nullptr;
  for (auto &[g, grad] : params) {
    u.forParameter(g);
    grad = u.op(OpKind::Mul, {grad, inv}, "unscaled");
    Value *p = u.sumAll(u.op(OpKind::Mul, {grad, u.c(0, elem)}, "inf_probe"),
                        "inf_probe_sum");
    probe = probe ? u.op(OpKind::Add, {probe, p}, "inf_probe_total") : p;
  }
  u.forParameter(nullptr);
  return u.typed(OpKind::IsNaN, {probe}, TensorType{DType::I1, {}},
                 "found_inf");
}

Value *Builder::unlessSkipped(const Global *g, Value *v) {
  if (!found)
    return v;
  return u.where(found, const_cast<Value *>(&g->value), v, "skip_step");
}

void Builder::updateScale() {
  Value *scale = const_cast<Value *>(&o.lossScale->value);
  Global *count = u.state("amp/growth_tracker", TensorType{elem, {}});
  Value *clean =
      u.where(found, u.c(0, elem),
              u.op(OpKind::Add, {&count->value, u.c(1, elem)}, "clean_steps"),
              "clean_steps_or_zero");
  Value *grow = u.typed(OpKind::GreaterOrEqual,
                        {clean, u.c(double(o.growthInterval), elem)},
                        TensorType{DType::I1, {}}, "grow_scale");
  Value *next = u.where(
      grow, u.op(OpKind::Mul, {scale, u.c(o.scaleGrowth, elem)}, "grown"),
      scale, "scale_grown");
  next = u.where(
      found, u.op(OpKind::Mul, {scale, u.c(o.scaleBackoff, elem)}, "backoff"),
      next, "scale_next");
  states.push_back({kLossScaleName, next});
  states.push_back(
      {count->name(), u.where(grow, u.c(0, elem), clean, "clean_steps_next")});
}

/// Adam's step count and bias corrections.
void Builder::adamCorrections() {
  Global *step = u.state("optimizer/step", TensorType{elem, {}});
  Value *t = u.op(OpKind::Add, {&step->value, u.c(1, elem)}, "step");
  states.push_back({step->name(), unlessSkipped(step, t)});
  bias1 = u.op(
      OpKind::Sub,
      {u.c(1, elem), u.op(OpKind::Pow, {u.c(o.beta1, elem), t}, "beta1_t")},
      "bias_correction1");
  Value *bias2 = u.op(
      OpKind::Sub,
      {u.c(1, elem), u.op(OpKind::Pow, {u.c(o.beta2, elem), t}, "beta2_t")},
      "bias_correction2");
  bias2Sqrt = u.op(OpKind::Sqrt, {bias2}, "bias_correction2_sqrt");
}

Value *Builder::sgd(Global *g, Value *d) {
  if (o.momentum > 0) {
    Global *buf = u.state("optimizer/momentum/" + g->name(), g->value.type);
    Value *v = u.op(
        OpKind::Add,
        {u.op(OpKind::Mul, {&buf->value, u.c(o.momentum, elem)}, "momentum"),
         d},
        "momentum_buffer");
    states.push_back({buf->name(), v});
    d = o.nesterov ? u.op(OpKind::Add,
                          {d, u.op(OpKind::Mul, {v, u.c(o.momentum, elem)},
                                   "nesterov")},
                          "nesterov_step")
                   : v;
  }
  return u.op(OpKind::Sub,
              {&g->value, u.op(OpKind::Mul, {d, u.c(o.lr, elem)}, "scaled")},
              "sgd");
}

Value *Builder::adam(Global *g, Value *d) {
  const TensorType &type = g->value.type;
  Global *m1 = u.state("optimizer/exp_avg/" + g->name(), type);
  Global *m2 = u.state("optimizer/exp_avg_sq/" + g->name(), type);
  Value *avg = u.op(
      OpKind::Add,
      {u.op(OpKind::Mul, {&m1->value, u.c(o.beta1, elem)}, "beta1_m"),
       u.op(OpKind::Mul, {d, u.c(1 - o.beta1, elem)}, "one_minus_beta1_g")},
      "exp_avg");
  Value *sq = u.op(OpKind::Mul, {d, d}, "grad_sq");
  Value *avgSq =
      u.op(OpKind::Add,
           {u.op(OpKind::Mul, {&m2->value, u.c(o.beta2, elem)}, "beta2_v"),
            u.op(OpKind::Mul, {sq, u.c(1 - o.beta2, elem)}, "one_minus_beta2")},
           "exp_avg_sq");
  states.push_back({m1->name(), avg});
  states.push_back({m2->name(), avgSq});
  // torch: denom = sqrt(v) / sqrt(1 - b2^t) + eps;
  //        p -= lr / (1 - b1^t) * m / denom.
  Value *denom = u.op(
      OpKind::Add,
      {u.op(OpKind::Div, {u.op(OpKind::Sqrt, {avgSq}, "sqrt_v"), bias2Sqrt},
            "corrected_sqrt_v"),
       u.c(o.eps, elem)},
      "denom");
  Value *stepSize = u.op(OpKind::Div, {u.c(o.lr, elem), bias1}, "step_size");
  Value *delta =
      u.op(OpKind::Mul, {u.op(OpKind::Div, {avg, denom}, "ratio"), stepSize},
           "delta");
  Value *base = &g->value;
  if (o.kind == Kind::AdamW && o.weightDecay > 0)
    base = u.op(OpKind::Mul, {base, u.c(1 - o.lr * o.weightDecay, elem)},
                "decayed");
  return u.op(OpKind::Sub, {base, delta}, "adam");
}

void Builder::build(std::vector<std::pair<Global *, Value *>> &params) {
  elem = params[0].second->type.elem;
  if (o.lossScale)
    found = unscale(params);
  if (o.clipNorm > 0)
    clipByGlobalNorm(params);
  bool isAdam = o.kind != Kind::Sgd;
  if (isAdam)
    adamCorrections();
  for (auto &[g, grad] : params) {
    u.forParameter(g);
    Value *d = grad;
    if (o.weightDecay > 0 && o.kind != Kind::AdamW)
      d = u.op(OpKind::Add,
               {d, u.op(OpKind::Mul, {&g->value, u.c(o.weightDecay, elem)},
                        "decay")},
               "with_decay");
    size_t first = states.size();
    updates.push_back(
        {g->name(), unlessSkipped(g, isAdam ? adam(g, d) : sgd(g, d))});
    for (size_t i = first; i < states.size(); ++i)
      states[i].second =
          unlessSkipped(m.findGlobal(states[i].first), states[i].second);
  }
  u.forParameter(nullptr);
  if (o.lossScale)
    updateScale();
  // The random ops' step counter moves on: each step draws new numbers.
  if (Global *rng = m.findGlobal(kRngStepName))
    states.push_back(
        {rng->name(),
         u.op(OpKind::Add, {&rng->value, u.c(1, DType::I64)}, "rng_step")});
}

llvm::Error checkOptimizerOptions(const OptimizerOptions &o) {
  auto fail = [](const llvm::Twine &msg) {
    return llvm::createStringError("optimizer: " + msg);
  };
  if (!(o.lr > 0))
    return fail("--lr must be positive");
  if (o.momentum < 0 || o.momentum >= 1)
    return fail("--momentum must be in [0, 1)");
  if (o.nesterov && (o.kind != OptimizerOptions::Kind::Sgd || o.momentum == 0))
    return fail("--nesterov needs sgd with a --momentum");
  if (o.weightDecay < 0)
    return fail("--weight-decay must not be negative");
  if (o.clipNorm < 0)
    return fail("--clip-norm must not be negative");
  if (o.lossScale && (o.growthInterval < 1 || !(o.scaleGrowth >= 1) ||
                      !(o.scaleBackoff > 0 && o.scaleBackoff < 1)))
    return fail("loss scaling needs a growth interval of at least 1 step, "
                "a growth of at least 1 and a backoff in (0, 1)");
  if (o.beta1 < 0 || o.beta1 >= 1 || o.beta2 < 0 || o.beta2 >= 1 ||
      !(o.eps > 0))
    return fail("the betas must be in [0, 1) and eps positive");
  return llvm::Error::success();
}

Global *addLossScale(Module &m, double initial) {
  Global *g = m.addGlobal(kLossScaleName, TensorType{DType::F32, {}});
  g->source = DataSource::Fill;
  g->fill = initial;
  return g;
}

llvm::Error appendOptimizer(Module &m, const OptimizerOptions &o) {
  if (auto err = checkOptimizerOptions(o))
    return err;
  Func &f = m.main;
  // The parameters with a gradient, in result order.
  std::vector<std::pair<Global *, Value *>> params;
  std::vector<Value *> keep;
  std::vector<std::string> keepNames;
  for (size_t i = 0; i < f.returns.size(); ++i) {
    llvm::StringRef name = f.returnNames[i];
    if (name.consume_front("grad/")) {
      Global *g = m.findGlobal(name);
      if (!g || !g->isParameter)
        return llvm::createStringError("optimizer: result '" +
                                       f.returnNames[i] +
                                       "' is the gradient of no parameter");
      params.push_back({g, f.returns[i]});
      continue;
    }
    keep.push_back(f.returns[i]);
    keepNames.push_back(f.returnNames[i]);
  }
  if (params.empty())
    return llvm::createStringError(
        "optimizer: the module has no gradients to apply (run autodiff "
        "first)");
  Builder b(m, o);
  b.build(params);
  f.returns = keep;
  f.returnNames = keepNames;
  for (auto *list : {&b.updates, &b.states})
    for (auto &[name, v] : *list) {
      f.returns.push_back(v);
      f.returnNames.push_back("update/" + name);
    }
  return llvm::Error::success();
}

} // namespace pax
