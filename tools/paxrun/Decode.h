//===- Decode.h - paxrun's step loop: outputs fed back as inputs -*- C++
//-*-===//
//
// `paxrun --decode-steps=N --feedback=SPEC`: runs an inference plan N times,
// each step's outputs named in SPEC becoming the next step's inputs (a
// decoding step's grown key/value cache, its next token and position).
// SPEC is comma-separated OUTPUT=INPUT pairs; a `*` in both sides matches
// names alike (`present_*=past_*`). An output fed back must have its
// input's element type and shape: a cache of fixed size, written in place
// at the position (a static cache), not one that grows each step.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/plan/Plan.pb.h"
#include "runtime/Tensor.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace pax {

/// One output fed back: plan output \p output becomes plan input \p input.
struct FeedbackPair {
  unsigned output = 0, input = 0;
};

/// The pairs \p spec names in \p plan, or an error naming the pair (no
/// such output or input, a pattern matching nothing, another type or
/// shape, an input fed twice).
llvm::Expected<std::vector<FeedbackPair>> parseFeedback(const plan::Plan &plan,
                                                        llvm::StringRef spec);

/// Copies each pair's output into its input, for the next step.
void feedBack(llvm::ArrayRef<FeedbackPair> pairs,
              const std::vector<runtime::Tensor> &outputs,
              std::vector<runtime::Tensor> &inputs);

/// The loop: \p steps runs, each one's outputs \p pairs name fed back, the
/// outputs \p print names printed after each (`step K: NAME = ...`), and
/// the steps per second at the end.
struct DecodeLoop {
  const plan::Plan &plan;
  llvm::ArrayRef<FeedbackPair> pairs;
  llvm::ArrayRef<std::string> print;
  unsigned steps = 0;

  /// Runs the loop; \p step runs the plan once (told whether it is the
  /// first step), reading \p inputs and writing \p outputs.
  llvm::Error run(std::vector<runtime::Tensor> &inputs,
                  std::vector<runtime::Tensor> &outputs,
                  llvm::function_ref<llvm::Error(bool first)> step) const;

private:
  void printStep(unsigned k, const std::vector<runtime::Tensor> &outputs) const;
};

} // namespace pax
