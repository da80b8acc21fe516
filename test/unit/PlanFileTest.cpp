//===- PlanFileTest.cpp - The .paxplan envelope: version and checksum -----===//
#include "codegen/plan/PlanFile.h"

#include "llvm/Support/Endian.h"

#include <gtest/gtest.h>

using namespace pax;

namespace {

plan::Plan samplePlan() {
  plan::Plan p;
  p.set_model("mlp");
  p.set_devices(2);
  p.set_devices_per_node(8);
  plan::Group *g = p.add_groups();
  g->set_id(0);
  g->add_devices(0);
  g->add_devices(1);
  plan::DeviceProgram *d = p.add_programs();
  d->set_device(0);
  plan::Compute *c = d->add_instructions()->mutable_compute();
  c->set_kind("matmul");
  plan::IterDim *m = c->add_iters();
  m->set_name("m");
  m->set_extent(32);
  plan::Collective *ar = d->add_instructions()->mutable_collective();
  ar->set_kind(plan::Collective::ALL_REDUCE);
  return p;
}

std::string errorOf(llvm::StringRef bytes) {
  auto r = decodePlan(bytes, "x.paxplan");
  if (r)
    return "";
  return llvm::toString(r.takeError());
}

} // namespace

TEST(PlanFileTest, RoundTrips) {
  plan::Plan p = samplePlan();
  std::string bytes = encodePlan(p);
  auto back = decodePlan(bytes, "x.paxplan");
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
  EXPECT_EQ(back->SerializeAsString(), p.SerializeAsString());
  EXPECT_EQ(back->programs(0).instructions(0).compute().kind(), "matmul");
}

TEST(PlanFileTest, RefusesWhatIsNotAPlan) {
  EXPECT_EQ(errorOf(""), "x.paxplan: not a paxc plan (no PAXPLAN header)");
  EXPECT_EQ(errorOf("ir_version: 8"),
            "x.paxplan: not a paxc plan (no PAXPLAN header)");
  std::string bytes = encodePlan(samplePlan());
  EXPECT_EQ(errorOf(bytes.substr(0, 12)),
            "x.paxplan: the plan is truncated (its header is incomplete)");
  std::string cut = bytes.substr(0, bytes.size() - 5);
  EXPECT_NE(errorOf(cut).find("the plan is truncated"), std::string::npos);
  EXPECT_NE(errorOf(bytes + "junk").find("4 bytes of trailing garbage"),
            std::string::npos);
}

TEST(PlanFileTest, RefusesOtherVersionsAndCorruption) {
  std::string bytes = encodePlan(samplePlan());
  std::string old = bytes;
  llvm::support::endian::write32le(old.data() + 8, kPlanVersion + 1);
  EXPECT_NE(errorOf(old).find("plan format version " +
                              std::to_string(kPlanVersion + 1) +
                              " is not supported"),
            std::string::npos);
  std::string flipped = bytes;
  flipped.back() ^= 0x5a;
  EXPECT_EQ(errorOf(flipped),
            "x.paxplan: the plan is corrupted (its checksum does not match)");
}
