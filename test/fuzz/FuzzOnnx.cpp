//===- FuzzOnnx.cpp - The ONNX loader: import, folding, shape inference ---===//
//
// A binary ModelProto (or, built as fuzz-onnx-text, a text one) imported
// as paxc imports it, external data read from a scratch folder.
//
//===----------------------------------------------------------------------===//
#include "frontend/OnnxImporter.h"
#include "test/fuzz/Fuzz.h"

#ifndef PAX_FUZZ_TEXT
#define PAX_FUZZ_TEXT 0
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace pax;
  std::string path =
      fuzz::scratchDir() + (PAX_FUZZ_TEXT ? "/model.onnxtxt" : "/model.onnx");
  ImportOptions options;
  options.batch = 2; // a symbolic batch dim gets a value
  fuzz::consume(importOnnxBytes(path, fuzz::bytesOf(data, size), options));
  return 0;
}
