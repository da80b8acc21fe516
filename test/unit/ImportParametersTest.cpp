//===- ImportParametersTest.cpp - Weights, constants and folding on import ===//
#include "OnnxText.h"

#include "ir/Module.h"
#include "ir/Verifier.h"

#include <gtest/gtest.h>

using namespace pax;
using namespace pax::test;

namespace {

/// Imports \p model, failing the test (and returning nullptr) on an error.
std::unique_ptr<Module> importOk(const OnnxText &model) {
  auto r = importText(model);
  if (!r) {
    ADD_FAILURE() << llvm::toString(r.takeError());
    return nullptr;
  }
  bool valid = verifyModule(*r->module, [](const Op *, const llvm::Twine &m) {
    ADD_FAILURE() << "verifier: " << m.str();
  });
  EXPECT_TRUE(valid);
  return std::move(r->module);
}

TEST(ImportParametersTest, FloatGraphInputUsedAsConvWeight) {
  auto m = importOk(OnnxText()
                        .input("x", {1, 3, 8, 8})
                        .input("w", {4, 3, 3, 3})
                        .node("Conv", {"x", "w"}, {"y"})
                        .output("y"));
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(m->main.args.size(), 1u);
  EXPECT_EQ(m->main.args[0]->name, "x");
  Global *w = m->findGlobal("w");
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(w->isParameter);
  EXPECT_EQ(w->source, DataSource::Input);
  EXPECT_EQ(w->ref, "w");
  EXPECT_EQ(m->main.ops[0]->operands[1].value, &w->value);
}

TEST(ImportParametersTest, WeightSeenThroughATranspose) {
  // x @ W^T, the way exporters often write a linear layer.
  auto m =
      importOk(OnnxText()
                   .input("x", {2, 4})
                   .input("w", {5, 4})
                   .node("Transpose", {"w"}, {"wt"}, intsAttr("perm", {1, 0}))
                   .node("MatMul", {"x", "wt"}, {"y"})
                   .output("y"));
  ASSERT_NE(m, nullptr);
  Global *w = m->findGlobal("w");
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(w->isParameter);
  EXPECT_EQ(w->source, DataSource::Input);
  EXPECT_EQ(m->main.args.size(), 1u);
}

TEST(ImportParametersTest, DataInputIsNotAParameter) {
  auto m = importOk(OnnxText()
                        .input("a", {2, 4})
                        .input("b", {2, 4})
                        .node("Add", {"a", "b"}, {"y"})
                        .output("y"));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->main.args.size(), 2u);
  EXPECT_TRUE(m->globals.empty());
}

TEST(ImportParametersTest, ShapeArithmeticFoldsAway) {
  // y = Reshape(x, Concat(Gather(Shape(x), [0]), [-1])): [2, 12].
  auto m = importOk(
      OnnxText()
          .input("x", {2, 3, 4})
          .ints("zero", {1}, {0})
          .ints("minus1", {1}, {-1})
          .node("Shape", {"x"}, {"s"})
          .node("Gather", {"s", "zero"}, {"b"}, intAttr("axis", 0))
          .node("Concat", {"b", "minus1"}, {"shape"}, intAttr("axis", 0))
          .node("Reshape", {"x", "shape"}, {"y"})
          .output("y"));
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(m->main.ops.size(), 1u);
  EXPECT_EQ(m->main.ops[0]->kind, OpKind::Reshape);
  EXPECT_EQ(outputShape(*m, "y"), (std::vector<int64_t>{2, 12}));
  // Nothing of the folded chain is left behind.
  EXPECT_TRUE(m->globals.empty());
}

TEST(ImportParametersTest, ConstantOfShapeWeightIsAFillParameter) {
  auto m =
      importOk(OnnxText()
                   .input("x", {2, 4})
                   .ints("dims", {2}, {4, 5})
                   .node("ConstantOfShape", {"dims"}, {"w"},
                         "attribute { name: \"value\" type: TENSOR t { dims: 1 "
                         "data_type: 1 float_data: 0.5 } } ")
                   .node("MatMul", {"x", "w"}, {"y"})
                   .output("y"));
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(m->globals.size(), 1u);
  const Global &w = *m->globals[0];
  EXPECT_EQ(w.source, DataSource::Fill);
  EXPECT_DOUBLE_EQ(w.fill, 0.5);
  EXPECT_TRUE(w.isParameter);
  EXPECT_EQ(w.value.type.str(), "tensor<4x5xf32>");
  EXPECT_EQ(outputShape(*m, "y"), (std::vector<int64_t>{2, 5}));
}

TEST(ImportParametersTest, FloatInitializerInAWeightSlotIsAParameter) {
  auto m = importOk(OnnxText()
                        .input("x", {2, 4})
                        .floats("w", {4, 3}, 0.25f)
                        .node("MatMul", {"x", "w"}, {"y"})
                        .output("y"));
  ASSERT_NE(m, nullptr);
  Global *w = m->findGlobal("w");
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(w->isParameter);
  EXPECT_EQ(w->source, DataSource::Initializer);
  EXPECT_EQ(w->ref, "w");
}

TEST(ImportParametersTest, Int64ConstantInAWeightSlotIsNotAParameter) {
  std::vector<int64_t> values(12, 1);
  auto m = importOk(OnnxText()
                        .input("x", {2, 4}, kInt64)
                        .ints("mask", {4, 3}, values)
                        .node("MatMul", {"x", "mask"}, {"y"})
                        .output("y"));
  ASSERT_NE(m, nullptr);
  Global *mask = m->findGlobal("mask");
  ASSERT_NE(mask, nullptr);
  EXPECT_FALSE(mask->isParameter);
}

