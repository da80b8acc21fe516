//===- WidenTest.cpp - 16-bit float tensors through the f32 kernels -------===//
//
// The CPU runs a bf16 or fp16 plan's kernels on f32 copies and rounds the
// results back once (cpu/Widen.h); bf16 products run on oneDNN's 16-bit
// matmul where the processor has one. Both must give what an f32 kernel
// on the same 16-bit values gives, rounded once to the result's type.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Widen.h"
#include "runtime/cpu/Kernels.h"

#include "PlanBuilder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

using namespace pax;
using namespace pax::runtime;
using namespace pax::test;

namespace {

TEST(WidenTest, RoundTripsAndRoundsToNearestEven) {
  for (plan::DType t : {plan::BF16, plan::F16}) {
    // Values a 16-bit type holds exactly come back unchanged; NaN stays NaN,
    // infinities stay infinite, an fp16 subnormal survives.
    std::vector<double> exact = {0.0,     -0.0,   1.0,      -2.5,
                                 0.15625, 1024.0, INFINITY, NAN};
    if (t == plan::F16)
      exact.push_back(std::ldexp(1.0, -24)); // the smallest subnormal
    Tensor x = make(t, {int64_t(exact.size())}, exact);
    Tensor wide = cpu::widenToF32(x);
    ASSERT_EQ(wide.dtype, plan::F32);
    Tensor back = make(t, x.shape);
    cpu::narrowFromF32(wide, back);
    EXPECT_EQ(back.data, x.data) << plan::DType_Name(t);
    EXPECT_TRUE(std::isnan(wide.real(7)));
  }
  // 1 + 2^-8 lies halfway between two bf16 values (1 and 1 + 2^-7): even
  // wins; 1 + 3 * 2^-9 rounds up.
  Tensor wide = make(plan::F32, {2},
                     {1 + std::ldexp(1.0, -8), 1 + 3 * std::ldexp(1.0, -9)});
  Tensor bf = make(plan::BF16, {2});
  cpu::narrowFromF32(wide, bf);
  EXPECT_EQ(bf.real(0), 1.0);
  EXPECT_EQ(bf.real(1), 1 + std::ldexp(1.0, -7));
}

/// A [m, k] x [k, n] matmul compute.
plan::Compute matmul() {
  return ComputeBuilder("matmul")
      .iter("m", 48)
      .iter("n", 40)
      .red("k", 64)
      .in({dim(0), dim(2)})
      .in({dim(2), dim(1)})
      .out({dim(0), dim(1)})
      .c;
}

TEST(WidenTest, SixteenBitProductsEqualTheF32ProductRoundedOnce) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(-1, 1);
  plan::Compute c = matmul();
  for (plan::DType t : {plan::BF16, plan::F16})
    for (plan::DType out : {t, plan::F32}) {
      Tensor a = make(t, {48, 64}), b = make(t, {64, 40});
      for (Tensor *x : {&a, &b})
        for (int64_t i = 0; i < x->numel(); ++i)
          x->setReal(i, u(rng));
      // The reference: f32 copies of the same 16-bit values.
      Tensor a32 = cpu::widenToF32(a), b32 = cpu::widenToF32(b);
      Tensor want = make(plan::F32, {48, 40});
      Tensor got = make(out, {48, 40});
      ASSERT_FALSE(bool(runKernel(c, {&a32, &b32}, {&want})));
      ASSERT_FALSE(bool(runKernel(c, {&a, &b}, {&got})));
      for (int64_t i = 0; i < got.numel(); ++i) {
        double w = want.real(i);
        // fp32 accumulation in another order, then one rounding.
        double ulp = out == plan::F32 ? 1e-5 : (t == plan::BF16 ? 8e-3 : 1e-3);
        ASSERT_NEAR(got.real(i), w, ulp * std::max(1.0, std::abs(w)))
            << plan::DType_Name(t) << " -> " << plan::DType_Name(out) << " at "
            << i;
      }
    }
}

} // namespace
