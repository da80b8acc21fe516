//===- Quantize.cpp - Quantized ONNX ops as float and integer ops ---------===//
#include "frontend/Quantize.h"

#include "frontend/GraphBuilder.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSwitch.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pax {
namespace {

using Types = llvm::StringMap<onnx::TypeProto>;
constexpr int32_t kF32 = onnx::TensorProto::FLOAT;
constexpr int32_t kF64 = onnx::TensorProto::DOUBLE;
constexpr int32_t kI32 = onnx::TensorProto::INT32;

/// The values a quantized type \p elem holds, or none for types paxc does
/// not quantize to (float8, 4-bit, 32-bit).
std::optional<std::pair<double, double>> quantRange(int32_t elem) {
  switch (elem) {
  case onnx::TensorProto::UINT8:
    return std::make_pair(0.0, 255.0);
  case onnx::TensorProto::INT8:
    return std::make_pair(-128.0, 127.0);
  case onnx::TensorProto::UINT16:
    return std::make_pair(0.0, 65535.0);
  case onnx::TensorProto::INT16:
    return std::make_pair(-32768.0, 32767.0);
  default:
    return std::nullopt;
  }
}

/// One node's rewrite: the builder, the node, the graph's types and the
/// node's name for errors.
struct Rewrite {
  GraphBuilder &b;
  const onnx::NodeProto &n;
  const Types &types;
  std::string where;

