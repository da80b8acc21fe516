//===- LibraryEpilogue.h - A product's epilogue a BLAS library runs -*- C++
//-*-===//
//
// A matrix product and the generated kernel of its fused group's pointwise
// ops right after it (an add of a tensor, then a relu or tanh GELU) are
// one call of a BLAS library with an epilogue: cuBLASLt computes
// act(alpha A B + bias + C) with C the added tensor, its bias the gemm's
// own row-vector C. Codegen's --plan-stats counts such a pair as one
// kernel, and the backends that launch library products (cuda, and
// cuda-emulated, which checks the same decision on the host) run it so,
// in place of the generated kernel. Decided from the plan alone: the
// kernel follows the product in its fused group, every access is the
// product's result's plain dims in order over one shape and element type
// (f32, bf16 or fp16; the product's operands of that type, or bf16/fp16
// into f32: fp32 accumulation), and the product's and each intermediate
// result are read by the next op only.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/plan/Plan.pb.h"

#include <cstdint>
#include <vector>

namespace pax::plan {

struct LibraryEpilogue {
  enum class Activation : uint8_t { None, Relu, GeluTanh };

  uint32_t product = 0;                    ///< the gemm or matmul instruction
  const GeneratedKernel *kernel = nullptr; ///< the epilogue it replaces
  /// The tensor added to the product (cuBLASLt's C), or -1.
  int64_t addend = -1;
  /// The product's own C, a row vector over the result's last dim (a
  /// bias), or -1.
  int64_t bias = -1;
  Activation activation = Activation::None; ///< applied last
  uint32_t output = 0; ///< the buffer the kernel writes: the result
};

/// True when product \p c's own C (its third input) is a bias: a row
/// vector over its result's last dim, added with beta 1 (cuBLASLt's bias
/// epilogue).
bool addsRowBias(const Compute &c);

/// The addend an epilogue adds to product \p c computed whole (its own C
/// included): null where the addend is that C, already in the product.
/// For backends that compute the product apart from its epilogue.
template <typename T>
const T *addendApart(const Compute &c, const LibraryEpilogue &e,
                     const T *addend) {
  bool ownC = c.inputs_size() == 3 && e.addend == int64_t(c.inputs(2).buffer());
  return ownC ? nullptr : addend;
}

/// Every product of \p prog whose epilogue kernel a library runs with it,
/// in instruction order.
std::vector<LibraryEpilogue> libraryEpilogues(const DeviceProgram &prog);

} // namespace pax::plan
