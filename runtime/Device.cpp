//===- Device.cpp - The interpreter of one device's program ---------------===//
#include "runtime/Device.h"

#include "codegen/plan/Access.h"
#include "codegen/plan/PlanFile.h"

#include "runtime/Exchange.h"
#include "runtime/PlanCheck.h"
#include "runtime/Profile.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringSet.h"

#include <algorithm>
#include <chrono>

namespace pax::runtime {

namespace {
/// The buffers an instruction reads and writes.
struct Uses {
  llvm::SmallVector<uint32_t, 4> reads, writes;
};

Uses usesOf(const plan::Instruction &inst) {
  Uses u;
  if (inst.has_load()) {
    u.writes.push_back(inst.load().buffer());
  } else if (inst.has_compute()) {
    for (const plan::Access &a : inst.compute().inputs())
      u.reads.push_back(a.buffer());
    for (const plan::Access &a : inst.compute().outputs())
      u.writes.push_back(a.buffer());
  } else if (inst.has_collective()) {
    u.reads.push_back(inst.collective().input());
    u.writes.push_back(inst.collective().output());
  } else if (inst.has_slice()) {
    u.reads.push_back(inst.slice().input());
    u.writes.push_back(inst.slice().output());
  }
  return u;
}
/// Seconds on the trace's clock (the process's first call is 0).
double traceClock() {
  static const auto epoch = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch)
      .count();
}

/// What an instruction is called in a trace.
std::string traceName(const plan::Instruction &inst, const plan::Plan &plan) {
  if (inst.has_compute())
    return inst.compute().kind() + " " + inst.compute().name();
  if (inst.has_collective()) {
    const plan::Collective &c = inst.collective();
    std::string what = c.exchange() < uint32_t(plan.exchanges_size())
                           ? plan.exchanges(int(c.exchange())).what()
                           : "";
    return plan::Collective::Kind_Name(c.kind()) + " " + what;
  }
  if (inst.has_load())
    return "load " + inst.load().tensor();
  return "slice";
}
} // namespace

namespace {
/// One run of a device's program: its buffers' lifetimes and the
/// instructions in order.
class DeviceRun {
public:
  DeviceRun(const plan::Plan &plan, const plan::DeviceProgram &prog,
            DataFeed &feed, Communicator *comm, Device &device,
            std::vector<Tensor> &buffers, DeviceStats &stats,
            const RunOptions &options)
      : plan(plan), prog(prog), feed(feed), comm(comm), device(device),
        buffers(buffers), stats(stats), options(options), id(prog.device()),
        nb(size_t(prog.buffers_size())), n(prog.instructions_size()) {}

