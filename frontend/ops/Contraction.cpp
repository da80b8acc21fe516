//===- Contraction.cpp - Importers of MatMul, Gemm, Conv and Einsum -------===//
#include "frontend/OnnxOps.h"

#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <cctype>

namespace pax {

llvm::Error importMatMul(NodeContext &ctx) {
  llvm::SmallVector<int64_t, 4> a(ctx.shape(0)), b(ctx.shape(1));
  if (a.empty() || b.empty())
    return ctx.error("inputs must have rank 1 or more");
  bool vecA = a.size() == 1, vecB = b.size() == 1;
  if (vecA)
    a.insert(a.begin(), 1);
  if (vecB)
    b.push_back(1);
  int64_t m = a[a.size() - 2], k = a.back(), n = b.back();
  if (b[b.size() - 2] != k)
    return ctx.error("inner dims do not match: " + shapeStr(ctx.shape(0)) +
                     " by " + shapeStr(ctx.shape(1)) + " (" + llvm::Twine(k) +
                     " vs " + llvm::Twine(b[b.size() - 2]) + ")");
  llvm::ArrayRef<int64_t> batchA(a.data(), a.size() - 2);
  llvm::ArrayRef<int64_t> batchB(b.data(), b.size() - 2);
  auto batch = broadcastShapes(ctx, batchA, batchB);
  if (!batch)
    return batch.takeError();
  unsigned nb = batch->size();

  auto op = ctx.newOp(OpKind::MatMul);
  for (unsigned i = 0; i < nb; ++i)
    op->iters.push_back(
        {"b" + std::to_string(i), (*batch)[i], IterKind::Parallel});
  unsigned dm = nb, dn = nb + 1, dk = nb + 2;
  op->iters.push_back({"m", m, IterKind::Parallel});
  op->iters.push_back({"n", n, IterKind::Parallel});
  op->iters.push_back({"k", k, IterKind::Reduction});

  auto operandMap = [&](llvm::ArrayRef<int64_t> batchDims, bool isVec,
                        unsigned row, unsigned col, bool vecDropsRow) {
    AccessMap map = broadcastMap(batchDims, *batch);
    if (!isVec || !vecDropsRow)
      map.push_back(AccessExpr::dim(row));
    if (!isVec || vecDropsRow)
      map.push_back(AccessExpr::dim(col));
    return map;
  };
  op->operands.push_back(
      {ctx.value(0), operandMap(batchA, vecA, dm, dk, true)});
  op->operands.push_back(
      {ctx.value(1), operandMap(batchB, vecB, dk, dn, false)});
  AccessMap out = identityMap(nb);
  llvm::SmallVector<int64_t, 4> shape(batch->begin(), batch->end());
  if (!vecA)
    out.push_back(AccessExpr::dim(dm)), shape.push_back(m);
  if (!vecB)
    out.push_back(AccessExpr::dim(dn)), shape.push_back(n);
  if (ctx.type(0).elem != ctx.type(1).elem)
    return ctx.error("input types " + dtypeName(ctx.type(0).elem) + " and " +
                     dtypeName(ctx.type(1).elem) + " differ");
  op->addResult(TensorType{ctx.type(0).elem, shape}, out);
  return ctx.finish(std::move(op));
}

llvm::Error importGemm(NodeContext &ctx) {
  if (ctx.rank(0) != 2 || ctx.rank(1) != 2)
    return ctx.error("A and B must be matrices, are " + shapeStr(ctx.shape(0)) +
                     " and " + shapeStr(ctx.shape(1)));
  bool ta = ctx.attrInt("transA", 0), tb = ctx.attrInt("transB", 0);
  int64_t m = ctx.shape(0)[ta ? 1 : 0], k = ctx.shape(0)[ta ? 0 : 1];
  int64_t kb = ctx.shape(1)[tb ? 1 : 0], n = ctx.shape(1)[tb ? 0 : 1];
  if (k != kb)
    return ctx.error("inner dims do not match: " + shapeStr(ctx.shape(0)) +
                     (ta ? " (transposed)" : "") + " by " +
                     shapeStr(ctx.shape(1)) + (tb ? " (transposed)" : "") +
                     " (" + llvm::Twine(k) + " vs " + llvm::Twine(kb) + ")");
  auto op = ctx.newOp(OpKind::Gemm);
  op->iters = {{"m", m, IterKind::Parallel},
               {"n", n, IterKind::Parallel},
               {"k", k, IterKind::Reduction}};
  auto dim = AccessExpr::dim;
  op->operands.push_back({ctx.value(0), ta ? AccessMap{dim(2), dim(0)}
                                           : AccessMap{dim(0), dim(2)}});
  op->operands.push_back({ctx.value(1), tb ? AccessMap{dim(1), dim(2)}
                                           : AccessMap{dim(2), dim(1)}});
  int64_t mn[] = {m, n};
  if (ctx.hasInput(2)) {
    auto s = broadcastShapes(ctx, ctx.shape(2), mn);
    if (!s)
      return s.takeError();
    if ((*s)[0] != m || (*s)[1] != n)
      return ctx.error("C of shape " + shapeStr(ctx.shape(2)) +
                       " does not broadcast to " + shapeStr(mn));
    op->operands.push_back({ctx.value(2), broadcastMap(ctx.shape(2), mn)});
  }
  op->addResult(TensorType{ctx.type(0).elem, {m, n}}, {dim(0), dim(1)});
  op->attrs["alpha"] = ctx.attrFloat("alpha", 1.0f);
  op->attrs["beta"] = ctx.attrFloat("beta", 1.0f);
  return ctx.finish(std::move(op));
}

namespace {

/// The window attributes of a conv or pool (pads, auto_pad, ceil_mode and
/// the window itself), turned into a WindowDim one spatial dim at a time.
struct WindowAttrs {
  NodeContext &ctx;
  llvm::ArrayRef<int64_t> in, kernel, strides, dilations;
  bool ceilMode;
  std::vector<int64_t> pads;
  std::string autoPad;

