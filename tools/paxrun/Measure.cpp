//===- Measure.cpp - What the machine paxrun runs on costs ----------------===//
#include "tools/paxrun/Measure.h"

#include "codegen/plan/CostDb.h"
#include "codegen/plan/PlanFile.h"
#include "runtime/Profile.h"
#include "tools/paxrun/Feed.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <map>
#include <optional>
#include <unistd.h>

namespace pax {

Feed &fillFeed() {
  static onnx::ModelProto none;
  static std::vector<runtime::Tensor> noInputs;
  static Feed feed(none, "", noInputs, nullptr);
  return feed;
}

static llvm::Error writeJson(llvm::StringRef path, llvm::json::Value v,
                             llvm::StringRef option) {
  if (auto err = writeFileBytes(path, llvm::formatv("{0:2}\n", v).str(),
                                /*text=*/true))
    return llvm::createStringError(option + ": " +
                                   llvm::toString(std::move(err)));
  return llvm::Error::success();
}

/// What a compute is, for people: kind, kernel and local iteration space.
static std::string describe(const plan::Compute &c) {
  std::string s = c.kind() + " (" + c.kernel() + ") [";
  for (int i = 0; i < c.iters_size(); ++i)
    s += (i ? ", " : "") + c.iters(i).name() + ": " +
         std::to_string(c.iters(i).extent()) +
         (c.iters(i).kind() == plan::IterDim::RED ? " red" : "");
  return s + "]";
}

llvm::Error writeCostDb(const plan::Plan &probe, Feed &feed,
                        runtime::Device &device, unsigned runs,
                        llvm::StringRef backend, unsigned threads,
                        llvm::StringRef path) {
  if (!probe.probe() || probe.programs_size() != 1)
    return llvm::createStringError("--write-cost-db: not a cost probe");
  const plan::DeviceProgram &prog = probe.programs(0);
  std::map<std::string, std::string> what;
  for (const plan::Instruction &inst : prog.instructions())
    if (inst.has_compute() && !inst.compute().cost_key().empty())
      what.emplace(inst.compute().cost_key(), describe(inst.compute()));
  std::vector<runtime::Tensor> buffers;
  runtime::DeviceStats stats;
  runtime::setKernelTiming(true);
  for (unsigned r = 0; r <= runs; ++r) {
    // The first run warms up (allocations, caches, library handles).
    runtime::setKernelProfiling(r ? runtime::ProfileBy::CostKey
                                  : runtime::ProfileBy::Off);
    if (r == 1)
      runtime::resetKernelSeconds();
    if (auto err = runtime::runDevice(probe, prog, feed, nullptr, device,
                                      buffers, stats))
      return err;
  }
  runtime::setKernelProfiling(runtime::ProfileBy::Off);
  runtime::setKernelTiming(false);
  CostDb db;
  db.backend = backend.str();
  db.threads = threads;
  db.runs = runs;
  for (const runtime::KernelProfileEntry &e : runtime::kernelProfile()) {
    auto it = what.find(e.kind);
    if (it == what.end() || e.calls == 0)
      continue;
    db.ops.try_emplace(
        e.kind,
        CostDb::Entry{it->second, e.seconds / double(e.calls), e.calls});
  }
  runtime::resetKernelSeconds();
  if (path.empty()) // another MPI rank: rank 0 writes
    return llvm::Error::success();
  if (auto err = writeJson(path, costDbToJson(db), "--write-cost-db"))
    return err;
  double total = 0;
  for (const auto &e : db.ops)
    total += e.second.seconds;
  llvm::errs() << llvm::formatv(
      "paxrun: wrote {0}: {1} op blocks measured on {2} ({3} run(s) after a "
      "warm-up; {4:F6} s for one of each)\n",
      path, db.ops.size(), backend, runs, total);
  return llvm::Error::success();
}

namespace {
/// A plan under construction: one program per device, buffers laid out
/// one after another in each arena.
struct ProbeBuilder {
  plan::Plan p;

  explicit ProbeBuilder(unsigned devices, unsigned perNode) {
    p.set_model("(probe)");
    p.set_devices(devices);
    p.set_devices_per_node(perNode);
    for (unsigned d = 0; d < devices; ++d)
      p.add_programs()->set_device(d);
  }