  llvm::Error run();

private:
  llvm::Error fail(const llvm::Twine &msg) const {
    return llvm::createStringError("device " + llvm::Twine(id) + ": " + msg);
  }
  /// Buffer ids, each buffer's last use and the kept outputs.
  llvm::Error findLifetimes();
  /// This device's kept blocks (RunOptions::keptBlocks), checked: each
  /// past the arena, its bindings' buffers of one type and shape. The
  /// arena's end with them.
  llvm::Expected<int64_t> findKeptBlocks();
  /// Kept block \p k as a buffer of its input binding's type and shape.
  Tensor keptBlock(const KeptBlock &k);
  /// Copies each output binding's buffer into its kept block.
  llvm::Error keepBlocks();
  /// Every buffer inside the arena (the plan's offsets are checked, not
  /// trusted); the arena reserved, the persistent buffers counted live.
  llvm::Error reserveArena();
  /// The persistent buffers of weights loaded from the model (kept), and
  /// those that still hold them from the previous run (resident, under
  /// RunOptions::weightsResident; the carried ones under
  /// RunOptions::carryWeights).
  void findResident();
  /// Allocates buffer \p b, zero-filled unless \p zero is false (or it
  /// is a resident weight).
  void allocate(uint32_t b, bool zero = true);
  /// Fills a buffer from the host: in place where the device's memory is
  /// the host's, else through a host tensor uploaded after.
  llvm::Error staged(Tensor &buffer,
                     llvm::function_ref<llvm::Error(Tensor &)> fill);
  llvm::Error bindInputs();
  /// Instruction \p i: its buffers made, run, its dead buffers freed.
  /// Allocates what instruction \p i writes, after checking that what it
  /// reads has been written.
  llvm::Error ready(int64_t i, const Uses &u);
  /// Frees what instruction \p i used last.
  void release(int64_t i, const Uses &u);
  /// Runs instruction \p i; with \p free, frees what dies with it.
  llvm::Error step(int64_t i, bool free = true);
  /// Where the transport does not wait for a transfer's receivers
  /// (Communicator::buffersPointToPoint): each point-to-point send this
  /// device only sends in runs right after the instruction that writes
  /// what it sends, not where its receiver needs it (a pipeline stage's
  /// activation leaves as soon as it is computed).
  void findEarlySends();
  /// The early sends of the instructions [\p i, \p next).
  llvm::Error stepEarlySends(int64_t i, int64_t next);
  /// Runs generated kernel \p k in place of the computes it covers.
  llvm::Error stepKernel(const plan::GeneratedKernel &k);
  /// Runs product \p e.product and its epilogue as the device's one
  /// library call, in place of the epilogue's generated kernel.
  llvm::Error stepEpilogue(const plan::LibraryEpilogue &e);
  /// The generated kernel starting at each instruction, where the device
  /// runs them (else none).
  llvm::Error findKernels();
  /// The chain of computes the device runs as one kernel from each
  /// instruction (Device::fuses), where it fuses any: the instructions
  /// from the first compute to the last, loads of weights among them.
  void findChains();
  /// Instruction \p i and the computes after it, each reading the one
  /// before's only result (which nothing else reads), with the loads
  /// between them.
  llvm::SmallVector<int64_t, 8> candidateChain(int64_t i) const;
  /// What \p chain reads from outside (and whether its first compute
  /// does), loads, and the buffers of its first and last results.
  struct ChainBuffers {
    llvm::SmallVector<std::pair<uint32_t, bool>, 16> reads;
    llvm::SmallVector<uint32_t, 8> loads;
    uint32_t first = 0, out = 0;
  };
  ChainBuffers chainBuffers(llvm::ArrayRef<int64_t> chain) const;
  /// Whether \p chain's loads may run before its first compute, and its
  /// first result be written while it reads: no shared bytes.
  bool movable(llvm::ArrayRef<int64_t> chain) const;
  /// Whether \p chain's result shares bytes with what it reads, so that
  /// it is computed where its first result goes and copied after.
  bool staged(llvm::ArrayRef<int64_t> chain) const;
  /// Runs \p chain: its loads, then its computes as one kernel where the
  /// device can, else one by one.
  llvm::Error stepChain(llvm::ArrayRef<int64_t> chain);
  /// The device's one kernel for \p computes; false where it cannot.
  /// With \p stage, computed where the first result goes (or, where that
  /// cannot hold the last, in a host scratch tensor), then copied.
  llvm::Expected<bool> launchFused(llvm::ArrayRef<int64_t> computes,
                                   bool stage);
  /// The links of \p computes, their intermediate results in \p between
  /// (type and shape only); \p first and \p out: the first and the last
  /// result's buffers.
  llvm::Error chainLinks(llvm::ArrayRef<int64_t> computes,
                         std::vector<Tensor> &between,
                         llvm::SmallVectorImpl<ChainLink> &links,
                         uint32_t &first, uint32_t &out);
  /// Frees the buffers \p computes read that die with them, but
  /// \p keepBuffer.
  void releaseDeadReads(llvm::ArrayRef<int64_t> computes, uint32_t keepBuffer);
  /// A host tensor of buffer \p b's type and shape, its bytes reused from
  /// chain to chain.
  Tensor *scratchFor(const plan::Buffer &b);
  llvm::Error execute(int64_t i, const plan::Instruction &inst, const Uses &u);
  llvm::Error launch(const plan::Compute &c, const Uses &u);
  llvm::Error slice(int64_t i, const plan::Slice &s);
  llvm::Error trace(const plan::Instruction &inst, double start,
                    int instructions = 1);

  const plan::Plan &plan;
  const plan::DeviceProgram &prog;
  DataFeed &feed;
  Communicator *comm;
  Device &device;
  std::vector<Tensor> &buffers;
  DeviceStats &stats;
  const RunOptions &options;
  uint32_t id;
  size_t nb;
  int64_t n;
  std::vector<int64_t> last;
  std::vector<const plan::GeneratedKernel *> kernelAt;
  /// The product at each instruction whose epilogue the device's library
  /// runs with it (null elsewhere), where the device does.
  std::vector<plan::LibraryEpilogue> epilogueList;
  std::vector<const plan::LibraryEpilogue *> epilogueAt;
  std::vector<llvm::SmallVector<int64_t, 8>> chains;
  /// Per instruction, the sends that run right after it (findEarlySends),
  /// and whether an instruction is such a send.
  std::vector<llvm::SmallVector<int64_t, 2>> sendsAfter;
  std::vector<bool> sentEarly;
  /// Where a staged chain whose first result cannot hold its last computes.
  std::vector<uint8_t> scratchBytes;
  Tensor scratch;
  /// The instructions reading each buffer.
  std::vector<uint32_t> readers;
  /// kept: the persistent buffers of weights loaded from the model (the
  /// same values at the same address until the next run that is not
  /// resident); resident: those still there from the previous run.
  std::vector<bool> allocated, keep, kept, resident;
  /// The resident buffers that carried the previous step's update.
  std::vector<bool> carriedNow;
  /// This device's blocks kept past the arena (RunOptions::keptBlocks).
  std::vector<KeptBlock> blocksKept;
  /// Live bytes: the persistent buffers (weights kept between runs) from
  /// the start, as the arena holds them; the rest from their first write.
  int64_t live = 0;
};
} // namespace

