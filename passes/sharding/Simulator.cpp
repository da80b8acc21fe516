//===- Simulator.cpp - A strategy's step as a timeline of tasks -----------===//
#include "passes/sharding/Simulator.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <algorithm>

namespace pax {

Simulator::Simulator(const Module &m, const CostModel &model,
                     SimOptions options)
    : m(m), model(model), options(options),
      devices(int32_t(std::max(1u, model.getCluster().gpus))), uses(usesOf(m)),
      constants(constantOps(m)),
      returned(m.main.returns.begin(), m.main.returns.end()) {
  size_t n = m.main.ops.size();
  usesInto.resize(n);
  usesFrom.resize(n);
  for (unsigned u = 0; u < uses.size(); ++u) {
    usesInto[uses[u].consumer].push_back(u);
    usesFrom[uses[u].producer].push_back(u);
  }
}

/// A dependency on a section's output task (Simulator::outputTask).
static constexpr unsigned kOutput = ~0u;

/// Resources [first, first + n).
static std::vector<int32_t> range(int32_t first, int64_t n) {
  std::vector<int32_t> r;
  for (int64_t i = 0; i < n; ++i)
    r.push_back(first + int32_t(i));
  return r;
}

std::vector<int32_t> Simulator::computeOn(int64_t first, int64_t n) const {
  return options.overlap ? range(int32_t(first), n) : std::vector<int32_t>{0};
}

std::vector<int32_t> Simulator::linksOf(int64_t first, int64_t n) const {
  return options.overlap ? range(devices + int32_t(first), n)
                         : std::vector<int32_t>{0};
}

std::vector<int32_t> Simulator::collectiveOn(int64_t first, int64_t n,
                                             ReshardStep::Kind kind) const {
  std::vector<int32_t> r = linksOf(first, n);
  if (options.overlap && !model.getCluster().overlapCollectives &&
      kind != ReshardStep::Kind::SendRecv) {
    std::vector<int32_t> engines = computeOn(first, n);
    r.insert(r.begin(), engines.begin(), engines.end());
  }
  return r;
}

unsigned Simulator::add(unsigned i, SimTask t) {
  secs[i].push_back(std::move(t));
  return unsigned(secs[i].size() - 1);
}

std::pair<unsigned, unsigned>
Simulator::moves(unsigned i, const Use &use,
                 std::pair<unsigned, unsigned> ready) {
  const Func &f = m.main;
  const Op &p = *f.ops[use.producer], &q = *f.ops[use.consumer];
  if (constants.count(&p))
    return ready;
  const Config &pc = configs[use.producer], &qc = configs[use.consumer];
  int64_t po = offsets[use.producer], qo = offsets[use.consumer];
  auto [forward, backward] =
      model.edgePlans(placedAt(resultLayout(p, pc, use.result), po),
                      placedAt(operandLayout(q, qc, use.operand), qo),
                      *p.results[use.result].value);
  // The links of both ops' devices.
  int64_t first = std::min(po, qo),
          n = std::max(po + configDevices(pc), qo + configDevices(qc)) - first;
  for (const auto *plan : {&forward, &backward})
    for (const ReshardStep &s : *plan) {
      SimTask t;
      t.kind = SimTask::Kind::Communicate;
      t.name =
          (reshardStepName(s.kind) + " " + p.name() + " -> " + q.name()).str();
      t.resources = collectiveOn(first, n, s.kind);
      t.seconds = model.planSeconds(
          s, model.repeats(p.results[use.result].value.get()));
      t.deps = {ready};
      ready = {i, add(i, std::move(t))};
    }
  return ready;
}

unsigned Simulator::communicate(unsigned i, std::string name,
                                std::vector<int32_t> resources, double seconds,
                                unsigned after) {
  SimTask t;
  t.kind = SimTask::Kind::Communicate;
  t.name = std::move(name);
  t.resources = std::move(resources);
  t.seconds = seconds;
  t.deps = {{i, after}};
  return add(i, std::move(t));
}

void Simulator::reduceReturns(unsigned i, int64_t at, int64_t n) {
  const Op &op = *m.main.ops[i];
  if (constants.count(&op))
    return;
  for (unsigned r = 0; r < op.results.size(); ++r) {
    if (!returned.count(op.results[r].value.get()))
      continue;
    ReshardStep s = model.returnStep(op, configs[i], r);
    if (s.bytes == 0) // no partial sums: nothing runs
      continue;
    communicate(
        i, (reshardStepName(s.kind) + " " + op.name() + " (returned)").str(),
        collectiveOn(at, n, s.kind), model.stepSeconds(s), outputTask[i]);
  }
}

void Simulator::build(unsigned i) {
  const Op &op = *m.main.ops[i];
  secs[i].clear();
  // The edges in from earlier ops. The producer's output is whatever task
  // of its section it is when the schedule runs (a delta run may rebuild
  // that section).
  std::vector<std::pair<unsigned, unsigned>> inputs;
  for (unsigned u : usesInto[i])
    if (uses[u].producer < i)
      inputs.push_back(moves(i, uses[u], {uses[u].producer, kOutput}));
  OpCost cost = model.opCost(op, configs[i],
                             i < choices.size() ? choices[i] : OpChoice{});
  int64_t n = constants.count(&op) ? devices : configDevices(configs[i]);
  int64_t at = constants.count(&op) ? 0 : offsets[i];
  SimTask c;
  c.name = (op.name() + " " + configStr(op, configs[i])).str();
  if (at)
    c.name += " at " + std::to_string(at);
  // An op computed from constants runs on every device, each on its own
  // (it waits for no other device's work, as a plan runs it); without
  // overlap everything runs on the one resource.
  if (!constants.count(&op) || !options.overlap)
    c.resources = computeOn(at, n);
  c.seconds = cost.compute;
  c.deps = inputs;
  unsigned computed = add(i, std::move(c)), last = computed;
  // Reductions inside the op (normalization statistics): its result waits
  // for them.
  double inside = cost.communication - cost.gradientSync;
  if (inside > 0)
    last = communicate(i, (op.name() + " (inside)").str(),
                       collectiveOn(at, n, ReshardStep::Kind::AllReduce),
                       inside, computed);
  outputTask[i] = last;
  // The gradient synchronization of its replicated weights: nothing waits
  // for it, so it overlaps what follows on other devices (blocking, its
  // own devices' compute waits for it).
  if (cost.gradientSync > 0)
    communicate(i, (op.name() + " (gradient sync)").str(),
                collectiveOn(at, n, ReshardStep::Kind::AllReduce),
                cost.gradientSync, computed);
  // Its results read by earlier ops in the next step (a training step's
  // updates): moved after it; nothing in this step waits for them.
  for (unsigned u : usesFrom[i])
    if (uses[u].consumer <= i)
      moves(i, uses[u], {i, last});
  reduceReturns(i, at, n);
}

void Simulator::schedule(unsigned from) {
  std::vector<double> free =
      options.delta ? freeBefore[from]
                    : std::vector<double>(size_t(resourceCount()), 0.0);
  // The latest end before section `from`, kept per section, so a delta run
  // reads nothing before it.
  double most = options.delta && from > 0 ? endBefore[from] : 0;
  for (unsigned s = from; s < secs.size(); ++s) {
    if (options.delta) {
      freeBefore[s] = free;
      endBefore[s] = most;
    }
    for (SimTask &t : secs[s]) {
      double start = 0;
      for (auto [ds, di] : t.deps)
        start =
            std::max(start, secs[ds][di == kOutput ? outputTask[ds] : di].end);
      for (int32_t r : t.resources)
        start = std::max(start, free[size_t(r)]);
      t.start = start;
      t.end = start + t.seconds;
      for (int32_t r : t.resources)
        free[size_t(r)] = t.end;
      most = std::max(most, t.end);
    }
  }
  makespan = most;
}

double Simulator::simulate(llvm::ArrayRef<Config> cs,
                           llvm::ArrayRef<int64_t> os) {
  size_t n = m.main.ops.size();
  configs.assign(cs.begin(), cs.end());
  if (os.empty())
    offsets.assign(n, 0);
  else
    offsets.assign(os.begin(), os.end());
  secs.assign(n, {});
  outputTask.assign(n, 0);
  if (options.delta) {
    freeBefore.assign(std::max<size_t>(n, 1),
                      std::vector<double>(size_t(resourceCount()), 0.0));
    endBefore.assign(std::max<size_t>(n, 1), 0.0);
  }
  for (unsigned i = 0; i < n; ++i)
    build(i);
  if (n)
    schedule(0);
  else
    makespan = 0;
  return makespan;
}

double Simulator::change(unsigned i, const Config &c, int64_t offset) {
  assert(options.delta && "change() needs SimOptions::delta");
  configs[i] = c;
  offsets[i] = offset;
  // Op i's section holds its compute, its edges from earlier ops and to
  // earlier ops (next-step readers); a later op's section its edge from or
  // to op i.
  build(i);
  for (unsigned u : usesFrom[i])
    if (uses[u].consumer > i)
      build(uses[u].consumer);
  for (unsigned u : usesInto[i])
    if (uses[u].producer > i)
      build(uses[u].producer);
  schedule(i);
  return makespan;
}

void Simulator::writeTrace(llvm::raw_ostream &os) const {
  llvm::json::Object trace{{"traceEvents", traceEvents()},
                           {"displayTimeUnit", "ms"}};
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(trace))) << "\n";
}

llvm::json::Array Simulator::traceEvents() const {
  llvm::json::Array events;
  for (int32_t r = 0; r < resourceCount(); ++r) {
    std::string name = !options.overlap ? "step"
                       : r < devices
                           ? "GPU " + std::to_string(r)
                           : "GPU " + std::to_string(r - devices) + " links";
    events.push_back(
        llvm::json::Object{{"name", "thread_name"},
                           {"ph", "M"},
                           {"pid", 0},
                           {"tid", r},
                           {"args", llvm::json::Object{{"name", name}}}});
    if (!options.overlap)
      break;
  }
  for (const auto &sec : secs)
    for (const SimTask &t : sec)
      for (int32_t r : t.resources)
        events.push_back(llvm::json::Object{
            {"name", t.name},
            {"cat",
             t.kind == SimTask::Kind::Compute ? "compute" : "communication"},
            {"ph", "X"},
            {"pid", 0},
            {"tid", r},
            {"ts", t.start * 1e6},
            {"dur", t.seconds * 1e6}});
  return events;
}

} // namespace pax
