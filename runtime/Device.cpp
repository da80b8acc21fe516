//===- Device.cpp - The interpreter of one device's program ---------------===//
#include "runtime/Device.h"

#include "runtime/Exchange.h"
#include "runtime/Profile.h"

#include "llvm/ADT/STLFunctionalExtras.h"

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
  return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                       epoch)
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

llvm::Error runDevice(const plan::Plan &plan, const plan::DeviceProgram &prog,
                      DataFeed &feed, Communicator *comm, Device &device,
                      std::vector<Tensor> &buffers, DeviceStats &stats,
                      const RunOptions &options) {
  uint32_t id = prog.device();
  auto fail = [&](const llvm::Twine &msg) {
    return llvm::createStringError("device " + llvm::Twine(id) + ": " +
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
  if (auto err = device.reserve(arenaBytes))
    return fail(llvm::toString(std::move(err)));
  stats.arenaBytes = arenaBytes;
  // Fills a buffer from the host: in place where the device's memory is
  // the host's, else through a host tensor uploaded after.
  auto staged = [&](Tensor &buffer,
                    llvm::function_ref<llvm::Error(Tensor &)> fill) {
    if (device.hostAccessible())
      return fill(buffer);
    Tensor host = Tensor::zeros(buffer.dtype, buffer.shape);
    if (auto err = fill(host))
      return err;
    return device.upload(host, buffer);
  };
  // The persistent buffers that hold a constant weight from the previous
  // run (RunOptions::weightsResident).
  std::vector<bool> resident(nb, false);
  if (options.weightsResident)
    for (const plan::Instruction &inst : prog.instructions())
      if (inst.has_load() && inst.load().source() != plan::LoadWeight::INPUT &&
          inst.load().buffer() < nb &&
          prog.buffers(int(inst.load().buffer())).persistent())
        resident[inst.load().buffer()] = true;
  int64_t live = 0;
  auto allocate = [&](uint32_t b) {
    if (allocated[b])
      return;
    const plan::Buffer &buf = prog.buffers(int(b));
    buffers[b] = device.allocate(
        buf.dtype(), std::vector<int64_t>(buf.shape().begin(), buf.shape().end()),
        buf.offset(), !resident[b]);
    allocated[b] = true;
    live += buffers[b].bytes();
    stats.peakBytes = std::max(stats.peakBytes, live);
  };
  for (const plan::Binding &b : prog.inputs()) {
    if (b.buffer() >= nb)
      return fail("an input binding names buffer " + llvm::Twine(b.buffer()));
    allocate(b.buffer());
    if (auto err = staged(buffers[b.buffer()],
                          [&](Tensor &t) { return feed.input(b, t); }))
      return err;
  }
  if (options.trace)
    traceClock(); // the epoch, before the first instruction
  for (int64_t i = 0; i < n; ++i) {
    const plan::Instruction &inst = prog.instructions(int(i));
    Uses u = usesOf(inst);
    double traceStart = options.trace ? traceClock() : 0;
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
      if (resident[inst.load().buffer()]) {
        ++stats.instructions;
        continue; // still there from the previous run
      }
      if (auto err = staged(buffers[inst.load().buffer()], [&](Tensor &t) {
            return feed.loadWeight(inst.load(), t);
          }))
        return err;
    } else if (inst.has_compute()) {
      const plan::Compute &c = inst.compute();
      llvm::SmallVector<const Tensor *, 4> ins;
      llvm::SmallVector<Tensor *, 2> outs;
      for (uint32_t b : u.reads)
        ins.push_back(&buffers[b]);
      for (uint32_t b : u.writes)
        outs.push_back(&buffers[b]);
      if (!kernelTimingOn()) {
        if (auto err = device.launch(c, ins, outs))
          return fail(llvm::toString(std::move(err)));
      } else {
        // A device whose work is asynchronous is waited for, so each
        // kernel's time is its own.
        auto start = std::chrono::steady_clock::now();
        llvm::Error err = device.launch(c, ins, outs);
        if (!err && !device.hostAccessible())
          err = device.synchronize();
        recordKernelTime(c, std::chrono::duration_cast<std::chrono::nanoseconds>(
                                std::chrono::steady_clock::now() - start)
                                .count());
        if (err)
          return fail(llvm::toString(std::move(err)));
      }
    } else if (inst.has_collective()) {
      const plan::Collective &c = inst.collective();
      if (!comm)
        return fail("a collective, but no communicator");
      const Tensor &in = buffers[c.input()];
      Tensor &out = buffers[c.output()];
      if (auto err = comm->exchange(plan, id, c, in, out, device))
        return err;
      stats.exchangeBytes[c.exchange()] += countedBytes(
          plan.exchanges(int(c.exchange())), id, in, out);
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
      if (auto err = device.copyOverlap(in, inLo, out, outLo, false))
        return fail(llvm::toString(std::move(err)));
    } else {
      return fail("instruction " + llvm::Twine(i) + " is empty");
    }
    ++stats.instructions;
    if (options.trace) {
      if (!device.hostAccessible())
        if (auto err = device.synchronize())
          return fail(llvm::toString(std::move(err)));
      stats.trace.push_back({traceName(inst, plan),
                             inst.has_compute()      ? "compute"
                             : inst.has_collective() ? "collective"
                             : inst.has_load()       ? "load"
                                                     : "slice",
                             traceStart, traceClock()});
    }
    for (uint32_t b : llvm::concat<uint32_t>(u.reads, u.writes))
      if (last[b] == i && !keep[b] && !prog.buffers(int(b)).persistent() &&
          allocated[b]) {
        live -= buffers[b].bytes();
        buffers[b] = Tensor();
      }
  }
  return device.synchronize();
}

} // namespace pax::runtime