llvm::Error DeviceRun::findLifetimes() {
  for (size_t b = 0; b < nb; ++b)
    if (prog.buffers(int(b)).id() != b)
      return fail("buffer " + llvm::Twine(b) + " has id " +
                  llvm::Twine(prog.buffers(int(b)).id()));
  last.assign(nb, -1);
  allocated.assign(nb, false);
  keep.assign(nb, false);
  for (int64_t i = 0; i < n; ++i) {
    Uses u = usesOf(prog.instructions(int(i)));
    for (uint32_t b : llvm::concat<uint32_t>(u.reads, u.writes)) {
      if (b >= nb)
        return fail("instruction " + llvm::Twine(i) + " names buffer " +
                    llvm::Twine(b) + " of " + llvm::Twine(nb));
      last[b] = i;
    }
  }
  for (const plan::Binding &b : prog.outputs()) {
    if (b.buffer() >= nb)
      return fail("an output binding names buffer " + llvm::Twine(b.buffer()));
    keep[b.buffer()] = true;
  }
  return llvm::Error::success();
}

llvm::Expected<int64_t> DeviceRun::findKeptBlocks() {
  auto it = options.keptBlocks.find(id);
  if (it != options.keptBlocks.end())
    blocksKept = it->second;
  int64_t end = prog.arena_bytes();
  for (const KeptBlock &k : blocksKept) {
    if (k.output >= uint32_t(prog.outputs_size()) ||
        k.input >= uint32_t(prog.inputs_size()))
      return fail("a kept block names a binding the program lacks");
    const plan::Buffer &out = prog.buffers(
                           int(prog.outputs(int(k.output)).buffer())),
                       &in = prog.buffers(
                           int(prog.inputs(int(k.input)).buffer()));
    bool same = out.dtype() == in.dtype() &&
                std::equal(out.shape().begin(), out.shape().end(),
                           in.shape().begin(), in.shape().end());
    if (!same || k.offset < prog.arena_bytes())
      return fail("kept block at " + llvm::Twine(k.offset) +
                  ": its output and input differ, or it lies in the arena");
    end = std::max(end, k.offset + planBufferBytes(in));
  }
  return end;
}

Tensor DeviceRun::keptBlock(const KeptBlock &k) {
  const plan::Buffer &in =
      prog.buffers(int(prog.inputs(int(k.input)).buffer()));
  return device.allocate(in.dtype(), {in.shape().begin(), in.shape().end()},
                         k.offset, /*zero=*/false);
}

llvm::Error DeviceRun::keepBlocks() {
  for (const KeptBlock &k : blocksKept) {
    Tensor block = keptBlock(k);
    std::vector<int64_t> lo(block.shape.size(), 0);
    if (auto err = device.copyOverlap(
            buffers[prog.outputs(int(k.output)).buffer()], lo, block, lo,
            /*add=*/false))
      return fail(llvm::toString(std::move(err)));
  }
  return llvm::Error::success();
}

llvm::Error DeviceRun::reserveArena() {
  auto withKept = findKeptBlocks();
  if (!withKept)
    return withKept.takeError();
  int64_t arenaBytes = prog.arena_bytes();
  for (size_t b = 0; b < nb; ++b) {
    const plan::Buffer &buf = prog.buffers(int(b));
    int64_t bytes = planBufferBytes(buf);
    if (buf.persistent())
      live += bytes;
    if (buf.offset() < 0 || bytes < 0 || buf.offset() + bytes > arenaBytes)
      return fail("buffer " + llvm::Twine(b) + " (" + llvm::Twine(bytes) +
                  " bytes at " + llvm::Twine(buf.offset()) +
                  ") lies outside the arena of " + llvm::Twine(arenaBytes) +
                  " bytes");
  }
  buffers.assign(nb, Tensor());
  if (auto err = device.reserve(*withKept))
    return fail(llvm::toString(std::move(err)));
  stats.arenaBytes = arenaBytes;
  stats.peakBytes = std::max(stats.peakBytes, live);
  return llvm::Error::success();
}

void DeviceRun::findResident() {
  kept.assign(nb, false);
  for (const plan::Instruction &inst : prog.instructions())
    if (inst.has_load() && inst.load().source() != plan::LoadWeight::INPUT &&
        inst.load().buffer() < nb &&
        prog.buffers(int(inst.load().buffer())).persistent())
      kept[inst.load().buffer()] = true;
  // A carried weight changes at the end of every step: never kept.
  for (uint32_t b : prog.carried())
    if (b < nb)
      kept[b] = false;
  resident = options.weightsResident ? kept : std::vector<bool>(nb, false);
  carriedNow.assign(nb, false);
  if (options.carryWeights)
    for (uint32_t b : prog.carried())
      if (b < nb && prog.buffers(int(b)).persistent())
        resident[b] = carriedNow[b] = true;
}

void DeviceRun::allocate(uint32_t b, bool zero) {
  if (allocated[b])
    return;
  const plan::Buffer &buf = prog.buffers(int(b));
  buffers[b] = device.allocate(
      buf.dtype(), std::vector<int64_t>(buf.shape().begin(), buf.shape().end()),
      buf.offset(), zero && !resident[b]);
  buffers[b].resident = kept[b];
  allocated[b] = true;
  if (!buf.persistent())
    live += buffers[b].bytes();
  stats.peakBytes = std::max(stats.peakBytes, live);
}

llvm::Error DeviceRun::staged(Tensor &buffer,
                              llvm::function_ref<llvm::Error(Tensor &)> fill) {
  if (device.hostAccessible())
    return fill(buffer);
  Tensor host = Tensor::zeros(buffer.dtype, buffer.shape);
  if (auto err = fill(host))
    return err;
  return device.upload(host, buffer);
}

