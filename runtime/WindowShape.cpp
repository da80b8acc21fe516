//===- WindowShape.cpp - 2-D convolutions and pools as NCHW windows -------===//
#include "runtime/WindowShape.h"

#include "llvm/ADT/STLExtras.h"

namespace pax::runtime {

int64_t WindowDim::symmetricPad() const {
  int64_t pad = -offset;
  if (pad < 0 || stride < 1 || dilation < 1)
    return -1;
  // The library's output count for `size` rows padded by `pad` each side.
  int64_t span = size + 2 * pad - dilation * (kernel - 1) - 1;
  if (span < 0 || span / stride + 1 != out)
    return -1;
  return pad;
}

/// True when \p e is `d` (stride 1, no offset).
bool isPlainDim(const plan::AccessExpr &e, unsigned d) {
  return e.kind() == plan::AccessExpr::AFFINE && e.dims_size() == 1 &&
         e.dims(0) == d && e.stride() == 1 && e.offset() == 0;
}

/// True when \p e is the channel expr of dim \p d: `d`, or the group `(g,
/// d)` when \p g is not negative.
bool isChannel(const plan::AccessExpr &e, int g, unsigned d) {
  if (g < 0)
    return isPlainDim(e, d);
  return e.kind() == plan::AccessExpr::GROUP && e.dims_size() == 2 &&
         e.whole() <= 1 && e.dims(0) == unsigned(g) && e.dims(1) == d &&
         e.offset() == 0;
}

/// The window `s*o + d*k + offset` of \p e over dims (o, k) of \p c.
std::optional<WindowDim> matchWindow(const plan::Compute &c,
                                     const plan::AccessExpr &e, unsigned o,
                                     unsigned k, int64_t size) {
  if (e.kind() != plan::AccessExpr::AFFINE || e.dims_size() != 2 ||
      e.dims(0) != o || e.dims(1) != k || e.stride() < 1 || e.dilation() < 1)
    return std::nullopt;
  WindowDim w;
  w.out = c.iters(int(o)).extent();
  w.kernel = c.iters(int(k)).extent();
  w.stride = e.stride();
  w.dilation = e.dilation();
  w.offset = e.offset();
  w.size = size;
  if (w.out < 1 || w.kernel < 1 || w.size < 1)
    return std::nullopt;
  return w;
}

/// True when every tensor of \p p is f32 and holds exactly its elements.
bool allDenseF32(const Prepared &p) {
  auto ok = [](const Tensor *t) {
    return t->dtype == plan::F32 && int64_t(t->data.size()) == t->bytes();
  };
  return llvm::all_of(p.ins, ok) && llvm::all_of(p.outs, ok);
}

bool productTypes(const Prepared &p, bool sixteenBit) {
  auto f32 = [](const Tensor *t) { return t->dtype == plan::F32; };
  if (p.ins.size() < 2 || p.outs.empty())
    return false;
  if (!sixteenBit)
    return llvm::all_of(p.ins, f32) && llvm::all_of(p.outs, f32);
  plan::DType low = p.ins[0]->dtype;
  auto lowOrF32 = [&](const Tensor *t) { return f32(t) || t->dtype == low; };
  return (low == plan::BF16 || low == plan::F16) && p.ins[1]->dtype == low &&
         llvm::all_of(p.ins, lowOrF32) && llvm::all_of(p.outs, lowOrF32);
}

namespace {
/// Where an activation's n, c, h and w are among its tensor dims.
struct Dims4 {
  int n, c, h, w;
};
constexpr Dims4 kNchw{0, 1, 2, 3}, kNhwc{0, 3, 1, 2};

/// The layout of an activation whose channel expr (matched by \p channel)
/// is dim 3 (channels-last) or else dim 1, by \p a's exprs; \p last says
/// which.
template <typename Channel>
Dims4 layoutOf(const plan::Access &a, Channel channel, bool &last) {
  last = a.exprs_size() == 4 && channel(a.exprs(3));
  return last ? kNhwc : kNchw;
}

/// The tensor's size along logical dims (n, c, h, w) of layout \p l.
bool sizesAre(const Tensor &t, Dims4 l, int64_t n, int64_t c, int64_t h,
              int64_t w) {
  return t.shape[size_t(l.n)] == n && t.shape[size_t(l.c)] == c &&
         t.shape[size_t(l.h)] == h && t.shape[size_t(l.w)] == w;
}
} // namespace

/// The convolution over \p c's dims [n, (g), co, oh, ow, ci, kh, kw]
/// (with \p grouped, a group dim g) that reads or writes x, w and y
/// through \p xa, \p wa and \p ya: its shape, when every map and tensor
/// is as the importer (or autodiff) writes them, x and y each NCHW or
/// channels-last.
std::optional<Window2DShape>
matchConvMaps(const plan::Compute &c, bool grouped, const plan::Access &xa,
              const Tensor &x, const plan::Access &wa, const Tensor &w,
              const plan::Access &ya, const Tensor &y) {
  if (c.iters_size() != (grouped ? 8 : 7) || x.shape.size() != 4 ||
      w.shape.size() != 4 || y.shape.size() != 4 || xa.exprs_size() != 4 ||
      wa.exprs_size() != 4 || ya.exprs_size() != 4)
    return std::nullopt;
  int g = grouped ? 1 : -1;
  unsigned dn = 0, dco = grouped ? 2 : 1, doh = dco + 1, dow = dco + 2,
           dci = dco + 3, dkh = dco + 4, dkw = dco + 5;
  Window2DShape s;
  Dims4 xl = layoutOf(
      xa, [&](const auto &e) { return isChannel(e, g, dci); }, s.xLast);
  Dims4 yl = layoutOf(
      ya, [&](const auto &e) { return isChannel(e, g, dco); }, s.yLast);
  if (!isPlainDim(xa.exprs(xl.n), dn) || !isChannel(xa.exprs(xl.c), g, dci) ||
      !isChannel(wa.exprs(0), g, dco) || !isPlainDim(wa.exprs(1), dci) ||
      !isPlainDim(wa.exprs(2), dkh) || !isPlainDim(wa.exprs(3), dkw) ||
      !isPlainDim(ya.exprs(yl.n), dn) || !isChannel(ya.exprs(yl.c), g, dco) ||
      !isPlainDim(ya.exprs(yl.h), doh) || !isPlainDim(ya.exprs(yl.w), dow))
    return std::nullopt;
  auto rows = matchWindow(c, xa.exprs(xl.h), doh, dkh, x.shape[size_t(xl.h)]);
  auto cols = matchWindow(c, xa.exprs(xl.w), dow, dkw, x.shape[size_t(xl.w)]);
  if (!rows || !cols)
    return std::nullopt;
  auto ext = [&](unsigned d) { return int64_t(c.iters(int(d)).extent()); };
  s.n = ext(dn);
  s.g = grouped ? ext(1) : 1;
  s.co = ext(dco);
  s.ci = ext(dci);
  s.rows = *rows;
  s.cols = *cols;
  if (s.n < 1 || s.g < 1 || s.co < 1 || s.ci < 1 ||
      !sizesAre(x, xl, s.n, s.g * s.ci, s.rows.size, s.cols.size) ||
      w.shape[0] != s.g * s.co || w.shape[1] != s.ci ||
      w.shape[2] != s.rows.kernel || w.shape[3] != s.cols.kernel ||
      !sizesAre(y, yl, s.n, s.g * s.co, s.rows.out, s.cols.out))
    return std::nullopt;
  return s;
}

/// The shape of \p p when it is a conv the fast paths handle.
std::optional<Window2DShape> matchConv2D(const Prepared &p, int64_t group,
                                         bool sixteenBit) {
  const plan::Compute &c = p.c;
  bool grouped = group > 1;
  auto dense = [](const Tensor *t) {
    return int64_t(t->data.size()) == t->bytes();
  };
  if (p.ins.size() < 2 || p.outs.size() != 1 || !productTypes(p, sixteenBit) ||
      !llvm::all_of(p.ins, dense) || !dense(p.outs[0]))
    return std::nullopt;
  auto s = matchConvMaps(c, grouped, c.inputs(0), *p.ins[0], c.inputs(1),
                         *p.ins[1], c.outputs(0), *p.outs[0]);
  if (!s)
    return std::nullopt;
  if (p.ins.size() > 2) {
    const plan::Access &ba = c.inputs(2);
    if (p.ins[2]->shape.size() != 1 || ba.exprs_size() != 1 ||
        !isChannel(ba.exprs(0), grouped ? 1 : -1, grouped ? 2 : 1) ||
        p.ins[2]->shape[0] != s->g * s->co)
      return std::nullopt;
  }
  return s;
}

/// The shape of \p p when it is a max pool the fast path handles: input
/// and output both NCHW or both channels-last.
std::optional<Window2DShape> matchPool2D(const Prepared &p) {
  const plan::Compute &c = p.c;
  if (!allDenseF32(p) || c.iters_size() != 6 || p.ins.size() != 1 ||
      p.outs.size() != 1)
    return std::nullopt;
  const plan::Access &xa = c.inputs(0), &ya = c.outputs(0);
  const Tensor &x = *p.ins[0], &y = *p.outs[0];
  if (x.shape.size() != 4 || y.shape.size() != 4 || xa.exprs_size() != 4 ||
      ya.exprs_size() != 4)
    return std::nullopt;
  Window2DShape s;
  auto channel = [](const auto &e) { return isPlainDim(e, 1); };
  Dims4 xl = layoutOf(xa, channel, s.xLast);
  Dims4 yl = layoutOf(ya, channel, s.yLast);
  if (s.xLast != s.yLast || !isPlainDim(xa.exprs(xl.n), 0) ||
      !isPlainDim(xa.exprs(xl.c), 1) || !isPlainDim(ya.exprs(yl.n), 0) ||
      !isPlainDim(ya.exprs(yl.c), 1) || !isPlainDim(ya.exprs(yl.h), 2) ||
      !isPlainDim(ya.exprs(yl.w), 3))
    return std::nullopt;
  auto rows = matchWindow(c, xa.exprs(xl.h), 2, 4, x.shape[size_t(xl.h)]);
  auto cols = matchWindow(c, xa.exprs(xl.w), 3, 5, x.shape[size_t(xl.w)]);
  if (!rows || !cols)
    return std::nullopt;
  s.n = c.iters(0).extent();
  s.ci = s.co = c.iters(1).extent();
  s.rows = *rows;
  s.cols = *cols;
  if (!sizesAre(x, xl, s.n, s.ci, s.rows.size, s.cols.size) ||
      !sizesAre(y, yl, s.n, s.co, s.rows.out, s.cols.out))
    return std::nullopt;
  return s;
}
} // namespace pax::runtime
