//===- FuzzCheckpoint.cpp - A training session's checkpoint readers -------===//
//
// The input is read as a checkpoint index (checkpoint.txt), as a shard's
// index, and as one of its block files.
//
//===----------------------------------------------------------------------===//
#include "test/fuzz/Fuzz.h"
#include "test/fuzz/Model.h"
#include "tools/common/Checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace pax;
  llvm::StringRef bytes = fuzz::bytesOf(data, size);
  fuzz::consume(parseCheckpointIndex(bytes, "checkpoint.txt"));
  fuzz::consume(parseShardIndex(bytes, "s0_d0.txt", fuzz::scratchDir()));
  fuzz::consume(parseCheckpointBlock(bytes, fuzz::scratchDir() + "/s0_d0_0.pb",
                                     "w", {4, 8}, plan::F32));
  return 0;
}