  llvm::Error outside(llvm::StringRef what, int64_t v, int64_t lo,
                      size_t i) const;
  llvm::Error checkWindow(size_t i) const;
  void samePads(size_t i, int64_t span, WindowDim &d) const;
  llvm::Error explicitPads(size_t i, WindowDim &d) const;
  llvm::Error outputSize(size_t i, int64_t span, WindowDim &d) const;
  llvm::Error dim(size_t i, WindowDim &d) const;
};

/// The error for \p what of dim \p i, \p v, being outside [\p lo, 2^48].
llvm::Error WindowAttrs::outside(llvm::StringRef what, int64_t v, int64_t lo,
                                 size_t i) const {
  return ctx.error(what + " " + llvm::Twine(v) + " of dim " +
                   llvm::Twine(i + 2) + " is outside [" + llvm::Twine(lo) +
                   ", 2^48]");
}

/// An error when the stride, dilation or kernel size of dim \p i is out of
/// bounds or its window spans more than 2^48.
llvm::Error WindowAttrs::checkWindow(size_t i) const {
  // Bounded so that spans, padded sizes and outputs stay far from int64
  // overflow.
  if (strides[i] < 1 || strides[i] > kMaxExtent)
    return outside("stride", strides[i], 1, i);
  if (dilations[i] < 1 || dilations[i] > kMaxExtent)
    return outside("dilation", dilations[i], 1, i);
  if (kernel[i] < 1 || kernel[i] > kMaxExtent)
    return outside("kernel size", kernel[i], 1, i);
  if (kernel[i] > 1 && dilations[i] > (kMaxExtent - 1) / (kernel[i] - 1))
    return ctx.error("the window of dim " + llvm::Twine(i + 2) + " (kernel " +
                     llvm::Twine(kernel[i]) + ", dilation " +
                     llvm::Twine(dilations[i]) + ") spans more than 2^48");
  return llvm::Error::success();
}

/// Sets the output size and pads of dim \p i for SAME_UPPER or SAME_LOWER:
/// one output per stride, the pads split with the odd one at the end for
/// SAME_UPPER, at the beginning for SAME_LOWER.
void WindowAttrs::samePads(size_t i, int64_t span, WindowDim &d) const {
  d.out = (in[i] + strides[i] - 1) / strides[i];
  int64_t total = std::max<int64_t>(0, (d.out - 1) * strides[i] + span - in[i]);
  d.padBegin = autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
  d.padEnd = total - d.padBegin;
}

/// Sets the pads of dim \p i for VALID (none) or NOTSET (the pads
/// attribute); an error on a pad out of bounds or an unknown auto_pad.
llvm::Error WindowAttrs::explicitPads(size_t i, WindowDim &d) const {
  if (autoPad == "VALID") {
    d.padBegin = d.padEnd = 0;
  } else if (autoPad == "NOTSET") {
    d.padBegin = pads[i];
    d.padEnd = pads[i + in.size()];
    if (d.padBegin < 0 || d.padBegin > kMaxExtent)
      return outside("begin padding", d.padBegin, 0, i);
    if (d.padEnd < 0 || d.padEnd > kMaxExtent)
      return outside("end padding", d.padEnd, 0, i);
  } else {
    return ctx.error("unknown auto_pad '" + autoPad + "'");
  }
  return llvm::Error::success();
}

/// Sets the output size of dim \p i from its padded size and the window's
/// \p span; an error when the window does not fit or the output has more
/// than 2^48 positions.
llvm::Error WindowAttrs::outputSize(size_t i, int64_t span,
                                    WindowDim &d) const {
  int64_t room = in[i] + d.padBegin + d.padEnd - span;
  if (room < 0)
    return ctx.error("the window (" + llvm::Twine(span) +
                     ") is larger than the padded input dim " +
                     llvm::Twine(i + 2) + " (" +
                     llvm::Twine(in[i] + d.padBegin + d.padEnd) + ")");
  d.out =
      (ceilMode ? (room + strides[i] - 1) / strides[i] : room / strides[i]) + 1;
  // A last window that would start in the end padding is dropped.
  if (ceilMode && (d.out - 1) * strides[i] >= in[i] + d.padBegin)
    --d.out;
  if (d.out > kMaxExtent)
    return ctx.error("output dim " + llvm::Twine(i + 2) + " would have " +
                     llvm::Twine(d.out) + " positions, more than 2^48");
  return llvm::Error::success();
}

/// Sets \p d, the output size and pads of spatial dim \p i.
llvm::Error WindowAttrs::dim(size_t i, WindowDim &d) const {
  if (llvm::Error err = checkWindow(i))
    return err;
  int64_t span = dilations[i] * (kernel[i] - 1) + 1;
  if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    samePads(i, span, d);
    return llvm::Error::success();
  }
  if (llvm::Error err = explicitPads(i, d))
    return err;
  return outputSize(i, span, d);
}

} // namespace

