//===- FastKernelsTest.cpp - f32 fast paths against the reference kernels -===//
//
// runKernel takes f32 fast paths (the blocked GEMM for conv and matmul,
// vectorized elementwise ops, batch norm, row-wise norms and softmax, max
// pool) when a compute's maps allow. The same computes on f64 tensors run
// the reference kernels, and elementwise ops also run on the generic kernel:
// both are the yardsticks here, on whole tensors and on blocks of larger
// ones (offsets, halo rows), as a partitioned plan gives them.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/ConvChain.h"
#include "runtime/cpu/DnnlConv.h"
#include "runtime/cpu/Gemm.h"
#include "runtime/cpu/GenericKernel.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/MatmulChain.h"
#include "runtime/cpu/MaxPoolGrad.h"
#include "runtime/cpu/Pointwise.h"
#include "runtime/cpu/PointwiseChain.h"
#include "runtime/cpu/VectorWidth.h"
#include "runtime/cpu/Widen.h"

#include "PlanBuilder.h"

#include <gtest/gtest.h>
#include <tbb/task_arena.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

using namespace pax;
using namespace pax::runtime;
using namespace pax::test;

namespace {

/// Whether oneDNN runs bf16 primitives here: paxc is built with it and the
/// processor has AVX-512 (an AVX2-only one has no bf16 kernels: a bf16
/// product or convolution then runs on paxc's own, unfused).
bool dnnlBf16() {
  return cpu::gemmBackend() == "onednn" && __builtin_cpu_supports("avx512bw");
}

std::string run(const plan::Compute &c, std::vector<const Tensor *> ins,
                std::vector<Tensor *> outs) {
  return runWith(runKernel, c, std::move(ins), std::move(outs));
}

/// Seeded random values in [lo, hi).
Tensor random(plan::DType dt, std::vector<int64_t> shape, unsigned seed,
              double lo = -1, double hi = 1) {
  Tensor t = Tensor::zeros(dt, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.setReal(i, dist(rng));
  return t;
}

/// \p t's values in another dtype.
Tensor as(plan::DType dt, const Tensor &t) {
  Tensor r = Tensor::zeros(dt, t.shape);
  for (int64_t i = 0; i < t.numel(); ++i)
    r.setReal(i, t.real(i));
  return r;
}

/// Runs \p c on \p ins as given (f32: the fast paths) and as f64 copies
/// (the reference kernels); returns both outputs, as f64.
std::pair<Tensor, Tensor> runBoth(const plan::Compute &c,
                                  const std::vector<Tensor> &ins,
                                  std::vector<int64_t> outShape) {
  std::vector<Tensor> wide;
  std::vector<const Tensor *> fast, slow;
  for (const Tensor &t : ins)
    wide.push_back(as(plan::F64, t));
  for (size_t i = 0; i < ins.size(); ++i) {
    fast.push_back(&ins[i]);
    slow.push_back(&wide[i]);
  }
  Tensor y = Tensor::zeros(plan::F32, outShape);
  Tensor ref = Tensor::zeros(plan::F64, outShape);
  EXPECT_EQ(run(c, fast, {&y}), "");
  EXPECT_EQ(run(c, slow, {&ref}), "");
  return {as(plan::F64, y), std::move(ref)};
}

/// Every element within \p tol of the reference, relative to its size.
void expectClose(const Tensor &got, const Tensor &want, double tol) {
  ASSERT_EQ(got.shape, want.shape);
  for (int64_t i = 0; i < got.numel(); ++i) {
    double g = got.real(i), w = want.real(i);
    if (std::isnan(w)) {
      EXPECT_TRUE(std::isnan(g)) << "at " << i;
      continue;
    }
    ASSERT_NEAR(g, w, tol * (1 + std::fabs(w))) << "at " << i;
  }
}

/// Runs \p c on one thread and on three; the outputs must be identical.
void expectSameOnAnyThreadCount(const plan::Compute &c,
                                const std::vector<Tensor> &ins,
                                std::vector<int64_t> outShape) {
  std::vector<const Tensor *> in;
  for (const Tensor &t : ins)
    in.push_back(&t);
  Tensor one = Tensor::zeros(plan::F32, outShape), many = one;
  tbb::task_arena single(1), three(3);
  single.execute([&] { EXPECT_EQ(run(c, in, {&one}), ""); });
  three.execute([&] { EXPECT_EQ(run(c, in, {&many}), ""); });
  EXPECT_EQ(one.data, many.data);
}

//===----------------------------------------------------------------------===//
// Convolution.
//===----------------------------------------------------------------------===//

struct ConvCase {
  int64_t n, g, ci, co, h, w, kh, kw, sh, sw, dh, dw, offH, offW, oh, ow;
  bool bias;
};

/// A conv compute in the importer's form for \p k.
plan::Compute convCompute(const ConvCase &k) {
  if (k.g == 1) {
    auto b = ComputeBuilder("conv")
                 .iter("n", k.n)
                 .iter("co", k.co)
                 .iter("oh", k.oh)
                 .iter("ow", k.ow)
                 .red("ci", k.ci)
                 .red("kh", k.kh)
                 .red("kw", k.kw);
    b.in({dim(0), dim(4), window(2, 5, k.sh, k.dh, k.offH),
          window(3, 6, k.sw, k.dw, k.offW)});
    b.in({dim(1), dim(4), dim(5), dim(6)});
    if (k.bias)
      b.in({dim(1)});
    b.out({dim(0), dim(1), dim(2), dim(3)}).attr("group", 1);
    return b.c;
  }
  auto b = ComputeBuilder("conv")
               .iter("n", k.n)
               .iter("g", k.g)
               .iter("co", k.co)
               .iter("oh", k.oh)
               .iter("ow", k.ow)
               .red("ci", k.ci)
               .red("kh", k.kh)
               .red("kw", k.kw);
  b.in({dim(0), group({1, 5}), window(3, 6, k.sh, k.dh, k.offH),
        window(4, 7, k.sw, k.dw, k.offW)});
  b.in({group({1, 2}), dim(5), dim(6), dim(7)});
  if (k.bias)
    b.in({group({1, 2})});
  b.out({dim(0), group({1, 2}), dim(3), dim(4)}).attr("group", k.g);
  return b.c;
}

std::vector<Tensor> convInputs(const ConvCase &k, unsigned seed) {
  std::vector<Tensor> ins{
      random(plan::F32, {k.n, k.g * k.ci, k.h, k.w}, seed),
      random(plan::F32, {k.g * k.co, k.ci, k.kh, k.kw}, seed + 1)};
  if (k.bias)
    ins.push_back(random(plan::F32, {k.g * k.co}, seed + 2));
  return ins;
}

TEST(FastKernelsTest, Conv2DMatchesReference) {
  const ConvCase cases[] = {
      // n  g ci co  h  w kh kw sh sw dh dw offH offW oh ow bias
      {2, 1, 3, 5, 9, 8, 3, 3, 1, 1, 1, 1, -1, -1, 9, 8, true},   // padded
      {1, 1, 4, 6, 9, 9, 3, 3, 2, 2, 1, 1, -1, -1, 5, 5, false},  // stride 2
      {1, 1, 2, 3, 10, 9, 3, 2, 1, 1, 2, 2, -2, -1, 8, 8, true},  // dilated
      {1, 1, 20, 33, 7, 6, 1, 1, 1, 1, 1, 1, 0, 0, 7, 6, true},   // 1x1
      {1, 1, 8, 16, 9, 9, 1, 1, 2, 2, 1, 1, 0, 0, 5, 5, false},   // 1x1 s2
      {2, 2, 2, 3, 6, 7, 3, 3, 1, 1, 1, 1, -1, -1, 6, 7, true},   // grouped
      {1, 4, 1, 2, 8, 8, 3, 3, 1, 1, 1, 1, -1, -1, 8, 8, true},   // depthwise
      {1, 3, 1, 1, 7, 7, 5, 5, 2, 2, 1, 1, -2, -2, 4, 4, false},  // depthwise
      {1, 1, 1, 4, 12, 12, 7, 7, 2, 2, 1, 1, -3, -3, 6, 6, true}, // one channel
  };
  unsigned seed = 10;
  for (const ConvCase &k : cases) {
    auto [got, want] = runBoth(convCompute(k), convInputs(k, seed += 3),
                               {k.n, k.g * k.co, k.oh, k.ow});
    SCOPED_TRACE("case with ci=" + std::to_string(k.ci) +
                 " co=" + std::to_string(k.co) + " g=" + std::to_string(k.g));
    expectClose(got, want, 1e-5);
  }
}

TEST(FastKernelsTest, Conv2DOnBlocksOfALargerTensor) {
  // The whole conv: x [1, 3, 10, 9], w [4, 3, 3, 3], padding 1.
  ConvCase whole{1, 1, 3, 4, 10, 9, 3, 3, 1, 1, 1, 1, -1, -1, 10, 9, true};
  std::vector<Tensor> ins = convInputs(whole, 40);
  auto [unused, full] = runBoth(convCompute(whole), ins, {1, 4, 10, 9});
  (void)unused;
  // Output rows [r0, r1) from input rows [i0, i1): the block holds halo
  // rows, or padding where the whole tensor ends, or more rows than needed.
  struct Block {
    int64_t r0, r1, i0, i1, co0, co1;
  };
  for (Block blk : {Block{0, 4, 0, 5, 0, 4}, Block{4, 8, 3, 9, 0, 4},
                    Block{8, 10, 7, 10, 0, 4}, Block{4, 8, 0, 10, 0, 4},
                    Block{2, 7, 1, 8, 2, 4}}) {
    ConvCase k = whole;
    k.h = blk.i1 - blk.i0;
    k.oh = blk.r1 - blk.r0;
    k.co = blk.co1 - blk.co0;
    k.offH = blk.r0 - 1 - blk.i0; // global row r0 + oh + kh - 1, shifted
    plan::Compute c = convCompute(k);
    c.mutable_iters(1)->set_global_offset(blk.co0);
    c.mutable_iters(2)->set_global_offset(blk.r0);
    Tensor x = Tensor::zeros(plan::F32, {1, 3, k.h, 9});
    for (int64_t ci = 0; ci < 3; ++ci)
      for (int64_t r = 0; r < k.h; ++r)
        for (int64_t col = 0; col < 9; ++col)
          x.setReal((ci * k.h + r) * 9 + col,
                    ins[0].real((ci * 10 + blk.i0 + r) * 9 + col));
    Tensor w = Tensor::zeros(plan::F32, {k.co, 3, 3, 3});
    for (int64_t i = 0; i < w.numel(); ++i)
      w.setReal(i, ins[1].real(blk.co0 * 27 + i));
    Tensor bias = Tensor::zeros(plan::F32, {k.co});
    for (int64_t i = 0; i < k.co; ++i)
      bias.setReal(i, ins[2].real(blk.co0 + i));
    Tensor y = Tensor::zeros(plan::F32, {1, k.co, k.oh, 9});
    ASSERT_EQ(run(c, {&x, &w, &bias}, {&y}), "");
    for (int64_t co = 0; co < k.co; ++co)
      for (int64_t r = 0; r < k.oh; ++r)
        for (int64_t col = 0; col < 9; ++col)
          ASSERT_NEAR(y.real((co * k.oh + r) * 9 + col),
                      full.real(((blk.co0 + co) * 10 + blk.r0 + r) * 9 + col),
                      1e-5)
              << "block rows " << blk.r0 << ".." << blk.r1 << " at " << co
              << "," << r << "," << col;
  }
}

TEST(FastKernelsTest, Conv2DDoesNotDependOnThreadCount) {
  ConvCase big{1, 1, 32, 48, 30, 30, 3, 3, 1, 1, 1, 1, -1, -1, 30, 30, true};
  expectSameOnAnyThreadCount(convCompute(big), convInputs(big, 50),
                             {1, 48, 30, 30});
  // Four groups: one thread runs each group whole, three share each
  // group's blocks; the results must not differ.
  ConvCase grouped{1, 4, 8, 40, 30, 30, 3, 3, 1, 1, 1, 1, -1, -1, 30, 30, true};
  expectSameOnAnyThreadCount(convCompute(grouped), convInputs(grouped, 60),
                             {1, 160, 30, 30});
}

TEST(FastKernelsTest, Conv1x1ReadsRowsOfALargerInput) {
  // A 1x1 conv over rows [3, 7) of a 10-row input, whole rows: the GEMM
  // reads the input where it lies.
  ConvCase k{1, 1, 5, 6, 10, 8, 1, 1, 1, 1, 1, 1, 3, 0, 4, 8, false};
  auto [got, want] = runBoth(convCompute(k), convInputs(k, 70), {1, 6, 4, 8});
  expectClose(got, want, 1e-5);
}

/// \p a's exprs [n, c, h, w] reordered channels-last: [n, h, w, c].
void permuteChannelsLast(plan::Access &a) {
  plan::Access old = a;
  const int from[4] = {0, 2, 3, 1};
  for (int j = 0; j < 4; ++j)
    *a.mutable_exprs(j) = old.exprs(from[j]);
}

/// \p k's conv with a channels-last output, and input when \p xLast.
plan::Compute channelsLastConv(const ConvCase &k, bool xLast) {
  plan::Compute c = convCompute(k);
  if (xLast)
    permuteChannelsLast(*c.mutable_inputs(0));
  permuteChannelsLast(*c.mutable_outputs(0));
  return c;
}

/// \p k's inputs with x channels-last when \p xLast.
std::vector<Tensor> channelsLastInputs(const ConvCase &k, bool xLast,
                                       unsigned seed) {
  std::vector<Tensor> ins = convInputs(k, seed);
  if (xLast)
    ins[0] = random(plan::F32, {k.n, k.h, k.w, k.g * k.ci}, seed);
  return ins;
}

/// Runs \p c on \p ins through a device's cache (cpu::runDeviceKernel);
/// with oneDNN built in, it must have run on a oneDNN primitive.
Tensor runOnDevice(const plan::Compute &c, const std::vector<Tensor> &ins,
                   std::vector<int64_t> outShape, cpu::DnnlCache &cache) {
  std::vector<const Tensor *> in;
  for (const Tensor &t : ins)
    in.push_back(&t);
  Tensor y = Tensor::zeros(plan::F32, std::move(outShape));
  llvm::Error e = runDeviceKernel(c, in, {&y}, cache);
  EXPECT_FALSE(bool(e)) << llvm::toString(std::move(e));
  EXPECT_EQ(cache.compiled(c), cpu::gemmBackend() == "onednn");
  return as(plan::F64, y);
}

TEST(FastKernelsTest, ChannelsLastConvMatchesReference) {
  // oneDNN's kernels (Winograd's for the 3x3 stride-1 ones) against the
  // reference kernel in f64 over the same channels-last maps.
  const ConvCase cases[] = {
      // n  g ci co  h  w kh kw sh sw dh dw offH offW oh ow bias
      {2, 1, 16, 24, 9, 8, 3, 3, 1, 1, 1, 1, -1, -1, 9, 8, true}, // 3x3
      {1, 1, 20, 33, 7, 6, 1, 1, 1, 1, 1, 1, 0, 0, 7, 6, true},   // 1x1
      {1, 1, 8, 16, 9, 9, 1, 1, 2, 2, 1, 1, 0, 0, 5, 5, false},   // 1x1 s2
      {1, 1, 4, 6, 9, 9, 3, 3, 2, 2, 1, 1, -1, -1, 5, 5, false},  // stride 2
      {1, 1, 2, 3, 10, 9, 3, 2, 1, 1, 2, 2, -2, -1, 8, 8, true},  // dilated
      {2, 2, 2, 3, 6, 7, 3, 3, 1, 1, 1, 1, -1, -1, 6, 7, true},   // grouped
      {1, 4, 1, 2, 8, 8, 3, 3, 1, 1, 1, 1, -1, -1, 8, 8, true},   // depthwise
      {1, 1, 8, 8, 12, 9, 3, 3, 1, 1, 1, 1, 2, -1, 6, 9, true},   // halo rows
  };
  unsigned seed = 80;
  for (bool xLast : {true, false})
    for (const ConvCase &k : cases) {
      SCOPED_TRACE("case with ci=" + std::to_string(k.ci) +
                   " co=" + std::to_string(k.co) + " g=" + std::to_string(k.g) +
                   (xLast ? " NHWC in" : " NCHW in"));
      plan::Compute c = channelsLastConv(k, xLast);
      std::vector<Tensor> ins = channelsLastInputs(k, xLast, seed += 3);
      std::vector<int64_t> shape{k.n, k.oh, k.ow, k.g * k.co};
      cpu::DnnlCache cache;
      expectClose(runOnDevice(c, ins, shape, cache),
                  runBoth(c, ins, shape).second, 1e-4);
    }
}

TEST(FastKernelsTest, ChannelsLastConvRepacksWeightsThatChange) {
  // A device's cache keeps the packed weights of a resident weight only;
  // other weights are packed again on every call.
  ConvCase k{1, 1, 16, 16, 8, 8, 3, 3, 1, 1, 1, 1, -1, -1, 8, 8, true};
  plan::Compute c = channelsLastConv(k, true);
  std::vector<Tensor> ins = channelsLastInputs(k, true, 90);
  std::vector<int64_t> shape{1, 8, 8, 16};
  cpu::DnnlCache cache;
  expectClose(runOnDevice(c, ins, shape, cache), runBoth(c, ins, shape).second,
              1e-4);
  for (int64_t i = 0; i < ins[1].numel(); ++i)
    ins[1].setReal(i, -ins[1].real(i));
  Tensor flipped = runBoth(c, ins, shape).second;
  expectClose(runOnDevice(c, ins, shape, cache), flipped, 1e-4);
  // Resident: packed once, the same result after.
  ins[1].resident = true;
  Tensor first = runOnDevice(c, ins, shape, cache),
         again = runOnDevice(c, ins, shape, cache);
  EXPECT_EQ(first.data, again.data);
  expectClose(again, flipped, 1e-4);
}

/// \p ins with each value rounded to \p dt (BF16, F16), in \p dt.
std::vector<Tensor> rounded(plan::DType dt, const std::vector<Tensor> &ins) {
  std::vector<Tensor> out;
  for (const Tensor &t : ins)
    out.push_back(as(dt, t));
  return out;
}

/// Runs conv \p c of \p k, its tensors of 16-bit type \p dt and
/// channels-last where \p last, on a device: equal to the f64 reference on
/// the same values rounded once to \p dt, run on a oneDNN primitive where
/// paxc has oneDNN (bf16's; fp16's where the processor has one, else f32's
/// on widened copies of channels-last tensors).
void expectSixteenBitConv(const ConvCase &k, bool last, plan::DType dt,
                          unsigned seed) {
  plan::Compute c = last ? channelsLastConv(k, true) : convCompute(k);
  std::vector<Tensor> ins = rounded(dt, channelsLastInputs(k, last, seed));
  std::vector<int64_t> shape =
      last ? std::vector<int64_t>{k.n, k.oh, k.ow, k.g * k.co}
           : std::vector<int64_t>{k.n, k.g * k.co, k.oh, k.ow};
  std::vector<const Tensor *> in;
  for (const Tensor &t : ins)
    in.push_back(&t);
  Tensor y = Tensor::zeros(dt, shape);
  cpu::DnnlCache cache;
  llvm::Error e = runDeviceKernel(c, in, {&y}, cache);
  ASSERT_FALSE(bool(e)) << llvm::toString(std::move(e));
  bool onednn = cpu::gemmBackend() == "onednn";
  if (dt == plan::BF16) {
    EXPECT_EQ(cache.compiled(c, dt), dnnlBf16());
  } else if (last) {
    EXPECT_EQ(cache.compiled(c, dt) || cache.compiled(c, plan::F32), onednn);
  }
  Tensor want = as(plan::F64, as(dt, runBoth(c, ins, shape).second));
  // Accumulated in fp32 either way; one rounding apart at most.
  expectClose(as(plan::F64, y), want,
              std::ldexp(1.0, dt == plan::BF16 ? -7 : -9));
}

TEST(FastKernelsTest, SixteenBitConvEqualsTheF32ConvRoundedOnce) {
  const ConvCase cases[] = {
      {2, 1, 16, 32, 9, 8, 3, 3, 1, 1, 1, 1, -1, -1, 9, 8, true}, // 3x3
      {1, 1, 20, 33, 7, 6, 1, 1, 1, 1, 1, 1, 0, 0, 7, 6, false},  // 1x1
      {1, 1, 4, 6, 9, 9, 3, 3, 2, 2, 1, 1, -1, -1, 5, 5, true},   // stride 2
      {2, 2, 2, 3, 6, 7, 3, 3, 1, 1, 1, 1, -1, -1, 6, 7, true},   // grouped
      {1, 4, 1, 2, 8, 8, 3, 3, 1, 1, 1, 1, -1, -1, 8, 8, false},  // depthwise
  };
  unsigned seed = 300;
  for (plan::DType dt : {plan::BF16, plan::F16})
    for (bool last : {false, true})
      for (const ConvCase &k : cases) {
        SCOPED_TRACE(plan::DType_Name(dt) + " ci=" + std::to_string(k.ci) +
                     " g=" + std::to_string(k.g) + (last ? " NHWC" : " NCHW"));
        expectSixteenBitConv(k, last, dt, seed += 3);
      }
}

/// A pointwise compute of \p kind over [n, h, w, c] reading \p ins buffers
/// (\p params of them per channel) and writing buffer \p out.
/// With \p nchw, over [n, c, h, w] (the parameters along dim 1).
plan::Compute pointwise(const char *kind, std::vector<uint32_t> ins,
                        size_t params, uint32_t out, bool nchw = false) {
  auto b = nchw ? ComputeBuilder(kind).iter("n", 1).iter("c", 16).iter("h", 6)
                : ComputeBuilder(kind).iter("n", 1).iter("h", 6).iter("w", 5);
  b = nchw ? b.iter("w", 5) : b.iter("c", 16);
  for (size_t i = 0; i < ins.size(); ++i) {
    if (i + params >= ins.size() && params)
      b.in({dim(nchw ? 1 : 3)});
    else
      b.in({dim(0), dim(1), dim(2), dim(3)});
    b.c.mutable_inputs(int(i))->set_buffer(ins[i]);
  }
  b.out({dim(0), dim(1), dim(2), dim(3)});
  b.c.mutable_outputs(0)->set_buffer(out);
  if (std::string(kind) == "batch_norm")
    b.attrF("epsilon", 1e-3f);
  return b.c;
}

/// conv -> batch norm -> relu -> add (a shortcut) -> relu, in \p dt (the
/// norm's parameters f32), channels-last where \p last else NCHW, as one
/// oneDNN convolution against each compute on its own (each result stored
/// in \p dt): within \p tol. An f32 NCHW convolution is no chain (im2col
/// and a GEMM are faster). \p inPlace: the result written over the
/// shortcut it adds.
void expectConvChainEqualsOneByOne(plan::DType dt, bool last, double tol,
                                   bool inPlace = false) {
  SCOPED_TRACE(std::string(last ? "NHWC " : "NCHW ") + plan::DType_Name(dt) +
               (inPlace ? " in place" : ""));
  ConvCase k{1, 1, 8, 16, 6, 5, 3, 3, 1, 1, 1, 1, -1, -1, 6, 5, true};
  plan::Compute conv = last ? channelsLastConv(k, true) : convCompute(k);
  conv.mutable_outputs(0)->set_buffer(10);
  std::vector<plan::Compute> computes{
      conv, pointwise("batch_norm", {10, 1, 2, 3, 4}, 4, 11, !last),
      pointwise("relu", {11}, 0, 12, !last),
      pointwise("add", {5, 12}, 0, 13, !last),
      pointwise("relu", {13}, 0, 14, !last)};
  std::vector<const plan::Compute *> chain;
  for (const plan::Compute &c : computes)
    chain.push_back(&c);
  bool sixteenBit = dt != plan::F32;
  size_t want = cpu::gemmBackend() == "onednn" && (last || sixteenBit) ? 5 : 1;
  ASSERT_EQ(cpu::convChainLength(chain, sixteenBit), want);
  std::vector<Tensor> ins = rounded(dt, channelsLastInputs(k, last, 97));
  std::vector<Tensor> norm{
      random(plan::F32, {16}, 98), random(plan::F32, {16}, 99),
      random(plan::F32, {16}, 100), random(plan::F32, {16}, 101, 0.5, 2)};
  std::vector<int64_t> shape = last ? std::vector<int64_t>{1, 6, 5, 16}
                                    : std::vector<int64_t>{1, 16, 6, 5};
  Tensor shortcut = as(dt, random(plan::F32, shape, 102));
  // One by one.
  std::vector<Tensor> t(5, Tensor::zeros(dt, shape));
  ASSERT_EQ(run(computes[0], {&ins[0], &ins[1], &ins[2]}, {&t[0]}), "");
  ASSERT_EQ(run(computes[1], {&t[0], &norm[0], &norm[1], &norm[2], &norm[3]},
                {&t[1]}),
            "");
  ASSERT_EQ(run(computes[2], {&t[1]}, {&t[2]}), "");
  ASSERT_EQ(run(computes[3], {&shortcut, &t[2]}, {&t[3]}), "");
  ASSERT_EQ(run(computes[4], {&t[3]}, {&t[4]}), "");
  // As one.
  std::vector<ChainLink> links(5);
  Tensor out = inPlace ? shortcut : Tensor::zeros(dt, shape);
  for (size_t i = 0; i < 5; ++i)
    links[i].compute = &computes[i];
  links[0].inputs = {&ins[0], &ins[1], &ins[2]};
  links[1].inputs = {nullptr, &norm[0], &norm[1], &norm[2], &norm[3]};
  links[2].inputs = {nullptr};
  links[3].inputs = {inPlace ? &out : &shortcut, nullptr};
  links[4].inputs = {nullptr};
  links[4].outputs = {&out};
  cpu::DnnlCache cache;
  llvm::Expected<bool> fused = cpu::runConvChain(links, cache);
  ASSERT_TRUE(bool(fused)) << llvm::toString(fused.takeError());
  ASSERT_EQ(*fused, want > 1 && (dt != plan::BF16 || dnnlBf16()));
  if (*fused)
    expectClose(as(plan::F64, out), as(plan::F64, t[4]), tol);
}

TEST(FastKernelsTest, ConvChainEqualsItsComputesOneByOne) {
  expectConvChainEqualsOneByOne(plan::F32, /*last=*/true, 1e-4);
  expectConvChainEqualsOneByOne(plan::F32, /*last=*/false, 1e-4);
  expectConvChainEqualsOneByOne(plan::F32, /*last=*/true, 1e-4,
                                /*inPlace=*/true);
}

TEST(FastKernelsTest, SixteenBitConvChainInEitherLayout) {
  // The batch norm is folded into the weights before they are rounded:
  // four roundings to bf16 one by one, two fused (weights, result).
  expectConvChainEqualsOneByOne(plan::BF16, /*last=*/true, 3e-2);
  expectConvChainEqualsOneByOne(plan::BF16, /*last=*/false, 3e-2);
}

/// The computes of a 3x3, stride-2, padded max pool of x [2, 3, 7, 7]
/// (buffer 1) into y (2) and of its input gradient from dy (3) as autodiff
/// writes it: equal, where (with the constant of buffer 4), scatter_add.
std::vector<plan::Compute> maxPoolGradComputes() {
  auto space = [](const char *kind, bool reduce) {
    auto b = ComputeBuilder(kind).iter("n", 2).iter("c", 3).iter("oh", 4);
    b.iter("ow", 4);
    if (reduce)
      return b.red("kh", 3).red("kw", 3);
    return b.iter("kh", 3).iter("kw", 3);
  };
  auto bind = [](ComputeBuilder &b, std::vector<uint32_t> bufs) {
    for (size_t i = 0; i + 1 < bufs.size(); ++i)
      b.c.mutable_inputs(int(i))->set_buffer(bufs[i]);
    b.c.mutable_outputs(0)->set_buffer(bufs.back());
    return b.c;
  };
  Expr rows = window(2, 4, 2, 1, -1), cols = window(3, 5, 2, 1, -1);
  ComputeBuilder pool = space("max_pool", true);
  pool.in({dim(0), dim(1), rows, cols}).out({dim(0), dim(1), dim(2), dim(3)});
  ComputeBuilder eq = space("equal", false), where = space("where", false),
                 scatter = space("scatter_add", false);
  std::initializer_list<Expr> points{dim(0), dim(1), dim(2),
                                     dim(3), dim(4), dim(5)};
  eq.in({dim(0), dim(1), rows, cols}).in({dim(0), dim(1), dim(2), dim(3)});
  eq.out(points);
  where.in(points).in({dim(0), dim(1), dim(2), dim(3)}).in({}).out(points);
  scatter.in(points).out({dim(0), dim(1), rows, cols});
  return {bind(pool, {1, 2}), bind(eq, {1, 2, 10}), bind(where, {10, 3, 4, 11}),
          bind(scatter, {11, 12})};
}

TEST(FastKernelsTest, MaxPoolGradChainEqualsItsComputesOneByOne) {
  std::vector<plan::Compute> c = maxPoolGradComputes();
  std::vector<const plan::Compute *> chain{&c[1], &c[2], &c[3]};
  ASSERT_EQ(cpu::maxPoolGradChainLength(chain), 3u);
  // dy read through another map is not a pool's gradient.
  plan::Compute other = c[2];
  other.mutable_inputs(1)->mutable_exprs(3)->set_dims(0, 4);
  EXPECT_EQ(cpu::maxPoolGradChainLength({&c[1], &other, &c[3]}), 1u);
  // Few distinct values: windows with ties, maxima shared by windows.
  Tensor x = random(plan::F32, {2, 3, 7, 7}, 120);
  for (int64_t i = 0; i < x.numel(); ++i)
    x.setReal(i, std::round(x.real(i) * 2) / 2);
  Tensor y = Tensor::zeros(plan::F32, {2, 3, 4, 4}),
         dy = random(plan::F32, {2, 3, 4, 4}, 121),
         zero = Tensor::zeros(plan::F32, {});
  ASSERT_EQ(run(c[0], {&x}, {&y}), "");
  // One by one.
  Tensor hit = Tensor::zeros(plan::I1, {2, 3, 4, 4, 3, 3}),
         routed = Tensor::zeros(plan::F32, {2, 3, 4, 4, 3, 3}),
         want = Tensor::zeros(plan::F32, {2, 3, 7, 7});
  ASSERT_EQ(run(c[1], {&x, &y}, {&hit}), "");
  ASSERT_EQ(run(c[2], {&hit, &dy, &zero}, {&routed}), "");
  ASSERT_EQ(run(c[3], {&routed}, {&want}), "");
  // As one, over a result that held other values.
  Tensor got = random(plan::F32, {2, 3, 7, 7}, 122);
  std::vector<ChainLink> links(3);
  for (size_t i = 0; i < 3; ++i)
    links[i].compute = chain[i];
  links[0].inputs = {&x, &y};
  links[1].inputs = {nullptr, &dy, &zero};
  links[2].inputs = {nullptr};
  links[2].outputs = {&got};
  llvm::Expected<bool> fused = cpu::runMaxPoolGradChain(links);
  ASSERT_TRUE(bool(fused)) << llvm::toString(fused.takeError());
  ASSERT_TRUE(*fused);
  EXPECT_EQ(got.data, want.data);
  // A result over dy's bytes is not written.
  Tensor alias =
      Tensor::view(plan::F32, {2, 3, 4, 4}, got.data.data(), /*zero=*/false);
  links[1].inputs[1] = &alias;
  fused = cpu::runMaxPoolGradChain(links);
  ASSERT_TRUE(bool(fused));
  EXPECT_FALSE(*fused);
}

/// A compute of \p kind over [64, 96] reading buffers \p ins point by point
/// and writing buffer \p out.
plan::Compute pointwise2D(const char *kind, std::vector<uint32_t> ins,
                          uint32_t out) {
  auto b = ComputeBuilder(kind).iter("i", 64).iter("j", 96);
  for (size_t k = 0; k < ins.size(); ++k) {
    b.in({dim(0), dim(1)});
    b.c.mutable_inputs(int(k))->set_buffer(ins[k]);
  }
  b.out({dim(0), dim(1)});
  b.c.mutable_outputs(0)->set_buffer(out);
  return b.c;
}

/// gemm (with a bias) -> gelu -> add (a residual) in \p dt, as one oneDNN
/// matmul with post-ops against each compute on its own (each result
/// stored in \p dt): within \p tol.
void expectMatmulChainEqualsOneByOne(plan::DType dt, double tol) {
  SCOPED_TRACE(plan::DType_Name(dt));
  auto g = ComputeBuilder("gemm").iter("m", 64).iter("n", 96).red("k", 40);
  g.in({dim(0), dim(2)}).in({dim(2), dim(1)}).in({dim(1)});
  g.out({dim(0), dim(1)});
  g.c.mutable_outputs(0)->set_buffer(10);
  std::vector<plan::Compute> computes{g.c, pointwise2D("gelu", {10}, 11),
                                      pointwise2D("add", {5, 11}, 12)};
  std::vector<const plan::Compute *> chain;
  for (const plan::Compute &c : computes)
    chain.push_back(&c);
  size_t want = cpu::gemmBackend() == "onednn" ? 3 : 1;
  ASSERT_EQ(cpu::matmulChainLength(chain), want);
  // An activation after the add ends the chain there.
  plan::Compute relu = pointwise2D("relu", {12}, 13);
  chain.push_back(&relu);
  EXPECT_EQ(cpu::matmulChainLength(chain), want);
  Tensor a = as(dt, random(plan::F32, {64, 40}, 110)),
         w = as(dt, random(plan::F32, {40, 96}, 111)),
         bias = as(dt, random(plan::F32, {96}, 112)),
         residual = as(dt, random(plan::F32, {64, 96}, 113));
  // One by one.
  std::vector<Tensor> t(3, Tensor::zeros(dt, {64, 96}));
  ASSERT_EQ(run(computes[0], {&a, &w, &bias}, {&t[0]}), "");
  ASSERT_EQ(run(computes[1], {&t[0]}, {&t[1]}), "");
  ASSERT_EQ(run(computes[2], {&residual, &t[1]}, {&t[2]}), "");
  // As one, the result written over the residual (in place).
  Tensor out = residual;
  std::vector<ChainLink> links(3);
  for (size_t i = 0; i < 3; ++i)
    links[i].compute = &computes[i];
  links[0].inputs = {&a, &w, &bias};
  links[1].inputs = {nullptr};
  links[2].inputs = {&out, nullptr};
  links[2].outputs = {&out};
  cpu::DnnlCache cache;
  llvm::Expected<bool> fused = cpu::runMatmulChain(links, cache);
  ASSERT_TRUE(bool(fused)) << llvm::toString(fused.takeError());
  ASSERT_EQ(*fused, want > 1 && (dt != plan::BF16 || dnnlBf16()));
  if (*fused)
    expectClose(as(plan::F64, out), as(plan::F64, t[2]), tol);
}

TEST(FastKernelsTest, MatmulChainEqualsItsComputesOneByOne) {
  expectMatmulChainEqualsOneByOne(plan::F32, 1e-5);
  // Three roundings to bf16 one by one, one fused.
  expectMatmulChainEqualsOneByOne(plan::BF16, 3e-2);
}

/// An elementwise compute of \p kind over [3, 700] reading \p ins (a
/// negative buffer id: a one-element constant) and writing \p out.
plan::Compute elementwise(const char *kind, std::vector<int> ins,
                          uint32_t out) {
  auto b = ComputeBuilder(kind).iter("i", 3).iter("j", 700);
  for (size_t k = 0; k < ins.size(); ++k) {
    if (ins[k] < 0)
      b.in({bcast(), bcast()});
    else
      b.in({dim(0), dim(1)});
    b.c.mutable_inputs(int(k))->set_buffer(uint32_t(std::abs(ins[k])));
  }
  b.out({dim(0), dim(1)});
  b.c.mutable_outputs(0)->set_buffer(out);
  return b.c;
}

TEST(FastKernelsTest, PointwiseChainEqualsItsComputesOneByOne) {
  // GELU as exporters write it: x / sqrt(2), erf, + 1, * x, * 0.5; the
  // constants one-element broadcasts. Tile by tile it computes every point
  // as the ops one by one do, bit for bit.
  std::vector<plan::Compute> computes{
      elementwise("div", {1, -2}, 10), elementwise("erf", {10}, 11),
      elementwise("add", {11, -3}, 12), elementwise("mul", {1, 12}, 13),
      elementwise("mul", {13, -4}, 14)};
  std::vector<const plan::Compute *> chain;
  for (const plan::Compute &c : computes)
    chain.push_back(&c);
  ASSERT_EQ(cpu::pointwiseChainLength(chain), 5u);
  Tensor x = random(plan::F32, {3, 700}, 110, -4, 4);
  x.setReal(5, NAN);
  auto scalar = [](double v) {
    Tensor t = Tensor::zeros(plan::F32, {1, 1});
    t.setReal(0, v);
    return t;
  };
  Tensor sqrt2 = scalar(1.4142135), one = scalar(1), half = scalar(0.5);
  std::vector<Tensor> t(5, Tensor::zeros(plan::F32, {3, 700}));
  ASSERT_EQ(run(computes[0], {&x, &sqrt2}, {&t[0]}), "");
  ASSERT_EQ(run(computes[1], {&t[0]}, {&t[1]}), "");
  ASSERT_EQ(run(computes[2], {&t[1], &one}, {&t[2]}), "");
  ASSERT_EQ(run(computes[3], {&x, &t[2]}, {&t[3]}), "");
  ASSERT_EQ(run(computes[4], {&t[3], &half}, {&t[4]}), "");
  // The intermediate results as a device gives them: type and shape only.
  std::vector<ChainLink> links(5);
  std::vector<Tensor> between(4);
  for (size_t i = 0; i < 5; ++i) {
    links[i].compute = &computes[i];
    if (i < 4) {
      between[i].shape = {3, 700};
      links[i].outputs = {&between[i]};
    }
  }
  Tensor out = Tensor::zeros(plan::F32, {3, 700});
  links[0].inputs = {&x, &sqrt2};
  links[1].inputs = {nullptr};
  links[2].inputs = {nullptr, &one};
  links[3].inputs = {&x, nullptr};
  links[4].inputs = {nullptr, &half};
  links[4].outputs = {&out};
  llvm::Expected<bool> fused = cpu::runPointwiseChain(links);
  ASSERT_TRUE(bool(fused)) << llvm::toString(fused.takeError());
  ASSERT_TRUE(*fused);
  EXPECT_EQ(out.data, t[4].data);
  // A result that is not f32 (a cast's) or partly over an input is
  // refused (the device then runs the ops one by one).
  between[1].dtype = plan::I64;
  fused = cpu::runPointwiseChain(links);
  ASSERT_TRUE(bool(fused)) << llvm::toString(fused.takeError());
  EXPECT_FALSE(*fused);
  between[1].dtype = plan::F32;
  Tensor arena = Tensor::zeros(plan::F32, {2 * 2100});
  Tensor in = Tensor::view(plan::F32, {3, 700}, arena.data.data(), false);
  Tensor over =
      Tensor::view(plan::F32, {3, 700}, arena.data.data() + 16, false);
  links[0].inputs = {&in, &sqrt2};
  links[3].inputs = {&in, nullptr};
  links[4].outputs = {&over};
  fused = cpu::runPointwiseChain(links);
  ASSERT_TRUE(bool(fused)) << llvm::toString(fused.takeError());
  EXPECT_FALSE(*fused);
}

TEST(FastKernelsTest, WidenedChainRoundsTheF32ChainOnce) {
  // A bf16 chain the pointwise kernel does not take runs as the f32 chain
  // on f32 copies (cpu::runChainWidened), its result rounded once: bit for
  // bit the f32 chain's on the same values, rounded.
  std::vector<plan::Compute> computes{elementwise("mul", {1, 1}, 10),
                                      elementwise("erf", {10}, 11),
                                      elementwise("add", {11, 2}, 12)};
  Tensor x = as(plan::BF16, random(plan::F32, {3, 700}, 120, -2, 2)),
         y = as(plan::BF16, random(plan::F32, {3, 700}, 121));
  auto chainOf = [&](plan::DType dt, const Tensor &a, const Tensor &b,
                     std::vector<Tensor> &between, Tensor &out) {
    std::vector<ChainLink> links(3);
    between.assign(2, Tensor());
    for (size_t i = 0; i < 3; ++i) {
      links[i].compute = &computes[i];
      if (i < 2) {
        between[i].dtype = dt;
        between[i].shape = {3, 700};
        links[i].outputs = {&between[i]};
      }
    }
    links[0].inputs = {&a, &a};
    links[1].inputs = {&between[0]};
    links[2].inputs = {&between[1], &b};
    links[2].outputs = {&out};
    return links;
  };
  std::vector<Tensor> between;
  Tensor out = Tensor::zeros(plan::BF16, {3, 700});
  std::vector<ChainLink> links = chainOf(plan::BF16, x, y, between, out);
  llvm::Expected<bool> direct = cpu::runPointwiseChain(links);
  ASSERT_TRUE(bool(direct) && !*direct) << "the f32 kernel took bf16";
  ASSERT_TRUE(cpu::holds16BitFloats(links));
  llvm::Expected<bool> fused =
      cpu::runChainWidened(links, nullptr, [](llvm::ArrayRef<ChainLink> wide) {
        return cpu::runPointwiseChain(wide);
      });
  ASSERT_TRUE(bool(fused)) << llvm::toString(fused.takeError());
  ASSERT_TRUE(*fused);
  Tensor xf = as(plan::F32, x), yf = as(plan::F32, y);
  Tensor want = Tensor::zeros(plan::F32, {3, 700});
  std::vector<Tensor> wideBetween;
  std::vector<ChainLink> f32 = chainOf(plan::F32, xf, yf, wideBetween, want);
  fused = cpu::runPointwiseChain(f32);
  ASSERT_TRUE(bool(fused) && *fused);
  EXPECT_EQ(out.data, as(plan::BF16, want).data);
}

TEST(FastKernelsTest, PointwiseChainTakesAComparisonAsWheresCondition) {
  // relu's gradient: where(x > 0, dy, 0); the bools never stored, a tile
  // of 1.0f and 0.0f instead. The same bits as one by one, NaN included;
  // bools that the where reads as a value (not its condition) are refused.
  std::vector<plan::Compute> computes{elementwise("greater", {1, -2}, 10),
                                      elementwise("where", {10, 3, -2}, 11)};
  ASSERT_EQ(cpu::pointwiseChainLength({&computes[0], &computes[1]}), 2u);
  Tensor x = random(plan::F32, {3, 700}, 130, -2, 2),
         dy = random(plan::F32, {3, 700}, 131),
         zero = Tensor::zeros(plan::F32, {1, 1});
  x.setReal(7, NAN);
  x.setReal(8, 0.0);
  Tensor hit = Tensor::zeros(plan::I1, {3, 700}),
         want = Tensor::zeros(plan::F32, {3, 700});
  ASSERT_EQ(run(computes[0], {&x, &zero}, {&hit}), "");
  ASSERT_EQ(run(computes[1], {&hit, &dy, &zero}, {&want}), "");
  Tensor between, out = Tensor::zeros(plan::F32, {3, 700});
  between.dtype = plan::I1;
  between.shape = {3, 700};
  std::vector<ChainLink> links(2);
  links[0] = {&computes[0], {&x, &zero}, {&between}};
  links[1] = {&computes[1], {nullptr, &dy, &zero}, {&out}};
  llvm::Expected<bool> fused = cpu::runPointwiseChain(links);
  ASSERT_TRUE(bool(fused)) << llvm::toString(fused.takeError());
  ASSERT_TRUE(*fused);
  EXPECT_EQ(out.data, want.data);
  plan::Compute asValue = elementwise("where", {1, 10, -2}, 11);
  links[1] = {&asValue, {&x, nullptr, &zero}, {&out}};
  fused = cpu::runPointwiseChain(links);
  ASSERT_TRUE(bool(fused));
  EXPECT_FALSE(*fused);
}

TEST(FastKernelsTest, ChannelsLastPoolsMatchReference) {
  // 3x3 stride 2 padding 1 over [n, h, w, c], a NaN inside: max, and an
  // average that does not count the padding.
  for (const char *kind : {"max_pool", "average_pool"}) {
    auto b = ComputeBuilder(kind)
                 .iter("n", 2)
                 .iter("c", 5)
                 .iter("oh", 4)
                 .iter("ow", 4)
                 .red("kh", 3)
                 .red("kw", 3);
    b.in({dim(0), window(2, 4, 2, 1, -1), window(3, 5, 2, 1, -1), dim(1)});
    b.out({dim(0), dim(2), dim(3), dim(1)}).attrInts("pads", {1, 1, 1, 1});
    Tensor x = random(plan::F32, {2, 8, 8, 5}, 95);
    x.setReal(23, NAN);
    auto [y, r] = runBoth(b.c, {x}, {2, 4, 4, 5});
    SCOPED_TRACE(kind);
    expectClose(y, r, 1e-6);
  }
}

//===----------------------------------------------------------------------===//
// Matmul and gemm.
//===----------------------------------------------------------------------===//

TEST(FastKernelsTest, MatmulMatchesReference) {
  // Batched, with B shared by the batch.
  auto bat =
      ComputeBuilder("matmul").iter("b", 3).iter("m", 5).iter("n", 70).red("k",
                                                                           33);
  bat.in({dim(0), dim(1), dim(3)}).in({dim(3), dim(2)});
  bat.out({dim(0), dim(1), dim(2)});
  auto [y1, r1] = runBoth(
      bat.c, {random(plan::F32, {3, 5, 33}, 1), random(plan::F32, {33, 70}, 2)},
      {3, 5, 70});
  expectClose(y1, r1, 1e-5);

  // B stored transposed ([n, k]) and A a block of a larger tensor: rows
  // [4, 12) of a [20, k] tensor.
  auto blk = ComputeBuilder("matmul").iter("m", 8).iter("n", 40).red("k", 65);
  blk.c.mutable_iters(0)->set_global_offset(4);
  blk.in({dim(0, 4), dim(2)}).in({dim(1), dim(2)}).out({dim(0), dim(1)});
  auto [y2, r2] = runBoth(
      blk.c, {random(plan::F32, {20, 65}, 3), random(plan::F32, {40, 65}, 4)},
      {8, 40});
  expectClose(y2, r2, 1e-5);

  // A vector times a matrix: no row dim.
  auto vec = ComputeBuilder("matmul").iter("n", 50).red("k", 20);
  vec.in({dim(1)}).in({dim(1), dim(0)}).out({dim(0)});
  auto [y3, r3] = runBoth(
      vec.c, {random(plan::F32, {20}, 5), random(plan::F32, {20, 50}, 6)},
      {50});
  expectClose(y3, r3, 1e-5);
}

TEST(FastKernelsTest, GemmWithAlphaBetaAndBroadcastC) {
  auto b = ComputeBuilder("gemm").iter("m", 9).iter("n", 130).red("k", 40);
  b.in({dim(2), dim(0)}).in({dim(1), dim(2)}).in({bcast(), dim(1)});
  b.out({dim(0), dim(1)}).attrF("alpha", 2).attrF("beta", 0.5f);
  auto [y, r] =
      runBoth(b.c,
              {random(plan::F32, {40, 9}, 7), random(plan::F32, {130, 40}, 8),
               random(plan::F32, {1, 130}, 9)},
              {9, 130});
  expectClose(y, r, 1e-5);
}

TEST(FastKernelsTest, MatmulDoesNotDependOnThreadCount) {
  auto b =
      ComputeBuilder("matmul").iter("b", 2).iter("m", 130).iter("n", 300).red(
          "k", 200);
  b.in({dim(0), dim(1), dim(3)}).in({dim(0), dim(3), dim(2)});
  b.out({dim(0), dim(1), dim(2)});
  expectSameOnAnyThreadCount(b.c,
                             {random(plan::F32, {2, 130, 200}, 10),
                              random(plan::F32, {2, 200, 300}, 11)},
                             {2, 130, 300});
}

/// A product with a weight B ([k, n], or [n, k] when \p bT) shared by the
/// batch: on a device with oneDNN it runs on the matmul primitive.
struct WeightProduct {
  plan::Compute c;
  std::vector<Tensor> ins;
  std::vector<int64_t> outShape;
};

WeightProduct weightProducts(int which, unsigned seed) {
  auto t = [&](std::vector<int64_t> shape) {
    return random(plan::F32, std::move(shape), seed++);
  };
  switch (which) {
  case 0: { // A batch of sequences, folded into the rows.
    auto b = ComputeBuilder("matmul").iter("b", 3).iter("m", 40).iter("n", 70);
    b.red("k", 33).in({dim(0), dim(1), dim(3)}).in({dim(3), dim(2)});
    b.out({dim(0), dim(1), dim(2)});
    return {b.c, {t({3, 40, 33}), t({33, 70})}, {3, 40, 70}};
  }
  case 1: { // B transposed, A rows [4, 44) of a larger tensor, a bias.
    auto b = ComputeBuilder("gemm").iter("m", 40).iter("n", 300).red("k", 65);
    b.c.mutable_iters(0)->set_global_offset(4);
    b.in({dim(0, 4), dim(2)}).in({dim(1), dim(2)}).in({dim(1)});
    b.out({dim(0), dim(1)});
    return {b.c, {t({50, 65}), t({300, 65}), t({300})}, {40, 300}};
  }
  case 2: { // A whole C added, and a batch that is not adjacent to the rows.
    auto b = ComputeBuilder("gemm").iter("m", 36).iter("b", 2).iter("n", 130);
    b.red("k", 20).in({dim(0), dim(1), dim(3)}).in({dim(3), dim(2)});
    b.in({dim(1), dim(0), dim(2)}).out({dim(1), dim(0), dim(2)});
    return {b.c, {t({36, 2, 20}), t({20, 130}), t({2, 36, 130})}, {2, 36, 130}};
  }
  default: { // Large enough for several blocks of rows and columns.
    auto b = ComputeBuilder("gemm").iter("m", 300).iter("n", 700).red("k", 96);
    b.in({dim(0), dim(2)}).in({dim(2), dim(1)}).in({bcast(), dim(1)});
    b.out({dim(0), dim(1)});
    return {b.c, {t({300, 96}), t({96, 700}), t({1, 700})}, {300, 700}};
  }
  }
}

TEST(FastKernelsTest, MatmulWithAWeightMatchesReference) {
  // On a device: the matmul primitive (batch folded into rows, transposed
  // B, block offsets, a bias, a whole C, batch points apart, several
  // blocks), against the reference kernel in f64.
  for (int which = 0; which < 4; ++which) {
    SCOPED_TRACE("product " + std::to_string(which));
    WeightProduct w = weightProducts(which, 100 + 10 * unsigned(which));
    cpu::DnnlCache cache;
    expectClose(runOnDevice(w.c, w.ins, w.outShape, cache),
                runBoth(w.c, w.ins, w.outShape).second, 1e-5);
  }
}

TEST(FastKernelsTest, MatmulWithAWeightRepacksWeightsThatChange) {
  WeightProduct w = weightProducts(3, 140);
  cpu::DnnlCache cache;
  expectClose(runOnDevice(w.c, w.ins, w.outShape, cache),
              runBoth(w.c, w.ins, w.outShape).second, 1e-5);
  for (int64_t i = 0; i < w.ins[1].numel(); ++i)
    w.ins[1].setReal(i, -w.ins[1].real(i));
  Tensor flipped = runBoth(w.c, w.ins, w.outShape).second;
  expectClose(runOnDevice(w.c, w.ins, w.outShape, cache), flipped, 1e-5);
  w.ins[1].resident = true;
  Tensor first = runOnDevice(w.c, w.ins, w.outShape, cache),
         again = runOnDevice(w.c, w.ins, w.outShape, cache);
  EXPECT_EQ(first.data, again.data);
  expectClose(again, flipped, 1e-5);
}

TEST(FastKernelsTest, MatmulWithAWeightDoesNotDependOnThreadCount) {
  // The primitive's blocks depend on the sizes only, each runs on one
  // thread.
  for (int which : {0, 3}) {
    WeightProduct w = weightProducts(which, 150);
    expectSameOnAnyThreadCount(w.c, w.ins, w.outShape);
  }
}

//===----------------------------------------------------------------------===//
// Elementwise ops and batch norm.
//===----------------------------------------------------------------------===//

/// Runs \p c with runKernel and with runGeneric on the same f32 inputs.
std::pair<Tensor, Tensor> runFastAndGeneric(const plan::Compute &c,
                                            const std::vector<Tensor> &ins,
                                            std::vector<int64_t> outShape) {
  std::vector<const Tensor *> in;
  for (const Tensor &t : ins)
    in.push_back(&t);
  Tensor fast = Tensor::zeros(plan::F32, outShape), slow = fast;
  EXPECT_EQ(run(c, in, {&fast}), "");
  llvm::Error e = runGeneric(c, in, {&slow});
  EXPECT_FALSE(bool(e)) << llvm::toString(std::move(e));
  return {std::move(fast), std::move(slow)};
}

TEST(FastKernelsTest, ElementwiseMatchesGenericKernel) {
  // x [3, 5, 70] read whole, or as rows [2, 5) of a [6, 5, 70] tensor; y a
  // broadcast [1, 5, 1]; z [3, 5, 70]; the result written as given or
  // transposed to [70, 3, 5].
  Tensor x = random(plan::F32, {3, 5, 70}, 20, -3, 3);
  Tensor big = random(plan::F32, {6, 5, 70}, 21, -3, 3);
  Tensor y = random(plan::F32, {1, 5, 1}, 22, 0.5, 2);
  Tensor z = random(plan::F32, {3, 5, 70}, 23, -3, 3);
  x.setReal(7, NAN);
  z.setReal(8, NAN);
  z.setReal(100, INFINITY);
  struct Op {
    const char *kind;
    int arity;
    bool exact;
    const char *approximate = nullptr;
  };
  for (Op op : {Op{"add", 2, true},        Op{"sub", 2, true},
                Op{"mul", 2, true},        Op{"div", 2, true},
                Op{"sum", 2, true},        Op{"sum", 3, true},
                Op{"mean", 3, true},       Op{"max", 3, true},
                Op{"min", 2, true},        Op{"pow", 2, true},
                Op{"relu", 1, true},       Op{"neg", 1, true},
                Op{"reciprocal", 1, true}, Op{"leaky_relu", 1, true},
                Op{"sigmoid", 1, false},   Op{"exp", 1, false},
                Op{"tanh", 1, false},      Op{"abs", 1, true},
                Op{"sqrt", 1, true},       Op{"erf", 1, false},
                Op{"gelu", 1, false},      Op{"gelu", 1, false, "tanh"},
                Op{"gelu_grad", 2, false}, Op{"gelu_grad", 2, false, "tanh"}})
    for (bool block : {false, true})
      for (bool transposed : {false, true}) {
        SCOPED_TRACE(std::string(op.kind) + "/" + std::to_string(op.arity) +
                     (block ? " block" : "") +
                     (transposed ? " transposed" : ""));
        auto b =
            ComputeBuilder(op.kind).iter("i", 3).iter("j", 5).iter("k", 70);
        if (op.approximate)
          b.attrS("approximate", op.approximate);
        std::vector<Tensor> ins{block ? big : x};
        b.in({dim(0, block ? 2 : 0), dim(1), dim(2)});
        if (op.arity > 1) {
          b.in({bcast(), dim(1), bcast()});
          ins.push_back(y);
        }
        if (op.arity > 2) {
          b.in({dim(0), dim(1), dim(2)});
          ins.push_back(z);
        }
        std::vector<int64_t> shape{3, 5, 70};
        if (transposed) {
          b.out({dim(2), dim(0), dim(1)});
          shape = {70, 3, 5};
        } else {
          b.out({dim(0), dim(1), dim(2)});
        }
        auto [fast, slow] = runFastAndGeneric(b.c, ins, shape);
        if (op.exact)
          EXPECT_EQ(fast.data, slow.data);
        else
          expectClose(as(plan::F64, fast), as(plan::F64, slow), 1e-6);
      }
}

TEST(FastKernelsTest, ElementwiseWithMissingOperandsMatchesGenericKernel) {
  // A plan that gives a binary op one input reads the missing one as 0.
  for (const char *kind : {"add", "sub", "mul", "div"}) {
    auto b = ComputeBuilder(kind).iter("i", 9);
    b.in({dim(0)}).out({dim(0)});
    auto [fast, slow] =
        runFastAndGeneric(b.c, {random(plan::F32, {9}, 24)}, {9});
    EXPECT_EQ(fast.data, slow.data) << kind;
  }
}

TEST(FastKernelsTest, ComparisonsMatchGenericKernel) {
  // f32 operands (one broadcast, NaNs and ties among them) to bools.
  Tensor x = random(plan::F32, {3, 70}, 30), y = random(plan::F32, {70}, 31);
  x.setReal(5, NAN);
  x.setReal(9, y.real(9));
  for (const char *kind :
       {"equal", "less", "less_or_equal", "greater", "greater_or_equal"}) {
    auto b = ComputeBuilder(kind).iter("i", 3).iter("j", 70);
    b.in({dim(0), dim(1)}).in({dim(1)}).out({dim(1), dim(0)});
    Tensor fast = Tensor::zeros(plan::I1, {70, 3}), slow = fast;
    EXPECT_EQ(run(b.c, {&x, &y}, {&fast}), "");
    llvm::Error e = runGeneric(b.c, {&x, &y}, {&slow});
    EXPECT_FALSE(bool(e)) << llvm::toString(std::move(e));
    EXPECT_EQ(fast.data, slow.data) << kind;
  }
}

TEST(FastKernelsTest, CastsMatchGenericKernel) {
  // f32 to bools (NaN true, -0 false) read transposed, and f32 to f32.
  Tensor x = random(plan::F32, {3, 70}, 32);
  x.setReal(5, NAN);
  x.setReal(6, -0.0);
  x.setReal(7, 0.0);
  for (plan::DType to : {plan::I1, plan::F32}) {
    auto b = ComputeBuilder("cast").iter("i", 3).iter("j", 70);
    b.in({dim(0), dim(1)}).out({dim(1), dim(0)});
    Tensor fast = Tensor::zeros(to, {70, 3}), slow = fast;
    EXPECT_EQ(run(b.c, {&x}, {&fast}), "");
    llvm::Error e = runGeneric(b.c, {&x}, {&slow});
    EXPECT_FALSE(bool(e)) << llvm::toString(std::move(e));
    EXPECT_EQ(fast.data, slow.data) << plan::DType_Name(to);
  }
}

TEST(FastKernelsTest, WhereWithABoolConditionMatchesGenericKernel) {
  // The condition a bool [3, 70] read transposed, x broadcast along it.
  Tensor cond = Tensor::zeros(plan::I1, {70, 3});
  for (int64_t i = 0; i < cond.numel(); ++i)
    cond.setReal(i, (i * 7) % 3 == 0);
  Tensor x = random(plan::F32, {3, 1}, 25), y = random(plan::F32, {3, 70}, 26);
  y.setReal(5, NAN);
  auto b = ComputeBuilder("where").iter("i", 3).iter("j", 70);
  b.in({dim(1), dim(0)}).in({dim(0), bcast()}).in({dim(0), dim(1)});
  b.out({dim(0), dim(1)});
  auto [fast, slow] = runFastAndGeneric(b.c, {cond, x, y}, {3, 70});
  EXPECT_EQ(fast.data, slow.data);
}

/// The largest distance in ulp of f32 \p got from the f32 rounding of the
/// exact \p want (equal NaN-ness and infinities count as 0).
int64_t ulpDistance(float got, double want) {
  float w = float(want);
  if (std::isnan(w) || std::isnan(got))
    return std::isnan(w) == std::isnan(got) ? 0 : INT64_MAX;
  if (std::isinf(w) || std::isinf(got))
    return w == got ? 0 : INT64_MAX;
  auto ordered = [](float f) {
    int32_t i;
    std::memcpy(&i, &f, sizeof(i));
    return i < 0 ? int64_t(INT32_MIN) - i : int64_t(i);
  };
  return std::llabs(ordered(got) - ordered(w));
}

TEST(FastKernelsTest, FastExpTanhSigmoidAreWithinAFewUlp) {
  // A sweep over their ranges, the polynomial's seams (tanh's 0.625, exp's
  // 87/88 fallback), overflow, underflow to denormals, infinities and NaN.
  std::vector<double> values{-INFINITY, -1e4,  -104,   -103,     -90,  -88,
                             -87.5,     -87,   -0.625, -1e-30,   -0.0, 0,
                             1e-30,     0.625, 87.9,   88,       88.5, 88.72,
                             88.73,     89,    1e4,    INFINITY, NAN};
  for (int i = -3000; i <= 3000; ++i)
    values.push_back(i / 100.0 + 0.003 * (i % 7));
  for (int i = -200; i <= 200; ++i)
    values.push_back(0.625 + i * 1e-4);
  struct Fn {
    const char *kind;
    double (*exact)(double);
    int64_t ulps;
  };
  for (Fn fn :
       {Fn{"exp", [](double x) { return std::exp(x); }, 2},
        Fn{"tanh", [](double x) { return std::tanh(x); }, 3},
        Fn{"sigmoid", [](double x) { return 1 / (1 + std::exp(-x)); }, 3}}) {
    auto b = ComputeBuilder(fn.kind).iter("i", int64_t(values.size()));
    b.in({dim(0)}).out({dim(0)});
    Tensor x = make(plan::F32, {int64_t(values.size())}, values);
    Tensor y = make(plan::F32, {int64_t(values.size())});
    ASSERT_EQ(run(b.c, {&x}, {&y}), "");
    int64_t worst = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      float in = float(x.real(int64_t(i)));
      int64_t d = ulpDistance(float(y.real(int64_t(i))), fn.exact(in));
      EXPECT_LE(d, fn.ulps)
          << fn.kind << "(" << in << ") = " << y.real(int64_t(i));
      worst = std::max(worst, d);
    }
    EXPECT_GT(fn.ulps, 0);
    RecordProperty(fn.kind, int(worst));
  }
}

TEST(FastKernelsTest, FastErfIsCloseToErf) {
  std::vector<double> values{-INFINITY, -10, -4, -3.6, -1, -1e-3, -0.0,    0,
                             1e-30,     0.3, 1,  2.5,  4,  9,     INFINITY};
  for (int i = -600; i <= 600; ++i)
    values.push_back(i / 100.0);
  auto b = ComputeBuilder("erf").iter("i", int64_t(values.size()));
  b.in({dim(0)}).out({dim(0)});
  Tensor x = make(plan::F32, {int64_t(values.size())}, values);
  Tensor y = make(plan::F32, {int64_t(values.size())});
  ASSERT_EQ(run(b.c, {&x}, {&y}), "");
  for (size_t i = 0; i < values.size(); ++i)
    EXPECT_NEAR(y.real(int64_t(i)), std::erf(float(values[i])), 5e-7)
        << "erf(" << values[i] << ")";
  Tensor nan = make(plan::F32, {1}, {NAN}), out = make(plan::F32, {1});
  auto one = ComputeBuilder("erf").iter("i", 1);
  one.in({dim(0)}).out({dim(0)});
  ASSERT_EQ(run(one.c, {&nan}, {&out}), "");
  EXPECT_TRUE(std::isnan(out.real(0)));
}

TEST(FastKernelsTest, SixteenLanesEqualFour) {
  // The AVX-512 kernels compute every lane as the four-lane ones: the
  // same bits, on values across every polynomial's range and its edges
  // (NaN, infinities, overflow, underflow), a length no vector divides.
  cpu::setWideVectors(true);
  if (!cpu::wideVectors())
    GTEST_SKIP() << "no AVX-512 kernels here (built without, or the "
                    "processor lacks it)";
  std::vector<float> x, y;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> wide(-100, 100), narrow(-5, 5);
  for (int i = 0; i < 1003; ++i) {
    x.push_back(i % 3 ? narrow(rng) : wide(rng));
    y.push_back(narrow(rng));
  }
  for (float v : {NAN, INFINITY, -INFINITY, 88.5f, -87.5f, -200.0f, 0.0f})
    x[size_t(rng() % x.size())] = v;
  using runtime::ScalarOp;
  ScalarParams tanhGelu;
  tanhGelu.tanhGelu = true;
  std::pair<ScalarOp, ScalarParams> ops[] = {
      {ScalarOp::Add, {}},        {ScalarOp::Mul, {}},
      {ScalarOp::Div, {}},        {ScalarOp::Exp, {}},
      {ScalarOp::Tanh, {}},       {ScalarOp::Sigmoid, {}},
      {ScalarOp::Erf, {}},        {ScalarOp::Gelu, {}},
      {ScalarOp::Gelu, tanhGelu}, {ScalarOp::Sqrt, {}},
      {ScalarOp::Relu, {}},       {ScalarOp::Max, {}},
      {ScalarOp::Pow, {}},        {ScalarOp::Neg, {}},
      {ScalarOp::GeluGrad, {}},   {ScalarOp::GeluGrad, tanhGelu},
      {ScalarOp::Greater, {}},    {ScalarOp::Equal, {}}};
  for (auto &[op, params] : ops) {
    bool binary = op == ScalarOp::Add || op == ScalarOp::Mul ||
                  op == ScalarOp::Div || op == ScalarOp::Max ||
                  op == ScalarOp::Pow || op == ScalarOp::GeluGrad ||
                  op == ScalarOp::Greater || op == ScalarOp::Equal;
    std::vector<const float *> args{x.data()};
    if (binary)
      args.push_back(y.data());
    std::vector<float> four(x.size()), sixteen(x.size());
    cpu::setWideVectors(false);
    cpu::applyElementwise(op, params, args, four.data(), int64_t(x.size()));
    cpu::setWideVectors(true);
    cpu::applyElementwise(op, params, args, sixteen.data(), int64_t(x.size()));
    EXPECT_EQ(0, std::memcmp(four.data(), sixteen.data(),
                             four.size() * sizeof(float)))
        << "op " << int(op);
  }
  // where: a lane select on the condition (0 picks the third operand; a
  // NaN condition, like any other not 0, the second), as the scalar test.
  std::vector<float> cond = x;
  for (size_t i = 0; i < cond.size(); i += 3)
    cond[i] = 0.0f;
  std::vector<const float *> wargs{cond.data(), x.data(), y.data()};
  std::vector<float> four(x.size()), sixteen(x.size()), scalar(x.size());
  cpu::setWideVectors(false);
  cpu::applyElementwise(ScalarOp::Where, {}, wargs, four.data(),
                        int64_t(x.size()));
  cpu::setWideVectors(true);
  cpu::applyElementwise(ScalarOp::Where, {}, wargs, sixteen.data(),
                        int64_t(x.size()));
  for (size_t i = 0; i < x.size(); ++i)
    scalar[i] = cond[i] != 0 ? x[i] : y[i];
  EXPECT_EQ(0, std::memcmp(four.data(), scalar.data(), x.size() * 4));
  EXPECT_EQ(0, std::memcmp(sixteen.data(), scalar.data(), x.size() * 4));
  // Softmax and log-softmax rows (exponentials summed four ways).
  for (const char *kind : {"softmax", "log_softmax"}) {
    auto sm = ComputeBuilder(kind).iter("a", 3).red("b", 333);
    sm.in({dim(0), dim(1)}).out({dim(0), dim(1)});
    Tensor in = random(plan::F32, {3, 333}, 47, -30, 30);
    Tensor four = Tensor::zeros(plan::F32, {3, 333}), sixteen = four;
    cpu::setWideVectors(false);
    ASSERT_EQ(run(sm.c, {&in}, {&four}), "");
    cpu::setWideVectors(true);
    ASSERT_EQ(run(sm.c, {&in}, {&sixteen}), "");
    EXPECT_EQ(four.data, sixteen.data) << kind;
  }
  // Attention's softmax weights: the same weights and the same sum.
  four = x, sixteen = x;
  double sumFour = 0, sumSixteen = 0;
  int64_t n = int64_t(x.size()) & ~int64_t(15);
  cpu::expWeightsFour(four.data(), n, 3.0f, sumFour);
  ASSERT_TRUE(cpu::expWeightsWide(sixteen.data(), n, 3.0f, sumSixteen));
  EXPECT_EQ(0, std::memcmp(four.data(), sixteen.data(), size_t(n) * 4));
  EXPECT_EQ(sumFour, sumSixteen);
}

TEST(FastKernelsTest, BatchNormMatchesReference) {
  // NCHW, and a block: channels [2, 5) of a 7-channel input and parameters.
  for (bool block : {false, true}) {
    int64_t c0 = block ? 2 : 0, channels = block ? 7 : 3;
    auto b = ComputeBuilder("batch_norm")
                 .iter("n", 2)
                 .iter("c", 3)
                 .iter("h", 4)
                 .iter("w", 5);
    b.c.mutable_iters(1)->set_global_offset(c0);
    b.in({dim(0), dim(1, c0), dim(2), dim(3)});
    for (int i = 0; i < 4; ++i)
      b.in({dim(1, c0)});
    b.out({dim(0), dim(1), dim(2), dim(3)}).attrF("epsilon", 1e-5f);
    auto [y, r] = runBoth(b.c,
                          {random(plan::F32, {2, channels, 4, 5}, 30),
                           random(plan::F32, {channels}, 31),
                           random(plan::F32, {channels}, 32),
                           random(plan::F32, {channels}, 33),
                           random(plan::F32, {channels}, 34, 0.5, 2)},
                          {2, 3, 4, 5});
    expectClose(y, r, 1e-5);
  }
  // [n, c]: the channel steps along the run.
  auto b = ComputeBuilder("batch_norm").iter("n", 3).iter("c", 6);
  b.in({dim(0), dim(1)});
  for (int i = 0; i < 4; ++i)
    b.in({dim(1)});
  b.out({dim(0), dim(1)});
  auto [y, r] =
      runBoth(b.c,
              {random(plan::F32, {3, 6}, 35), random(plan::F32, {6}, 36),
               random(plan::F32, {6}, 37), random(plan::F32, {6}, 38),
               random(plan::F32, {6}, 39, 0.5, 2)},
              {3, 6});
  expectClose(y, r, 1e-5);
}

//===----------------------------------------------------------------------===//
// Norms, softmax and max pool.
//===----------------------------------------------------------------------===//

TEST(FastKernelsTest, RowKernelsMatchReference) {
  // Layer norm over the last dim, rows read from a block of a larger input.
  auto ln = ComputeBuilder("layer_norm").iter("i", 6).red("j", 50);
  ln.in({dim(0, 3), dim(1)}).in({bcast(), dim(1)}).in({bcast(), dim(1)});
  ln.out({dim(0), dim(1)}).attrF("epsilon", 1e-5f);
  auto [y1, r1] =
      runBoth(ln.c,
              {random(plan::F32, {10, 50}, 40), random(plan::F32, {1, 50}, 41),
               random(plan::F32, {1, 50}, 42)},
              {6, 50});
  expectClose(y1, r1, 1e-6);
  // Instance norm: scale and bias per channel (an outer dim).
  auto in =
      ComputeBuilder("instance_norm").iter("n", 2).iter("c", 3).red("s", 40);
  in.in({dim(0), dim(1), dim(2)}).in({dim(1)}).in({dim(1)});
  in.out({dim(0), dim(1), dim(2)});
  auto [y2, r2] =
      runBoth(in.c,
              {random(plan::F32, {2, 3, 40}, 43), random(plan::F32, {3}, 44),
               random(plan::F32, {3}, 45)},
              {2, 3, 40});
  expectClose(y2, r2, 1e-6);
  // Softmax and log-softmax over a middle dim (strided rows).
  for (const char *kind : {"softmax", "log_softmax"}) {
    auto sm = ComputeBuilder(kind).iter("a", 4).iter("c", 7).red("b", 30);
    sm.in({dim(0), dim(2), dim(1)}).out({dim(0), dim(2), dim(1)});
    auto [y3, r3] =
        runBoth(sm.c, {random(plan::F32, {4, 30, 7}, 46, -20, 20)}, {4, 30, 7});
    expectClose(y3, r3, 1e-6);
  }
}

TEST(FastKernelsTest, MaxPoolMatchesReference) {
  // 3x3 stride 2 padding 1, a NaN inside; then a block of rows with halo.
  for (int64_t off : {-1, 0}) {
    auto b = ComputeBuilder("max_pool")
                 .iter("n", 2)
                 .iter("c", 3)
                 .iter("oh", 4)
                 .iter("ow", 4)
                 .red("kh", 3)
                 .red("kw", 3);
    b.in({dim(0), dim(1), window(2, 4, 2, 1, off), window(3, 5, 2, 1, -1)});
    b.out({dim(0), dim(1), dim(2), dim(3)}).attrInts("pads", {1, 1, 1, 1});
    Tensor x = random(plan::F32, {2, 3, 8, 8}, 50);
    x.setReal(20, NAN);
    auto [y, r] = runBoth(b.c, {x}, {2, 3, 4, 4});
    expectClose(y, r, 0);
  }
}

} // namespace
