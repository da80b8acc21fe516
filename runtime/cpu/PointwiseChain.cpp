//===- PointwiseChain.cpp - Elementwise ops run tile by tile as one -------===//
#include "runtime/cpu/PointwiseChain.h"

#include "runtime/Prepared.h"
#include "runtime/cpu/Pointwise.h"
#include "runtime/cpu/ScalarOps.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <vector>

namespace pax::runtime::cpu {
namespace {

/// Points a tile holds: its intermediate results stay in the L1 cache.
constexpr int64_t kTile = 1024;
/// Operands an op of a chain takes at most.
constexpr int kMaxOperands = 4;

/// True when \p a is plain dims in order over all of \p c's dims, all
/// parallel: point i of the space is element i of the tensor.
bool inOrder(const plan::Compute &c, const plan::Access &a) {
  return a.exprs_size() == c.iters_size() &&
         llvm::all_of(c.iters(),
                      [](const plan::IterDim &d) {
                        return d.kind() == plan::IterDim::PAR;
                      }) &&
         plan::plainDimsInOrder(a);
}

/// True when \p c can be a link: an elementwise op whose result and
/// operands are read in order or broadcast, over \p first's space.
bool linkable(const plan::Compute &c, const plan::Compute &first) {
  if (!parseScalarOp(c.kind()) || c.outputs_size() != 1 ||
      c.inputs_size() < 1 || c.inputs_size() > kMaxOperands ||
      c.iters_size() != first.iters_size() || !inOrder(c, c.outputs(0)))
    return false;
  for (int d = 0; d < c.iters_size(); ++d)
    if (c.iters(d).extent() != first.iters(d).extent())
      return false;
  return llvm::all_of(c.inputs(), [&](const plan::Access &a) {
    return sameExprs(a, c.outputs(0)) || plan::broadcastsOne(a);
  });
}

/// True when \p c reads \p buffer point by point.
bool readsInOrder(const plan::Compute &c, uint32_t buffer) {
  return llvm::any_of(c.inputs(), [&](const plan::Access &a) {
    return a.buffer() == buffer && sameExprs(a, c.outputs(0));
  });
}

/// One link as it runs: its op, and per operand the f32 values it reads
/// (an input's, or nullptr: the result before it) and whether that is one
/// value for every point.
struct Step {
  ScalarOp op;
  ScalarParams params;
  llvm::SmallVector<const float *, kMaxOperands> from;
  llvm::SmallVector<bool, kMaxOperands> one;
};

/// True when link \p k of \p links writes bools that the next link, a
/// `where`, reads as its condition and nothing else of it.
bool conditionBetween(llvm::ArrayRef<ChainLink> links, size_t k) {
  if (links[k].outputs[0]->dtype != plan::I1 || k + 1 >= links.size())
    return false;
  const plan::Compute &next = *links[k + 1].compute;
  uint32_t b = links[k].compute->outputs(0).buffer();
  if (next.kind() != "where" || next.inputs_size() != 3 ||
      next.inputs(0).buffer() != b)
    return false;
  return next.inputs(1).buffer() != b && next.inputs(2).buffer() != b;
}

/// \p links as steps over \p points points writing \p out; false where a
/// buffer does not fit (not dense f32, another size, partly on \p out) or
/// a result is not f32.
bool steps(llvm::ArrayRef<ChainLink> links, int64_t points, const Tensor &out,
           std::vector<Step> &all) {
  for (size_t k = 0; k < links.size(); ++k) {
    const plan::Compute &c = *links[k].compute;
    // Every result f32 (the tiles are), or a comparison's bools that only
    // the next link's `where` reads, as its condition (a tile of 1.0f and
    // 0.0f, as runElementwiseF32 computes them); the points' count.
    if (links[k].outputs.size() != 1 ||
        (links[k].outputs[0]->dtype != plan::F32 &&
         !conditionBetween(links, k)) ||
        links[k].outputs[0]->numel() != points)
      return false;
    Step s{*parseScalarOp(c.kind()), {}, {}, {}};
    s.params = scalarParams(s.op, c);
    uint32_t before = k ? links[k - 1].compute->outputs(0).buffer() : ~0u;
    for (int i = 0; i < c.inputs_size(); ++i) {
      const Tensor *t = links[k].inputs[size_t(i)];
      bool chained = k && c.inputs(i).buffer() == before;
      bool one = plan::broadcastsOne(c.inputs(i));
      if (!chained &&
          (t->dtype != plan::F32 || t->numel() != (one ? 1 : points) ||
           int64_t(t->data.size()) != t->bytes() ||
           (t->sharesBytes(out) && t->data.data() != out.data.data())))
        return false;
      s.from.push_back(
          chained ? nullptr : reinterpret_cast<const float *>(t->data.data()));
      s.one.push_back(one);
    }
    all.push_back(std::move(s));
  }
  return true;
}

/// Runs \p all over points [p0, p1), the last step writing \p out.
void runTile(llvm::ArrayRef<Step> all, int64_t p0, int64_t p1, float *out) {
  int64_t n = p1 - p0;
  float tiles[2][kTile];
  float ones[kMaxOperands][kTile];
  for (size_t k = 0; k < all.size(); ++k) {
    const Step &s = all[k];
    const float *args[kMaxOperands];
    for (size_t i = 0; i < s.from.size(); ++i) {
      if (!s.from[i]) {
        args[i] = tiles[(k - 1) % 2];
      } else if (s.one[i]) {
        std::fill(ones[i], ones[i] + n, s.from[i][0]);
        args[i] = ones[i];
      } else {
        args[i] = s.from[i] + p0;
      }
    }
    float *dst = k + 1 == all.size() ? out + p0 : tiles[k % 2];
    applyElementwise(s.op, s.params, llvm::ArrayRef(args, s.from.size()), dst,
                     n);
  }
}

} // namespace

size_t pointwiseChainLength(llvm::ArrayRef<const plan::Compute *> chain) {
  if (chain.empty() || !linkable(*chain[0], *chain[0]))
    return 1;
  size_t n = 1;
  while (n < chain.size() && linkable(*chain[n], *chain[0]) &&
         readsInOrder(*chain[n], chain[n - 1]->outputs(0).buffer()))
    ++n;
  return n;
}

llvm::Expected<bool> runPointwiseChain(llvm::ArrayRef<ChainLink> links) {
  if (links.size() < 2 || links.back().outputs.size() != 1)
    return false;
  Tensor &out = *links.back().outputs[0];
  int64_t points = 1;
  for (const plan::IterDim &d : links[0].compute->iters())
    points *= int64_t(d.extent());
  std::vector<Step> all;
  if (out.dtype != plan::F32 || out.numel() != points ||
      !steps(links, points, out, all))
    return false;
  float *y = reinterpret_cast<float *>(out.data.data());
  int64_t tiles = (points + kTile - 1) / kTile;
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, tiles, 16),
                    [&](const tbb::blocked_range<int64_t> &r) {
                      for (int64_t t = r.begin(); t < r.end(); ++t)
                        runTile(all, t * kTile,
                                std::min(points, (t + 1) * kTile), y);
                    });
  return true;
}

} // namespace pax::runtime::cpu
