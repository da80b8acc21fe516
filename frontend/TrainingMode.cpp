//===- TrainingMode.cpp - ONNX nodes in training mode, rewritten ----------===//
#include "frontend/TrainingMode.h"
#include "frontend/GraphBuilder.h"
#include "frontend/TensorProto.h"

#include "llvm/ADT/StringSet.h"

#include <optional>
#include <vector>

namespace pax {

namespace {

bool usesBatchStats(const onnx::NodeProto &n, const TrainingModeOptions &o) {
  if (n.op_type() != "BatchNormalization" || !n.domain().empty())
    return false;
  if (o.batchStats)
    return true;
  const onnx::AttributeProto *mode = findAttribute(n, "training_mode");
  return mode && mode->i() != 0;
}

/// The value of the constant \p name (an initializer or a Constant node's
/// output) as an integer, or nullopt when it is not one.
std::optional<int64_t> constantInt(const onnx::GraphProto &g,
                                   const std::string &name) {
  const onnx::TensorProto *t = findConstant(g, name);
  if (!t)
    return std::nullopt;
  auto v = readTensorProto(*t, "");
  if (!v) {
    llvm::consumeError(v.takeError());
    return std::nullopt;
  }
  if (v->numel() != 1)
    return std::nullopt;
  return int64_t(v->real(0));
}

/// Dropout in training mode: training_mode given and true.
llvm::Expected<bool> dropsOut(llvm::StringRef path, const onnx::GraphProto &g,
                              const onnx::NodeProto &n) {
  if (n.op_type() != "Dropout" || !n.domain().empty() || n.input_size() < 3 ||
      n.input(2).empty())
    return false;
  auto mode = constantInt(g, n.input(2));
  if (!mode)
    return llvm::createStringError(
        path + ": node '" + n.name() +
        "' (Dropout): training_mode must be a constant");
  return *mode != 0;
}

/// Marks in \p drop which nodes of \p g are Dropouts in training mode, and
/// says whether any node needs rewriting.
llvm::Expected<bool> findTrainingNodes(llvm::StringRef path,
                                       const onnx::GraphProto &g,
                                       const TrainingModeOptions &options,
                                       std::vector<bool> &drop) {
  bool any = false;
  for (const auto &n : g.node()) {
    auto drops = dropsOut(path, g, n);
    if (!drops)
      return drops.takeError();
    drop.push_back(*drops);
    any |= *drops || usesBatchStats(n, options);
  }
  return any;
}

/// The names of \p g's initializers.
llvm::StringSet<> initializerNames(const onnx::GraphProto &g) {
  llvm::StringSet<> initializers;
  for (const auto &t : g.initializer())
    initializers.insert(t.name());
  return initializers;
}

/// An error: \p where (the node), then \p msg.
llvm::Error nodeError(const std::string &where, const llvm::Twine &msg) {
  return llvm::createStringError(where + msg);
}

/// The rank and element type of a BatchNormalization's input X.
struct InputType {
  int64_t rank;
  int32_t elem;
};

/// Checks a BatchNormalization on batch statistics (\p where names it) and
/// returns its input X's rank and element type.
llvm::Expected<InputType>
checkBatchNorm(const onnx::NodeProto &n,
               const llvm::StringMap<onnx::TypeProto> &types,
               const std::string &where) {
  if (n.input_size() < 5)
    return nodeError(where, "expected 5 inputs (X, scale, B, mean, var)");
  for (int i = 3; i < n.output_size(); ++i)
    if (!n.output(i).empty())
      return nodeError(where, "its saved statistics (output " + llvm::Twine(i) +
                                  ") are not supported");
  auto it = types.find(n.input(0));
  if (it == types.end() || !it->second.tensor_type().has_shape())
    return nodeError(where, "the rank of input 'X' (" + n.input(0) +
                                ") is unknown to ONNX's shape inference");
  int64_t rank = it->second.tensor_type().shape().dim_size();
  int32_t elem = it->second.tensor_type().elem_type();
  if (rank < 2)
    return nodeError(where, "input 'X' must have rank 2 or more");
  return InputType{rank, elem};
}

/// Rewrites a graph's training-mode nodes in place, collecting the running
/// statistics to update.
struct TrainingRewriter {
  llvm::StringRef path;
  onnx::GraphProto &g;
  const TrainingModeOptions &options;
  llvm::StringMap<onnx::TypeProto> types;
  llvm::StringSet<> initializers;
  GraphBuilder b;
  /// The running statistics to update and their next values, in order.
  std::vector<std::pair<std::string, std::string>> updates;
  llvm::StringSet<> updated;