llvm::Expected<llvm::SmallVector<WindowDim, 3>>
windowDims(NodeContext &ctx, llvm::ArrayRef<int64_t> in,
           llvm::ArrayRef<int64_t> kernel, llvm::ArrayRef<int64_t> strides,
           llvm::ArrayRef<int64_t> dilations, bool ceilMode) {
  size_t n = in.size();
  std::vector<int64_t> pads = ctx.attrInts("pads");
  if (pads.empty())
    pads.assign(2 * n, 0);
  if (pads.size() != 2 * n)
    return ctx.error("pads has " + llvm::Twine(pads.size()) +
                     " values, expected " + llvm::Twine(2 * n));
  std::string autoPad = ctx.attrString("auto_pad", "NOTSET");
  WindowAttrs window{ctx,       in,       kernel,          strides,
                     dilations, ceilMode, std::move(pads), std::move(autoPad)};
  llvm::SmallVector<WindowDim, 3> dims(n);
  for (size_t i = 0; i < n; ++i)
    if (llvm::Error err = window.dim(i, dims[i]))
      return err;
  return dims;
}

static std::vector<int64_t> orOnes(std::vector<int64_t> v, size_t n) {
  if (v.empty())
    v.assign(n, 1);
  return v;
}

static std::string spatialName(const char *prefix, size_t i, size_t n) {
  if (n == 2)
    return std::string(prefix) + (i == 0 ? "h" : "w");
  return std::string(prefix) + std::to_string(i);
}

