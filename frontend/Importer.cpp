//===- Importer.cpp - Graph walk and the per-node context of the importer -===//
#include "frontend/Importer.h"

#include "frontend/GraphBuilder.h"

#include "frontend/ConstantFolder.h"
#include "frontend/OnnxOps.h"
#include "frontend/TensorProto.h"
#include "ir/Soap.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Path.h"

#include <onnx/shape_inference/implementation.h>

#include <cstring>
#include <deque>

namespace pax {

/// Initializers up to this many elements are read eagerly: shape tensors,
/// axes, scalars. Larger ones stay in the model until something needs them.
static constexpr int64_t kLoadLimit = 1 << 16;

/// "shape AxB has more than 2^48 elements" when it does.
static std::optional<std::string>
tooManyElements(llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d <= 0)
      continue; // unbound or reported elsewhere
    if (n > kMaxExtent / d)
      return "shape " + shapeStr(shape) + " has more than 2^48 elements";
    n *= d;
  }
  return std::nullopt;
}

Importer::Importer(llvm::StringRef path, const onnx::ModelProto &model,
                   const ImportOptions &options)
    : path(path.str()), model(model), options(options) {}

Slot *Importer::slot(llvm::StringRef name) {
  auto it = slots.find(name);
  return it == slots.end() ? nullptr : &it->second;
}

std::string Importer::nodeLabel(const onnx::NodeProto &node, int index) const {
  std::string label = node.name().empty() ? "node #" + std::to_string(index)
                                          : "node '" + node.name() + "'";
  return label + " (" + node.op_type() + ")";
}

//===----------------------------------------------------------------------===//
// Graph inputs and initializers
//===----------------------------------------------------------------------===//

static bool isLayoutOpType(llvm::StringRef t) {
  return t == "Transpose" || t == "Reshape" || t == "Flatten" ||
         t == "Squeeze" || t == "Unsqueeze" || t == "Cast" || t == "Identity";
}

/// A Gather reads an embedding table only along axis 0; along another axis
/// it picks from activations (BERT's pooler takes token 0).
static bool isGatherOffAxis0(const onnx::NodeProto &n) {
  if (n.op_type() != "Gather")
    return false;
  for (const auto &a : n.attribute())
    if (a.name() == "axis")
      return a.i() != 0;
  return false;
}

/// Declared element counts of graph inputs; -1 when not fully static.
using DeclaredSizes = llvm::StringMap<int64_t>;

/// True when input \p i of \p n meets a larger operand: a node's result (an
/// activation) or a graph input with more elements.
static bool feedsLargerOperand(const onnx::NodeProto &n, int i,
                               const DeclaredSizes &declared) {
  auto size = [&](const std::string &name) {
    auto it = declared.find(name);
    return it == declared.end() ? int64_t(-2) : it->second;
  };
  int64_t mine = size(n.input(i));
  for (int k = 0; k < n.input_size(); ++k) {
    if (k == i)
      continue;
    int64_t other = size(n.input(k));
    if (other == -2 || (mine >= 0 && other > mine))
      return true; // -2: computed by a node
  }
  return false;
}

/// The nodes that read each tensor, with the index of the input that reads it.
using TensorUses =
    llvm::StringMap<std::vector<std::pair<const onnx::NodeProto *, int>>>;

/// Collects the uses of every tensor the nodes of \p g read.
static TensorUses collectUses(const onnx::GraphProto &g) {
  TensorUses uses;
  for (const auto &n : g.node())
    for (int i = 0; i < n.input_size(); ++i)
      uses[n.input(i)].push_back({&n, i});
  return uses;
}

/// The element count of \p dims, -1 when unknown or out of range (checked
/// later, with a message, where the tensor is declared).
static int64_t declaredCount(llvm::ArrayRef<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0 || (d > 0 && n > kMaxExtent / d))
      return -1;
    n *= d;
  }
  return n;
}

/// Collects the declared element counts of the graph inputs and
/// initializers of \p g.
static DeclaredSizes declaredSizes(const onnx::GraphProto &g) {
  DeclaredSizes declared;
  for (const auto &vi : g.input()) {
    llvm::SmallVector<int64_t, 4> dims;
    for (const auto &d : vi.type().tensor_type().shape().dim())
      dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
    declared[vi.name()] = declaredCount(dims);
  }
  for (const auto &t : g.initializer())
    declared[t.name()] = declaredCount(
        llvm::SmallVector<int64_t, 4>(t.dims().begin(), t.dims().end()));
  return declared;
}

/// Follows layout nodes from a tensor to the slots that consume it: true
/// when it reaches a weight slot, or (with \p vectors, for a tensor of at
/// most one dim) meets a larger operand of Add/Sub/Mul/Div as a bias or
/// scale vector.
/// Through layout ops too with \p throughLayout.
static bool reachesWeightSlot(const std::string &start, bool vectors,
                              bool throughLayout, TensorUses &uses,
                              const DeclaredSizes &declared) {
  std::deque<std::string> work = {start};
  for (int steps = 0; !work.empty() && steps < 64; ++steps) {
    std::string name = work.front();
    work.pop_front();
    for (auto [n, i] : uses[name]) {
      if (isWeightSlot(n->op_type(), unsigned(i)) && !isGatherOffAxis0(*n))
        return true;
      if (i == 0 && isLayoutOpType(n->op_type()) && n->output_size())
        work.push_back(n->output(0));
      else if ((name == start || throughLayout) && vectors &&
               isAffineOpType(n->op_type()) &&
               feedsLargerOperand(*n, i, declared))
        return true; // a bias or scale vector fed to Add/Sub/Mul/Div
    }
  }
  return false;
}