llvm::Error DeviceRun::bindInputs() {
  std::vector<const KeptBlock *> keptFor(size_t(prog.inputs_size()), nullptr);
  if (options.keptInputs)
    for (const KeptBlock &k : blocksKept)
      keptFor[k.input] = &k;
  for (int i = 0; i < prog.inputs_size(); ++i) {
    const plan::Binding &b = prog.inputs(i);
    if (b.buffer() >= nb)
      return fail("an input binding names buffer " + llvm::Twine(b.buffer()));
    allocate(b.buffer(), /*zero=*/!keptFor[size_t(i)]);
    if (const KeptBlock *k = keptFor[size_t(i)]) {
      Tensor block = keptBlock(*k);
      std::vector<int64_t> lo(block.shape.size(), 0);
      if (auto err = device.copyOverlap(block, lo, buffers[b.buffer()], lo,
                                        /*add=*/false))
        return fail(llvm::toString(std::move(err)));
      continue;
    }
    if (auto err = staged(buffers[b.buffer()],
                          [&](Tensor &t) { return feed.input(b, t); }))
      return err;
  }
  return llvm::Error::success();
}

llvm::Error DeviceRun::launch(const plan::Compute &c, const Uses &u) {
  llvm::SmallVector<const Tensor *, 4> ins;
  llvm::SmallVector<Tensor *, 2> outs;
  for (uint32_t b : u.reads)
    ins.push_back(&buffers[b]);
  for (uint32_t b : u.writes)
    outs.push_back(&buffers[b]);
  if (!kernelTimingOn()) {
    if (auto err = device.launch(c, ins, outs))
      return fail(llvm::toString(std::move(err)));
    return llvm::Error::success();
  }
  // A device whose work is asynchronous is waited for, so each kernel's
  // time is its own.
  auto start = std::chrono::steady_clock::now();
  llvm::Error err = device.launch(c, ins, outs);
  if (!err && !device.hostAccessible())
    err = device.synchronize();
  recordKernelTime(c, std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now() - start)
                          .count());
  if (err)
    return fail(llvm::toString(std::move(err)));
  return llvm::Error::success();
}

llvm::Error DeviceRun::slice(int64_t i, const plan::Slice &s) {
  const Tensor &in = buffers[s.input()];
  Tensor &out = buffers[s.output()];
  if (size_t(s.offset_size()) != out.shape.size() ||
      in.shape.size() != out.shape.size())
    return fail("slice " + llvm::Twine(i) + " does not match its buffers");
  std::vector<int64_t> inLo(in.shape.size(), 0),
      outLo(s.offset().begin(), s.offset().end());
  for (size_t d = 0; d < out.shape.size(); ++d)
    if (outLo[d] < 0 || outLo[d] + out.shape[d] > in.shape[d])
      return fail("slice " + llvm::Twine(i) + " reaches past its input");
  if (auto err = device.copyOverlap(in, inLo, out, outLo, false))
    return fail(llvm::toString(std::move(err)));
  return llvm::Error::success();
}

llvm::Error DeviceRun::execute(int64_t i, const plan::Instruction &inst,
                               const Uses &u) {
  if (inst.has_load())
    return staged(buffers[inst.load().buffer()],
                  [&](Tensor &t) { return feed.loadWeight(inst.load(), t); });
  if (inst.has_compute())
    return launch(inst.compute(), u);
  if (inst.has_collective()) {
    const plan::Collective &c = inst.collective();
    if (!comm)
      return fail("a collective, but no communicator");
    const Tensor &in = buffers[c.input()];
    Tensor &out = buffers[c.output()];
    if (auto err = comm->exchange(plan, id, c, in, out, device))
      return err;
    stats.exchangeBytes[c.exchange()] +=
        countedBytes(plan.exchanges(int(c.exchange())), id, in, out);
    return llvm::Error::success();
  }
  if (inst.has_slice())
    return slice(i, inst.slice());
  return fail("instruction " + llvm::Twine(i) + " is empty");
}

llvm::Error DeviceRun::trace(const plan::Instruction &inst, double start,
                             int instructions) {
  if (!device.hostAccessible())
    if (auto err = device.synchronize())
      return fail(llvm::toString(std::move(err)));
  std::string name = traceName(inst, plan);
  if (instructions > 1)
    name += " + " + std::to_string(instructions - 1) + " fused";
  stats.trace.push_back({std::move(name),
                         inst.has_compute()      ? "compute"
                         : inst.has_collective() ? "collective"
                         : inst.has_load()       ? "load"
                                                 : "slice",
                         start, traceClock(), instructions});
  return llvm::Error::success();
}

/// True when compute \p c writes every element of output \p k's buffer
/// \p buf: a kernel that writes each point of its space once (elementwise,
/// products, rows, reductions, attention; not a scatter that adds, a
/// convolution's data gradient summed window by window, or a copy that may
/// leave gaps) through plain dims, each once, spanning the buffer's shape.
/// Such a buffer needs no zeros before it.
static bool overwritesWhole(const plan::Compute &c, int k,
                            const plan::Buffer &buf) {
  static const llvm::StringSet<> whole = {
      "gemm",   "pointwise",  "norm_rows", "softmax_rows",
      "reduce", "batch_norm", "attention"};
  return whole.contains(c.kernel()) &&
         plan::coversPlainly(c, c.outputs(k), buf);
}