namespace {

/// One Conv node: X's and W's shapes, the group, the window and, once
/// added, the op's iteration dims.
struct Conv {
  NodeContext &ctx;
  llvm::ArrayRef<int64_t> x, w;
  size_t ns = 0;
  int64_t group = 1, c = 0, m = 0, cg = 0;
  std::vector<int64_t> kernel, strides, dil;
  llvm::SmallVector<WindowDim, 3> dims;
  unsigned dn = 0, dco = 0, dci = 0;
  int dg = -1;
  llvm::SmallVector<unsigned, 3> dout, dwin;

  explicit Conv(NodeContext &ctx)
      : ctx(ctx), x(ctx.shape(0)), w(ctx.shape(1)) {}

  llvm::Error checkChannels();
  llvm::Error readWindow();
  void addIters(Op &op);
  AccessExpr channel(unsigned d) const;
  llvm::Error build(std::unique_ptr<Op> op) const;
};

/// Reads the group; an error when X and W differ in rank (or have less
/// than 3) or the group does not split the channels as W expects.
llvm::Error Conv::checkChannels() {
  if (x.size() < 3 || w.size() != x.size())
    return ctx.error("X (" + shapeStr(x) + ") and W (" + shapeStr(w) +
                     ") must have the same rank, 3 or more");
  ns = x.size() - 2;
  group = ctx.attrInt("group", 1);
  c = x[1];
  m = w[0];
  cg = w[1];
  if (group < 1 || c % group || m % group)
    return ctx.error("group " + llvm::Twine(group) + " does not divide " +
                     llvm::Twine(c) + " input and " + llvm::Twine(m) +
                     " output channels");
  if (cg * group != c)
    return ctx.error("input has " + llvm::Twine(c) +
                     " channels but W expects " + llvm::Twine(cg * group) +
                     " (" + llvm::Twine(cg) + " per group x " +
                     llvm::Twine(group) + " groups)");
  return llvm::Error::success();
}

/// Reads the kernel, strides and dilations and sets the output size and
/// pads of each spatial dim; an error when they do not fit W or the rank.
llvm::Error Conv::readWindow() {
  kernel.assign(w.begin() + 2, w.end());
  std::vector<int64_t> ks = ctx.attrInts("kernel_shape");
  if (!ks.empty() && ks != kernel)
    return ctx.error("kernel_shape does not match W's shape " + shapeStr(w));
  strides = orOnes(ctx.attrInts("strides"), ns);
  dil = orOnes(ctx.attrInts("dilations"), ns);
  if (strides.size() != ns || dil.size() != ns)
    return ctx.error("strides and dilations need " + llvm::Twine(ns) +
                     " values");
  auto d = windowDims(ctx, x.drop_front(2), kernel, strides, dil, false);
  if (!d)
    return d.takeError();
  dims = std::move(*d);
  return llvm::Error::success();
}

/// Gives \p op its iteration dims: n, g (when grouped), co and the output
/// positions, then the summed ci and kernel positions.
void Conv::addIters(Op &op) {
  auto add = [&](std::string name, int64_t extent, IterKind kind) {
    op.iters.push_back({std::move(name), extent, kind});
    return unsigned(op.iters.size() - 1);
  };
  dn = add("n", x[0], IterKind::Parallel);
  dg = group > 1 ? int(add("g", group, IterKind::Parallel)) : -1;
  dco = add("co", m / group, IterKind::Parallel);
  for (size_t i = 0; i < ns; ++i)
    dout.push_back(
        add(spatialName("o", i, ns), dims[i].out, IterKind::Parallel));
  dci = add("ci", cg, IterKind::Reduction);
  for (size_t i = 0; i < ns; ++i)
    dwin.push_back(
        add(spatialName("k", i, ns), kernel[i], IterKind::Reduction));
}

/// The channel index of iteration dim \p d: grouped with g when there is
/// more than one group.
AccessExpr Conv::channel(unsigned d) const {
  return dg >= 0 ? AccessExpr::group({unsigned(dg), d}) : AccessExpr::dim(d);
}

/// Gives \p op its operands (X read through the windows, W and the bias)
/// and result, and finishes it; an error when the bias is not one value
/// per output channel.
llvm::Error Conv::build(std::unique_ptr<Op> op) const {
  AccessMap xm = {AccessExpr::dim(dn), channel(dci)};
  AccessMap wm = {channel(dco), AccessExpr::dim(dci)};
  AccessMap ym = {AccessExpr::dim(dn), channel(dco)};
  llvm::SmallVector<int64_t, 4> yshape = {x[0], m};
  for (size_t i = 0; i < ns; ++i) {
    xm.push_back(AccessExpr::window(dout[i], dwin[i], strides[i], dil[i],
                                    -dims[i].padBegin));
    wm.push_back(AccessExpr::dim(dwin[i]));
    ym.push_back(AccessExpr::dim(dout[i]));
    yshape.push_back(dims[i].out);
  }
  op->operands.push_back({ctx.value(0), xm});
  op->operands.push_back({ctx.value(1), wm});
  if (ctx.hasInput(2)) {
    if (ctx.shape(2).size() != 1 || ctx.shape(2)[0] != m)
      return ctx.error("bias has shape " + shapeStr(ctx.shape(2)) +
                       ", expected " + llvm::Twine(m));
    op->operands.push_back({ctx.value(2), {channel(dco)}});
  }
  op->addResult(TensorType{ctx.type(0).elem, yshape}, ym);
  op->attrs["group"] = group;
  return ctx.finish(std::move(op));
}

} // namespace

