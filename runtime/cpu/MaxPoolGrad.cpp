//===- MaxPoolGrad.cpp - A max pool's gradient as one kernel --------------===//
#include "runtime/cpu/MaxPoolGrad.h"

#include "runtime/Prepared.h"
#include "runtime/WindowShape.h"
#include "runtime/cpu/Epilogue.h"

#include <tbb/parallel_for.h>

#include <algorithm>

namespace pax::runtime::cpu {
namespace {

/// True when \p a is dims 0..n-1 of its compute, plainly, in order.
bool plainInOrder(const plan::Access &a, int n) {
  return a.exprs_size() == n && plan::plainDimsInOrder(a);
}

/// True when \p c's space is [n, c, oh, ow, kh, kw], all parallel.
bool windowPoints(const plan::Compute &c) {
  return c.iters_size() == 6 &&
         llvm::all_of(c.iters(), [](const plan::IterDim &d) {
           return d.kind() == plan::IterDim::PAR;
         });
}

/// True for `equal` of the input through a 2-D NCHW window (dims [n, c,
/// oh*, ow*] with kh, kw) with the pool's maximum [n, c, oh, ow].
bool equalsMaximum(const plan::Compute &c) {
  if (c.kind() != "equal" || !windowPoints(c) || c.inputs_size() != 2 ||
      c.outputs_size() != 1 || !plainInOrder(c.outputs(0), 6) ||
      !plainInOrder(c.inputs(1), 4))
    return false;
  const plan::Access &x = c.inputs(0);
  return x.exprs_size() == 4 && isPlainDim(x.exprs(0), 0) &&
         isPlainDim(x.exprs(1), 1) &&
         matchWindow(c, x.exprs(2), 2, 4, 1).has_value() &&
         matchWindow(c, x.exprs(3), 3, 5, 1).has_value();
}

/// True for `where` of \p hit (point by point) choosing dy [n, c, oh, ow]
/// or one constant, over \p equal's space.
bool routes(const plan::Compute &c, const plan::Compute &equal, uint32_t hit) {
  if (c.kind() != "where" || c.inputs_size() != 3 || c.outputs_size() != 1 ||
      !windowPoints(c) || c.inputs(0).buffer() != hit ||
      !plainInOrder(c.inputs(0), 6) || !plainInOrder(c.outputs(0), 6) ||
      !plainInOrder(c.inputs(1), 4) || !plan::broadcastsOne(c.inputs(2)))
    return false;
  for (int d = 0; d < 6; ++d)
    if (c.iters(d).extent() != equal.iters(d).extent())
      return false;
  return true;
}

/// True for `scatter_add` of \p routed (point by point) back through
/// \p equal's window.
bool scattersBack(const plan::Compute &c, const plan::Compute &equal,
                  uint32_t routed) {
  return c.kind() == "scatter_add" && c.inputs_size() == 1 &&
         c.outputs_size() == 1 && windowPoints(c) &&
         c.inputs(0).buffer() == routed && plainInOrder(c.inputs(0), 6) &&
         sameExprs(c.outputs(0), equal.inputs(0)) &&
         llvm::equal(c.iters(), equal.iters(),
                     [](const plan::IterDim &a, const plan::IterDim &b) {
                       return a.extent() == b.extent();
                     });
}

/// True for a dense f32 tensor of \p shape.
bool denseOf(const Tensor *t, llvm::ArrayRef<int64_t> shape) {
  return denseF32(*t, t->numel()) && llvm::equal(t->shape, shape);
}

const float *floats(const Tensor *t) {
  return reinterpret_cast<const float *>(t->data.data());
}

/// The gradient of one (image, channel) plane: \p o (rows x cols of the
/// input \p x) gets, at each window point inside the input, \p dy of the
/// window where the point equals its maximum \p y, else \p other, added
/// in the scatter's order (oh, ow, kh, kw).
void planeGrad(const float *x, const float *y, const float *dy, float other,
               const WindowDim &r, const WindowDim &w, float *o) {
  std::fill(o, o + r.size * w.size, 0.0f);
  for (int64_t oh = 0; oh < r.out; ++oh) {
    auto [kh0, kh1] = r.inside(oh);
    for (int64_t ow = 0; ow < w.out; ++ow) {
      auto [kw0, kw1] = w.inside(ow);
      float top = y[oh * w.out + ow], g = dy[oh * w.out + ow];
      for (int64_t kh = kh0; kh < kh1; ++kh) {
        int64_t row = r.at(oh, kh) * w.size;
        for (int64_t kw = kw0; kw < kw1; ++kw) {
          int64_t at = row + w.at(ow, kw);
          o[at] += x[at] == top ? g : other;
        }
      }
    }
  }
}

} // namespace

size_t maxPoolGradChainLength(llvm::ArrayRef<const plan::Compute *> chain) {
  if (chain.size() < 3 || !equalsMaximum(*chain[0]))
    return 1;
  uint32_t hit = chain[0]->outputs(0).buffer();
  if (!routes(*chain[1], *chain[0], hit) ||
      !scattersBack(*chain[2], *chain[0], chain[1]->outputs(0).buffer()))
    return 1;
  return 3;
}

llvm::Expected<bool> runMaxPoolGradChain(llvm::ArrayRef<ChainLink> links) {
  if (links.size() != 3 || links[0].inputs.size() != 2 ||
      links[1].inputs.size() != 3 || links[2].outputs.size() != 1)
    return false;
  const plan::Compute &eq = *links[0].compute;
  const Tensor *x = links[0].inputs[0], *y = links[0].inputs[1],
               *dy = links[1].inputs[1], *other = links[1].inputs[2];
  Tensor *dx = links[2].outputs[0];
  if (x->shape.size() != 4)
    return false;
  auto r = matchWindow(eq, eq.inputs(0).exprs(2), 2, 4, x->shape[2]);
  auto w = matchWindow(eq, eq.inputs(0).exprs(3), 3, 5, x->shape[3]);
  int64_t n = eq.iters(0).extent(), c = eq.iters(1).extent();
  if (!r || !w || x->shape[0] != n || x->shape[1] != c ||
      !denseOf(x, x->shape) || !denseOf(dx, x->shape) ||
      !denseOf(y, {n, c, r->out, w->out}) ||
      !denseOf(dy, {n, c, r->out, w->out}) || !denseF32(*other, 1))
    return false;
  for (const Tensor *t : {x, y, dy, other})
    if (t->sharesBytes(*dx))
      return false;
  float fill = floats(other)[0];
  int64_t in = r->size * w->size, out = r->out * w->out;
  float *o = reinterpret_cast<float *>(dx->data.data());
  tbb::parallel_for(int64_t(0), n * c, [&](int64_t p) {
    planeGrad(floats(x) + p * in, floats(y) + p * out, floats(dy) + p * out,
              fill, *r, *w, o + p * in);
  });
  return true;
}

} // namespace pax::runtime::cpu