  uint32_t buffer(unsigned d, std::vector<int64_t> shape,
                  std::vector<int64_t> origin) {
    plan::DeviceProgram &prog = *p.mutable_programs(int(d));
    plan::Buffer &b = *prog.add_buffers();
    b.set_id(uint32_t(prog.buffers_size() - 1));
    b.set_dtype(plan::F32);
    int64_t elems = 1;
    for (size_t i = 0; i < shape.size(); ++i) {
      b.add_shape(shape[i]);
      b.add_origin(origin[i]);
      elems *= shape[i];
    }
    b.set_offset(prog.arena_bytes());
    prog.set_arena_bytes(prog.arena_bytes() + (elems * 4 + 63) / 64 * 64);
    return b.id();
  }

  void fill(unsigned d, uint32_t buf, std::vector<int64_t> global,
            std::vector<int64_t> offset) {
    plan::LoadWeight &l =
        *p.mutable_programs(int(d))->add_instructions()->mutable_load();
    l.set_tensor("(fill)");
    l.set_source(plan::LoadWeight::FILL);
    l.set_fill(1);
    for (int64_t s : global)
      l.add_global_shape(s);
    for (int64_t o : offset)
      l.add_offset(o);
    l.set_buffer(buf);
  }
};

/// A one-dim box.
void setBox(plan::Box &b, int64_t lo, int64_t size) {
  b.add_lo(lo);
  b.add_size(size);
}

/// The sizes of the link probe, f32 elements (4 KiB to 8 MiB).
constexpr int64_t kLinkSizes[] = {1 << 10, 1 << 13, 1 << 16,
                                  1 << 18, 1 << 20, 1 << 21};
/// Calls of each collective.
constexpr int kLinkRepeats = 5;
} // namespace

namespace {
/// A 2-D box: rows [r0, r0 + rows), columns [c0, c0 + cols).
struct Box2 {
  int64_t r0, rows, c0, cols;
};

/// The link probe's patterns over an R x C f32 tensor: what each device
/// holds before and after.
struct LinkPattern {
  const char *name;
  plan::Collective::Kind kind;
  bool reduce;
  Box2 (*in)(int64_t d, int64_t n, int64_t rows, int64_t cols);
  Box2 (*out)(int64_t d, int64_t n, int64_t rows, int64_t cols);
};

Box2 whole(int64_t, int64_t, int64_t rows, int64_t cols) {
  return {0, rows, 0, cols};
}
Box2 rowBlock(int64_t d, int64_t n, int64_t rows, int64_t cols) {
  return {d * rows / n, rows / n, 0, cols};
}
Box2 colBlock(int64_t d, int64_t n, int64_t rows, int64_t cols) {
  return {0, rows, d * cols / n, cols / n};
}

/// Partial sums reduced, blocks of rows gathered (contiguous), blocks of
/// columns gathered (strided, as a split inner dim is), rows traded for
/// columns.
constexpr LinkPattern kLinkPatterns[] = {
    {"all_reduce", plan::Collective::ALL_REDUCE, true, whole, whole},
    {"all_gather of rows", plan::Collective::ALL_GATHER, false, rowBlock,
     whole},
    {"all_gather of columns", plan::Collective::ALL_GATHER, false, colBlock,
     whole},
    {"all_to_all", plan::Collective::ALL_TO_ALL, false, rowBlock, colBlock},
};
} // namespace

plan::Plan linkProbePlan(unsigned devices, unsigned perNode) {
  ProbeBuilder b(devices, perNode);
  plan::Group &g = *b.p.add_groups();
  g.set_id(0);
  for (unsigned d = 0; d < devices; ++d)
    g.add_devices(d);
  auto setBox2 = [](plan::Box &box, const Box2 &x) {
    setBox(box, x.r0, x.rows);
    box.add_lo(x.c0);
    box.add_size(x.cols);
  };
  for (int64_t elems : kLinkSizes) {
    // Columns of 64 devices' worth; rows a multiple of the devices.
    int64_t cols = 64 * devices;
    int64_t rows = std::max<int64_t>(1, elems / cols / devices) * devices;
    for (const LinkPattern &pat : kLinkPatterns) {
      plan::Exchange &x = *b.p.add_exchanges();
      x.set_kind(pat.kind);
      x.set_reduce(pat.reduce);
      // The cost model's bytes: the buffer of an all-reduce, the gathered
      // output of an all-gather, a member's buffer of an all-to-all.
      int64_t bytes = rows * cols * 4;
      x.set_predicted_bytes(
          pat.kind == plan::Collective::ALL_TO_ALL ? bytes / devices : bytes);
      x.set_what(std::string(pat.name) + " of " + std::to_string(bytes) +
                 " bytes");
      for (unsigned d = 0; d < devices; ++d) {
        setBox2(*x.add_in(), pat.in(d, devices, rows, cols));
        setBox2(*x.add_out(), pat.out(d, devices, rows, cols));
      }
      for (unsigned d = 0; d < devices; ++d) {
        Box2 i = pat.in(d, devices, rows, cols),
             o = pat.out(d, devices, rows, cols);
        uint32_t in = b.buffer(d, {i.rows, i.cols}, {i.r0, i.c0});
        uint32_t out = b.buffer(d, {o.rows, o.cols}, {o.r0, o.c0});
        b.fill(d, in, {rows, cols}, {i.r0, i.c0});
        for (int r = 0; r < kLinkRepeats; ++r) {
          plan::Collective &c = *b.p.mutable_programs(int(d))
                                     ->add_instructions()
                                     ->mutable_collective();
          c.set_kind(pat.kind);
          c.set_group(0);
          c.set_input(in);
          c.set_output(out);
          c.set_exchange(uint32_t(b.p.exchanges_size() - 1));
        }
      }
    }
  }
  return std::move(b.p);
}

plan::Plan gemmProbePlan(int64_t n) {
  ProbeBuilder b(1, 1);
  uint32_t x = b.buffer(0, {n, n}, {0, 0}), y = b.buffer(0, {n, n}, {0, 0}),
           z = b.buffer(0, {n, n}, {0, 0});
  b.fill(0, x, {n, n}, {0, 0});
  b.fill(0, y, {n, n}, {0, 0});
  plan::Compute &c =
      *b.p.mutable_programs(0)->add_instructions()->mutable_compute();
  c.set_kind("matmul");
  c.set_kernel("gemm");
  c.set_name("(gemm probe)");
  for (auto [name, kind] :
       {std::pair{"m", plan::IterDim::PAR}, std::pair{"n", plan::IterDim::PAR},
        std::pair{"k", plan::IterDim::RED}}) {
    plan::IterDim &it = *c.add_iters();
    it.set_name(name);
    it.set_extent(n);
    it.set_global_extent(n);
    it.set_kind(kind);
  }
  auto access = [](plan::Access &a, uint32_t buf, unsigned d0, unsigned d1) {
    a.set_buffer(buf);
    for (unsigned d : {d0, d1}) {
      plan::AccessExpr &e = *a.add_exprs();
      e.set_kind(plan::AccessExpr::AFFINE);
      e.add_dims(d);
      e.set_stride(1);
      e.set_dilation(1);
    }
  };
  access(*c.add_inputs(), x, 0, 2);
  access(*c.add_inputs(), y, 2, 1);
  access(*c.add_outputs(), z, 0, 1);
  return std::move(b.p);
}

/// Solves the k x k system \p a x = \p b (k <= 3) by Gaussian elimination
/// with partial pivoting; false when singular.
static bool solve(double a[3][3], double b[3], int k, double x[3]) {
  for (int c = 0; c < k; ++c) {
    int p = c;
    for (int r = c + 1; r < k; ++r)
      if (std::fabs(a[r][c]) > std::fabs(a[p][c]))
        p = r;
    if (std::fabs(a[p][c]) < 1e-300)
      return false;
    std::swap(a[p], a[c]);
    std::swap(b[p], b[c]);
    for (int r = c + 1; r < k; ++r) {
      double f = a[r][c] / a[c][c];
      for (int j = c; j < k; ++j)
        a[r][j] -= f * a[c][j];
      b[r] -= f * b[c];
    }
  }
  for (int c = k - 1; c >= 0; --c) {
    double v = b[c];
    for (int j = c + 1; j < k; ++j)
      v -= a[c][j] * x[j];
    x[c] = v / a[c][c];
  }
  return true;
}

llvm::Expected<LinkFit> fitLink(llvm::ArrayRef<LinkSample> samples) {
  for (const LinkSample &s : samples)
    if (!(s.seconds > 0))
      return llvm::createStringError("a collective took no measurable time");
  // Unknowns: latency, 1 / bandwidth, 1 / reduce bandwidth. Every subset
  // that keeps the bandwidth is fitted; the best without a negative value
  // wins.
  auto term = [](const LinkSample &s, int u) {
    return (u == 0 ? s.steps : u == 1 ? s.bytes : s.reduced) / s.seconds;
  };
  std::optional<LinkFit> best;
  for (unsigned mask : {7u, 3u, 6u, 2u}) {
    int use[3], k = 0;
    for (int u = 0; u < 3; ++u)
      if (mask >> u & 1)
        use[k++] = u;
    double a[3][3] = {}, b[3] = {}, x[3] = {};
    for (const LinkSample &s : samples)
      for (int i = 0; i < k; ++i) {
        b[i] += term(s, use[i]);
        for (int j = 0; j < k; ++j)
          a[i][j] += term(s, use[i]) * term(s, use[j]);
      }
    if (!solve(a, b, k, x))
      continue;
    double v[3] = {0, 0, 0};
    bool valid = true;
    for (int i = 0; i < k; ++i) {
      v[use[i]] = x[i];
      valid &= x[i] >= 0;
    }
    if (!valid || !(v[1] > 0))
      continue;
    double sq = 0;
    for (const LinkSample &s : samples) {
      double model = s.steps * v[0] + s.bytes * v[1] + s.reduced * v[2];
      sq += (model - s.seconds) * (model - s.seconds) / (s.seconds * s.seconds);
    }
    LinkFit fit{v[0], 1 / v[1], v[2] > 0 ? 1 / v[2] : 0,
                std::sqrt(sq / double(samples.size()))};
    if (!best || fit.rmsRelError < best->rmsRelError)
      best = fit;
  }
  if (!best)
    return llvm::createStringError(
        "the collectives' times do not grow with their size: no bandwidth "
        "fits them");
  return *best;
}

/// The samples of the link probe's trace: each exchange's mean time over
/// its calls on device 0, with the ring model's steps and bytes.
static llvm::Expected<std::vector<LinkSample>>
linkSamples(const plan::Plan &probe,
            llvm::ArrayRef<runtime::TraceEvent> trace) {
  const plan::DeviceProgram &prog = probe.programs(0);
  if (trace.size() != size_t(prog.instructions_size()))
    return llvm::createStringError(
        "the link probe's trace has " + std::to_string(trace.size()) +
        " events for " + std::to_string(prog.instructions_size()) +
        " instructions");
  // Each exchange's first call warms its buffers up and is not counted.
  std::map<uint32_t, std::pair<double, int>> perExchange;
  for (int i = 0; i < prog.instructions_size(); ++i)
    if (prog.instructions(i).has_collective()) {
      auto [it, first] = perExchange.try_emplace(
          prog.instructions(i).collective().exchange(), 0.0, 0);
      if (first)
        continue;
      it->second.first += trace[size_t(i)].end - trace[size_t(i)].start;
      ++it->second.second;
    }
  double n = probe.devices();
  std::vector<LinkSample> samples;
  for (auto &[x, t] : perExchange) {
    const plan::Exchange &e = probe.exchanges(int(x));
    // The ring model of Collectives.cpp on one node: an all-reduce is a
    // reduce-scatter and an all-gather, each n-1 steps of bytes/n; an
    // all-to-all n-1 steps of a member's bytes/n.
    double bytes = double(e.predicted_bytes());
    bool reduce = e.kind() == plan::Collective::ALL_REDUCE;
    double factor = reduce ? 2 : 1;
    samples.push_back({t.first / t.second, factor * (n - 1),
                       factor * (n - 1) / n * bytes,
                       reduce ? (n - 1) / n * bytes : 0});
  }
  return samples;
}

/// An error where \p devices on nodes of \p perNode cannot be measured
/// (--measure-links measures one node's links, of two devices or more).
static llvm::Error checkLinkDevices(unsigned devices, unsigned perNode) {
  if (devices < 2)
    return llvm::createStringError(
        "--measure-links needs at least two devices (--devices=N, or "
        "mpirun -np N)");
  if (perNode != devices)
    return llvm::createStringError(
        "--measure-links measures the devices of one node; these " +
        std::to_string(devices) + " devices span nodes of " +
        std::to_string(perNode));
  return llvm::Error::success();
}

/// The link probe's collectives timed: a warm-up, then three measured
/// runs, each collective's fastest (a busy machine only ever adds time).
static llvm::Expected<std::vector<LinkSample>>
timedLinkSamples(const plan::Plan &links, const TracedRun &run) {
  std::optional<std::vector<LinkSample>> samples;
  for (int r = 0; r < 4; ++r) {
    auto t = run(links);
    if (!t)
      return t.takeError();
    if (r == 0)
      continue;
    auto got = linkSamples(links, *t);
    if (!got)
      return got.takeError();
    if (!samples)
      samples = std::move(*got);
    else
      for (size_t i = 0; i < samples->size(); ++i)
        (*samples)[i].seconds =
            std::min((*samples)[i].seconds, (*got)[i].seconds);
  }
  return std::move(*samples);
}

/// The side of the matrix product measureLinks times.
constexpr int64_t kLinkGemm = 512;

/// Each device's rate, every device multiplying a kLinkGemm^3 product at
/// once (under MPI each rank runs the plan's program 0 alone): FLOP/s,
/// after a warm-up the faster of two runs.
static llvm::Expected<double>
allDevicesFlops(unsigned devices, unsigned perNode, const TracedRun &run) {
  plan::Plan gemm = gemmProbePlan(kLinkGemm);
  ProbeBuilder all(devices, perNode);
  for (unsigned d = 1; d < devices; ++d)
    *all.p.mutable_programs(int(d)) = gemm.programs(0);
  *all.p.mutable_programs(0) = gemm.programs(0);
  for (unsigned d = 0; d < devices; ++d)
    all.p.mutable_programs(int(d))->set_device(d);
  double gemmSeconds = 0;
  for (int r = 0; r < 3; ++r) {
    auto t = run(all.p);
    if (!t)
      return t.takeError();
    if (r > 0) // after a warm-up, the faster of two
      gemmSeconds =
          r == 1 ? t->back().end - t->back().start
                 : std::min(gemmSeconds, t->back().end - t->back().start);
  }
  return 2.0 * kLinkGemm * kLinkGemm * kLinkGemm / std::max(gemmSeconds, 1e-9);
}

/// The measured cluster's JSON: \p devices on one node of \p perNode, the
/// link \p fit, \p flops per device, the machine's memory shared out.
static llvm::json::Object measuredCluster(unsigned devices, unsigned perNode,
                                          const LinkFit &fit, double flops) {
  double memory = double(sysconf(_SC_PHYS_PAGES)) *
                  double(sysconf(_SC_PAGE_SIZE)) / double(perNode);
  auto link = [&] {
    return llvm::json::Object{{"bandwidth_gbps", fit.bandwidth / 1e9},
                              {"latency_us", fit.latency * 1e6}};
  };
  llvm::json::Object cluster{
      {"name", "measured"},
      {"gpus", int64_t(devices)},
      {"gpus_per_node", int64_t(perNode)},
      {"peak_tflops", flops / 1e12},
      {"memory_gib", memory / double(1u << 30)},
      {"intra_node", link()},
      // One node: nothing crosses nodes; the same link stands in.
      {"inter_node", link()}};
  if (fit.reduceBandwidth > 0)
    cluster["reduce_gbps"] = fit.reduceBandwidth / 1e9;
  return cluster;
}

llvm::Error measureLinks(unsigned devices, unsigned perNode,
                         const TracedRun &run, llvm::StringRef path) {
  if (auto err = checkLinkDevices(devices, perNode))
    return err;
  plan::Plan links = linkProbePlan(devices, perNode);
  auto samples = timedLinkSamples(links, run);
  if (!samples)
    return samples.takeError();
  auto fit = fitLink(*samples);
  if (!fit)
    return fit.takeError();
  auto flops = allDevicesFlops(devices, perNode, run);
  if (!flops)
    return flops.takeError();
  if (path.empty()) // another MPI rank: rank 0 writes
    return llvm::Error::success();
  if (auto err =
          writeJson(path, measuredCluster(devices, perNode, *fit, *flops),
                    "--measure-links"))
    return err;
  llvm::errs() << llvm::formatv(
      "paxrun: wrote {0}: {1} devices on one node: link {2:F3} GB/s, "
      "{3:F2} us per step, partial sums added at {8:F3} GB/s (0: free) (fit "
      "to {4} all-reduces, all-gathers and all-to-alls, {5:F1}% rms error); "
      "{6:F1} "
      "GFLOP/s per device (a {7}^3 f32 matrix product)\n",
      path, devices, fit->bandwidth / 1e9, fit->latency * 1e6, samples->size(),
      100 * fit->rmsRelError, *flops / 1e9, kLinkGemm,
      fit->reduceBandwidth / 1e9);
  return llvm::Error::success();
}

} // namespace pax