/// True when \p n is a ConstantOfShape or Constant node with one output.
static bool isConstantWriter(const onnx::NodeProto &n) {
  return (n.op_type() == "ConstantOfShape" || n.op_type() == "Constant") &&
         n.output_size() == 1;
}

/// The ONNX element type a ConstantOfShape or Constant node writes: its
/// `value` attribute's, else the op's default.
static int32_t constantElemType(const onnx::NodeProto &n) {
  int32_t type = n.op_type() == "ConstantOfShape" ? 1 : 0; // default f32
  for (const auto &a : n.attribute())
    if (a.name() == "value" && a.has_t())
      type = a.t().data_type();
  return type;
}

void Importer::classifyWeightInputs() {
  const onnx::GraphProto &g = model.graph();
  TensorUses uses = collectUses(g);
  llvm::StringSet<> inits;
  for (const auto &t : g.initializer())
    inits.insert(t.name());
  DeclaredSizes declared = declaredSizes(g);

  for (const auto &vi : g.input()) {
    if (inits.count(vi.name()))
      continue;
    const auto &tt = vi.type().tensor_type();
    auto dt = dtypeFromOnnx(tt.elem_type());
    if (dt && isFloat(*dt) &&
        reachesWeightSlot(vi.name(), tt.shape().dim_size() <= 1, false, uses,
                          declared))
      weightInputs.insert(vi.name());
  }
  // A float tensor a node writes from constants (ConstantOfShape in ONNX's
  // "light" models, a Constant) that feeds a weight slot stands in for a
  // weight; so does a ConstantOfShape of a shape initializer (the light
  // models' convention) that is a bias or scale vector.
  for (const auto &n : g.node()) {
    if (!isConstantWriter(n))
      continue;
    auto dt = dtypeFromOnnx(constantElemType(n));
    bool light = n.op_type() == "ConstantOfShape" && n.input_size() == 1 &&
                 inits.count(n.input(0));
    if (dt && isFloat(*dt) &&
        reachesWeightSlot(n.output(0), light, true, uses, declared))
      weightStandIns.insert(n.output(0));
  }
}

llvm::Expected<std::vector<int64_t>>
Importer::inputShape(const onnx::ValueInfoProto &vi, bool isData,
                     std::vector<std::string> &unbound) {
  const auto &tt = vi.type().tensor_type();
  if (!tt.has_shape())
    return llvm::createStringError(path + ": graph input '" + vi.name() +
                                   "' has no shape");
  std::vector<int64_t> shape;
  for (int i = 0; i < tt.shape().dim_size(); ++i) {
    const auto &d = tt.shape().dim(i);
    int64_t v = -1;
    if (d.has_dim_value()) {
      v = d.dim_value();
      if (v < 0)
        return llvm::createStringError(
            path + ": graph input '" + vi.name() + "' dim " +
            std::to_string(i) + " is negative (" + std::to_string(v) + ")");
      if (v == 0)
        return llvm::createStringError(
            path + ": graph input '" + vi.name() + "' dim " +
            std::to_string(i) + " is 0; paxc does not support empty tensors");
      if (i == 0 && isData && options.batch) {
        if (v != *options.batch && !originalBatch)
          originalBatch = v;
        v = *options.batch;
      }
    } else if (d.has_dim_param() && !d.dim_param().empty()) {
      auto it = options.dims.find(d.dim_param());
      usedDims.insert(d.dim_param());
      if (it != options.dims.end())
        v = it->second;
      else if (i == 0 && isData && options.batch)
        v = *options.batch;
      else if (!llvm::is_contained(unbound, d.dim_param()))
        unbound.push_back(d.dim_param());
    } else {
      return llvm::createStringError(
          path + ": graph input '" + vi.name() + "' dim " + std::to_string(i) +
          " has neither a size nor a name; paxc needs static shapes");
    }
    if (v > kMaxExtent)
      return llvm::createStringError(path + ": graph input '" + vi.name() +
                                     "' dim " + std::to_string(i) + " is " +
                                     std::to_string(v) + ", larger than 2^48");
    shape.push_back(v);
  }
  if (auto problem = tooManyElements(shape))
    return llvm::createStringError(path + ": graph input '" + vi.name() +
                                   "': " + *problem);
  return shape;
}

llvm::Error Importer::declareInitializers() {
  std::string dir = llvm::sys::path::parent_path(path).str();
  for (const auto &t : model.graph().initializer()) {
    if (slots.count(t.name()))
      return llvm::createStringError(path + ": initializer '" + t.name() +
                                     "' is defined twice");
    if (auto err = checkTensorData(t, dir))
      return llvm::createStringError(path + ": " +
                                     llvm::toString(std::move(err)));
    Slot s;
    s.type = *tensorProtoType(t);
    s.initializer = t.name();
    if (s.type.numel() <= kLoadLimit) {
      auto c = readTensorProto(t, dir);
      if (!c)
        return llvm::createStringError(path + ": " +
                                       llvm::toString(c.takeError()));
      s.constant = std::move(*c);
    }
    slots[t.name()] = std::move(s);
  }
  return llvm::Error::success();
}

