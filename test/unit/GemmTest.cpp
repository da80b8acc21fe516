//===- GemmTest.cpp - The blocked f32 GEMM of the CPU kernels -------------===//
#include "runtime/cpu/Gemm.h"

#include <gtest/gtest.h>
#include <tbb/task_arena.h>

#include <cmath>
#include <random>
#include <vector>

using namespace pax::runtime::cpu;

namespace {

std::vector<float> randomValues(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

/// C = alpha * A * B in double, element by element.
std::vector<double> reference(ConstMatrixF32 a, ConstMatrixF32 b,
                              double alpha) {
  std::vector<double> c(size_t(a.rows * b.cols));
  for (int64_t i = 0; i < a.rows; ++i)
    for (int64_t j = 0; j < b.cols; ++j) {
      double s = 0;
      for (int64_t k = 0; k < a.cols; ++k)
        s += double(a.data[i * a.rowStride + k * a.colStride]) *
             b.data[k * b.rowStride + j * b.colStride];
      c[i * b.cols + j] = alpha * s;
    }
  return c;
}

TEST(GemmTest, BlocksCoverTheProductOnce) {
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1},
                         {64, 3136, 576},
                         {512, 49, 4608},
                         {128, 3072, 768},
                         {3, 100000, 2},
                         {1000, 1, 4096}}) {
    GemmBlocking g = GemmBlocking::of(m, n, k);
    std::vector<int> covered(size_t(m * n), 0);
    for (int64_t b = 0; b < g.count(); ++b) {
      auto [r0, r1] = g.rows(b);
      auto [c0, c1] = g.cols(b);
      ASSERT_LT(r0, r1);
      ASSERT_LT(c0, c1);
      for (int64_t i = r0; i < r1; ++i)
        for (int64_t j = c0; j < c1; ++j)
          ++covered[i * n + j];
    }
    for (int c : covered)
      ASSERT_EQ(c, 1) << m << "x" << n << "x" << k;
  }
  EXPECT_EQ(GemmBlocking::of(0, 5, 5).count(), 0);
  EXPECT_GT(GemmBlocking::of(512, 49, 4608).count(), 8);
}

TEST(GemmTest, MatchesReferenceForAnyStrides) {
  const int64_t m = 37, n = 301, k = 129;
  std::vector<float> av = randomValues(m * k, 1), bv = randomValues(k * n, 2);
  // A row-major and transposed; B row-major, transposed and with columns
  // two apart (neither dimension contiguous: packed by the built-in kernel).
  std::vector<float> bWide = randomValues(k * n * 2, 3);
  ConstMatrixF32 as[] = {{av.data(), m, k, k, 1}, {av.data(), m, k, 1, m}};
  ConstMatrixF32 bs[] = {{bv.data(), k, n, n, 1},
                         {bv.data(), k, n, 1, k},
                         {bWide.data(), k, n, 2 * n, 2}};
  for (GemmEngine engine : {GemmEngine::Best, GemmEngine::Builtin})
    for (ConstMatrixF32 a : as)
      for (ConstMatrixF32 b : bs) {
        std::vector<float> c(size_t(m * n), NAN);
        gemmF32(a, b, {c.data(), m, n, n, 1}, 0.5f, engine);
        std::vector<double> want = reference(a, b, 0.5);
        for (size_t i = 0; i < c.size(); ++i)
          ASSERT_NEAR(c[i], want[i], 1e-4) << "at " << i;
      }
}

TEST(GemmTest, EmptyReductionGivesZeros) {
  std::vector<float> c(6, NAN);
  gemmF32({nullptr, 2, 0, 0, 1}, {nullptr, 0, 3, 3, 1}, {c.data(), 2, 3, 3, 1});
  for (float v : c)
    EXPECT_EQ(v, 0.0f);
}

TEST(GemmTest, DoesNotDependOnThreadCountOrBlockOrder) {
  const int64_t m = 200, n = 700, k = 300;
  std::vector<float> av = randomValues(m * k, 4), bv = randomValues(k * n, 5);
  ConstMatrixF32 a{av.data(), m, k, k, 1}, b{bv.data(), k, n, n, 1};
  GemmBlocking g = GemmBlocking::of(m, n, k);
  ASSERT_GT(g.count(), 1);
  for (GemmEngine engine : {GemmEngine::Best, GemmEngine::Builtin}) {
    std::vector<float> one(size_t(m * n)), many(one.size()),
        reversed(one.size());
    tbb::task_arena single(1);
    single.execute([&] {
      gemmF32(a, b, {one.data(), m, n, n, 1}, 1.0f, engine);
    });
    tbb::task_arena three(3);
    three.execute([&] {
      gemmF32(a, b, {many.data(), m, n, n, 1}, 1.0f, engine);
    });
    for (int64_t blk = g.count(); blk-- > 0;)
      gemmBlockF32(a, b, {reversed.data(), m, n, n, 1}, 1.0f, g, blk, engine);
    EXPECT_EQ(one, many);
    EXPECT_EQ(one, reversed);
  }
}

TEST(GemmTest, NamesItsBackend) {
  llvm::StringRef backend = gemmBackend();
  EXPECT_TRUE(backend == "onednn" || backend == "builtin") << backend.str();
}

} // namespace