/// True when load \p l fills every element of its buffer \p buf: its box
/// lies inside the weight (DataFeed::loadWeight writes each element there).
static bool loadFillsWhole(const plan::LoadWeight &l, const plan::Buffer &buf) {
  if (l.offset_size() != buf.shape_size() ||
      l.global_shape_size() != buf.shape_size())
    return false;
  for (int d = 0; d < buf.shape_size(); ++d)
    if (l.offset(d) < 0 || l.offset(d) + buf.shape(d) > l.global_shape(d))
      return false;
  return true;
}

/// True when \p inst writes every element of its \p k-th written buffer.
static bool writesWhole(const plan::Instruction &inst, int k,
                        const plan::Buffer &buf) {
  if (inst.has_compute())
    return overwritesWhole(inst.compute(), k, buf);
  return inst.has_load() && loadFillsWhole(inst.load(), buf);
}

llvm::Error DeviceRun::ready(int64_t i, const Uses &u) {
  for (uint32_t b : u.reads) {
    const auto &shape = prog.buffers(int(b)).shape();
    if (!allocated[b] && llvm::is_contained(shape, 0))
      allocate(b); // holds nothing (a device outside a broadcast's root)
    if (!allocated[b])
      return fail("instruction " + llvm::Twine(i) + " reads buffer " +
                  llvm::Twine(b) + " before anything writes it");
  }
  const plan::Instruction &inst = prog.instructions(int(i));
  for (size_t k = 0; k < u.writes.size(); ++k) {
    uint32_t b = u.writes[k];
    allocate(b, !writesWhole(inst, int(k), prog.buffers(int(b))));
  }
  ++stats.instructions;
  return llvm::Error::success();
}

void DeviceRun::release(int64_t i, const Uses &u) {
  for (uint32_t b : llvm::concat<const uint32_t>(u.reads, u.writes))
    if (last[b] == i && !keep[b] && !prog.buffers(int(b)).persistent() &&
        allocated[b]) {
      live -= buffers[b].bytes();
      buffers[b] = Tensor();
    }
}

llvm::Error DeviceRun::step(int64_t i, bool free) {
  const plan::Instruction &inst = prog.instructions(int(i));
  Uses u = usesOf(inst);
  double traceStart = options.trace ? traceClock() : 0;
  if (auto err = ready(i, u))
    return err;
  if (inst.has_load() && resident[inst.load().buffer()]) {
    // Still there from the previous run.
    stats.carriedLoads += carriedNow[inst.load().buffer()] ? 1 : 0;
    return llvm::Error::success();
  }
  if (auto err = execute(i, inst, u))
    return err;
  if (options.trace)
    if (auto err = trace(inst, traceStart))
      return err;
  if (free)
    release(i, u);
  return llvm::Error::success();
}

void DeviceRun::findEarlySends() {
  sendsAfter.assign(size_t(n), {});
  sentEarly.assign(size_t(n), false);
  if (!comm || !comm->buffersPointToPoint(device))
    return;
  std::vector<int64_t> writer(nb, -1);
  for (int64_t i = 0; i < n; ++i) {
    const plan::Instruction &inst = prog.instructions(int(i));
    Uses u = usesOf(inst);
    // (A malformed collective runs where it is, to fail there.)
    const plan::Collective *c =
        inst.has_collective() ? &inst.collective() : nullptr;
    if (c && c->exchange() < uint32_t(plan.exchanges_size())) {
      const plan::Exchange &x = plan.exchanges(int(c->exchange()));
      int64_t p = c->input() < nb ? writer[c->input()] : -1;
      if (x.kind() == plan::Collective::SEND_RECV && id < plan.devices() &&
          x.in_size() == int(plan.devices()) &&
          x.out_size() == int(plan.devices()) && x.out(int(id)).empty() &&
          !x.in(int(id)).empty() && p >= 0 && p + 1 < i) {
        sendsAfter[size_t(p)].push_back(i);
        sentEarly[size_t(i)] = true;
      }
    }
    for (uint32_t b : u.writes)
      if (b < nb)
        writer[b] = i;
  }
}

llvm::Error DeviceRun::stepEarlySends(int64_t i, int64_t next) {
  for (int64_t q = i; q < next && q < n; ++q)
    for (int64_t j : sendsAfter[size_t(q)])
      if (auto err = step(j, /*free=*/false))
        return err;
  return llvm::Error::success();
}

llvm::Error DeviceRun::findKernels() {
  kernelAt.assign(size_t(n), nullptr);
  if (!device.runsGeneratedKernels() || prog.kernels().empty())
    return llvm::Error::success();
  if (auto err = checkKernels(prog))
    return err;
  for (const plan::GeneratedKernel &k : prog.kernels())
    kernelAt[size_t(k.first())] = &k;
  if (auto err = device.loadKernels(prog))
    return fail(llvm::toString(std::move(err)));
  if (device.runsLibraryEpilogues() && options.fuseChains) {
    epilogueList = plan::libraryEpilogues(prog);
    epilogueAt.assign(size_t(n), nullptr);
    for (const plan::LibraryEpilogue &e : epilogueList)
      epilogueAt[e.product] = &e;
  }
  return llvm::Error::success();
}

