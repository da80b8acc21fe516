//===- EmitPlan.cpp - A module as per-device programs ---------------------===//
#include "codegen/EmitPlan.h"

#include "codegen/CarryUpdates.h"
#include "codegen/EmitCompute.h"
#include "codegen/plan/PlanFile.h"
#include "ir/Printer.h"
#include "ir/Reach.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <algorithm>
#include <map>

namespace pax {

namespace {

/// \p box as the plan's exchanges record it.
static void toProto(const Box &box, plan::Box &out) {
  if (box.empty) {
    out.set_empty(true);
    return;
  }
  for (size_t i = 0; i < box.lo.size(); ++i) {
    out.add_lo(box.lo[i]);
    out.add_size(box.size[i]);
  }
}

/// Rebases \p access (one of \p op's maps, emitted for the whole space)
/// onto block \p b and a buffer holding \p box.
static llvm::Error rebase(const Op &op, const IterBlock &b, const Box &box,
                          const TensorType &t, plan::Access &access) {
  for (int i = 0; i < access.exprs_size(); ++i) {
    plan::AccessExpr &e = *access.mutable_exprs(i);
    switch (e.kind()) {
    case plan::AccessExpr::AFFINE: {
      int64_t off = e.offset() + e.stride() * b.offset[e.dims(0)] - box.lo[i];
      if (e.dims_size() > 1)
        off += e.dilation() * b.offset[e.dims(1)];
      e.set_offset(off);
      break;
    }
    case plan::AccessExpr::GROUP: {
      int64_t off = e.offset() - box.lo[i],
              scale = std::max<int64_t>(1, e.whole());
      for (int k = e.dims_size() - 1; k >= 0; --k) {
        off += b.offset[e.dims(k)] * scale;
        scale *= op.iters[e.dims(k)].extent;
      }
      e.set_offset(off);
      break;
    }
    case plan::AccessExpr::LOOKUP:
      if (box.lo[i] != b.offset[e.dims(0)])
        return llvm::createStringError(
            "op '" + op.name() + "': a lookup's table block starts at " +
            std::to_string(box.lo[i]) + ", its dim at " +
            std::to_string(b.offset[e.dims(0)]));
      break;
    case plan::AccessExpr::FULL:
      if (box.lo[i] != 0 || box.size[i] != t.shape[i])
        return llvm::createStringError("op '" + op.name() +
                                       "': a full access reads a block");
      break;
    default:
      break;
    }
  }
  return llvm::Error::success();
}

static plan::TensorInfo tensorInfo(llvm::StringRef name, const TensorType &t) {
  plan::TensorInfo info;
  info.set_name(name.str());
  info.set_dtype(toPlanDType(t.elem));
  for (int64_t d : t.shape)
    info.add_shape(d);
  return info;
}

static plan::Collective::Kind planKind(OpKind k) {
  switch (k) {
  case OpKind::AllReduce:
    return plan::Collective::ALL_REDUCE;
  case OpKind::ReduceScatter:
    return plan::Collective::REDUCE_SCATTER;
  case OpKind::AllToAll:
    return plan::Collective::ALL_TO_ALL;
  case OpKind::AllGather:
    return plan::Collective::ALL_GATHER;
  case OpKind::Broadcast:
    return plan::Collective::BROADCAST;
  case OpKind::HaloExchange:
    return plan::Collective::HALO_EXCHANGE;
  default:
    return plan::Collective::SEND_RECV;
  }
}

/// Attribute \p key of \p op when it holds a \p T.
template <typename T>
static const T *attrOf(const Op &op, llvm::StringRef key) {
  auto it = op.attrs.find(key);
  return it == op.attrs.end() ? nullptr : std::get_if<T>(&it->second);
}

static std::vector<int64_t> intsAttr(const Op &op, llvm::StringRef key) {
  auto it = op.attrs.find(key);
  if (it == op.attrs.end())
    return {};
  if (const auto *l = std::get_if<std::vector<int64_t>>(&it->second))
    return *l;
  if (const auto *i = std::get_if<int64_t>(&it->second))
    return {*i};
  return {};
}

/// Builds the programs of one plan.
class Emitter {
public:
  Emitter(const Module &m, plan::Plan &p, int64_t devices, bool reference)
      : m(m), p(p), n(devices), reference(reference) {}

