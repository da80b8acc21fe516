//===- Reach.cpp - The block of a tensor an op's device block reaches
//------===//
#include "ir/Reach.h"

#include <algorithm>

namespace pax {

Box Box::whole(const TensorType &t) {
  Box b;
  b.lo.assign(t.rank(), 0);
  b.size.assign(t.shape.begin(), t.shape.end());
  return b;
}

Box Box::none(size_t rank) {
  Box b;
  b.lo.assign(rank, 0);
  b.size.assign(rank, 0);
  b.empty = true;
  return b;
}

bool Box::contains(const Box &o) const {
  if (empty || o.empty)
    return o.empty;
  for (size_t i = 0; i < lo.size(); ++i)
    if (o.lo[i] < lo[i] || o.lo[i] + o.size[i] > lo[i] + size[i])
      return false;
  return true;
}

int64_t Box::elements() const {
  int64_t n = empty ? 0 : 1;
  for (int64_t s : size)
    n *= s;
  return n;
}

IterBlock iterBlock(const Op &op, llvm::ArrayRef<int64_t> config, int64_t d) {
  IterBlock b;
  size_t n = op.iters.size();
  b.offset.assign(n, 0);
  b.extent.assign(n, 0);
  int64_t place = 1;
  for (size_t j = n; j-- > 0;) {
    int64_t f = config[j];
    b.extent[j] = op.iters[j].extent / f;
    b.offset[j] = (d / place) % f * b.extent[j];
    place *= f;
  }
  return b;
}

/// The box of a tensor of \p t that \p map reaches over block \p b.
Box reachedBox(const Op &op, const AccessMap &map, const TensorType &t,
               const IterBlock &b) {
  Box box = Box::whole(t);
  for (size_t i = 0; i < map.size(); ++i) {
    const AccessExpr &e = map[i];
    int64_t lo = 0, hi = t.shape[i] - 1;
    switch (e.kind) {
    case AccessExpr::Kind::Broadcast:
    case AccessExpr::Kind::Full:
      break;
    case AccessExpr::Kind::Affine: {
      lo = hi = e.offset;
      int64_t coef[2] = {e.stride, e.dilation};
      for (size_t k = 0; k < e.dims.size() && k < 2; ++k) {
        unsigned d = e.dims[k];
        int64_t a = coef[k] * b.offset[d],
                z = coef[k] * (b.offset[d] + b.extent[d] - 1);
        lo += std::min(a, z);
        hi += std::max(a, z);
      }
      break;
    }
    case AccessExpr::Kind::Group: {
      lo = hi = e.offset;
      hi += e.whole - 1;
      int64_t scale = e.whole;
      for (size_t k = e.dims.size(); k-- > 0;) {
        unsigned d = e.dims[k];
        lo += b.offset[d] * scale;
        hi += (b.offset[d] + b.extent[d] - 1) * scale;
        scale *= op.iters[d].extent;
      }
      break;
    }
    case AccessExpr::Kind::Lookup:
      lo = b.offset[e.dims[0]];
      hi = lo + b.extent[e.dims[0]] - 1;
      break;
    }
    lo = std::clamp<int64_t>(lo, 0, t.shape[i]);
    hi = std::clamp<int64_t>(hi, -1, t.shape[i] - 1);
    box.lo[i] = lo;
    box.size[i] = std::max<int64_t>(0, hi - lo + 1);
  }
  return box;
}

} // namespace pax