llvm::Error importConv(NodeContext &ctx) {
  Conv conv(ctx);
  if (llvm::Error err = conv.checkChannels())
    return err;
  if (llvm::Error err = conv.readWindow())
    return err;
  auto op = ctx.newOp(OpKind::Conv);
  conv.addIters(*op);
  return conv.build(std::move(op));
}

namespace {

/// The equation of an Einsum node, its spaces dropped.
std::string einsumEquation(NodeContext &ctx) {
  std::string eq;
  for (char c : ctx.attrString("equation", ""))
    if (c != ' ')
      eq += c;
  return eq;
}

/// Replaces the `...` of term \p t, if any, by \p count dims named '0'..
/// from the right.
std::string expandEllipsis(std::string t, unsigned count) {
  size_t at = t.find("...");
  if (at == std::string::npos)
    return t;
  std::string dims;
  for (unsigned k = count; k-- > 0;)
    dims += char('0' + k);
  return t.substr(0, at) + dims + t.substr(at + 3);
}

/// One Einsum node as its equation reads: the operands' terms, the
/// result's, the iteration dims (one letter each) and their extents.
struct Einsum {
  NodeContext &ctx;
  std::string eq;
  unsigned n;
  llvm::SmallVector<std::string, 2> terms;
  std::string out;
  std::string letters;
  llvm::SmallVector<int64_t, 8> extent;

  explicit Einsum(NodeContext &ctx)
      : ctx(ctx), eq(einsumEquation(ctx)), n(ctx.numInputs()) {}

