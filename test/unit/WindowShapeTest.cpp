//===- WindowShapeTest.cpp - Windows as a symmetric-padding library sees them ===//
#include "runtime/WindowShape.h"

#include <gtest/gtest.h>

using namespace pax::runtime;

namespace {

WindowDim window(int64_t size, int64_t kernel, int64_t stride, int64_t pad,
                 int64_t out, int64_t dilation = 1) {
  WindowDim w;
  w.size = size;
  w.kernel = kernel;
  w.stride = stride;
  w.dilation = dilation;
  w.offset = -pad;
  w.out = out;
  return w;
}

TEST(WindowShapeTest, SymmetricPadsAreTheLibrarys) {
  // ResNet's stem: 224 rows, 7 wide, stride 2, pads (3, 3): 112 outputs.
  EXPECT_EQ(window(224, 7, 2, 3, 112).symmetricPad(), 3);
  // 3x3 stride 1 "same" and a 1x1 unpadded window.
  EXPECT_EQ(window(56, 3, 1, 1, 56).symmetricPad(), 1);
  EXPECT_EQ(window(56, 1, 1, 0, 56).symmetricPad(), 0);
  // Dilation 2 reads 5 rows: pad 2 keeps 14 outputs.
  EXPECT_EQ(window(14, 3, 1, 2, 14, 2).symmetricPad(), 2);
  // Pads (1, 0) at stride 2 over 8 rows: the last output (rows 5..7)
  // never reads a padded row after the input, so pad 1 each side gives the
  // same 4 windows.
  EXPECT_EQ(window(8, 3, 2, 1, 4).symmetricPad(), 1);
}

TEST(WindowShapeTest, AsymmetricOrShiftedWindowsAreNot) {
  // Pads (0, 1) at stride 1 ("same" for an even kernel): 4 outputs, where
  // pad 0 each side gives 3.
  EXPECT_EQ(window(4, 2, 1, 0, 4).symmetricPad(), -1);
  // A block that starts inside its input (a halo's offset 1).
  EXPECT_EQ(window(10, 3, 1, -1, 8).symmetricPad(), -1);
  // Fewer outputs than the padded input gives (a split's first block).
  EXPECT_EQ(window(56, 3, 1, 1, 28).symmetricPad(), -1);
}

} // namespace
