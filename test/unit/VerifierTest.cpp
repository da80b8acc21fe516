//===- VerifierTest.cpp - Parse errors and verifier diagnostics -----------===//
#include "IrText.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace pax;
using namespace pax::test;

namespace {

/// A module around one op line, for error tests: the op is on line 3.
std::string withOp(llvm::StringRef op, llvm::StringRef globals = "") {
  return ("module @m {\n" + globals +
          "  func @main(%x: tensor<4x6xf32>) -> (y: tensor<4x6xf32>) {\n" + op +
          "\n    return %x\n  }\n}\n")
      .str();
}

/// Marks a case whose line is checked elsewhere.
constexpr int kAnyLine = -1;

TEST(ParserErrorTest, ReportsMessageAndLine) {
  struct Case {
    std::string text;
    const char *message;
    int line;
  };
  const Case cases[] = {
      {withOp("    %0 = compute \"frob\" iter [] ins() outs([] : tensor<f32>)"),
       "unknown op kind 'frob'", 3},
      {withOp("    %0 = compute \"relu\" iter [a: 4 par]\n"
              "      ins(%nope[a, *]) outs([a, *] : tensor<4x6xf32>)"),
       "use of undefined value %nope", 4},
      {withOp("    %0 = compute \"relu\" iter [a: 4 par]\n"
              "      ins(%x[a, zz]) outs([a, *] : tensor<4x6xf32>)"),
       "unknown iteration dim 'zz'", 4},
      {withOp("    %0 = compute \"relu\" iter [a: 4 par, a: 6 par]"),
       "duplicate iteration dim 'a'", 3},
      {withOp("    %0 = compute \"relu\" iter [a: 0 par]"),
       "extent of 'a' must be in [1, 2^48]", 3},
      {withOp("    %0 = compute \"relu\" iter [a: 4 parallel]"),
       "expected 'par', 'red' or 'seq'", 3},
      {withOp("    %0 = compute \"relu\" iter [a: 4 par]\n"
              "      ins(%x[(a), *]) outs([a, *] : tensor<4x6xf32>)"),
       "a dim group needs at least two dims", 4},
      {withOp("    %0 = compute \"relu\" iter [a: 4 par]\n"
              "      ins(%x[a, (*6)]) outs([a, *] : tensor<4x6xf32>)"),
       "a dim group needs a dim before its whole one", 4},
      {withOp("    %0 = compute \"relu\" iter [a: 4 par]\n"
              "      ins(%x[a, (a, *1)]) outs([a, *] : tensor<4x6xf32>)"),
       "expected the extent (2 or more) of the dim a group reads whole after "
       "'*'",
       4},
      {withOp("    %0 = compute \"relu\" iter [a: 4 par]\n"
              "      ins(%x[a, (a, *2, a)]) outs([a, *] : tensor<4x6xf32>)"),
       "expected ')' to close the dim group (a whole dim '*N' comes last)", 4},
      {withOp("", "  const @c : tensor<2x2xf32> = dense<[1.0, 2.0, 3.0]>\n"),
       "dense data of @c has 3 values but its type tensor<2x2xf32> has 4",
       kAnyLine},
      {withOp("", "  const @c : tensor<2xf33> = fill(0)\n"),
       "unknown element type 'f33'", 2},
      {withOp("", "  const @c : tensor<2xf32> = zeros\n"),
       "expected fill(...), initializer(...), input(...) or dense<...>", 2},
      {withOp("    # comment"), "unexpected character '#'", 3},
      {"module @m {\n  func @main(%x: tensor<4xf32>) -> (y: tensor<5xf32>) {\n"
       "    return %x\n  }\n}\n",
       "returned value 0 has type tensor<4xf32> but the function declares "
       "tensor<5xf32>",
       3},
      {"module @m {\n  func @main() -> () {\n    return\n  }\n}\nextra\n",
       "unexpected text after the module", 6},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.text);
    Diag diag;
    EXPECT_EQ(parse(c.text, &diag), nullptr);
    EXPECT_EQ(diag.message, c.message);
    if (c.line != kAnyLine) {
      EXPECT_EQ(diag.line, c.line);
    }
  }
}

