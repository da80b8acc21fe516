//===- ConfigSpace.cpp - The legal split configurations of an op ----------===//
#include "passes/sharding/ConfigSpace.h"

#include "llvm/ADT/STLExtras.h"

namespace pax {

bool executableSplit(const Op &op, unsigned d) {
  // A result written through an offset or stride (one output of a split,
  // a strided slice) has no block per device that a layout can name.
  for (const Result &r : op.results)
    for (size_t i = 0; i < r.map.size(); ++i) {
      const AccessExpr &e = r.map[i];
      if (e.kind == AccessExpr::Kind::Affine && e.uses(d) &&
          (e.dims.size() != 1 || e.stride != 1 || e.offset != 0 ||
           op.iters[d].extent != r.value->type.shape[i]))
        return false;
    }
  if (op.iters[d].kind != IterKind::Reduction)
    return true;
  for (const Result &r : op.results)
    for (const AccessExpr &e : r.map)
      if (e.uses(d))
        return false; // a normalized dim
  // Partial results must add up (OpKinds.def says which kinds' do).
  return opKindPartials(op.kind) == PartialCombine::Sum;
}

llvm::SmallVector<bool, 6> splittableDims(const Op &op, bool executable) {
  llvm::SmallVector<bool, 6> ok(op.iters.size(), false);
  for (size_t d = 0; d < op.iters.size(); ++d)
    ok[d] = op.iters[d].kind != IterKind::Sequential && op.iters[d].extent > 1;
  bool recurrent = llvm::any_of(op.iters, [](const IterDim &d) {
    return d.kind == IterKind::Sequential;
  });
  auto scan = [&](const AccessMap &map) {
    for (const AccessExpr &e : map) {
      bool window = e.kind == AccessExpr::Kind::Affine && e.dims.size() > 1;
      bool group = e.kind == AccessExpr::Kind::Group;
      for (size_t i = 1; i < e.dims.size(); ++i)
        if (window || group)
          ok[e.dims[i]] = false; // kernel dim, or a group's minor dim
    }
  };
  for (const Operand &o : op.operands)
    scan(o.map);
  for (const Result &r : op.results)
    scan(r.map);
  // A recurrence feeds each step's state back into the next: a split of the
  // state's or the gates' dims would need an exchange per step. Only the
  // parallel dims the sequence input (operand 0) is indexed by, the
  // independent sequences of a batch, split; whatever produces the weights.
  if (recurrent)
    for (size_t d = 0; d < op.iters.size(); ++d)
      ok[d] =
          ok[d] && op.iters[d].kind == IterKind::Parallel &&
          !op.operands.empty() &&
          llvm::any_of(op.operands[0].map, [&](const AccessExpr &e) {
            return e.kind != AccessExpr::Kind::Lookup && e.uses(unsigned(d));
          });
  if (executable)
    for (size_t d = 0; d < op.iters.size(); ++d)
      ok[d] = ok[d] && executableSplit(op, unsigned(d));
  return ok;
}

/// Divisors of \p extent allowed as split factors, ascending.
static llvm::SmallVector<int64_t, 16> factorsOf(int64_t extent,
                                                const ConfigOptions &o) {
  llvm::SmallVector<int64_t, 16> out;
  int64_t cap = o.devices;
  if (o.maxPerDim > 0)
    cap = std::min(cap, o.maxPerDim);
  for (int64_t f = 1; f <= std::min(extent, cap); ++f) {
    if (extent % f || (o.powersOfTwo && (f & (f - 1))))
      continue;
    out.push_back(f);
  }
  return out;
}

std::vector<Config> enumerateConfigs(const Op &op,
                                     const ConfigOptions &options) {
  auto split = splittableDims(op, options.executable);
  llvm::SmallVector<llvm::SmallVector<int64_t, 16>, 6> choices;
  for (size_t d = 0; d < op.iters.size(); ++d)
    choices.push_back(split[d] ? factorsOf(op.iters[d].extent, options)
                               : llvm::SmallVector<int64_t, 16>{1});
  std::vector<Config> out;
  Config c(op.iters.size(), 1);
  // Depth-first over dims, pruning on the running product.
  unsigned maxDims = options.maxSplitDims ? options.maxSplitDims : ~0u;
  std::function<void(size_t, int64_t, unsigned)> walk =
      [&](size_t d, int64_t product, unsigned split) {
        if (d == op.iters.size()) {
          if ((!options.exact || product == options.devices || product == 1) &&
              (!options.dividing || options.devices % product == 0))
            out.push_back(c);
          return;
        }
        for (int64_t f : choices[d]) {
          if (product * f > options.devices || (f > 1 && split == maxDims))
            break;
          c[d] = f;
          walk(d + 1, product * f, split + (f > 1));
        }
        c[d] = 1;
      };
  walk(0, 1, 0);
  return out;
}

int64_t configDevices(const Config &c) {
  int64_t n = 1;
  for (int64_t f : c)
    n *= f;
  return n;
}

std::string configStr(const Op &op, const Config &c) {
  std::string s = "<";
  bool first = true;
  for (size_t d = 0; d < c.size(); ++d) {
    if (c[d] == 1)
      continue;
    s += (first ? "" : ", ") + op.iters[d].name + ": " + std::to_string(c[d]);
    first = false;
  }
  return s + ">";
}

} // namespace pax
