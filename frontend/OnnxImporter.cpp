//===- OnnxImporter.cpp - ONNX models into the paxc IR --------------------===//
#include "frontend/OnnxImporter.h"
#include "frontend/DepthSpace.h"
#include "frontend/ExpandFunctions.h"

#include "frontend/ControlFlow.h"
#include "frontend/GridSample.h"
#include "frontend/Importer.h"
#include "frontend/OnnxOps.h"
#include "frontend/OpRewrites.h"
#include "frontend/Quantize.h"
#include "frontend/Resize.h"
#include "frontend/Rnn.h"
#include "frontend/TensorProto.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MemoryBuffer.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <onnx/defs/schema.h>
#include <onnx/version_converter/convert.h>

namespace pax {

namespace {
/// Collects the first protobuf text-format error as `line:col: message`,
/// in our style: lower-case, no final period.
class TextErrors : public google::protobuf::io::ErrorCollector {
public:
  void AddError(int line, google::protobuf::io::ColumnNumber col,
                const std::string &msg) override {
    if (!first.empty())
      return;
    std::string text = llvm::StringRef(msg).trim().rtrim('.').str();
    if (!text.empty())
      text[0] = llvm::toLower(text[0]);
    first = std::to_string(line + 1) + ":" + std::to_string(col + 1) +
            ": not a valid ONNX text model: " + text;
  }
  std::string first;
};
} // namespace

static bool isTextPath(llvm::StringRef path) {
  return path.ends_with(".onnxtxt") || path.ends_with(".txtpb") ||
         path.ends_with(".textproto") || path.ends_with(".pbtxt");
}

/// Checks that every node paxc has an importer for has the inputs and
/// outputs its ONNX schema requires, so that importers can read them:
/// enough of them, and no required one left empty ("").
static llvm::Error checkNodeArity(llvm::StringRef path,
                                  const onnx::GraphProto &g, int opset) {
  using Option = onnx::OpSchema::FormalParameterOption;
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto &n = g.node(i);
    if (!findOpImporter(n.domain(), n.op_type()))
      continue; // an opaque op takes whatever it is given
    // The schema at the model's opset, else the newest one the ONNX library
    // knows (an op used before ONNX defined it).
    const onnx::OpSchema *schema =
        onnx::OpSchemaRegistry::Schema(n.op_type(), opset);
    if (!schema)
      schema = onnx::OpSchemaRegistry::Schema(n.op_type());
    if (!schema)
      continue;
    std::string label = (n.name().empty() ? "node #" + std::to_string(i)
                                          : "node '" + n.name() + "'") +
                        " (" + n.op_type() + ")";
    auto fail = [&](const llvm::Twine &msg) {
      return llvm::createStringError(path + ": " + label + ": " + msg);
    };
    if (n.input_size() < schema->min_input())
      return fail("has " + llvm::Twine(n.input_size()) +
                  " inputs, needs at least " +
                  llvm::Twine(schema->min_input()));
    if (n.output_size() < schema->min_output())
      return fail("has " + llvm::Twine(n.output_size()) +
                  " outputs, needs at least " +
                  llvm::Twine(schema->min_output()));
    const auto &formals = schema->inputs();
    for (int k = 0; k < n.input_size(); ++k) {
      if (!n.input(k).empty() || formals.empty())
        continue;
      // A variadic last parameter covers every input from its position on.
      const auto &formal = formals[std::min<size_t>(k, formals.size() - 1)];
      bool past =
          size_t(k) >= formals.size() && formal.GetOption() != Option::Variadic;
      if (formal.GetOption() == Option::Optional || past)
        continue;
      return fail("input " + llvm::Twine(k) + " (" + formal.GetName() +
                  ") is required but empty");
    }
  }
  return llvm::Error::success();
}