// A wrong dense value count is reported on the global's own line.
TEST(ParserErrorTest, DenseCountErrorPointsAtTheGlobal) {
  Diag diag;
  EXPECT_EQ(
      parse(withOp("", "  const @c : tensor<2xf32> = dense<[1.0]>\n"), &diag),
      nullptr);
  EXPECT_EQ(diag.message,
            "dense data of @c has 1 values but its type tensor<2xf32> has 2");
  EXPECT_EQ(diag.line, 2);
}

TEST(ParserErrorTest, ColumnPointsAtTheProblem) {
  Diag diag;
  EXPECT_EQ(parse(withOp("    %0 = compute \"frob\" iter []"), &diag), nullptr);
  EXPECT_EQ(diag.column, int(std::strlen("    %0 = compute ")));
}

/// A module with one relu op over `%x: tensor<4x6xf32>` reading \p map.
std::unique_ptr<Module> reluWith(AccessMap in, AccessMap out,
                                 TensorType outType = {DType::F32, {4, 6}}) {
  auto m = std::make_unique<Module>();
  Value *x = m->main.addArg("x", TensorType{DType::F32, {4, 6}});
  Op *op = m->main.addOp(OpKind::Relu);
  op->iters = {{"a", 4, IterKind::Parallel},
               {"b", 2, IterKind::Parallel},
               {"c", 3, IterKind::Parallel}};
  op->operands.push_back({x, std::move(in)});
  m->main.returns = {op->addResult(outType, std::move(out))};
  m->main.returnNames = {"y"};
  return m;
}

TEST(VerifierTest, AcceptsAWellFormedOp) {
  using E = AccessExpr;
  auto m =
      reluWith({E::dim(0), E::group({1, 2})}, {E::dim(0), E::group({1, 2})});
  EXPECT_TRUE(verify(*m).empty());
}

/// A problem in one dim of an access map, and the verifier's message.
struct DimCase {
  std::unique_ptr<Module> module;
  const char *message;
};

std::vector<DimCase> dimCases() {
  using E = AccessExpr;
  std::vector<DimCase> cases;
  auto add = [&](AccessMap in, AccessMap out, const char *msg) {
    cases.push_back({reluWith(std::move(in), std::move(out)), msg});
  };
  add({E::dim(0), E::broadcast()}, {E::dim(0), E::full()},
      "operand 0, dim 1: '_' needs a size-1 dim, not 6");
  add({E::dim(0), E::group({0, 1})}, {E::dim(0), E::full()},
      "operand 0, dim 1: (a, b) spans 8 but the dim has 6");
  // A group may read a part of an operand's dim, not past its end.
  add({E::dim(0), E::group({1}, 2, 3)}, {E::dim(0), E::full()},
      "operand 0, dim 1: (b, *2) + 3 spans 4 but the dim has 6");
  // A result's group writes its whole dim.
  add({E::dim(0), E::full()}, {E::dim(0), E::group({1}, 2, 2)},
      "result 0, dim 1: (b, *2) + 2 spans 4 but the dim has 6");
  add({E::dim(0), E::lookup(1)}, {E::dim(0), E::full()},
      "operand 0, dim 1: gather(b) spans 2 but the dim has 6");
  add({E::dim(0), E::dim(7)}, {E::dim(0), E::full()},
      "operand 0, dim 1: refers to an iteration dim that does not exist");
  add({E::dim(0), E::shifted(1, 1, 6)}, {E::dim(0), E::full()},
      "operand 0, dim 1: b + 6 never reads inside a dim of 6");
  add({E::dim(0), E::full()}, {E::dim(0), E::shifted(1, 2, 0)},
      "result 0, dim 1: 2*b does not write every element of a dim of 6");
  add({E::dim(0), E::full()}, {E::dim(0), E::dim(1)},
      "result 0, dim 1: b does not write every element of a dim of 6");
  return cases;
}

TEST(VerifierTest, WrongMapRank) {
  std::vector<const Op *> ops;
  auto m =
      reluWith({AccessExpr::dim(0)}, {AccessExpr::dim(0), AccessExpr::full()});
  auto msgs = verify(*m, &ops);
  ASSERT_EQ(msgs.size(), 1u);
  EXPECT_EQ(msgs[0],
            "operand 0 has an access map of rank 1 for a tensor of rank 2");
  EXPECT_EQ(ops[0], m->main.ops[0].get());
}

