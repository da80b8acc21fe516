//===- KernelsTest.cpp - The specific CPU kernels behind runKernel --------===//
#include "runtime/cpu/Kernels.h"

#include "PlanBuilder.h"

#include <gtest/gtest.h>
#include <tbb/task_arena.h>

#include <cmath>
#include <random>
#include <vector>

using namespace pax;
using namespace pax::runtime;
using namespace pax::test;

namespace {

std::string run(const plan::Compute &c, std::vector<const Tensor *> ins,
                std::vector<Tensor *> outs) {
  return runWith(runKernel, c, std::move(ins), std::move(outs));
}

void expectNear(const std::vector<double> &got, const std::vector<double> &want,
                double tol = 1e-5) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
}

using V = std::vector<double>;

TEST(KernelsTest, MatMul) {
  auto b = ComputeBuilder("matmul").iter("m", 2).iter("n", 2).red("k", 3);
  b.in({dim(0), dim(2)}).in({dim(2), dim(1)}).out({dim(0), dim(1)});
  for (plan::DType dt : {plan::F32, plan::F64, plan::I32}) {
    Tensor x = make(dt, {2, 3}, {1, 2, 3, 4, 5, 6});
    Tensor y = make(dt, {3, 2}, {7, 8, 9, 10, 11, 12});
    Tensor z = make(dt, {2, 2});
    ASSERT_EQ(run(b.c, {&x, &y}, {&z}), "");
    EXPECT_EQ(reals(z), V({58, 64, 139, 154}));
  }
}

