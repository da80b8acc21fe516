//===- ControlFlow.cpp - Ifs inlined, Loops unrolled, when known ----------===//
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

/// An error naming \p where unless every input and output of \p body (a
/// branch or a loop body) is named: an unnamed one would read or write
/// the absent value "".
llvm::Error checkBody(const onnx::GraphProto &body, const std::string &where) {
  for (const auto *list : {&body.input(), &body.output()})
    for (const onnx::ValueInfoProto &v : *list)
      if (v.name().empty())
        return llvm::createStringError(
            where + ": its body '" + body.name() +
            "' has an input or output without a name");
  return llvm::Error::success();
}

/// \p body (a Loop's iteration, an If's branch) appended to \p scratch,
/// its values named under \p prefix (its unnamed nodes after their op and
/// position), its initializers as Constant nodes (the runtime reads
/// initializers from the model file, whose graph does not hold these), its
/// inputs read as \p inputs; the body's outputs as values of \p scratch
/// (an outer value it returns keeps its name).
std::vector<std::string> appendIteration(onnx::GraphProto &scratch,
                                         onnx::GraphProto body,
                                         llvm::ArrayRef<std::string> inputs,
                                         const std::string &prefix) {
  Renames map;
  for (int i = 0; i < body.input_size() && i < int(inputs.size()); ++i)
    map[body.input(i).name()] = inputs[size_t(i)];
  for (const auto &node : body.node())
    for (const std::string &o : node.output())
      if (!o.empty())
        map[o] = prefix + o;
  for (const auto &t : body.initializer())
    map[t.name()] = prefix + t.name();
  renameReads(body, map, false);
  for (const auto &t : body.initializer()) {
    onnx::NodeProto &c = *scratch.add_node();
    c.set_op_type("Constant");
    c.set_name(map[t.name()]);
    c.add_output(map[t.name()]);
    onnx::AttributeProto &a = *c.add_attribute();
    a.set_name("value");
    a.set_type(onnx::AttributeProto::TENSOR);
    *a.mutable_t() = t;
  }
  for (int i = 0; i < body.node_size(); ++i) {
    onnx::NodeProto &node = *body.mutable_node(i);
    for (std::string &o : *node.mutable_output())
      if (!o.empty())
        o = map[o];
    node.set_name(prefix + (node.name().empty()
                                ? node.op_type() + std::to_string(i)
                                : node.name()));
    *scratch.add_node() = std::move(node);
  }
  std::vector<std::string> outs;
  for (const auto &o : body.output())
    outs.push_back(map.count(o.name()) ? map[o.name()] : o.name());
  return outs;
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
  if (auto err = checkBody(branch, where))
    return err;
  onnx::GraphProto scratch;
  std::vector<std::string> outs =
      appendIteration(scratch, std::move(branch), {}, prefix);
  for (int k = 0; k < n.output_size(); ++k) {
    if (n.output(k).empty())
      continue;
    onnx::NodeProto &id = *scratch.add_node();
    id.set_op_type("Identity");
    id.set_name(prefix + "output_" + std::to_string(k));
    id.add_input(outs[size_t(k)]);
    id.add_output(n.output(k));
  }
  return std::vector<onnx::NodeProto>(scratch.node().begin(),
                                      scratch.node().end());
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

/// A Loop's iterations: how many at most, whether its condition is
/// given, and the values its body reads.
struct LoopState {
  int64_t trips = 0;
  bool hasCond = false, condKnown = true;
  std::string cond;
  std::vector<std::string> carried;
  std::vector<std::vector<std::string>> scans;
};

/// The graph inputs (not initializers) \p name is computed from in \p g,
/// quoted and comma-separated ('a', 'b'), for an error that asks to bind
/// them; empty where none.
std::string runtimeInputsOf(const onnx::GraphProto &g,
                            const std::string &name) {
  llvm::StringMap<const onnx::NodeProto *> producer;
  for (const auto &n : g.node())
    for (const std::string &o : n.output())
      producer[o] = &n;
  llvm::StringSet<> inits, seen;
  for (const auto &t : g.initializer())
    inits.insert(t.name());
  std::vector<std::string> todo{name}, found;
  while (!todo.empty() && seen.size() < 4096) {
    std::string v = todo.back();
    todo.pop_back();
    if (!seen.insert(v).second)
      continue;
    if (const onnx::NodeProto *n = producer.lookup(v)) {
      todo.insert(todo.end(), n->input().begin(), n->input().end());
      continue;
    }
    for (const auto &in : g.input())
      if (in.name() == v && !inits.contains(v))
        found.push_back("'" + v + "'");
  }
  std::string out;
  for (const std::string &f : found)
    out += (out.empty() ? "" : ", ") + f;
  return out;
}

/// An error: Loop \p where's \p what (value \p name) is not known.
llvm::Error unknownLoopValue(const onnx::GraphProto &g, llvm::StringRef what,
                             const std::string &name,
                             const std::string &where) {
  std::string from = runtimeInputsOf(g, name);
  return llvm::createStringError(
      where + ": " + what + " ('" + name +
      "') must be a constant, but it is computed at run time" +
      (from.empty() ? "" : ", from graph input(s) " + from) +
      " (paxc unrolls a Loop whose trip count and condition are known; "
      "bind inputs with --bind)");
}

/// Loops unroll at most this many iterations, and this many nodes in all.
constexpr int64_t kMaxTrips = 1024, kMaxUnrolledNodes = int64_t(1) << 16;

/// A Loop body's condition, evaluated per iteration on the body alone: the
/// body's nodes, the outer graph's small constants it reads, and its
/// iteration number and incoming condition as constants (a condition read
/// from loop-carried values is not known).
class ConditionProbe {
public:
  ConditionProbe(const onnx::GraphProto &g, const onnx::GraphProto &body)
      : probe(body), condOut(body.output_size() ? body.output(0).name() : "") {
    probe.clear_input();
    probe.clear_output();
    llvm::StringSet<> own;
    for (const auto &n : body.node())
      own.insert(n.output().begin(), n.output().end());
    for (const auto &t : body.initializer())
      own.insert(t.name());
    for (const auto &n : body.node())
      for (const std::string &in : n.input())
        if (const onnx::TensorProto *t = findConstant(g, in);
            t && !own.contains(in) && own.insert(in).second &&
            constantValues(*t).value_or(std::vector<double>(2048)).size() <=
                1024)
          *probe.add_initializer() = *t;
    iteration = probe.initializer_size();
    *probe.add_initializer() = scalarOf(body.input(0).name(), true);
    *probe.add_initializer() = scalarOf(body.input(1).name(), false);
  }
  /// The condition iteration \p k computes from condition \p cond.
  std::optional<double> after(int64_t k, bool cond,
                              const llvm::StringMap<onnx::TypeProto> &types) {
    probe.mutable_initializer(iteration)->set_int64_data(0, k);
    probe.mutable_initializer(iteration + 1)->set_int32_data(0, cond);
    auto v = shapeValues(probe, condOut, types);
    return v && v->size() == 1 ? std::optional<double>((*v)[0]) : std::nullopt;
  }

private:
  static onnx::TensorProto scalarOf(const std::string &name, bool integer) {
    onnx::TensorProto t;
    t.set_name(name);
    t.set_data_type(integer ? onnx::TensorProto::INT64
                            : onnx::TensorProto::BOOL);
    if (integer)
      t.add_int64_data(0);
    else
      t.add_int32_data(0);
    return t;
  }
  onnx::GraphProto probe;
  std::string condOut;
  int iteration = 0;
};

/// Loop \p n's trip count and initial condition, or an error where either
/// is not known.
llvm::Expected<LoopState>
loopStart(const onnx::GraphProto &g, const onnx::NodeProto &n,
          const onnx::GraphProto &body,
          const llvm::StringMap<onnx::TypeProto> &types,
          const std::string &where) {
  if (auto err = checkBody(body, where))
    return err;
  LoopState s;
  s.trips = kMaxTrips;
  if (n.input_size() < 2 || body.input_size() != n.input_size() ||
      body.output_size() < body.input_size() - 1)
    return llvm::createStringError(
        where + ": its body's inputs and outputs do not match its inputs");
  if (!n.input(0).empty()) {
    auto m = shapeValues(g, n.input(0), types);
    if (!m || m->size() != 1)
      return unknownLoopValue(g, "M", n.input(0), where);
    s.trips = int64_t(std::clamp((*m)[0], 0.0, double(kMaxTrips) + 1));
  }
  s.hasCond = !n.input(1).empty();
  if (s.hasCond) {
    auto c = shapeValues(g, n.input(1), types);
    if (!c || c->size() != 1)
      return unknownLoopValue(g, "cond", n.input(1), where);
    s.condKnown = (*c)[0] != 0;
    s.cond = n.input(1);
  } else if (n.input(0).empty()) {
    return llvm::createStringError(where + ": has neither a trip count nor "
                                           "a condition (it never ends)");
  }
  if (s.trips > kMaxTrips ||
      s.trips * std::max(1, body.node_size()) > kMaxUnrolledNodes)
    return llvm::createStringError(where + ": would unroll into more than " +
                                   std::to_string(kMaxTrips) +
                                   " iterations or 2^16 nodes");
  s.carried.assign(n.input().begin() + 2, n.input().end());
  s.scans.resize(size_t(body.output_size() - body.input_size() + 1));
  return s;
}

/// Writes Loop or Scan \p n's outputs into \p b's graph: first Identities
/// of the final loop-carried values \p finals, then each scan output the
/// Concat of its iterations' values \p stacked along \p axes (each value
/// given that axis; reversed where \p reversed says).
llvm::Error
writeUnrolledOutputs(GraphBuilder &b, const onnx::NodeProto &n,
                     llvm::ArrayRef<std::string> finals,
                     llvm::ArrayRef<std::vector<std::string>> stacked,
                     llvm::ArrayRef<int64_t> axes,
                     llvm::ArrayRef<int64_t> reversed,
                     const std::string &where) {
  for (int j = 0; j < n.output_size(); ++j) {
    if (n.output(j).empty())
      continue;
    if (j < int(finals.size())) {
      b.node("Identity", {finals[size_t(j)]}).set_output(0, n.output(j));
      continue;
    }
    size_t k = size_t(j) - finals.size();
    if (k >= stacked.size() || stacked[k].empty())
      return llvm::createStringError(
          where + ": runs no iteration, so its scan outputs are empty");
    std::vector<std::string> parts;
    for (const std::string &v : stacked[k])
      parts.push_back(b.unsqueeze(v, {axes[k]}));
    if (k < reversed.size() && reversed[k])
      std::reverse(parts.begin(), parts.end());
    onnx::NodeProto &cat = b.node("Concat", parts);
    GraphBuilder::intAttr(cat, "axis", axes[k]);
    cat.set_output(0, n.output(j));
  }
  return llvm::Error::success();
}

/// The nodes taking Loop \p n's place: its body once per iteration, then
/// an Identity per final loop-carried value and a Concat of each scan
/// output's per-iteration values along a new first axis.
llvm::Expected<std::vector<onnx::NodeProto>>
unrolled(const onnx::GraphProto &g, const onnx::NodeProto &n,
         const llvm::StringMap<onnx::TypeProto> &types, int64_t opset,
         const std::string &prefix, const std::string &where) {
  const onnx::AttributeProto *a = findAttribute(n, "body");
  if (!a || !a->has_g())
    return llvm::createStringError(where + ": has no body");
  auto state = loopStart(g, n, a->g(), types, where);
  if (!state)
    return state.takeError();
  LoopState &s = *state;
  onnx::GraphProto scratch = g;
  int first = scratch.node_size();
  GraphBuilder b(scratch, opset, prefix + "u/");
  std::string always =
      s.hasCond ? "" : b.cast(b.int64s({1}, true), onnx::TensorProto::BOOL);
  ConditionProbe probe(g, a->g());
  for (int64_t k = 0; k < s.trips && s.condKnown; ++k) {
    std::vector<std::string> inputs{b.int64s({k}, true),
                                    s.hasCond ? s.cond : always};
    llvm::append_range(inputs, s.carried);
    std::vector<std::string> outs = appendIteration(
        scratch, a->g(), inputs, prefix + "i" + std::to_string(k) + "/");
    for (size_t j = 0; j < s.carried.size(); ++j)
      s.carried[j] = outs[1 + j];
    for (size_t j = 0; j < s.scans.size(); ++j)
      s.scans[j].push_back(outs[1 + s.carried.size() + j]);
    if (!s.hasCond || outs[0] == s.cond)
      continue;
    std::optional<double> c = probe.after(k, s.condKnown, types);
    if (!c)
      return unknownLoopValue(scratch, "the condition its body computes",
                              outs[0], where);
    s.condKnown = *c != 0;
    s.cond = outs[0];
  }
  if (s.trips == kMaxTrips && s.condKnown && n.input(0).empty())
    return llvm::createStringError(where + ": runs more than " +
                                   std::to_string(kMaxTrips) + " iterations");
  if (auto err = writeUnrolledOutputs(b, n, s.carried, s.scans,
                                      std::vector<int64_t>(s.scans.size(), 0),
                                      {}, where))
    return err;
  return std::vector<onnx::NodeProto>(scratch.node().begin() + first,
                                      scratch.node().end());
}

/// \p n's ints attribute \p name, \p count long (zeros where absent), or
/// none where its length is another.
std::optional<std::vector<int64_t>> intsOr0(const onnx::NodeProto &n,
                                            llvm::StringRef name, int count) {
  const onnx::AttributeProto *a = findAttribute(n, name);
  if (count < 0)
    return std::nullopt;
  if (!a)
    return std::vector<int64_t>(size_t(count), 0);
  if (a->ints_size() != count)
    return std::nullopt;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

/// A Scan's shape: its state and scan inputs, scan outputs, axes and
/// directions (zeros where absent).
struct ScanShape {
  int states = 0, scans = 0, outs = 0;
  std::vector<int64_t> inAxes, inDirs, outAxes, outDirs;
  int64_t trips = -1;
};

/// Scan \p n's shape, its trip count its scan inputs' (equal, static)
/// extent along their axes; an error naming \p where otherwise.
llvm::Expected<ScanShape>
scanShape(const onnx::NodeProto &n, const onnx::GraphProto &body,
          const llvm::StringMap<onnx::TypeProto> &types,
          const std::string &where) {
  const onnx::AttributeProto *m = findAttribute(n, "num_scan_inputs");
  if (!m || m->i() < 1 || m->i() > n.input_size())
    return llvm::createStringError(where + ": needs 1 to " +
                                   std::to_string(n.input_size()) +
                                   " num_scan_inputs");
  if (auto err = checkBody(body, where))
    return err;
  ScanShape s;
  s.scans = int(m->i());
  s.states = n.input_size() - s.scans;
  s.outs = body.output_size() - s.states;
  if (s.outs < 0 || body.input_size() != n.input_size())
    return llvm::createStringError(
        where + ": its body's inputs and outputs do not match its inputs");
  auto inAxes = intsOr0(n, "scan_input_axes", s.scans);
  auto inDirs = intsOr0(n, "scan_input_directions", s.scans);
  auto outAxes = intsOr0(n, "scan_output_axes", s.outs);
  auto outDirs = intsOr0(n, "scan_output_directions", s.outs);
  if (body.input_size() != n.input_size() || s.outs < 0 ||
      n.output_size() > body.output_size() || !inAxes || !inDirs || !outAxes ||
      !outDirs)
    return llvm::createStringError(
        where + ": its body, axes and directions do not match its inputs");
  s.inAxes = *inAxes, s.inDirs = *inDirs, s.outAxes = *outAxes,
  s.outDirs = *outDirs;
  for (int j = 0; j < s.scans; ++j) {
    auto shape = staticShape(types, n.input(s.states + j), where);
    if (!shape)
      return shape.takeError();
    int64_t r = int64_t(shape->size()), axis = s.inAxes[size_t(j)];
    int64_t extent =
        axis < -r || axis >= r ? -1 : (*shape)[size_t((axis + r) % r)];
    if (extent < 0 || (s.trips >= 0 && extent != s.trips))
      return llvm::createStringError(where + ": its scan inputs' axes are out "
                                             "of range or of unequal extents");
    s.trips = extent;
  }
  if (s.trips < 1 || s.trips > kMaxTrips ||
      s.trips * std::max(1, body.node_size()) > kMaxUnrolledNodes)
    return llvm::createStringError(
        where + ": scans " + std::to_string(s.trips) +
        " slices; paxc unrolls 1 to 1024 (2^16 nodes in all)");
  return s;
}

/// Scan \p n (opset 9 on) unrolled: its body once per slice of the scan
/// inputs, the state threaded through, each scan output its iterations'
/// values stacked along its axis.
llvm::Expected<std::vector<onnx::NodeProto>>
unrolledScan(const onnx::GraphProto &g, const onnx::NodeProto &n,
             const llvm::StringMap<onnx::TypeProto> &types, int64_t opset,
             const std::string &prefix, const std::string &where) {
  const onnx::AttributeProto *a = findAttribute(n, "body");
  if (opset < 9 || !a || !a->has_g())
    return llvm::createStringError(
        where + (opset < 9 ? ": a Scan of opset 8 (with a batch axis) is not "
                             "unrolled"
                           : ": has no body"));
  auto shape = scanShape(n, a->g(), types, where);
  if (!shape)
    return shape.takeError();
  const ScanShape &s = *shape;
  onnx::GraphProto scratch = g;
  int first = scratch.node_size();
  GraphBuilder b(scratch, opset, prefix + "u/");
  std::vector<std::string> state(n.input().begin(),
                                 n.input().begin() + s.states);
  std::vector<std::vector<std::string>> stacked(static_cast<size_t>(s.outs));
  for (int64_t t = 0; t < s.trips; ++t) {
    std::vector<std::string> inputs = state;
    for (int j = 0; j < s.scans; ++j) {
      int64_t at = s.inDirs[size_t(j)] ? s.trips - 1 - t : t;
      onnx::NodeProto &gather =
          b.node("Gather", {n.input(s.states + j), b.int64s({at}, true)});
      GraphBuilder::intAttr(gather, "axis", s.inAxes[size_t(j)]);
      inputs.push_back(gather.output(0));
    }
    std::vector<std::string> got = appendIteration(
        scratch, a->g(), inputs, prefix + "i" + std::to_string(t) + "/");
    std::copy(got.begin(), got.begin() + s.states, state.begin());
    for (int k = 0; k < s.outs; ++k)
      stacked[size_t(k)].push_back(got[size_t(s.states + k)]);
  }
  if (auto err = writeUnrolledOutputs(b, n, state, stacked, s.outAxes,
                                      s.outDirs, where))
    return err;
  return std::vector<onnx::NodeProto>(scratch.node().begin() + first,
                                      scratch.node().end());
}

bool isOp(const onnx::NodeProto &n, llvm::StringRef type) {
  return (n.domain().empty() || n.domain() == "ai.onnx") && n.op_type() == type;
}

/// The nodes taking If or Loop \p n's place.
llvm::Expected<std::vector<onnx::NodeProto>>
replacement(const onnx::GraphProto &g, const onnx::NodeProto &n, int i,
            const llvm::StringMap<onnx::TypeProto> &types, int64_t opset,
            llvm::StringRef path, int round) {
  std::string where = nodeWhere(path, n, i);
  std::string prefix =
      (n.name().empty() ? n.op_type() + std::to_string(i) : n.name()) + "/r" +
      std::to_string(round) + "/";
  if (isOp(n, "Loop"))
    return unrolled(g, n, types, opset, prefix, where);
  if (isOp(n, "Scan"))
    return unrolledScan(g, n, types, opset, prefix, where);
  auto branch = takenBranch(g, n, types, where);
  if (!branch)
    return branch.takeError();
  return inlined(**branch, n, prefix, where);
}

/// One round: each If of \p model's graph inlined and each Loop unrolled;
/// returns how many.
llvm::Expected<unsigned> inlineRound(llvm::StringRef path,
                                     onnx::ModelProto &model, int64_t opset,
                                     int round) {
  onnx::GraphProto &g = *model.mutable_graph();
  auto controls = [](const onnx::NodeProto &n) {
    return isOp(n, "If") || isOp(n, "Loop") || isOp(n, "Scan");
  };
  if (std::none_of(g.node().begin(), g.node().end(), controls))
    return 0;
  llvm::StringMap<onnx::TypeProto> types = inferTypes(model);
  std::vector<onnx::NodeProto> out;
  unsigned count = 0;
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto &n = g.node(i);
    if (!controls(n)) {
      out.push_back(n);
      continue;
    }
    auto nodes = replacement(g, n, i, types, opset, path, round);
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

llvm::Error inlineControlFlow(llvm::StringRef path, onnx::ModelProto &model,
                              int64_t opset) {
  int64_t before = model.graph().node_size();
  for (int round = 0; round < kMaxRounds; ++round) {
    auto n = inlineRound(path, model, opset, round);
    if (!n)
      return n.takeError();
    if (*n == 0)
      return llvm::Error::success();
    // Loops within unrolled bodies multiply: the nodes added in all.
    if (model.graph().node_size() - before > kMaxUnrolledNodes)
      return llvm::createStringError(
          path + ": unrolling its Loops and Scans adds more than 2^16 nodes");
  }
  return llvm::createStringError(path + ": Ifs and Loops nested more than " +
                                 std::to_string(kMaxRounds) + " deep");
}

} // namespace pax
