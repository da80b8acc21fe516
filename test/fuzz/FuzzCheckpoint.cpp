//===- FuzzCheckpoint.cpp - A training session's checkpoint readers -------===//
//
// The input is read as a checkpoint index (checkpoint.txt) for a fixed
// plan, and as one of its tensor files.
//
//===----------------------------------------------------------------------===//
#include "test/fuzz/Fuzz.h"
#include "test/fuzz/Model.h"
#include "tools/common/Checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace pax;
  const plan::Plan &plan = fuzz::smallPlan();
  static const std::string fingerprint = planFingerprint(plan);
  llvm::StringRef bytes = fuzz::bytesOf(data, size);
  fuzz::consume(parseCheckpointIndex(bytes, "checkpoint.txt", fingerprint));
  fuzz::consume(
      parseCheckpointTensor(bytes, fuzz::scratchDir() + "/tensor_0.pb", plan));
  return 0;
}