  llvm::Error splitTerms(size_t arrow);
  llvm::Expected<unsigned> ellipsisDims() const;
  void expandTerms();
  void implicitOutput(unsigned ellipsis);
  void collectLetters();
  llvm::Error computeExtents();
  llvm::Error checkResult() const;
  void addIters(Op &op) const;
  void addOperands(Op &op) const;
  llvm::Error build();
};

/// Splits the left of the arrow at \p arrow into one term per operand; an
/// error when the counts differ.
llvm::Error Einsum::splitTerms(size_t arrow) {
  std::string lhs = eq.substr(0, arrow);
  for (llvm::StringRef t : llvm::split(lhs, ','))
    terms.push_back(t.str());
  if (terms.size() != n)
    return ctx.error("equation '" + eq + "' has " + llvm::Twine(terms.size()) +
                     " terms for " + llvm::Twine(n) + " operands");
  return llvm::Error::success();
}

/// The most dims a `...` stands for in any term; an error when a term does
/// not fit its operand's rank.
llvm::Expected<unsigned> Einsum::ellipsisDims() const {
  unsigned ellipsis = 0;
  for (unsigned i = 0; i < n; ++i) {
    size_t at = terms[i].find("...");
    unsigned named = terms[i].size() - (at == std::string::npos ? 0 : 3);
    if (named > ctx.rank(i) ||
        (at == std::string::npos && named != ctx.rank(i)))
      return ctx.error("term '" + terms[i] + "' does not fit operand " +
                       llvm::Twine(i) + " of rank " + llvm::Twine(ctx.rank(i)));
    if (at != std::string::npos)
      ellipsis = std::max(ellipsis, ctx.rank(i) - named);
  }
  return ellipsis;
}

/// Expands the `...` of each term to the dims its operand has beyond its
/// letters.
void Einsum::expandTerms() {
  for (unsigned i = 0; i < n; ++i) {
    size_t at = terms[i].find("...");
    unsigned own =
        at == std::string::npos ? 0 : ctx.rank(i) - (terms[i].size() - 3);
    terms[i] = expandEllipsis(terms[i], own);
  }
}

/// Sets the result's term when the equation has no arrow.
void Einsum::implicitOutput(unsigned ellipsis) {
  // Implicit output: the ellipsis dims, then the letters used once, sorted.
  for (unsigned k = ellipsis; k-- > 0;)
    out += char('0' + k);
  std::string once;
  for (char c = 'A'; c <= 'z'; ++c) {
    if (!std::isalpha(static_cast<unsigned char>(c)))
      continue;
    int uses = 0;
    for (const std::string &t : terms)
      uses += std::count(t.begin(), t.end(), c);
    if (uses == 1)
      once += c;
  }
  out += once;
}

/// Lists the iteration dims and gives each an extent of 1.
void Einsum::collectLetters() {
  // Iteration dims: the result's letters, then the summed ones.
  letters = out;
  for (const std::string &t : terms)
    for (char c : t)
      if (letters.find(c) == std::string::npos)
        letters += c;
  extent.assign(letters.size(), 1);
}

/// Sets each iteration dim's extent from the operands (1 broadcasts); an
/// error on a repeated letter in a term or on extents that differ.
llvm::Error Einsum::computeExtents() {
  for (unsigned i = 0; i < n; ++i) {
    const std::string &t = terms[i];
    for (size_t j = 0; j < t.size(); ++j) {
      if (t.find(t[j]) != j)
        return ctx.error("equation '" + eq + "' repeats '" + llvm::Twine(t[j]) +
                         "' within one term (a diagonal), which is not "
                         "supported");
      int64_t e = ctx.shape(i)[j];
      int64_t &have = extent[letters.find(t[j])];
      if (e != 1 && have != 1 && e != have)
        return ctx.error("dim '" + llvm::Twine(t[j]) + "' is " +
                         llvm::Twine(have) + " in one operand and " +
                         llvm::Twine(e) + " in another");
      if (e != 1)
        have = e;
    }
  }
  return llvm::Error::success();
}

/// An error when a dim of the result is repeated or in no operand.
llvm::Error Einsum::checkResult() const {
  for (size_t j = 0; j < out.size(); ++j)
    if (out.find(out[j]) != j ||
        llvm::none_of(terms, [&](const std::string &t) {
          return t.find(out[j]) != std::string::npos;
        }))
      return ctx.error("the result's dim '" + llvm::Twine(out[j]) +
                       "' of equation '" + eq +
                       "' is repeated or in no operand");
  return llvm::Error::success();
}

/// Gives \p op one iteration dim per letter: `par` for the result's,
/// `red` for the summed ones; ellipsis dims are named e0, e1, ...
void Einsum::addIters(Op &op) const {
  for (size_t j = 0; j < letters.size(); ++j) {
    std::string name = std::isdigit(static_cast<unsigned char>(letters[j]))
                           ? std::string("e") + letters[j]
                           : std::string(1, letters[j]);
    op.iters.push_back(
        {name, extent[j],
         j < out.size() ? IterKind::Parallel : IterKind::Reduction});
  }
}

/// Gives \p op its operands, each read through its term's letters (a
/// broadcast where the operand has 1 and the dim more).
void Einsum::addOperands(Op &op) const {
  for (unsigned i = 0; i < n; ++i) {
    AccessMap map;
    for (size_t j = 0; j < terms[i].size(); ++j) {
      unsigned d = letters.find(terms[i][j]);
      map.push_back(ctx.shape(i)[j] == 1 && extent[d] != 1
                        ? AccessExpr::broadcast()
                        : AccessExpr::dim(d));
    }
    op.operands.push_back({ctx.value(i), map});
  }
}

/// Builds the op: a matmul of two operands, a reduce_sum (or a transpose
/// when nothing is summed) of one.
llvm::Error Einsum::build() {
  bool reduces = letters.size() > out.size();
  auto op = ctx.newOp(n == 2 ? OpKind::MatMul : OpKind::ReduceSum);
  addIters(*op);
  addOperands(*op);
  if (n == 2 && ctx.type(0).elem != ctx.type(1).elem)
    return ctx.error("input types " + dtypeName(ctx.type(0).elem) + " and " +
                     dtypeName(ctx.type(1).elem) + " differ");
  llvm::SmallVector<int64_t, 4> shape(extent.begin(),
                                      extent.begin() + out.size());
  op->addResult(TensorType{ctx.type(0).elem, shape}, identityMap(out.size()));
  if (n == 1 && !reduces)
    op->kind = OpKind::Transpose;
  op->attrs["equation"] = eq;
  return ctx.finish(std::move(op));
}

} // namespace