  TrainingRewriter(llvm::StringRef path, onnx::ModelProto &model, int64_t opset,
                   const TrainingModeOptions &options)
      : path(path), g(*model.mutable_graph()), options(options),
        types(inferTypes(model)), initializers(initializerNames(g)),
        b(g, opset, "pax_bn/") {}

  /// Replaces the graph's nodes by their rewrites (\p drop: the Dropouts in
  /// training mode), then adds the update outputs.
  llvm::Error run(const std::vector<bool> &drop) {
    std::vector<onnx::NodeProto> nodes(g.node().begin(), g.node().end());
    g.clear_node();
    for (size_t i = 0; i < nodes.size(); ++i)
      if (auto err = rewriteNode(nodes[i], drop[i]))
        return err;
    addUpdateOutputs();
    return llvm::Error::success();
  }

  /// Appends \p n to the graph, rewritten when it is in training mode
  /// (\p drops: a Dropout in training mode).
  llvm::Error rewriteNode(onnx::NodeProto &n, bool drops) {
    if (drops)
      return rewriteDropout(n);
    if (!usesBatchStats(n, options)) {
      *g.add_node() = std::move(n);
      return llvm::Error::success();
    }
    return rewriteBatchNorm(n);
  }

  /// Appends the nodes of a Dropout \p n in training mode.
  llvm::Error rewriteDropout(const onnx::NodeProto &n) {
    b.setPrefix("pax_dropout/");
    // X / (1 - ratio) where the draw is at least the ratio, else 0.
    const std::string &x = n.input(0);
    auto xt = types.find(x);
    if (xt == types.end())
      return llvm::createStringError(path + ": node '" + n.name() +
                                     "' (Dropout): the type of input '" + x +
                                     "' is unknown");
    int32_t elem = xt->second.tensor_type().elem_type();
    std::string ratio = n.input_size() > 1 && !n.input(1).empty()
                            ? n.input(1)
                            : b.scalar(0.5, elem);
    onnx::NodeProto &draw = b.node("RandomUniformLike", {x});
    draw.set_name(b.fresh(n.name()));
    std::string keep = b.apply("GreaterOrEqual", {draw.output(0), ratio});
    std::string one = b.scalar(1, elem);
    std::string scaled = b.apply("Div", {x, b.apply("Sub", {one, ratio})});
    onnx::NodeProto &y = b.node("Where", {keep, scaled, b.scalar(0, elem)});
    b.rename(y.output(0), n.output(0));
    if (n.output_size() > 1 && !n.output(1).empty())
      b.rename(b.apply("Identity", {keep}), n.output(1));
    return llvm::Error::success();
  }

  /// Appends the nodes of a BatchNormalization \p n on batch statistics.
  llvm::Error rewriteBatchNorm(const onnx::NodeProto &n) {
    b.setPrefix("pax_bn/");
    std::string where = (path + ": node '" + n.name() +
                         "' (BatchNormalization, batch statistics): ")
                            .str();
    auto xType = checkBatchNorm(n, types, where);
    if (!xType)
      return xType.takeError();
    double eps = 1e-5, momentum = 0.9;
    if (const auto *a = findAttribute(n, "epsilon"))
      eps = a->f();
    if (const auto *a = findAttribute(n, "momentum"))
      momentum = a->f();
    auto [mean, var] = normalize(n, xType->rank, xType->elem, eps);
    return updateRunningStats(n, where, mean, var, momentum, xType->elem);
  }