/// Checks what ONNX's version converter assumes of a graph (it crashes
/// otherwise): every node an op of the default domain at \p opset without
/// subgraphs, every value a node or the graph's outputs read a graph
/// input, an initializer or an earlier node's output.
static llvm::Error convertible(llvm::StringRef path, const onnx::GraphProto &g,
                               int64_t opset) {
  auto fail = [&](const llvm::Twine &msg) {
    return llvm::createStringError(path + ": opset " + llvm::Twine(opset) +
                                   ": " + msg);
  };
  llvm::StringSet<> defined;
  for (const auto &vi : g.input())
    defined.insert(vi.name());
  for (const auto &t : g.initializer())
    defined.insert(t.name());
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto &n = g.node(i);
    for (const std::string &in : n.input())
      if (!in.empty() && !defined.contains(in))
        return fail("node #" + llvm::Twine(i) + " (" + n.op_type() +
                    ") reads '" + in +
                    "', which no earlier node, input or initializer defines");
    if (!(n.domain().empty() || n.domain() == "ai.onnx") ||
        !onnx::OpSchemaRegistry::Instance()->GetSchema(n.op_type(), int(opset),
                                                       ""))
      return fail("node #" + llvm::Twine(i) + " (" + n.op_type() +
                  ") is not an op of the default domain at this opset, "
                  "which paxc does not bring to opset 7");
    for (const auto &a : n.attribute())
      if (a.has_g() || a.graphs_size())
        return fail("node #" + llvm::Twine(i) + " (" + n.op_type() +
                    ") holds a subgraph, which paxc does not bring to "
                    "opset 7");
    for (const std::string &out : n.output())
      defined.insert(out);
  }
  for (const auto &vi : g.output())
    if (!defined.contains(vi.name()))
      return fail("graph output '" + vi.name() +
                  "' is not computed by any node, input or initializer");
  return llvm::Error::success();
}

/// Brings a model of default-domain opset \p opset (below 7) to opset 7
/// with ONNX's version converter, whose adapters rewrite each node that
/// changed (broadcasting, attributes that became inputs).
static llvm::Error convertToOpset7(llvm::StringRef path,
                                   onnx::ModelProto &model, int64_t opset) {
  if (auto err = convertible(path, model.graph(), opset))
    return err;
  try {
    model = onnx::version_conversion::ConvertVersion(model, 7);
  } catch (const std::exception &e) {
    return llvm::createStringError(
        path + ": opset " + llvm::Twine(opset) +
        ": ONNX's version converter cannot bring the model to opset 7 (" +
        llvm::StringRef(e.what()).split('\n').first + ")");
  }
  return llvm::Error::success();
}

/// Parses and checks the model's envelope: versions and graph.
static llvm::Error parseModel(llvm::StringRef path, llvm::StringRef bytes,
                              onnx::ModelProto &model) {
  auto fail = [&](const llvm::Twine &msg) {
    return llvm::createStringError(path + ": " + msg);
  };
  if (bytes.empty())
    return fail("the file is empty");
  if (isTextPath(path)) {
    google::protobuf::TextFormat::Parser parser;
    TextErrors errors;
    parser.RecordErrorsTo(&errors);
    if (!parser.ParseFromString(bytes.str(), &model))
      return llvm::createStringError(path + ":" +
                                     (errors.first.empty()
                                          ? " not a valid ONNX text model"
                                          : errors.first));
  } else if (bytes.size() > size_t(INT32_MAX) ||
             !model.ParseFromArray(bytes.data(), int(bytes.size()))) {
    return fail("not a valid ONNX model (the protobuf does not parse; is the "
                "file truncated or not an ONNX model?)");
  }
  if (!model.has_graph())
    return fail("not a valid ONNX model (it has no graph)");
  int64_t ir = model.ir_version();
  if (ir < 3 || ir > 11)
    return fail("IR version " + llvm::Twine(ir) +
                " is not supported (paxc reads IR versions 3 to 11)");
  int64_t opset = -1;
  for (const auto &o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx")
      opset = o.version();
  if (opset < 0)
    return fail("the model imports no version of the default ONNX opset");
  if (opset < 1 || opset > 23)
    return fail("opset " + llvm::Twine(opset) +
                " is not supported (paxc reads opsets 1 to 23)");
  if (model.graph().output_size() == 0)
    return fail("the graph has no outputs");
  if (auto err = checkNodeArity(path, model.graph(), int(opset)))
    return err;
  // Checked first at the model's own opset: the converter's adapters
  // assume each node has its schema's inputs.
  return opset < 7 ? convertToOpset7(path, model, opset)
                   : llvm::Error::success();
}

llvm::Expected<onnx::ModelProto> readOnnxModel(llvm::StringRef path) {
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                         /*RequiresNullTerminator=*/false);
  if (!buf)
    return llvm::createStringError(
        path + ": cannot read the file: " + buf.getError().message());
  onnx::ModelProto model;
  if (auto err = parseModel(path, (*buf)->getBuffer(), model))
    return err;
  return model;
}

