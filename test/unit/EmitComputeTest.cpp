//===- EmitComputeTest.cpp - IR ops as plan instructions ------------------===//
#include "codegen/EmitCompute.h"

#include "IrText.h"

#include <gtest/gtest.h>

using namespace pax;
using namespace pax::test;

TEST(EmitComputeTest, CarriesSpaceMapsAndAttributes) {
  auto m = parse(R"(module @m {
  param @w : tensor<8x3x3x3xf32> = fill(0.1)
  func @main(%x: tensor<2x3x10x10xf32>) -> (y: tensor<2x8x5x5xf32>) {
    %0 = compute "conv" iter [n: 2 par, co: 8 par, oh: 5 par, ow: 5 par, ci: 3 red, kh: 3 red, kw: 3 red]
        ins(%x[n, ci, 2*oh + kh - 1, 2*ow + 2*kw - 2], @w[co, ci, kh, kw])
        outs([n, co, oh, ow] : tensor<2x8x5x5xf32>) {group = 1, name = "conv1", pads = [1, 1, 1, 1]}
    return %0
  }
})");
  ASSERT_TRUE(m);
  plan::Compute c = emitCompute(*m->main.ops[0], {3, 4}, {7});
  EXPECT_EQ(c.kind(), "conv");
  EXPECT_EQ(c.name(), "conv1");
  ASSERT_EQ(c.iters_size(), 7);
  EXPECT_EQ(c.iters(4).name(), "ci");
  EXPECT_EQ(c.iters(4).kind(), plan::IterDim::RED);
  EXPECT_EQ(c.iters(2).extent(), 5);
  ASSERT_EQ(c.inputs_size(), 2);
  EXPECT_EQ(c.inputs(0).buffer(), 3u);
  const plan::AccessExpr &h = c.inputs(0).exprs(2);
  EXPECT_EQ(h.kind(), plan::AccessExpr::AFFINE);
  EXPECT_EQ(h.dims_size(), 2);
  EXPECT_EQ(h.stride(), 2);
  EXPECT_EQ(h.offset(), -1);
  EXPECT_EQ(c.inputs(0).exprs(3).dilation(), 2);
  EXPECT_EQ(c.outputs(0).buffer(), 7u);
  // Attributes, without the source name (it has a field of its own).
  ASSERT_EQ(c.attrs_size(), 2);
  EXPECT_EQ(c.attrs(0).name(), "group");
  EXPECT_EQ(c.attrs(0).i(), 1);
  EXPECT_EQ(c.attrs(1).ints().values_size(), 4);
  EXPECT_EQ(toPlanDType(DType::I1), plan::I1);
}
