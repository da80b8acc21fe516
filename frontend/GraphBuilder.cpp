//===- GraphBuilder.cpp - ONNX nodes appended to a graph before import ----===//
#include "frontend/GraphBuilder.h"
#include "frontend/TensorProto.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"

#include <onnx/defs/schema.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <onnx/shape_inference/implementation.h>

namespace pax {

GraphBuilder::GraphBuilder(onnx::GraphProto &g, int64_t opset,
                           std::string prefix)
    : g(g), opset(opset), prefix(std::move(prefix)) {
  for (const auto &vi : g.input())
    used.insert(vi.name());
  for (const auto &t : g.initializer())
    used.insert(t.name());
  for (const auto &n : g.node())
    for (const std::string &o : n.output())
      used.insert(o);
}

std::string GraphBuilder::fresh(llvm::StringRef base) {
  return fresh(base, prefix);
}

std::string GraphBuilder::fresh(llvm::StringRef base,
                                llvm::StringRef namePrefix) {
  std::string name = (namePrefix + base).str();
  for (int k = 1; used.contains(name); ++k)
    name = (namePrefix + base + "_" + llvm::Twine(k)).str();
  used.insert(name);
  return name;
}

std::string GraphBuilder::rename(const std::string &from,
                                 const std::string &to) {
  if (to.empty()) // an optional output the model leaves out
    return from;
  for (auto &n : *g.mutable_node()) {
    for (std::string &o : *n.mutable_output())
      if (o == from)
        o = to;
    for (std::string &i : *n.mutable_input())
      if (i == from)
        i = to;
  }
  return to;
}

onnx::NodeProto &GraphBuilder::node(llvm::StringRef type,
                                    llvm::ArrayRef<std::string> inputs) {
  onnx::NodeProto &n = *g.add_node();
  n.set_op_type(type.str());
  n.set_name(fresh(type));
  for (const std::string &in : inputs)
    n.add_input(in);
  n.add_output(fresh(type.lower() + "_out"));
  return n;
}

void GraphBuilder::intAttr(onnx::NodeProto &n, llvm::StringRef name,
                           int64_t v) {
  onnx::AttributeProto &a = *n.add_attribute();
  a.set_name(name.str());
  a.set_type(onnx::AttributeProto::INT);
  a.set_i(v);
}

void GraphBuilder::intsAttr(onnx::NodeProto &n, llvm::StringRef name,
                            llvm::ArrayRef<int64_t> v) {
  onnx::AttributeProto &a = *n.add_attribute();
  a.set_name(name.str());
  a.set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v)
    a.add_ints(x);
}

std::string GraphBuilder::int64s(llvm::ArrayRef<int64_t> values, bool scalar) {
  onnx::NodeProto &n = node("Constant", {});
  onnx::AttributeProto &a = *n.add_attribute();
  a.set_name("value");
  a.set_type(onnx::AttributeProto::TENSOR);
  onnx::TensorProto &t = *a.mutable_t();
  t.set_data_type(onnx::TensorProto::INT64);
  if (!scalar)
    t.add_dims(int64_t(values.size()));
  for (int64_t v : values)
    t.add_int64_data(v);
  return n.output(0);
}

std::string GraphBuilder::constant(const onnx::TensorProto &t) {
  onnx::NodeProto &n = node("Constant", {});
  onnx::AttributeProto &a = *n.add_attribute();
  a.set_name("value");
  a.set_type(onnx::AttributeProto::TENSOR);
  *a.mutable_t() = t;
  return n.output(0);
}

llvm::Error rewriteNodes(
    llvm::StringRef path, onnx::ModelProto &model, int64_t opset,
    llvm::function_ref<bool(const onnx::NodeProto &)> match,
    llvm::function_ref<llvm::Error(const onnx::NodeProto &, int, GraphBuilder &,
                                   const llvm::StringMap<onnx::TypeProto> &)>
        build) {
  onnx::GraphProto &g = *model.mutable_graph();
  if (std::none_of(g.node().begin(), g.node().end(), match))
    return llvm::Error::success();
  llvm::StringMap<onnx::TypeProto> types = inferTypes(model);
  onnx::GraphProto out;
  bool any = false;
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto &n = g.node(i);
    if (!match(n)) {
      *out.add_node() = n;
      continue;
    }
    if (n.input_size() < 1 || n.input(0).empty() ||
        std::all_of(n.output().begin(), n.output().end(),
                    [](const std::string &o) { return o.empty(); }))
      return llvm::createStringError(nodeWhere(path, n, i) +
                                     ": needs its first input and an output");
    onnx::GraphProto nodes;
    GraphBuilder b(nodes, opset,
                   (n.name().empty() ? n.op_type() : n.name()) + "/");
    if (auto err = build(n, i, b, types))
      return err;
    for (auto &e : *nodes.mutable_node())
      *out.add_node() = std::move(e);
    any = true;
  }
  if (any)
    g.mutable_node()->Swap(out.mutable_node());
  return llvm::Error::success();
}

