//===- OpRewrites.cpp - Small ONNX ops written as other ONNX ops ----------===//
#include "frontend/OpRewrites.h"

#include "frontend/GraphBuilder.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace pax {
namespace {

using Types = llvm::StringMap<onnx::TypeProto>;

/// 0, 1, ..., \p count - 1 along axis \p axis of a rank-\p rank int64
/// constant (size 1 along the other axes).
std::string iota(GraphBuilder &b, int64_t rank, int64_t axis, int64_t count) {
  onnx::TensorProto t;
  t.set_data_type(onnx::TensorProto::INT64);
  for (int64_t d = 0; d < rank; ++d)
    t.add_dims(d == axis ? count : 1);
  for (int64_t i = 0; i < count; ++i)
    t.add_int64_data(i);
  return b.constant(t);
}

/// \p n's integer attribute \p name, or \p otherwise.
int64_t intAttr(const onnx::NodeProto &n, llvm::StringRef name,
                int64_t otherwise) {
  const auto *a = findAttribute(n, name);
  return a ? a->i() : otherwise;
}

llvm::Error hardmax(GraphBuilder &b, const onnx::NodeProto &n, int64_t opset,
                    const llvm::StringMap<onnx::TypeProto> &types,
                    const std::string &where) {
  auto x = staticShape(types, n.input(0), where);
  if (!x)
    return x.takeError();
  int64_t rank = int64_t(x->size()), axis = rank - 1;
  if (const auto *a = findAttribute(n, "axis"))
    axis = a->i() < 0 ? a->i() + rank : a->i();
  if (axis < 0 || axis >= rank)
    return llvm::createStringError(where + ": axis out of range");
  if (opset < 13 && axis != rank - 1)
    return llvm::createStringError(
        where + ": Hardmax before opset 13 over an axis other than the last "
                "(the input flattened to 2-D) is not supported");
  if (auto e = checkBuiltSize(where, {double((*x)[size_t(axis)])}))
    return e;
  onnx::NodeProto &arg = b.node("ArgMax", {n.input(0)});
  GraphBuilder::intAttr(arg, "axis", axis);
  GraphBuilder::intAttr(arg, "keepdims", 1);
  std::string eq = b.apply(
      "Equal", {iota(b, rank, axis, (*x)[size_t(axis)]), arg.output(0)});
  b.rename(b.cast(eq, elemOf(types, n.input(0))), n.output(0));
  return llvm::Error::success();
}

llvm::Error eyeLike(GraphBuilder &b, const onnx::NodeProto &n,
                    const llvm::StringMap<onnx::TypeProto> &types,
                    const std::string &where) {
  auto x = staticShape(types, n.input(0), where);
  if (!x)
    return x.takeError();
  if (x->size() != 2)
    return llvm::createStringError(where + ": the input must have rank 2");
  if (auto e = checkBuiltSize(where, {double((*x)[0]), double((*x)[1])}))
    return e;
  int64_t k = 0;
  int32_t elem = elemOf(types, n.input(0));
  if (const auto *a = findAttribute(n, "k"))
    k = a->i();
  if (const auto *a = findAttribute(n, "dtype"))
    elem = int32_t(a->i());
  // Doubles for every type: the Cast after writes the model's.
  onnx::TensorProto eye;
  eye.set_data_type(onnx::TensorProto::DOUBLE);
  eye.add_dims((*x)[0]);
  eye.add_dims((*x)[1]);
  for (int64_t r = 0; r < (*x)[0]; ++r)
    for (int64_t c = 0; c < (*x)[1]; ++c)
      eye.add_double_data(c - r == k ? 1.0 : 0.0);
  b.rename(b.cast(b.constant(eye), elem), n.output(0));
  return llvm::Error::success();
}

llvm::Error thresholdedRelu(GraphBuilder &b, const onnx::NodeProto &n,
                            const llvm::StringMap<onnx::TypeProto> &types) {
  double alpha = 1.0;
  if (const auto *a = findAttribute(n, "alpha"))
    alpha = a->f();
  int32_t elem = elemOf(types, n.input(0));
  std::string above = b.apply("Greater", {n.input(0), b.scalar(alpha, elem)});
  std::string y = b.apply("Where", {above, n.input(0), b.scalar(0.0, elem)});
  b.rename(y, n.output(0));
  return llvm::Error::success();
}

/// OneHot(indices, depth, values) = Where(Equal(indices along a new axis,
/// iota), on, off); negative indices count from depth.
llvm::Error oneHot(GraphBuilder &b, const onnx::NodeProto &n,
                   const onnx::GraphProto &g, const Types &types,
                   const std::string &where) {
  onnx::TypeProto type = types.lookup(n.input(0));
  const onnx::TypeProto::Tensor &t = type.tensor_type();
  if (!t.has_shape())
    return llvm::createStringError(where + ": needs the rank of '" +
                                   n.input(0) + "'");
  auto depth = constantInput(g, n, 1, "depth", where);
  if (!depth)
    return depth.takeError();
  if (!*depth || (*depth)->size() != 1 || n.input_size() < 3)
    return llvm::createStringError(where + ": needs a depth and values");
  double d = std::floor((**depth)[0]);
  if (auto e = checkBuiltSize(where, {d}))
    return e;
  int64_t rank = t.shape().dim_size() + 1, axis = intAttr(n, "axis", -1);
  axis = axis < 0 ? axis + rank : axis;
  if (axis < 0 || axis >= rank || d < 1)
    return llvm::createStringError(where + ": axis or depth out of range");
  std::string i64 = b.cast(n.input(0), onnx::TensorProto::INT64);
  std::string dv = b.int64s({int64_t(d)}, true);
  std::string neg = b.apply("Less", {i64, b.int64s({0}, true)});
  i64 = b.apply("Where", {neg, b.apply("Add", {i64, dv}), i64});
  std::string eq = b.apply(
      "Equal", {b.unsqueeze(i64, {axis}), iota(b, rank, axis, int64_t(d))});
  std::string off = b.apply("Gather", {n.input(2), b.int64s({0}, true)});
  std::string on = b.apply("Gather", {n.input(2), b.int64s({1}, true)});
  b.rename(b.apply("Where", {eq, on, off}), n.output(0));
  return llvm::Error::success();
}

/// Shrink(x, lambd, bias) = x + bias below -lambd, x - bias above lambd,
/// else 0.
llvm::Error shrink(GraphBuilder &b, const onnx::NodeProto &n,
                   const Types &types) {
  double lambd = 0.5, bias = 0;
  if (const auto *a = findAttribute(n, "lambd"))
    lambd = a->f();
  if (const auto *a = findAttribute(n, "bias"))
    bias = a->f();
  int32_t elem = elemOf(types, n.input(0));
  const std::string &x = n.input(0);
  std::string above = b.apply("Greater", {x, b.scalar(lambd, elem)});
  std::string below = b.apply("Less", {x, b.scalar(-lambd, elem)});
  std::string y = b.apply(
      "Where",
      {above, b.apply("Sub", {x, b.scalar(bias, elem)}),
       b.apply("Where", {below, b.apply("Add", {x, b.scalar(bias, elem)}),
                         b.scalar(0.0, elem)})});
  b.rename(y, n.output(0));
  return llvm::Error::success();
}

/// ReduceLogSum(x) = Log(ReduceSum(x)), over the same axes.
llvm::Error reduceLogSum(GraphBuilder &b, const onnx::NodeProto &n,
                         const onnx::GraphProto &g, int64_t opset,
                         const std::string &where) {
  std::vector<int64_t> axes;
  if (const auto *a = findAttribute(n, "axes"))
    axes.assign(a->ints().begin(), a->ints().end());
  auto given = constantInput(g, n, 1, "axes", where);
  if (!given)
    return given.takeError();
  if (opset >= 18 && *given)
    for (double v : **given)
      axes.push_back(int64_t(v));
  if (axes.empty() && intAttr(n, "noop_with_empty_axes", 0)) {
    b.rename(b.apply("Log", {n.input(0)}), n.output(0));
    return llvm::Error::success();
  }
  std::string sum =
      b.reduce("ReduceSum", n.input(0), axes, intAttr(n, "keepdims", 1));
  b.rename(b.apply("Log", {sum}), n.output(0));
  return llvm::Error::success();
}

/// Compress(x, condition, axis) with a constant condition = Gather(x,
/// the indices where it holds, axis) (x flattened without an axis).
llvm::Error compress(GraphBuilder &b, const onnx::NodeProto &n,
                     const onnx::GraphProto &g, const Types &types,
                     const std::string &where) {
  auto x = staticShape(types, n.input(0), where);
  if (!x)
    return x.takeError();
  auto cond = constantInput(g, n, 1, "condition", where);
  if (!cond)
    return cond.takeError();
  const auto *axisAttr = findAttribute(n, "axis");
  int64_t rank = int64_t(x->size()), axis = axisAttr ? axisAttr->i() : 0;
  axis = axis < 0 ? axis + rank : axis;
  if (axis < 0 || axis >= rank)
    return llvm::createStringError(where + ": axis out of range");
  int64_t extent = 1;
  for (int64_t d : *x)
    extent *= d;
  extent = axisAttr ? (*x)[size_t(axis)] : extent;
  std::vector<int64_t> kept;
  for (size_t i = 0; *cond && i < (*cond)->size() && int64_t(i) < extent; ++i)
    if ((**cond)[i] != 0)
      kept.push_back(int64_t(i));
  if (kept.empty())
    return llvm::createStringError(
        where + ": the condition selects nothing (paxc does not support "
                "empty tensors)");
  std::string in = n.input(0);
  if (!axisAttr)
    in = b.apply("Reshape", {in, b.int64s({-1}, false)});
  onnx::NodeProto &gather = b.node("Gather", {in, b.int64s(kept, false)});
  GraphBuilder::intAttr(gather, "axis", axisAttr ? axis : 0);
  b.rename(gather.output(0), n.output(0));
  return llvm::Error::success();
}

/// ReverseSequence(x, lens) with constant lens = GatherElements along the
/// time axis: position t of batch entry i reads lens[i] - 1 - t below
/// lens[i], else itself.
llvm::Error reverseSequence(GraphBuilder &b, const onnx::NodeProto &n,
                            const onnx::GraphProto &g, const Types &types,
                            const std::string &where) {
  auto x = staticShape(types, n.input(0), where);
  if (!x)
    return x.takeError();
  auto lens = constantInput(g, n, 1, "sequence_lens", where);
  if (!lens)
    return lens.takeError();
  int64_t batch = intAttr(n, "batch_axis", 1),
          time = intAttr(n, "time_axis", 0);
  int64_t rank = int64_t(x->size());
  if (rank < 2 || std::min(batch, time) < 0 || std::max(batch, time) > 1 ||
      batch == time || !*lens ||
      int64_t((*lens)->size()) != (*x)[size_t(batch)])
    return llvm::createStringError(
        where + ": needs batch and time axes 0 and 1 and one length per "
                "batch entry");
  int64_t nb = (*x)[size_t(batch)], nt = (*x)[size_t(time)];
  if (auto e = checkBuiltSize(where, {double(nb), double(nt)}))
    return e;
  onnx::TensorProto idx;
  idx.set_data_type(onnx::TensorProto::INT64);
  for (int64_t d = 0; d < rank; ++d)
    idx.add_dims(d == batch ? nb : d == time ? nt : 1);
  for (int64_t p = 0; p < nb * nt; ++p) {
    int64_t i = batch == 0 ? p / nt : p % nb, t = batch == 0 ? p % nt : p / nb;
    int64_t len = std::clamp(int64_t((**lens)[size_t(i)]), int64_t(0), nt);
    idx.add_int64_data(t < len ? len - 1 - t : t);
  }
  std::string full = b.apply("Expand", {b.constant(idx), b.int64s(*x, false)});
  onnx::NodeProto &gather = b.node("GatherElements", {n.input(0), full});
  GraphBuilder::intAttr(gather, "axis", time);
  b.rename(gather.output(0), n.output(0));
  return llvm::Error::success();
}

/// Where position \p p of an axis of \p in positions, \p mode padded,
/// reads (edge: the nearest; reflect: mirrored about the ends; wrap:
/// modulo).
int64_t padSource(llvm::StringRef mode, int64_t p, int64_t in) {
  if (mode == "edge")
    return std::clamp(p, int64_t(0), in - 1);
  if (mode == "wrap")
    return ((p % in) + in) % in;
  int64_t period = 2 * (in - 1);
  if (period == 0)
    return 0;
  int64_t q = ((p % period) + period) % period;
  return q < in ? q : period - q;
}

/// The pads of Pad node \p n (begin per axis, then end), per its version.
llvm::Expected<std::vector<int64_t>> padsOf(const onnx::NodeProto &n,
                                            const onnx::GraphProto &g,
                                            int64_t opset, int64_t rank,
                                            const std::string &where) {
  std::vector<int64_t> pads(size_t(2 * rank), 0), given;
  std::vector<int64_t> axes;
  if (opset < 11) {
    const auto *a = findAttribute(n, opset < 2 ? "paddings" : "pads");
    if (a)
      given.assign(a->ints().begin(), a->ints().end());
  } else {
    auto p = constantInput(g, n, 1, "pads", where);
    auto x = p ? constantInput(g, n, 3, "axes", where) : std::move(p);
    if (!x)
      return x.takeError();
    for (double v : p->value_or(std::vector<double>()))
      given.push_back(int64_t(v));
    for (double v : x->value_or(std::vector<double>()))
      axes.push_back(v < 0 ? int64_t(v) + rank : int64_t(v));
  }
  if (axes.empty())
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  size_t na = axes.size();
  if (given.size() != 2 * na)
    return llvm::createStringError(where + ": needs two pads per axis");
  for (size_t k = 0; k < na; ++k) {
    if (axes[k] < 0 || axes[k] >= rank)
      return llvm::createStringError(where + ": axis out of range");
    pads[size_t(axes[k])] = given[k];
    pads[size_t(axes[k] + rank)] = given[na + k];
  }
  return pads;
}

/// Pad in edge, reflect or wrap mode = a Gather along each padded axis
/// through constant source positions (negative pads crop).
llvm::Error padByGathers(GraphBuilder &b, const onnx::NodeProto &n,
                         const onnx::GraphProto &g, int64_t opset,
                         const Types &types, const std::string &where) {
  auto x = staticShape(types, n.input(0), where);
  if (!x)
    return x.takeError();
  int64_t rank = int64_t(x->size());
  auto pads = padsOf(n, g, opset, rank, where);
  if (!pads)
    return pads.takeError();
  llvm::StringRef mode = findAttribute(n, "mode")->s();
  std::string v = n.input(0);
  for (int64_t d = 0; d < rank; ++d) {
    int64_t in = (*x)[size_t(d)], lo = (*pads)[size_t(d)],
            hi = (*pads)[size_t(d + rank)];
    if (lo == 0 && hi == 0)
      continue;
    double out = double(in + lo + hi);
    if (auto e = checkBuiltSize(where, {out}))
      return e;
    if (out < 1 || (mode == "reflect" && std::max(lo, hi) >= in))
      return llvm::createStringError(where + ": pads out of range for axis " +
                                     std::to_string(d));
    std::vector<int64_t> source;
    for (int64_t p = -lo; p < in + hi; ++p)
      source.push_back(padSource(mode, p, in));
    onnx::NodeProto &gather = b.node("Gather", {v, b.int64s(source, false)});
    GraphBuilder::intAttr(gather, "axis", d);
    v = gather.output(0);
  }
  if (v == n.input(0))
    v = b.apply("Identity", {v});
  b.rename(v, n.output(0));
  return llvm::Error::success();
}

} // namespace

