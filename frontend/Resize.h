//===- Resize.h - Resize and Upsample as gathers and weighted sums -*- C++
//-*-===//
//
// With static shapes, every output position of a Resize (or Upsample)
// reads a fixed set of input positions along each resized axis with fixed
// weights: one for nearest, two for linear, four for cubic, computed here
// as ONNX's reference computes them (the coordinate transformation modes,
// the nearest rounding modes, cubic_coeff_a, exclude_outside, and
// tf_crop_and_resize's extrapolation). Each resized axis becomes a Gather
// per tap through constant indices, scaled by constant weights and summed,
// before import, so the resize is split, differentiated (a gather's
// gradient is a scatter-add) and run as the ops it is made of.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/Support/Error.h"

#include <onnx/onnx_pb.h>

namespace pax {

/// Replaces each Resize and Upsample node of \p model (default-domain
/// opset \p opset) by its gathers and sums. Errors name \p path and the
/// node: scales or sizes that are not constants (and no output shape
/// known), antialiasing, aspect-ratio policies other than stretch, and
/// linear or cubic modes of integer data.
llvm::Error lowerResizes(llvm::StringRef path, onnx::ModelProto &model,
                         int64_t opset);

} // namespace pax
