//===- Sources.cpp - Constants, shapes, Gather, LSTM and GRU ------------===//
#include "frontend/GraphBuilder.h"
#include "frontend/OnnxOps.h"

#include "frontend/TensorProto.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/xxhash.h"

#include <cmath>
#include <cstdio>
#include <cstring>

namespace pax {

llvm::Error importConstant(NodeContext &ctx) {
  const auto *a =
      ctx.proto().attribute_size() ? &ctx.proto().attribute(0) : nullptr;
  if (!a)
    return ctx.error("has no value attribute");
  llvm::StringRef name = a->name();
  if (name == "value") {
    auto c = readTensorProto(a->t(), ctx.modelDir());
    if (!c)
      return ctx.error(llvm::toString(c.takeError()));
    ctx.setConstant(0, std::move(*c));
  } else if (name == "value_float") {
    ctx.setConstant(0, ConstTensor::splat(TensorType{DType::F32, {}}, a->f()));
  } else if (name == "value_int") {
    ctx.setConstant(0, ConstTensor::ofInts(DType::I64, {}, {a->i()}));
  } else if (name == "value_ints") {
    std::vector<int64_t> v(a->ints().begin(), a->ints().end());
    ctx.setConstant(0, ConstTensor::ofInts(DType::I64, {int64_t(v.size())}, v));
  } else if (name == "value_floats") {
    ConstTensor t =
        ConstTensor::zeros(TensorType{DType::F32, {int64_t(a->floats_size())}});
    for (int i = 0; i < a->floats_size(); ++i)
      t.set(i, a->floats(i));
    ctx.setConstant(0, std::move(t));
  } else {
    return ctx.error("attribute '" + name + "' is not supported");
  }
  return llvm::Error::success();
}

llvm::Error importConstantOfShape(NodeContext &ctx) {
  auto shapeC = ctx.requireConstant(0, "the shape");
  if (!shapeC)
    return shapeC.takeError();
  TensorType type{DType::F32, {}};
  int64_t numel = 1;
  for (int64_t d : (*shapeC)->toInts()) {
    if (d < 0)
      return ctx.error("shape has a negative dim " + llvm::Twine(d));
    if (d > kMaxExtent || (d && numel > kMaxExtent / d))
      return ctx.error("shape " + shapeStr((*shapeC)->toInts()) +
                       " has more than 2^48 elements");
    numel *= d;
    type.shape.push_back(d);
  }
  double fill = 0;
  if (const auto *a = ctx.attr("value")) {
    auto v = readTensorProto(a->t(), ctx.modelDir());
    if (!v)
      return ctx.error(llvm::toString(v.takeError()));
    if (v->numel() != 1)
      return ctx.error("value must hold exactly one element");
    type.elem = v->type.elem;
    fill = v->real(0);
  }
  ctx.setConstant(0, ConstTensor::splat(type, fill));
  return llvm::Error::success();
}

/// RandomUniform and RandomUniformLike, drawn from paxc's counter-based
/// generator (random_uniform): the value at each element is a hash of the
/// seed (`--seed`), the op's key (the node's `seed` attribute, or its name),
/// the training step and the element's index, so any partition draws the
/// same numbers as one device, and a step draws new ones.
llvm::Error importRandomUniform(NodeContext &ctx) {
  bool like = ctx.opType() == "RandomUniformLike";
  TensorType type{DType::F32, {}};
  if (like) {
    if (!ctx.hasInput(0))
      return ctx.error("missing input 0");
    type = ctx.type(0);
  } else {
    std::vector<int64_t> shape = ctx.attrInts("shape");
    type.shape.assign(shape.begin(), shape.end());
  }
  if (const auto *a = ctx.attr("dtype")) {
    auto dt = dtypeFromOnnx(int32_t(a->i()));
    if (!dt)
      return ctx.error("dtype " + llvm::Twine(a->i()) + " is not supported");
    type.elem = *dt;
  }
  if (!isFloat(type.elem))
    return ctx.error("the values must be floats, not " +
                     dtypeName(type.elem).str());
  auto op = ctx.newOp(OpKind::RandomUniform);
  op->iters = parallelSpace(type.shape);
  op->operands.push_back({ctx.rngStep(), {}});
  op->addResult(type, identityMap(type.rank()));
  op->attrs["low"] = ctx.attrFloat("low", 0);
  op->attrs["high"] = ctx.attrFloat("high", 1);
  uint64_t key;
  if (const auto *a = ctx.attr("seed")) {
    float s = a->f();
    uint32_t bits;
    std::memcpy(&bits, &s, sizeof bits);
    key = bits;
  } else {
    std::string name =
        ctx.proto().name().empty() ? ctx.proto().output(0) : ctx.proto().name();
    key = llvm::xxh3_64bits(llvm::arrayRefFromStringRef(name));
  }
  // Attributes are signed; the bits are what count.
  op->attrs["key"] = int64_t(key);
  op->attrs["seed"] = int64_t(ctx.seed());
  return ctx.finish(std::move(op));
}

llvm::Error importShape(NodeContext &ctx) {
  llvm::ArrayRef<int64_t> s = ctx.shape(0);
  int64_t r = s.size();
  int64_t start = ctx.attrInt("start", 0), end = ctx.attrInt("end", r);
  start = std::clamp<int64_t>(start < 0 ? start + r : start, 0, r);
  end = std::clamp<int64_t>(end < 0 ? end + r : end, 0, r);
  std::vector<int64_t> v(s.begin() + start, s.begin() + std::max(start, end));
  ctx.setConstant(0, ConstTensor::ofInts(DType::I64, {int64_t(v.size())}, v));
  return llvm::Error::success();
}

llvm::Error importSize(NodeContext &ctx) {
  ctx.setConstant(0,
                  ConstTensor::ofInts(DType::I64, {}, {ctx.type(0).numel()}));
  return llvm::Error::success();
}

llvm::Error importRange(NodeContext &ctx) {
  const ConstTensor *c[3];
  const char *what[] = {"start", "limit", "delta"};
  for (unsigned i = 0; i < 3; ++i) {
    auto v = ctx.requireScalar(i, what[i]);
    if (!v)
      return v.takeError();
    c[i] = *v;
  }
  double start = c[0]->real(0), limit = c[1]->real(0), delta = c[2]->real(0);
  if (delta == 0)
    return ctx.error("delta is 0");
  double n = std::max(0.0, std::ceil((limit - start) / delta));
  // Range is evaluated while importing (positions, masks): its values must
  // fit in memory.
  if (!(n <= double(kMaxBuiltElements))) {
    char bounds[96];
    std::snprintf(bounds, sizeof(bounds), "from %g to %g by %g", start, limit,
                  delta);
    return ctx.error("the range " + llvm::Twine(bounds) +
                     " has more than 2^24 elements (paxc evaluates Range "
                     "while importing)");
  }
  ConstTensor t =
      ConstTensor::zeros(TensorType{ctx.type(0).elem, {int64_t(n)}});
  for (int64_t i = 0; i < int64_t(n); ++i)
    t.set(i, start + double(i) * delta);
  ctx.setConstant(0, std::move(t));
  return llvm::Error::success();
}

/// TopK: the k largest (or smallest) along `axis`, in order, and their
/// indices: the axis a `seq` dim `n` walked by the kernel, the results
/// written along a last `seq` dim `k` (neither split). K must be constant
/// (the results' shape depends on it).
llvm::Error importTopK(NodeContext &ctx) {
  llvm::ArrayRef<int64_t> shape = ctx.shape(0);
  if (shape.empty())
    return ctx.error("input must have rank 1 or more");
  auto axis = ctx.axis(ctx.attrInt("axis", -1), shape.size());
  if (!axis)
    return axis.takeError();
  int64_t k = ctx.attrInt("k", 0); // opset 1-9
  if (ctx.opset() >= 10) {
    auto kc = ctx.requireConstant(1, "K");
    if (!kc)
      return kc.takeError();
    if ((*kc)->numel() != 1)
      return ctx.error("K must hold one value");
    k = (*kc)->integer(0);
  }
  if (k < 1 || k > shape[*axis])
    return ctx.error("K = " + llvm::Twine(k) + " is not in [1, " +
                     llvm::Twine(shape[*axis]) + "] (the axis' size)");
  if (ctx.numOutputs() < 1)
    return ctx.error("needs its Values output");
  auto op = ctx.newOp(OpKind::TopK);
  op->iters = parallelSpace(shape);
  op->iters[*axis] = {"n", shape[*axis], IterKind::Sequential};
  unsigned kd = unsigned(shape.size());
  op->iters.push_back({"k", k, IterKind::Sequential});
  AccessMap out = identityMap(shape.size());
  out[*axis] = AccessExpr::dim(kd);
  llvm::SmallVector<int64_t, 4> rshape(shape.begin(), shape.end());
  rshape[*axis] = k;
  op->operands.push_back({ctx.value(0), identityMap(shape.size())});
  op->addResult(TensorType{ctx.type(0).elem, rshape}, out);
  op->addResult(TensorType{DType::I64, rshape}, out);
  op->attrs["axis"] = int64_t(*axis);
  op->attrs["largest"] = ctx.attrInt("largest", 1);
  return ctx.finish(std::move(op));
}

/// CumSum: the running sum along `axis`, a `seq` dim; `exclusive` and
/// `reverse` are attributes of the op.
llvm::Error importCumSum(NodeContext &ctx) {
  llvm::ArrayRef<int64_t> shape = ctx.shape(0);
  if (shape.empty())
    return ctx.error("input must have rank 1 or more");
  auto axisC = ctx.requireScalar(1, "axis");
  if (!axisC)
    return axisC.takeError();
  auto axis = ctx.axis((*axisC)->integer(0), shape.size());
  if (!axis)
    return axis.takeError();
  auto op = ctx.newOp(OpKind::CumSum);
  op->iters = parallelSpace(shape);
  op->iters[*axis].kind = IterKind::Sequential;
  op->operands.push_back({ctx.value(0), identityMap(shape.size())});
  op->addResult(ctx.type(0), identityMap(shape.size()));
  op->attrs["axis"] = int64_t(*axis);
  op->attrs["exclusive"] = ctx.attrInt("exclusive", 0);
  op->attrs["reverse"] = ctx.attrInt("reverse", 0);
  return ctx.finish(std::move(op));
}

namespace {

/// Imports one LSTM or GRU layer (see importRecurrent): its sizes, checked,
/// then its op.
struct RecurrentImporter {
  /// The op's iterators: direction, step, batch, gate, hidden unit and k.
  enum { D, S, B, G, H, K };

