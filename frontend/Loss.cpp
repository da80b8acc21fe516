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

namespace {

/// The loss's errors: "PATH: --loss=KIND: message".
struct LossError {
  std::string prefix;
  llvm::Error operator()(const llvm::Twine &msg) const {
    return llvm::createStringError(prefix + msg);
  }
};

/// The output the loss reads (--loss-output, else the first), its type
/// as declared or as ONNX's shape inference gives it: a float tensor of
/// known rank.
llvm::Expected<onnx::ValueInfoProto> lossInput(const onnx::ModelProto &model,
                                               const LossOptions &options,
                                               const LossError &fail) {
  const onnx::GraphProto &g = model.graph();
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
  if (!y.type().tensor_type().has_shape()) {
    auto types = inferTypes(model);
    if (auto it = types.find(y.name()); it != types.end())
      *y.mutable_type() = it->second;
  }
  std::string what = "output '" + y.name() + "'";
  if (!y.type().has_tensor_type())
    return fail(what + " is not a tensor");
  int32_t elem = y.type().tensor_type().elem_type();
  if (!isFloatElem(elem))
    return fail(what + " is " + onnxElemName(elem) + "; the loss needs floats");
  if (!y.type().tensor_type().has_shape())
    return fail(what + " declares no shape and ONNX's shape inference finds "
                       "none; the loss needs its rank");
  return y;
}

/// Cross-entropy over \p y's last axis against int64 \p labels (their
/// type set here), the positions labelled with the ignore index left out.
llvm::Expected<std::string>
crossEntropy(GraphBuilder &b, const onnx::ValueInfoProto &y, int64_t opset,
             const LossOptions &options, onnx::ValueInfoProto &labels,
             const LossError &fail) {
  const onnx::TypeProto::Tensor &type = y.type().tensor_type();
  int64_t rank = type.shape().dim_size();
  if (rank < 1)
    return fail("output '" + y.name() +
                "' is a scalar; cross-entropy needs the classes along its "
                "last axis");
  if (opset < 11)
    return fail("cross-entropy needs opset 11 or later (GatherElements); "
                "the model imports opset " +
                llvm::Twine(opset));
  auto &lt = *labels.mutable_type()->mutable_tensor_type();
  lt.set_elem_type(onnx::TensorProto::INT64);
  for (int64_t i = 0; i + 1 < rank; ++i)
    *lt.mutable_shape()->add_dim() = type.shape().dim(int(i));
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
  if (!options.ignoreIndex)
    return b.apply("Neg", {b.reduceAll("ReduceMean", picked)});
  std::string kept = b.cast(keep, type.elem_type());
  std::string total = b.reduceAll(
      "ReduceSum", b.apply("Mul", {picked, b.unsqueeze(kept, {last})}));
  std::string count = b.reduceAll("ReduceSum", kept);
  return b.apply("Neg", {b.apply("Div", {total, count})});
}

/// The loss of \p options' kind over \p y (labels typed into \p labels
/// where the kind takes them).
llvm::Expected<std::string> lossValue(GraphBuilder &b,
                                      const onnx::ValueInfoProto &y,
                                      int64_t opset, const LossOptions &options,
                                      onnx::ValueInfoProto &labels,
                                      const LossError &fail) {
  switch (options.kind) {
  case LossOptions::Kind::Output:
    for (const auto &d : y.type().tensor_type().shape().dim())
      if (!d.has_dim_value() || d.dim_value() != 1)
        return fail("output '" + y.name() +
                    "' is not a single value (its shape must be [] or all "
                    "ones)");
    return y.name();
  case LossOptions::Kind::Mse: {
    *labels.mutable_type() = y.type();
    std::string d = b.apply("Sub", {y.name(), "labels"});
    return b.reduceAll("ReduceMean", b.apply("Mul", {d, d}));
  }
  case LossOptions::Kind::CrossEntropy:
    return crossEntropy(b, y, opset, options, labels, fail);
  case LossOptions::Kind::None:
    break;
  }
  return fail("no loss");
}

} // namespace

llvm::Error appendLoss(llvm::StringRef path, onnx::ModelProto &model,
                       int64_t opset, const LossOptions &options) {
  if (options.kind == LossOptions::Kind::None)
    return llvm::Error::success();
  bool output = options.kind == LossOptions::Kind::Output;
  const char *flag = options.kind == LossOptions::Kind::CrossEntropy
                         ? "--loss=cross-entropy"
                     : options.kind == LossOptions::Kind::Mse ? "--loss=mse"
                                                              : "--loss=output";
  LossError fail{(path + ": " + flag + ": ").str()};
  if (options.ignoreIndex && options.kind != LossOptions::Kind::CrossEntropy)
    return fail("--ignore-index applies to cross-entropy only");
  auto y = lossInput(model, options, fail);
  if (!y)
    return y.takeError();
  onnx::GraphProto &g = *model.mutable_graph();
  // A model that computes its own loss (output) keeps its inputs, a
  // `labels` among them; the other kinds add theirs.
  for (const auto &vi : g.input())
    if (vi.name() == "labels" && !output)
      return fail("the model already has an input named 'labels'");
  GraphBuilder b(g, opset, "pax_loss/");
  onnx::ValueInfoProto labels;
  labels.set_name("labels");
  auto loss = lossValue(b, *y, opset, options, labels, fail);
  if (!loss)
    return loss.takeError();
  // The loss is the only output: the model's own, or a fresh scalar.
  onnx::ValueInfoProto out;
  if (output) {
    out = *y;
  } else {
    *g.add_input() = labels;
    out.set_name(b.rename(*loss, b.fresh("loss", "")));
    auto &t = *out.mutable_type()->mutable_tensor_type();
    t.set_elem_type(y->type().tensor_type().elem_type());
    t.mutable_shape();
  }
  g.clear_output();
  *g.add_output() = out;
  return llvm::Error::success();
}

} // namespace pax
