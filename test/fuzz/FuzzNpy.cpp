//===- FuzzNpy.cpp - The .npy tensor reader -------------------------------===//
#include "test/fuzz/Fuzz.h"
#include "tools/common/TensorFiles.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace pax;
  fuzz::consume(parseNpy(fuzz::bytesOf(data, size), "input_0.npy"));
  return 0;
}
