//===- Rnn.cpp - ONNX's RNN unrolled into matrix products -----------------===//
#include "frontend/Rnn.h"

#include "frontend/GraphBuilder.h"

#include "llvm/ADT/StringMap.h"

#include <string>
#include <vector>

namespace pax {
namespace {

using Types = llvm::StringMap<onnx::TypeProto>;

/// One RNN node's rewrite: its attributes and static sizes.
struct Rnn {
  GraphBuilder &b;
  const onnx::NodeProto &n;
  std::string where;
  int64_t steps = 0, batch = 0, hidden = 0, dirs = 1;
  bool reverse = false, batchFirst = false;
  double clip = 0;
  std::vector<std::string> activations;
  int32_t elem = onnx::TensorProto::FLOAT;

  bool has(int i) const { return i < n.input_size() && !n.input(i).empty(); }
  llvm::Error fail(const std::string &what) const {
    return llvm::createStringError(where + ": " + what);
  }
  std::string op(llvm::StringRef type, std::vector<std::string> in) {
    return b.apply(type, in);
  }
  /// \p x's entry \p i along axis 0 (the axis dropped).
  std::string at(const std::string &x, int64_t i) {
    return op("Gather", {x, b.int64s({i}, true)});
  }
  std::string transpose(const std::string &x, std::vector<int64_t> perm) {
    onnx::NodeProto &t = b.node("Transpose", {x});
    GraphBuilder::intsAttr(t, "perm", perm);
    return t.output(0);
  }
  std::string concat(const std::vector<std::string> &parts, int64_t axis) {
    onnx::NodeProto &c = b.node("Concat", parts);
    GraphBuilder::intAttr(c, "axis", axis);
    return c.output(0);
  }
  /// One direction's states: Y's [steps, batch, hidden] and the last.
  std::pair<std::string, std::string> direction(int64_t d,
                                                const std::string &x);
  /// The activation of direction \p d on \p v (clipped first).
  std::string activate(int64_t d, std::string v);
};

std::string Rnn::activate(int64_t d, std::string v) {
  if (clip > 0)
    v = op("Min",
           {op("Max", {v, b.scalar(-clip, elem)}), b.scalar(clip, elem)});
  return op(activations[size_t(d)], {v});
}

std::pair<std::string, std::string> Rnn::direction(int64_t d,
                                                   const std::string &x) {
  std::string wt = transpose(at(n.input(1), d), {1, 0});
  std::string rt = transpose(at(n.input(2), d), {1, 0});
  std::string xw = op("MatMul", {x, wt}); // [steps, batch, hidden]
  if (has(3)) {
    std::vector<int64_t> first, second;
    for (int64_t i = 0; i < hidden; ++i)
      first.push_back(i), second.push_back(hidden + i);
    std::string bd = at(n.input(3), d);
    xw = op("Add",
            {xw, op("Add", {op("Gather", {bd, b.int64s(first, false)}),
                            op("Gather", {bd, b.int64s(second, false)})})});
  }
  std::string h = has(5) ? at(n.input(5), d) : "";
  std::vector<std::string> ys(static_cast<size_t>(steps));
  for (int64_t s = 0; s < steps; ++s) {
    int64_t t = reverse || d == 1 ? steps - 1 - s : s;
    std::string pre = at(xw, t);
    if (!h.empty())
      pre = op("Add", {pre, op("MatMul", {h, rt})});
    std::string next = activate(d, pre), y = next;
    if (has(4)) {
      // Entries past their length keep their state and write zeros.
      std::string keep =
          b.unsqueeze(op("Less", {b.scalar(double(t), onnx::TensorProto::INT32),
                                  n.input(4)}),
                      {1});
      std::string zero = b.scalar(0, elem);
      y = op("Where", {keep, next, zero});
      next = op("Where", {keep, next, h.empty() ? zero : h});
    }
    h = next;
    ys[size_t(t)] = b.unsqueeze(y, {0});
  }
  return {concat(ys, 0), h};
}

/// \p r's attributes and sizes from \p n and the graph's types.
llvm::Error readRnn(Rnn &r, const Types &types) {
  const onnx::NodeProto &n = r.n;
  if (n.input_size() < 3)
    return r.fail("needs X, W and R");
  auto x = staticShape(types, n.input(0), r.where);
  if (!x)
    return x.takeError();
  auto w = staticShape(types, n.input(1), r.where);
  if (!w)
    return w.takeError();
  std::string direction = "forward";
  std::vector<std::string> acts;
  for (const auto &a : n.attribute()) {
    if (a.name() == "direction")
      direction = a.s();
    if (a.name() == "layout")
      r.batchFirst = a.i() != 0;
    if (a.name() == "clip")
      r.clip = a.f();
    if (a.name() == "activations")
      acts.assign(a.strings().begin(), a.strings().end());
  }
  if (x->size() != 3 || w->size() != 3)
    return r.fail("X and W must have rank 3");
  r.steps = (*x)[r.batchFirst ? 1 : 0];
  r.batch = (*x)[r.batchFirst ? 0 : 1];
  r.dirs = (*w)[0];
  r.hidden = (*w)[1];
  r.reverse = direction == "reverse";
  r.elem = elemOf(types, n.input(0));
  if ((direction == "bidirectional") != (r.dirs == 2) ||
      (direction != "forward" && direction != "reverse" &&
       direction != "bidirectional"))
    return r.fail("direction '" + direction + "' does not match W's " +
                  std::to_string(r.dirs) + " directions");
  if (r.steps > kMaxRnnSteps)
    return r.fail("a sequence of " + std::to_string(r.steps) +
                  " steps is longer than the " + std::to_string(kMaxRnnSteps) +
                  " paxc unrolls");
  if (r.has(4) && direction != "forward")
    return r.fail("sequence_lens with direction '" + direction +
                  "' is not supported (forward only)");
  if (acts.empty())
    acts.assign(size_t(r.dirs), "Tanh");
  for (const std::string &a : acts)
    if (a != "Tanh" && a != "Relu" && a != "Sigmoid")
      return r.fail("activation '" + a +
                    "' is not supported (Tanh, Relu, Sigmoid)");
  if (int64_t(acts.size()) != r.dirs)
    return r.fail("needs one activation per direction");
  r.activations = acts;
  return llvm::Error::success();
}

llvm::Error lowerRnn(GraphBuilder &b, const onnx::NodeProto &n,
                     const Types &types, const std::string &where) {
  Rnn r{b, n, where, 0, 0, 0, 1, false, false, 0, {}, onnx::TensorProto::FLOAT};
  if (auto err = readRnn(r, types))
    return err;
  std::string x =
      r.batchFirst ? r.transpose(n.input(0), {1, 0, 2}) : n.input(0);
  std::vector<std::string> ys, hs;
  for (int64_t d = 0; d < r.dirs; ++d) {
    auto [y, h] = r.direction(d, x);
    ys.push_back(b.unsqueeze(y, {1}));
    hs.push_back(b.unsqueeze(h, {0}));
  }
  std::string y = r.concat(ys, 1), h = r.concat(hs, 0);
  if (r.batchFirst) {
    y = r.transpose(y, {2, 0, 1, 3});
    h = r.transpose(h, {1, 0, 2});
  }
  if (n.output_size() > 0 && !n.output(0).empty())
    b.rename(y, n.output(0));
  if (n.output_size() > 1 && !n.output(1).empty())
    b.rename(h, n.output(1));
  return llvm::Error::success();
}

} // namespace

llvm::Error lowerRnns(llvm::StringRef path, onnx::ModelProto &model,
                      int64_t opset) {
  return rewriteOpType(path, model, opset, "RNN", lowerRnn);
}

} // namespace pax
