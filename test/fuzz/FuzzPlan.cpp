//===- FuzzPlan.cpp - The plan reader through checkPlan -------------------===//
//
// What paxrun does with a plan before it runs anything: decode the
// envelope and the protobuf, then check it whole (runtime/PlanCheck.h).
// Mutations seldom keep the envelope's checksum, so the input is also
// taken as the protobuf alone and checked (the seeds are plans' payloads).
//
//===----------------------------------------------------------------------===//
#include "codegen/plan/PlanFile.h"
#include "runtime/PlanCheck.h"
#include "test/fuzz/Fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace pax;
  auto plan = decodePlan(fuzz::bytesOf(data, size), "fuzz.paxplan");
  if (plan)
    fuzz::consume(runtime::checkPlan(*plan));
  else
    llvm::consumeError(plan.takeError());
  plan::Plan payload;
  if (size <= size_t(INT32_MAX) && payload.ParseFromArray(data, int(size)))
    fuzz::consume(runtime::checkPlan(payload));
  return 0;
}
