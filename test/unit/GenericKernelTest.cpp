//===- GenericKernelTest.cpp - The CPU generic kernel over plan computes --===//
#include "runtime/cpu/GenericKernel.h"

#include "runtime/RandomMath.h"

#include "llvm/Support/xxhash.h"

#include "PlanBuilder.h"

#include <gtest/gtest.h>
#include <tbb/task_arena.h>

#include <cmath>
#include <cstring>
#include <random>

using namespace pax;
using namespace pax::runtime;
using namespace pax::test;

namespace {

std::string run(const plan::Compute &c, std::vector<const Tensor *> ins,
                std::vector<Tensor *> outs) {
  return runWith(runGeneric, c, std::move(ins), std::move(outs));
}

using V = std::vector<double>;

TEST(GenericKernelTest, BroadcastAdd) {
  auto b = ComputeBuilder("add").iter("i", 2).iter("j", 3);
  b.in({dim(0), dim(1)}).in({bcast(), dim(1)}).out({dim(0), dim(1)});
  Tensor x = make(plan::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor y = make(plan::F32, {1, 3}, {10, 20, 30});
  Tensor z = make(plan::F32, {2, 3});
  ASSERT_EQ(run(b.c, {&x, &y}, {&z}), "");
  EXPECT_EQ(reals(z), V({11, 22, 33, 14, 25, 36}));
}

TEST(GenericKernelTest, Where) {
  auto b = ComputeBuilder("where").iter("i", 4);
  b.in({dim(0)}).in({dim(0)}).in({bcast()}).out({dim(0)});
  Tensor cond = make(plan::I1, {4}, {1, 0, 0, 1});
  Tensor x = make(plan::F32, {4}, {1, 2, 3, 4});
  Tensor y = make(plan::F32, {1}, {-1});
  Tensor z = make(plan::F32, {4});
  ASSERT_EQ(run(b.c, {&cond, &x, &y}, {&z}), "");
  EXPECT_EQ(reals(z), V({1, -1, -1, 4}));
}

TEST(GenericKernelTest, CastF32ToI64Truncates) {
  auto b = ComputeBuilder("cast").iter("i", 4);
  b.in({dim(0)}).out({dim(0)});
  Tensor x = make(plan::F32, {4}, {-1.75, 2.5, 3.9, 1e30});
  Tensor z = make(plan::I64, {4});
  ASSERT_EQ(run(b.c, {&x}, {&z}), "");
  EXPECT_EQ(z.integer(0), -1);
  EXPECT_EQ(z.integer(1), 2);
  EXPECT_EQ(z.integer(2), 3);
  EXPECT_EQ(z.integer(3), std::numeric_limits<int64_t>::max());
}

TEST(GenericKernelTest, IntegerDivTruncates) {
  auto b = ComputeBuilder("div").iter("i", 3);
  b.in({dim(0)}).in({dim(0)}).out({dim(0)});
  Tensor x = make(plan::I64, {3}, {-7, 7, 5});
  Tensor y = make(plan::I64, {3}, {2, -2, 0});
  Tensor z = make(plan::I64, {3});
  ASSERT_EQ(run(b.c, {&x, &y}, {&z}), "");
  EXPECT_EQ(reals(z), V({-3, -3, 0}));
}

TEST(GenericKernelTest, Activations) {
  Tensor x = make(plan::F32, {3}, {-1, 0, 1});
  auto unary = [&](const char *kind) {
    auto b = ComputeBuilder(kind).iter("i", 3);
    b.in({dim(0)}).out({dim(0)});
    Tensor z = make(plan::F32, {3});
    EXPECT_EQ(run(b.c, {&x}, {&z}), "");
    return reals(z);
  };
  EXPECT_EQ(unary("relu"), V({0, 0, 1}));
  V s = unary("sigmoid");
  EXPECT_NEAR(s[0], 0.2689414213699951, 1e-7);
  EXPECT_EQ(s[1], 0.5);
  EXPECT_NEAR(s[2], 0.7310585786300049, 1e-7);
  V e = unary("erf");
  EXPECT_NEAR(e[0], -0.8427007929497149, 1e-7);
  EXPECT_EQ(e[1], 0);
  EXPECT_NEAR(e[2], 0.8427007929497149, 1e-7);
}

TEST(GenericKernelTest, ClipWithAttributes) {
  auto b = ComputeBuilder("clip").iter("i", 3);
  b.in({dim(0)}).out({dim(0)}).attrF("min", -1).attrF("max", 2);
  Tensor x = make(plan::F32, {3}, {-5, 0.5, 7});
  Tensor z = make(plan::F32, {3});
  ASSERT_EQ(run(b.c, {&x}, {&z}), "");
  EXPECT_EQ(reals(z), V({-1, 0.5, 2}));
}

TEST(GenericKernelTest, Transpose) {
  // out[a, b] = in[b, a]: in is 2x3, out 3x2.
  auto b = ComputeBuilder("transpose").iter("a", 3).iter("b", 2);
  b.in({dim(1), dim(0)}).out({dim(0), dim(1)});
  Tensor x = make(plan::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor z = make(plan::F32, {3, 2});
  ASSERT_EQ(run(b.c, {&x}, {&z}), "");
  EXPECT_EQ(reals(z), V({1, 4, 2, 5, 3, 6}));
}

TEST(GenericKernelTest, ConcatOfTwoInputs) {
  // [2, 3] ++ [2, 2] along dim 1: the second reads `d1 - 3`.
  auto b = ComputeBuilder("concat").iter("d0", 2).iter("d1", 5);
  b.in({dim(0), dim(1)}).in({dim(0), dim(1, -3)}).out({dim(0), dim(1)});
  Tensor x = make(plan::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor y = make(plan::F32, {2, 2}, {7, 8, 9, 10});
  Tensor z = make(plan::F32, {2, 5});
  ASSERT_EQ(run(b.c, {&x, &y}, {&z}), "");
  EXPECT_EQ(reals(z), V({1, 2, 3, 7, 8, 4, 5, 6, 9, 10}));
}

TEST(GenericKernelTest, SplitIntoTwoOutputs) {
  auto b = ComputeBuilder("split").iter("d0", 2).iter("d1", 5);
  b.in({dim(0), dim(1)}).out({dim(0), dim(1)}).out({dim(0), dim(1, -3)});
  Tensor x = make(plan::I32, {2, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  Tensor y = make(plan::I32, {2, 3}), z = make(plan::I32, {2, 2});
  ASSERT_EQ(run(b.c, {&x}, {&y, &z}), "");
  EXPECT_EQ(reals(y), V({1, 2, 3, 6, 7, 8}));
  EXPECT_EQ(reals(z), V({4, 5, 9, 10}));
}

TEST(GenericKernelTest, StridedSlice) {
  auto b = ComputeBuilder("slice").iter("j", 3);
  b.in({dim(0, 1, 2)}).out({dim(0)});
  Tensor x = make(plan::F64, {7}, {0, 1, 2, 3, 4, 5, 6});
  Tensor z = make(plan::F64, {3});
  ASSERT_EQ(run(b.c, {&x}, {&z}), "");
  EXPECT_EQ(reals(z), V({1, 3, 5}));
}

TEST(GenericKernelTest, ReshapeThroughGroup) {
  auto b = ComputeBuilder("reshape").iter("d0", 2).iter("d1", 3);
  b.in({group({0, 1})}).out({dim(0), dim(1)});
  Tensor x = make(plan::F32, {6}, {1, 2, 3, 4, 5, 6});
  Tensor z = make(plan::F32, {2, 3});
  ASSERT_EQ(run(b.c, {&x}, {&z}), "");
  EXPECT_EQ(reals(z), V({1, 2, 3, 4, 5, 6}));
}

TEST(GenericKernelTest, Expand) {
  auto b = ComputeBuilder("expand").iter("i", 3).iter("j", 2);
  b.in({dim(0), bcast()}).out({dim(0), dim(1)});
  Tensor x = make(plan::F32, {3, 1}, {1, 2, 3});
  Tensor z = make(plan::F32, {3, 2});
  ASSERT_EQ(run(b.c, {&x}, {&z}), "");
  EXPECT_EQ(reals(z), V({1, 1, 2, 2, 3, 3}));
}

TEST(GenericKernelTest, PadAndTile) {
  auto pad = ComputeBuilder("pad").iter("i", 5);
  pad.in({dim(0, -1)}).out({dim(0)}).attrF("value", 9);
  Tensor x = make(plan::F32, {3}, {1, 2, 3});
  Tensor p = make(plan::F32, {5});
  ASSERT_EQ(run(pad.c, {&x}, {&p}), "");
  EXPECT_EQ(reals(p), V({9, 1, 2, 3, 9}));

  auto tile = ComputeBuilder("tile").iter("r", 2).iter("i", 3);
  tile.in({dim(1)}).out({group({0, 1})});
  Tensor t = make(plan::F32, {6});
  ASSERT_EQ(run(tile.c, {&x}, {&t}), "");
  EXPECT_EQ(reals(t), V({1, 2, 3, 1, 2, 3}));
}

TEST(GenericKernelTest, ConcatSplitAndPadOverBoxes) {
  // A device's block of a concat: output columns [2, 7) of [a | b | c]
  // (widths 3, 2, 3), so a's box is columns [2, 3), b's [3, 5), c's [5, 7).
  auto cat = ComputeBuilder("concat").iter("i", 2).iter("j", 5);
  cat.in({dim(0), dim(1, 2)}).in({dim(0), dim(1, -1)}).in({dim(0), dim(1, -3)});
  cat.out({dim(0), dim(1)});
  Tensor a = make(plan::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = make(plan::F32, {2, 2}, {7, 8, 9, 10});
  Tensor c = make(plan::F32, {2, 3}, {11, 12, 13, 14, 15, 16});
  Tensor z = make(plan::F32, {2, 5});
  ASSERT_EQ(run(cat.c, {&a, &b, &c}, {&z}), "");
  EXPECT_EQ(reals(z), V({3, 7, 8, 11, 12, 6, 9, 10, 14, 15}));
  // Overlapping inputs: the first whose map reaches inside wins.
  auto over = ComputeBuilder("concat").iter("j", 4);
  over.in({dim(0)}).in({dim(0, -1)}).out({dim(0)});
  Tensor x = make(plan::F32, {3}, {1, 2, 3}),
         y = make(plan::F32, {3}, {4, 5, 6});
  Tensor o = make(plan::F32, {4});
  ASSERT_EQ(run(over.c, {&x, &y}, {&o}), "");
  EXPECT_EQ(reals(o), V({1, 2, 3, 6}));
  // A split whose second output reads a reversed range.
  auto split = ComputeBuilder("split").iter("j", 5);
  split.in({dim(0)}).out({dim(0)}).out({dim(0, 4, -1)});
  Tensor in = make(plan::I64, {5}, {1, 2, 3, 4, 5});
  Tensor s0 = make(plan::I64, {2}), s1 = make(plan::I64, {2});
  ASSERT_EQ(run(split.c, {&in}, {&s0, &s1}), "");
  EXPECT_EQ(reals(s0), V({1, 2}));
  EXPECT_EQ(reals(s1), V({5, 4}));
  // A 2-D pad on both sides of both dims.
  auto pad = ComputeBuilder("pad").iter("i", 4).iter("j", 4);
  pad.in({dim(0, -1), dim(1, -2)}).out({dim(0), dim(1)}).attrF("value", -1);
  Tensor m = make(plan::F32, {2, 2}, {1, 2, 3, 4});
  Tensor padded = make(plan::F32, {4, 4});
  ASSERT_EQ(run(pad.c, {&m}, {&padded}), "");
  EXPECT_EQ(reals(padded),
            V({-1, -1, -1, -1, -1, -1, 1, 2, -1, -1, 3, 4, -1, -1, -1, -1}));
}

TEST(GenericKernelTest, GatherWrapsNegativeIndices) {
  // out[i, d1] = data[indices[i], d1]; as imported: [indices..., v, inner].
  auto b = ComputeBuilder("gather")
               .iter("i0", 3)
               .iter("v", 4, plan::IterDim::RED)
               .iter("d1", 2);
  b.in({lookup(1), dim(2)}).in({dim(0)}).out({dim(0), dim(2)});
  Tensor data = make(plan::F32, {4, 2}, {0, 1, 10, 11, 20, 21, 30, 31});
  Tensor idx = make(plan::I64, {3}, {2, -1, 0});
  Tensor z = make(plan::F32, {3, 2});
  ASSERT_EQ(run(b.c, {&data, &idx}, {&z}), "");
  EXPECT_EQ(reals(z), V({20, 21, 30, 31, 0, 1}));
}

/// A reduction of a 2x3 input over its last dim.
ComputeBuilder reduceRows(const char *kind, bool keepDims) {
  auto b = ComputeBuilder(kind).iter("i", 2).iter("j", 3, plan::IterDim::RED);
  b.in({dim(0), dim(1)});
  if (keepDims)
    b.out({dim(0), bcast()});
  else
    b.out({dim(0)});
  return b;
}

TEST(GenericKernelTest, ReduceMeanKeepDims) {
  auto b = reduceRows("reduce_mean", true);
  Tensor x = make(plan::F32, {2, 3}, {1, 2, 3, 4, 5, 9});
  Tensor z = make(plan::F32, {2, 1});
  ASSERT_EQ(run(b.c, {&x}, {&z}), "");
  EXPECT_EQ(reals(z), V({2, 6}));
}

TEST(GenericKernelTest, ReduceMax) {
  auto b = reduceRows("reduce_max", false);
  Tensor x = make(plan::F32, {2, 3}, {1, -2, 3, -4, -5, -9});
  Tensor z = make(plan::F32, {2});
  ASSERT_EQ(run(b.c, {&x}, {&z}), "");
  EXPECT_EQ(reals(z), V({3, -4}));
}

TEST(GenericKernelTest, ArgMax) {
  auto b = reduceRows("arg_max", true);
  Tensor x = make(plan::F32, {2, 3}, {1, 7, 7, 4, 0, 2});
  Tensor z = make(plan::I64, {2, 1});
  ASSERT_EQ(run(b.c, {&x}, {&z}), "");
  EXPECT_EQ(reals(z), V({1, 0}));
  b.attr("select_last_index", 1);
  ASSERT_EQ(run(b.c, {&x}, {&z}), "");
  EXPECT_EQ(reals(z), V({2, 0}));
}

TEST(GenericKernelTest, Trilu) {
  auto b = ComputeBuilder("trilu").iter("r", 3).iter("c", 3);
  b.in({dim(0), dim(1)}).out({dim(0), dim(1)}).attr("upper", 1).attr("k", 0);
  Tensor x = make(plan::F32, {3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor z = make(plan::F32, {3, 3});
  ASSERT_EQ(run(b.c, {&x}, {&z}), "");
  EXPECT_EQ(reals(z), V({1, 2, 3, 0, 5, 6, 0, 0, 9}));

  auto lower = ComputeBuilder("trilu").iter("r", 3).iter("c", 3);
  lower.in({dim(0), dim(1)}).out({dim(0), dim(1)});
  lower.attr("upper", 0).attr("k", -1);
  ASSERT_EQ(run(lower.c, {&x}, {&z}), "");
  EXPECT_EQ(reals(z), V({0, 0, 0, 4, 0, 0, 7, 8, 0}));
}

TEST(GenericKernelTest, HalfAndBfloat16Storage) {
  Tensor h = make(plan::F16, {4}, {1.5, 65504, 1e6, 5.960464477539063e-08});
  EXPECT_EQ(reals(h), V({1.5, 65504, INFINITY, 5.960464477539063e-08}));
  // bf16 keeps 8 significant bits; ties round to even.
  Tensor b = make(plan::BF16, {2}, {3.140625, 1.00390625});
  EXPECT_EQ(reals(b), V({3.140625, 1.0}));
}

TEST(GenericKernelTest, GeluExactAndTanh) {
  Tensor x = make(plan::F32, {1}, {1});
  Tensor z = make(plan::F32, {1});
  auto b = ComputeBuilder("gelu").iter("i", 1);
  b.in({dim(0)}).out({dim(0)});
  ASSERT_EQ(run(b.c, {&x}, {&z}), "");
  EXPECT_NEAR(z.real(0), 0.8413447460685429, 1e-7);
  plan::Attr *a = b.c.add_attrs();
  a->set_name("approximate");
  a->set_s("tanh");
  ASSERT_EQ(run(b.c, {&x}, {&z}), "");
  EXPECT_NEAR(z.real(0), 0.8411919906082768, 1e-7);
}

TEST(GenericKernelTest, MaskedGatherOnSplitTable) {
  // This device holds rows [2, 4) of a 4-row table; other rows read 0.
  auto b = ComputeBuilder("gather")
               .iter("i0", 3)
               .iter("v", 2, plan::IterDim::RED)
               .iter("d1", 2);
  b.c.mutable_iters(1)->set_global_offset(2);
  b.c.mutable_iters(1)->set_global_extent(4);
  b.in({lookup(1), dim(2)}).in({dim(0)}).out({dim(0), dim(2)});
  Tensor data = make(plan::F32, {2, 2}, {20, 21, 30, 31});
  Tensor idx = make(plan::I32, {3}, {3, 0, 2});
  Tensor z = make(plan::F32, {3, 2});
  ASSERT_EQ(run(b.c, {&data, &idx}, {&z}), "");
  EXPECT_EQ(reals(z), V({30, 31, 0, 0, 20, 21}));
  // An index no device holds is bad input, named with the whole table.
  Tensor bad = make(plan::I32, {3}, {3, 4, 2});
  EXPECT_EQ(run(b.c, {&data, &bad}, {&z}),
            "compute 'n0' (gather): index 4 is out of range for a dim of 4 "
            "(valid: [-4, 4))");
}

TEST(GenericKernelTest, ScatterAddOnSplitTable) {
  // A gather's gradient: rows [2, 4) of a 4-row table on this device; each
  // point adds its value to the row its index names, when held here.
  auto b = ComputeBuilder("scatter_add")
               .iter("i0", 4, plan::IterDim::RED)
               .iter("v", 2)
               .iter("d1", 2);
  b.c.mutable_iters(1)->set_global_offset(2);
  b.c.mutable_iters(1)->set_global_extent(4);
  b.in({dim(0), dim(2)}).in({dim(0)}).out({lookup(1), dim(2)});
  Tensor values = make(plan::F32, {4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  Tensor idx = make(plan::I64, {4}, {3, 0, 3, -2});
  Tensor z = make(plan::F32, {2, 2}, {9, 9, 9, 9});
  ASSERT_EQ(run(b.c, {&values, &idx}, {&z}), "");
  // Row 2 (local 0) gets point 3 (-2 counts from the end: row 2); row 3
  // (local 1) points 0 and 2; point 1's row 0 is another device's.
  EXPECT_EQ(reals(z), V({7, 8, 6, 8}));
  Tensor bad = make(plan::I64, {4}, {3, 0, 4, 1});
  EXPECT_EQ(run(b.c, {&values, &bad}, {&z}),
            "compute 'n0' (scatter_add): index 4 is out of range for a dim "
            "of 4 (valid: [-4, 4))");
}

TEST(GenericKernelTest, IntegerAndLogSumExpReductions) {
  Tensor x = make(plan::I32, {2, 3}, {1, 2, 3, -4, 5, 7});
  Tensor z = make(plan::I32, {2});
  ASSERT_EQ(run(reduceRows("reduce_sum", false).c, {&x}, {&z}), "");
  EXPECT_EQ(reals(z), V({6, 8}));
  ASSERT_EQ(run(reduceRows("reduce_prod", false).c, {&x}, {&z}), "");
  EXPECT_EQ(reals(z), V({6, -140}));
  ASSERT_EQ(run(reduceRows("arg_min", false).c, {&x}, {&z}), "");
  EXPECT_EQ(reals(z), V({0, 0}));

  // log(e^1000 + e^1000 + e^999) without overflow.
  Tensor big = make(plan::F64, {2, 3}, {1000, 1000, 999, 0, 0, 0});
  Tensor lse = make(plan::F64, {2});
  ASSERT_EQ(run(reduceRows("reduce_log_sum_exp", false).c, {&big}, {&lse}), "");
  EXPECT_NEAR(lse.real(0), 1000 + std::log(2 + std::exp(-1.0)), 1e-9);
  EXPECT_NEAR(lse.real(1), std::log(3.0), 1e-12);
}

TEST(GenericKernelTest, LargeAddAndTransposeAcrossTasks) {
  // Big enough for TBB tasks to split rows in the middle.
  const int64_t rows = 3, cols = 50001;
  auto add = ComputeBuilder("add").iter("i", rows).iter("j", cols);
  add.in({dim(0), dim(1)}).in({dim(0), bcast()}).out({dim(0), dim(1)});
  Tensor x = make(plan::F32, {rows, cols});
  for (int64_t i = 0; i < x.numel(); ++i)
    x.setReal(i, double(i % 1000));
  Tensor y = make(plan::F32, {rows, 1}, {0.5, 1.5, 2.5});
  Tensor z = make(plan::F32, {rows, cols});
  auto t = ComputeBuilder("transpose").iter("j", cols).iter("i", rows);
  t.in({dim(1), dim(0)}).out({dim(0), dim(1)});
  Tensor zt = make(plan::F32, {cols, rows});
  tbb::task_arena arena(2);
  arena.execute([&] {
    EXPECT_EQ(run(add.c, {&x, &y}, {&z}), "");
    EXPECT_EQ(run(t.c, {&x}, {&zt}), "");
  });
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      ASSERT_EQ(z.real(r * cols + c), x.real(r * cols + c) + y.real(r));
      ASSERT_EQ(zt.real(c * rows + r), x.real(r * cols + c));
    }
}

TEST(GenericKernelTest, TransposesInTilesEqualElementByElement) {
  // Both orientations (the output or the input contiguous along the last
  // dim), a batch dim around them, sides that are no multiple of the tile,
  // and 8-, 4- and 2-byte elements (the tiled path) besides 1-byte ones.
  struct Case {
    plan::DType dt;
    int64_t batch, rows, cols;
    bool outLast; // the output contiguous along the space's last dim
  };
  for (Case k :
       {Case{plan::F32, 1, 8192, 256, false},
        Case{plan::F32, 1, 8192, 256, true}, Case{plan::F32, 3, 70, 33, false},
        Case{plan::I64, 2, 33, 97, true}, Case{plan::F16, 2, 64, 40, false},
        Case{plan::I1, 1, 40, 40, true}}) {
    SCOPED_TRACE(testing::Message() << k.rows << "x" << k.cols);
    auto t = ComputeBuilder("transpose").iter("b", k.batch);
    t.iter("r", k.rows).iter("c", k.cols);
    // x [b, r, c] read plainly, written [b, c, r]; or x [b, c, r] read
    // transposed, written [b, r, c].
    if (k.outLast)
      t.in({dim(0), dim(2), dim(1)}).out({dim(0), dim(1), dim(2)});
    else
      t.in({dim(0), dim(1), dim(2)}).out({dim(0), dim(2), dim(1)});
    std::vector<int64_t> xs =
        k.outLast ? std::vector<int64_t>{k.batch, k.cols, k.rows}
                  : std::vector<int64_t>{k.batch, k.rows, k.cols};
    std::vector<int64_t> ys = {xs[0], xs[2], xs[1]};
    Tensor x = make(k.dt, xs), y = make(k.dt, ys);
    for (int64_t i = 0; i < x.numel(); ++i)
      x.setReal(i, double(i % (k.dt == plan::I1 ? 2 : 1000)));
    tbb::task_arena arena(2);
    arena.execute([&] { EXPECT_EQ(run(t.c, {&x}, {&y}), ""); });
    for (int64_t b = 0; b < xs[0]; ++b)
      for (int64_t i = 0; i < xs[1]; ++i)
        for (int64_t j = 0; j < xs[2]; ++j)
          ASSERT_EQ(y.real((b * ys[1] + j) * ys[2] + i),
                    x.real((b * xs[1] + i) * xs[2] + j));
  }
}

TEST(GenericKernelTest, Errors) {
  auto mm = ComputeBuilder("matmul").iter("m", 2);
  mm.in({dim(0)}).out({dim(0)});
  Tensor x = make(plan::F32, {2}), z = make(plan::F32, {2});
  EXPECT_EQ(run(mm.c, {&x}, {&z}),
            "compute 'n0' (matmul): no generic cpu kernel for kind 'matmul'");

  auto star = ComputeBuilder("reshape").iter("m", 2);
  star.in({full()}).out({dim(0)});
  EXPECT_EQ(run(star.c, {&x}, {&z}),
            "compute 'n0' (reshape): input 0 has a full access '*', which "
            "the generic kernel cannot walk");

  auto add = ComputeBuilder("add").iter("m", 2);
  add.in({dim(0)}).in({dim(0)}).out({dim(0)});
  EXPECT_EQ(run(add.c, {&x}, {&z}),
            "compute 'n0' (add): has 2 inputs and 1 outputs, was given 1 "
            "and 1");
}

TEST(GenericKernelTest, ReduceSumIsDeterministicAcrossThreadCounts) {
  const int64_t rows = 8, cols = 1 << 17;
  auto b = ComputeBuilder("reduce_sum")
               .iter("i", rows)
               .iter("j", cols, plan::IterDim::RED);
  b.in({dim(0), dim(1)}).out({dim(0)});
  Tensor x = make(plan::F32, {rows, cols});
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (int64_t i = 0; i < x.numel(); ++i)
    x.setReal(i, dist(gen));
  auto sumWith = [&](int threads) {
    Tensor z = make(plan::F32, {rows});
    tbb::task_arena arena(threads);
    arena.execute([&] { EXPECT_EQ(run(b.c, {&x}, {&z}), ""); });
    return z.data;
  };
  runtime::Bytes one = sumWith(1), two = sumWith(2);
  EXPECT_EQ(one, two);
  // And the same order as a plain loop: row by row, left to right.
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t c = 0; c < cols; ++c)
      s += x.real(r * cols + c);
    float got;
    std::memcpy(&got, one.data() + r * 4, 4);
    EXPECT_EQ(got, float(s));
  }
}

TEST(GenericKernelTest, ColumnSumsAddInTheInnerPointsOrder) {
  // A bias gradient: [3, 40, 300] summed over the first two dims, which the
  // kernel reads row by row for runs of columns; each column's sum is still
  // the inner points in order (b, then s), bit for bit.
  auto b = ComputeBuilder("reduce_sum")
               .iter("n", 300)
               .iter("b", 3, plan::IterDim::RED)
               .iter("s", 40, plan::IterDim::RED);
  b.in({dim(1), dim(2), dim(0)}).out({dim(0)});
  Tensor x = make(plan::F32, {3, 40, 300});
  std::mt19937 gen(2);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (int64_t i = 0; i < x.numel(); ++i)
    x.setReal(i, dist(gen));
  Tensor z = make(plan::F32, {300});
  ASSERT_EQ(run(b.c, {&x}, {&z}), "");
  for (int64_t c = 0; c < 300; ++c) {
    double s = 0;
    for (int64_t r = 0; r < 3 * 40; ++r)
      s += x.real(r * 300 + c);
    EXPECT_EQ(float(z.real(c)), float(s)) << "column " << c;
  }
}

} // namespace

// random_uniform's hash, which the CUDA kernels compute too, is XXH3-64 of
// the four words, as LLVM's.
TEST(RandomMathTest, IsXxh3OfTheFourWords) {
  std::mt19937_64 rng(11);
  for (int i = 0; i < 1000; ++i) {
    uint64_t w[4] = {rng(), rng(), rng(), rng()};
    if (i == 0)
      w[0] = w[1] = w[2] = w[3] = 0;
    uint64_t want = llvm::xxh3_64bits(llvm::ArrayRef<uint8_t>(
        reinterpret_cast<const uint8_t *>(w), sizeof w));
    ASSERT_EQ(runtime::xxh3Of4Words(w), want) << "at " << i;
  }
}

TEST(FlatSpaceTest, DividersDivideEveryNumberBelow2To31) {
  using pax::runtime::flat::divide;
  using pax::runtime::flat::makeDivider;
  std::vector<uint32_t> divisors = {
      1,        2,    3,    5,     7,     10,    64,       112,
      768,      1000, 3072, 50257, 65535, 65536, 1u << 20, (1u << 31) - 1,
      123456789};
  std::vector<uint32_t> numbers = {
      0,          1,    2,   3, 111, 112, 113, (1u << 31) - 1, (1u << 31) - 2,
      (1u << 30), 4095, 4096};
  uint64_t x = 88172645463325252ull; // xorshift
  for (int i = 0; i < 20000; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    numbers.push_back(uint32_t(x & 0x7fffffffu));
  }
  for (uint32_t d : divisors) {
    auto v = makeDivider(d);
    for (uint32_t n : numbers)
      ASSERT_EQ(divide(v, n), n / d) << n << " / " << d;
  }
}

TEST(FlatSpaceTest, SetOuterWithDividersIsRowMajor) {
  pax::runtime::flat::Space s;
  s.rank = 3;
  s.extents[0] = 7, s.extents[1] = 5, s.extents[2] = 3;
  s.outerCount = 3;
  s.outer[0] = 0, s.outer[1] = 1, s.outer[2] = 2;
  s.outerPoints = 105;
  pax::runtime::flat::setDividers(s);
  ASSERT_TRUE(s.outerDividers);
  int64_t point[pax::runtime::flat::kMaxDims] = {};
  for (int64_t f = 0; f < 105; ++f) {
    pax::runtime::flat::setOuter(s, f, point);
    EXPECT_EQ(point[0] * 15 + point[1] * 3 + point[2], f);
    EXPECT_LT(point[1], 5);
    EXPECT_LT(point[2], 3);
  }
  // 2^31 points or more: the 64-bit walk.
  s.extents[0] = int64_t(1) << 31;
  s.outerPoints = int64_t(15) << 31;
  pax::runtime::flat::setDividers(s);
  EXPECT_FALSE(s.outerDividers);
}
