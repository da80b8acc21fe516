//===- ShapeInferenceTest.cpp - Result shapes of imported ONNX ops --------===//
#include "OnnxText.h"

#include "ir/Module.h"

#include <gtest/gtest.h>

#include <limits>

using namespace pax;
using namespace pax::test;

namespace {

using Shape = std::vector<int64_t>;

/// Imports \p model; the shape of output \p out, or {-2} after a failure.
Shape shapeOf(const OnnxText &model, const std::string &out = "y") {
  auto r = importText(model);
  if (!r) {
    ADD_FAILURE() << llvm::toString(r.takeError());
    return {-2};
  }
  return outputShape(*r->module, out);
}

/// The error of importing \p model, checked to name node \p node.
std::string errorOf(const OnnxText &model, const std::string &node) {
  auto r = importText(model);
  std::string msg = errorText(r);
  EXPECT_NE(msg.find("node '" + node + "'"), std::string::npos) << msg;
  return msg;
}

/// One node `y = op(inputs...)` over float graph inputs of the given shapes.
OnnxText oneNode(const std::string &op, std::vector<Shape> ins,
                 const std::string &attrs = "", int opset = 17) {
  OnnxText t(opset);
  std::vector<std::string> names;
  for (size_t i = 0; i < ins.size(); ++i) {
    names.push_back("in" + std::to_string(i));
    t.input(names.back(), ins[i]);
  }
  return t.node(op, names, {"y"}, attrs, "n").output("y");
}

/// `y = op(x, c)` with \p c an int64 initializer: shapes, axes, sizes.
OnnxText withInts(const std::string &op, Shape x, Shape cdims, Shape c,
                  const std::string &attrs = "", int opset = 17) {
  return OnnxText(opset)
      .input("x", x)
      .ints("c", cdims, c)
      .node(op, {"x", "c"}, {"y"}, attrs, "n")
      .output("y");
}

/// `y = Conv(x, w)` with float X and W graph inputs.
OnnxText conv(Shape x, Shape w, const std::string &attrs) {
  return oneNode("Conv", {x, w}, attrs);
}

TEST(ConvShapeTest, PaddingStridesDilation) {
  EXPECT_EQ(shapeOf(conv({1, 3, 32, 32}, {8, 3, 3, 3}, "")),
            (Shape{1, 8, 30, 30}));
  EXPECT_EQ(shapeOf(conv({1, 3, 32, 32}, {8, 3, 3, 3},
                         intsAttr("pads", {1, 1, 1, 1}) +
                             intsAttr("strides", {2, 2}))),
            (Shape{1, 8, 16, 16}));
  EXPECT_EQ(shapeOf(conv({1, 3, 32, 32}, {8, 3, 3, 3},
                         intsAttr("dilations", {2, 2}))),
            (Shape{1, 8, 28, 28}));
  // Begin pads (0, 1), end pads (2, 3).
  EXPECT_EQ(shapeOf(conv({1, 3, 32, 32}, {8, 3, 3, 3},
                         intsAttr("pads", {0, 1, 2, 3}))),
            (Shape{1, 8, 32, 34}));
  EXPECT_EQ(shapeOf(conv({2, 3, 10}, {4, 3, 3}, "")), (Shape{2, 4, 8}));
  EXPECT_EQ(shapeOf(conv({1, 4, 8, 8}, {8, 2, 3, 3}, intAttr("group", 2))),
            (Shape{1, 8, 6, 6}));
}

TEST(ConvShapeTest, AutoPad) {
  std::string s2 = intsAttr("strides", {2, 2});
  // 32 by a 3-window with stride 2: 16 outputs need 1 pad, at the end for
  // SAME_UPPER and at the start for SAME_LOWER.
  const std::pair<const char *, int> modes[] = {{"SAME_UPPER", 0},
                                                {"SAME_LOWER", 1}};
  for (auto [mode, begin] : modes) {
    SCOPED_TRACE(mode);
    auto r = importText(
        conv({1, 3, 32, 31}, {8, 3, 3, 3}, s2 + strAttr("auto_pad", mode)));
    ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
    EXPECT_EQ(outputShape(*r->module, "y"), (Shape{1, 8, 16, 16}));
    const AccessMap &xm = r->module->main.ops[0]->operands[0].map;
    EXPECT_EQ(xm[2].offset, -begin);
    EXPECT_EQ(xm[2].stride, 2);
  }
  EXPECT_EQ(shapeOf(conv({1, 3, 32, 31}, {8, 3, 3, 3},
                         s2 + strAttr("auto_pad", "VALID"))),
            (Shape{1, 8, 15, 15}));
}

TEST(ConvShapeTest, Errors) {
  std::string msg = errorOf(oneNode("Conv", {{1, 4, 8, 8}, {8, 3, 3, 3}}), "n");
  EXPECT_NE(msg.find("(Conv): input has 4 channels but W expects 3"),
            std::string::npos)
      << msg;
  msg = errorOf(oneNode("Conv", {{1, 3, 2, 2}, {8, 3, 3, 3}}), "n");
  EXPECT_NE(msg.find("the window (3) is larger than the padded input dim 2 "
                     "(2)"),
            std::string::npos)
      << msg;
  msg = errorOf(conv({1, 3, 8, 8}, {8, 3, 3, 3}, strAttr("auto_pad", "SAME")),
                "n");
  EXPECT_NE(msg.find("unknown auto_pad 'SAME'"), std::string::npos) << msg;
}

TEST(PoolShapeTest, CeilMode) {
  auto pool = [](Shape x, std::string attrs) {
    return oneNode("MaxPool", {x},
                   intsAttr("kernel_shape", {2, 2}) +
                       intsAttr("strides", {2, 2}) + attrs);
  };
  EXPECT_EQ(shapeOf(pool({1, 1, 5, 5}, "")), (Shape{1, 1, 2, 2}));
  EXPECT_EQ(shapeOf(pool({1, 1, 5, 5}, intAttr("ceil_mode", 1))),
            (Shape{1, 1, 3, 3}));
  // With a pad of 1 a fourth window would start inside the end padding:
  // ceil mode drops it.
  EXPECT_EQ(shapeOf(pool({1, 1, 5, 5}, intAttr("ceil_mode", 1) +
                                           intsAttr("pads", {1, 1, 1, 1}))),
            (Shape{1, 1, 3, 3}));
  std::string msg = errorOf(oneNode("MaxPool", {{1, 1, 5, 5}}), "n");
  EXPECT_NE(msg.find("kernel_shape needs 2 values, has 0"), std::string::npos);
}

TEST(MatMulShapeTest, Broadcasting) {
  EXPECT_EQ(shapeOf(oneNode("MatMul", {{2, 3, 4, 5}, {5, 6}})),
            (Shape{2, 3, 4, 6}));
  EXPECT_EQ(shapeOf(oneNode("MatMul", {{3, 1, 4, 5}, {2, 5, 7}})),
            (Shape{3, 2, 4, 7}));
  EXPECT_EQ(shapeOf(oneNode("MatMul", {{5}, {5, 6}})), (Shape{6}));
  EXPECT_EQ(shapeOf(oneNode("MatMul", {{2, 4, 5}, {5}})), (Shape{2, 4}));
  EXPECT_EQ(shapeOf(oneNode("MatMul", {{5}, {5}})), (Shape{}));
}

TEST(MatMulShapeTest, Errors) {
  std::string msg = errorOf(oneNode("MatMul", {{2, 3}, {4, 5}}), "n");
  EXPECT_NE(msg.find("inner dims do not match: 2x3 by 4x5 (3 vs 4)"),
            std::string::npos)
      << msg;
  msg = errorOf(oneNode("MatMul", {{2, 3, 4}, {5, 4, 6}}), "n");
  EXPECT_NE(msg.find("shapes 2 and 5 do not broadcast (dim 0: 2 vs 5)"),
            std::string::npos)
      << msg;
}

TEST(GemmShapeTest, Transposes) {
  EXPECT_EQ(shapeOf(oneNode("Gemm", {{4, 3}, {3, 5}})), (Shape{4, 5}));
  EXPECT_EQ(shapeOf(oneNode("Gemm", {{3, 4}, {5, 3}, {5}},
                            intAttr("transA", 1) + intAttr("transB", 1))),
            (Shape{4, 5}));
  std::string msg =
      errorOf(oneNode("Gemm", {{4, 3}, {5, 4}}, intAttr("transB", 1)), "n");
  EXPECT_NE(msg.find("inner dims do not match: 4x3 by 5x4 (transposed) (3 vs "
                     "4)"),
            std::string::npos)
      << msg;
}

TEST(ReshapeShapeTest, ZeroAndMinusOne) {
  EXPECT_EQ(shapeOf(withInts("Reshape", {2, 3, 4}, {2}, {0, -1})),
            (Shape{2, 12}));
  EXPECT_EQ(shapeOf(withInts("Reshape", {2, 3, 4}, {2}, {-1, 4})),
            (Shape{6, 4}));
  EXPECT_EQ(shapeOf(withInts("Reshape", {2, 3, 4}, {4}, {0, 0, 2, 2})),
            (Shape{2, 3, 2, 2}));
  std::string msg = errorOf(withInts("Reshape", {2, 3, 4}, {2}, {5, -1}), "n");
  EXPECT_NE(msg.find("cannot reshape 2x3x4 (24 elements) to a shape with 5 "
                     "elements per -1 slot"),
            std::string::npos)
      << msg;
  msg = errorOf(withInts("Reshape", {2, 3, 4}, {2}, {5, 5}), "n");
  EXPECT_NE(msg.find("cannot reshape 2x3x4 (24 elements) to 5x5 (25 "
                     "elements)"),
            std::string::npos)
      << msg;
}

TEST(ReshapeShapeTest, FlattenSqueezeUnsqueeze) {
  auto flatten = [](int64_t axis) {
    return oneNode("Flatten", {{2, 3, 4, 5}}, intAttr("axis", axis));
  };
  EXPECT_EQ(shapeOf(flatten(2)), (Shape{6, 20}));
  EXPECT_EQ(shapeOf(flatten(0)), (Shape{1, 120}));
  EXPECT_EQ(shapeOf(flatten(-1)), (Shape{24, 5}));
  EXPECT_EQ(shapeOf(oneNode("Flatten", {{2, 3, 4, 5}})), (Shape{2, 60}));

  EXPECT_EQ(shapeOf(withInts("Squeeze", {1, 3, 1, 4}, {1}, {0})),
            (Shape{3, 1, 4}));
  EXPECT_EQ(shapeOf(withInts("Squeeze", {1, 3, 1, 4}, {1}, {-2})),
            (Shape{1, 3, 4}));
  EXPECT_EQ(shapeOf(oneNode("Squeeze", {{1, 3, 1, 4}})), (Shape{3, 4}));
  EXPECT_EQ(
      shapeOf(oneNode("Squeeze", {{1, 3, 1, 4}}, intsAttr("axes", {2}), 11)),
      (Shape{1, 3, 4}));
  EXPECT_EQ(shapeOf(withInts("Unsqueeze", {3, 4}, {2}, {0, -1})),
            (Shape{1, 3, 4, 1}));

  std::string msg = errorOf(withInts("Squeeze", {1, 3, 1, 4}, {1}, {1}), "n");
  EXPECT_NE(msg.find("cannot squeeze dim 1 of size 3"), std::string::npos);
  msg = errorOf(withInts("Unsqueeze", {3, 4}, {2}, {1, 1}), "n");
  EXPECT_NE(msg.find("axis 1 is given twice"), std::string::npos) << msg;
}

TEST(LayoutShapeTest, Concat) {
  EXPECT_EQ(shapeOf(oneNode("Concat", {{2, 3}, {2, 5}}, intAttr("axis", 1))),
            (Shape{2, 8}));
  EXPECT_EQ(shapeOf(oneNode("Concat", {{2, 3}, {2, 5}}, intAttr("axis", -1))),
            (Shape{2, 8}));
  auto r = importText(
      oneNode("Concat", {{1, 3}, {2, 3}, {4, 3}}, intAttr("axis", 0)));
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  EXPECT_EQ(outputShape(*r->module, "y"), (Shape{7, 3}));
  const Op &op = *r->module->main.ops[0];
  ASSERT_EQ(op.operands.size(), 3u);
  EXPECT_EQ(op.operands[1].map[0], AccessExpr::shifted(0, 1, -1));
  EXPECT_EQ(op.operands[2].map[0], AccessExpr::shifted(0, 1, -3));

  std::string msg =
      errorOf(oneNode("Concat", {{2, 3}, {3, 5}}, intAttr("axis", 1)), "n");
  EXPECT_NE(msg.find("input 1 has type tensor<3x5xf32>, which does not match "
                     "input 0 (tensor<2x3xf32>) outside axis 1"),
            std::string::npos)
      << msg;
}

TEST(LayoutShapeTest, Split) {
  auto split = [](Shape x, std::string attrs, int outs, int opset,
                  std::vector<int64_t> sizes = {}) {
    OnnxText t(opset);
    t.input("x", x);
    std::vector<std::string> ins = {"x"}, names;
    if (!sizes.empty())
      t.ints("s", {int64_t(sizes.size())}, sizes), ins.push_back("s");
    for (int i = 0; i < outs; ++i)
      names.push_back("y" + std::to_string(i));
    t.node("Split", ins, names, attrs, "n");
    for (auto &n : names)
      t.output(n);
    return t;
  };
  auto equal = split({6, 4}, "", 3, 13);
  for (const char *y : {"y0", "y1", "y2"})
    EXPECT_EQ(shapeOf(equal, y), (Shape{2, 4}));
  auto explicitSizes = split({2, 6}, intAttr("axis", 1), 2, 13, {1, 5});
  EXPECT_EQ(shapeOf(explicitSizes, "y0"), (Shape{2, 1}));
  EXPECT_EQ(shapeOf(explicitSizes, "y1"), (Shape{2, 5}));
  auto legacy =
      split({2, 6}, intAttr("axis", -1) + intsAttr("split", {4, 2}), 2, 11);
  EXPECT_EQ(shapeOf(legacy, "y0"), (Shape{2, 4}));
  EXPECT_EQ(shapeOf(legacy, "y1"), (Shape{2, 2}));
  // Opset 18: num_outputs with a shorter last chunk.
  auto uneven = split({7}, intAttr("num_outputs", 3), 3, 18);
  EXPECT_EQ(shapeOf(uneven, "y0"), (Shape{3}));
  EXPECT_EQ(shapeOf(uneven, "y2"), (Shape{1}));

  std::string msg =
      errorOf(split({2, 6}, intAttr("axis", 1), 2, 13, {2, 3}), "n");
  EXPECT_NE(msg.find("split sizes add up to 5 but axis 1 has 6"),
            std::string::npos)
      << msg;
}

/// `y = Slice(x[10x8], starts, ends, axes, steps)`; empty lists are omitted.
OnnxText slice(Shape starts, Shape ends, Shape axes = {}, Shape steps = {}) {
  OnnxText t(13);
  t.input("x", {10, 8});
  std::vector<std::string> ins = {"x", "st", "en"};
  t.ints("st", {int64_t(starts.size())}, starts);
  t.ints("en", {int64_t(ends.size())}, ends);
  if (!axes.empty() || !steps.empty())
    t.ints("ax", {int64_t(axes.size())}, axes), ins.push_back("ax");
  if (!steps.empty())
    t.ints("sp", {int64_t(steps.size())}, steps), ins.push_back("sp");
  return t.node("Slice", ins, {"y"}, "", "n").output("y");
}

TEST(LayoutShapeTest, Slice) {
  auto r = importText(slice({-3}, {100}, {0}));
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  EXPECT_EQ(outputShape(*r->module, "y"), (Shape{3, 8}));
  EXPECT_EQ(r->module->main.ops[0]->operands[0].map[0],
            AccessExpr::shifted(0, 1, 7));

  r = importText(slice({1}, {-1}, {-1}, {2}));
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  EXPECT_EQ(outputShape(*r->module, "y"), (Shape{10, 3}));
  EXPECT_EQ(r->module->main.ops[0]->operands[0].map[1],
            AccessExpr::shifted(1, 2, 1));

  EXPECT_EQ(shapeOf(slice({0, 2}, {5, -2})), (Shape{5, 4}));
  EXPECT_EQ(shapeOf(slice({-100}, {3}, {1})), (Shape{10, 3}));
  EXPECT_EQ(shapeOf(oneNode("Slice", {{10, 8}},
                            intsAttr("starts", {2}) + intsAttr("ends", {-2}) +
                                intsAttr("axes", {1}),
                            9)),
            (Shape{10, 4}));

  // Negative steps walk backwards from a start clamped to [0, dim - 1]
  // towards an end clamped to [-1, dim - 1] (INT64_MIN: past the front).
  r = importText(slice({5}, {0}, {0}, {-1}));
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  EXPECT_EQ(outputShape(*r->module, "y"), (Shape{5, 8}));
  EXPECT_EQ(r->module->main.ops[0]->operands[0].map[0],
            AccessExpr::shifted(0, -1, 5));
  r = importText(
      slice({100}, {std::numeric_limits<int64_t>::min()}, {1}, {-3}));
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  EXPECT_EQ(outputShape(*r->module, "y"), (Shape{10, 3})); // 7, 4, 1
  EXPECT_EQ(r->module->main.ops[0]->operands[0].map[1],
            AccessExpr::shifted(1, -3, 7));
  std::string msg = errorOf(slice({5}, {0}, {0}, {0}), "n");
  EXPECT_NE(msg.find("step 0 of axis 0 is invalid"), std::string::npos)
      << msg;
  msg = errorOf(slice({2}, {5}, {0}, {-1}), "n");
  EXPECT_NE(msg.find("the slice of axis 0 is empty"), std::string::npos);
  msg = errorOf(slice({5}, {2}, {0}), "n");
  EXPECT_NE(msg.find("the slice of axis 0 is empty"), std::string::npos);
}

TEST(LayoutShapeTest, ExpandAndTranspose) {
  EXPECT_EQ(shapeOf(withInts("Expand", {3, 1}, {3}, {2, 1, 4})),
            (Shape{2, 3, 4}));
  std::string msg = errorOf(withInts("Expand", {3}, {1}, {4}), "n");
  EXPECT_NE(msg.find("shapes 3 and 4 do not broadcast (dim 0: 3 vs 4)"),
            std::string::npos)
      << msg;

  EXPECT_EQ(
      shapeOf(oneNode("Transpose", {{2, 3, 4}}, intsAttr("perm", {2, 0, 1}))),
      (Shape{4, 2, 3}));
  EXPECT_EQ(shapeOf(oneNode("Transpose", {{2, 3, 4}})), (Shape{4, 3, 2}));
  msg = errorOf(oneNode("Transpose", {{2, 3, 4}}, intsAttr("perm", {0, 0, 1})),
                "n");
  EXPECT_NE(msg.find("perm [0, 0, 1] is not a permutation of 0..2"),
            std::string::npos)
      << msg;
}

/// `y = Gather(data, indices)` with float data and int64 indices.
OnnxText gather(Shape data, Shape idx, int64_t axis) {
  return OnnxText()
      .input("data", data)
      .input("idx", idx, kInt64)
      .node("Gather", {"data", "idx"}, {"y"}, intAttr("axis", axis), "n")
      .output("y");
}

TEST(LookupShapeTest, Gather) {
  EXPECT_EQ(shapeOf(gather({10, 4}, {2, 3}, 0)), (Shape{2, 3, 4}));
  EXPECT_EQ(shapeOf(gather({5, 10, 4}, {7}, 1)), (Shape{5, 7, 4}));
  EXPECT_EQ(shapeOf(gather({5, 10, 4}, {}, 1)), (Shape{5, 4}));
  EXPECT_EQ(shapeOf(gather({5, 10, 4}, {2, 3}, -1)), (Shape{5, 10, 2, 3}));
  std::string msg = errorOf(OnnxText()
                                .input("data", {10, 4})
                                .ints("idx", {2}, {3, 12})
                                .node("Gather", {"data", "idx"}, {"y"}, "", "n")
                                .output("y"),
                            "n");
  EXPECT_NE(msg.find("index 12 is out of range for axis 0 of size 10"),
            std::string::npos)
      << msg;
}

TEST(ReduceShapeTest, ReduceMeanKeepDims) {
  auto mean = [](Shape axes, int keep) {
    std::string a = axes.empty() ? "" : intsAttr("axes", axes);
    return oneNode("ReduceMean", {{2, 3, 4}}, a + intAttr("keepdims", keep));
  };

  EXPECT_EQ(shapeOf(mean({1}, 1)), (Shape{2, 1, 4}));
  EXPECT_EQ(shapeOf(mean({1}, 0)), (Shape{2, 4}));
  EXPECT_EQ(shapeOf(mean({-1, 0}, 0)), (Shape{3}));
  EXPECT_EQ(shapeOf(mean({}, 1)), (Shape{1, 1, 1}));
  // Opset 18 moves the axes to an input.
  EXPECT_EQ(shapeOf(withInts("ReduceMean", {2, 3, 4}, {1}, {2}, "", 18)),
            (Shape{2, 3, 1}));
  std::string msg = errorOf(mean({3}, 1), "n");
  EXPECT_NE(msg.find("reduction axis 3 is out of range for rank 3"),
            std::string::npos)
      << msg;
}

/// One LSTM layer over X with W and R of hidden size 4; outputs Y, Y_h, Y_c.
OnnxText lstm(Shape x, int64_t dirs, const std::string &attrs,
              int64_t hidden = 4) {
  int64_t in = x[2];
  return OnnxText()
      .input("x", x)
      .input("w", {dirs, 16, in})
      .input("r", {dirs, 16, 4})
      .node("LSTM", {"x", "w", "r"}, {"y", "yh", "yc"},
            intAttr("hidden_size", hidden) + attrs, "n")
      .output("y")
      .output("yh")
      .output("yc");
}

TEST(RecurrentShapeTest, Lstm) {
  auto fwd = lstm({5, 2, 3}, 1, "");
  EXPECT_EQ(shapeOf(fwd, "y"), (Shape{5, 1, 2, 4}));
  EXPECT_EQ(shapeOf(fwd, "yh"), (Shape{1, 2, 4}));
  EXPECT_EQ(shapeOf(fwd, "yc"), (Shape{1, 2, 4}));
  auto bi = lstm({5, 2, 3}, 2, strAttr("direction", "bidirectional"));
  EXPECT_EQ(shapeOf(bi, "y"), (Shape{5, 2, 2, 4}));
  EXPECT_EQ(shapeOf(bi, "yh"), (Shape{2, 2, 4}));
  auto batchFirst = lstm({2, 5, 3}, 1, intAttr("layout", 1));
  EXPECT_EQ(shapeOf(batchFirst, "y"), (Shape{2, 5, 1, 4}));
  EXPECT_EQ(shapeOf(batchFirst, "yh"), (Shape{2, 1, 4}));

  std::string msg = errorOf(lstm({5, 2, 3}, 1, "", 5), "n");
  EXPECT_NE(msg.find("W 1x16x3 and R 1x16x4 do not match input size 3 and "
                     "hidden size 5"),
            std::string::npos)
      << msg;
  msg = errorOf(lstm({5, 2, 3}, 2, ""), "n");
  EXPECT_NE(msg.find("direction 'forward' does not match W's 2 directions"),
            std::string::npos)
      << msg;
}

} // namespace
