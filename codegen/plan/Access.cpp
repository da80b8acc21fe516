//===- Access.cpp - Comparing a plan's access maps ------------------------===//
#include "codegen/plan/Access.h"

#include <vector>

namespace pax::plan {

bool sameExprs(const Access &a, const Access &b) {
  if (a.exprs_size() != b.exprs_size())
    return false;
  for (int i = 0; i < a.exprs_size(); ++i)
    if (a.exprs(i).SerializeAsString() != b.exprs(i).SerializeAsString())
      return false;
  return true;
}

bool plainDimsInOrder(const Access &a) {
  for (int d = 0; d < a.exprs_size(); ++d) {
    const AccessExpr &e = a.exprs(d);
    if (e.kind() != AccessExpr::AFFINE || e.dims_size() != 1 ||
        e.dims(0) != uint32_t(d) || e.stride() != 1 || e.offset() != 0)
      return false;
  }
  return true;
}

bool broadcastsOne(const Access &a) {
  for (const AccessExpr &e : a.exprs())
    if (e.kind() != AccessExpr::BROADCAST)
      return false;
  return true;
}

bool coversPlainly(const Compute &c, const Access &a, const Buffer &buf) {
  if (a.exprs_size() != buf.shape_size())
    return false;
  std::vector<bool> seen(size_t(c.iters_size()), false);
  for (int d = 0; d < a.exprs_size(); ++d) {
    const AccessExpr &e = a.exprs(d);
    if (e.kind() != AccessExpr::AFFINE || e.dims_size() != 1 ||
        e.stride() != 1 || e.offset() != 0 || e.dims(0) >= seen.size() ||
        seen[e.dims(0)] || c.iters(int(e.dims(0))).extent() != buf.shape(d))
      return false;
    seen[e.dims(0)] = true;
  }
  return true;
}

} // namespace pax::plan
