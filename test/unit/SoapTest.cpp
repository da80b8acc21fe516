//===- SoapTest.cpp - SOAP roles of iteration dims ------------------------===//
#include "OnnxText.h"

#include "ir/Soap.h"

#include <gtest/gtest.h>

using namespace pax;
using namespace pax::test;

namespace {

using R = SoapRole;
using Roles = std::vector<SoapRole>;

/// The roles of \p op's dims, by dim name, as "name=role" pairs in order.
std::string rolesText(const Op &op, llvm::ArrayRef<SoapRole> roles) {
  std::string s;
  for (size_t d = 0; d < op.iters.size(); ++d)
    s += (d ? " " : "") + op.iters[d].name + "=" +
         (d < roles.size() ? soapRoleName(roles[d]).str() : "?");
  return s;
}

/// Roles of every op of an imported model, as rolesText(), in op order.
std::vector<std::string> importedRoles(const OnnxText &model) {
  auto r = importText(model);
  if (!r) {
    ADD_FAILURE() << llvm::toString(r.takeError());
    return {};
  }
  const Func &f = r->module->main;
  auto roles = computeSoapRoles(f);
  EXPECT_EQ(roles.size(), f.ops.size());
  std::vector<std::string> out;
  for (const auto &op : f.ops)
    out.push_back(rolesText(*op, roles[op.get()]));
  return out;
}

TEST(SoapTest, RoleNames) {
  EXPECT_EQ(soapRoleName(R::Sample), "sample");
  EXPECT_EQ(soapRoleName(R::Attribute), "attribute");
  EXPECT_EQ(soapRoleName(R::Parameter), "parameter");
  EXPECT_EQ(soapRoleName(R::Reduction), "reduction");
}

TEST(SoapTest, HandBuiltMatMul) {
  // y[b, n] = x[b, k] . W[k, n] with W a parameter.
  Module m;
  Global *w = m.addGlobal("w", TensorType{DType::F32, {8, 16}});
  w->isParameter = true;
  Value *x = m.main.addArg("x", TensorType{DType::F32, {4, 8}});
  Op *op = m.main.addOp(OpKind::MatMul);
  op->iters = {{"b", 4, IterKind::Parallel},
               {"n", 16, IterKind::Parallel},
               {"k", 8, IterKind::Reduction}};
  op->operands.push_back({x, {AccessExpr::dim(0), AccessExpr::dim(2)}});
  op->operands.push_back({&w->value, {AccessExpr::dim(2), AccessExpr::dim(1)}});
  op->addResult(TensorType{DType::F32, {4, 16}},
                {AccessExpr::dim(0), AccessExpr::dim(1)});
  auto roles = computeSoapRoles(m.main);
  ASSERT_EQ(roles.count(op), 1u);
  EXPECT_EQ(Roles(roles[op].begin(), roles[op].end()),
            (Roles{R::Sample, R::Parameter, R::Reduction}));

  // The same W as a plain constant indexes nothing special: n is then an
  // attribute.
  w->isParameter = false;
  roles = computeSoapRoles(m.main);
  EXPECT_EQ(roles[op][1], R::Attribute);
}

TEST(SoapTest, ImportedMatMul) {
  auto roles = importedRoles(OnnxText()
                                 .input("x", {4, 8})
                                 .input("w", {8, 16})
                                 .node("MatMul", {"x", "w"}, {"y"})
                                 .output("y"));
  ASSERT_EQ(roles.size(), 1u);
  EXPECT_EQ(roles[0], "m=sample n=parameter k=reduction");
}

TEST(SoapTest, ImportedConv) {
  auto roles = importedRoles(
      OnnxText()
          .input("x", {2, 3, 8, 8})
          .input("w", {4, 3, 3, 3})
          .node("Conv", {"x", "w"}, {"y"}, intsAttr("pads", {1, 1, 1, 1}))
          .output("y"));
  ASSERT_EQ(roles.size(), 1u);
  EXPECT_EQ(roles[0], "n=sample co=parameter oh=attribute ow=attribute "
                      "ci=reduction kh=reduction kw=reduction");
}

TEST(SoapTest, TransposeCarriesTheSampleDim) {
  // x[b, s, h] -> [s, b, h] -> matmul: the sample role follows b to the
  // matmul's row dim m, and the leading s becomes an attribute.
  auto roles = importedRoles(
      OnnxText()
          .input("x", {4, 6, 8})
          .input("w", {8, 16})
          .node("Transpose", {"x"}, {"t"}, intsAttr("perm", {1, 0, 2}))
          .node("MatMul", {"t", "w"}, {"y"})
          .output("y"));
  ASSERT_EQ(roles.size(), 2u);
  EXPECT_EQ(roles[0], "d0=sample d1=attribute d2=attribute");
  EXPECT_EQ(roles[1], "b0=attribute m=sample n=parameter k=reduction");
}

TEST(SoapTest, TransposedInitializerWeightIsAParameter) {
  // A weight in a small initializer is never folded into a transposed copy
  // (that would count it twice when tied); the transpose stays an op, and
  // the matmul's n still indexes the parameter through it.
  auto roles = importedRoles(
      OnnxText()
          .input("x", {4, 8})
          .floats("w", {16, 8}, 0.5f)
          .node("Transpose", {"w"}, {"wt"}, intsAttr("perm", {1, 0}))
          .node("MatMul", {"x", "wt"}, {"y"})
          .output("y"));
  ASSERT_EQ(roles.size(), 2u);
  EXPECT_EQ(roles[1], "m=sample n=parameter k=reduction");
}

// A weight transposed at run time (a weight graph input, or an initializer
// too large to fold) reaches the matmul through a transpose op: its dims are
// still parameter dims.
TEST(SoapTest, WeightTransposedAtRunTimeIsAParameter) {
  auto roles = importedRoles(
      OnnxText()
          .input("x", {4, 8})
          .input("w", {16, 8})
          .node("Transpose", {"w"}, {"wt"}, intsAttr("perm", {1, 0}))
          .node("MatMul", {"x", "wt"}, {"y"})
          .output("y"));
  ASSERT_EQ(roles.size(), 2u);
  EXPECT_EQ(roles[1], "m=sample n=parameter k=reduction");
}

TEST(SoapTest, GatherEmbedding) {
  // Token ids [batch, seq] look up rows of a [vocab, hidden] table.
  auto roles = importedRoles(OnnxText()
                                 .input("ids", {2, 5}, kInt64)
                                 .input("emb", {100, 16})
                                 .node("Gather", {"emb", "ids"}, {"y"})
                                 .output("y"));
  ASSERT_EQ(roles.size(), 1u);
  EXPECT_EQ(roles[0], "i0=sample i1=attribute v=reduction d1=parameter");
}

TEST(SoapTest, GroupMajorDimCarriesTheSample) {
  // [6, 4] -> [2, 3, 4]: the batch is the major dim of the group (d0, d1).
  auto roles = importedRoles(OnnxText()
                                 .input("x", {6, 4})
                                 .ints("s", {3}, {2, 3, 4})
                                 .node("Reshape", {"x", "s"}, {"r"})
                                 .node("Relu", {"r"}, {"y"})
                                 .output("y"));
  ASSERT_EQ(roles.size(), 2u);
  EXPECT_EQ(roles[0], "d0=sample d1=attribute d2=attribute");
  EXPECT_EQ(roles[1], "d0=sample d1=attribute d2=attribute");
}

TEST(SoapTest, ReducingTheBatchEndsTheSample) {
  auto roles = importedRoles(
      OnnxText()
          .input("x", {4, 8})
          .node("ReduceSum", {"x"}, {"s"},
                intsAttr("axes", {0}) + intAttr("keepdims", 0), "sum")
          .node("Relu", {"s"}, {"y"})
          .output("y"));
  ASSERT_EQ(roles.size(), 2u);
  EXPECT_EQ(roles[0], "d0=reduction d1=attribute");
  EXPECT_EQ(roles[1], "d0=attribute");
}

TEST(SoapTest, SampleFlowsThroughBroadcastAdds) {
  // y = relu(x + bias): the bias is a parameter but the batch stays sample.
  auto roles = importedRoles(OnnxText(11)
                                 .input("x", {4, 8})
                                 .floats("bias", {8}, 0.5f)
                                 .node("Add", {"x", "bias"}, {"a"})
                                 .node("Relu", {"a"}, {"y"})
                                 .output("y"));
  ASSERT_EQ(roles.size(), 2u);
  EXPECT_EQ(roles[0], "d0=sample d1=parameter");
  EXPECT_EQ(roles[1], "d0=sample d1=attribute");
}

TEST(SoapTest, ScalarArgumentsHaveNoSampleDim) {
  Module m;
  Value *s = m.main.addArg("s", TensorType{DType::F32, {}});
  Op *op = m.main.addOp(OpKind::Neg);
  op->operands.push_back({s, {}});
  op->addResult(TensorType{DType::F32, {}}, {});
  auto roles = computeSoapRoles(m.main);
  ASSERT_EQ(roles.count(op), 1u);
  EXPECT_TRUE(roles[op].empty());
}

} // namespace