  /// Appends the nodes writing \p n's Y from its input X of rank \p rank and
  /// element type \p elem, and returns the batch's mean and variance.
  std::pair<std::string, std::string>
  normalize(const onnx::NodeProto &n, int64_t rank, int32_t elem, double eps) {
    // Every axis but the channels (1), and the channels' broadcast shape.
    std::vector<int64_t> axes = {0}, unsqueezed = {0};
    for (int64_t a = 2; a < rank; ++a) {
      axes.push_back(a);
      unsqueezed.push_back(a);
    }
    const std::string &x = n.input(0);
    std::string mean = b.reduce("ReduceMean", x, axes, false);
    std::string centered = b.apply("Sub", {x, b.unsqueeze(mean, unsqueezed)});
    std::string var = b.reduce(
        "ReduceMean", b.apply("Mul", {centered, centered}), axes, false);
    std::string rstd = b.apply(
        "Reciprocal",
        {b.apply("Sqrt", {b.apply("Add", {var, b.scalar(eps, elem)})})});
    std::string scaled = b.apply(
        "Mul", {b.apply("Mul", {centered, b.unsqueeze(rstd, unsqueezed)}),
                b.unsqueeze(n.input(1), unsqueezed)});
    onnx::NodeProto &y =
        b.node("Add", {scaled, b.unsqueeze(n.input(2), unsqueezed)});
    b.rename(y.output(0), n.output(0));
    return {mean, var};
  }

  /// Appends the nodes moving \p n's running statistics toward the batch's
  /// \p mean and \p var, and records those to update.
  llvm::Error updateRunningStats(const onnx::NodeProto &n,
                                 const std::string &where,
                                 const std::string &mean,
                                 const std::string &var, double momentum,
                                 int32_t elem) {
    // The running statistics, moved toward the batch's.
    std::string keep = b.scalar(momentum, elem);
    std::string move = b.scalar(1 - momentum, elem);
    for (int s = 0; s < 2; ++s) {
      const std::string &running = n.input(3 + s);
      std::string next =
          b.apply("Add", {b.apply("Mul", {running, keep}),
                          b.apply("Mul", {s == 0 ? mean : var, move})});
      if (n.output_size() > 1 + s && !n.output(1 + s).empty())
        next = b.rename(next, n.output(1 + s));
      if (options.updateRunningStats && initializers.contains(running)) {
        if (!updated.insert(running).second)
          return nodeError(where, "its running statistic '" + running +
                                      "' is also another BatchNormalization's");
        updates.push_back({running, next});
      }
    }
    return llvm::Error::success();
  }

  /// Adds a graph output `update/NAME` for each running statistic to update.
  void addUpdateOutputs() {
    for (auto &[name, value] : updates) {
      // An Identity names the output, whatever else reads the value.
      onnx::NodeProto &id = b.node("Identity", {value});
      b.rename(id.output(0), "update/" + name);
      onnx::ValueInfoProto &out = *g.add_output();
      out.set_name("update/" + name);
      if (auto it = types.find(name); it != types.end())
        *out.mutable_type() = it->second;
    }
  }
};

} // namespace

llvm::Error rewriteTrainingMode(llvm::StringRef path, onnx::ModelProto &model,
                                int64_t opset,
                                const TrainingModeOptions &options) {
  onnx::GraphProto &g = *model.mutable_graph();
  std::vector<bool> drop;
  auto any = findTrainingNodes(path, g, options, drop);
  if (!any)
    return any.takeError();
  if (!*any)
    return llvm::Error::success();
  TrainingRewriter rewriter(path, model, opset, options);
  return rewriter.run(drop);
}

} // namespace pax
