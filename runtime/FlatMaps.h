//===- FlatMaps.h - Iteration spaces and access maps as plain data -*- C++ -*-===//
//
// A compute's iteration space and its compiled access maps in fixed-size
// plain structs, with the functions that walk them: what the CPU's
// AccessIndexer evaluates on the host and what the CUDA kernels copy to the
// device and evaluate there. One definition of "which element does this
// point address" serves every backend.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_FLATMAPS_H
#define PAX_RUNTIME_FLATMAPS_H

#include "runtime/HostDevice.h"

namespace pax::runtime::flat {

/// The most iteration dims of a compute.
inline constexpr int kMaxDims = 20;
/// The highest tensor rank.
inline constexpr int kMaxRank = 10;
/// The most iteration dims one tensor dim's index combines (a group access
/// merging dims, a window's output and kernel dims).
inline constexpr int kMaxCoefs = 10;

/// One tensor dim: offset + sum(coef * point[dim]), or a lookup.
struct Term {
  int64_t offset = 0, size = 1, stride = 1;
  int32_t coefCount = 0;
  uint32_t dims[kMaxCoefs] = {};
  int64_t coefs[kMaxCoefs] = {};
  int32_t lookupSlot = -1;   // which of the point's lookup values, or -1
  int64_t lookupOffset = 0;  // the lookup dim's global offset
  int64_t lookupExtent = 0;  // the lookup dim's unsplit extent
};

/// An access map compiled for a tensor's shape: the row-major element index
/// at each point. `linear` maps are one dot product (base + coef . point),
/// provably inside the tensor over the whole space.
struct Map {
  int32_t rank = 0;
  int32_t lookups = 0;
  bool linear = false;
  int64_t base = 0;
  int64_t coef[kMaxDims] = {}; // flat coefficient per iteration dim
  /// The dims with a nonzero coefficient, and theirs: a linear index's
  /// dot product walks these only.
  int32_t steps = 0;
  uint32_t stepDims[kMaxDims] = {};
  int64_t stepCoefs[kMaxDims] = {};
  Term terms[kMaxRank];
};

/// Division of an unsigned \p n < 2^31 by a fixed divisor as a multiply
/// and a shift (Granlund and Montgomery's method): walking a point's
/// coordinates out of its flat number costs a divide per dim, which on a
/// GPU (no integer divider) is the generic kernels' largest cost in 64
/// bits.
struct Divider {
  uint32_t divisor = 1, magic = 0, shift = 0;
};

/// The divider of \p d, 1 <= d < 2^31.
inline Divider makeDivider(uint32_t d) {
  Divider v;
  v.divisor = d;
  while (v.shift < 32 && (uint32_t(1) << v.shift) < d)
    ++v.shift;
  uint64_t one = 1;
  v.magic = uint32_t(((one << 32) * ((one << v.shift) - d)) / d + 1);
  return v;
}

/// \p n / the divisor of \p v, for n < 2^31.
PAX_HD inline uint32_t divide(const Divider &v, uint32_t n) {
#if defined(__CUDA_ARCH__)
  uint32_t t = __umulhi(n, v.magic);
#else
  uint32_t t = uint32_t((uint64_t(n) * v.magic) >> 32);
#endif
  return (t + n) >> v.shift;
}

/// A compute's iteration space: outer dims (parallel, one point per
/// thread or task) and inner dims (`red` and `seq`, walked in order inside
/// an outer point).
struct Space {
  int32_t rank = 0;
  int64_t extents[kMaxDims] = {}; // walked extent per dim (lookup: 1)
  int64_t globalOffsets[kMaxDims] = {};
  int64_t globalExtents[kMaxDims] = {};
  int32_t outerCount = 0, innerCount = 0;
  uint32_t outer[kMaxDims] = {}, inner[kMaxDims] = {};
  int64_t outerPoints = 1, innerPoints = 1;
  /// Where the outer (inner) points number under 2^31: each outer (inner)
  /// dim's divider, in the order of `outer` (`inner`) (setDividers).
  bool outerDividers = false, innerDividers = false;
  Divider outerDiv[kMaxDims], innerDiv[kMaxDims];
};

/// Fills \p s's dividers where its points number under 2^31.
inline void setDividers(Space &s) {
  constexpr int64_t limit = int64_t(1) << 31;
  auto fill = [&](int32_t count, const uint32_t *dims, int64_t points,
                  Divider *out) {
    if (points < 1 || points >= limit)
      return false;
    for (int32_t i = 0; i < count; ++i) {
      int64_t e = s.extents[dims[i]];
      if (e < 1 || e >= limit)
        return false;
      out[i] = makeDivider(uint32_t(e));
    }
    return true;
  };
  s.outerDividers = fill(s.outerCount, s.outer, s.outerPoints, s.outerDiv);
  s.innerDividers = fill(s.innerCount, s.inner, s.innerPoints, s.innerDiv);
}

/// The element \p m addresses at \p point, or -1 when it falls outside the
/// tensor (padding, another concat input's range, a masked lookup).
/// \p lookupValues are the indices the indices operand holds for the
/// point, \p lookupCount of them, one per lookup dim in dim order.
PAX_HD inline int64_t index(const Map &m, const int64_t *point,
                            const int64_t *lookupValues = nullptr,
                            int lookupCount = 0) {
  if (m.linear) {
    int64_t flat = m.base;
    for (int32_t i = 0; i < m.steps; ++i)
      flat += m.stepCoefs[i] * point[m.stepDims[i]];
    return flat;
  }
  int64_t flat = 0;
  for (int32_t i = 0; i < m.rank; ++i) {
    const Term &t = m.terms[i];
    int64_t idx = t.offset;
    if (t.lookupSlot >= 0) {
      if (t.lookupSlot >= lookupCount)
        return -1; // no index given: nothing to read
      int64_t v = lookupValues[t.lookupSlot];
      // Negative indices count from the end of the whole table; a split
      // table holds rows [offset, offset + size) and masks the others.
      idx = (v < 0 ? v + t.lookupExtent : v) - t.lookupOffset;
    } else {
      for (int32_t j = 0; j < t.coefCount; ++j)
        idx += t.coefs[j] * point[t.dims[j]];
    }
    if (idx < 0 || idx >= t.size)
      return -1;
    flat += idx * t.stride;
  }
  return flat;
}

/// Sets dims \p dims (\p count of them) of \p point to number \p flat,
/// row-major over them: by \p div's multiply and shift where \p fast,
/// else by 64-bit division.
PAX_HD inline void setDims(const Space &s, int32_t count, const uint32_t *dims,
                           bool fast, const Divider *div, int64_t flat,
                           int64_t *point) {
  if (fast) {
    uint32_t f = uint32_t(flat);
    for (int32_t i = count; i-- > 0;) {
      uint32_t q = divide(div[i], f);
      point[dims[i]] = int64_t(f - q * div[i].divisor);
      f = q;
    }
    return;
  }
  for (int32_t i = count; i-- > 0;) {
    int64_t e = s.extents[dims[i]];
    point[dims[i]] = flat % e;
    flat /= e;
  }
}

/// Sets the outer dims of \p point to outer point number \p flat
/// (row-major over the outer dims).
PAX_HD inline void setOuter(const Space &s, int64_t flat, int64_t *point) {
  setDims(s, s.outerCount, s.outer, s.outerDividers, s.outerDiv, flat, point);
}

/// Sets the inner dims of \p point to inner point number \p flat
/// (row-major over the inner dims, nextInner's order).
PAX_HD inline void setInner(const Space &s, int64_t flat, int64_t *point) {
  setDims(s, s.innerCount, s.inner, s.innerDividers, s.innerDiv, flat, point);
}

/// Advances the inner dims of \p point; false once they wrap to zero.
PAX_HD inline bool nextInner(const Space &s, int64_t *point) {
  for (int32_t i = s.innerCount; i-- > 0;) {
    if (++point[s.inner[i]] < s.extents[s.inner[i]])
      return true;
    point[s.inner[i]] = 0;
  }
  return false;
}

} // namespace pax::runtime::flat

#endif // PAX_RUNTIME_FLATMAPS_H
