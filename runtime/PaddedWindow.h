//===- PaddedWindow.h - Where a pool's window lies in its padding -*- C++ -*-===//
//
// An average pool with count_include_pad divides by the window positions
// inside the padded input: for each spatial dim, stride * point[dim0] +
// dilation * point[dim1] + offset within [lo, hi). The CPU and CUDA pools
// both count through insidePadded; paddedWindow (cpu/Kernels.h) reads the
// dims off a compute.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_PADDEDWINDOW_H
#define PAX_RUNTIME_PADDEDWINDOW_H

#include "runtime/FlatMaps.h"

namespace pax::runtime {

/// One spatial dim of a pool's padded input.
struct PaddedDim {
  int32_t dim0 = 0, dim1 = -1;
  int64_t stride = 1, dilation = 0, offset = 0, lo = 0, hi = 0;
};

/// The spatial dims of a pool's padded input.
struct PaddedWindow {
  int32_t count = 0;
  PaddedDim dims[flat::kMaxRank];
};

/// Whether the window position of \p point lies inside the padded input.
PAX_HD inline bool insidePadded(const PaddedWindow &w, const int64_t *point) {
  for (int32_t i = 0; i < w.count; ++i) {
    const PaddedDim &d = w.dims[i];
    int64_t at = d.stride * point[d.dim0] + d.offset;
    if (d.dim1 >= 0)
      at += d.dilation * point[d.dim1];
    if (at < d.lo || at >= d.hi)
      return false;
  }
  return true;
}

} // namespace pax::runtime

#endif // PAX_RUNTIME_PADDEDWINDOW_H
