//===- Simulator.h - A strategy's step as a timeline of tasks ---*- C++ -*-===//
//
// FlexFlow's execution simulator over paxc's cost model. A strategy becomes
// a task graph, op by op in program order: the moves of every edge into the
// op (the steps of planReshard, forward and, training, the gradient's way
// back: the cost model's edgePlans), the op's compute on the devices of its
// configuration, the communication inside it (normalization statistics,
// gradient synchronization) and the reduction of a returned result's
// partial sums. Each task runs on resources: a device's compute engine, or
// the links of the devices a collective spans. With overlap, compute and
// communication run on separate resources and tasks on disjoint resources
// run at once; without, every task runs on one resource, so the simulated
// step is the additive cost model's sum.
//
// How collectives share a device with its compute is the cluster's
// (Cluster::overlapCollectives). As paxrun runs a plan, each device executes
// its instructions in order (a thread, a CUDA stream): a collective holds
// its devices' compute engines as well as their links, while a
// point-to-point send holds only the links (its sender leaves the data with
// the transport and goes on; its receiver waits for it where it reads it).
// Where the runtime overlaps them (FlexFlow's assumption), a collective
// holds only the links.
//
// Scheduling is list scheduling in task order: a task starts when its
// inputs are ready and each of its resources has finished the tasks before
// it (FIFO per resource). The timeline is a function of the task list, so
// delta simulation (change: one op's configuration) rebuilds the tasks of
// the op and of the edges it touches and re-schedules from the first task
// that changed, from the resources' state saved there: its timeline is the
// full simulation's, to the bit.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/sharding/Solve.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace pax {

/// One task of a simulated step.
struct SimTask {
  enum class Kind : uint8_t { Compute, Communicate };
  Kind kind = Kind::Compute;
  std::string name;
  /// Resources: device d's compute engine is d, its links devices + d.
  std::vector<int32_t> resources;
  double seconds = 0;
  /// The tasks it waits for, as (section, index) pairs of earlier tasks;
  /// index ~0u is the section's output task (its op's result ready).
  std::vector<std::pair<unsigned, unsigned>> deps;
  double start = 0, end = 0; ///< set by scheduling
};

struct SimOptions {
  /// Compute and communication on separate resources, disjoint tasks at
  /// once; off: one resource, the additive cost.
  bool overlap = true;
  /// Keeps the resources' state before every section, for change()
  /// (sections x resources doubles).
  bool delta = true;
};

class Simulator {
public:
  Simulator(const Module &m, const CostModel &model, SimOptions options = {});

  /// Full simulation of \p configs (one per op of `@main`, in op order),
  /// each op on the devices from its offset in \p offsets (none: every op
  /// from device 0); returns the step's seconds.
  double simulate(llvm::ArrayRef<Config> configs,
                  llvm::ArrayRef<int64_t> offsets = {});
  /// Each op's levers (recomputation, ZeRO stage: Strategy::choices), in op
  /// order, for the simulations that follow; none: the defaults.
  void setChoices(std::vector<OpChoice> c) { choices = std::move(c); }
  /// Delta simulation: op \p op now runs in \p c from device \p offset
  /// (after simulate()).
  double change(unsigned op, const Config &c, int64_t offset = 0);

  /// The step's seconds (the last task's end).
  double seconds() const { return makespan; }
  /// The tasks, section by section (section i: op i's edges in, compute,
  /// communication, returns), with their start and end.
  const std::vector<std::vector<SimTask>> &sections() const { return secs; }
  /// The resources' count: devices compute engines, then devices links.
  int32_t resourceCount() const { return 2 * devices; }

  /// Writes the timeline as a Chrome / Perfetto trace (JSON): one row per
  /// device's compute engine and per device's links, times in microseconds.
  void writeTrace(llvm::raw_ostream &os) const;
  /// The trace's events (writeTrace's, under process 0).
  llvm::json::Array traceEvents() const;

private:
  /// Op \p op's section of tasks.
  void build(unsigned op);
  void schedule(unsigned from);
  /// The compute engines, and the links, of devices [first, first + n)
  /// (without overlap, the one resource).
  std::vector<int32_t> computeOn(int64_t first, int64_t n) const;
  std::vector<int32_t> linksOf(int64_t first, int64_t n) const;
  /// What a collective of kind \p kind over devices [first, first + n)
  /// holds: their links and, blocking, their compute engines.
  std::vector<int32_t> collectiveOn(int64_t first, int64_t n,
                                    ReshardStep::Kind kind) const;
  /// Appends \p t to section \p i; its index.
  unsigned add(unsigned i, SimTask t);
  /// The moves of \p use into section \p i, forward then the gradient's
  /// way back, each after the one before, the first after \p ready;
  /// returns the last.
  std::pair<unsigned, unsigned> moves(unsigned i, const Use &use,
                                      std::pair<unsigned, unsigned> ready);
  /// A communication task of section \p i after its task \p after.
  unsigned communicate(unsigned i, std::string name,
                       std::vector<int32_t> resources, double seconds,
                       unsigned after);
  /// The reductions of op \p i's returned results' partial sums.
  void reduceReturns(unsigned i, int64_t at, int64_t n);

  const Module &m;
  const CostModel &model;
  SimOptions options;
  int32_t devices;
  std::vector<Use> uses;
  std::vector<std::vector<unsigned>> usesInto; // op -> uses with it consumer
  std::vector<std::vector<unsigned>> usesFrom; // op -> uses with it producer
  llvm::DenseSet<const Op *> constants;
  llvm::DenseSet<const Value *> returned;
  std::vector<Config> configs;
  std::vector<int64_t> offsets;
  std::vector<OpChoice> choices;
  std::vector<std::vector<SimTask>> secs;
  /// Each section's last task that its op's consumers wait for.
  std::vector<unsigned> outputTask;
  /// The resources' free times before each section (for delta runs).
  std::vector<std::vector<double>> freeBefore;
  /// The latest task end before each section (for delta runs).
  std::vector<double> endBefore;
  double makespan = 0;
};

} // namespace pax
