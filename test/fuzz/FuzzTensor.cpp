//===- FuzzTensor.cpp - The .pb tensor reader (inputs, test data) ---------===//
#include "test/fuzz/Fuzz.h"
#include "tools/common/TensorFiles.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace pax;
  auto t = parseTensorFile(fuzz::bytesOf(data, size),
                           fuzz::scratchDir() + "/input_0.pb");
  if (t)
    (void)toRuntimeTensor(*t); // what paxrun makes of an input
  else
    llvm::consumeError(t.takeError());
  return 0;
}