// Every backend runs the kernel codegen chose: a compute naming no kernel,
// an unknown one, or one that does not run its kind is refused.
TEST(KernelsTest, RunsTheKernelTheComputeNames) {
  auto b = ComputeBuilder("matmul").iter("m", 2).iter("n", 2).red("k", 3);
  b.in({dim(0), dim(2)}).in({dim(2), dim(1)}).out({dim(0), dim(1)});
  EXPECT_EQ(b.c.kernel(), "gemm");
  Tensor x = make(plan::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor y = make(plan::F32, {3, 2}, {7, 8, 9, 10, 11, 12});
  Tensor z = make(plan::F32, {2, 2});
  plan::Compute c = b.c;
  c.set_kernel("pointwise");
  EXPECT_EQ(run(c, {&x, &y}, {&z}),
            "compute 'n0' (matmul): kernel 'pointwise' does not run this kind");
  c.set_kernel("tensor_cores");
  EXPECT_EQ(run(c, {&x, &y}, {&z}),
            "compute 'n0' (matmul): unknown kernel 'tensor_cores'");
  c.clear_kernel();
  EXPECT_EQ(run(c, {&x, &y}, {&z}),
            "compute 'n0' (matmul): no kernel runs this kind");
  EXPECT_EQ(run(b.c, {&x, &y}, {&z}), "");
  EXPECT_EQ(reals(z), V({58, 64, 139, 154}));
}

TEST(KernelsTest, MatMulDoesNotDependOnThreadCount) {
  const int64_t m = 67, n = 129, k = 301;
  auto b = ComputeBuilder("matmul").iter("m", m).iter("n", n).red("k", k);
  b.in({dim(0), dim(2)}).in({dim(2), dim(1)}).out({dim(0), dim(1)});
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> dist(-1, 1);
  Tensor x = make(plan::F32, {m, k}), y = make(plan::F32, {k, n});
  for (int64_t i = 0; i < x.numel(); ++i)
    x.setReal(i, dist(rng));
  for (int64_t i = 0; i < y.numel(); ++i)
    y.setReal(i, dist(rng));
  Tensor one = make(plan::F32, {m, n}), many = make(plan::F32, {m, n});
  tbb::task_arena single(1);
  single.execute([&] { ASSERT_EQ(run(b.c, {&x, &y}, {&one}), ""); });
  ASSERT_EQ(run(b.c, {&x, &y}, {&many}), "");
  EXPECT_EQ(one.data, many.data);
  for (int64_t i = 0; i < m; i += 11)
    for (int64_t j = 0; j < n; j += 13) {
      double want = 0;
      for (int64_t q = 0; q < k; ++q)
        want += x.real(i * k + q) * y.real(q * n + j);
      EXPECT_NEAR(one.real(i * n + j), want, 1e-4);
    }
}

// A weight's gradient: dW[k, n] = sum over b and s of x[b, s, k] dy[b, s, n].
// When both inputs walk (b, s) as one run the GEMM takes them as one K of
// b * s; otherwise the generic loop runs. Both equal a naive sum.
TEST(KernelsTest, ContractionOverTwoInnerDims) {
  const int64_t B = 3, S = 5, K = 4, N = 6;
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> dist(-1, 1);
  Tensor x = make(plan::F32, {B, S, K}), dy = make(plan::F32, {B, S, N});
  for (Tensor *t : {&x, &dy})
    for (int64_t i = 0; i < t->numel(); ++i)
      t->setReal(i, dist(rng));
  for (bool contiguous : {true, false}) {
    SCOPED_TRACE(contiguous);
    // Not contiguous: dy laid out [S, B, N] walks b and s with strides
    // that do not chain, so the generic loop runs.
    auto c = ComputeBuilder("matmul")
                 .iter("k", K)
                 .iter("n", N)
                 .red("b", B)
                 .red("s", S);
    c.in({dim(2), dim(3), dim(0)});
    if (contiguous)
      c.in({dim(2), dim(3), dim(1)});
    else
      c.in({dim(3), dim(2), dim(1)});
    c.out({dim(0), dim(1)});
    Tensor dyIn = dy;
    if (!contiguous) { // dy laid out [S, B, N]
      dyIn = make(plan::F32, {S, B, N});
      for (int64_t bb = 0; bb < B; ++bb)
        for (int64_t ss = 0; ss < S; ++ss)
          for (int64_t nn = 0; nn < N; ++nn)
            dyIn.setReal((ss * B + bb) * N + nn, dy.real((bb * S + ss) * N + nn));
    }
    Tensor dw = make(plan::F32, {K, N});
    ASSERT_EQ(run(c.c, {&x, &dyIn}, {&dw}), "");
    for (int64_t kk = 0; kk < K; ++kk)
      for (int64_t nn = 0; nn < N; ++nn) {
        double want = 0;
        for (int64_t bb = 0; bb < B; ++bb)
          for (int64_t ss = 0; ss < S; ++ss)
            want += x.real((bb * S + ss) * K + kk) *
                    dy.real((bb * S + ss) * N + nn);
        EXPECT_NEAR(dw.real(kk * N + nn), want, 1e-5);
      }
  }
}

// A convolution's per-window input gradient: dy [n, co, oh, ow] times W
// [co, ci, kh, kw] over co, written [n, oh, ow, ci, kh, kw]: rows (oh, ow)
// and columns (ci, kh, kw) each walked as one, n a batch dim.
TEST(KernelsTest, MatMulMergesRunsOfRowAndColumnDims) {
  const int64_t N = 2, CO = 3, OH = 4, OW = 5, CI = 2, KH = 3, KW = 2;
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> dist(-1, 1);
  Tensor dy = make(plan::F32, {N, CO, OH, OW}), w = make(plan::F32, {CO, CI, KH, KW});
  for (Tensor *t : {&dy, &w})
    for (int64_t i = 0; i < t->numel(); ++i)
      t->setReal(i, dist(rng));
  auto c = ComputeBuilder("matmul")
               .iter("n", N)
               .red("co", CO)
               .iter("oh", OH)
               .iter("ow", OW)
               .iter("ci", CI)
               .iter("kh", KH)
               .iter("kw", KW);
  c.in({dim(0), dim(1), dim(2), dim(3)}).in({dim(1), dim(4), dim(5), dim(6)});
  c.out({dim(0), dim(2), dim(3), dim(4), dim(5), dim(6)});
  Tensor out = make(plan::F32, {N, OH, OW, CI, KH, KW});
  ASSERT_EQ(run(c.c, {&dy, &w}, {&out}), "");
  for (int64_t n = 0; n < N; ++n)
    for (int64_t p = 0; p < OH * OW; ++p)
      for (int64_t q = 0; q < CI * KH * KW; ++q) {
        double want = 0;
        for (int64_t o = 0; o < CO; ++o)
          want += dy.real((n * CO + o) * OH * OW + p) * w.real(o * CI * KH * KW + q);
        EXPECT_NEAR(out.real((n * OH * OW + p) * CI * KH * KW + q), want, 1e-5);
      }
}

TEST(KernelsTest, BatchedMatMulBroadcastsB) {
  auto b = ComputeBuilder("matmul").iter("b", 2).iter("m", 1).iter("n", 2).red(
      "k", 2);
  b.in({dim(0), dim(1), dim(3)}).in({dim(3), dim(2)});
  b.out({dim(0), dim(1), dim(2)});
  Tensor x = make(plan::F32, {2, 1, 2}, {1, 2, 3, 4});
  Tensor y = make(plan::F32, {2, 2}, {1, 0, 0, 1});
  Tensor z = make(plan::F32, {2, 1, 2});
  ASSERT_EQ(run(b.c, {&x, &y}, {&z}), "");
  EXPECT_EQ(reals(z), V({1, 2, 3, 4}));
}

TEST(KernelsTest, GemmTransposedWithC) {
  // Y = 2 * A^T * B^T + 0.5 * C, A stored [k, m], B stored [n, k].
  auto b = ComputeBuilder("gemm").iter("m", 2).iter("n", 2).red("k", 2);
  b.in({dim(2), dim(0)}).in({dim(1), dim(2)}).in({bcast(), dim(1)});
  b.out({dim(0), dim(1)}).attrF("alpha", 2).attrF("beta", 0.5f);
  Tensor a = make(plan::F32, {2, 2}, {1, 3, 2, 4});  // A = [[1, 2], [3, 4]]
  Tensor bt = make(plan::F32, {2, 2}, {5, 7, 6, 8}); // B = [[5, 6], [7, 8]]
  Tensor c = make(plan::F32, {1, 2}, {10, 20});
  Tensor y = make(plan::F32, {2, 2});
  ASSERT_EQ(run(b.c, {&a, &bt, &c}, {&y}), "");
  EXPECT_EQ(reals(y), V({2 * 19 + 5, 2 * 22 + 10, 2 * 43 + 5, 2 * 50 + 10}));
}

TEST(KernelsTest, Conv1dPaddedWithBias) {
  // x [1, 1, 4], w [1, 1, 3], pad 1 each side, bias 1.
  auto b = ComputeBuilder("conv")
               .iter("n", 1)
               .iter("co", 1)
               .iter("o", 4)
               .red("ci", 1)
               .red("k", 3);
  b.in({dim(0), dim(3), window(2, 4, 1, 1, -1)});
  b.in({dim(1), dim(3), dim(4)}).in({dim(1)});
  b.out({dim(0), dim(1), dim(2)}).attr("group", 1);
  Tensor x = make(plan::F32, {1, 1, 4}, {1, 2, 3, 4});
  Tensor w = make(plan::F32, {1, 1, 3}, {1, 10, 100});
  Tensor bias = make(plan::F32, {1}, {1});
  Tensor y = make(plan::F32, {1, 1, 4});
  ASSERT_EQ(run(b.c, {&x, &w, &bias}, {&y}), "");
  EXPECT_EQ(reals(y), V({211, 322, 433, 44}));
}

TEST(KernelsTest, MaxPoolSkipsPadding) {
  auto b = ComputeBuilder("max_pool")
               .iter("n", 1)
               .iter("c", 1)
               .iter("o", 3)
               .red("k", 2);
  b.in({dim(0), dim(1), window(2, 3, 2, 1, -1)}).out({dim(0), dim(1), dim(2)});
  b.attrInts("pads", {1, 1});
  Tensor x = make(plan::F32, {1, 1, 4}, {-1, -2, -3, -4});
  Tensor y = make(plan::F32, {1, 1, 3});
  ASSERT_EQ(run(b.c, {&x}, {&y}), "");
  EXPECT_EQ(reals(y), V({-1, -2, -4}));
}

TEST(KernelsTest, AveragePoolCountIncludePad) {
  for (int include : {0, 1}) {
    auto b = ComputeBuilder("average_pool")
                 .iter("n", 1)
                 .iter("c", 1)
                 .iter("o", 3)
                 .red("k", 2);
    b.in({dim(0), dim(1), window(2, 3, 2, 1, -1)});
    b.out({dim(0), dim(1), dim(2)});
    b.attrInts("pads", {1, 1}).attr("count_include_pad", include);
    Tensor x = make(plan::F32, {1, 1, 4}, {2, 4, 6, 8});
    Tensor y = make(plan::F32, {1, 1, 3});
    ASSERT_EQ(run(b.c, {&x}, {&y}), "");
    if (include)
      EXPECT_EQ(reals(y), V({1, 5, 4}));
    else
      EXPECT_EQ(reals(y), V({2, 5, 8}));
  }
}

TEST(KernelsTest, Lrn) {
  // size 3 over 2 channels: each sum covers both channels.
  auto b = ComputeBuilder("lrn").iter("n", 1).iter("c", 2).red("j", 3);
  b.in({dim(0), window(1, 2, 1, 1, -1)}).out({dim(0), dim(1)});
  b.attr("size", 3).attrF("alpha", 3).attrF("beta", 1).attrF("bias", 1);
  Tensor x = make(plan::F64, {1, 2}, {1, 2});
  Tensor y = make(plan::F64, {1, 2});
  ASSERT_EQ(run(b.c, {&x}, {&y}), "");
  expectNear(reals(y), V({1.0 / 6, 2.0 / 6}));
}

TEST(KernelsTest, BatchNorm) {
  auto b = ComputeBuilder("batch_norm").iter("n", 1).iter("c", 2);
  b.in({dim(0), dim(1)});
  for (int i = 0; i < 4; ++i)
    b.in({dim(1)});
  b.out({dim(0), dim(1)}).attrF("epsilon", 0);
  Tensor x = make(plan::F32, {1, 2}, {3, 5});
  Tensor scale = make(plan::F32, {2}, {2, 3});
  Tensor bias = make(plan::F32, {2}, {1, -1});
  Tensor mean = make(plan::F32, {2}, {1, 1});
  Tensor var = make(plan::F32, {2}, {4, 16});
  Tensor y = make(plan::F32, {1, 2});
  ASSERT_EQ(run(b.c, {&x, &scale, &bias, &mean, &var}, {&y}), "");
  EXPECT_EQ(reals(y), V({3, 2}));
}

TEST(KernelsTest, LayerNormAndRmsNorm) {
  auto b = ComputeBuilder("layer_norm").iter("i", 1).red("j", 2);
  b.in({dim(0), dim(1)}).in({bcast(), dim(1)}).in({bcast(), dim(1)});
  b.out({dim(0), dim(1)}).attrF("epsilon", 0);
  Tensor x = make(plan::F64, {1, 2}, {1, 3});
  Tensor scale = make(plan::F64, {1, 2}, {2, 3});
  Tensor bias = make(plan::F64, {1, 2}, {10, 20});
  Tensor y = make(plan::F64, {1, 2});
  ASSERT_EQ(run(b.c, {&x, &scale, &bias}, {&y}), "");
  expectNear(reals(y), V({8, 23}));

  auto r = ComputeBuilder("rms_norm").iter("i", 1).red("j", 2);
  r.in({dim(0), dim(1)}).in({bcast(), dim(1)});
  r.out({dim(0), dim(1)}).attrF("epsilon", 0);
  Tensor x2 = make(plan::F64, {1, 2}, {3, 4}); // rms = sqrt(12.5)
  ASSERT_EQ(run(r.c, {&x2, &scale}, {&y}), "");
  expectNear(reals(y), V({6 / std::sqrt(12.5), 12 / std::sqrt(12.5)}));
}

TEST(KernelsTest, InstanceNorm) {
  auto b =
      ComputeBuilder("instance_norm").iter("n", 1).iter("c", 1).red("s", 2);
  b.in({dim(0), dim(1), dim(2)}).in({dim(1)}).in({dim(1)});
  b.out({dim(0), dim(1), dim(2)}).attrF("epsilon", 0);
  Tensor x = make(plan::F32, {1, 1, 2}, {1, 3});
  Tensor scale = make(plan::F32, {1}, {2});
  Tensor bias = make(plan::F32, {1}, {1});
  Tensor y = make(plan::F32, {1, 1, 2});
  ASSERT_EQ(run(b.c, {&x, &scale, &bias}, {&y}), "");
  EXPECT_EQ(reals(y), V({-1, 3}));
}

TEST(KernelsTest, SoftmaxIsStable) {
  for (const char *kind : {"softmax", "log_softmax"}) {
    auto b = ComputeBuilder(kind).iter("i", 2).red("j", 2);
    b.in({dim(0), dim(1)}).out({dim(0), dim(1)});
    Tensor x = make(plan::F32, {2, 2}, {1000, 1000, 0, std::log(3.0)});
    Tensor y = make(plan::F32, {2, 2});
    ASSERT_EQ(run(b.c, {&x}, {&y}), "");
    if (std::string(kind) == "softmax")
      expectNear(reals(y), V({0.5, 0.5, 0.25, 0.75}));
    else
      expectNear(reals(y), V({std::log(0.5), std::log(0.5), std::log(0.25),
                              std::log(0.75)}));
  }
}

/// One LSTM step over [dir, s, b, g, h, k] with H = I = 1 and initial_c
/// (inputs bit 6): \p batch rows of the iteration space, the state read at
/// row b + \p rowOffset (a state held whole by a device that runs a block
/// of the batch).
ComputeBuilder lstmBuilder(int64_t batch, int64_t rowOffset) {
  auto b = ComputeBuilder("lstm").attr("inputs", 1 << 6).attr("hidden_size", 1);
  b.iter("dir", 1).iter("s", 1, plan::IterDim::SEQ).iter("b", batch);
  b.iter("g", 4).iter("h", 1).red("k", 2);
  b.in({dim(1), dim(2), dim(5)})
      .in({dim(0), group({3, 4}), dim(5)})
      .in({dim(0), group({3, 4}), dim(5, -1)})
      .in({dim(0), dim(2, rowOffset), dim(4)});
  b.out({dim(1), dim(0), dim(2), dim(4)})
      .out({dim(0), dim(2), dim(4)})
      .out({dim(0), dim(2), dim(4)});
  return b;
}

TEST(KernelsTest, LstmReadsItsRowsOfAStateHeldWhole) {
  // The device runs batch row 1 of 2 and holds initial_c whole: it must
  // start from row 1's cell (2), not row 0's (-5).
  auto b = lstmBuilder(/*batch=*/1, /*rowOffset=*/1);
  Tensor x = make(plan::F64, {1, 1, 1}, {1});
  Tensor w = make(plan::F64, {1, 4, 1}, {0, 0, 0, 1});
  Tensor r = make(plan::F64, {1, 4, 1}, {0, 0, 0, 0});
  Tensor c0 = make(plan::F64, {1, 2, 1}, {-5, 2});
  Tensor y = make(plan::F64, {1, 1, 1, 1}), yh = make(plan::F64, {1, 1, 1}),
         yc = make(plan::F64, {1, 1, 1});
  ASSERT_EQ(run(b.c, {&x, &w, &r, &c0}, {&y, &yh, &yc}), "");
  expectNear(reals(yc), V({0.5 * 2 + 0.5 * std::tanh(1.0)}));
}

TEST(KernelsTest, GruOneStepLinearBeforeReset) {
  // H = I = 1, batch 1, initial_h = 1. z = sigmoid(0) = 0.5; r = sigmoid(0);
  // with linear_before_reset the candidate is tanh(x * 1 + r * (R_h h + 1)).
  auto b = ComputeBuilder("gru").attr("inputs", (1 << 3) | (1 << 5));
  b.attr("hidden_size", 1).attr("linear_before_reset", 1);
  b.iter("dir", 1).iter("s", 1, plan::IterDim::SEQ).iter("b", 1);
  b.iter("g", 3).iter("h", 1).red("k", 2);
  b.in({dim(1), dim(2), dim(5)})
      .in({dim(0), group({3, 4}), dim(5)})
      .in({dim(0), group({3, 4}), dim(5, -1)})
      .in({dim(0), full()})
      .in({dim(0), dim(2), dim(4)});
  b.out({dim(1), dim(0), dim(2), dim(4)}).out({dim(0), dim(2), dim(4)});
  Tensor x = make(plan::F64, {1, 1, 1}, {1});
  Tensor w = make(plan::F64, {1, 3, 1}, {0, 0, 1});
  Tensor r = make(plan::F64, {1, 3, 1}, {0, 0, 2});
  // Wb (z, r, h) then Rb (z, r, h): only Rb_h is set.
  Tensor bias = make(plan::F64, {1, 6}, {0, 0, 0, 0, 0, 1});
  Tensor h0 = make(plan::F64, {1, 1, 1}, {1});
  Tensor y = make(plan::F64, {1, 1, 1, 1}), yh = make(plan::F64, {1, 1, 1});
  ASSERT_EQ(run(b.c, {&x, &w, &r, &bias, &h0}, {&y, &yh}), "");
  double cand = std::tanh(1 + 0.5 * (2 * 1 + 1));
  double h = 0.5 * cand + 0.5 * 1;
  expectNear(reals(y), V({h}));
  expectNear(reals(yh), V({h}));
}

TEST(KernelsTest, LstmOneStepWithInitialCell) {
  // H = I = 1; only the cell gate's input weight is set, so i = o = f = 0.5
  // and the candidate is tanh(1); initial_c = 2 (inputs bit 6).
  auto b = lstmBuilder(/*batch=*/1, /*rowOffset=*/0);
  Tensor x = make(plan::F64, {1, 1, 1}, {1});
  Tensor w = make(plan::F64, {1, 4, 1}, {0, 0, 0, 1});
  Tensor r = make(plan::F64, {1, 4, 1}, {0, 0, 0, 0});
  Tensor c0 = make(plan::F64, {1, 1, 1}, {2});
  Tensor y = make(plan::F64, {1, 1, 1, 1}), yh = make(plan::F64, {1, 1, 1}),
         yc = make(plan::F64, {1, 1, 1});
  ASSERT_EQ(run(b.c, {&x, &w, &r, &c0}, {&y, &yh, &yc}), "");
  double cell = 0.5 * 2 + 0.5 * std::tanh(1.0);
  double h = 0.5 * std::tanh(cell);
  expectNear(reals(y), V({h}));
  expectNear(reals(yh), V({h}));
  expectNear(reals(yc), V({cell}));
}

TEST(KernelsTest, FallsBackToGeneric) {
  auto b = ComputeBuilder("add").iter("i", 2);
  b.in({dim(0)}).in({dim(0)}).out({dim(0)});
  Tensor x = make(plan::F32, {2}, {1, 2});
  Tensor z = make(plan::F32, {2});
  ASSERT_EQ(run(b.c, {&x, &x}, {&z}), "");
  EXPECT_EQ(reals(z), V({2, 4}));
}

TEST(KernelsTest, WrongInputCountIsAnError) {
  auto b = ComputeBuilder("softmax").iter("i", 2);
  b.in({dim(0)}).in({dim(0)}).out({dim(0)});
  Tensor x = make(plan::F32, {2});
  Tensor z = make(plan::F32, {2});
  EXPECT_NE(run(b.c, {&x, &x}, {&z}).find("takes 1 to 1 inputs"),
            std::string::npos);
}

} // namespace
