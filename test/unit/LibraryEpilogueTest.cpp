//===- LibraryEpilogueTest.cpp - Products whose epilogue a library runs ---===//
#include "codegen/plan/LibraryEpilogue.h"
#include "codegen/plan/PlanFile.h"

#include "PlanBuilder.h"

#include <gtest/gtest.h>

using namespace pax;
using namespace pax::test;
using Activation = plan::LibraryEpilogue::Activation;

namespace {

/// Buffers: 0 A [4, 8], 1 B [8, 6], 2 bias [6], 3 the product, 4 the
/// added tensor, 5 the sum, 6 the activation, 7 another [4, 6], each at
/// its own offset.
plan::DeviceProgram program() {
  plan::DeviceProgram p;
  std::vector<std::vector<int64_t>> shapes = {{4, 8}, {8, 6}, {6},    {4, 6},
                                              {4, 6}, {4, 6}, {4, 6}, {4, 6}};
  int64_t offset = 0;
  for (size_t b = 0; b < shapes.size(); ++b) {
    plan::Buffer *buf = p.add_buffers();
    buf->set_id(uint32_t(b));
    buf->set_dtype(plan::F32);
    for (int64_t d : shapes[b])
      buf->add_shape(d);
    buf->set_offset(offset);
    offset += planBufferBytes(*buf);
  }
  return p;
}

/// Appends compute \p c reading \p ins and writing \p out, in fused group
/// "k0".
void add(plan::DeviceProgram &p, plan::Compute c,
         std::initializer_list<uint32_t> ins, uint32_t out) {
  int k = 0;
  for (uint32_t b : ins)
    c.mutable_inputs(k++)->set_buffer(b);
  c.mutable_outputs(0)->set_buffer(out);
  c.set_fused("k0");
  *p.add_instructions()->mutable_compute() = std::move(c);
}

plan::Compute gemm() {
  return ComputeBuilder("gemm")
      .iter("m", 4)
      .iter("n", 6)
      .red("k", 8)
      .in({dim(0), dim(2)})
      .in({dim(2), dim(1)})
      .in({dim(1)})
      .out({dim(0), dim(1)})
      .c;
}
plan::Compute pointwise(const std::string &kind, int operands) {
  ComputeBuilder b(kind);
  b.iter("d0", 4).iter("d1", 6);
  for (int i = 0; i < operands; ++i)
    b.in({dim(0), dim(1)});
  return b.out({dim(0), dim(1)}).c;
}
plan::Compute gelu(const std::string &approximate) {
  plan::Compute c = pointwise("gelu", 1);
  plan::Attr *a = c.add_attrs();
  a->set_name("approximate");
  a->set_s(approximate);
  return c;
}
void kernel(plan::DeviceProgram &p, uint32_t first, uint32_t count) {
  plan::GeneratedKernel *k = p.add_kernels();
  k->set_name("pax_k0");
  k->set_first(first);
  k->set_count(count);
}

/// gemm (with a bias) -> add -> tanh GELU, the last two one kernel.
plan::DeviceProgram biasAddGelu(const std::string &approximate = "tanh") {
  plan::DeviceProgram p = program();
  add(p, gemm(), {0, 1, 2}, 3);
  add(p, pointwise("add", 2), {3, 4}, 5);
  add(p, gelu(approximate), {5}, 6);
  kernel(p, 1, 2);
  return p;
}

TEST(LibraryEpilogueTest, BiasAddAndTanhGelu) {
  plan::DeviceProgram p = biasAddGelu();
  auto found = plan::libraryEpilogues(p);
  ASSERT_EQ(found.size(), 1u);
  const plan::LibraryEpilogue &e = found[0];
  EXPECT_EQ(e.product, 0u);
  EXPECT_EQ(e.kernel, &p.kernels(0));
  EXPECT_EQ(e.bias, 2);
  EXPECT_EQ(e.addend, 4);
  EXPECT_EQ(e.activation, Activation::GeluTanh);
  EXPECT_EQ(e.output, 6u);
}

// Mixed precision: bf16 A and B (fp32 accumulation) into bf16 with a bf16
// bias and addend, or into f32 (a cast up folded into the product) with a
// bf16 bias and an f32 addend, are one call; A and B of two types, or an
// addend of another type than the result, are not.
TEST(LibraryEpilogueTest, SixteenBitProducts) {
  auto typed = [](std::initializer_list<std::pair<int, plan::DType>> types) {
    plan::DeviceProgram p = biasAddGelu();
    for (auto [b, t] : types)
      p.mutable_buffers(b)->set_dtype(t);
    return plan::libraryEpilogues(p).size();
  };
  using plan::BF16, plan::F16, plan::F32;
  EXPECT_EQ(typed({{0, BF16},
                   {1, BF16},
                   {2, BF16},
                   {3, BF16},
                   {4, BF16},
                   {5, BF16},
                   {6, BF16}}),
            1u);
  EXPECT_EQ(typed({{0, BF16}, {1, BF16}, {2, BF16}}), 1u);
  EXPECT_EQ(typed({{0, F16}, {1, F16}}), 1u);
  EXPECT_EQ(typed({{0, BF16}, {1, F16}}), 0u);
  EXPECT_EQ(typed({{0, BF16}}), 0u);
  EXPECT_EQ(typed({{0, BF16}, {1, BF16}, {2, F16}}), 0u);
  EXPECT_EQ(typed({{0, BF16}, {1, BF16}, {3, BF16}, {5, BF16}, {6, BF16}}),
            0u); // the f32 addend
}

// The error function's GELU is no epilogue of cuBLASLt's.
TEST(LibraryEpilogueTest, ErfGeluIsNot) {
  EXPECT_TRUE(plan::libraryEpilogues(biasAddGelu("none")).empty());
}

// The product, read by another op too, must be stored.
TEST(LibraryEpilogueTest, ProductReadElsewhereIsNot) {
  plan::DeviceProgram p = biasAddGelu();
  add(p, pointwise("relu", 1), {3}, 7);
  EXPECT_TRUE(plan::libraryEpilogues(p).empty());
}

// One call reads A while it writes the result: they may not share bytes;
// the result may take the added tensor's bytes exactly.
TEST(LibraryEpilogueTest, ResultOverAnOperandIsNot) {
  plan::DeviceProgram p = biasAddGelu();
  p.mutable_buffers(6)->set_offset(p.buffers(0).offset());
  EXPECT_TRUE(plan::libraryEpilogues(p).empty());
  p.mutable_buffers(6)->set_offset(p.buffers(4).offset());
  EXPECT_EQ(plan::libraryEpilogues(p).size(), 1u);
  p.mutable_buffers(6)->set_offset(p.buffers(4).offset() + 4);
  EXPECT_TRUE(plan::libraryEpilogues(p).empty());
}

// cuBLASLt adds before its activation: an add after a relu is not one.
TEST(LibraryEpilogueTest, AddAfterTheActivationIsNot) {
  plan::DeviceProgram p = program();
  add(p, gemm(), {0, 1, 2}, 3);
  add(p, pointwise("relu", 1), {3}, 5);
  add(p, pointwise("add", 2), {5, 4}, 6);
  kernel(p, 1, 2);
  EXPECT_TRUE(plan::libraryEpilogues(p).empty());
}

// The kernel must follow the product, in its fused group.
TEST(LibraryEpilogueTest, KernelApartOrOtherGroupIsNot) {
  plan::DeviceProgram p = biasAddGelu();
  p.mutable_instructions(1)->mutable_compute()->set_fused("k1");
  EXPECT_TRUE(plan::libraryEpilogues(p).empty());
  plan::DeviceProgram q = program();
  add(q, gemm(), {0, 1, 2}, 3);
  add(q, pointwise("relu", 1), {4}, 7);
  add(q, pointwise("relu", 1), {3}, 6);
  kernel(q, 2, 1);
  EXPECT_TRUE(plan::libraryEpilogues(q).empty());
}

// A relu alone; the product's C, a full tensor, is the library's C.
TEST(LibraryEpilogueTest, ReluWithTheProductsFullC) {
  plan::DeviceProgram p = program();
  plan::Compute g = gemm();
  g.mutable_inputs(2)->clear_exprs();
  ComputeBuilder::fill(g.mutable_inputs(2), {dim(0), dim(1)});
  add(p, std::move(g), {0, 1, 4}, 3);
  add(p, pointwise("relu", 1), {3}, 6);
  kernel(p, 1, 1);
  auto found = plan::libraryEpilogues(p);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].bias, -1);
  EXPECT_EQ(found[0].addend, 4);
  EXPECT_EQ(found[0].activation, Activation::Relu);
}

} // namespace
