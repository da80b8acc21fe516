//===- FuzzStrategy.cpp - The strategy JSON reader against a fixed model --===//
#include "passes/sharding/StrategyIO.h"
#include "test/fuzz/Fuzz.h"
#include "test/fuzz/JsonMutator.h"
#include "test/fuzz/Model.h"

PAX_FUZZ_JSON_MUTATOR

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace pax;
  ConfigOptions o;
  o.devices = 8;
  o.executable = true;
  std::vector<int64_t> offsets;
  fuzz::consume(strategyFromJson(fuzz::smallModule(), fuzz::bytesOf(data, size),
                                 "fuzz.json", o, &offsets));
  return 0;
}
