//===- Optimizer.h - Parameter updates of a training step -----------------===//
//
// appendOptimizer() turns a module whose results are the loss and the
// gradients `grad/NAME` (appendBackward) into one training step: each
// parameter's new value, and each piece of optimizer state's, becomes a
// result `update/NAME`; the gradients are no longer results. Optimizer
// state (momentum, Adam's moments, the step count) is a global that starts
// at zero; the program that runs the steps (paxrun --train) feeds every
// `update/NAME` back as NAME's value for the next step. The formulas are
// torch's: SGD with momentum, dampening 0 and optional Nesterov; Adam with
// bias correction (weight decay added to the gradient); AdamW with decoupled
// weight decay. Clipping scales every gradient by min(1, clip / norm), the
// norm taken over all the gradients together (after their aggregation,
// since the ops read whole gradients).
//
// Dynamic loss scaling (fp16 training, as torch.amp.GradScaler does): the
// backward pass starts from the loss scale S (addLossScale, a state global
// `amp/scale`) instead of 1, so the 16-bit gradients keep their small
// values; the optimizer divides each gradient by S, and where any
// gradient holds an inf or a NaN it skips the step (every parameter and
// piece of state keeps its value) and halves S; after `growthInterval`
// clean steps in a row S doubles (the count is state `amp/growth_tracker`).
// S and the count are state like any other: fed back each step, saved in
// checkpoints.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/Support/Error.h"

#include <optional>
#include <string>

namespace pax {

struct OptimizerOptions {
  enum class Kind { Sgd, Adam, AdamW };
  Kind kind = Kind::Sgd;
  double lr = 0.01;
  double momentum = 0;
  bool nesterov = false;
  double weightDecay = 0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  /// Clip the gradients' global norm to this; 0 for none.
  double clipNorm = 0;
  /// Each update op's replica dim (GradientBuilder::replicate): the devices
  /// it may run on at once, whole; 1 for none.
  int64_t replicas = 1;
  /// Dynamic loss scaling: the scale the gradients carry (addLossScale);
  /// nullptr for none.
  const Global *lossScale = nullptr;
  /// Clean steps after which the scale grows by scaleGrowth; what an
  /// overflow multiplies it by.
  int64_t growthInterval = 2000;
  double scaleGrowth = 2, scaleBackoff = 0.5;
};

/// The name of the loss-scale state global.
inline constexpr const char *kLossScaleName = "amp/scale";

/// Adds the loss-scale state (an f32 scalar starting at \p initial) for
/// AutodiffOptions::seedScale and OptimizerOptions::lossScale.
Global *addLossScale(Module &m, double initial);

/// "sgd", "adam", "adamw"; nullopt otherwise.
std::optional<OptimizerOptions::Kind> parseOptimizerKind(llvm::StringRef name);

/// Appends the update of every parameter that has a gradient result (see
/// the file comment). Fails on options out of range and when the module
/// has no gradients.
llvm::Error appendOptimizer(Module &m, const OptimizerOptions &options);

/// An error naming the first of \p options out of range (as a flag:
/// "optimizer: --lr must be positive"), or success.
llvm::Error checkOptimizerOptions(const OptimizerOptions &options);

} // namespace pax