TEST(ImportParametersTest, Int64TableOfAGatherIsNotAParameter) {
  std::vector<int64_t> table(40);
  for (size_t i = 0; i < table.size(); ++i)
    table[i] = int64_t(i);
  auto m = importOk(OnnxText()
                        .input("ids", {3}, kInt64)
                        .ints("table", {10, 4}, table)
                        .node("Gather", {"table", "ids"}, {"y"})
                        .output("y"));
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(m->main.ops.size(), 1u);
  Global *t = m->findGlobal("table");
  ASSERT_NE(t, nullptr);
  EXPECT_FALSE(t->isParameter);
  EXPECT_EQ(outputShape(*m, "y"), (std::vector<int64_t>{3, 4}));
}

TEST(ImportParametersTest, Int64MaskCastToFloatIsNotAParameter) {
  // An attention-style mask: int64 constant, cast to float, added to scores.
  // The cast folds; the float result is computed, so never a weight.
  std::vector<int64_t> values = {0, 1, 1, 0, 1, 0, 0, 1};
  auto m = importOk(OnnxText()
                        .input("scores", {3, 2, 4})
                        .ints("mask", {2, 4}, values)
                        .node("Cast", {"mask"}, {"maskf"}, intAttr("to", 1))
                        .node("Add", {"scores", "maskf"}, {"y"})
                        .output("y"));
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(m->main.ops.size(), 1u);
  EXPECT_EQ(m->main.ops[0]->kind, OpKind::Add);
  ASSERT_EQ(m->globals.size(), 1u);
  EXPECT_FALSE(m->globals[0]->isParameter);
  EXPECT_EQ(m->globals[0]->value.type.elem, DType::F32);
}

TEST(ImportParametersTest, FloatBiasVectorOfAnAddIsAParameter) {
  auto m = importOk(OnnxText()
                        .input("x", {3, 4})
                        .floats("bias", {4}, 0.1f)
                        .node("Add", {"x", "bias"}, {"y"})
                        .output("y"));
  ASSERT_NE(m, nullptr);
  Global *b = m->findGlobal("bias");
  ASSERT_NE(b, nullptr);
  EXPECT_TRUE(b->isParameter);
}

TEST(ImportParametersTest, ModuleRecordsItsSource) {
  auto r = importText(
      OnnxText(13).input("x", {2}).node("Relu", {"x"}, {"y"}).output("y"));
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  const Module &m = *r->module;
  EXPECT_EQ(std::get<int64_t>(m.attrs.at("opset")), 13);
  EXPECT_EQ(std::get<int64_t>(m.attrs.at("ir_version")), 8);
  EXPECT_TRUE(r->warnings.empty());
  ASSERT_EQ(m.main.ops.size(), 1u);
  EXPECT_EQ(m.main.ops[0]->name(), "Relu");
}

TEST(ImportParametersTest, BatchOptionOverridesTheLeadingDim) {
  ImportOptions opts;
  opts.batch = 16;
  auto r = importText(OnnxText()
                          .input("x", {2, 4})
                          .input("w", {4, 3})
                          .node("MatMul", {"x", "w"}, {"y"})
                          .output("y"),
                      opts);
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  // The data input takes the batch; the weight keeps its shape.
  EXPECT_EQ(outputShape(*r->module, "y"), (std::vector<int64_t>{16, 3}));
  EXPECT_EQ(r->module->findGlobal("w")->value.type.str(), "tensor<4x3xf32>");
}

TEST(ImportParametersTest, EnvelopeErrors) {
  // Opsets below 7 go through ONNX's version converter; 0 is no opset.
  auto r = importText(
      OnnxText(5).input("x", {2}).node("Relu", {"x"}, {"y"}).output("y"));
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  r = importText(
      OnnxText(0).input("x", {2}).node("Relu", {"x"}, {"y"}).output("y"));
  std::string msg = errorText(r);
  EXPECT_NE(msg.find("opset 0 is not supported (paxc reads opsets 1 to 23)"),
            std::string::npos)
      << msg;
  r = importText(OnnxText()
                     .input("x", {2})
                     .node("Frob", {"x"}, {"y"}, "", "f")
                     .output("y"));
  msg = errorText(r);
  EXPECT_NE(msg.find("node 'f' (Frob): unsupported op type 'Frob'"),
            std::string::npos)
      << msg;
  r = importText(OnnxText()
                     .input("x", {2})
                     .node("Relu", {"nope"}, {"y"}, "", "r")
                     .output("y"));
  msg = errorText(r);
  EXPECT_NE(msg.find("node 'r' (Relu) reads 'nope', which no node, graph "
                     "input or initializer defines"),
            std::string::npos)
      << msg;
}

TEST(ImportErrorTest, NamesTheFileAndTheNode) {
  auto r = importText(
      OnnxText()
          .input("a", {2, 3})
          .input("b", {4, 5})
          .node("MatMul", {"a", "b"}, {"y"}, "", "/encoder/layer.0/MatMul")
          .output("y"));
  std::string msg = errorText(r);
  EXPECT_NE(msg.find(".onnxtxt: node '/encoder/layer.0/MatMul' (MatMul): "
                     "inner dims do not match"),
            std::string::npos)
      << msg;
}

} // namespace