  NodeContext &ctx;
  OpKind kind;
  int64_t gates;
  bool batchFirst = false;
  /// Steps, batch, input size, hidden size and directions.
  int64_t s = 0, b = 0, in = 0, h = 0, dirs = 0;

  RecurrentImporter(NodeContext &ctx, OpKind kind, int64_t gates)
      : ctx(ctx), kind(kind), gates(gates) {}

  /// Reads the layer's sizes from X, W, R and the attributes, and checks
  /// that they agree.
  llvm::Error readSizes() {
    llvm::ArrayRef<int64_t> x = ctx.shape(0), w = ctx.shape(1),
                            r = ctx.shape(2);
    h = ctx.attrInt("hidden_size", 0);
    if (x.size() != 3 || w.size() != 3 || r.size() != 3)
      return ctx.error("X, W and R must have rank 3");
    batchFirst = ctx.attrInt("layout", 0) != 0;
    s = batchFirst ? x[1] : x[0];
    b = batchFirst ? x[0] : x[1];
    in = x[2];
    dirs = w[0];
    std::string direction = ctx.attrString("direction", "forward");
    if ((direction == "bidirectional") != (dirs == 2) || dirs < 1 || dirs > 2)
      return ctx.error("direction '" + direction + "' does not match W's " +
                       llvm::Twine(dirs) + " directions");
    if (h <= 0)
      h = r.back();
    if (h > kMaxExtent)
      return ctx.error("hidden_size " + llvm::Twine(h) +
                       " is larger than 2^48");
    return checkWeights(w, r);
  }