/// The longest chain of computes tried for fusion.
constexpr size_t kMaxChain = 4;

llvm::SmallVector<int64_t, 8> DeviceRun::candidateChain(int64_t i) const {
  llvm::SmallVector<int64_t, 8> chain{i};
  size_t computes = 1;
  for (int64_t j = i, next = i + 1; computes < kMaxChain && next < n;) {
    const plan::Instruction &inst = prog.instructions(int(next));
    if (inst.has_load()) { // loads of the links' weights may come between
      chain.push_back(next++);
      continue;
    }
    Uses u = usesOf(prog.instructions(int(j)));
    if (kernelAt[size_t(next)] || !inst.has_compute() || u.writes.size() != 1 ||
        readers[u.writes[0]] != 1 || keep[u.writes[0]] ||
        !llvm::is_contained(usesOf(inst).reads, u.writes[0]))
      break;
    chain.push_back(next);
    j = next++;
    ++computes;
  }
  while (!prog.instructions(int(chain.back())).has_compute())
    chain.pop_back();
  return chain;
}

DeviceRun::ChainBuffers
DeviceRun::chainBuffers(llvm::ArrayRef<int64_t> chain) const {
  ChainBuffers c;
  bool first = true;
  for (int64_t i : chain) {
    const plan::Instruction &inst = prog.instructions(int(i));
    Uses u = usesOf(inst);
    if (inst.has_load()) {
      llvm::append_range(c.loads, u.writes);
      continue;
    }
    for (uint32_t b : u.reads)
      if (first || b != c.out) // not the result before, never stored
        c.reads.push_back({b, first});
    if (first)
      c.first = u.writes[0];
    c.out = u.writes[0];
    first = false;
  }
  return c;
}

bool DeviceRun::movable(llvm::ArrayRef<int64_t> chain) const {
  // The loads run before the first compute, and the first compute's
  // result (where a staged chain is computed) is written while the
  // chain's inputs are read: neither may share their bytes.
  ChainBuffers c = chainBuffers(chain);
  for (auto read : c.reads) {
    uint32_t r = read.first;
    for (uint32_t l : c.loads)
      if (l != r && planBuffersShareBytes(prog, l, r))
        return false;
    if (planBuffersShareBytes(prog, c.first, r))
      return false;
  }
  return true;
}

bool DeviceRun::staged(llvm::ArrayRef<int64_t> chain) const {
  // The result may lie exactly on an input of a later link (an add in
  // place); on any other input it is written through the first result.
  ChainBuffers c = chainBuffers(chain);
  return llvm::any_of(c.reads, [&](std::pair<uint32_t, bool> read) {
    auto [r, byFirst] = read;
    bool inPlace = !byFirst && prog.buffers(int(r)).offset() ==
                                   prog.buffers(int(c.out)).offset();
    return planBuffersShareBytes(prog, r, c.out) && !inPlace;
  });
}

void DeviceRun::findChains() {
  chains.assign(size_t(n), {});
  readers.assign(nb, 0);
  for (int64_t i = 0; i < n; ++i)
    for (uint32_t b : usesOf(prog.instructions(int(i))).reads)
      ++readers[b];
  if (!options.fuseChains)
    return;
  for (int64_t i = 0; i < n; ++i) {
    if (kernelAt[size_t(i)] || !prog.instructions(int(i)).has_compute())
      continue;
    llvm::SmallVector<int64_t, 8> chain = candidateChain(i);
    llvm::SmallVector<const plan::Compute *, kMaxChain> computes;
    llvm::SmallVector<plan::DType, kMaxChain> results;
    for (int64_t j : chain)
      if (prog.instructions(int(j)).has_compute()) {
        computes.push_back(&prog.instructions(int(j)).compute());
        results.push_back(
            prog.buffers(int(usesOf(prog.instructions(int(j))).writes[0]))
                .dtype());
      }
    if (computes.size() < 2)
      continue;
    size_t fused = device.fuses(computes, results);
    // Cut the chain after its last fused compute.
    for (size_t seen = 0, k = 0; k < chain.size(); ++k)
      if (prog.instructions(int(chain[k])).has_compute() && ++seen == fused) {
        chain.resize(k + 1);
        break;
      }
    if (fused > 1 && movable(chain))
      chains[size_t(i)] = std::move(chain);
  }
}

llvm::Error DeviceRun::chainLinks(llvm::ArrayRef<int64_t> computes,
                                  std::vector<Tensor> &between,
                                  llvm::SmallVectorImpl<ChainLink> &links,
                                  uint32_t &first, uint32_t &out) {
  // Only what the chain reads from outside and its result exist for it:
  // the intermediate results may share bytes with what it reads, and are
  // given as their type and shape only.
  size_t n = computes.size();
  between.assign(n, Tensor());
  for (size_t k = 0; k < n; ++k) {
    Uses u = usesOf(prog.instructions(int(computes[k])));
    ChainLink &l = links.emplace_back();
    l.compute = &prog.instructions(int(computes[k])).compute();
    for (uint32_t b : u.reads) {
      bool chained = k > 0 && b == out;
      if (!allocated[b] && !chained)
        return fail("instruction " + llvm::Twine(computes[k]) +
                    " reads buffer " + llvm::Twine(b) +
                    " before anything writes it");
      l.inputs.push_back(chained ? &between[k - 1] : &buffers[b]);
    }
    if (k == 0)
      first = u.writes[0];
    out = u.writes[0];
    const plan::Buffer &buf = prog.buffers(int(out));
    between[k].dtype = buf.dtype();
    between[k].shape.assign(buf.shape().begin(), buf.shape().end());
    l.outputs.push_back(&between[k]);
  }
  return llvm::Error::success();
}