/// Einsum of one or two operands: a letter is an iteration dim, `par` when
/// the result keeps it, `red` when it is summed. Two operands make a
/// contraction (the matmul kernel walks any maps), one a reduce_sum (or a
/// transpose when nothing is summed). `...` stands for the same leading
/// dims in every term, broadcast as numpy does. A letter repeated within
/// one term (a diagonal) is not supported.
llvm::Error importEinsum(NodeContext &ctx) {
  Einsum e(ctx);
  if (e.n < 1 || e.n > 2)
    return ctx.error("einsum of " + llvm::Twine(e.n) +
                     " operands is not supported (one or two)");
  size_t arrow = e.eq.find("->");
  if (llvm::Error err = e.splitTerms(arrow))
    return err;
  // Expand `...` to as many dims as the operand has beyond its letters;
  // they are named by the characters '0'.. from the right.
  llvm::Expected<unsigned> ellipsis = e.ellipsisDims();
  if (!ellipsis)
    return ellipsis.takeError();
  e.expandTerms();
  if (arrow != std::string::npos)
    e.out = expandEllipsis(e.eq.substr(arrow + 2), *ellipsis);
  else
    e.implicitOutput(*ellipsis);
  e.collectLetters();
  if (llvm::Error err = e.computeExtents())
    return err;
  if (llvm::Error err = e.checkResult())
    return err;
  return e.build();
}

} // namespace pax
