//===- PlanStats.cpp - What a device's program costs per step -------------===//
#include "codegen/PlanStats.h"

#include "codegen/plan/LibraryEpilogue.h"
#include "codegen/plan/PlanFile.h"
#include "ir/Module.h"

#include "llvm/ADT/DenseSet.h"

#include <algorithm>
#include <map>

namespace pax {

namespace {
/// Bytes of buffer \p b of \p prog.
double bufferBytes(const plan::DeviceProgram &prog, uint32_t b) {
  if (b >= uint32_t(prog.buffers_size()))
    return 0;
  return double(planBufferBytes(prog.buffers(int(b))));
}

/// Elements of tensor dim \p i (of extent \p dim) that \p e reaches over
/// \p c's iteration space.
int64_t reachedExtent(const plan::Compute &c, const plan::AccessExpr &e,
                      int64_t dim) {
  auto extent = [&](int k) {
    uint32_t d = e.dims(k);
    return d < uint32_t(c.iters_size()) ? c.iters(int(d)).extent() : 1;
  };
  int64_t n = dim;
  switch (e.kind()) {
  case plan::AccessExpr::BROADCAST:
    n = 1;
    break;
  case plan::AccessExpr::AFFINE:
    n = 1;
    if (e.dims_size() > 0)
      n += std::abs(e.stride()) * (extent(0) - 1);
    if (e.dims_size() > 1)
      n += std::abs(e.dilation()) * (extent(1) - 1);
    break;
  case plan::AccessExpr::GROUP:
    n = std::max<int64_t>(1, e.whole());
    for (int k = 0; k < e.dims_size(); ++k)
      n *= extent(k);
    break;
  default: // the whole dim: `*`, a lookup's table
    break;
  }
  return std::clamp<int64_t>(n, 0, dim);
}

/// Bytes of its buffer \p a reaches over \p c's iteration space: an
/// operand read through a part of a buffer (attention's head of Q in the
/// projection that holds Q, K and V) moves that part only.
double accessBytes(const plan::DeviceProgram &prog, const plan::Compute &c,
                   const plan::Access &a) {
  if (a.buffer() >= uint32_t(prog.buffers_size()))
    return 0;
  const plan::Buffer &buf = prog.buffers(int(a.buffer()));
  if (a.exprs_size() != buf.shape_size())
    return double(planBufferBytes(buf));
  double bytes = double(planDTypeBytes(buf.dtype()));
  for (int i = 0; i < a.exprs_size(); ++i)
    bytes *= double(reachedExtent(c, a.exprs(i), buf.shape(i)));
  return bytes;
}

/// Whether a compute of \p kind runs as a library kernel that reads its
/// operands from memory and writes its results there, whatever is fused
/// around it.
bool materializes(const std::string &kind) {
  std::optional<OpKind> k = parseOpKind(kind);
  if (!k)
    return false;
  OpFamily f = opKindFamily(*k);
  return f == OpFamily::Contraction || f == OpFamily::Attention ||
         f == OpFamily::Recurrent;
}

/// Accumulates one program's stats, instruction by instruction.
class Counter {
public:
  explicit Counter(const plan::DeviceProgram &prog) : prog(prog) {
    for (const plan::LibraryEpilogue &e : plan::libraryEpilogues(prog))
      epilogues[e.product] = e;
  }

  ProgramStats run() {
    auto kernel = prog.kernels().begin();
    for (int i = 0; i < prog.instructions_size(); ++i) {
      const plan::Instruction &inst = prog.instructions(i);
      if (auto e = epilogues.find(uint32_t(i)); e != epilogues.end()) {
        withEpilogue(e->second);
        i = int(e->second.kernel->first() + e->second.kernel->count()) - 1;
        ++kernel;
      } else if (kernel != prog.kernels().end() &&
                 kernel->first() == uint32_t(i) && kernel->count() > 0) {
        generated(*kernel);
        i += int(kernel->count()) - 1;
        ++kernel;
      } else if (inst.has_compute())
        compute(inst.compute());
      else if (inst.has_collective())
        collective(inst.collective());
      else if (inst.has_slice())
        stats.trafficBytes += 2 * bufferBytes(prog, inst.slice().output());
      else if (inst.has_load())
        loaded.insert(inst.load().buffer());
    }
    // Weights and inputs no library kernel read, and outputs none wrote:
    // once each.
    for (uint32_t b : loaded)
      if (!counted.count(b))
        stats.minTrafficBytes += bufferBytes(prog, b);
    for (const plan::Binding &in : prog.inputs())
      if (!counted.count(in.buffer()))
        stats.minTrafficBytes += bufferBytes(prog, in.buffer());
    for (const plan::Binding &out : prog.outputs())
      if (!counted.count(out.buffer()))
        stats.minTrafficBytes += bufferBytes(prog, out.buffer());
    return std::move(stats);
  }

private:
  void compute(const plan::Compute &c) {
    KernelWork w;
    w.kind = c.kind();
    w.flops = c.flops();
    for (const plan::Access &a : c.inputs())
      w.bytes += accessBytes(prog, c, a);
    for (const plan::Access &a : c.outputs())
      w.bytes += accessBytes(prog, c, a);
    stats.ops += std::max<uint32_t>(1, c.source_ops());
    ++stats.planOps;
    ++stats.kernels;
    stats.trafficBytes += w.bytes;
    stats.work.push_back(w);
    if (!materializes(c.kind()))
      return;
    stats.minTrafficBytes += w.bytes;
    for (const plan::Access &a : c.inputs())
      counted.insert(a.buffer());
    for (const plan::Access &a : c.outputs())
      counted.insert(a.buffer());
  }
  /// A product and the epilogue a library runs with it: one launch
  /// reading the product's operands and the added tensor, writing the
  /// epilogue's result (the product itself never stored).
  void withEpilogue(const plan::LibraryEpilogue &e) {
    const plan::Compute &p = prog.instructions(int(e.product)).compute();
    KernelWork w;
    w.kind = p.kind();
    w.flops = p.flops();
    stats.ops += std::max<uint32_t>(1, p.source_ops());
    llvm::SmallVector<uint32_t, 6> touched;
    for (const plan::Access &a : p.inputs()) {
      w.bytes += accessBytes(prog, p, a);
      touched.push_back(a.buffer());
    }
    if (e.addend >= 0 && !llvm::is_contained(touched, uint32_t(e.addend))) {
      w.bytes += bufferBytes(prog, uint32_t(e.addend));
      touched.push_back(uint32_t(e.addend));
    }
    w.bytes += bufferBytes(prog, e.output);
    touched.push_back(e.output);
    const plan::GeneratedKernel &k = *e.kernel;
    for (uint32_t i = k.first(); i < k.first() + k.count(); ++i) {
      const plan::Compute &c = prog.instructions(int(i)).compute();
      w.flops += c.flops();
      stats.ops += std::max<uint32_t>(1, c.source_ops());
    }
    stats.planOps += 1 + k.count();
    ++stats.kernels;
    ++stats.fusedKernels;
    stats.trafficBytes += w.bytes;
    stats.minTrafficBytes += w.bytes;
    for (uint32_t b : touched)
      counted.insert(b);
    stats.work.push_back(w);
  }

