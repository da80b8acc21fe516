//===- FuseGelu.h - A GELU written as elementwise ops as one gelu op -*- C++
//-*-===//
//
// Exporters write GELU as five to nine elementwise ops: x / sqrt(2), erf,
// + 1, * x, * 0.5 (BERT), or 0.044715 * x^3 + x, * sqrt(2 / pi), tanh,
// + 1, * 0.5 * x (GPT-2), in whatever order and grouping their source had.
// fuseGelu replaces each such group by one `gelu` op (approximate "none" or
// "tanh"): a kernel reads x and writes the result once instead of every
// intermediate, and a backend fuses it into the producing matrix product.
//
// The group is found by what it computes, not by its ops' order: from a
// value x, the elementwise ops after it that read only x, scalar constants
// and each other, point by point (each operand read through its op's
// result map), are evaluated in double at probe points; an op whose values
// there are GELU's of x (within 1e-6) ends a group. It is replaced when
// every intermediate it reads is read by nothing outside the group.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

namespace pax {

/// Replaces every group of elementwise ops that computes a GELU of one
/// value by one gelu op; returns how many it replaced.
unsigned fuseGelu(Module &m);

} // namespace pax
