//===- TopKMath.h - The k best elements of a row, on host and device -----===//
//
// top_k's selection, shared by the CPU kernel and the generic CUDA kernel
// so both pick the same elements: the j-th result is the best element
// ranked after the (j-1)-th in the order (value, then the lower index
// first), found by one pass over the row per result: O(n k) work, no
// buffer. NaN ranks above every number for the largest and below for the
// smallest (as onnxruntime orders them).
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_TOPKMATH_H
#define PAX_RUNTIME_TOPKMATH_H

#include "runtime/HostDevice.h"

#include <cstdint>

namespace pax::runtime::topk {

/// Whether (a, ia) comes before (b, ib): the larger value first with
/// \p largest (else the smaller), NaN first, equal values by lower index.
PAX_HD inline bool before(double a, int64_t ia, double b, int64_t ib,
                          bool largest) {
  bool an = a != a, bn = b != b;
  if (an || bn)
    return an && bn ? ia < ib : (an == largest);
  if (a != b)
    return largest ? a > b : a < b;
  return ia < ib;
}

/// The \p k best of the \p n elements read(i) gives, in order: write(j,
/// value, index) for j = 0 .. k-1 (k at most n).
template <typename Read, typename Write>
PAX_HD inline void select(int64_t n, int64_t k, bool largest, Read read,
                          Write write) {
  double lastV = 0;
  int64_t lastI = -1;
  for (int64_t j = 0; j < k; ++j) {
    double bestV = 0;
    int64_t bestI = -1;
    for (int64_t i = 0; i < n; ++i) {
      double v = read(i);
      if (lastI >= 0 && !before(lastV, lastI, v, i, largest))
        continue; // ranked at or before the last result
      if (bestI < 0 || before(v, i, bestV, bestI, largest))
        bestV = v, bestI = i;
    }
    write(j, bestV, bestI);
    lastV = bestV, lastI = bestI;
  }
}

} // namespace pax::runtime::topk

#endif // PAX_RUNTIME_TOPKMATH_H
