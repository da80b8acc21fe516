//===- Access.h - Comparing a plan's access maps ----------------*- C++ -*-===//
//
// What codegen (which writes plans) and the runtime (which reads them) both
// ask of two accesses of a compute: whether they index their buffers alike.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/plan/Plan.pb.h"

namespace pax::plan {

/// True when \p a and \p b have the same exprs (their buffers aside).
bool sameExprs(const Access &a, const Access &b);

/// True when tensor dim i of \p a is iteration dim i, plainly (stride 1,
/// no offset), for every tensor dim.
bool plainDimsInOrder(const Access &a);

/// True when \p a reads one element for every point (every dim `_`).
bool broadcastsOne(const Access &a);

/// True when \p c's access \p a reaches every element of buffer \p buf
/// once: plain dims (stride 1, no offset), each iteration dim at most
/// once, their extents the buffer's shape.
bool coversPlainly(const Compute &c, const Access &a, const Buffer &buf);

} // namespace pax::plan
