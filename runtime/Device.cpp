//===- Device.cpp - One device's program on the CPU -----------------------===//
#include "runtime/Device.h"

#include "runtime/Exchange.h"
#include "runtime/cpu/Kernels.h"

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
} // namespace

llvm::Error runDevice(const plan::Plan &plan, const plan::DeviceProgram &prog,
                      DataFeed &feed, Communicator *comm, DeviceMemory &memory,
                      DeviceStats &stats) {
  std::vector<Tensor> &buffers = memory.buffers;
  uint32_t device = prog.device();
  auto fail = [&](const llvm::Twine &msg) {
    return llvm::createStringError("device " + llvm::Twine(device) + ": " +
                                   msg);
  };
  size_t nb = size_t(prog.buffers_size());
  for (size_t b = 0; b < nb; ++b)
    if (prog.buffers(int(b)).id() != b)
      return fail("buffer " + llvm::Twine(b) + " has id " +
                  llvm::Twine(prog.buffers(int(b)).id()));
  // Last use of every buffer; outputs are kept.
  int64_t n = prog.instructions_size();
  std::vector<int64_t> last(nb, -1);
  std::vector<bool> allocated(nb, false), keep(nb, false);
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
  // Every buffer inside the arena (the plan's offsets are checked, not
  // trusted).
  int64_t arenaBytes = prog.arena_bytes();
  for (size_t b = 0; b < nb; ++b) {
    const plan::Buffer &buf = prog.buffers(int(b));
    int64_t bytes = dtypeBytes(buf.dtype());
    for (int64_t d : buf.shape())
      bytes *= d;
    if (buf.offset() < 0 || bytes < 0 || buf.offset() + bytes > arenaBytes)
      return fail("buffer " + llvm::Twine(b) + " (" + llvm::Twine(bytes) +
                  " bytes at " + llvm::Twine(buf.offset()) +
                  ") lies outside the arena of " + llvm::Twine(arenaBytes) +
                  " bytes");
  }
  buffers.assign(nb, Tensor());
  if (memory.arena.size() < size_t(arenaBytes))
    memory.arena.resize(size_t(arenaBytes));
  stats.arenaBytes = arenaBytes;
  int64_t live = 0;
  auto allocate = [&](uint32_t b) {
    if (allocated[b])
      return;
    const plan::Buffer &buf = prog.buffers(int(b));
    buffers[b] = Tensor::view(
        buf.dtype(), std::vector<int64_t>(buf.shape().begin(), buf.shape().end()),
        memory.arena.data() + buf.offset(), true);
    allocated[b] = true;
    live += buffers[b].bytes();
    stats.peakBytes = std::max(stats.peakBytes, live);
  };
  for (const plan::Binding &b : prog.inputs()) {
    if (b.buffer() >= nb)
      return fail("an input binding names buffer " + llvm::Twine(b.buffer()));
    allocate(b.buffer());
    if (auto err = feed.input(b, buffers[b.buffer()]))
      return err;
  }
  for (int64_t i = 0; i < n; ++i) {
    const plan::Instruction &inst = prog.instructions(int(i));
    Uses u = usesOf(inst);
    for (uint32_t b : u.reads) {
      const auto &shape = prog.buffers(int(b)).shape();
      if (!allocated[b] && llvm::is_contained(shape, 0))
        allocate(b); // holds nothing (a device outside a broadcast's root)
      if (!allocated[b])
        return fail("instruction " + llvm::Twine(i) + " reads buffer " +
                    llvm::Twine(b) + " before anything writes it");
    }
    for (uint32_t b : u.writes)
      allocate(b);
    if (inst.has_load()) {
      if (auto err = feed.loadWeight(inst.load(), buffers[inst.load().buffer()]))
        return err;
    } else if (inst.has_compute()) {
      const plan::Compute &c = inst.compute();
      llvm::SmallVector<const Tensor *, 4> ins;
      llvm::SmallVector<Tensor *, 2> outs;
      for (uint32_t b : u.reads)
        ins.push_back(&buffers[b]);
      for (uint32_t b : u.writes)
        outs.push_back(&buffers[b]);
      if (auto err = runKernel(c, ins, outs))
        return fail(llvm::toString(std::move(err)));
    } else if (inst.has_collective()) {
      const plan::Collective &c = inst.collective();
      if (!comm)
        return fail("a collective, but no communicator");
      const Tensor &in = buffers[c.input()];
      Tensor &out = buffers[c.output()];
      if (auto err = comm->exchange(plan, device, c, in, out))
        return err;
      stats.exchangeBytes[c.exchange()] += countedBytes(
          plan.exchanges(int(c.exchange())), device, in, out);
    } else if (inst.has_slice()) {
      const plan::Slice &s = inst.slice();
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
      moveOverlap(in, inLo, out, outLo, false);
    } else {
      return fail("instruction " + llvm::Twine(i) + " is empty");
    }
    ++stats.instructions;
    for (uint32_t b : llvm::concat<uint32_t>(u.reads, u.writes))
      if (last[b] == i && !keep[b] && !prog.buffers(int(b)).persistent() &&
          allocated[b]) {
        live -= buffers[b].bytes();
        buffers[b] = Tensor();
      }
  }
  return llvm::Error::success();
}

} // namespace pax::runtime