/// Whether rewriteSmallOps rewrites \p n.
static bool small(const onnx::NodeProto &n) {
  static const llvm::StringSet<> ops = {
      "Hardmax", "EyeLike",      "ThresholdedRelu", "OneHot",
      "Shrink",  "ReduceLogSum", "Compress",        "ReverseSequence"};
  if (!n.domain().empty() && n.domain() != "ai.onnx")
    return false;
  if (n.op_type() == "Pad") {
    const auto *mode = findAttribute(n, "mode");
    return mode && (mode->s() == "edge" || mode->s() == "reflect" ||
                    mode->s() == "wrap");
  }
  return ops.contains(n.op_type());
}

/// \p n (node \p i of \p g) as the ops that define it, appended to \p b.
static llvm::Error rewriteOne(llvm::StringRef path, const onnx::GraphProto &g,
                              int64_t opset, const onnx::NodeProto &n, int i,
                              GraphBuilder &b, const Types &types) {
  std::string where = nodeWhere(path, n, i);
  llvm::StringRef op = n.op_type();
  if (op == "Hardmax")
    return hardmax(b, n, opset, types, where);
  if (op == "EyeLike")
    return eyeLike(b, n, types, where);
  if (op == "OneHot")
    return oneHot(b, n, g, types, where);
  if (op == "Shrink")
    return shrink(b, n, types);
  if (op == "ReduceLogSum")
    return reduceLogSum(b, n, g, opset, where);
  if (op == "Compress")
    return compress(b, n, g, types, where);
  if (op == "ReverseSequence")
    return reverseSequence(b, n, g, types, where);
  if (op == "Pad")
    return padByGathers(b, n, g, opset, types, where);
  return thresholdedRelu(b, n, types);
}

llvm::Error rewriteSmallOps(llvm::StringRef path, onnx::ModelProto &model,
                            int64_t opset) {
  const onnx::GraphProto &g = model.graph();
  return rewriteNodes(path, model, opset, small,
                      [&](const onnx::NodeProto &n, int i, GraphBuilder &b,
                          const Types &types) {
                        return rewriteOne(path, g, opset, n, i, b, types);
                      });
}

} // namespace pax