llvm::Error rewriteOpType(
    llvm::StringRef path, onnx::ModelProto &model, int64_t opset,
    llvm::StringRef opType,
    llvm::function_ref<llvm::Error(GraphBuilder &, const onnx::NodeProto &,
                                   const llvm::StringMap<onnx::TypeProto> &,
                                   const std::string &)>
        build) {
  auto match = [&](const onnx::NodeProto &n) {
    return (n.domain().empty() || n.domain() == "ai.onnx") &&
           n.op_type() == opType;
  };
  return rewriteNodes(path, model, opset, match,
                      [&](const onnx::NodeProto &n, int i, GraphBuilder &b,
                          const llvm::StringMap<onnx::TypeProto> &types) {
                        return build(b, n, types, nodeWhere(path, n, i));
                      });
}

const onnx::AttributeProto *findAttribute(const onnx::NodeProto &n,
                                          llvm::StringRef name) {
  for (const auto &a : n.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

/// \p t's values as doubles (float, double or integer tensors).
std::optional<std::vector<double>> constantValues(const onnx::TensorProto &t) {
  auto c = readTensorProto(t, "");
  if (!c) {
    llvm::consumeError(c.takeError());
    return std::nullopt;
  }
  std::vector<double> v;
  for (int64_t i = 0; i < c->numel(); ++i)
    v.push_back(c->real(i));
  return v;
}

/// The constant input \p i of \p n as doubles; none where absent or empty;
/// an error naming it where it is computed at run time.
llvm::Expected<std::optional<std::vector<double>>>
constantInput(const onnx::GraphProto &g, const onnx::NodeProto &n, int i,
              llvm::StringRef what, const std::string &where) {
  if (i >= n.input_size() || n.input(i).empty())
    return std::nullopt;
  const onnx::TensorProto *t = findConstant(g, n.input(i));
  std::optional<std::vector<double>> v = t ? constantValues(*t) : std::nullopt;
  if (!v)
    return llvm::createStringError(where + ": " + what + " ('" + n.input(i) +
                                   "') must be a constant, but it is "
                                   "computed at run time");
  if (v->empty())
    return std::nullopt;
  return v;
}

/// \p name's static shape in \p types, or an error naming \p where.
llvm::Expected<std::vector<int64_t>>
staticShape(const llvm::StringMap<onnx::TypeProto> &types,
            const std::string &name, const std::string &where) {
  onnx::TypeProto t = types.lookup(name);
  std::vector<int64_t> shape;
  bool known = t.tensor_type().has_shape();
  for (const auto &d : t.tensor_type().shape().dim()) {
    known &= d.has_dim_value();
    shape.push_back(d.dim_value());
  }
  if (!known)
    return llvm::createStringError(where + ": needs the static shape of '" +
                                   name + "'");
  return shape;
}

/// x's element type in \p types.
int32_t elemOf(const llvm::StringMap<onnx::TypeProto> &types,
               const std::string &name) {
  return types.lookup(name).tensor_type().elem_type();
}

namespace {

using Values = std::optional<std::vector<double>>;

/// Evaluates the small integer computations of shapeValues.
class ShapeEvaluator {
public:
  ShapeEvaluator(const onnx::GraphProto &g,
                 const llvm::StringMap<onnx::TypeProto> &types)
      : g(g), types(types) {
    for (const auto &n : g.node())
      for (const std::string &o : n.output())
        producer[o] = &n;
  }
  Values value(const std::string &name, int depth = 0);

private:
  Values node(const onnx::NodeProto &n, int depth);
  Values shapeOf(const onnx::NodeProto &n);
  Values slice(const onnx::NodeProto &n, int depth);
  Values arithmetic(const onnx::NodeProto &n, int depth);
  int64_t attr(const onnx::NodeProto &n, llvm::StringRef name, int64_t v) {
    const auto *a = findAttribute(n, name);
    return a ? a->i() : v;
  }

  const onnx::GraphProto &g;
  const llvm::StringMap<onnx::TypeProto> &types;
  llvm::StringMap<const onnx::NodeProto *> producer;
};

Values ShapeEvaluator::value(const std::string &name, int depth) {
  if (const onnx::TensorProto *t = findConstant(g, name))
    return constantValues(*t);
  const onnx::NodeProto *n = producer.lookup(name);
  // Shape computations are short; a deep chain is not one.
  if (!n || depth > 32 || n->output_size() != 1 ||
      (!n->domain().empty() && n->domain() != "ai.onnx"))
    return std::nullopt;
  return node(*n, depth + 1);
}

Values ShapeEvaluator::shapeOf(const onnx::NodeProto &n) {
  auto s = staticShape(types, n.input(0), "");
  if (!s) {
    llvm::consumeError(s.takeError());
    return std::nullopt;
  }
  int64_t rank = int64_t(s->size());
  int64_t start = attr(n, "start", 0), end = attr(n, "end", rank);
  start = std::clamp(start < 0 ? start + rank : start, int64_t(0), rank);
  end = std::clamp(end < 0 ? end + rank : end, int64_t(0), rank);
  std::vector<double> v;
  for (int64_t d = start; d < end; ++d)
    v.push_back(double((*s)[size_t(d)]));
  return v;
}

Values ShapeEvaluator::slice(const onnx::NodeProto &n, int depth) {
  Values x = value(n.input(0), depth);
  Values from = n.input_size() > 2 ? value(n.input(1), depth) : std::nullopt;
  Values to = n.input_size() > 2 ? value(n.input(2), depth) : std::nullopt;
  // 1-D: along axis 0 (or -1), step 1.
  for (int k = 3; k < n.input_size() && k < 5; ++k) {
    Values v = n.input(k).empty()
                   ? Values(std::vector<double>{k == 3 ? 0.0 : 1.0})
                   : value(n.input(k), depth);
    if (!v || v->size() != 1 ||
        (k == 3 ? (*v)[0] != 0 && (*v)[0] != -1 : (*v)[0] != 1))
      return std::nullopt;
  }
  if (!x || !from || !to || from->size() != 1 || to->size() != 1 ||
      n.input_size() > 5)
    return std::nullopt;
  int64_t size = int64_t(x->size());
  auto clampAt = [&](double v) {
    int64_t i = v < -1e18 ? -size : v > 1e18 ? size : int64_t(v);
    return std::clamp(i < 0 ? i + size : i, int64_t(0), size);
  };
  int64_t a = clampAt((*from)[0]), b = clampAt((*to)[0]);
  return std::vector<double>(x->begin() + a, x->begin() + std::max(a, b));
}

/// A unary op of shapeValues on \p x (Not gives 1 or 0).
static double unary(llvm::StringRef op, double x) {
  return op == "Floor"  ? std::floor(x)
         : op == "Ceil" ? std::ceil(x)
         : op == "Relu" ? std::max(x, 0.0)
         : op == "Neg"  ? -x
                        : x == 0; // Not
}

/// A binary op of shapeValues on \p x and \p y (comparisons give 1 or 0).
static double binary(llvm::StringRef op, double x, double y) {
  if (op == "Add")
    return x + y;
  if (op == "Sub")
    return x - y;
  if (op == "Mul")
    return x * y;
  if (op == "Div")
    return x / y;
  if (op == "Max" || op == "Min")
    return op == "Max" ? std::max(x, y) : std::min(x, y);
  if (op == "And" || op == "Or")
    return op == "And" ? (x != 0 && y != 0) : (x != 0 || y != 0);
  return op == "Equal"         ? x == y
         : op == "Less"        ? x < y
         : op == "LessOrEqual" ? x <= y
         : op == "Greater"     ? x > y
                               : x >= y; // GreaterOrEqual
}

Values ShapeEvaluator::arithmetic(const onnx::NodeProto &n, int depth) {
  Values a = value(n.input(0), depth), b = value(n.input(1), depth);
  if (!a || !b || (a->size() != b->size() && a->size() != 1 && b->size() != 1))
    return std::nullopt;
  std::vector<double> v(std::max(a->size(), b->size()));
  for (size_t i = 0; i < v.size(); ++i) {
    double x = (*a)[a->size() == 1 ? 0 : i], y = (*b)[b->size() == 1 ? 0 : i];
    v[i] = binary(n.op_type(), x, y);
  }
  return v;
}

Values ShapeEvaluator::node(const onnx::NodeProto &n, int depth) {
  llvm::StringRef op = n.op_type();
  if (op == "Shape" && n.input_size() == 1)
    return shapeOf(n);
  if (op == "Slice")
    return slice(n, depth);
  static const llvm::StringSet<> binaries = {
      "Add",         "Sub",     "Mul",
      "Div",         "Equal",   "Less",
      "LessOrEqual", "Greater", "GreaterOrEqual",
      "And",         "Or",      "Max",
      "Min"};
  if (binaries.contains(op) && n.input_size() == 2)
    return arithmetic(n, depth);
  if (op == "Concat") {
    std::vector<double> v;
    for (const std::string &in : n.input()) {
      Values part = value(in, depth);
      if (!part)
        return std::nullopt;
      v.insert(v.end(), part->begin(), part->end());
    }
    return v;
  }
  Values x = n.input_size() ? value(n.input(0), depth) : std::nullopt;
  if (!x)
    return std::nullopt;
  if (op == "Gather" && n.input_size() == 2 && attr(n, "axis", 0) == 0) {
    Values idx = value(n.input(1), depth);
    std::vector<double> v;
    for (double i : idx.value_or(std::vector<double>())) {
      int64_t k = int64_t(i) < 0 ? int64_t(i) + int64_t(x->size()) : int64_t(i);
      if (k < 0 || k >= int64_t(x->size()))
        return std::nullopt;
      v.push_back((*x)[size_t(k)]);
    }
    return idx ? Values(v) : std::nullopt;
  }
  if (op == "Floor" || op == "Ceil" || op == "Not" || op == "Relu" ||
      op == "Neg") {
    for (double &v : *x)
      v = unary(op, v);
    return x;
  }
  // The values pass through as they are (integer casts truncate).
  if (op == "Cast") {
    int64_t to = attr(n, "to", 0);
    if (to == onnx::TensorProto::INT64 || to == onnx::TensorProto::INT32)
      for (double &v : *x)
        v = std::trunc(v);
    if (to == onnx::TensorProto::BOOL)
      for (double &v : *x)
        v = v != 0;
    return x;
  }
  if (op == "Unsqueeze" || op == "Squeeze" || op == "Reshape" ||
      op == "Identity")
    return x;
  return std::nullopt;
}

} // namespace

std::optional<std::vector<double>>
shapeValues(const onnx::GraphProto &g, const std::string &name,
            const llvm::StringMap<onnx::TypeProto> &types) {
  return ShapeEvaluator(g, types).value(name);
}

llvm::Error checkBuiltSize(const std::string &where,
                           llvm::ArrayRef<double> dims) {
  double count = 1;
  for (double d : dims) {
    if (!(d >= 0))
      return llvm::createStringError(where + ": a negative or unknown extent");
    count *= d;
  }
  if (count <= double(kMaxBuiltElements))
    return llvm::Error::success();
  return llvm::createStringError(
      where + ": would build a constant of more than 2^24 elements while "
              "importing");
}

std::string nodeWhere(llvm::StringRef path, const onnx::NodeProto &n,
                      int index) {
  return (path + ": " +
          (n.name().empty() ? "node #" + std::to_string(index)
                            : "node '" + n.name() + "'") +
          " (" + n.op_type() + ")")
      .str();
}

const onnx::TensorProto *findConstant(const onnx::GraphProto &g,
                                      const std::string &name) {
  const onnx::TensorProto *t = nullptr;
  for (const auto &init : g.initializer())
    if (init.name() == name)
      t = &init;
  for (const auto &n : g.node())
    if (n.op_type() == "Constant" && n.output_size() == 1 &&
        n.output(0) == name)
      for (const auto &a : n.attribute())
        if (a.name() == "value" && a.has_t())
          t = &a.t();
  return t;
}

std::string GraphBuilder::scalar(double v, int32_t elem) {
  onnx::NodeProto &n = node("Constant", {});
  onnx::AttributeProto &a = *n.add_attribute();
  a.set_name("value");
  a.set_type(onnx::AttributeProto::TENSOR);
  onnx::TensorProto &t = *a.mutable_t();
  if (elem == onnx::TensorProto::DOUBLE) {
    t.set_data_type(onnx::TensorProto::DOUBLE);
    t.add_double_data(v);
    return n.output(0);
  }
  t.set_data_type(onnx::TensorProto::FLOAT);
  t.add_float_data(float(v));
  if (elem == onnx::TensorProto::FLOAT)
    return n.output(0);
  return cast(n.output(0), elem);
}

std::string GraphBuilder::cast(const std::string &x, int32_t elem) {
  onnx::NodeProto &c = node("Cast", {x});
  intAttr(c, "to", elem);
  return c.output(0);
}

std::string GraphBuilder::unsqueeze(const std::string &x,
                                    llvm::ArrayRef<int64_t> axes) {
  if (opset >= 13)
    return apply("Unsqueeze", {x, int64s(axes, false)});
  onnx::NodeProto &n = node("Unsqueeze", {x});
  intsAttr(n, "axes", axes);
  return n.output(0);
}

std::string GraphBuilder::reduce(llvm::StringRef type, const std::string &x,
                                 llvm::ArrayRef<int64_t> axes, bool keepdims) {
  // ReduceSum takes its axes as an input from opset 13, the others from 18.
  bool axesInput = opset >= (type == "ReduceSum" ? 13 : 18);
  onnx::NodeProto &n = node(type, {x});
  if (!axes.empty()) {
    if (axesInput)
      n.add_input(int64s(axes, false));
    else
      intsAttr(n, "axes", axes);
  }
  intAttr(n, "keepdims", keepdims);
  return n.output(0);
}

/// Whether \p n's window attributes would have ONNX's inference divide by
/// zero or index one by another's length (a zero stride or group, lengths
/// that disagree; pads twice the others).
static bool unsafeWindow(const onnx::NodeProto &n) {
  int64_t window = -1;
  for (const onnx::AttributeProto &a : n.attribute()) {
    llvm::StringRef name = a.name();
    bool spatial = name == "strides" || name == "dilations" ||
                   name == "kernel_shape" || name == "output_padding" ||
                   name == "output_shape";
    if (spatial || name == "pads") {
      int64_t len = name == "pads" ? a.ints_size() / 2 : a.ints_size();
      if ((name == "pads" && a.ints_size() % 2) ||
          (window >= 0 && len != window))
        return true;
      window = len;
      for (int64_t v : a.ints())
        if (name == "pads" || name == "output_padding" ? v < 0 : v <= 0)
          return true;
    }
    if ((name == "group" || name == "blocksize") && a.i() <= 0)
      return true;
  }
  return false;
}

/// The input whose dims ONNX's window inference takes as \p n's kernel
/// (it has no kernel_shape), or -1.
static int kernelInput(const onnx::NodeProto &n) {
  if (findAttribute(n, "kernel_shape"))
    return -1;
  llvm::StringRef op = n.op_type();
  if (op == "Conv" || op == "ConvInteger" || op == "ConvTranspose" ||
      op == "DeformConv")
    return n.input_size() > 1 ? 1 : -1;
  if (op == "QLinearConv")
    return n.input_size() > 3 ? 3 : -1;
  return -1;
}

/// Gives each node of \p g that takes its kernel from its weights a
/// kernel_shape from the weights' static shape in \p types: ONNX's
/// inference then checks its length against the input's rank, where it
/// would index the input's dims by the weights' (weights of a higher rank
/// than the input read past them). Nodes whose weights' shape is not known
/// are removed.
static void pinKernels(onnx::GraphProto &g,
                       const llvm::StringMap<onnx::TypeProto> &types) {
  auto *nodes = g.mutable_node();
  for (int i = nodes->size() - 1; i >= 0; --i) {
    onnx::NodeProto &n = *nodes->Mutable(i);
    int w = kernelInput(n);
    if (w < 0)
      continue;
    auto it = types.find(n.input(w));
    bool known = it != types.end() && it->second.tensor_type().has_shape();
    std::vector<int64_t> kernel;
    int rank = known ? it->second.tensor_type().shape().dim_size() : 0;
    for (int d = 2; known && d < rank; ++d) {
      const auto &dim = it->second.tensor_type().shape().dim(d);
      known = dim.has_dim_value() && dim.dim_value() > 0;
      kernel.push_back(dim.dim_value());
    }
    if (known && rank > 2)
      GraphBuilder::intsAttr(n, "kernel_shape", kernel);
    else
      nodes->DeleteSubrange(i, 1);
  }
}

/// ONNX's shape inference on \p copy, its errors ignored.
static void runInference(onnx::ModelProto &copy, bool dataPropagation) {
  try {
    onnx::ShapeInferenceOptions opts{/*check_type=*/false, /*error_mode=*/0,
                                     dataPropagation};
    onnx::shape_inference::InferShapes(copy, onnx::OpSchemaRegistry::Instance(),
                                       opts);
  } catch (const std::exception &) {
    // ONNX's inference does not know this model (newer IR or opset): the
    // declared types only.
  }
}

/// Whether \p n lacks an input its schema at \p opsets requires (absent or
/// named ""): ONNX's inference functions read such inputs unchecked.
static bool missesRequiredInput(const onnx::NodeProto &n,
                                const std::map<std::string, int64_t> &opsets) {
  std::string domain = n.domain() == "ai.onnx" ? "" : n.domain();
  auto version = opsets.find(domain);
  if (version == opsets.end())
    return false;
  const onnx::OpSchema *schema =
      onnx::OpSchemaRegistry::Schema(n.op_type(), int(version->second), domain);
  if (!schema)
    return false;
  if (n.input_size() < schema->min_input())
    return true;
  const auto &formals = schema->inputs();
  for (size_t i = 0; i < formals.size(); ++i)
    if (formals[i].GetOption() == onnx::OpSchema::Single &&
        (int(i) >= n.input_size() || n.input(int(i)).empty()))
      return true;
  return false;
}

/// Ops paxc does not import whose inference (ONNX 1.12) reads past what it
/// checks: Scan, STFT and MaxRoiPool index their inputs' dims, the ML
/// domain's read their inputs' types unchecked, GatherND takes a negative
/// batch_dims.
static bool uninferable(const onnx::NodeProto &n) {
  llvm::StringRef op = n.op_type();
  if (n.domain() == "ai.onnx.ml" || op == "Scan" || op == "STFT" ||
      op == "MaxRoiPool")
    return true;
  const onnx::AttributeProto *batchDims = findAttribute(n, "batch_dims");
  return op == "GatherND" && batchDims && batchDims->i() < 0;
}

/// Nodes ONNX's inference cannot take safely, left out of \p copy; paxc's
/// own importer refuses them with a clear error, or never needed their
/// types.
static void dropUnsafeNodes(onnx::ModelProto &copy) {
  std::map<std::string, int64_t> opsets;
  for (const auto &o : copy.opset_import())
    opsets[o.domain() == "ai.onnx" ? "" : o.domain()] = o.version();
  auto *nodes = copy.mutable_graph()->mutable_node();
  for (int i = nodes->size() - 1; i >= 0; --i) {
    const onnx::NodeProto &n = nodes->Get(i);
    if (unsafeWindow(n) || uninferable(n) || missesRequiredInput(n, opsets))
      nodes->DeleteSubrange(i, 1);
  }
}

/// Clears negative dims in \p copy's declared types (ONNX's inference
/// indexes and sizes by them); they are refused where paxc reads them.
static void clearNegativeDims(onnx::ModelProto &copy) {
  onnx::GraphProto &g = *copy.mutable_graph();
  for (auto *infos :
       {g.mutable_input(), g.mutable_output(), g.mutable_value_info()})
    for (onnx::ValueInfoProto &vi : *infos) {
      if (!vi.type().tensor_type().has_shape())
        continue;
      auto *shape = vi.mutable_type()->mutable_tensor_type()->mutable_shape();
      for (auto &dim : *shape->mutable_dim())
        if (dim.has_dim_value() && dim.dim_value() < 0)
          dim.clear_dim_value();
    }
}

/// Ops whose inference reads input 0's type without checking it is known
/// (Shape, and EyeLike given a dtype).
static bool readsInputTypeUnchecked(const onnx::NodeProto &n) {
  return n.input_size() && (n.op_type() == "Shape" || n.op_type() == "EyeLike");
}

/// Gives the inputs of the nodes readsInputTypeUnchecked names a placeholder
/// type where they have none declared: a tensor of unknown element type and
/// shape, which ONNX's inference fills when it computes the value. The
/// names of those placeholders.
static std::vector<std::string> declarePlaceholders(onnx::ModelProto &copy) {
  onnx::GraphProto &g = *copy.mutable_graph();
  llvm::StringMap<onnx::TypeProto> declared = typesIn(copy);
  std::vector<std::string> placeholders;
  for (const onnx::NodeProto &n : g.node()) {
    if (!readsInputTypeUnchecked(n) || n.input(0).empty() ||
        !declared.try_emplace(n.input(0)).second)
      continue;
    onnx::ValueInfoProto &vi = *g.add_value_info();
    vi.set_name(n.input(0));
    vi.mutable_type()->mutable_tensor_type();
    placeholders.push_back(n.input(0));
  }
  return placeholders;
}

/// Removes the placeholders ONNX's inference left without an element type.
static void dropUnfilledPlaceholders(onnx::ModelProto &copy,
                                     llvm::ArrayRef<std::string> names) {
  if (names.empty())
    return;
  llvm::StringSet<> placeholders;
  for (const std::string &name : names)
    placeholders.insert(name);
  auto *infos = copy.mutable_graph()->mutable_value_info();
  for (int i = infos->size() - 1; i >= 0; --i) {
    const onnx::ValueInfoProto &vi = infos->Get(i);
    if (placeholders.contains(vi.name()) &&
        vi.type().tensor_type().elem_type() == 0)
      infos->DeleteSubrange(i, 1);
  }
}

/// LayerNormalization's inference trusts its axis against the input's rank
/// (a scalar input reads before its dims): Y has X's type, so the copy
/// computes it as an Identity, its statistics left untyped.
static void layerNormsAsIdentities(onnx::ModelProto &copy) {
  for (onnx::NodeProto &n : *copy.mutable_graph()->mutable_node())
    if (n.op_type() == "LayerNormalization" &&
        (n.domain().empty() || n.domain() == "ai.onnx") && n.input_size() &&
        n.output_size()) {
      n.set_op_type("Identity");
      n.clear_attribute();
      n.mutable_input()->DeleteSubrange(1, n.input_size() - 1);
      n.mutable_output()->DeleteSubrange(1, n.output_size() - 1);
    }
}

void inferShapesSafely(onnx::ModelProto &copy, bool dataPropagation) {
  dropUnsafeNodes(copy);
  clearNegativeDims(copy);
  layerNormsAsIdentities(copy);
  std::vector<std::string> placeholders = declarePlaceholders(copy);
  const auto &nodes = copy.graph().node();
  if (std::any_of(nodes.begin(), nodes.end(), [](const onnx::NodeProto &n) {
        return kernelInput(n) >= 0;
      })) {
    // The weights' shapes first, on a copy without those nodes (weights
    // are computed, as by DequantizeLinear, before any convolution).
    onnx::ModelProto first = copy;
    pinKernels(*first.mutable_graph(), typesIn(first));
    runInference(first, dataPropagation);
    pinKernels(*copy.mutable_graph(), typesIn(first));
  }
  runInference(copy, dataPropagation);
  dropUnfilledPlaceholders(copy, placeholders);
}

llvm::StringMap<onnx::TypeProto> typesIn(const onnx::ModelProto &model) {
  llvm::StringMap<onnx::TypeProto> types;
  auto add = [&](const onnx::ValueInfoProto &vi) {
    if (vi.has_type())
      types[vi.name()] = vi.type();
  };
  const onnx::GraphProto &g = model.graph();
  for (const auto &t : g.initializer()) {
    onnx::TypeProto &type = types[t.name()];
    auto &tt = *type.mutable_tensor_type();
    tt.set_elem_type(t.data_type());
    auto &shape = *tt.mutable_shape();
    for (int64_t d : t.dims())
      shape.add_dim()->set_dim_value(d);
  }
  for (const auto &vi : g.input())
    add(vi);
  for (const auto &vi : g.value_info())
    add(vi);
  for (const auto &vi : g.output())
    if (vi.type().tensor_type().has_shape() || !types.count(vi.name()))
      add(vi);
  return types;
}

llvm::StringMap<onnx::TypeProto> inferTypes(const onnx::ModelProto &model) {
  onnx::ModelProto copy = model;
  inferShapesSafely(copy, /*dataPropagation=*/true);
  return typesIn(copy);
}

} // namespace pax