  bool has(int i) const { return i < n.input_size() && !n.input(i).empty(); }
  llvm::Error fail(const std::string &what) const {
    return llvm::createStringError(where + ": " + what);
  }
  std::string cast(const std::string &x, int32_t elem) {
    return b.cast(x, elem);
  }
  /// Input \p i (a scale or zero point) shaped to broadcast along axis
  /// \p axis of a rank-\p rank tensor, in \p elem.
  llvm::Expected<std::string> alongAxis(int i, int64_t rank, int64_t axis,
                                        int32_t elem);
  /// (input x - zero point z) * scale s, in \p elem; s and z along \p axis.
  llvm::Expected<std::string> dequantize(int x, int s, int z, int64_t axis,
                                         int32_t elem);
  /// \p real (rank \p rank) quantized by scale input \p s and zero point
  /// input \p z along \p axis (into \p out when z is absent), computed in
  /// \p elem.
  llvm::Expected<std::string> quantize(const std::string &real, int64_t rank,
                                       int64_t axis, int s, int z, int32_t out,
                                       int32_t elem);
  /// Cast<out>(Clip(Round(real / scale) + zero, out's range)), in \p elem.
  llvm::Expected<std::string> saturate(const std::string &real,
                                       const std::string &scale,
                                       std::optional<std::string> zero,
                                       int32_t out, int32_t elem);
  int64_t rankOf(int i) const {
    return types.lookup(n.input(i)).tensor_type().shape().dim_size();
  }
  int64_t axisAttr(int64_t rank) const {
    int64_t axis = 1;
    if (const auto *a = findAttribute(n, "axis"))
      axis = a->i();
    return axis < 0 ? axis + rank : axis;
  }
};

llvm::Expected<std::string> Rewrite::alongAxis(int i, int64_t rank,
                                               int64_t axis, int32_t elem) {
  auto shape = staticShape(types, n.input(i), where);
  if (!shape)
    return shape.takeError();
  std::string v = cast(n.input(i), elem);
  int64_t count = 1;
  for (int64_t d : *shape)
    count *= d;
  if (count == 1)
    return v;
  if (shape->size() != 1 || axis < 0 || axis >= rank)
    return fail("'" + n.input(i) +
                "' must be a scalar or hold one value per index of the axis "
                "(block quantization is not supported)");
  std::vector<int64_t> trailing;
  for (int64_t k = 1; k < rank - axis; ++k)
    trailing.push_back(k);
  return trailing.empty() ? v : b.unsqueeze(v, trailing);
}

llvm::Expected<std::string> Rewrite::dequantize(int x, int s, int z,
                                                int64_t axis, int32_t elem) {
  int64_t rank = rankOf(x);
  std::string v = cast(n.input(x), elem);
  if (has(z)) {
    auto zero = alongAxis(z, rank, axis, elem);
    if (!zero)
      return zero.takeError();
    v = b.apply("Sub", {v, *zero});
  }
  auto scale = alongAxis(s, rank, axis, elem);
  if (!scale)
    return scale.takeError();
  return b.apply("Mul", {v, *scale});
}

llvm::Expected<std::string> Rewrite::quantize(const std::string &real,
                                              int64_t rank, int64_t axis, int s,
                                              int z, int32_t out,
                                              int32_t elem) {
  if (has(z))
    out = elemOf(types, n.input(z));
  auto scale = alongAxis(s, rank, axis, elem);
  if (!scale)
    return scale.takeError();
  std::optional<std::string> zero;
  if (has(z)) {
    auto v = alongAxis(z, rank, axis, elem);
    if (!v)
      return v.takeError();
    zero = *v;
  }
  return saturate(real, *scale, zero, out, elem);
}

llvm::Expected<std::string> Rewrite::saturate(const std::string &real,
                                              const std::string &scale,
                                              std::optional<std::string> zero,
                                              int32_t out, int32_t elem) {
  auto range = quantRange(out);
  if (!range)
    return fail("quantizing to ONNX type " + std::to_string(out) +
                " is not supported (8- and 16-bit integers only)");
  std::string q = b.apply("Round", {b.apply("Div", {real, scale})});
  if (zero)
    q = b.apply("Add", {q, *zero});
  q = b.apply("Max", {q, b.scalar(range->first, elem)});
  q = b.apply("Min", {q, b.scalar(range->second, elem)});
  return cast(q, out);
}

/// DynamicQuantizeLinear's outputs (ONNX's definition): the scale maps
/// [min(x, 0), max(x, 0)] onto [0, 255], the zero point is where 0 lands.
llvm::Error dynamicQuantize(Rewrite &r) {
  std::string x = r.n.input(0);
  if (elemOf(r.types, x) != kF32)
    return r.fail("the input must be float");
  std::string zero = r.b.scalar(0.0, kF32);
  std::string lo = r.b.apply("Min", {r.b.reduceAll("ReduceMin", x), zero});
  std::string hi = r.b.apply("Max", {r.b.reduceAll("ReduceMax", x), zero});
  std::string scale =
      r.b.apply("Div", {r.b.apply("Sub", {hi, lo}), r.b.scalar(255.0, kF32)});
  auto zp = r.saturate(r.b.apply("Neg", {lo}), scale, std::nullopt,
                       onnx::TensorProto::UINT8, kF32);
  if (!zp)
    return zp.takeError();
  auto y =
      r.saturate(x, scale, r.cast(*zp, kF32), onnx::TensorProto::UINT8, kF32);
  if (!y)
    return y.takeError();
  std::string values[3] = {*y, scale, *zp};
  for (int k = 0; k < 3 && k < r.n.output_size(); ++k)
    if (!r.n.output(k).empty())
      r.b.rename(values[k], r.n.output(k));
  return llvm::Error::success();
}

llvm::Expected<std::string> quantizeLinear(Rewrite &r) {
  if (const auto *a = findAttribute(r.n, "block_size"); a && a->i() != 0)
    return r.fail("block quantization (block_size) is not supported");
  int32_t x = elemOf(r.types, r.n.input(0));
  int32_t elem = x == kF64 ? kF64 : kF32;
  int32_t out = onnx::TensorProto::UINT8;
  if (const auto *a = findAttribute(r.n, "output_dtype"); a && a->i() != 0)
    out = int32_t(a->i());
  std::string real = x == elem ? r.n.input(0) : r.cast(r.n.input(0), elem);
  int64_t rank = r.rankOf(0);
  return r.quantize(real, rank, r.axisAttr(rank), 1, 2, out, elem);
}

llvm::Expected<std::string> dequantizeLinear(Rewrite &r) {
  if (const auto *a = findAttribute(r.n, "block_size"); a && a->i() != 0)
    return r.fail("block quantization (block_size) is not supported");
  int32_t out = elemOf(r.types, r.n.input(1));
  if (!quantRange(elemOf(r.types, r.n.input(0))) &&
      elemOf(r.types, r.n.input(0)) != kI32)
    return r.fail("dequantizing ONNX type " +
                  std::to_string(elemOf(r.types, r.n.input(0))) +
                  " is not supported (8-, 16- and 32-bit integers only)");
  int32_t elem = out == kF64 ? kF64 : kF32;
  auto y = r.dequantize(0, 1, 2, r.axisAttr(r.rankOf(0)), elem);
  if (!y || out == elem)
    return y;
  return r.cast(*y, out);
}

/// Input \p i of a product minus its zero point \p z (along \p axis), in
/// f64: the integer operand of MatMulInteger and ConvInteger.
llvm::Expected<std::string> centered(Rewrite &r, int i, int z, int64_t axis) {
  std::string v = r.cast(r.n.input(i), kF64);
  if (!r.has(z))
    return v;
  auto zero = r.alongAxis(z, r.rankOf(i), axis, kF64);
  if (!zero)
    return zero.takeError();
  return r.b.apply("Sub", {v, *zero});
}

/// A Conv of \p x and \p w (and \p bias) with \p r's node's attributes.
std::string conv(Rewrite &r, const std::string &x, const std::string &w,
                 const std::string &bias) {
  std::vector<std::string> in{x, w};
  if (!bias.empty())
    in.push_back(bias);
  onnx::NodeProto &c = r.b.node("Conv", in);
  for (const auto &a : r.n.attribute())
    *c.add_attribute() = a;
  return c.output(0);
}

llvm::Expected<std::string> integerProduct(Rewrite &r) {
  bool isConv = r.n.op_type() == "ConvInteger";
  int64_t ra = r.rankOf(0), rb = r.rankOf(1);
  // Per-row zero points of a; per-column of b (per output channel of w).
  auto a = centered(r, 0, 2, isConv ? 1 : ra - 2);
  if (!a)
    return a.takeError();
  auto b = centered(r, 1, 3, isConv ? 0 : rb - 1);
  if (!b)
    return b.takeError();
  std::string p = isConv ? conv(r, *a, *b, "") : r.b.apply("MatMul", {*a, *b});
  return r.cast(p, kI32);
}

llvm::Expected<std::string> qlinearProduct(Rewrite &r) {
  bool isConv = r.n.op_type() == "QLinearConv";
  int64_t ra = r.rankOf(0), rb = r.rankOf(3);
  auto a = r.dequantize(0, 1, 2, isConv ? 1 : ra - 2, kF64);
  if (!a)
    return a.takeError();
  auto b = r.dequantize(3, 4, 5, isConv ? 0 : rb - 1, kF64);
  if (!b)
    return b.takeError();
  std::string bias;
  if (isConv && r.has(8)) {
    auto ws = r.alongAxis(4, 1, 0, kF64);
    if (!ws)
      return ws.takeError();
    std::string scale = r.b.apply("Mul", {r.cast(r.n.input(1), kF64), *ws});
    bias = r.b.apply("Mul", {r.cast(r.n.input(8), kF64), scale});
  }
  std::string p =
      isConv ? conv(r, *a, *b, bias) : r.b.apply("MatMul", {*a, *b});
  int64_t rank = isConv ? ra : std::max(ra, rb);
  return r.quantize(p, rank, isConv ? 1 : rank - 1, 6, 7,
                    onnx::TensorProto::UINT8, kF64);
}

bool quantized(const onnx::NodeProto &n) {
  return (n.domain().empty() || n.domain() == "ai.onnx") &&
         llvm::StringSwitch<bool>(n.op_type())
             .Cases("QuantizeLinear", "DequantizeLinear",
                    "DynamicQuantizeLinear", "MatMulInteger", "ConvInteger",
                    "QLinearMatMul", "QLinearConv", true)
             .Default(false);
}

} // namespace