  /// An error unless W and R have the shapes of the layer's sizes.
  llvm::Error checkWeights(llvm::ArrayRef<int64_t> w,
                           llvm::ArrayRef<int64_t> r) const {
    if (w[1] != gates * h || w[2] != in || r[0] != dirs || r[1] != gates * h ||
        r[2] != h)
      return ctx.error("W " + shapeStr(w) + " and R " + shapeStr(r) +
                       " do not match input size " + llvm::Twine(in) +
                       " and hidden size " + llvm::Twine(h));
    return llvm::Error::success();
  }

  /// Sets \p op's iterators and its operands X, W and R.
  void addMainOperands(Op &op) {
    op.iters = {
        {"dir", dirs, IterKind::Parallel}, {"s", s, IterKind::Sequential},
        {"b", b, IterKind::Parallel},      {"g", gates, IterKind::Parallel},
        {"h", h, IterKind::Parallel},      {"k", in + h, IterKind::Reduction}};
    auto dim = AccessExpr::dim;
    AccessMap xm = batchFirst ? AccessMap{dim(B), dim(S), dim(K)}
                              : AccessMap{dim(S), dim(B), dim(K)};
    op.operands.push_back({ctx.value(0), xm});
    op.operands.push_back(
        {ctx.value(1), {dim(D), AccessExpr::group({G, H}), dim(K)}});
    op.operands.push_back(
        {ctx.value(2),
         {dim(D), AccessExpr::group({G, H}), AccessExpr::shifted(K, 1, -in)}});
  }

