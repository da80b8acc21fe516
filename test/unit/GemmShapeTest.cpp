//===- GemmShapeTest.cpp - Contractions as strided batched BLAS calls -----===//
//
// matchGemm's calls, run in BLAS's column-major order (referenceGemm), must
// give what the CPU kernel gives, for every layout a plan holds: plain and
// transposed operands, batches with a broadcast operand, merged runs of
// dims (a weight gradient over batch and sequence), column-major results.
// The CUDA backend hands exactly these calls to cuBLAS.
//
//===----------------------------------------------------------------------===//
#include "runtime/GemmShape.h"

#include "PlanBuilder.h"

#include <gtest/gtest.h>

#include <limits>

#include <random>

using namespace pax;
using namespace pax::runtime;
using namespace pax::test;

namespace {

Tensor randomTensor(std::vector<int64_t> shape, std::mt19937 &rng) {
  Tensor t = make(plan::F64, std::move(shape));
  std::uniform_real_distribution<double> u(-1, 1);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.setReal(i, u(rng));
  return t;
}

/// Matches \p b (inputs of \p shapes, output of \p outShape), runs the
/// calls and the CPU kernel, and compares them; returns the shape.
GemmShape check(const ComputeBuilder &b,
                std::vector<std::vector<int64_t>> shapes,
                std::vector<int64_t> outShape) {
  std::mt19937 rng(7);
  std::vector<Tensor> ins;
  for (auto &s : shapes)
    ins.push_back(randomTensor(s, rng));
  std::vector<const Tensor *> inPtrs;
  for (Tensor &t : ins)
    inPtrs.push_back(&t);
  Tensor want = make(plan::F64, outShape), got = make(plan::F64, outShape);
  std::vector<Tensor *> outs{&got};
  EXPECT_EQ(runWith(runKernel, b.c, inPtrs, {&want}), "");
  auto p = prepare(b.c, inPtrs, outs);
  EXPECT_TRUE(bool(p)) << llvm::toString(p.takeError());
  auto s = matchGemm(*p);
  EXPECT_TRUE(bool(s)) << llvm::toString(s.takeError());
  if (!s)
    return {};
  double alpha = attrReal(b.c, "alpha", 1), beta = 0;
  if (ins.size() == 3) {
    // gemm's C: copied into the output first, then scaled by beta.
    beta = attrReal(b.c, "beta", 1);
    for (int64_t i = 0; i < got.numel(); ++i)
      got.setReal(i, ins[2].real(i % ins[2].numel()));
  }
  auto data = [](const Tensor &t) {
    return reinterpret_cast<const double *>(t.data.data());
  };
  referenceGemm(*s, alpha, data(ins[size_t(s->aInput)]),
                data(ins[size_t(s->bInput)]), beta,
                reinterpret_cast<double *>(got.data.data()));
  for (int64_t i = 0; i < want.numel(); ++i)
    EXPECT_NEAR(got.real(i), want.real(i), 1e-12) << "at " << i;
  return *s;
}

TEST(GemmShapeTest, RowMajorProductIsItsTranspose) {
  auto b = ComputeBuilder("matmul").iter("m", 3).iter("n", 5).red("k", 4);
  b.in({dim(0), dim(2)}).in({dim(2), dim(1)}).out({dim(0), dim(1)});
  GemmShape s = check(b, {{3, 4}, {4, 5}}, {3, 5});
  // C^T (5 x 3) = B^T A^T: BLAS's A is the compute's B.
  EXPECT_EQ(s.aInput, 1);
  EXPECT_EQ(s.m, 5);
  EXPECT_EQ(s.n, 3);
  EXPECT_EQ(s.k, 4);
  EXPECT_FALSE(s.transA);
  EXPECT_FALSE(s.transB);
  EXPECT_EQ(s.lda, 5);
  EXPECT_EQ(s.ldb, 4);
  EXPECT_EQ(s.ldc, 5);
}

TEST(GemmShapeTest, TransposedOperands) {
  // B stored [n, k] (a linear layer's weight), A stored [k, m].
  auto b = ComputeBuilder("gemm").iter("m", 3).iter("n", 5).red("k", 4);
  b.in({dim(2), dim(0)}).in({dim(1), dim(2)}).out({dim(0), dim(1)});
  b.attrF("alpha", 0.5f);
  GemmShape s = check(b, {{4, 3}, {5, 4}}, {3, 5});
  EXPECT_TRUE(s.transA);
  EXPECT_TRUE(s.transB);
}

TEST(GemmShapeTest, GemmAddsBetaTimesC) {
  auto b = ComputeBuilder("gemm").iter("m", 2).iter("n", 3).red("k", 4);
  b.in({dim(0), dim(2)}).in({dim(2), dim(1)}).in({bcast(), dim(1)});
  b.out({dim(0), dim(1)});
  b.attrF("beta", 2.0f);
  // The bias broadcast over rows: check() copies it row by row.
  check(b, {{2, 4}, {4, 3}, {1, 3}}, {2, 3});
}

TEST(GemmShapeTest, BroadcastWeightMergesBatchIntoRows) {
  // x[b, h, m, k] w[k, n]: b, h and m are one run of rows.
  auto b = ComputeBuilder("matmul")
               .iter("b", 2)
               .iter("h", 3)
               .iter("m", 4)
               .iter("n", 2)
               .red("k", 5);
  b.in({dim(0), dim(1), dim(2), dim(4)}).in({dim(4), dim(3)});
  b.out({dim(0), dim(1), dim(2), dim(3)});
  GemmShape s = check(b, {{2, 3, 4, 5}, {5, 2}}, {2, 3, 4, 2});
  EXPECT_EQ(s.n, 24); // C^T: BLAS's columns are the rows
  EXPECT_EQ(s.batch, 1);
  EXPECT_TRUE(s.loops.empty());
}

TEST(GemmShapeTest, BatchesAndLoops) {
  // Attention-like: q[b, h, m, k] kt[b, h, k, n] with a broadcast head of
  // b in kt's place for the last case.
  auto b = ComputeBuilder("matmul")
               .iter("b", 2)
               .iter("h", 3)
               .iter("m", 4)
               .iter("n", 2)
               .red("k", 5);
  b.in({dim(0), dim(1), dim(2), dim(4)}).in({dim(0), dim(1), dim(4), dim(3)});
  b.out({dim(0), dim(1), dim(2), dim(3)});
  GemmShape s = check(b, {{2, 3, 4, 5}, {2, 3, 5, 2}}, {2, 3, 4, 2});
  EXPECT_EQ(s.batch, 3); // h: the smallest output step
  ASSERT_EQ(s.loops.size(), 1u);
  // kt shared across b: b is a row dim that is not in the rows' run.
  auto c = ComputeBuilder("matmul")
               .iter("b", 2)
               .iter("h", 3)
               .iter("m", 4)
               .iter("n", 2)
               .red("k", 5);
  c.in({dim(0), dim(1), dim(2), dim(4)}).in({dim(1), dim(4), dim(3)});
  c.out({dim(1), dim(0), dim(2), dim(3)});
  check(c, {{2, 3, 4, 5}, {3, 5, 2}}, {3, 2, 4, 2});
}

TEST(GemmShapeTest, WeightGradientMergesBatchAndSequence) {
  // dW[i, o] = sum over (b, s) of x[b, s, i] dy[b, s, o].
  auto b = ComputeBuilder("matmul").iter("i", 3).iter("o", 4).red("b", 2).red(
      "s", 5);
  b.in({dim(2), dim(3), dim(0)}).in({dim(2), dim(3), dim(1)});
  b.out({dim(0), dim(1)});
  GemmShape s = check(b, {{2, 5, 3}, {2, 5, 4}}, {3, 4});
  EXPECT_EQ(s.k, 10);
}

TEST(GemmShapeTest, ColumnMajorOutput) {
  // The output written transposed: C stored [n, m].
  auto b = ComputeBuilder("matmul").iter("m", 3).iter("n", 5).red("k", 4);
  b.in({dim(0), dim(2)}).in({dim(2), dim(1)}).out({dim(1), dim(0)});
  GemmShape s = check(b, {{3, 4}, {4, 5}}, {5, 3});
  EXPECT_EQ(s.aInput, 0);
  EXPECT_EQ(s.ldc, 3);
}

TEST(GemmShapeTest, RefusesWhatIsNoGemm) {
  // k reduced by A only.
  auto b = ComputeBuilder("matmul").iter("m", 3).red("k", 4).red("j", 2);
  b.in({dim(0), dim(1)}).in({dim(2)}).out({dim(0)});
  Tensor x = make(plan::F32, {3, 4}), y = make(plan::F32, {2}),
         z = make(plan::F32, {3});
  std::vector<const Tensor *> ins{&x, &y};
  std::vector<Tensor *> outs{&z};
  auto p = prepare(b.c, ins, outs);
  ASSERT_TRUE(bool(p));
  auto s = matchGemm(*p);
  ASSERT_FALSE(bool(s));
  EXPECT_NE(llvm::toString(s.takeError()).find("not a strided batched GEMM"),
            std::string::npos);
}

} // namespace

// As BLAS, beta 0 does not read C: a NaN or an infinity left there (an
// arena's bytes before the product writes them) does not reach the result.
TEST(GemmShapeTest, BetaZeroDoesNotReadC) {
  GemmShape s;
  s.m = 2, s.n = 2, s.k = 1, s.lda = 2, s.ldb = 1, s.ldc = 2;
  double a[] = {1, 2}, b[] = {3, 4};
  double c[] = {std::numeric_limits<double>::quiet_NaN(),
                std::numeric_limits<double>::infinity(), -1, 7};
  referenceGemm(s, 1.0, a, b, 0.0, c);
  EXPECT_EQ(c[0], 3);
  EXPECT_EQ(c[1], 6);
  EXPECT_EQ(c[2], 4);
  EXPECT_EQ(c[3], 8);
}