TEST(VerifierTest, ReportsEachDimProblemOnce) {
  // Counts reports and the ops they name; messages are checked below.
  for (DimCase &c : dimCases()) {
    SCOPED_TRACE(c.message);
    std::vector<const Op *> ops;
    bool ok = verifyModule(*c.module, [&](const Op *op, const llvm::Twine &) {
      ops.push_back(op);
    });
    EXPECT_FALSE(ok);
    ASSERT_EQ(ops.size(), 1u);
    EXPECT_EQ(ops[0], c.module->main.ops[0].get());
  }
}

// Each message names the operand and the dim.
TEST(VerifierTest, DimProblemMessagesNameOperandAndDim) {
  for (DimCase &c : dimCases()) {
    SCOPED_TRACE(c.message);
    auto msgs = verify(*c.module);
    ASSERT_EQ(msgs.size(), 1u);
    EXPECT_EQ(msgs[0], c.message);
  }
}

// Only scatter_add writes its result through gather(): a gather's gradient.
TEST(VerifierTest, ResultLookupsOnlyForScatterAdd) {
  for (OpKind kind : {OpKind::Relu, OpKind::ScatterAdd}) {
    auto m = std::make_unique<Module>();
    Value *x = m->main.addArg("x", TensorType{DType::F32, {3}});
    Value *i = m->main.addArg("i", TensorType{DType::I64, {3}});
    Op *op = m->main.addOp(kind);
    op->iters = {{"n", 3, IterKind::Reduction}, {"v", 5, IterKind::Parallel}};
    op->operands.push_back({x, {AccessExpr::dim(0)}});
    op->operands.push_back({i, {AccessExpr::dim(0)}});
    m->main.returns = {
        op->addResult({DType::F32, {5}}, {AccessExpr::lookup(1)})};
    m->main.returnNames = {"y"};
    auto msgs = verify(*m);
    if (kind == OpKind::ScatterAdd) {
      EXPECT_TRUE(msgs.empty());
    } else {
      ASSERT_EQ(msgs.size(), 1u);
      EXPECT_NE(msgs[0].find("only scatter_add writes a result through "
                             "gather()"),
                std::string::npos)
          << msgs[0];
    }
  }
}

TEST(VerifierTest, DuplicateIterationDim) {
  auto m = reluWith({AccessExpr::dim(0), AccessExpr::full()},
                    {AccessExpr::dim(0), AccessExpr::full()});
  m->main.ops[0]->iters[2].name = "a";
  auto msgs = verify(*m);
  ASSERT_EQ(msgs.size(), 1u);
  EXPECT_EQ(msgs[0], "iteration dim 'a' is declared twice");
}

TEST(VerifierTest, UseBeforeDefinition) {
  auto m = reluWith({AccessExpr::dim(0), AccessExpr::full()},
                    {AccessExpr::dim(0), AccessExpr::full()});
  // A second op whose result the first one reads: defined too late.
  Op *late = m->main.addOp(OpKind::Neg);
  late->iters = {{"a", 4, IterKind::Parallel}};
  Value *v = late->addResult(TensorType{DType::F32, {4}}, {AccessExpr::dim(0)});
  late->operands.push_back(
      {m->main.args[0].get(), {AccessExpr::dim(0), AccessExpr::full()}});
  m->main.ops[0]->operands[0].value = v;
  std::vector<const Op *> ops;
  auto msgs = verify(*m, &ops);
  ASSERT_EQ(msgs.size(), 1u);
  EXPECT_EQ(msgs[0], "operand 0 is used before it is defined");
  EXPECT_EQ(ops[0], m->main.ops[0].get());
}

TEST(VerifierTest, ModuleLevelProblems) {
  Module m = denseModule(DType::F32, raw<float>({1.0f, 2.0f}));
  m.globals[0]->bytes.pop_back();
  m.addGlobal("c", TensorType{DType::F32, {}});
  m.main.returnNames.push_back("extra");
  std::vector<const Op *> ops;
  auto msgs = verify(m, &ops);
  ASSERT_EQ(msgs.size(), 3u);
  EXPECT_EQ(msgs[0], "dense data of @c has 7 bytes, its type tensor<2xf32> "
                     "needs 8");
  EXPECT_EQ(msgs[1], "global @c is defined twice");
  EXPECT_EQ(msgs[2], "the function returns 1 values but names 2");
  EXPECT_EQ(ops[0], nullptr);
}

} // namespace
