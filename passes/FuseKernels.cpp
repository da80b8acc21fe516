//===- FuseKernels.cpp - Ops grouped into fused kernels -------------------===//
#include "passes/FuseKernels.h"

#include <string>

namespace pax {

namespace {
/// The iteration dim each tensor dim of \p map is (-1 for a size-1 `_`),
/// or nullopt unless every tensor dim is a plain, distinct iteration dim or
/// `_`.
std::optional<llvm::SmallVector<int, 4>> plainDims(const AccessMap &map) {
  llvm::SmallVector<int, 4> dims;
  for (const AccessExpr &e : map) {
    if (e.kind == AccessExpr::Kind::Broadcast) {
      dims.push_back(-1);
      continue;
    }
    if (!e.isPlainDim() || llvm::is_contained(dims, int(e.dims[0])))
      return std::nullopt;
    dims.push_back(int(e.dims[0]));
  }
  return dims;
}

/// The iteration dims each tensor dim of \p map is (none for `_`, one for a
/// plain dim, several for a row-major group), or nullopt unless every
/// tensor dim is one of those and no iteration dim repeats.
std::optional<llvm::SmallVector<llvm::SmallVector<unsigned, 2>, 4>>
groupedDims(const AccessMap &map) {
  llvm::SmallVector<llvm::SmallVector<unsigned, 2>, 4> out;
  llvm::SmallVector<unsigned, 8> seen;
  for (const AccessExpr &e : map) {
    out.emplace_back();
    if (e.kind == AccessExpr::Kind::Broadcast)
      continue;
    if (!e.isPlainDim() &&
        (e.kind != AccessExpr::Kind::Group || e.offset != 0 || e.readsWhole()))
      return std::nullopt;
    for (unsigned d : e.dims) {
      if (llvm::is_contained(seen, d))
        return std::nullopt;
      seen.push_back(d);
      out.back().push_back(d);
    }
  }
  return out;
}

/// Whether \p op, with no reduction dims, writes each result through
/// plain dims and row-major groups of them that cover its space (a
/// reshape).
bool regroups(const Op &op, const Result &r) {
  auto dims = groupedDims(r.map);
  if (!dims)
    return false;
  size_t n = 0;
  for (const auto &g : *dims)
    n += g.size();
  return n == op.iters.size() && llvm::all_of(op.iters, [](const IterDim &d) {
           return d.kind == IterKind::Parallel;
         });
}

/// Why \p op's results do not hold each point or row of its space once:
/// every parallel dim written plainly, each reduction dim either kept
/// (a normalization) or dropped, and then only among the results' last
/// dims (rows); "" when they do.
std::string notRows(const Op &op) {
  if (op.results.empty())
    return "it has no results";
  for (const Result &r : op.results) {
    auto dims = plainDims(r.map);
    if (!dims && regroups(op, r))
      continue;
    if (!dims)
      return "its results are not plain dims";
    llvm::SmallVector<bool, 6> written(op.iters.size(), false);
    bool tail = true; // still among the last dims, walking back
    for (size_t t = dims->size(); t-- > 0;) {
      int d = (*dims)[t];
      bool reduced = d < 0 || op.iters[unsigned(d)].kind != IterKind::Parallel;
      if (reduced && !tail && d >= 0)
        return "it reduces dims its results do not end with";
      tail = tail && reduced;
      if (d >= 0)
        written[unsigned(d)] = true;
    }
    for (unsigned d = 0; d < op.iters.size(); ++d)
      if (op.iters[d].kind == IterKind::Parallel && !written[d])
        return "its results do not cover its space";
  }
  return "";
}

/// Whether each operand of \p op reads its reduction dims, where it reads
/// them plainly, as its last dims (a row).
bool readsRows(const Op &op) {
  for (const Operand &o : op.operands) {
    bool tail = true;
    for (size_t t = o.map.size(); t-- > 0;) {
      const AccessExpr &e = o.map[t];
      bool red =
          e.isPlainDim() && op.iters[e.dims[0]].kind != IterKind::Parallel;
      if (red && !tail)
        return false;
      tail = tail && (red || e.kind == AccessExpr::Kind::Broadcast);
    }
  }
  return true;
}

/// Why a kernel cannot compute \p op point by point (elementwise,
/// broadcast and transpose-like ops: no reduction dims) or row by row (a
/// normalization or a reduction over its results' last dims); "" when it
/// can.
std::string notFusable(const Op &op) {
  OpFamily f = opKindFamily(op.kind);
  if (f != OpFamily::Elementwise && f != OpFamily::Layout &&
      f != OpFamily::Normalization && f != OpFamily::Reduction)
    return "a kernel computes no " + opKindName(op.kind).str() + " op";
  if (std::string why = notRows(op); !why.empty())
    return why;
  bool parallel = llvm::all_of(
      op.iters, [](const IterDim &d) { return d.kind == IterKind::Parallel; });
  if ((f == OpFamily::Elementwise || f == OpFamily::Layout) && !parallel)
    return "it has reduction dims";
  return readsRows(op) ? "" : "it reduces dims its operands do not end with";
}

bool fusable(const Op &op) { return notFusable(op).empty(); }

/// Whether \p op computes each point alone: a fusable op (its maps read
/// point by point or broadcast) with no reduction dims, such as an
/// elementwise op or an inference batch norm's per-channel scale and
/// shift, which may follow a contraction in its epilogue. Read off the
/// iteration space, not the kind.
bool pointByPoint(const Op &op) {
  return fusable(op) && llvm::all_of(op.iters, [](const IterDim &d) {
           return d.kind == IterKind::Parallel;
         });
}

/// Whether \p op can head a kernel of its elementwise epilogue (a bias, an
/// activation): a contraction whose results are plain dims, no `_`.
bool epilogueHead(const Op &op) {
  if (opKindFamily(op.kind) != OpFamily::Contraction || op.results.empty())
    return false;
  return llvm::all_of(op.results, [](const Result &r) {
    auto dims = plainDims(r.map);
    return dims && !llvm::is_contained(*dims, -1);
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

/// pointMismatch where a side reads or writes through row-major groups (a
/// reshape): each point still reads the one element one point wrote, and
/// every dim either side groups is unsplit.
std::string groupedMismatch(const Op &writer, unsigned r, const Op &reader,
                            unsigned k) {
  auto w = groupedDims(writer.results[r].map);
  auto rd = groupedDims(reader.operands[k].map);
  if (!w || !rd || w->size() != rd->size())
    return "it reads operand " + std::to_string(k) + " through another map";
  if (writer.intAttr("offset", 0) != reader.intAttr("offset", 0))
    return "it runs on other devices";
  size_t written = 0;
  for (const auto &g : *w)
    written += g.size();
  if (written != writer.iters.size())
    return "operand " + std::to_string(k) + " is not written point by point";
  for (const auto &g : *w)
    for (unsigned d : g)
      if (splitOf(writer, d) != 1)
        return "it regroups operand " + std::to_string(k) + "'s split dims";
  for (unsigned d = 0; d < reader.iters.size(); ++d)
    if (splitOf(reader, d) != 1)
      return "it regroups operand " + std::to_string(k) + "'s split dims";
  return "";
}

/// Why \p reader's operand \p k does not read result \p r of \p writer at
/// exactly the point that wrote it, on the same devices; "" when it does.
std::string pointMismatch(const Op &writer, unsigned r, const Op &reader,
                          unsigned k) {
  auto w = plainDims(writer.results[r].map);
  auto rd = plainDims(reader.operands[k].map);
  if (!w || !rd)
    return groupedMismatch(writer, r, reader, k);
  if (w->size() != rd->size())
    return "it reads operand " + std::to_string(k) + " through another map";
  if (writer.intAttr("offset", 0) != reader.intAttr("offset", 0))
    return "it runs on other devices";
  for (unsigned d = 0; d < writer.iters.size(); ++d)
    if (!llvm::is_contained(*w, int(d)) && splitOf(writer, d) != 1)
      return "operand " + std::to_string(k) +
             " holds partial sums (a split reduction)";
  llvm::SmallVector<bool, 6> mapped(reader.iters.size(), false);
  for (size_t t = 0; t < w->size(); ++t) {
    int a = (*w)[t], b = (*rd)[t];
    if (b >= 0)
      mapped[unsigned(b)] = true;
    if (a < 0 || b < 0) // a size-1 dim: index 0 on both sides
      continue;
    if (writer.iters[unsigned(a)].extent != reader.iters[unsigned(b)].extent)
      return "it reads operand " + std::to_string(k) + " over other extents";
    if (splitOf(writer, unsigned(a)) != splitOf(reader, unsigned(b)))
      return "it splits operand " + std::to_string(k) + "'s dims otherwise";
  }
  // The reader's dims the value does not have (a row's statistics read
  // along the row): its points there each need the writer's whole block.
  for (unsigned d = 0; d < reader.iters.size(); ++d)
    if (!mapped[d] && splitOf(reader, d) != 1)
      return "it splits dim " + reader.iters[d].name + ", which operand " +
             std::to_string(k) + " does not have";
  return "";
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
  Grouper(Func &f, llvm::raw_ostream *remarks) : f(f), remarks(remarks) {}

  unsigned run() {
    for (auto &op : f.ops) {
      op->attrs.erase("kernel");
      std::string why = group.empty() ? "" : whyNotJoin(*op);
      if (!why.empty() && remarks)
        *remarks << "fuse-kernels: " << describe(*op)
                 << " does not join the kernel of " << describe(*group.front())
                 << ": " << why << "\n";
      if (!why.empty())
        close();
      if (fusable(*op) || epilogueHead(*op))
        group.push_back(op.get());
    }
    close();
    return kernels;
  }

private:
  static std::string describe(const Op &op) {
    std::string s = opKindName(op.kind).str();
    return op.name().empty() ? s : s + " '" + op.name().str() + "'";
  }
  /// Why \p op does not join the open group; "" when it does: every value
  /// of the group it reads at the point that wrote it, and it reads the
  /// group or iterates the group's space (a sibling a later op may read).
  std::string whyNotJoin(const Op &op) const {
    if (std::string why = notFusable(op); !why.empty())
      return why;
    if (epilogueHead(*group.front()) && !pointByPoint(op))
      return "a contraction's epilogue takes elementwise ops only";
    bool reads = false;
    for (unsigned k = 0; k < op.operands.size(); ++k) {
      const Value *v = op.operands[k].value;
      const Op *w = v->kind == Value::Kind::Result ? v->def : nullptr;
      if (!w || !llvm::is_contained(group, w))
        continue;
      unsigned r = 0;
      while (w->results[r].value.get() != v)
        ++r;
      if (std::string why = pointMismatch(*w, r, op, k); !why.empty())
        return why;
      reads = true;
    }
    if (reads ||
        (!epilogueHead(*group.front()) && sameSpace(*group.front(), op)))
      return "";
    return "it reads nothing of the kernel and iterates another space";
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
  llvm::raw_ostream *remarks;
  std::vector<Op *> group;
  unsigned kernels = 0;
};
} // namespace

unsigned fuseKernels(Module &m, llvm::raw_ostream *remarks) {
  return Grouper(m.main, remarks).run();
}

} // namespace pax