  llvm::Error run(std::vector<plan::DeviceProgram> &programs);
  /// The probe program (emitProbePlan) of \p blocks on device 0.
  llvm::Error probe(llvm::ArrayRef<ProbeBlock> blocks,
                    plan::DeviceProgram &program);

private:
  /// Binds each returned value's blocks as outputs of the programs that
  /// hold them (the first holder of a block owns it).
  llvm::Error bindReturns(std::vector<plan::DeviceProgram> &programs);
  struct Held {
    uint32_t buffer;
    Box box;
  };
  uint32_t newBuffer(int64_t d, const Value *v, const Box &box,
                     bool persistent = false);
  llvm::Expected<uint32_t> leaf(int64_t d, const Value *v, const Box &box);
  /// \p op on its devices; with \p probe, device 0's block of that
  /// configuration alone, reading filled buffers.
  llvm::Error
  emitCompute(const Op &op,
              const llvm::SmallVectorImpl<int64_t> *probe = nullptr);
  /// Where a compute op runs: its configuration (unsplit when it runs
  /// everywhere), its devices from device `at`, its split reduction dims.
  struct Placement {
    std::vector<int64_t> config;
    bool everywhere = false;
    int64_t devices = 1, at = 0;
    llvm::SmallVector<unsigned, 2> splitReductions;
  };
  llvm::Expected<Placement>
  placementOf(const Op &op, const llvm::SmallVectorImpl<int64_t> *probe) const;
  /// Device \p d's block \p b of \p op (the shared cost key and flops in
  /// \p proto) as a compute instruction.
  llvm::Error emitBlock(const Op &op, const Placement &pl, int64_t d,
                        bool probe, plan::Compute proto);
  /// The buffer and box operand \p o of block \p b reads on device \p d:
  /// zeros for a bias on a later block of a split reduction, a fill in a
  /// probe, a weight's or input's load, or the block the device holds.
  llvm::Expected<std::pair<uint32_t, Box>>
  operandBuffer(const Op &op, const Operand &o, int64_t d, const IterBlock &b,
                bool laterBlock, bool probe,
                llvm::ArrayRef<unsigned> splitReductions);
  Box resultBox(const Op &op, const Result &r, const IterBlock &b,
                llvm::ArrayRef<int64_t> config) const;
  uint32_t fillBuffer(int64_t d, const Value *v, const Box &box, double value);
  llvm::Error emitCollective(const Op &op);
  /// A collective's placement: its layout, groups and halo checked, the
  /// devices of its groups, and each device's box before and after it.
  struct CollectiveSpan {
    const LayoutAttr *layout;
    const GroupsAttr *groups;
    int64_t lo, go, devs;
    std::vector<Box> before, after;
  };
  llvm::Expected<CollectiveSpan> collectiveSpan(const Op &op);
  llvm::Error emitLocalSlice(const Op &op, const CollectiveSpan &c);
  void emitExchange(const Op &op, const CollectiveSpan &c);
  llvm::Error emitKept(const Op &op);
  uint32_t group(std::vector<uint32_t> devices);
  std::string valueName(const Value *v) const;

