//===- Autodiff.h - The backward pass of a training step ------------------===//
//
// appendBackward() differentiates @main's loss with respect to the model's
// parameters. Ops are visited in reverse order; each op's gradient rule
// (GradientRules.cpp, one per op kind) builds backward ops over the op's own
// iteration space, so the configuration that splits a forward op splits its
// backward ops the same way (it is copied onto them): a sample dim the
// weight's gradient does not have becomes a reduction, whose partial sums
// are the data-parallel gradient all-reduce. Gradients reaching one value
// from several readers are summed.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"
#include "passes/Pass.h"

#include "llvm/Support/Error.h"

#include <string>

namespace pax {

/// Options of appendBackward().
struct AutodiffOptions {
  /// Parameters whose name matches this regular expression stay fixed
  /// (`--freeze`); empty for none.
  std::string freeze;
  /// The devices a lookup's gradient (scatter_add) may be computed on at
  /// once: its replica dim's extent (GradientBuilder::replicate); 1 for none.
  int64_t replicas = 1;
  /// The loss's gradient seed: 1, or this scalar global's value (the loss
  /// scale of fp16 training, LossScaling.h): every gradient is scaled by it.
  const Global *seedScale = nullptr;
};

/// Appends to @main the gradient of its loss (its first result, a float
/// with one element) with respect to every parameter the loss depends on,
/// each as a new result named `grad/NAME` after the existing results, in
/// the order of the module's globals. Fails naming the op when the loss
/// depends on an op whose kind has no gradient rule, and when the first
/// result is not a one-element float.
llvm::Error appendBackward(Module &m, const AutodiffOptions &options);

/// `pax-autodiff{freeze=REGEX}`: appendBackward() as a pass.
class AutodiffPass : public Pass {
public:
  explicit AutodiffPass(AutodiffOptions o) : options(std::move(o)) {}
  static llvm::Expected<std::unique_ptr<Pass>> create(const PassOptions &o);
  llvm::StringRef argument() const override { return "pax-autodiff"; }
  llvm::Error run(Module &m, PassContext &ctx) override;

private:
  AutodiffOptions options;
};

} // namespace pax