  /// A kernel codegen generated: one launch for its computes, moving the
  /// bytes it loads and stores.
  void generated(const plan::GeneratedKernel &k) {
    KernelWork w;
    w.kind = "generated";
    for (uint32_t i = k.first(); i < k.first() + k.count(); ++i)
      if (i < uint32_t(prog.instructions_size())) {
        const plan::Compute &c = prog.instructions(int(i)).compute();
        w.flops += c.flops();
        stats.ops += std::max<uint32_t>(1, c.source_ops());
      }
    w.bytes = double(k.traffic_bytes());
    stats.planOps += k.count();
    ++stats.kernels;
    stats.fusedKernels += k.count() > 1;
    stats.trafficBytes += w.bytes;
    stats.work.push_back(w);
  }

  void collective(const plan::Collective &c) {
    double bytes = bufferBytes(prog, c.input()) + bufferBytes(prog, c.output());
    stats.trafficBytes += bytes;
    stats.minTrafficBytes += bytes;
    counted.insert(c.input());
    counted.insert(c.output());
  }

  const plan::DeviceProgram &prog;
  /// The products whose epilogue kernel a library runs with them, by
  /// instruction.
  std::map<uint32_t, plan::LibraryEpilogue> epilogues;
  ProgramStats stats;
  llvm::DenseSet<uint32_t> loaded, counted;
};
} // namespace

double ProgramStats::flops() const {
  double f = 0;
  for (const KernelWork &w : work)
    f += w.flops;
  return f;
}

double ProgramStats::rooflineSeconds(double peakFlops,
                                     double memoryBandwidth) const {
  if (peakFlops <= 0 || memoryBandwidth <= 0)
    return 0;
  double t = 0;
  for (const KernelWork &w : work)
    t += w.seconds(peakFlops, memoryBandwidth);
  return t;
}

namespace {
/// Per kernel kind, in \p s: its kernels, flops, traffic and roofline.
llvm::json::Object byKind(const ProgramStats &s, double peakFlops,
                          double memoryBandwidth) {
  struct Sum {
    int64_t kernels = 0;
    double flops = 0, bytes = 0, seconds = 0;
  };
  std::map<std::string, Sum> sums;
  for (const KernelWork &w : s.work) {
    Sum &sum = sums[w.kind];
    ++sum.kernels;
    sum.flops += w.flops;
    sum.bytes += w.bytes;
    if (peakFlops > 0 && memoryBandwidth > 0)
      sum.seconds += w.seconds(peakFlops, memoryBandwidth);
  }
  llvm::json::Object out;
  for (const auto &[kind, sum] : sums) {
    llvm::json::Object o{{"kernels", sum.kernels},
                         {"flops", sum.flops},
                         {"traffic_bytes", sum.bytes}};
    if (sum.seconds > 0)
      o["roofline_s"] = sum.seconds;
    out[kind] = std::move(o);
  }
  return out;
}
} // namespace

ProgramStats programStats(const plan::DeviceProgram &prog) {
  return Counter(prog).run();
}

llvm::json::Value planStatsJson(const plan::Plan &plan, double peakFlops,
                                double memoryBandwidth) {
  llvm::json::Array devices;
  for (const plan::DeviceProgram &prog : plan.programs()) {
    ProgramStats s = programStats(prog);
    llvm::json::Object d{{"device", int64_t(prog.device())},
                         {"ops", s.ops},
                         {"plan_ops", s.planOps},
                         {"kernels", s.kernels},
                         {"fused_kernels", s.fusedKernels},
                         {"flops", s.flops()},
                         {"traffic_bytes", s.trafficBytes},
                         {"min_traffic_bytes", s.minTrafficBytes}};
    if (double t = s.rooflineSeconds(peakFlops, memoryBandwidth))
      d["roofline_s"] = t;
    d["by_kind"] = byKind(s, peakFlops, memoryBandwidth);
    devices.push_back(std::move(d));
  }
  return llvm::json::Object{{"devices", std::move(devices)}};
}

} // namespace pax
