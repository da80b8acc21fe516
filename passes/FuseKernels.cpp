//===- FuseKernels.cpp - Ops grouped into fused kernels -------------------===//
#include "passes/FuseKernels.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <string>

namespace pax {

namespace {
/// The iteration dim each tensor dim of \p map is, or nullopt unless every
/// tensor dim is a plain, distinct iteration dim.
std::optional<llvm::SmallVector<unsigned, 4>> plainDims(const AccessMap &map) {
  llvm::SmallVector<unsigned, 4> dims;
  for (const AccessExpr &e : map) {
    if (!e.isPlainDim() || llvm::is_contained(dims, e.dims[0]))
      return std::nullopt;
    dims.push_back(e.dims[0]);
  }
  return dims;
}

/// Whether \p op computes every point of its space alone, writing each
/// result through plain dims that cover the space.
bool pointwise(const Op &op) {
  OpFamily f = opKindFamily(op.kind);
  if (f != OpFamily::Elementwise && f != OpFamily::Layout)
    return false;
  if (op.results.empty() || llvm::any_of(op.iters, [](const IterDim &d) {
        return d.kind != IterKind::Parallel;
      }))
    return false;
  return llvm::all_of(op.results, [&](const Result &r) {
    auto dims = plainDims(r.map);
    return dims && dims->size() == op.iters.size();
  });
}

/// The split of iteration dim \p d of \p op (1 where the op has none).
int64_t splitOf(const Op &op, unsigned d) {
  auto it = op.attrs.find("config");
  const auto *c = it == op.attrs.end()
                      ? nullptr
                      : std::get_if<std::vector<int64_t>>(&it->second);
  return c && d < c->size() ? (*c)[d] : 1;
}

/// Whether \p reader's operand \p k reads result \p r of \p writer at
/// exactly the point that wrote it, on the same devices.
bool samePoint(const Op &writer, unsigned r, const Op &reader, unsigned k) {
  auto w = plainDims(writer.results[r].map);
  auto rd = plainDims(reader.operands[k].map);
  if (!w || !rd || w->size() != rd->size() ||
      writer.intAttr("offset", 0) != reader.intAttr("offset", 0))
    return false;
  llvm::SmallVector<bool, 6> mapped(reader.iters.size(), false);
  for (size_t t = 0; t < w->size(); ++t) {
    unsigned a = (*w)[t], b = (*rd)[t];
    if (writer.iters[a].extent != reader.iters[b].extent ||
        splitOf(writer, a) != splitOf(reader, b))
      return false;
    mapped[b] = true;
  }
  // The reader's dims the value does not have: its points there would
  // each need the writer's whole block.
  for (unsigned d = 0; d < reader.iters.size(); ++d)
    if (!mapped[d] && splitOf(reader, d) != 1)
      return false;
  return true;
}

/// Whether \p a and \p b iterate the same space split the same way from
/// the same device: a kernel can compute both over it.
bool sameSpace(const Op &a, const Op &b) {
  if (a.iters.size() != b.iters.size() ||
      a.intAttr("offset", 0) != b.intAttr("offset", 0))
    return false;
  for (unsigned d = 0; d < a.iters.size(); ++d)
    if (a.iters[d].extent != b.iters[d].extent ||
        splitOf(a, d) != splitOf(b, d))
      return false;
  return true;
}

/// Groups the ops of one function.
class Grouper {
public:
  explicit Grouper(Func &f) : f(f) {
    for (const auto &op : f.ops)
      for (const Operand &o : op->operands)
        ++readers[o.value];
    for (const Value *v : f.returns)
      returned.insert(v);
  }

  unsigned run() {
    for (auto &op : f.ops) {
      op->attrs.erase("kernel");
      if (!joins(*op))
        close();
      if (pointwise(*op))
        group.push_back(op.get());
    }
    close();
    return kernels;
  }

private:
  /// Whether \p op joins the open group: every value of the group it
  /// reads at the point that wrote it, its only use; and it reads the
  /// group or iterates the group's space (a sibling a later op may read).
  bool joins(const Op &op) const {
    if (group.empty() || !pointwise(op))
      return false;
    bool reads = false;
    for (unsigned k = 0; k < op.operands.size(); ++k) {
      const Value *v = op.operands[k].value;
      const Op *w = v->kind == Value::Kind::Result ? v->def : nullptr;
      if (!w || !llvm::is_contained(group, w))
        continue;
      unsigned r = 0;
      while (w->results[r].value.get() != v)
        ++r;
      if (readers.lookup(v) != 1 || returned.count(v) ||
          !samePoint(*w, r, op, k))
        return false;
      reads = true;
    }
    return reads || sameSpace(*group.front(), op);
  }
  void close() {
    if (group.size() >= 2) {
      std::string name = "k" + std::to_string(kernels++);
      for (Op *op : group)
        op->attrs["kernel"] = name;
    }
    group.clear();
  }

  Func &f;
  llvm::DenseMap<const Value *, unsigned> readers;
  llvm::DenseSet<const Value *> returned;
  std::vector<Op *> group;
  unsigned kernels = 0;
};
} // namespace

unsigned fuseKernels(Module &m) { return Grouper(m.main).run(); }

} // namespace pax
