//===- FuzzJson.cpp - The cost database and cluster JSON readers ----------===//
#include "codegen/plan/CostDb.h"
#include "passes/cost/Cluster.h"
#include "test/fuzz/Fuzz.h"
#include "test/fuzz/JsonMutator.h"

PAX_FUZZ_JSON_MUTATOR

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace pax;
  llvm::StringRef text = fuzz::bytesOf(data, size);
  fuzz::consume(parseCostDb(text, "costs.json"));
  auto c = parseClusterJson(text, "cluster.json");
  if (c)
    fuzz::consume(validateCluster(*c));
  else
    llvm::consumeError(c.takeError());
  return 0;
}
