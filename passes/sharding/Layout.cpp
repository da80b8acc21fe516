//===- Layout.cpp - Where each block of a tensor lives --------------------===//
#include "passes/sharding/Layout.h"

#include "llvm/ADT/STLExtras.h"

namespace pax {

llvm::SmallVector<int64_t, 8> primeFactors(int64_t n) {
  llvm::SmallVector<int64_t, 8> out;
  for (int64_t p = 2; p * p <= n; ++p)
    while (n % p == 0)
      out.push_back(p), n /= p;
  if (n > 1)
    out.push_back(n);
  return out;
}

int64_t TensorLayout::devices() const {
  int64_t n = 1;
  for (const Digit &d : digits)
    n *= d.size;
  return n;
}

int64_t TensorLayout::blockElements(const TensorType &t) const {
  int64_t n = 1;
  for (size_t i = 0; i < t.shape.size(); ++i)
    n *= (t.shape[i] + parts[i] - 1) / parts[i];
  return n;
}

std::string TensorLayout::str() const {
  std::string s = "[";
  for (size_t i = 0; i < parts.size(); ++i)
    s += (i ? ", " : "") + std::to_string(parts[i]);
  s += "]";
  int64_t partial = 1, rep = 1;
  for (const Digit &d : digits) {
    if (d.role == Digit::Role::Partial)
      partial *= d.size;
    else if (d.role == Digit::Role::Replicated)
      rep *= d.size;
  }
  if (partial > 1)
    s += " partial " + std::to_string(partial);
  if (rep > 1)
    s += " rep " + std::to_string(rep);
  if (offset)
    s += " at " + std::to_string(offset);
  return s;
}

std::vector<int64_t> placements(int64_t k, int64_t n) {
  std::vector<int64_t> out;
  for (int64_t o = 0; k > 0 && o + k <= n; o += k)
    out.push_back(o);
  return out;
}

/// The iteration dim that splits tensor dim i through \p e, or -1. A
/// concat input or a strided slice (an offset or stride) is irregular.
static int splitter(const AccessExpr &e, const Op &op, int64_t tensorExtent,
                    bool &irregular) {
  switch (e.kind) {
  case AccessExpr::Kind::Affine: {
    unsigned d = e.dims[0];
    bool plain = e.dims.size() == 1 && e.stride == 1 && e.offset == 0 &&
                 op.iters[d].extent == tensorExtent;
    bool window = e.dims.size() == 2;
    if (!plain && !window)
      irregular = true;
    return int(d);
  }
  case AccessExpr::Kind::Group:
    // A group reading a part of the dim (a head of Q in [b, s, 3 * h * d])
    // splits it off the tensor's even blocks.
    if (e.offset != 0 || accessSpan(e, op.iters) != tensorExtent)
      irregular = true;
    return int(e.dims[0]);
  case AccessExpr::Kind::Lookup:
    return int(e.dims[0]);
  case AccessExpr::Kind::Broadcast:
  case AccessExpr::Kind::Full:
    return -1;
  }
  llvm_unreachable("unknown access kind");
}

/// Builds the layout of a tensor of \p type accessed through \p map.
static TensorLayout layoutOf(const Op &op, const Config &c,
                             const AccessMap &map, const TensorType &type,
                             bool isResult) {
  TensorLayout l;
  l.parts.assign(map.size(), 1);
  l.haloLo.assign(map.size(), 0);
  l.haloHi.assign(map.size(), 0);
  l.haloMost.assign(map.size(), 0);
  // Which tensor dim each iteration dim splits.
  llvm::SmallVector<int, 6> dimOf(op.iters.size(), -1);
  for (size_t i = 0; i < map.size(); ++i) {
    bool irregular = false;
    int d = splitter(map[i], op, type.shape[i], irregular);
    if (d < 0 || c[d] == 1)
      continue;
    if (irregular && !isResult) {
      l.irregular = true;
      continue; // needed whole along this dim
    }
    dimOf[d] = int(i);
    l.parts[i] = c[d];
  }
  // Digits, least significant first: the last iteration dim varies fastest.
  for (int d = int(op.iters.size()) - 1; d >= 0; --d) {
    if (c[d] == 1)
      continue;
    auto primes = primeFactors(c[d]);
    // The least significant digit of a split is its deepest level.
    for (size_t k = 0; k < primes.size(); ++k) {
      Digit g;
      g.size = primes[k];
      if (dimOf[d] >= 0) {
        g.role = Digit::Role::Split;
        g.tensorDim = dimOf[d];
        g.level = int(primes.size() - 1 - k);
      } else if (isResult && op.iters[d].kind == IterKind::Reduction) {
        bool indexed = llvm::any_of(
            map, [&](const AccessExpr &e) { return e.uses(unsigned(d)); });
        g.role = indexed ? Digit::Role::Replicated : Digit::Role::Partial;
      }
      l.digits.push_back(g);
    }
  }
  return l;
}

TensorLayout resultLayout(const Op &op, const Config &c, unsigned result) {
  const Result &r = op.results[result];
  return layoutOf(op, c, r.map, r.value->type, true);
}

/// Halo of a window access split into \p parts blocks: how far each block's
/// reads reach past an even split of the tensor dim.
static void windowHalo(const AccessExpr &e, const Op &op, int64_t parts,
                       int64_t extent, int64_t &lo, int64_t &hi, int64_t &most,
                       bool &irregular) {
  int64_t out = op.iters[e.dims[0]].extent;
  int64_t kernel = op.iters[e.dims[1]].extent;
  if (extent % parts) {
    irregular = true;
    return;
  }
  int64_t outBlock = out / parts, inBlock = extent / parts;
  for (int64_t b = 0; b < parts; ++b) {
    int64_t first = e.stride * (b * outBlock) + e.offset;
    int64_t last = e.stride * ((b + 1) * outBlock - 1) +
                   e.dilation * (kernel - 1) + e.offset;
    first = std::max<int64_t>(first, 0);
    last = std::min<int64_t>(last, extent - 1);
    int64_t before = std::max<int64_t>(0, b * inBlock - first);
    int64_t after = std::max<int64_t>(0, last - ((b + 1) * inBlock - 1));
    lo = std::max(lo, before);
    hi = std::max(hi, after);
    most = std::max(most, before + after);
  }
}

TensorLayout operandLayout(const Op &op, const Config &c, unsigned operand) {
  const Operand &o = op.operands[operand];
  TensorLayout l = layoutOf(op, c, o.map, o.value->type, false);
  for (size_t i = 0; i < o.map.size(); ++i) {
    const AccessExpr &e = o.map[i];
    if (e.kind == AccessExpr::Kind::Affine && e.dims.size() == 2 &&
        l.parts[i] > 1)
      windowHalo(e, op, l.parts[i], o.value->type.shape[i], l.haloLo[i],
                 l.haloHi[i], l.haloMost[i], l.irregular);
  }
  return l;
}

} // namespace pax
