//===- Loss.cpp - A training loss appended to an ONNX graph ---------------===//
#include "frontend/Loss.h"
#include "frontend/GraphBuilder.h"
#include "frontend/TensorProto.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"

namespace pax {

std::optional<LossOptions::Kind> parseLossKind(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<LossOptions::Kind>>(name)
      .Case("cross-entropy", LossOptions::Kind::CrossEntropy)
      .Case("mse", LossOptions::Kind::Mse)
      .Case("output", LossOptions::Kind::Output)
      .Default(std::nullopt);
}

namespace {

bool isFloatElem(int32_t elem) {
  return elem == onnx::TensorProto::FLOAT ||
         elem == onnx::TensorProto::DOUBLE ||
         elem == onnx::TensorProto::FLOAT16 ||
         elem == onnx::TensorProto::BFLOAT16;
}

} // namespace

llvm::Error appendLoss(llvm::StringRef path, onnx::ModelProto &model,
                       int64_t opset, const LossOptions &options) {
  if (options.kind == LossOptions::Kind::None)
    return llvm::Error::success();
  onnx::GraphProto &g = *model.mutable_graph();
  const char *flag = options.kind == LossOptions::Kind::CrossEntropy
                         ? "--loss=cross-entropy"
                     : options.kind == LossOptions::Kind::Mse ? "--loss=mse"
                                                              : "--loss=output";
  auto fail = [&](const llvm::Twine &msg) {
    return llvm::createStringError(path + ": " + flag + ": " + msg);
  };
  if (options.ignoreIndex && options.kind != LossOptions::Kind::CrossEntropy)
    return fail("--ignore-index applies to cross-entropy only");

  // The output the loss reads.
  int index = 0;
  if (!options.output.empty()) {
    index = -1;
    std::vector<std::string> names;
    for (int i = 0; i < g.output_size(); ++i) {
      names.push_back("'" + g.output(i).name() + "'");
      if (g.output(i).name() == options.output)
        index = i;
    }
    if (index < 0)
      return fail("the model has no output '" + options.output +
                  "' (its outputs: " + llvm::join(names, ", ") + ")");
  }
  onnx::ValueInfoProto y = g.output(index);
  // Its type: as declared, else from ONNX's shape inference.
  if (!y.type().tensor_type().has_shape()) {
    auto types = inferTypes(model);
    if (auto it = types.find(y.name()); it != types.end())
      *y.mutable_type() = it->second;
  }
  std::string what = "output '" + y.name() + "'";
  if (!y.type().has_tensor_type())
    return fail(what + " is not a tensor");
  const onnx::TypeProto::Tensor &type = y.type().tensor_type();
  int32_t elem = type.elem_type();
  if (!isFloatElem(elem))
    return fail(what + " is " + onnxElemName(elem) + "; the loss needs floats");
  if (!type.has_shape())
    return fail(what + " declares no shape and ONNX's shape inference finds "
                       "none; the loss needs its rank");
  int64_t rank = type.shape().dim_size();

  // A model that computes its own loss (output) keeps its inputs, a
  // `labels` among them; the other kinds add theirs.
  for (const auto &vi : g.input())
    if (vi.name() == "labels" && options.kind != LossOptions::Kind::Output)
      return fail("the model already has an input named 'labels'");
  GraphBuilder b(g, opset, "pax_loss/");
  std::string loss;
  onnx::ValueInfoProto labels;
  labels.set_name("labels");
  switch (options.kind) {
  case LossOptions::Kind::None:
    break;
  case LossOptions::Kind::Output: {
    for (const auto &d : type.shape().dim())
      if (!d.has_dim_value() || d.dim_value() != 1)
        return fail(what + " is not a single value (its shape must be [] "
                           "or all ones)");
    loss = y.name();
    break;
  }
  case LossOptions::Kind::Mse: {
    *labels.mutable_type() = y.type();
    std::string d = b.apply("Sub", {y.name(), "labels"});
    loss = b.reduceAll("ReduceMean", b.apply("Mul", {d, d}));
    break;
  }
  case LossOptions::Kind::CrossEntropy: {
    if (rank < 1)
      return fail(what + " is a scalar; cross-entropy needs the classes "
                         "along its last axis");
    if (opset < 11)
      return fail("cross-entropy needs opset 11 or later (GatherElements); "
                  "the model imports opset " +
                  llvm::Twine(opset));
    auto &lt = *labels.mutable_type()->mutable_tensor_type();
    lt.set_elem_type(onnx::TensorProto::INT64);
    auto &shape = *lt.mutable_shape();
    for (int64_t i = 0; i + 1 < rank; ++i)
      *shape.add_dim() = type.shape().dim(int(i));
    int64_t last = rank - 1;
    onnx::NodeProto &logSoftmax = b.node("LogSoftmax", {y.name()});
    GraphBuilder::intAttr(logSoftmax, "axis", last);
    std::string index = "labels", keep;
    if (options.ignoreIndex) {
      std::string ignored = b.int64s({*options.ignoreIndex}, true);
      keep = b.apply("Not", {b.apply("Equal", {"labels", ignored})});
      index = b.apply("Where", {keep, "labels", b.int64s({0}, true)});
    }
    onnx::NodeProto &gather = b.node(
        "GatherElements", {logSoftmax.output(0), b.unsqueeze(index, {last})});
    GraphBuilder::intAttr(gather, "axis", last);
    std::string picked = gather.output(0);
    if (!options.ignoreIndex) {
      loss = b.apply("Neg", {b.reduceAll("ReduceMean", picked)});
      break;
    }
    onnx::NodeProto &cast = b.node("Cast", {keep});
    GraphBuilder::intAttr(cast, "to", elem);
    std::string kept = cast.output(0);
    std::string total = b.reduceAll(
        "ReduceSum", b.apply("Mul", {picked, b.unsqueeze(kept, {last})}));
    std::string count = b.reduceAll("ReduceSum", kept);
    loss = b.apply("Neg", {b.apply("Div", {total, count})});
    break;
  }
  }
  if (options.kind != LossOptions::Kind::Output) {
    *g.add_input() = labels;
    loss = b.rename(loss, b.fresh("loss", ""));
  }
  // The loss is the only output.
  onnx::ValueInfoProto out;
  out.set_name(loss);
  out.mutable_type()->mutable_tensor_type()->set_elem_type(elem);
  if (options.kind == LossOptions::Kind::Output)
    *out.mutable_type() = y.type();
  else
    out.mutable_type()->mutable_tensor_type()->mutable_shape();
  g.clear_output();
  *g.add_output() = out;
  return llvm::Error::success();
}

} // namespace pax