void DeviceRun::releaseDeadReads(llvm::ArrayRef<int64_t> computes,
                                 uint32_t keepBuffer) {
  for (int64_t i : computes)
    for (uint32_t r : usesOf(prog.instructions(int(i))).reads)
      if (r != keepBuffer && allocated[r] && last[r] <= computes.back() &&
          !keep[r] && !prog.buffers(int(r)).persistent()) {
        live -= buffers[r].bytes();
        buffers[r] = Tensor();
        allocated[r] = false;
      }
}

Tensor *DeviceRun::scratchFor(const plan::Buffer &b) {
  Tensor shaped;
  shaped.dtype = b.dtype();
  shaped.shape.assign(b.shape().begin(), b.shape().end());
  if (int64_t(scratchBytes.size()) < shaped.bytes())
    scratchBytes.assign(size_t(shaped.bytes()), 0);
  scratch = Tensor::view(shaped.dtype, shaped.shape, scratchBytes.data(),
                         /*zero=*/false);
  return &scratch;
}

llvm::Expected<bool> DeviceRun::launchFused(llvm::ArrayRef<int64_t> computes,
                                            bool stage) {
  std::vector<Tensor> between;
  llvm::SmallVector<ChainLink, kMaxChain> links;
  uint32_t first = 0, out = 0;
  if (auto err = chainLinks(computes, between, links, first, out))
    return err;
  // Staged through the first result where it can hold the last; on a
  // device whose memory is the host's, else through a scratch tensor.
  const plan::Buffer &a = prog.buffers(int(first)), &b = prog.buffers(int(out));
  bool fitsFirst = a.dtype() == b.dtype() && llvm::equal(a.shape(), b.shape());
  bool scratched = stage && !fitsFirst;
  if (scratched && !device.hostAccessible())
    return false;
  Tensor *dst = scratched ? scratchFor(b) : nullptr;
  if (!scratched) {
    // Written whole (maybe in place of an input), so not zero-filled.
    allocate(stage ? first : out, /*zero=*/false);
    dst = &buffers[stage ? first : out];
  }
  links.back().outputs[0] = dst;
  llvm::Expected<bool> fused = device.launchChain(links);
  if (!fused || !*fused || !stage)
    return fused;
  // The inputs that die in the chain are dead before the result takes
  // their bytes (as when the computes run one by one).
  releaseDeadReads(computes, scratched ? ~0u : first);
  allocate(out, /*zero=*/false);
  llvm::SmallVector<int64_t, 4> origin(buffers[out].shape.size(), 0);
  if (auto err =
          device.copyOverlap(*dst, origin, buffers[out], origin, /*add=*/false))
    return err;
  return true;
}

llvm::Error DeviceRun::stepChain(llvm::ArrayRef<int64_t> chain) {
  double traceStart = options.trace ? traceClock() : 0;
  llvm::SmallVector<int64_t, kMaxChain> computes;
  for (int64_t i : chain) {
    if (!prog.instructions(int(i)).has_compute()) {
      if (auto err = step(i))
        return err;
      continue;
    }
    computes.push_back(i);
  }
  auto start = std::chrono::steady_clock::now();
  llvm::Expected<bool> fused = launchFused(computes, staged(chain));
  if (!fused)
    return fail(llvm::toString(fused.takeError()));
  if (!*fused) // one by one after all
    for (int64_t i : computes)
      if (auto err = step(i))
        return err;
  if (!*fused)
    return llvm::Error::success();
  stats.instructions += int64_t(computes.size());
  if (kernelTimingOn())
    recordKernelTime(prog.instructions(int(computes[0])).compute(),
                     std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::steady_clock::now() - start)
                         .count());
  if (options.trace)
    if (auto err = trace(prog.instructions(int(computes[0])), traceStart,
                         int(computes.size())))
      return err;
  for (int64_t i : computes)
    release(i, usesOf(prog.instructions(int(i))));
  return llvm::Error::success();
}

