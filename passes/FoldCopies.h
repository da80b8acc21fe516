//===- FoldCopies.h - Copies read through, not run --------------*- C++ -*-===//
//
// Exporters write layout changes as chains of copies: a reshape then a
// transpose before attention (the heads split off the hidden dim), a
// transpose then a reshape after it, a slice of a constant mask that takes
// the whole of it. Each copy is a kernel that reads and writes every
// element, yet what it does is only a map. foldCopies:
//
// - removes identity copies (a reshape, transpose or slice that reads its
//   input through the same plain dims, in order, as it writes a result of
//   the same type): every reader reads the input instead;
// - makes a copy that reads another copy's result, as its only reader
//   (a value left read in two layouts would gain nothing), read that
//   copy's input through the two maps composed, when the inner copy
//   writes plain dims
//   (each of its iteration dims once, a permutation) and every expression
//   composes: its plain dims and groups of dims take the outer copy's
//   expressions (a group only plain dims of the same extents). The outer
//   copy is a reshape, transpose, slice, split or expand (kinds that read
//   inside their input only, so no padding meets a regrouped index);
// - with `inference`, lets attention (whose kernels read through any map)
//   read Q, K and V through the copies before it, a split's parts too (the
//   heads of [b, s, 3 * h * d] read as `(h, *64) + 768`), and write its
//   output where the one copy after it writes (the heads merged back into
//   the hidden dim): no copy is left around it; and lets a matrix product
//   read an operand through transposes where the composed map is plain
//   dims (a tied LM head's embedding where it lies). Inference only: a
//   training step's gradients would be written through those maps;
// - removes the copies no one reads any more.
//
// The ops that stay compute the same values: every point reads the element
// the chain would have moved to it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

namespace pax {

struct FoldCopiesOptions {
  /// Attention reads and writes through the copies around it, and matrix
  /// products read through transposes (no backward pass follows).
  bool inference = false;
};

/// Folds \p m's copies as above; returns how many ops it removed.
unsigned foldCopies(Module &m, const FoldCopiesOptions &options = {});

} // namespace pax
