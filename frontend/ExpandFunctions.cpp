//===- ExpandFunctions.cpp - ONNX ops defined as functions, expanded ------===//
#include "frontend/ExpandFunctions.h"

#include "frontend/GraphBuilder.h"
#include "frontend/OnnxOps.h"

#include "llvm/ADT/StringMap.h"

#include <onnx/defs/schema.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

namespace pax {
namespace {

/// How many times a body's nodes are expanded again (bodies nest shallowly).
constexpr int kMaxRounds = 8;

/// The default domain's version \p f's body is written for, or \p opset.
int64_t bodyOpset(const onnx::FunctionProto &f, int64_t opset) {
  for (const auto &o : f.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx")
      return o.version();
  return opset;
}

/// True when every op of \p f's body means at \p opset what it means at
/// the version the body is written for (the same schema).
bool bodyMeansTheSame(const onnx::FunctionProto &f, int64_t opset) {
  int64_t written = bodyOpset(f, opset);
  if (written == opset)
    return true;
  auto *registry = onnx::OpSchemaRegistry::Instance();
  for (const onnx::NodeProto &n : f.node()) {
    const auto *here = registry->GetSchema(n.op_type(), int(opset), n.domain());
    const auto *there =
        registry->GetSchema(n.op_type(), int(written), n.domain());
    if (!here || !there || here->SinceVersion() != there->SinceVersion())
      return false;
  }
  return true;
}

/// \p node's schema at \p opset (default domain only), or null.
const onnx::OpSchema *schemaOf(const onnx::NodeProto &node, int64_t opset) {
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    return nullptr;
  return onnx::OpSchemaRegistry::Instance()->GetSchema(node.op_type(),
                                                       int(opset), "");
}

/// \p node's body, where its schema at \p opset defines it as a function
/// (built from its attributes and its inputs' \p types where the body
/// depends on them) whose ops mean the same at \p opset.
std::optional<onnx::FunctionProto>
functionBody(const onnx::NodeProto &node, int64_t opset,
             const llvm::StringMap<onnx::TypeProto> &types) {
  const onnx::OpSchema *schema = schemaOf(node, opset);
  if (!schema)
    return std::nullopt;
  onnx::FunctionProto body;
  if (schema->HasContextDependentFunction()) {
    std::vector<onnx::TypeProto> inputs;
    for (const std::string &in : node.input())
      inputs.push_back(types.lookup(in));
    onnx::FunctionBodyBuildContextImpl ctx(node, inputs);
    try {
      if (!schema->BuildContextDependentFunction(ctx, body))
        return std::nullopt;
    } catch (const std::exception &) {
      return std::nullopt; // a body its builder cannot make for these types
    }
  } else if (schema->HasFunction() && schema->GetFunction()) {
    body = *schema->GetFunction();
  } else {
    return std::nullopt;
  }
  // The node's inputs and outputs map onto the body's by position; a body
  // that declares fewer cannot take the node.
  if (node.input_size() > body.input_size() ||
      node.output_size() > body.output_size() || !bodyMeansTheSame(body, opset))
    return std::nullopt;
  return body;
}

/// The value of attribute \p name of \p node: its own, else \p schema's
/// default; null where neither has one.
const onnx::AttributeProto *callerAttribute(const onnx::NodeProto &node,
                                            const onnx::OpSchema &schema,
                                            const std::string &name) {
  for (const onnx::AttributeProto &given : node.attribute())
    if (given.name() == name)
      return &given;
  auto it = schema.attributes().find(name);
  if (it == schema.attributes().end() ||
      it->second.default_value.type() == onnx::AttributeProto::UNDEFINED)
    return nullptr;
  return &it->second.default_value;
}

/// The attributes of \p bodyNode as called by \p node (of \p schema): each
/// reference to a caller's attribute becomes the caller's value of it
/// (callerAttribute; absent where it has none), the rest as written. False
/// where an attribute holds a graph (whose names this expansion would not
/// rename).
bool callAttributes(const onnx::NodeProto &node, const onnx::OpSchema &schema,
                    const onnx::NodeProto &bodyNode, onnx::NodeProto &out) {
  out.clear_attribute();
  for (const onnx::AttributeProto &a : bodyNode.attribute()) {
    if (a.has_g() || a.graphs_size())
      return false;
    if (a.ref_attr_name().empty()) {
      *out.add_attribute() = a;
      continue;
    }
    if (const auto *given = callerAttribute(node, schema, a.ref_attr_name())) {
      onnx::AttributeProto &copy = *out.add_attribute();
      copy = *given;
      copy.set_name(a.name());
    }
  }
  return true;
}

/// Appends \p body's nodes, as called by \p node, to \p out: the body's
/// inputs and outputs are the node's (by position; an output the node
/// leaves out, and every value inside, named with \p prefix), attributes
/// as callAttributes says. False, having appended nothing, where it cannot.
bool expandCall(const onnx::NodeProto &node, const onnx::OpSchema &schema,
                const onnx::FunctionProto &body, const std::string &prefix,
                onnx::GraphProto &out) {
  llvm::StringMap<std::string> names;
  for (int k = 0; k < body.input_size(); ++k)
    names[body.input(k)] = k < node.input_size() ? node.input(k) : "";
  for (int k = 0; k < body.output_size(); ++k)
    names[body.output(k)] = k < node.output_size() && !node.output(k).empty()
                                ? node.output(k)
                                : prefix + body.output(k);
  auto rename = [&](const std::string &n) {
    if (n.empty())
      return n;
    auto it = names.find(n);
    return it != names.end() ? it->second : prefix + n;
  };
  onnx::GraphProto nodes;
  for (const onnx::NodeProto &b : body.node()) {
    onnx::NodeProto &e = *nodes.add_node();
    e = b;
    if (!callAttributes(node, schema, b, e))
      return false;
    for (std::string &in : *e.mutable_input())
      in = rename(in);
    for (std::string &o : *e.mutable_output())
      o = rename(o);
  }
  for (onnx::NodeProto &e : *nodes.mutable_node())
    *out.add_node() = std::move(e);
  return true;
}

/// Whether paxc's importer takes \p n as it is: an importer for its op,
/// and not a form the importer refuses that the function covers
/// (LayerNormalization's mean and inverse standard deviation outputs).
bool importerTakes(const onnx::NodeProto &n) {
  if (!findOpImporter(n.domain(), n.op_type()))
    return false;
  if (n.op_type() == "LayerNormalization")
    for (int i = 1; i < n.output_size(); ++i)
      if (!n.output(i).empty())
        return false;
  return true;
}

/// One round over \p model's nodes; returns how many it expanded.
/// Whether \p n is one expandRound replaces: an op paxc's importer does not
/// take whose schema at \p opset has a body.
bool candidate(const onnx::NodeProto &n, int64_t opset) {
  if (importerTakes(n))
    return false;
  const onnx::OpSchema *schema = schemaOf(n, opset);
  return schema &&
         (schema->HasContextDependentFunction() || schema->HasFunction());
}

unsigned expandRound(onnx::ModelProto &model, int64_t opset, int round) {
  const auto &nodes = model.graph().node();
  // ONNX's shape inference only where a body may need input types (it is
  // not safe on every model).
  if (std::none_of(nodes.begin(), nodes.end(), [&](const onnx::NodeProto &n) {
        return candidate(n, opset);
      }))
    return 0;
  llvm::StringMap<onnx::TypeProto> types = inferTypes(model);
  onnx::GraphProto &g = *model.mutable_graph();
  onnx::GraphProto out;
  unsigned expanded = 0;
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto &n = g.node(i);
    std::optional<onnx::FunctionProto> body;
    if (candidate(n, opset))
      body = functionBody(n, opset, types);
    if (!body) {
      *out.add_node() = n;
      continue;
    }
    std::string prefix =
        "pax_fn" + std::to_string(round) + "_" + std::to_string(i) + "_";
    int first = out.node_size();
    if (!expandCall(n, *schemaOf(n, opset), *body, prefix, out)) {
      *out.add_node() = n;
      continue;
    }
    std::string name = n.name().empty() ? n.op_type() : n.name();
    for (int k = first; k < out.node_size(); ++k) {
      onnx::NodeProto &e = *out.mutable_node(k);
      e.set_name(name + "/" + e.op_type() + std::to_string(k - first));
    }
    ++expanded;
  }
  if (expanded)
    g.mutable_node()->Swap(out.mutable_node());
  return expanded;
}

} // namespace

unsigned expandFunctionOps(onnx::ModelProto &model, int64_t opset) {
  unsigned total = 0;
  for (int round = 0; round < kMaxRounds; ++round) {
    unsigned n = expandRound(model, opset, round);
    if (!n)
      break;
    total += n;
  }
  return total;
}

} // namespace pax