llvm::Error Importer::declareInputs() {
  std::vector<std::string> unbound;
  for (const auto &vi : model.graph().input()) {
    if (slots.count(vi.name()))
      continue; // an initializer listed as an input (IR < 4)
    if (!vi.type().has_tensor_type())
      return llvm::createStringError(path + ": graph input '" + vi.name() +
                                     "' is not a tensor");
    auto dt = dtypeFromOnnx(vi.type().tensor_type().elem_type());
    if (!dt)
      return llvm::createStringError(
          path + ": graph input '" + vi.name() + "' has unsupported type " +
          std::to_string(vi.type().tensor_type().elem_type()));
    bool isWeight = weightInputs.count(vi.name());
    auto shape = inputShape(vi, !isWeight, unbound);
    if (!shape)
      return shape.takeError();
    Slot s;
    s.type.elem = *dt;
    s.type.shape.assign(shape->begin(), shape->end());
    if (isWeight)
      s.weightInput = vi.name();
    slots[vi.name()] = std::move(s);
  }
  for (const auto &[name, value] : options.dims)
    if (!usedDims.count(name))
      warnings.push_back(path + ": --dim " + name +
                         ": the model has no symbolic dim called '" + name +
                         "'");
  if (!unbound.empty()) {
    std::string names;
    for (const auto &n : unbound)
      names += (names.empty() ? "'" : ", '") + n + "'";
    return llvm::createStringError(
        path + ": unbound symbolic dims " + names +
        "; give each a value with --dim NAME=VALUE (or --batch=N for the "
        "leading batch dim)");
  }
  // Arguments in graph-input order; weights become globals on first use.
  for (const auto &vi : model.graph().input()) {
    Slot &s = slots[vi.name()];
    if (!s.value && s.initializer.empty() && s.weightInput.empty()) {
      s.value = module->main.addArg(vi.name(), s.type);
      slotOf[s.value] = &s;
    }
  }
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Values, constants and parameters
//===----------------------------------------------------------------------===//

/// Converts known values to the IR's dense bytes.
static std::vector<uint8_t> denseBytes(const ConstTensor &c) {
  std::vector<uint8_t> out(c.type.bytes());
  uint8_t *p = out.data();
  unsigned w = dtypeBytes(c.type.elem);
  for (int64_t i = 0; i < c.numel(); ++i, p += w) {
    auto store = [p](auto v) { std::memcpy(p, &v, sizeof(v)); };
    switch (c.type.elem) {
    case DType::F32:
      store(float(c.real(i)));
      break;
    case DType::F64:
      store(c.real(i));
      break;
    case DType::F16:
    case DType::BF16:
      store(roundTo16Bits(c.real(i), c.type.elem == DType::BF16));
      break;
    case DType::I8:
    case DType::U8:
    case DType::I1:
      store(uint8_t(c.integer(i)));
      break;
    case DType::I16:
    case DType::U16:
      store(uint16_t(c.integer(i)));
      break;
    case DType::I32:
    case DType::U32:
      store(uint32_t(c.integer(i)));
      break;
    case DType::I64:
    case DType::U64:
      store(c.integer(i));
      break;
    }
  }
  return out;
}

/// A float initializer, weight fed as a graph input or weight stand-in
/// that paxc has not computed, of two or more elements (exporters write
/// scalars, an epsilon or a scale, as one-element initializers): what
/// training could update.
static bool isTrainableLeaf(const Slot &s) {
  return isFloat(s.type.elem) && !s.computed && s.type.numel() >= 2 &&
         (!s.initializer.empty() || !s.weightInput.empty() || s.standIn);
}

Value *Importer::materialize(Slot &s, llvm::StringRef name) {
  if (s.value)
    return s.value;
  std::string source = !s.weightInput.empty()   ? "input:" + s.weightInput
                       : !s.initializer.empty() ? "initializer:" + s.initializer
                                                : "";
  if (!source.empty())
    if (Global *shared = sourceGlobals.lookup(source))
      if (shared->value.type == s.type) {
        s.value = &shared->value;
        return s.value;
      }
  Global *g = module->addGlobal(name.str(), s.type);
  if (!source.empty())
    sourceGlobals.try_emplace(source, g);
  if (!s.weightInput.empty()) {
    g->source = DataSource::Input;
    g->ref = s.weightInput;
  } else if (!s.initializer.empty()) {
    g->source = DataSource::Initializer;
    g->ref = s.initializer;
    // A scalar's value (a scale, a fill) is known to passes that fold it.
    if (s.constant && s.type.numel() == 1)
      g->bytes = denseBytes(*s.constant);
  } else if (s.constant &&
             (s.constant->isSplat() || s.constant->numel() == 0)) {
    g->source = DataSource::Fill;
    g->fill = s.constant->count() ? s.constant->real(0) : 0.0;
  } else {
    assert(s.constant && "a slot without a value must be a constant");
    g->source = DataSource::Dense;
    g->bytes = denseBytes(*s.constant);
  }
  if (isTrainableLeaf(s))
    trainableGlobals.insert(g);
  if (s.computed)
    computedGlobals.insert(g);
  s.value = &g->value;
  slotOf[s.value] = &s;
  return s.value;
}

/// Operand \p k of \p op is a running statistic that training does not
/// differentiate (batch norm's mean and variance).
static bool isStatistic(const Op &op, size_t k) {
  return op.kind == OpKind::BatchNorm && k >= 3;
}

/// True when a float result of \p op is in \p live.
static bool feedsLive(const Op &op, const llvm::DenseSet<const Value *> &live) {
  return llvm::any_of(op.results, [&](const Result &r) {
    return isFloat(r.value->type.elem) && live.count(r.value.get());
  });
}

/// The values a graph output depends on differentiably: float operands of
/// ops whose float results it depends on, walked from the outputs back.
static llvm::DenseSet<const Value *> differentiablyLive(const Func &f) {
  llvm::DenseSet<const Value *> live(f.returns.begin(), f.returns.end());
  for (auto it = f.ops.rbegin(); it != f.ops.rend(); ++it) {
    const Op &op = **it;
    if (!feedsLive(op, live))
      continue;
    for (size_t k = 0; k < op.operands.size(); ++k)
      if (isFloat(op.operands[k].value->type.elem) && !isStatistic(op, k))
        live.insert(op.operands[k].value);
  }
  return live;
}

namespace {
/// Where a value comes from: whether it is an activation or a table, and the
/// trainable leaves it derives from differentiably.
struct Origin {
  bool act = false, table = false;
  llvm::SmallVector<const Global *, 2> leaves;
};
} // namespace

using OriginMap = llvm::DenseMap<const Value *, Origin>;
using GlobalSet = llvm::DenseSet<const Global *>;

/// The origins of the main function's arguments (activations) and of the
/// globals of \p m: leaves from \p trainable, tables from \p computed.
static OriginMap initialOrigins(const Module &m, const GlobalSet &trainable,
                                const GlobalSet &computed) {
  OriginMap origin;
  for (const auto &a : m.main.args)
    origin[a.get()].act = true;
  for (const auto &g : m.globals) {
    Origin &o = origin[&g->value];
    if (trainable.count(g.get()))
      o.leaves.push_back(g.get());
    o.table = computed.count(g.get()) && isFloat(g->value.type.elem);
  }
  return origin;
}

/// The leaves of \p trainable that \p f lays out along the batch.
/// A leaf laid out along the batch (a dim of two or more elements that an
/// op indexes by a sample dim) holds per-sample data an exporter computed:
/// a mask, a class token expanded to the batch, an initial state.
static GlobalSet perSampleLeaves(const Func &f, const GlobalSet &trainable) {
  auto roles = computeSoapRoles(f);
  GlobalSet perSample;
  for (const auto &op : f.ops)
    for (const Operand &o : op->operands) {
      const Global *g = o.value->global;
      if (!g || !trainable.count(g))
        continue;
      for (size_t i = 0; i < o.map.size(); ++i) {
        int c = carrierDim(o.map[i]);
        if (c >= 0 && g->value.type.shape[i] > 1 &&
            roles[op.get()][c] == SoapRole::Sample)
          perSample.insert(g);
      }
    }
  return perSample;
}

/// Adds the leaves of \p o to \p params, but none of an activation or a
/// table, and none in \p perSample.
static void takeLeaves(const Origin &o, const GlobalSet &perSample,
                       GlobalSet &params) {
  if (o.act || o.table)
    return;
  for (const Global *g : o.leaves)
    if (!perSample.count(g))
      params.insert(g);
}

/// The origin of the results of \p op, from its operands' in \p origin;
/// where they meet activations in an op an output depends on (\p feeds),
/// takes the operands' leaves into \p params.
static Origin forwardOrigin(const Op &op, OriginMap &origin, bool feeds,
                            const GlobalSet &perSample, GlobalSet &params) {
  Origin out;
  for (const Operand &o : op.operands)
    out.act |= origin[o.value].act;
  for (size_t k = 0; k < op.operands.size(); ++k) {
    const Value *v = op.operands[k].value;
    const Origin &in = origin[v];
    if (!isFloat(v->type.elem)) {
      out.table |= !in.act && op.kind == OpKind::Cast; // integers to floats
      continue;
    }
    if (isStatistic(op, k))
      continue;
    if (out.act) {
      if (feeds)
        takeLeaves(in, perSample, params); // where weights meet activations
      continue;
    }
    out.table |= in.table;
    for (const Global *g : in.leaves)
      if (!llvm::is_contained(out.leaves, g))
        out.leaves.push_back(g);
  }
  if (out.table)
    out.leaves.clear();
  return out;
}

void Importer::markParameters() {
  const Func &f = module->main;
  llvm::DenseSet<const Value *> live = differentiablyLive(f);
  // Forward: whether a value depends on the graph's data inputs (an
  // activation); if not, the trainable leaves it derives from
  // differentiably, and whether it is a table (mixed with floats paxc
  // computed from constants or converted from integers: positions, masks).
  // A leaf is a parameter where, not part of a table, it meets activations
  // in an op an output depends on: a weight, not a rotary frequency.
  OriginMap origin = initialOrigins(*module, trainableGlobals, computedGlobals);
  GlobalSet perSample = perSampleLeaves(f, trainableGlobals);
  GlobalSet params;
  for (const auto &opPtr : f.ops) {
    const Op &op = *opPtr;
    Origin out =
        forwardOrigin(op, origin, feedsLive(op, live), perSample, params);
    for (const Result &r : op.results)
      origin[r.value.get()] = out;
  }
  // An output computed from weights alone.
  for (const Value *v : f.returns)
    takeLeaves(origin[v], perSample, params);
  for (const auto &g : module->globals)
    g->isParameter = params.count(g.get()) != 0;
}

//===----------------------------------------------------------------------===//
// Nodes
//===----------------------------------------------------------------------===//

llvm::Error Importer::collectProducers(llvm::StringMap<int> &producer) const {
  const onnx::GraphProto &g = model.graph();
  int n = g.node_size();
  for (int i = 0; i < n; ++i)
    for (const auto &out : g.node(i).output()) {
      if (out.empty())
        continue;
      auto [it, inserted] = producer.try_emplace(out, i);
      if (!inserted)
        return llvm::createStringError(
            path + ": tensor '" + out + "' is written by both " +
            nodeLabel(g.node(it->second), it->second) + " and " +
            nodeLabel(g.node(i), i));
      if (slots.count(out))
        return llvm::createStringError(
            path + ": " + nodeLabel(g.node(i), i) + " writes '" + out +
            "', which is already a graph input or initializer");
    }
  return llvm::Error::success();
}

llvm::Error Importer::collectUsers(const llvm::StringMap<int> &producer,
                                   std::vector<int> &pending,
                                   std::vector<std::vector<int>> &users) const {
  const onnx::GraphProto &g = model.graph();
  int n = g.node_size();
  for (int i = 0; i < n; ++i)
    for (const auto &in : g.node(i).input()) {
      if (in.empty() || slots.count(in))
        continue;
      auto it = producer.find(in);
      if (it == producer.end())
        return llvm::createStringError(
            path + ": " + nodeLabel(g.node(i), i) + " reads '" + in +
            "', which no node, graph input or initializer defines");
      ++pending[i];
      users[it->second].push_back(i);
    }
  return llvm::Error::success();
}

llvm::Error Importer::importNode(int i) {
  const onnx::NodeProto &node = model.graph().node(i);
  OpImportFn fn = findOpImporter(node.domain(), node.op_type());
  if (!fn)
    fn = importOpaque;
  NodeContext ctx(*this, node, i);
  if (auto err = fn(ctx)) {
    if (!originalBatch || *originalBatch == *options.batch)
      return err;
    // With --batch on a static export, say where a fixed batch may lie.
    return llvm::createStringError(
        llvm::toString(std::move(err)) +
        " (--batch=" + llvm::Twine(*options.batch).str() +
        " on an export with batch " + llvm::Twine(*originalBatch).str() +
        ": this node may hold the exported batch; export with a dynamic "
        "batch dim to compile other batch sizes)");
  }
  for (const auto &out : node.output())
    if (!out.empty() && !slots.count(out))
      return ctx.error("output '" + out + "' was not produced");
  return llvm::Error::success();
}

llvm::Error Importer::importNodes() {
  const onnx::GraphProto &g = model.graph();
  int n = g.node_size();
  // Who writes each tensor; two writers is an error.
  llvm::StringMap<int> producer;
  if (auto err = collectProducers(producer))
    return err;
  // Topological order (Kahn), stable in the file's order.
  std::vector<int> pending(n, 0);
  std::vector<std::vector<int>> users(n);
  if (auto err = collectUsers(producer, pending, users))
    return err;
  std::vector<int> ready;
  for (int i = n - 1; i >= 0; --i)
    if (!pending[i])
      ready.push_back(i);
  std::vector<bool> done(n, false);
  int imported = 0;
  while (!ready.empty()) {
    // Take the earliest ready node in file order.
    auto it = std::min_element(ready.begin(), ready.end());
    int i = *it;
    ready.erase(it);
    if (auto err = importNode(i))
      return err;
    done[i] = true;
    ++imported;
    for (int u : users[i])
      if (--pending[u] == 0)
        ready.push_back(u);
  }
  if (imported != n) {
    for (int i = 0; i < n; ++i)
      if (!done[i])
        return llvm::createStringError(path +
                                       ": the graph has a cycle through " +
                                       nodeLabel(g.node(i), i));
  }
  return llvm::Error::success();
}

llvm::Error Importer::bindOutputs() {
  Func &f = module->main;
  for (const auto &vi : model.graph().output()) {
    Slot *s = slot(vi.name());
    if (!s)
      return llvm::createStringError(path + ": graph output '" + vi.name() +
                                     "' is never produced");
    const auto &tt = vi.type().tensor_type();
    if (tt.has_shape()) {
      bool mismatch = tt.shape().dim_size() != int(s->type.rank());
      for (int i = 0; !mismatch && i < tt.shape().dim_size(); ++i)
        mismatch = tt.shape().dim(i).has_dim_value() &&
                   tt.shape().dim(i).dim_value() != s->type.shape[i] &&
                   !(i == 0 && options.batch);
      if (originalBatch && *originalBatch != *options.batch &&
          tt.shape().dim_size() >= 1 && tt.shape().dim(0).has_dim_value() &&
          tt.shape().dim(0).dim_value() == *originalBatch &&
          s->type.rank() >= 1 && s->type.shape[0] != *options.batch)
        return llvm::createStringError(
            path + ": graph output '" + vi.name() + "' keeps the exported " +
            "batch " + llvm::Twine(*originalBatch).str() + " (" +
            shapeStr(s->type.shape) +
            ") under --batch=" + llvm::Twine(*options.batch).str() +
            ": a node bakes the batch in; export with a dynamic batch dim "
            "to compile other batch sizes");
      if (mismatch)
        warnings.push_back(path + ": graph output '" + vi.name() +
                           "' is declared with a different shape; it is " +
                           shapeStr(s->type.shape));
    }
    f.returns.push_back(materialize(*s, vi.name()));
    f.returnNames.push_back(vi.name());
  }
  return llvm::Error::success();
}

void Importer::removeUnusedGlobals() {
  llvm::DenseSet<const Value *> used(module->main.returns.begin(),
                                     module->main.returns.end());
  for (const auto &op : module->main.ops)
    for (const Operand &o : op->operands)
      used.insert(o.value);
  llvm::erase_if(module->globals, [&](const std::unique_ptr<Global> &g) {
    return !used.count(&g->value);
  });
}

llvm::Expected<ImportResult> Importer::run() {
  module = std::make_unique<Module>();
  std::string stem = llvm::sys::path::stem(path).str();
  module->name = stem.empty() ? "model" : stem;
  module->attrs["source"] = llvm::sys::path::filename(path).str();
  for (const auto &o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx")
      opsetVersion = int(o.version());
  module->attrs["opset"] = int64_t(opsetVersion);
  module->attrs["ir_version"] = int64_t(model.ir_version());

  classifyWeightInputs();
  if (auto err = declareInitializers())
    return err;
  if (auto err = declareInputs())
    return err;
  if (auto err = importNodes())
    return err;
  if (auto err = bindOutputs())
    return err;
  removeUnusedGlobals();
  markParameters();
  ImportResult r;
  r.module = std::move(module);
  r.warnings = std::move(warnings);
  return r;
}

static std::optional<TensorType> typeFromProto(const onnx::TypeProto &t) {
  if (!t.has_tensor_type() || !t.tensor_type().has_shape())
    return std::nullopt;
  auto dt = dtypeFromOnnx(t.tensor_type().elem_type());
  if (!dt)
    return std::nullopt;
  TensorType type{*dt, {}};
  for (const auto &d : t.tensor_type().shape().dim()) {
    if (!d.has_dim_value() || d.dim_value() < 0 || d.dim_value() > kMaxExtent)
      return std::nullopt;
    type.shape.push_back(d.dim_value());
  }
  return type;
}

const llvm::StringMap<TensorType> &Importer::inferredTypes() {
  if (inferred)
    return *inferred;
  inferred.emplace();
  // ONNX's shape inference on a copy whose inputs have the bound shapes,
  // of only the nodes paxc has no importer for (the rest it types itself:
  // ONNX's inference is not needed there, and not safe on every input),
  // with what paxc knows of every tensor so far as value_info.
  onnx::ModelProto copy = model;
  copy.mutable_graph()->clear_node();
  for (const onnx::NodeProto &n : model.graph().node())
    if (!findOpImporter(n.domain(), n.op_type()))
      *copy.mutable_graph()->add_node() = n;
  for (const auto &entry : slots) {
    const TensorType &t = entry.getValue().type;
    onnx::ValueInfoProto &vi = *copy.mutable_graph()->add_value_info();
    vi.set_name(entry.getKey().str());
    auto &tt = *vi.mutable_type()->mutable_tensor_type();
    tt.set_elem_type(dtypeToOnnx(t.elem));
    for (int64_t d : t.shape)
      tt.mutable_shape()->add_dim()->set_dim_value(d);
  }
  for (auto &vi : *copy.mutable_graph()->mutable_input()) {
    Slot *s = slot(vi.name());
    if (!s || !vi.type().has_tensor_type())
      continue;
    auto *shape = vi.mutable_type()->mutable_tensor_type()->mutable_shape();
    shape->clear_dim();
    for (int64_t d : s->type.shape)
      shape->add_dim()->set_dim_value(d);
  }
  // The model's own value_info may still say where ONNX's inference
  // cannot.
  inferShapesSafely(copy, /*dataPropagation=*/true);
  for (const auto *infos :
       {&model.graph().value_info(), &model.graph().output(),
        &copy.graph().value_info(), &copy.graph().output()})
    for (const auto &vi : *infos)
      if (auto t = typeFromProto(vi.type()))
        (*inferred)[vi.name()] = *t;
  return *inferred;
}

//===----------------------------------------------------------------------===//
// NodeContext
//===----------------------------------------------------------------------===//

std::optional<TensorType> NodeContext::inferredOutputType(unsigned i) const {
  const auto &types = imp.inferredTypes();
  auto it = types.find(node.output(i));
  if (it == types.end())
    return std::nullopt;
  return it->second;
}

int NodeContext::opset() const { return imp.opsetVersion; }

std::string NodeContext::modelDir() const {
  return llvm::sys::path::parent_path(imp.path).str();
}

std::optional<std::pair<int64_t, int64_t>> NodeContext::rebatch() const {
  if (!imp.originalBatch)
    return std::nullopt;
  return std::make_pair(*imp.originalBatch, *imp.options.batch);
}

const TensorType &NodeContext::type(unsigned i) const {
  return imp.slot(node.input(i))->type;
}

const ConstTensor *NodeContext::constant(unsigned i) const {
  if (!hasInput(i))
    return nullptr;
  Slot *s = imp.slot(node.input(i));
  return s->constant ? &*s->constant : nullptr;
}

llvm::Expected<const ConstTensor *>
NodeContext::requireScalar(unsigned i, llvm::StringRef what) {
  auto c = requireConstant(i, what);
  if (c && (*c)->numel() != 1)
    return error(what + " must hold one value, not " +
                 llvm::Twine((*c)->numel()));
  return c;
}

llvm::Expected<const ConstTensor *>
NodeContext::requireConstant(unsigned i, llvm::StringRef what) {
  if (!hasInput(i))
    return error("missing input " + llvm::Twine(i) + " (" + what + ")");
  Slot *s = imp.slot(node.input(i));
  if (!s->constant && !s->initializer.empty()) {
    // A large initializer: read it now.
    std::string dir = llvm::sys::path::parent_path(imp.path).str();
    for (const auto &t : imp.model.graph().initializer())
      if (t.name() == s->initializer) {
        auto c = readTensorProto(t, dir);
        if (!c)
          return c.takeError();
        s->constant = std::move(*c);
        s->constant->type = s->type;
      }
  }
  if (!s->constant)
    return error(what + " ('" + node.input(i) +
                 "') must be a constant, but it is computed at run time");
  return &*s->constant;
}

Value *NodeContext::value(unsigned i) {
  return imp.materialize(*imp.slot(node.input(i)), node.input(i));
}

Value *NodeContext::constantValue(ConstTensor t, llvm::StringRef suffix) {
  Slot s;
  s.type = t.type;
  s.constant = std::move(t);
  s.computed = true;
  std::string base = node.name().empty() ? node.op_type() : node.name();
  return imp.materialize(s, base + "/" + suffix.str());
}

const onnx::AttributeProto *NodeContext::attr(llvm::StringRef name) const {
  for (const auto &a : node.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t NodeContext::attrInt(llvm::StringRef name, int64_t dflt) const {
  const auto *a = attr(name);
  return a ? a->i() : dflt;
}

float NodeContext::attrFloat(llvm::StringRef name, float dflt) const {
  const auto *a = attr(name);
  return a ? a->f() : dflt;
}

std::string NodeContext::attrString(llvm::StringRef name,
                                    llvm::StringRef dflt) const {
  const auto *a = attr(name);
  return a ? a->s() : dflt.str();
}

std::vector<int64_t> NodeContext::attrInts(llvm::StringRef name) const {
  const auto *a = attr(name);
  if (!a)
    return {};
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

std::vector<float> NodeContext::attrFloats(llvm::StringRef name) const {
  const auto *a = attr(name);
  if (!a)
    return {};
  return std::vector<float>(a->floats().begin(), a->floats().end());
}

std::unique_ptr<Op> NodeContext::newOp(OpKind kind) {
  auto op = std::make_unique<Op>(kind);
  std::string name = node.name();
  if (name.empty() && node.output_size())
    name = node.output(0);
  op->attrs["name"] = name;
  return op;
}

/// True when \p op reshapes non-float data that stays in the model (an
/// initializer or a weight input), held in \p s.
static bool reshapesKeptData(const Op &op, const Slot &s) {
  return op.kind == OpKind::Reshape && op.operands.size() == 1 &&
         !isFloat(s.type.elem) &&
         (!s.initializer.empty() || !s.weightInput.empty());
}

/// The fold of \p op, a reshape of the kept data in \p s: the same bytes
/// under the result's type; std::nullopt when the data is fed at run time.
static std::optional<std::vector<Slot>> reshapeKeptData(const Op &op,
                                                        const Slot &s) {
  Slot r;
  r.type = op.results[0].value->type;
  r.initializer = s.initializer;
  r.weightInput = s.weightInput;
  r.computed = s.computed;
  if (s.constant) {
    r.constant = *s.constant;
    r.constant->type = r.type;
  }
  if (!r.weightInput.empty())
    return std::nullopt; // fed at run time: keep the reshape
  return std::vector<Slot>{std::move(r)};
}

/// True when operand slot \p s lets \p op fold: its values are known, and
/// folding neither computes on a parameter nor moves a weight (\p movesData:
/// \p op moves or converts data).
static bool foldsOperand(const Op &op, const Slot &s, bool movesData) {
  if (!s.constant)
    return false;
  // A computation on a parameter stays in the model, so that training
  // updates the parameter and it counts once (weight norm's g and v, not
  // the weight they make); a mask or shape computed from it folds.
  if (isTrainableLeaf(s) && llvm::any_of(op.results, [](const Result &r) {
        return isFloat(r.value->type.elem);
      }))
    return false;
  // A weight (a float leaf: initializer, fill, Constant) is never moved
  // into a new tensor: a gathered row or a transposed copy would lose or
  // duplicate parameters. Computing on it makes a new constant anyway, and
  // scalars cannot be weights.
  if (movesData && !s.computed && isFloat(s.type.elem) && s.type.numel() >= 2)
    return false;
  return true;
}

/// Slots holding the folded \p results, each marked \p computed.
static std::vector<Slot> foldedSlots(std::vector<ConstTensor> &results,
                                     bool computed) {
  std::vector<Slot> out;
  for (auto &c : results) {
    Slot s;
    s.type = c.type;
    s.constant = std::move(c);
    s.computed = computed;
    out.push_back(std::move(s));
  }
  return out;
}

std::optional<std::vector<Slot>> Importer::tryFold(const Op &op) {
  llvm::SmallVector<const ConstTensor *, 4> inputs;
  bool computed = false;
  OpFamily family = opKindFamily(op.kind);
  bool movesData = family == OpFamily::Layout || family == OpFamily::Lookup ||
                   op.kind == OpKind::Cast;
  for (const Operand &o : op.operands) {
    auto it = slotOf.find(o.value);
    if (it == slotOf.end())
      return std::nullopt;
    Slot *s = it->second;
    // A reshape of data that stays in the model: the same bytes, a new type.
    if (reshapesKeptData(op, *s))
      return reshapeKeptData(op, *s);
    if (!foldsOperand(op, *s, movesData))
      return std::nullopt;
    inputs.push_back(&*s->constant);
    computed |= s->computed;
  }
  auto results = foldOp(op, inputs);
  if (!results)
    return std::nullopt;
  OpFamily fam = family;
  // Moving or converting a weight keeps it a weight; computing on constants,
  // or turning integers (positions, masks) into floats, does not.
  bool castFromInt = op.kind == OpKind::Cast && !isFloat(inputs[0]->type.elem);
  computed |=
      castFromInt || !(fam == OpFamily::Layout || op.kind == OpKind::Cast ||
                       fam == OpFamily::Lookup);
  return foldedSlots(*results, computed);
}

llvm::Error NodeContext::finish(std::unique_ptr<Op> op,
                                std::optional<unsigned> bound) {
  unsigned outputs = bound ? *bound : unsigned(op->results.size());
  if (outputs > unsigned(node.output_size()))
    return error("internal: more results than outputs");
  // --batch on a static export: integer constants laid out over the
  // exported batch (an index grid, token type ids) that meet computed data
  // would silently drop or mix the new batch's rows.
  if (auto rb = rebatch(); rb && rb->first > 1 && rb->first != rb->second) {
    bool data = llvm::any_of(op->operands, [](const Operand &o) {
      return o.value->kind != Value::Kind::Global;
    });
    for (unsigned i = 0; i < op->operands.size() && data; ++i) {
      const Value *v = op->operands[i].value;
      if (v->kind == Value::Kind::Global && !isFloat(v->type.elem) &&
          v->type.rank() >= 2 && v->type.shape[0] == rb->first)
        return error("reads the constant '" + v->name + "' of shape " +
                     shapeStr(v->type.shape) +
                     ", laid out over the exported batch " +
                     llvm::Twine(rb->first));
    }
  }
  for (const Result &r : op->results)
    if (auto problem = tooManyElements(r.value->type.shape))
      return error("the result's " + *problem);
  // An empty constant (a shape's tail sliced off) folds; an empty tensor
  // computed at run time is not supported.
  if (auto folded = imp.tryFold(*op)) {
    for (size_t i = 0; i < folded->size() && i < outputs; ++i)
      if (!node.output(i).empty())
        imp.slots[node.output(i)] = std::move((*folded)[i]);
    return llvm::Error::success();
  }
  for (const Result &r : op->results)
    if (llvm::is_contained(r.value->type.shape, 0))
      return error("the result has shape " + shapeStr(r.value->type.shape) +
                   "; paxc does not support empty tensors");
  for (size_t i = 0; i < outputs; ++i) {
    if (node.output(i).empty())
      continue;
    Slot s;
    s.type = op->results[i].value->type;
    s.value = op->results[i].value.get();
    Slot &stored = imp.slots[node.output(i)] = std::move(s);
    imp.slotOf[stored.value] = &stored;
  }
  imp.module->main.ops.push_back(std::move(op));
  return llvm::Error::success();
}

Value *NodeContext::rngStep() {
  if (!imp.rngStep) {
    imp.rngStep =
        imp.module->addGlobal(kRngStepName, TensorType{DType::I64, {}});
    imp.rngStep->source = DataSource::Fill;
    imp.rngStep->fill = 0;
  }
  return &imp.rngStep->value;
}

uint64_t NodeContext::seed() const { return imp.options.seed; }

void NodeContext::setConstant(unsigned i, ConstTensor t) {
  Slot s;
  s.type = t.type;
  s.constant = std::move(t);
  s.standIn = imp.weightStandIns.count(node.output(i)) != 0;
  imp.slots[node.output(i)] = std::move(s);
}

Value *NodeContext::emit(std::unique_ptr<Op> op) {
  Value *first = op->results.empty() ? nullptr : op->results[0].value.get();
  imp.module->main.ops.push_back(std::move(op));
  return first;
}

void NodeContext::forward(unsigned i, unsigned input) {
  Slot copy = *imp.slot(node.input(input));
  // The same data under another name: share the IR value if there is one.
  imp.slots[node.output(i)] = std::move(copy);
}

llvm::Error NodeContext::error(const llvm::Twine &msg) const {
  return llvm::createStringError(imp.path + ": " + imp.nodeLabel(node, index) +
                                 ": " + msg);
}

void NodeContext::warn(const llvm::Twine &msg) const {
  imp.warnings.push_back(imp.path + ": " + imp.nodeLabel(node, index) + ": " +
                         msg.str());
}

llvm::Expected<unsigned> NodeContext::axis(int64_t a, unsigned rank,
                                           llvm::StringRef what) const {
  int64_t r = int64_t(rank);
  if (a < -r || a >= r)
    return error(what + " " + llvm::Twine(a) + " is out of range for rank " +
                 llvm::Twine(rank));
  return unsigned(a < 0 ? a + r : a);
}

} // namespace pax
