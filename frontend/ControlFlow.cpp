//===- ControlFlow.cpp - If nodes with a known condition, inlined ---------===//
#include "frontend/ControlFlow.h"

#include "frontend/GraphBuilder.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <algorithm>

#include <optional>
#include <string>

namespace pax {
namespace {

/// Nested Ifs inlined at most this deep.
constexpr int kMaxRounds = 16;

using Renames = llvm::StringMap<std::string>;

/// Renames in \p g's nodes (and their subgraphs') the inputs \p map names,
/// except, in a nested graph (\p nested), those it defines itself.
void renameReads(onnx::GraphProto &g, const Renames &map, bool nested) {
  llvm::StringSet<> own;
  for (const auto &n : g.node())
    for (const std::string &o : n.output())
      own.insert(o);
  for (const auto &t : g.initializer())
    own.insert(t.name());
  for (const auto &i : g.input())
    own.insert(i.name());
  if (!nested)
    own.clear();
  for (auto &n : *g.mutable_node()) {
    for (std::string &in : *n.mutable_input())
      if (!own.contains(in))
        if (auto it = map.find(in); it != map.end())
          in = it->second;
    for (auto &a : *n.mutable_attribute()) {
      if (a.has_g())
        renameReads(*a.mutable_g(), map, true);
      for (auto &sub : *a.mutable_graphs())
        renameReads(sub, map, true);
    }
  }
}

/// The nodes taking If \p n's place: \p branch's, its values renamed under
/// \p prefix, then an Identity per output.
llvm::Expected<std::vector<onnx::NodeProto>> inlined(onnx::GraphProto branch,
                                                     const onnx::NodeProto &n,
                                                     const std::string &prefix,
                                                     const std::string &where) {
  if (branch.output_size() != n.output_size())
    return llvm::createStringError(
        where + ": the branch has " + std::to_string(branch.output_size()) +
        " outputs, the If " + std::to_string(n.output_size()));
  Renames map;
  for (const auto &node : branch.node())
    for (const std::string &o : node.output())
      if (!o.empty())
        map[o] = prefix + o;
  for (const auto &t : branch.initializer())
    map[t.name()] = prefix + t.name();
  renameReads(branch, map, false);
  // The branch's initializers as Constant nodes: the runtime reads
  // initializers from the model file, whose graph does not hold these.
  std::vector<onnx::NodeProto> nodes;
  for (const auto &t : branch.initializer()) {
    onnx::NodeProto c;
    c.set_op_type("Constant");
    c.set_name(map[t.name()]);
    c.add_output(map[t.name()]);
    onnx::AttributeProto &a = *c.add_attribute();
    a.set_name("value");
    a.set_type(onnx::AttributeProto::TENSOR);
    *a.mutable_t() = t;
    nodes.push_back(std::move(c));
  }
  for (auto node : branch.node()) {
    for (std::string &o : *node.mutable_output())
      if (!o.empty())
        o = map[o];
    node.set_name(prefix + node.name());
    nodes.push_back(std::move(node));
  }
  for (int k = 0; k < n.output_size(); ++k) {
    if (n.output(k).empty())
      continue;
    const std::string &out = branch.output(k).name();
    onnx::NodeProto id;
    id.set_op_type("Identity");
    id.set_name(prefix + "output_" + std::to_string(k));
    id.add_input(map.count(out) ? map[out] : out);
    id.add_output(n.output(k));
    nodes.push_back(std::move(id));
  }
  return nodes;
}

/// The branch If \p n takes, or none where its condition is not known.
llvm::Expected<std::optional<onnx::GraphProto>>
takenBranch(const onnx::GraphProto &g, const onnx::NodeProto &n,
            const llvm::StringMap<onnx::TypeProto> &types,
            const std::string &where) {
  if (n.input_size() < 1 || n.input(0).empty())
    return llvm::createStringError(where + ": needs its condition");
  std::optional<std::vector<double>> cond = shapeValues(g, n.input(0), types);
  if (!cond || cond->size() != 1)
    return llvm::createStringError(
        where + ": cond ('" + n.input(0) +
        "') must be a constant, but it is computed at run time (paxc inlines "
        "an If whose condition is known; bind it with --bind)");
  const char *name = (*cond)[0] != 0 ? "then_branch" : "else_branch";
  const onnx::AttributeProto *a = findAttribute(n, name);
  if (!a || !a->has_g())
    return llvm::createStringError(where + ": has no " + name);
  return std::optional<onnx::GraphProto>(a->g());
}

/// One round: each If of \p model's graph inlined; returns how many.
llvm::Expected<unsigned> inlineRound(llvm::StringRef path,
                                     onnx::ModelProto &model, int round) {
  onnx::GraphProto &g = *model.mutable_graph();
  auto isIf = [](const onnx::NodeProto &n) {
    return (n.domain().empty() || n.domain() == "ai.onnx") &&
           n.op_type() == "If";
  };
  if (std::none_of(g.node().begin(), g.node().end(), isIf))
    return 0;
  llvm::StringMap<onnx::TypeProto> types = inferTypes(model);
  std::vector<onnx::NodeProto> out;
  unsigned count = 0;
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto &n = g.node(i);
    if (!isIf(n)) {
      out.push_back(n);
      continue;
    }
    std::string where = nodeWhere(path, n, i);
    auto branch = takenBranch(g, n, types, where);
    if (!branch)
      return branch.takeError();
    std::string prefix =
        (n.name().empty() ? "If" + std::to_string(i) : n.name()) + "/r" +
        std::to_string(round) + "/";
    auto nodes = inlined(**branch, n, prefix, where);
    if (!nodes)
      return nodes.takeError();
    out.insert(out.end(), nodes->begin(), nodes->end());
    ++count;
  }
  g.clear_node();
  for (auto &n : out)
    *g.add_node() = std::move(n);
  return count;
}

} // namespace

llvm::Error inlineConstantIfs(llvm::StringRef path, onnx::ModelProto &model) {
  for (int round = 0; round < kMaxRounds; ++round) {
    auto n = inlineRound(path, model, round);
    if (!n)
      return n.takeError();
    if (*n == 0)
      return llvm::Error::success();
  }
  return llvm::createStringError(path + ": Ifs nested more than " +
                                 std::to_string(kMaxRounds) + " deep");
}

} // namespace pax
