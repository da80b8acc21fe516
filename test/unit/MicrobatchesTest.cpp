//===- MicrobatchesTest.cpp - A training step's batch in microbatches -----===//
#include "IrText.h"

#include "passes/autodiff/Autodiff.h"
#include "passes/autodiff/Microbatches.h"

#include <gtest/gtest.h>

using namespace pax;

namespace {

/// x [8, 4] -> matmul by the parameter W -> relu -> the mean: a loss.
constexpr const char *kMlp = R"(module @mlp {
  param @W : tensor<4x3xf32> = fill(0.5)

  func @main(%x: tensor<8x4xf32>) -> (loss: tensor<f32>) {
    %0 = compute "matmul" iter [m: 8 par, n: 3 par, k: 4 red]
        ins(%x[m, k], @W[k, n])
        outs([m, n] : tensor<8x3xf32>) {name = "fc"}
    %1 = compute "relu" iter [d0: 8 par, d1: 3 par]
        ins(%0[d0, d1])
        outs([d0, d1] : tensor<8x3xf32>) {name = "relu"}
    %2 = compute "reduce_mean" iter [d0: 8 red, d1: 3 red]
        ins(%1[d0, d1])
        outs([] : tensor<f32>) {name = "mean"}
    return %2
  }
}
)";

size_t tagged(const Func &f, int64_t k) {
  return llvm::count_if(f.ops, [&](const std::unique_ptr<Op> &op) {
    return op->intAttr("microbatch", -1) == k;
  });
}

} // namespace

// Two microbatches: each op twice over 4 samples, the input sliced, the
// loss the mean of the copies' means; the module still verifies.
TEST(MicrobatchesTest, CopiesEveryOpOverSlicesOfTheBatch) {
  auto m = test::parse(kMlp);
  ASSERT_TRUE(m);
  ASSERT_FALSE(bool(splitMicrobatches(*m, 2)));
  const Func &f = m->main;
  EXPECT_EQ(tagged(f, 0), 4u); // a slice, the matmul, relu and the mean
  EXPECT_EQ(tagged(f, 1), 4u);
  for (const auto &op : f.ops) {
    if (op->kind == OpKind::MatMul) {
      EXPECT_EQ(op->iters[0].extent, 4);
    }
  }
  const Value *loss = f.returns[0];
  ASSERT_EQ(loss->kind, Value::Kind::Result);
  EXPECT_EQ(loss->def->kind, OpKind::Mean);
  EXPECT_EQ(loss->def->operands.size(), 2u);
  EXPECT_TRUE(verifyModule(*m, [](const Op *, const llvm::Twine &msg) {
    ADD_FAILURE() << msg.str();
  }));
}

// A count that does not divide the batch names the op and its dim.
TEST(MicrobatchesTest, ACountThatDoesNotDivideIsAnError) {
  auto m = test::parse(kMlp);
  ASSERT_TRUE(m);
  llvm::Error err = splitMicrobatches(*m, 3);
  ASSERT_TRUE(bool(err));
  EXPECT_NE(llvm::toString(std::move(err))
                .find("op 'fc' (matmul): 3 microbatches do not divide its "
                      "sample dim 'm' (8)"),
            std::string::npos);
}

// After autodiff, microbatch 0's forward and backward ops all run before
// any op of microbatch 1.
TEST(MicrobatchesTest, EachMicrobatchRunsForwardAndBackwardInTurn) {
  auto m = test::parse(kMlp);
  ASSERT_TRUE(m);
  ASSERT_FALSE(bool(splitMicrobatches(*m, 2)));
  ASSERT_FALSE(bool(appendBackward(*m, AutodiffOptions())));
  orderMicrobatches(m->main);
  size_t last0 = 0, first1 = m->main.ops.size();
  for (size_t i = 0; i < m->main.ops.size(); ++i) {
    llvm::StringRef name = m->main.ops[i]->name();
    if (name.contains("/mb0"))
      last0 = i;
    if (name.contains("/mb1"))
      first1 = std::min(first1, i);
  }
  EXPECT_LT(last0, first1) << test::print(*m);
  // Backward ops carry their forward op's microbatch.
  EXPECT_GT(tagged(m->main, 0), 4u);
  EXPECT_TRUE(verifyModule(*m, [](const Op *, const llvm::Twine &msg) {
    ADD_FAILURE() << msg.str();
  }));
}
