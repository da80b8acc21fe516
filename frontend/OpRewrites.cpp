//===- OpRewrites.cpp - Small ONNX ops written as other ONNX ops ----------===//
#include "frontend/OpRewrites.h"

#include "frontend/GraphBuilder.h"

#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <string>
#include <vector>

namespace pax {
namespace {

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
  onnx::TensorProto iota;
  iota.set_data_type(onnx::TensorProto::INT64);
  for (int64_t d = 0; d < rank; ++d)
    iota.add_dims(d == axis ? (*x)[size_t(axis)] : 1);
  for (int64_t i = 0; i < (*x)[size_t(axis)]; ++i)
    iota.add_int64_data(i);
  std::string eq = b.apply("Equal", {b.constant(iota), arg.output(0)});
  onnx::NodeProto &cast = b.node("Cast", {eq});
  GraphBuilder::intAttr(cast, "to", elemOf(types, n.input(0)));
  b.rename(cast.output(0), n.output(0));
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
  onnx::NodeProto &cast = b.node("Cast", {b.constant(eye)});
  GraphBuilder::intAttr(cast, "to", elem);
  b.rename(cast.output(0), n.output(0));
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

} // namespace

llvm::Error rewriteSmallOps(llvm::StringRef path, onnx::ModelProto &model,
                            int64_t opset) {
  auto small = [](const onnx::NodeProto &n) {
    return (n.domain().empty() || n.domain() == "ai.onnx") &&
           (n.op_type() == "Hardmax" || n.op_type() == "EyeLike" ||
            n.op_type() == "ThresholdedRelu");
  };
  return rewriteNodes(
      path, model, opset, small,
      [&](const onnx::NodeProto &n, int i, GraphBuilder &b,
          const llvm::StringMap<onnx::TypeProto> &types) -> llvm::Error {
        std::string where = nodeWhere(path, n, i);
        if (n.op_type() == "Hardmax")
          return hardmax(b, n, opset, types, where);
        if (n.op_type() == "EyeLike")
          return eyeLike(b, n, types, where);
        return thresholdedRelu(b, n, types);
      });
}

} // namespace pax
