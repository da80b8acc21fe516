//===- Autocast.h - Mixed precision: each op in the precision it needs -*- C++
//-*-===//
//
// autocast rewrites an fp32 program to compute in bf16 or fp16 where that
// is safe, with fp32 where it matters, as PyTorch's autocast does, but in
// the IR: the search, the memory model, the simulator and the plan all see
// the element types the devices will hold. Each op kind's policy is a
// table (AutocastPolicy.def): products, convolutions and attention compute
// in the low precision (fp32 accumulation); reductions, softmaxes,
// normalizations, exponentials and logarithms in fp32; every other op
// follows its activations. Casts are ops (`cast`), one per value and type,
// placed right after the value is computed; a graph input is cast where it
// is first read, and every returned value is cast back to the type it had,
// so the program's interface does not change.
//
// Weights: a float global that only low-precision products read is stored
// in the low precision (the plan loads it converted), unless
// AutocastOptions::masterWeights keeps parameters in fp32 (training: the
// optimizer updates fp32 master weights, each step casts them down).
// A global other readers want in fp32 is cast where a product reads it.
//
// foldCasts then lets a kernel write the cast's type itself: a cast whose
// operand has no other reader is dropped, its producer writing the cast's
// element type (a softmax or a norm computed in fp32 and stored in bf16; a
// product accumulated in fp32 and stored so). Kernels compute in fp32 and
// round once on the store, so the values are those of the separate cast,
// or more exact where a cast up follows a product.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/Support/Error.h"

namespace pax {

/// What precision an op kind computes in (AutocastPolicy.def).
enum class AutocastPolicy : uint8_t { Follow, Low, F32, Keep };

AutocastPolicy autocastPolicy(OpKind k);

struct AutocastOptions {
  /// The low precision: BF16 or F16.
  DType low = DType::BF16;
  /// Keep parameters in fp32 (master weights) and cast them each step.
  bool masterWeights = false;
  /// A master weight's cast gets a replica dim of this extent (nothing
  /// when 1): partitioned, every device that reads the copy casts it
  /// itself, as the weights are loaded on every device that reads them.
  int64_t replicas = 1;
};

/// Which ops of a program foldCasts may make write a cast's type.
enum class CastFold : uint8_t {
  /// Every producer but copies and casts.
  All,
  /// Casts down only: a product whose reader casts it up keeps writing
  /// the low precision (a training step's gradients reduced in bf16).
  DownOnly,
};

/// The element type \p text names (bf16, fp16, f16), or an error naming
/// the choices.
llvm::Expected<DType> parseLowPrecision(llvm::StringRef text);

/// Rewrites \p m's fp32 computation to \p o's mixed precision (the
/// header's rules), then folds casts (foldCasts, CastFold::All). Returns
/// the number of casts in the program. Values already low or of other
/// types (f64, integers, an fp16 model's) are left as they are.
unsigned autocast(Module &m, const AutocastOptions &o);

/// Makes each cast whose operand it alone reads (\p which) part of that
/// operand's producer; returns how many it folded.
unsigned foldCasts(Module &m, CastFold which);

} // namespace pax
