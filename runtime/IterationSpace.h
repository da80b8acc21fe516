//===- IterationSpace.h - Loop nests and compiled maps ---------*- C++ -*-===//
#ifndef PAX_RUNTIME_ITERATIONSPACE_H
#define PAX_RUNTIME_ITERATIONSPACE_H

#include "codegen/plan/Plan.pb.h"
#include "runtime/FlatMaps.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include "llvm/Support/Error.h"
#include <optional>

#include <cstdint>

namespace pax::runtime {

/// A compute's iteration space split into outer dims (walked in parallel,
/// one task per point) and inner dims (`red` and `seq`, walked in order
/// inside each outer point, so a reduction accumulates in a fixed order).
/// Lookup dims are not walked: their index comes from the indices operand.
struct IterationSpace {
  llvm::SmallVector<int64_t, 8> extents; // walked extent per dim (lookup: 1)
  llvm::SmallVector<int64_t, 8> globalOffsets;
  llvm::SmallVector<int64_t, 8> globalExtents; // unsplit extent per dim
  /// Points of the inner dims over the whole (unsplit) space: what a mean
  /// divides by when this device holds part of a split reduction.
  int64_t globalInnerPoints() const {
    int64_t n = 1;
    for (unsigned d : inner)
      n *= globalExtents[d];
    return n;
  }
  llvm::SmallVector<unsigned, 8> outer, inner;
  int64_t outerPoints = 1, innerPoints = 1;

  /// The space of \p c; lookup dims are those a Lookup access names.
  static IterationSpace of(const plan::Compute &c);

  /// Sets the outer dims of \p point to outer point number \p flat.
  void setOuter(int64_t flat, llvm::MutableArrayRef<int64_t> point) const;
  /// Advances the outer dims of \p point in row-major order.
  void nextOuter(llvm::MutableArrayRef<int64_t> point) const;
  /// Advances the inner dims of \p point; false once they wrap to zero.
  bool nextInner(llvm::MutableArrayRef<int64_t> point) const;

  /// The space as plain data (FlatMaps.h). Every space of() accepts fits
  /// (AccessIndexer::compile refuses one of more than flat::kMaxDims dims).
  flat::Space flatten() const;
};

/// An access map compiled against an iteration space: the row-major element
/// index it addresses at each point. Maps provably inside the tensor over
/// the whole space become one dot product.
class AccessIndexer {
public:
  /// Compiles \p access for a tensor of \p shape; an error names \p what
  /// when the map does not fit the tensor or the space. With
  /// \p fullFromZero, a full access `*` addresses index 0 of its dim (the
  /// caller walks the dim itself: a gather's index tuples); otherwise it is
  /// an error.
  static llvm::Expected<AccessIndexer>
  compile(const plan::Compute &c, const plan::Access &access,
          llvm::ArrayRef<int64_t> shape, const IterationSpace &space,
          const llvm::Twine &what, bool fullFromZero = false);

  /// The element index at \p point, or -1 when it falls outside the tensor
  /// (padding, another concat input's range, a masked lookup).
  /// \p lookupValues are the indices the indices operand holds for the
  /// point, one per Lookup dim of the tensor in dim order.
  int64_t index(llvm::ArrayRef<int64_t> point,
                llvm::ArrayRef<int64_t> lookupValues = {}) const {
    if (linear) {
      int64_t flat = base;
      for (size_t d = 0; d < coef.size(); ++d)
        flat += coef[d] * point[d];
      return flat;
    }
    return checkedIndex(point, lookupValues);
  }

  /// True when the index is one dot product over the whole space (never
  /// outside the tensor, no lookup).
  bool isLinear() const { return linear; }
  /// How far the index moves per step of iteration dim \p d (linear maps).
  int64_t step(unsigned d) const { return coef[d]; }

  /// True when one of the tensor dims is a Lookup.
  bool hasLookup() const { return lookups > 0; }
  /// How many tensor dims are Lookups (a gather's index tuple length).
  unsigned lookupCount() const { return lookups; }
  /// The iteration dims that index this tensor (not through a lookup).
  bool usesDim(unsigned d) const { return usedDims[d]; }
  /// The box of iteration points where the map is inside the tensor, per
  /// iteration dim [lo, hi) (every point when isLinear; empty boxes have
  /// hi <= lo somewhere), when it is one: no lookups, and each tensor dim
  /// either inside over the whole space or an offset plus one dim times a
  /// coefficient (another concat input's range, a split output's, pad's
  /// border). Inside the box, index() is base + sum(step(d) * point[d]).
  std::optional<llvm::SmallVector<std::pair<int64_t, int64_t>, 8>>
  inRangeBox(const IterationSpace &space) const;

  /// The first of \p lookupValues outside its whole (unsplit) table,
  /// [-extent, extent), with that extent; nullopt when all are inside.
  std::optional<std::pair<int64_t, int64_t>>
  lookupOutOfRange(llvm::ArrayRef<int64_t> lookupValues) const;

  /// The map as plain data (FlatMaps.h), for a backend that evaluates it
  /// elsewhere (the CUDA kernels).
  const flat::Map &flatMap() const { return map; }

private:
  /// Compiles expression \p e into term \p t (its size and stride set) and
  /// the flat coefficients, or counts it a lookup; clears \p inRange when
  /// the term may leave its dim. An error names \p what when \p e does not
  /// fit (compile).
  llvm::Error compileTerm(const plan::Compute &c, const plan::AccessExpr &e,
                          const IterationSpace &space, const llvm::Twine &what,
                          bool fullFromZero, flat::Term &t, bool &inRange);
  /// Whether term \p t (of expression \p e, its \p coefs) stays inside its
  /// dim over all of \p space.
  static bool termInRange(const flat::Term &t, const plan::AccessExpr &e,
                          llvm::ArrayRef<std::pair<unsigned, int64_t>> coefs,
                          const IterationSpace &space);
  /// Numbers the lookups and copies the coefficients over \p dims
  /// iteration dims into the flat map.
  void finishFlatMap(size_t dims);
  int64_t checkedIndex(llvm::ArrayRef<int64_t> point,
                       llvm::ArrayRef<int64_t> lookupValues) const {
    return flat::index(map, point.data(), lookupValues.data(),
                       int(lookupValues.size()));
  }

  flat::Map map;                      // the terms, one per tensor dim
  llvm::SmallVector<int64_t, 8> coef; // flat coefficient per iteration dim
  llvm::SmallVector<bool, 8> usedDims;
  int64_t base = 0;
  bool linear = false;
  unsigned lookups = 0;
};

} // namespace pax::runtime

#endif // PAX_RUNTIME_ITERATIONSPACE_H