  const Module &m;
  plan::Plan &p;
  int64_t n;
  bool reference;
  bool steps = m.isTrainingStep(); ///< a training step's program
  std::vector<plan::DeviceProgram> *progs = nullptr;
  std::vector<llvm::DenseMap<const Value *, Held>> held;
  /// A probe's blocks of ops computed from constants: their results are
  /// held, and read as they are.
  llvm::DenseSet<const Op *> probeConstants;
  std::vector<
      std::map<std::pair<const Value *, std::vector<int64_t>>, uint32_t>>
      leaves;
  std::map<std::vector<uint32_t>, uint32_t> groups;
  llvm::DenseMap<const Value *, std::string> names;
};

std::string Emitter::valueName(const Value *v) const {
  if (!v->name.empty())
    return v->name;
  auto it = names.find(v);
  return it == names.end() ? "" : it->second;
}

uint32_t Emitter::newBuffer(int64_t d, const Value *v, const Box &box,
                            bool persistent) {
  plan::DeviceProgram &prog = (*progs)[d];
  plan::Buffer *b = prog.add_buffers();
  b->set_id(uint32_t(prog.buffers_size() - 1));
  b->set_dtype(toPlanDType(v->type.elem));
  b->set_name(valueName(v));
  b->set_persistent(persistent);
  if (box.empty) {
    b->add_shape(0);
  } else {
    for (size_t i = 0; i < box.size.size(); ++i) {
      b->add_shape(box.size[i]);
      b->add_origin(box.lo[i]);
    }
  }
  return b->id();
}

llvm::Expected<uint32_t> Emitter::leaf(int64_t d, const Value *v,
                                       const Box &box) {
  std::vector<int64_t> key(box.lo.begin(), box.lo.end());
  key.insert(key.end(), box.size.begin(), box.size.end());
  auto [it, fresh] = leaves[d].try_emplace({v, key}, 0);
  if (!fresh)
    return it->second;
  plan::DeviceProgram &prog = (*progs)[d];
  if (v->kind == Value::Kind::Argument) {
    uint32_t buf = newBuffer(d, v, box);
    unsigned index = 0;
    while (m.main.args[index].get() != v)
      ++index;
    plan::Binding *b = prog.add_inputs();
    b->set_index(index);
    b->set_buffer(buf);
    for (int64_t lo : box.lo)
      b->add_offset(lo);
    return it->second = buf;
  }
  const Global &g = *v->global;
  // Weights live for the whole program, so a repeated run finds them
  // still there; a training step loads its changing weights every step,
  // so each lives from its load to its last reader.
  uint32_t buf = newBuffer(d, v, box, /*persistent=*/!steps);
  plan::LoadWeight &load = *prog.add_instructions()->mutable_load();
  load.set_tensor(g.source == DataSource::Initializer ||
                          g.source == DataSource::Input
                      ? g.ref
                      : g.name());
  switch (g.source) {
  case DataSource::Initializer:
    load.set_source(plan::LoadWeight::INITIALIZER);
    break;
  case DataSource::Input:
    load.set_source(plan::LoadWeight::INPUT);
    break;
  case DataSource::Fill:
    load.set_source(plan::LoadWeight::FILL);
    break;
  case DataSource::Dense:
    load.set_source(plan::LoadWeight::DENSE);
    break;
  }
  for (int64_t s : v->type.shape)
    load.add_global_shape(s);
  for (int64_t lo : box.lo)
    load.add_offset(lo);
  load.set_buffer(buf);
  load.set_fill(g.fill);
  if (g.source == DataSource::Dense)
    load.set_dense(std::string(g.bytes.begin(), g.bytes.end()));
  return it->second = buf;
}

uint32_t Emitter::group(std::vector<uint32_t> devices) {
  auto [it, fresh] = groups.try_emplace(devices, uint32_t(p.groups_size()));
  if (fresh) {
    plan::Group *g = p.add_groups();
    g->set_id(it->second);
    for (uint32_t d : devices)
      g->add_devices(d);
  }
  return it->second;
}

uint32_t Emitter::fillBuffer(int64_t d, const Value *v, const Box &box,
                             double value) {
  uint32_t buf = newBuffer(d, v, box);
  plan::LoadWeight &load = *(*progs)[d].add_instructions()->mutable_load();
  load.set_tensor(value == 0 ? "(zero)" : "(fill)");
  load.set_source(plan::LoadWeight::FILL);
  for (int64_t s : v->type.shape)
    load.add_global_shape(s);
  for (int64_t lo : box.lo)
    load.add_offset(lo);
  load.set_buffer(buf);
  load.set_fill(value);
  return buf;
}

/// The devices that each compute a part of \p op in \p config (a replica
/// dim's devices compute it whole; an op computed everywhere, whole).
static int64_t splitDevices(const Op &op, llvm::ArrayRef<int64_t> config,
                            bool everywhere) {
  int64_t devs = 1;
  for (size_t d = 0; d < config.size() && !everywhere; ++d)
    if (!op.isReplicaDim(unsigned(d)))
      devs *= config[d];
  return devs;
}

llvm::Expected<Emitter::Placement>
Emitter::placementOf(const Op &op,
                     const llvm::SmallVectorImpl<int64_t> *probe) const {
  Placement pl;
  pl.config.assign(op.iters.size(), 1);
  pl.everywhere = !probe && (reference || !intsAttr(op, "everywhere").empty());
  if (probe) {
    pl.config.assign(probe->begin(), probe->end());
  } else if (!pl.everywhere) {
    auto c = intsAttr(op, "config");
    if (!c.empty())
      pl.config = c;
  }
  for (int64_t f : pl.config)
    pl.devices *= f;
  if (pl.everywhere) {
    pl.devices = n;
    pl.config.assign(op.iters.size(), 1); // each device's block is whole
  }
  // A probe times device 0's block.
  if (probe)
    pl.devices = 1;
  // An op placed at a device offset runs on devices at .. at + devs - 1.
  pl.at = probe || pl.everywhere ? 0 : op.intAttr("offset", 0);
  if (pl.at < 0 || pl.at + pl.devices > n)
    return llvm::createStringError(
        "op '" + op.name() + "': placed at device " + std::to_string(pl.at) +
        " it needs " + std::to_string(pl.devices) +
        " device(s) of the plan's " + std::to_string(n));
  // A contraction split along a reduction leaves partial sums that are
  // added up afterwards: a bias (an operand no split reduction indexes)
  // is added on the first block of the reduction only.
  for (size_t j = 0; j < op.iters.size(); ++j)
    if (pl.config[j] > 1 && op.iters[j].kind == IterKind::Reduction)
      pl.splitReductions.push_back(unsigned(j));
  return pl;
}

llvm::Expected<std::pair<uint32_t, Box>>
Emitter::operandBuffer(const Op &op, const Operand &o, int64_t d,
                       const IterBlock &b, bool laterBlock, bool probe,
                       llvm::ArrayRef<unsigned> splitReductions) {
  Box box = reachedBox(op, o.map, o.value->type, b);
  if (laterBlock && llvm::none_of(o.map, [&](const AccessExpr &e) {
        return llvm::any_of(splitReductions,
                            [&](unsigned j) { return e.uses(j); });
      }))
    return std::pair{fillBuffer(d, o.value, box, 0), box};
  bool constant = o.value->kind == Value::Kind::Global &&
                  !o.value->global->isParameter &&
                  o.value->global->source != DataSource::Input;
  bool computedFromConstants = o.value->kind == Value::Kind::Result &&
                               probeConstants.contains(o.value->def);
  if (probe && !constant && !computedFromConstants)
    // Activations, weights and inputs: floats an unremarkable value (no
    // fast path of pow or exp takes it), integers zero (a valid index into
    // any table). Constants (exponents, scales, masks) are the model's own,
    // and so are the values computed from them.
    return std::pair{
        fillBuffer(d, o.value, box, isFloat(o.value->type.elem) ? 0.731 : 0),
        box};
  if (o.value->kind != Value::Kind::Result) {
    auto buf = leaf(d, o.value, box);
    if (!buf)
      return buf.takeError();
    return std::pair{*buf, box};
  }
  auto it = held[d].find(o.value);
  if (it == held[d].end())
    return llvm::createStringError("internal: op '" + op.name() +
                                   "' on device " + std::to_string(d) +
                                   " reads a value the device does not hold");
  // What the op reads must be what the moves left on the device.
  bool reads = llvm::all_of(box.size, [](int64_t s) { return s > 0; });
  if (reads && !it->second.box.contains(box))
    return llvm::createStringError("internal: op '" + op.name() +
                                   "' on device " + std::to_string(d) +
                                   " reads past the block it holds");
  return std::pair{it->second.buffer, it->second.box};
}

Box Emitter::resultBox(const Op &op, const Result &r, const IterBlock &b,
                       llvm::ArrayRef<int64_t> config) const {
  Box box = reachedBox(op, r.map, r.value->type, b);
  // scatter_add zeroes its whole result: a dim written through a window
  // its points never finish (a strided convolution's input gradient, whose
  // last rows no window reads) is still held whole.
  if (op.kind == OpKind::ScatterAdd && !box.empty)
    for (size_t i = 0; i < r.map.size(); ++i) {
      const AccessExpr &e = r.map[i];
      bool unsplit =
          llvm::all_of(e.dims, [&](unsigned j) { return config[j] == 1; });
      if (e.kind == AccessExpr::Kind::Affine && !e.isPlainDim() && unsplit) {
        box.lo[i] = 0;
        box.size[i] = r.value->type.shape[i];
      }
    }
  return box;
}

llvm::Error Emitter::emitBlock(const Op &op, const Placement &pl, int64_t d,
                               bool probe, plan::Compute proto) {
  IterBlock b = iterBlock(op, pl.config, d - pl.at);
  llvm::SmallVector<uint32_t, 4> ins, outs;
  llvm::SmallVector<Box, 4> inBoxes, outBoxes;
  bool laterBlock = opKindFamily(op.kind) == OpFamily::Contraction &&
                    llvm::any_of(pl.splitReductions,
                                 [&](unsigned j) { return b.offset[j] != 0; });
  for (const Operand &o : op.operands) {
    auto in = operandBuffer(op, o, d, b, laterBlock, probe, pl.splitReductions);
    if (!in)
      return in.takeError();
    ins.push_back(in->first);
    inBoxes.push_back(in->second);
  }
  for (const Result &r : op.results) {
    outBoxes.push_back(resultBox(op, r, b, pl.config));
    outs.push_back(newBuffer(d, r.value.get(), outBoxes.back()));
  }
  plan::Compute c = pax::emitCompute(op, ins, outs);
  c.set_cost_key(proto.cost_key());
  c.set_flops(proto.flops());
  if (op.sources > 1)
    c.set_source_ops(op.sources);
  for (size_t j = 0; j < op.iters.size(); ++j) {
    plan::IterDim &it = *c.mutable_iters(int(j));
    it.set_extent(b.extent[j]);
    it.set_global_offset(b.offset[j]);
    it.set_global_extent(op.iters[j].extent);
  }
  for (size_t k = 0; k < op.operands.size(); ++k)
    if (auto err = rebase(op, b, inBoxes[k], op.operands[k].value->type,
                          *c.mutable_inputs(int(k))))
      return err;
  for (size_t k = 0; k < op.results.size(); ++k) {
    if (auto err = rebase(op, b, outBoxes[k], op.results[k].value->type,
                          *c.mutable_outputs(int(k))))
      return err;
    if (!probe || probeConstants.contains(&op))
      held[d][op.results[k].value.get()] = {outs[k], outBoxes[k]};
  }
  *(*progs)[d].add_instructions()->mutable_compute() = std::move(c);
  return llvm::Error::success();
}

llvm::Error Emitter::emitCompute(const Op &op,
                                 const llvm::SmallVectorImpl<int64_t> *probe) {
  auto pl = placementOf(op, probe);
  if (!pl)
    return pl.takeError();
  // What every block shares: its measured-cost key and its flops.
  plan::Compute shared;
  shared.set_cost_key(opBlockKey(op, localExtents(op, pl->config)));
  shared.set_flops(op.flops() /
                   double(splitDevices(op, pl->config, pl->everywhere)));
  for (int64_t d = pl->at; d < pl->at + pl->devices; ++d)
    if (auto err = emitBlock(op, *pl, d, probe != nullptr, shared))
      return err;
  return llvm::Error::success();
}

llvm::Error Emitter::emitCollective(const Op &op) {
  const Value *in = op.operands[0].value, *out = op.results[0].value.get();
  if (in->kind == Value::Kind::Global)
    return emitKept(op);
  if (reference) { // the identity on one device
    // A copy: inserting `out` may grow the map and move `in`'s entry.
    Held h = held[0][in];
    held[0][out] = std::move(h);
    return llvm::Error::success();
  }
  auto span = collectiveSpan(op);
  if (!span)
    return span.takeError();
  if (op.kind == OpKind::LocalSlice)
    return emitLocalSlice(op, *span);
  emitExchange(op, *span);
  return llvm::Error::success();
}

llvm::Expected<Emitter::CollectiveSpan> Emitter::collectiveSpan(const Op &op) {
  const Value *in = op.operands[0].value;
  const TensorType &t = in->type;
  CollectiveSpan c{attrOf<LayoutAttr>(op, "layout"),
                   attrOf<GroupsAttr>(op, "groups"),
                   0,
                   0,
                   0,
                   {},
                   {}};
  std::vector<int64_t> halo = intsAttr(op, "halo");
  auto bad = [&](const llvm::Twine &msg) {
    return llvm::createStringError("collective '" + op.name() + "': " + msg);
  };
  if (!c.layout || !c.groups || halo.size() != 2 * t.rank())
    return bad("needs a layout, groups and halo (2 ints per dim)");
  if (std::string why = c.groups->check(); !why.empty())
    return bad(why);
  // The layout numbers devices from `offset`, the groups from
  // `group_offset` (ops placed apart).
  c.lo = op.intAttr("offset", 0), c.go = op.intAttr("group_offset", 0);
  c.devs = c.groups->devices();
  if (c.go < 0 || c.lo < 0 || c.go + c.devs > n ||
      c.lo + c.layout->devices() > n)
    return bad("runs on " + llvm::Twine(c.devs) + " devices from device " +
               llvm::Twine(c.go) + " (its layout from " + llvm::Twine(c.lo) +
               "), the plan has " + llvm::Twine(n));
  // Boxes before and after, per device.
  c.before.assign(size_t(n), Box::none(t.rank()));
  c.after = c.before;
  for (int64_t d = c.go; d < c.go + c.devs; ++d) {
    if (auto it = held[d].find(in); it != held[d].end())
      c.before[d] = it->second.box;
    if (d < c.lo)
      continue;
    auto block = c.layout->block(t.shape, d - c.lo);
    if (!block)
      return bad(llvm::toString(block.takeError()) + " of " + t.str());
    if (!block->held)
      continue;
    Box box{{block->lo.begin(), block->lo.end()},
            {block->size.begin(), block->size.end()},
            false};
    for (size_t i = 0; i < t.rank(); ++i) { // widened by the halo
      int64_t lo = std::max<int64_t>(0, box.lo[i] - halo[2 * i]);
      int64_t hi =
          std::min(t.shape[i], box.lo[i] + box.size[i] + halo[2 * i + 1]);
      box.lo[i] = lo;
      box.size[i] = hi - lo;
    }
    c.after[d] = box;
  }
  return c;
}

/// Each device's slice of the block it holds (a kept weight's blocks, a
/// move that only narrows).
llvm::Error Emitter::emitLocalSlice(const Op &op, const CollectiveSpan &c) {
  const Value *in = op.operands[0].value, *out = op.results[0].value.get();
  for (int64_t d = 0; d < n; ++d) {
    if (c.after[d].empty)
      continue;
    if (!c.before[d].contains(c.after[d]))
      return llvm::createStringError("collective '" + op.name() + "': device " +
                                     llvm::Twine(d) +
                                     " slices a block it does not hold");
    uint32_t o = newBuffer(d, out, c.after[d]);
    plan::Slice &s = *(*progs)[d].add_instructions()->mutable_slice();
    s.set_input(held[d][in].buffer);
    s.set_output(o);
    for (size_t i = 0; i < in->type.rank(); ++i)
      s.add_offset(c.after[d].lo[i] - c.before[d].lo[i]);
    held[d][out] = {o, c.after[d]};
  }
  return llvm::Error::success();
}

/// The plan's exchange of \p op (the boxes before and after on every
/// device) and the collective instruction of each device of its groups.
void Emitter::emitExchange(const Op &op, const CollectiveSpan &c) {
  const Value *in = op.operands[0].value, *out = op.results[0].value.get();
  plan::Collective::Kind kind = planKind(op.kind);
  uint32_t exchange = uint32_t(p.exchanges_size());
  plan::Exchange &x = *p.add_exchanges();
  x.set_kind(kind);
  x.set_reduce(op.kind == OpKind::AllReduce ||
               op.kind == OpKind::ReduceScatter);
  x.set_predicted_bytes(op.intAttr("bytes", 0));
  x.set_what(op.name().str());
  for (int64_t d = 0; d < n; ++d) {
    toProto(c.before[d], *x.add_in());
    toProto(c.after[d], *x.add_out());
  }
  // A group: the devices that differ from each other only in the digits
  // the collective runs across.
  std::vector<uint32_t> groupOf(static_cast<size_t>(c.devs), 0);
  for (const std::vector<int64_t> &members : c.groups->groups()) {
    std::vector<uint32_t> ids;
    for (int64_t d : members)
      ids.push_back(uint32_t(c.go + d));
    uint32_t g = group(ids);
    for (int64_t d : members)
      groupOf[size_t(d)] = g;
  }
  for (int64_t d = c.go; d < c.go + c.devs; ++d) {
    auto it = held[d].find(in);
    uint32_t i = it != held[d].end()
                     ? it->second.buffer
                     : newBuffer(d, in, Box::none(in->type.rank()));
    uint32_t o = newBuffer(d, out, c.after[d]);
    plan::Collective &ci =
        *(*progs)[d].add_instructions()->mutable_collective();
    ci.set_kind(kind);
    ci.set_group(groupOf[size_t(d - c.go)]);
    ci.set_exchange(exchange);
    ci.set_input(i);
    ci.set_output(o);
    if (!c.after[d].empty)
      held[d][out] = {o, c.after[d]};
  }
}

/// A slice of a global a training step updates: each device loads the block
/// the layout gives it (the block it keeps between steps).
llvm::Error Emitter::emitKept(const Op &op) {
  const Value *in = op.operands[0].value, *out = op.results[0].value.get();
  const TensorType &t = in->type;
  const auto *layout = attrOf<LayoutAttr>(op, "layout");
  if (op.kind != OpKind::LocalSlice || !layout)
    return llvm::createStringError("collective '" + op.name() +
                                   "': only a local slice with a layout may "
                                   "read a global");
  int64_t lo = reference ? 0 : op.intAttr("offset", 0);
  for (int64_t d = lo;
       d < (reference ? 1 : std::min(n, lo + layout->devices())); ++d) {
    Box box = Box::whole(t);
    if (!reference) {
      auto block = layout->block(t.shape, d - lo);
      if (!block)
        return llvm::createStringError("collective '" + op.name() + "': " +
                                       llvm::toString(block.takeError()));
      if (!block->held)
        continue;
      box = Box{{block->lo.begin(), block->lo.end()},
                {block->size.begin(), block->size.end()},
                false};
    }
    auto buf = leaf(d, in, box);
    if (!buf)
      return buf.takeError();
    held[d][out] = {*buf, box};
  }
  return llvm::Error::success();
}

/// Buffers up to which placeBySize's quadratic packing runs.
static constexpr size_t kGreedyBuffers = 20000;

/// 0 .. n-1 stably sorted by \p less.
template <typename Less>
static std::vector<size_t> orderedBy(size_t n, Less less) {
  std::vector<size_t> order(n);
  for (size_t b = 0; b < n; ++b)
    order[b] = b;
  std::stable_sort(order.begin(), order.end(), less);
  return order;
}

/// The lowest offset where \p size bytes fit between \p taken, the
/// (offset, end) ranges of the buffers that may not overlap, sorted.
static int64_t lowestGap(llvm::ArrayRef<std::pair<int64_t, int64_t>> taken,
                         int64_t size) {
  int64_t at = 0;
  for (auto [lo, hi] : taken) {
    if (lo - at >= size)
      break;
    at = std::max(at, hi);
  }
  return at;
}

/// Per buffer, the buffers it must lie apart from whatever their lifetimes
/// (both ways).
using Apart = std::vector<llvm::SmallVector<uint32_t, 2>>;

/// Offsets by size, largest first: each buffer at the lowest offset clear of
/// the placed buffers whose lifetimes [first, last] meet its own, or that it
/// must lie \p apart from (greedy by size, as TFLite's arena planner).
/// Returns the arena's bytes.
static int64_t placeBySize(plan::DeviceProgram &prog,
                           const std::vector<int64_t> &first,
                           const std::vector<int64_t> &last,
                           const std::vector<int64_t> &size,
                           const Apart &apart) {
  size_t nb = size.size();
  std::vector<size_t> order = orderedBy(nb, [&](size_t a, size_t b) {
    return size[a] != size[b] ? size[a] > size[b] : first[a] < first[b];
  });
  std::vector<int64_t> offset(nb, 0);
  std::vector<size_t> placed;
  std::vector<std::pair<int64_t, int64_t>> clash; // (offset, end)
  int64_t peak = 0;
  for (size_t b : order) {
    clash.clear();
    for (size_t p : placed)
      if ((first[p] <= last[b] && first[b] <= last[p]) ||
          llvm::is_contained(apart[b], uint32_t(p)))
        clash.push_back({offset[p], offset[p] + size[p]});
    llvm::sort(clash);
    int64_t at = lowestGap(clash, size[b]);
    offset[b] = at;
    placed.push_back(b);
    prog.mutable_buffers(int(b))->set_offset(at);
    peak = std::max(peak, at + size[b]);
  }
  return peak;
}

/// Offsets first-fit in order of first use (plans too large for
/// placeBySize). Returns the arena's bytes.
static int64_t placeInOrder(plan::DeviceProgram &prog,
                            const std::vector<int64_t> &first,
                            const std::vector<int64_t> &last,
                            const std::vector<int64_t> &size) {
  std::vector<size_t> order = orderedBy(
      size.size(), [&](size_t a, size_t b) { return first[a] < first[b]; });
  // Live buffers: (offset, end, last use).
  std::vector<std::tuple<int64_t, int64_t, int64_t>> live;
  std::vector<std::pair<int64_t, int64_t>> clash; // (offset, end)
  int64_t peak = 0;
  for (size_t b : order) {
    llvm::erase_if(live, [&](auto &l) { return std::get<2>(l) < first[b]; });
    clash.clear();
    for (auto &[off, end, lu] : live)
      clash.push_back({off, end});
    llvm::sort(clash);
    int64_t at = lowestGap(clash, size[b]);
    live.push_back({at, at + size[b], last[b]});
    prog.mutable_buffers(int(b))->set_offset(at);
    peak = std::max(peak, at + size[b]);
  }
  return peak;
}

/// The buffers a run of consecutive computes of one fused group reads from
/// before it, and those it leaves for after it: a kernel generated for the
/// run (runtime/GenerateKernels.h) reads the ones and writes the others at
/// once, so none of the others may take the bytes of one of the ones (which
/// their lifetimes alone allow when an input dies inside the run). Values
/// made and used up inside the run may share bytes with anything: such a
/// kernel keeps them in registers.
static Apart fusedRunsApart(const plan::DeviceProgram &prog,
                            const std::vector<int64_t> &first,
                            const std::vector<int64_t> &last) {
  Apart apart(first.size());
  auto fusedAt = [&](int i) -> llvm::StringRef {
    const plan::Instruction &inst = prog.instructions(i);
    return inst.has_compute() ? llvm::StringRef(inst.compute().fused()) : "";
  };
  int end = prog.instructions_size();
  for (int s = 0; s < end;) {
    llvm::StringRef g = fusedAt(s);
    int e = s + 1;
    while (!g.empty() && e < end && fusedAt(e) == g)
      ++e;
    llvm::SmallVector<uint32_t, 8> ins, outs;
    for (int i = s; e - s > 1 && i < e; ++i) {
      const plan::Compute &c = prog.instructions(i).compute();
      for (const plan::Access &a :
           llvm::concat<const plan::Access>(c.inputs(), c.outputs())) {
        uint32_t b = a.buffer();
        auto &side = first[b] < s ? ins : last[b] >= e ? outs : ins;
        if ((first[b] < s || last[b] >= e) && !llvm::is_contained(side, b))
          side.push_back(b);
      }
    }
    for (uint32_t o : outs)
      for (uint32_t i : ins)
        if (o != i && !llvm::is_contained(apart[o], i)) {
          apart[o].push_back(i);
          apart[i].push_back(o);
        }
    s = e;
  }
  return apart;
}

/// Moves the weight loads between the computes of a fused group (a norm's
/// scale, an exponent) before the group's first compute, so that its
/// computes are consecutive instructions, as a generated kernel replaces
/// them. A load reads nothing the program writes, so it may come earlier.
static void hoistLoadsOutOfFusedRuns(plan::DeviceProgram &prog) {
  auto *insts = prog.mutable_instructions();
  auto fusedAt = [&](int i) -> llvm::StringRef {
    const plan::Instruction &inst = insts->Get(i);
    return inst.has_compute() ? llvm::StringRef(inst.compute().fused()) : "";
  };
  int n = insts->size();
  for (int s = 0; s < n; ++s) {
    llvm::StringRef g = fusedAt(s);
    if (g.empty())
      continue;
    // The group's last compute with only loads and its computes before it.
    int e = s, i = s + 1;
    for (; i < n && (insts->Get(i).has_load() || fusedAt(i) == g); ++i)
      if (fusedAt(i) == g)
        e = i;
    std::stable_partition(
        insts->pointer_begin() + s, insts->pointer_begin() + e + 1,
        [](const plan::Instruction *inst) { return inst->has_load(); });
    s = e;
  }
}

/// Liveness of every buffer, then offsets in the device's arena; weights
/// live for the whole program.
static void planBuffers(plan::DeviceProgram &prog) {
  size_t nb = size_t(prog.buffers_size());
  int64_t end = prog.instructions_size();
  std::vector<int64_t> first(nb, end), last(nb, -1);
  auto def = [&](uint32_t b, int64_t i) { first[b] = std::min(first[b], i); };
  auto use = [&](uint32_t b, int64_t i) { last[b] = std::max(last[b], i); };
  for (int64_t i = 0; i < end; ++i) {
    const plan::Instruction &inst = prog.instructions(int(i));
    if (inst.has_load()) {
      def(inst.load().buffer(), i);
    } else if (inst.has_compute()) {
      for (const plan::Access &a : inst.compute().inputs())
        use(a.buffer(), i);
      for (const plan::Access &a : inst.compute().outputs())
        def(a.buffer(), i), use(a.buffer(), i);
    } else if (inst.has_collective()) {
      use(inst.collective().input(), i);
      def(inst.collective().input(), i);
      def(inst.collective().output(), i), use(inst.collective().output(), i);
    } else if (inst.has_slice()) {
      use(inst.slice().input(), i);
      def(inst.slice().output(), i), use(inst.slice().output(), i);
    }
  }
  // A buffer no instruction names (an update computed in place of its
  // weight, carryUpdates) takes no bytes.
  std::vector<bool> unused(nb);
  for (size_t b = 0; b < nb; ++b)
    unused[b] = first[b] == end && last[b] < 0;
  for (const plan::Binding &b : prog.inputs())
    first[b.buffer()] = -1, unused[b.buffer()] = false;
  for (const plan::Binding &b : prog.outputs())
    last[b.buffer()] = end, unused[b.buffer()] = false;
  for (size_t b = 0; b < nb; ++b) {
    if (prog.buffers(int(b)).persistent())
      first[b] = -1, last[b] = end;
    if (last[b] < first[b])
      last[b] = first[b];
  }
  Apart apart = fusedRunsApart(prog, first, last);
  auto bytes = [&](size_t b) {
    return (planBufferBytes(prog.buffers(int(b))) + 63) / 64 * 64;
  };
  std::vector<int64_t> size(nb);
  for (size_t b = 0; b < nb; ++b)
    size[b] = unused[b] ? 0 : bytes(b);
  prog.set_arena_bytes(nb <= kGreedyBuffers
                           ? placeBySize(prog, first, last, size, apart)
                           : placeInOrder(prog, first, last, size));
}

llvm::Error Emitter::bindReturns(std::vector<plan::DeviceProgram> &programs) {
  const Func &f = m.main;
  for (size_t i = 0; i < f.returns.size(); ++i) {
    const Value *v = f.returns[i];
    if (v->kind != Value::Kind::Result) {
      auto buf = leaf(0, v, Box::whole(v->type));
      if (!buf)
        return buf.takeError();
      plan::Binding *b = programs[0].add_outputs();
      b->set_index(uint32_t(i));
      b->set_buffer(*buf);
      b->set_owner(true);
      for (size_t k = 0; k < v->type.rank(); ++k)
        b->add_offset(0);
      continue;
    }
    // Each block once: the first device that holds it owns it; the other
    // copies are bound too (not owners), so that the runtime can check that
    // replicas agree and a device keeps the updated block it holds.
    std::vector<Box> owned;
    for (int64_t d = 0; d < n; ++d) {
      auto it = held[d].find(v);
      if (it == held[d].end())
        continue;
      bool owner = !llvm::is_contained(owned, it->second.box);
      if (owner)
        owned.push_back(it->second.box);
      plan::Binding *b = programs[d].add_outputs();
      b->set_index(uint32_t(i));
      b->set_buffer(it->second.buffer);
      b->set_owner(owner);
      for (int64_t lo : it->second.box.lo)
        b->add_offset(lo);
    }
  }
  return llvm::Error::success();
}

llvm::Error Emitter::run(std::vector<plan::DeviceProgram> &programs) {
  programs.assign(size_t(n), plan::DeviceProgram());
  progs = &programs;
  held.clear();
  held.resize(size_t(n));
  leaves.clear();
  leaves.resize(size_t(n));
  for (int64_t d = 0; d < n; ++d)
    programs[d].set_device(uint32_t(d));
  const Func &f = m.main;
  for (const auto &op : f.ops) {
    for (size_t r = 0; r < op->results.size(); ++r)
      names[op->results[r].value.get()] =
          op->name().str() +
          (op->results.size() > 1 ? ":" + std::to_string(r) : std::string());
    llvm::Error err = opKindFamily(op->kind) == OpFamily::Collective
                          ? emitCollective(*op)
                          : emitCompute(*op);
    if (err)
      return err;
  }
  if (auto err = bindReturns(programs))
    return err;
  for (plan::DeviceProgram &prog : programs) {
    if (steps)
      carryUpdates(prog, f.returnNames);
    hoistLoadsOutOfFusedRuns(prog);
    planBuffers(prog);
  }
  return llvm::Error::success();
}

llvm::Error Emitter::probe(llvm::ArrayRef<ProbeBlock> blocks,
                           plan::DeviceProgram &program) {
  std::vector<plan::DeviceProgram> programs(1);
  progs = &programs;
  held.clear();
  held.resize(1);
  leaves.clear();
  leaves.resize(1);
  probeConstants.clear();
  for (const ProbeBlock &b : blocks)
    if (b.constant)
      probeConstants.insert(b.op);
  for (const ProbeBlock &b : blocks) {
    if (b.config.size() != b.op->iters.size())
      return llvm::createStringError(
          "op '" + b.op->name() + "': a probe's configuration has " +
          std::to_string(b.config.size()) + " factors for " +
          std::to_string(b.op->iters.size()) + " iteration dims");
    for (size_t j = 0; j < b.config.size(); ++j)
      if (b.config[j] < 1 || b.op->iters[j].extent % b.config[j] != 0)
        return llvm::createStringError(
            "op '" + b.op->name() + "': a probe splits dim '" +
            b.op->iters[j].name + "' (" +
            std::to_string(b.op->iters[j].extent) + ") " +
            std::to_string(b.config[j]) + " ways");
    if (auto err = emitCompute(*b.op, &b.config))
      return err;
  }
  planBuffers(programs[0]);
  program = std::move(programs[0]);
  return llvm::Error::success();
}

} // namespace

llvm::Expected<plan::Plan> emitProbePlan(const Module &m,
                                         llvm::ArrayRef<ProbeBlock> blocks,
                                         llvm::StringRef source) {
  plan::Plan p;
  p.set_source(source.str());
  p.set_model(m.name + " (cost probe)");
  p.set_devices(1);
  p.set_devices_per_node(1);
  p.set_probe(true);
  plan::DeviceProgram prog;
  if (auto err = Emitter(m, p, 1, false).probe(blocks, prog))
    return err;
  prog.set_device(0);
  *p.add_programs() = std::move(prog);
  return p;
}

llvm::Expected<plan::Plan> emitPlan(const Module &m, const PlanOptions &o) {
  plan::Plan p;
  p.set_model(m.name);
  p.set_source(o.source);
  if (auto it = m.attrs.find("precision"); it != m.attrs.end())
    if (const auto *text = std::get_if<std::string>(&it->second))
      p.set_allow_tf32(*text == "tf32");
  auto attr = [&](llvm::StringRef key) -> int64_t {
    auto it = m.attrs.find(key);
    if (it == m.attrs.end())
      return 1;
    const auto *i = std::get_if<int64_t>(&it->second);
    return i ? *i : 1;
  };
  int64_t devices = attr("devices"), perNode = attr("devices_per_node");
  if (devices < 1)
    return llvm::createStringError("the module's devices attribute must be "
                                   "positive");
  p.set_devices(uint32_t(devices));
  p.set_devices_per_node(uint32_t(std::max<int64_t>(1, perNode)));
  p.set_predicted_step_s(o.predictedStepSeconds);
  p.set_simulated_step_s(o.simulatedStepSeconds);
  if (o.pipeline.stages())
    *p.mutable_pipeline() = o.pipeline;
  for (const auto &a : m.main.args)
    *p.add_inputs() = tensorInfo(a->name, a->type);
  for (size_t i = 0; i < m.main.returns.size(); ++i)
    *p.add_outputs() =
        tensorInfo(m.main.returnNames[i], m.main.returns[i]->type);
  std::vector<plan::DeviceProgram> programs;
  if (auto err = Emitter(m, p, devices, false).run(programs))
    return err;
  for (plan::DeviceProgram &prog : programs) {
    prog.set_predicted_peak_bytes(int64_t(o.predictedBytes));
    *p.add_programs() = std::move(prog);
  }
  // The reference: the same module on one device, collectives as identity.
  plan::Plan scratch;
  if (auto err = Emitter(m, scratch, 1, true).run(programs))
    return err;
  *p.mutable_reference() = std::move(programs[0]);
  return p;
}

} // namespace pax