llvm::Error DeviceRun::stepEpilogue(const plan::LibraryEpilogue &e) {
  double traceStart = options.trace ? traceClock() : 0;
  const plan::Instruction &inst = prog.instructions(int(e.product));
  Uses u = usesOf(inst);
  llvm::SmallVector<const Tensor *, 4> ins;
  for (uint32_t b : u.reads) {
    if (!allocated[b] && llvm::is_contained(prog.buffers(int(b)).shape(), 0))
      allocate(b); // holds nothing (a device outside a broadcast's root)
    if (!allocated[b])
      return fail("instruction " + llvm::Twine(e.product) + " reads buffer " +
                  llvm::Twine(b) + " before anything writes it");
    ins.push_back(&buffers[b]);
  }
  const Tensor *addend = nullptr;
  if (e.addend >= 0) {
    if (!allocated[size_t(e.addend)])
      return fail("generated kernel " + e.kernel->name() + " reads buffer " +
                  llvm::Twine(e.addend) + " before anything writes it");
    addend = &buffers[size_t(e.addend)];
  }
  // The output may take the addend's bytes: they stay until it is read.
  allocate(e.output, /*zero=*/false);
  auto start = std::chrono::steady_clock::now();
  llvm::Error err = device.launchWithEpilogue(inst.compute(), ins, e, addend,
                                              buffers[e.output]);
  if (!err && kernelTimingOn() && !device.hostAccessible())
    err = device.synchronize();
  if (err)
    return fail(llvm::toString(std::move(err)));
  if (kernelTimingOn()) // the product's kind, its epilogue in it
    recordKernelTime(inst.compute(),
                     std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::steady_clock::now() - start)
                         .count());
  int64_t end = int64_t(e.kernel->first() + e.kernel->count());
  stats.instructions += end - int64_t(e.product);
  if (options.trace)
    if (auto err = trace(inst, traceStart, int(end - e.product)))
      return err;
  for (int64_t i = e.product; i < end; ++i)
    release(i, usesOf(prog.instructions(int(i))));
  return llvm::Error::success();
}

llvm::Error DeviceRun::stepKernel(const plan::GeneratedKernel &k) {
  double traceStart = options.trace ? traceClock() : 0;
  int64_t first = k.first(), end = first + int64_t(k.count());
  // Only the buffers the kernel loads or stores exist for it: a value it
  // keeps in a register may have bytes the arena gives another buffer.
  llvm::SmallVector<uint32_t, 16> writes;
  for (int64_t i = first; i < end; ++i)
    llvm::append_range(writes, usesOf(prog.instructions(int(i))).writes);
  // A result written in place of an input (the same bytes) keeps them.
  auto inPlace = [&](uint32_t b) {
    const plan::Buffer &x = prog.buffers(int(b));
    for (uint32_t i : k.params())
      if (i != b && !llvm::is_contained(writes, i) &&
          prog.buffers(int(i)).offset() == x.offset())
        return true;
    return false;
  };
  for (uint32_t b : k.params())
    if (llvm::is_contained(writes, b))
      allocate(b, !inPlace(b));
    else if (!allocated[b])
      return fail("generated kernel " + k.name() + " reads buffer " +
                  llvm::Twine(b) + " before anything writes it");
  stats.instructions += end - first;
  llvm::SmallVector<Tensor *, 8> params;
  for (uint32_t b : k.params())
    params.push_back(&buffers[b]);
  auto start = std::chrono::steady_clock::now();
  llvm::Error err = device.launchKernel(k, params);
  if (!err && kernelTimingOn() && !device.hostAccessible())
    err = device.synchronize();
  if (err)
    return fail(llvm::toString(std::move(err)));
  if (kernelTimingOn())
    recordGeneratedKernelTime(
        k, std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now() - start)
               .count());
  if (options.trace) {
    if (!device.hostAccessible())
      if (auto err = device.synchronize())
        return fail(llvm::toString(std::move(err)));
    stats.trace.push_back(
        {"kernel " + k.name(), "compute", traceStart, traceClock()});
  }
  for (int64_t i = first; i < end; ++i)
    release(i, usesOf(prog.instructions(int(i))));
  return llvm::Error::success();
}

llvm::Error DeviceRun::run() {
  if (auto err = findLifetimes())
    return err;
  if (auto err = reserveArena())
    return err;
  device.beginRun(options.weightsResident);
  findResident();
  if (auto err = findKernels())
    return err;
  findChains();
  findEarlySends();
  if (auto err = bindInputs())
    return err;
  if (options.trace)
    traceClock(); // the epoch, before the first instruction
  for (int64_t i = 0; i < n;) {
    int64_t next;
    if (sentEarly[size_t(i)]) {
      // Sent early: what dies with it is freed here.
      release(i, usesOf(prog.instructions(int(i))));
      next = i + 1;
    } else if (const plan::LibraryEpilogue *e =
                   epilogueAt.empty() ? nullptr : epilogueAt[size_t(i)]) {
      if (auto err = stepEpilogue(*e))
        return err;
      next = int64_t(e->kernel->first() + e->kernel->count());
    } else {
      const plan::GeneratedKernel *k = kernelAt[size_t(i)];
      const auto &chain = chains[size_t(i)];
      if (auto err = k               ? stepKernel(*k)
                     : chain.empty() ? step(i)
                                     : stepChain(chain))
        return err;
      next = k               ? i + int64_t(k->count())
             : chain.empty() ? i + 1
                             : chain.back() + 1;
    }
    if (auto err = stepEarlySends(i, next))
      return err;
    i = next;
  }
  if (auto err = keepBlocks())
    return err;
  return device.synchronize();
}

llvm::Error runDevice(const plan::Plan &plan, const plan::DeviceProgram &prog,
                      DataFeed &feed, Communicator *comm, Device &device,
                      std::vector<Tensor> &buffers, DeviceStats &stats,
                      const RunOptions &options) {
  return DeviceRun(plan, prog, feed, comm, device, buffers, stats, options)
      .run();
}

} // namespace pax::runtime