llvm::Expected<ImportResult> importOnnxFile(llvm::StringRef path,
                                            const ImportOptions &options) {
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                         /*RequiresNullTerminator=*/false);
  if (!buf)
    return llvm::createStringError(
        path + ": cannot read the file: " + buf.getError().message());
  return importOnnxBytes(path, (*buf)->getBuffer(), options);
}

/// --bind: each bound graph input of \p model becomes an initializer
/// holding its value, after checks of its type and declared shape.
static llvm::Error
bindInputs(llvm::StringRef path, onnx::ModelProto &model,
           const std::map<std::string, onnx::TensorProto> &b) {
  auto *inputs = model.mutable_graph()->mutable_input();
  for (const auto &binding : b) {
    // Named, not bound: the lambdas capture them (clang before 16 cannot
    // capture bindings).
    const std::string &name = binding.first;
    const onnx::TensorProto &value = binding.second;
    auto it = llvm::find_if(*inputs, [&](const onnx::ValueInfoProto &vi) {
      return vi.name() == name;
    });
    auto fail = [&](const llvm::Twine &msg) {
      return llvm::createStringError("--bind " + name + ": " + path + ": " +
                                     msg);
    };
    if (it == inputs->end())
      return fail("the graph has no input of that name");
    const onnx::TypeProto::Tensor &t = it->type().tensor_type();
    if (t.elem_type() != value.data_type())
      return fail("the input is " + onnxElemName(t.elem_type()) +
                  ", the value " + onnxElemName(value.data_type()));
    bool fits = !t.has_shape() || t.shape().dim_size() == value.dims_size();
    for (int i = 0; fits && t.has_shape() && i < t.shape().dim_size(); ++i)
      fits = !t.shape().dim(i).has_dim_value() ||
             t.shape().dim(i).dim_value() == value.dims(i);
    if (!fits)
      return fail("the value's shape is not the input's declared shape");
    onnx::TensorProto &init = *model.mutable_graph()->add_initializer();
    init = value;
    init.set_name(name);
    inputs->erase(it);
  }
  return llvm::Error::success();
}

llvm::Expected<ImportResult> importOnnxBytes(llvm::StringRef path,
                                             llvm::StringRef bytes,
                                             const ImportOptions &options) {
  onnx::ModelProto model;
  if (auto err = parseModel(path, bytes, model))
    return err;
  int64_t opset = 0;
  for (const auto &o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx")
      opset = o.version();
  if (auto err = bindInputs(path, model, options.bindings))
    return err;
  if (auto err = inlineControlFlow(path, model, opset))
    return err;
  // The inlined branches' and unrolled bodies' nodes, checked as the
  // graph's own were.
  if (auto err = checkNodeArity(path, model.graph(), int(opset)))
    return err;
  if (auto err = appendLoss(path, model, opset, options.loss))
    return err;
  if (auto err = rewriteTrainingMode(path, model, opset, options.trainingMode))
    return err;
  if (auto err = lowerResizes(path, model, opset))
    return err;
  if (auto err = lowerDepthSpace(path, model, opset))
    return err;
  if (auto err = lowerGridSamples(path, model, opset))
    return err;
  if (auto err = lowerRnns(path, model, opset))
    return err;
  if (auto err = rewriteSmallOps(path, model, opset))
    return err;
  expandFunctionOps(model, opset);
  if (auto err = lowerQuantized(path, model, opset))
    return err;
  for (const auto &[name, v] : options.dims)
    if (v <= 0 || v > kMaxExtent)
      return llvm::createStringError("--dim " + name + "=" + std::to_string(v) +
                                     ": a dim must be in [1, 2^48]");
  if (options.batch && (*options.batch <= 0 || *options.batch > kMaxExtent))
    return llvm::createStringError("--batch=" + std::to_string(*options.batch) +
                                   ": the batch must be in [1, 2^48]");
  return Importer(path, model, options).run();
}

} // namespace pax