/// \p r's node as the ops that define it.
static llvm::Error lowerOne(Rewrite &r) {
  llvm::StringRef op = r.n.op_type();
  int need = op.starts_with("QLinear")       ? 8
             : op == "DynamicQuantizeLinear" ? 1
                                             : 2;
  for (int k = 0; k < need; ++k)
    if (!r.has(k))
      return r.fail("needs " + std::to_string(need) + " inputs");
  if (op == "DynamicQuantizeLinear")
    return dynamicQuantize(r);
  llvm::Expected<std::string> y =
      op == "QuantizeLinear"      ? quantizeLinear(r)
      : op == "DequantizeLinear"  ? dequantizeLinear(r)
      : op.starts_with("QLinear") ? qlinearProduct(r)
                                  : integerProduct(r);
  if (!y)
    return y.takeError();
  r.b.rename(*y, r.n.output(0));
  return llvm::Error::success();
}

llvm::Error lowerQuantized(llvm::StringRef path, onnx::ModelProto &model,
                           int64_t opset) {
  return rewriteNodes(path, model, opset, quantized,
                      [&](const onnx::NodeProto &n, int i, GraphBuilder &b,
                          const Types &types) {
                        Rewrite r{b, n, types, nodeWhere(path, n, i)};
                        return lowerOne(r);
                      });
}

} // namespace pax
