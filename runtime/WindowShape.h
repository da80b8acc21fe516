//===- WindowShape.h - 2-D convolutions and pools as NCHW windows -*- C++
//-*-===//
//
// Which computes are 2-D NCHW convolutions or max pools, read from their
// access maps and buffers: the shape every backend's window kernels need
// (the CPU's im2col and direct loops, cuDNN on the GPU), so both dispatch
// on one decision. Host code only.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_WINDOWSHAPE_H
#define PAX_RUNTIME_WINDOWSHAPE_H

#include "runtime/Prepared.h"

#include <cstdint>
#include <optional>
#include <utility>

namespace pax::runtime {

/// One spatial dim of a window: output position o and kernel position k
/// read input row `stride * o + dilation * k + offset` of `size` rows (a
/// row outside [0, size) is padding).
struct WindowDim {
  int64_t out = 1, kernel = 1, stride = 1, dilation = 1, offset = 0;
  int64_t size = 1;

  /// The input row of (o, k).
  int64_t at(int64_t o, int64_t k) const {
    return stride * o + dilation * k + offset;
  }
  /// The kernel positions [lo, hi) that read inside the input at \p o.
  std::pair<int64_t, int64_t> inside(int64_t o) const {
    int64_t lo = 0, hi = kernel;
    while (lo < hi && at(o, lo) < 0)
      ++lo;
    while (hi > lo && at(o, hi - 1) >= size)
      --hi;
    return {lo, hi};
  }
  /// The padding a symmetric-padding library (cuDNN) would need: the rows
  /// before the input, when the rows after it that the last output reads
  /// are exactly as many or fewer and the library's output count (from the
  /// input size, kernel, stride and dilation) is `out`; else -1.
  int64_t symmetricPad() const;
};

/// A 2-D window op: n images of channels, windows over rows and columns;
/// its input and output each stored NCHW, or channels-last ([n, h, w, c],
/// ChannelsLast.h) where xLast / yLast say so.
struct Window2DShape {
  int64_t n = 1, g = 1, co = 1, ci = 1;
  WindowDim rows, cols;
  bool xLast = false, yLast = false;
  /// True when input and output are both NCHW.
  bool nchw() const { return !xLast && !yLast; }
};

/// True when \p e is `d` (stride 1, no offset).
bool isPlainDim(const plan::AccessExpr &e, unsigned d);

/// True when \p e is the channel expr of dim \p d: `d`, or the group `(g,
/// d)` when \p g is not negative.
bool isChannel(const plan::AccessExpr &e, int g, unsigned d);

/// The window `s*o + d*k + offset` of \p e over dims (o, k) of \p c.
std::optional<WindowDim> matchWindow(const plan::Compute &c,
                                     const plan::AccessExpr &e, unsigned o,
                                     unsigned k, int64_t size);

/// True when every tensor of \p p is f32 and holds exactly its elements.
bool allDenseF32(const Prepared &p);

/// Whether \p p's tensors have the types of a product (a matrix product or
/// a convolution) the fast kernels take: all f32, or with \p sixteenBit,
/// the first two operands of one 16-bit float type and the others and the
/// result of that type or f32 (fp32 accumulation).
bool productTypes(const Prepared &p, bool sixteenBit);

/// The convolution over \p c's dims [n, (g), co, oh, ow, ci, kh, kw]
/// (with \p grouped, a group dim g) that reads or writes x, w and y
/// through \p xa, \p wa and \p ya: its shape, when every map and tensor
/// is as the importer (or autodiff) writes them.
std::optional<Window2DShape>
matchConvMaps(const plan::Compute &c, bool grouped, const plan::Access &xa,
              const Tensor &x, const plan::Access &wa, const Tensor &w,
              const plan::Access &ya, const Tensor &y);

/// The shape of \p p when it is a conv of \p group groups (inputs x, w and
/// an optional per-output-channel bias, output y, dense), of f32 tensors,
/// or with \p sixteenBit of productTypes' 16-bit ones.
std::optional<Window2DShape> matchConv2D(const Prepared &p, int64_t group,
                                         bool sixteenBit = false);

/// The shape of \p p when it is an f32 2-D max pool (iteration space [n,
/// c, oh, ow, kh, kw]).
std::optional<Window2DShape> matchPool2D(const Prepared &p);

} // namespace pax::runtime

#endif // PAX_RUNTIME_WINDOWSHAPE_H
