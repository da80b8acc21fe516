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
#include "runtime/Device.h"
#include "runtime/Tensor.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"

#include <map>
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

/// Copies each pair's output into its input, for the next step, but the
/// pairs \p onDevices marks (they stay on the devices).
void feedBack(llvm::ArrayRef<FeedbackPair> pairs,
              const std::vector<bool> &onDevices,
              const std::vector<runtime::Tensor> &outputs,
              std::vector<runtime::Tensor> &inputs);

/// Where each pair's blocks wait between steps. A pair whose input's every
/// binding, on every device of \p progs, has a binding of the output of
/// the same box on that device stays there: the device copies the block
/// past its arena at each step's end and reads it back at the next step's
/// start (runtime::KeptBlock); its output is not gathered, nor its input
/// fed from the host. Any other pair goes through the host.
struct KeptPairs {
  std::map<uint32_t, std::vector<runtime::KeptBlock>> blocks;
  std::vector<bool> onDevices; ///< by pair
};
KeptPairs keepOnDevices(llvm::ArrayRef<const plan::DeviceProgram *> progs,
                        llvm::ArrayRef<FeedbackPair> pairs);

/// The loop: \p steps runs, each one's outputs \p pairs name fed back, the
/// outputs \p print names printed after each (`step K: NAME = ...`), and
/// the steps per second at the end.
struct DecodeLoop {
  const plan::Plan &plan;
  llvm::ArrayRef<FeedbackPair> pairs;
  llvm::ArrayRef<std::string> print;
  unsigned steps = 0;
  /// The pairs that stay on the devices (keepOnDevices); none if empty.
  KeptPairs kept;

  /// Runs the loop; \p step runs the plan once with the options given,
  /// reading \p inputs and writing \p outputs.
  llvm::Error
  run(std::vector<runtime::Tensor> &inputs,
      std::vector<runtime::Tensor> &outputs,
      llvm::function_ref<llvm::Error(const runtime::RunOptions &)> step) const;

  /// Step \p k's run: the weights resident after the first, the kept
  /// blocks read after the first, the kept outputs left on the devices
  /// but the last step's and those printed.
  runtime::RunOptions optionsFor(unsigned k) const;

private:
  void printStep(unsigned k, const std::vector<runtime::Tensor> &outputs) const;
};

} // namespace pax