  /// How a state (initial_h, initial_c, Y_h, Y_c) is indexed.
  AccessMap stateAccess() const {
    auto dim = AccessExpr::dim;
    return batchFirst ? AccessMap{dim(B), dim(D), dim(H)}
                      : AccessMap{dim(D), dim(B), dim(H)};
  }

  /// The shape of a state (initial_h, initial_c, Y_h, Y_c).
  llvm::SmallVector<int64_t, 4> stateDims() const {
    return batchFirst ? llvm::SmallVector<int64_t, 4>{b, dirs, h}
                      : llvm::SmallVector<int64_t, 4>{dirs, b, h};
  }

  /// An error unless input \p i has the shape \p want.
  llvm::Error expect(unsigned i, llvm::ArrayRef<int64_t> want) {
    if (ctx.shape(i) != want)
      return ctx.error("input " + llvm::Twine(i) + " has shape " +
                       shapeStr(ctx.shape(i)) + ", expected " + shapeStr(want));
    return llvm::Error::success();
  }

  /// Adds the optional inputs present to \p op's operands, after checking
  /// their shapes, and records which they are.
  llvm::Error addOptionalOperands(Op &op) {
    auto dim = AccessExpr::dim;
    AccessMap state = stateAccess();
    llvm::SmallVector<int64_t, 4> stateShape = stateDims();
    struct Extra {
      unsigned input;
      llvm::SmallVector<int64_t, 4> shape;
      AccessMap map;
    };
    // B, sequence_lens, initial_h, and for an LSTM initial_c and P.
    llvm::SmallVector<Extra, 5> extras = {
        {3, {dirs, 2 * gates * h}, {dim(D), AccessExpr::full()}},
        {4, {b}, {dim(B)}},
        {5, stateShape, state}};
    if (kind == OpKind::Lstm) {
      extras.push_back({6, stateShape, state});
      extras.push_back({7, {dirs, 3 * h}, {dim(D), AccessExpr::full()}});
    }
    int64_t present = 0;
    for (const Extra &e : extras) {
      if (!ctx.hasInput(e.input))
        continue;
      if (auto err = expect(e.input, e.shape))
        return err;
      op.operands.push_back({ctx.value(e.input), e.map});
      present |= int64_t(1) << e.input;
    }
    // Which optional inputs the operands hold, in order (3: B ...).
    op.attrs["inputs"] = present;
    return llvm::Error::success();
  }

  /// Adds \p op's results: Y, then a state for each further output.
  void addResults(Op &op) {
    auto dim = AccessExpr::dim;
    AccessMap ym = batchFirst ? AccessMap{dim(B), dim(S), dim(D), dim(H)}
                              : AccessMap{dim(S), dim(D), dim(B), dim(H)};
    llvm::SmallVector<int64_t, 4> yshape =
        batchFirst ? llvm::SmallVector<int64_t, 4>{b, s, dirs, h}
                   : llvm::SmallVector<int64_t, 4>{s, dirs, b, h};
    AccessMap state = stateAccess();
    llvm::SmallVector<int64_t, 4> stateShape = stateDims();
    op.addResult(TensorType{ctx.type(0).elem, yshape}, ym);
    for (unsigned i = 1; i < ctx.numOutputs(); ++i)
      op.addResult(TensorType{ctx.type(0).elem, stateShape}, state);
  }

  /// Imports the layer.
  llvm::Error run() {
    if (auto err = readSizes())
      return err;
    auto op = ctx.newOp(kind);
    addMainOperands(*op);
    if (auto err = addOptionalOperands(*op))
      return err;
    addResults(*op);
    copyAttributes(ctx, *op);
    op->attrs["hidden_size"] = h;
    return ctx.finish(std::move(op));
  }
};

} // namespace

/// One LSTM or GRU layer as one op. Gates (LSTM: i, o, f, c; GRU: z, r, h)
/// are computed over k = [x_t, h_{t-1}] (I + H values): W reads k in
/// [0, I), R reads k in [I, I + H).
static llvm::Error importRecurrent(NodeContext &ctx, OpKind kind,
                                   int64_t gates) {
  return RecurrentImporter(ctx, kind, gates).run();
}

llvm::Error importLstm(NodeContext &ctx) {
  return importRecurrent(ctx, OpKind::Lstm, 4);
}

llvm::Error importGru(NodeContext &ctx) {
  return importRecurrent(ctx, OpKind::Gru, 3);
}

} // namespace pax
