//===- Verifier.cpp - Structural checks of the paxc IR --------------------===//
#include "ir/Verifier.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"

namespace pax {

namespace {
class Verifier {
public:
  Verifier(const Module &m, VerifyReporter report) : m(m), report(report) {}

  bool run() {
    verifyGlobals();
    verifyFunc();
    return ok;
  }

private:
  void error(const Op *op, const llvm::Twine &msg) {
    report(op, msg);
    ok = false;
  }
  void verifyGlobals();
  void verifyFunc();
  void verifyOp(const Op &op);
  /// Each fused kernel's ops (attribute `kernel`, a string) are one run of
  /// consecutive ops.
  void verifyKernels();
  /// One expression \p e of a map, over a tensor dim of \p dim; \p where
  /// prefixes its errors.
  void verifyExpr(const Op &op, const AccessExpr &e, int64_t dim, bool isResult,
                  const std::string &where);
  /// An affine expression: a result's covers its dim (scatter_add's
  /// reaches into it), an operand's reads inside it.
  void verifyAffine(const Op &op, const AccessExpr &e, int64_t dim,
                    bool isResult, const std::string &where);
  void verifyMap(const Op &op, const AccessMap &map, const TensorType &type,
                 bool isResult, const llvm::Twine &what);

  const Module &m;
  VerifyReporter report;
  llvm::DenseSet<const Value *> defined;
  bool ok = true;
};
} // namespace

void Verifier::verifyGlobals() {
  llvm::StringSet<> names;
  for (const auto &g : m.globals) {
    if (!names.insert(g->name()).second)
      error(nullptr, "global @" + g->name() + " is defined twice");
    if (g->source == DataSource::Dense &&
        int64_t(g->bytes.size()) != g->value.type.bytes())
      error(nullptr, "dense data of @" + g->name() + " has " +
                         llvm::Twine(g->bytes.size()) + " bytes, its type " +
                         g->value.type.str() + " needs " +
                         llvm::Twine(g->value.type.bytes()));
    defined.insert(&g->value);
  }
}

void Verifier::verifyFunc() {
  const Func &f = m.main;
  llvm::StringSet<> names;
  for (const auto &a : f.args) {
    if (!names.insert(a->name).second)
      error(nullptr, "argument %" + a->name + " is defined twice");
    defined.insert(a.get());
  }
  for (const auto &op : f.ops)
    verifyOp(*op);
  verifyKernels();
  if (f.returns.size() != f.returnNames.size())
    error(nullptr, "the function returns " + llvm::Twine(f.returns.size()) +
                       " values but names " +
                       llvm::Twine(f.returnNames.size()));
  for (const Value *v : f.returns)
    if (!v || !defined.count(v))
      error(nullptr, "the function returns a value that is not defined");
}

void Verifier::verifyKernels() {
  llvm::StringSet<> closed;
  std::string open;
  for (const auto &op : m.main.ops) {
    auto it = op->attrs.find("kernel");
    const std::string *k =
        it == op->attrs.end() ? nullptr : std::get_if<std::string>(&it->second);
    if (it != op->attrs.end() && (!k || k->empty()))
      error(op.get(), "attribute 'kernel' must name a fused kernel");
    std::string now = k ? *k : "";
    if (now != open && !open.empty())
      closed.insert(open);
    if (now != open && closed.count(now))
      error(op.get(),
            "fused kernel '" + now + "' has ops that are not consecutive");
    open = now;
  }
}

void Verifier::verifyOp(const Op &op) {
  llvm::StringSet<> names;
  for (const IterDim &d : op.iters) {
    if (!names.insert(d.name).second)
      error(&op, "iteration dim '" + d.name + "' is declared twice");
    if (d.extent < 1 || d.extent > kMaxExtent)
      error(&op, "iteration dim '" + d.name + "' has extent " +
                     llvm::Twine(d.extent) + ", outside [1, 2^48]");
  }
  for (size_t i = 0; i < op.operands.size(); ++i) {
    const Operand &o = op.operands[i];
    if (!o.value || !defined.count(o.value)) {
      error(&op, "operand " + llvm::Twine(i) + " is used before it is defined");
      continue;
    }
    verifyMap(op, o.map, o.value->type, false, "operand " + llvm::Twine(i));
  }
  if (op.results.empty())
    error(&op, "an op needs at least one result");
  for (size_t i = 0; i < op.results.size(); ++i) {
    verifyMap(op, op.results[i].map, op.results[i].value->type, true,
              "result " + llvm::Twine(i));
    defined.insert(op.results[i].value.get());
  }
}

void Verifier::verifyMap(const Op &op, const AccessMap &map,
                         const TensorType &type, bool isResult,
                         const llvm::Twine &what) {
  if (map.size() != type.rank()) {
    error(&op, what + " has an access map of rank " + llvm::Twine(map.size()) +
                   " for a tensor of rank " + llvm::Twine(type.rank()));
    return;
  }
  for (size_t i = 0; i < map.size(); ++i) {
    // A string, not a Twine: a Twine of temporaries would outlive them.
    std::string where = (what + ", dim " + llvm::Twine(i) + ": ").str();
    const AccessExpr &e = map[i];
    if (llvm::any_of(e.dims, [&](unsigned d) { return d >= op.iters.size(); }))
      error(&op, where + "refers to an iteration dim that does not exist");
    else
      verifyExpr(op, e, type.shape[i], isResult, where);
  }
}

void Verifier::verifyExpr(const Op &op, const AccessExpr &e, int64_t dim,
                          bool isResult, const std::string &where) {
  auto spans = [&] {
    error(&op, where + accessExprStr(e, op.iters) + " spans " +
                   llvm::Twine(accessSpan(e, op.iters)) + " but the dim has " +
                   llvm::Twine(dim));
  };
  switch (e.kind) {
  case AccessExpr::Kind::Broadcast:
    if (dim != 1)
      error(&op, where + "'_' needs a size-1 dim, not " + llvm::Twine(dim));
    break;
  case AccessExpr::Kind::Full:
    break;
  case AccessExpr::Kind::Group:
    // A result's group covers its dim; an operand's may read a part.
    if (e.offset < 0 || e.offset + accessSpan(e, op.iters) > dim ||
        (isResult && (e.offset || accessSpan(e, op.iters) != dim)))
      spans();
    break;
  case AccessExpr::Kind::Lookup:
    if (accessSpan(e, op.iters) != dim)
      spans();
    if (isResult && op.kind != OpKind::ScatterAdd)
      error(&op, where + "only scatter_add writes a result through gather()");
    break;
  case AccessExpr::Kind::Affine:
    verifyAffine(op, e, dim, isResult, where);
    break;
  }
}

void Verifier::verifyAffine(const Op &op, const AccessExpr &e, int64_t dim,
                            bool isResult, const std::string &where) {
  auto [lo, hi] = affineRange(e, op.iters);
  std::string text = accessExprStr(e, op.iters);
  if (isResult && op.kind == OpKind::ScatterAdd) {
    // Sums into what it reaches (a convolution's input gradient through
    // its window), zero elsewhere.
    if (hi < 0 || lo >= dim)
      error(&op,
            where + text + " never writes inside a dim of " + llvm::Twine(dim));
  } else if (isResult) {
    // Results are written once per point: `d` or `d - offset`, covering
    // the whole dim.
    if (e.dims.size() != 1 || e.stride != 1 || e.offset > 0 ||
        op.iters[e.dims[0]].extent + e.offset < dim)
      error(&op, where + text + " does not write every element of a dim of " +
                     llvm::Twine(dim));
  } else if (hi < 0 || lo >= dim) {
    error(&op,
          where + text + " never reads inside a dim of " + llvm::Twine(dim));
  }
}

bool verifyModule(const Module &m, VerifyReporter report) {
  return Verifier(m, report).run();
}

} // namespace pax
