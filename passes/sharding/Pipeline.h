//===- Pipeline.h - Stages, microbatches and schedules ----------*- C++ -*-===//
//
// Pipeline parallelism's outer search (Alpa's inter-op pass, on uniform
// submeshes): a model's ops, grouped into layers in program order (cuts
// that only the layer's output crosses), are cut into S contiguous stages;
// each stage runs on its own submesh of N / S devices with the intra-op
// strategy the per-layer costs were priced with, and a step runs M
// microbatches through the stages on a schedule:
//
// - GPipe: every microbatch's forward through every stage, then every
//   backward; a stage keeps the activations of all M microbatches.
// - 1F1B (PipeDream-flush, Megatron's default): after a warm-up each stage
//   alternates one forward and one backward; stage s (from 0) keeps at
//   most S - s microbatches' activations.
// - Interleaved 1F1B (Megatron-LM's virtual pipeline): the layers are cut
//   into S x v stages, rank r running stages r, r + S, ... (v chunks);
//   1F1B over the chunks, M a multiple of S, shrinks the fill and drain
//   to one chunk per rank at the price of v times the sends.
//
// Both take the same time: each stage s spends t_s per microbatch (its
// layers' forward and backward, and sending its output on), so the step is
//
//   T = sum_s t_s + (M - 1) max_s t_s + sync,
//
// the pipeline's fill and drain plus M - 1 beats of its slowest stage, and
// the first stage's gradient reduction over its data-parallel replicas,
// which no later work hides. A stage's peak is its layers' static bytes
// (weights, gradients, optimizer state) plus the activations its schedule
// keeps in flight. Since sum_s t_s is the same for every cut, the best
// cut minimizes the slowest stage under the memory limit: planStages
// solves that exactly, by a DP over (stages, layers) (O(S L^2)), then
// among the cuts as fast picks the most even (least sum of the stages'
// squared work, sends left out: a second DP capped at the first's
// optimum). Given the layers priced under several intra-op strategies
// (LayerVariants), each stage takes the fastest that fits its own peak.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pax {

enum class Schedule : uint8_t { GPipe, OneFOneB, Interleaved };

llvm::StringRef scheduleName(Schedule s);
/// "1f1b", "interleaved of 3 chunks": a schedule's name and its chunks
/// per rank where more than one.
std::string scheduleText(llvm::StringRef schedule, int64_t chunks);
std::optional<Schedule> parseSchedule(llvm::StringRef name);

/// One layer on one device of its stage's submesh, per microbatch.
struct LayerCost {
  /// Its forward and backward (recomputation included), seconds.
  double seconds = 0;
  /// Of seconds, the forward pass's.
  double forwardSeconds = 0;
  /// Weights, gradients and optimizer state it keeps.
  double staticBytes = 0;
  /// Activations one microbatch leaves for its backward.
  double activationBytes = 0;
  /// Sending its output to the next stage and its gradient back, seconds
  /// (both ways), where a stage ends with it (0 for the last layer).
  double sendSeconds = 0;
  /// Reducing its gradients over the stage's data-parallel replicas, once
  /// per step.
  double syncSeconds = 0;
};

/// The layers priced under several intra-op strategies (variants[v][l]:
/// layer l under strategy v; every variant the same layers): a stage takes
/// the variant whose time is least (per microbatch, its once-a-step sync
/// shared over the microbatches) among those its peak fits under, so each
/// stage has its own strategy (a first stage that keeps many microbatches
/// in flight recomputes, a last one need not).
struct LayerVariants {
  std::vector<std::vector<LayerCost>> variants;
  size_t layers() const { return variants.empty() ? 0 : variants[0].size(); }
};

/// One stage: layers [first, last) on their submesh.
struct PipelineStage {
  int first = 0, last = 0;
  double seconds = 0;        ///< per microbatch: its layers, then its send
  double forwardSeconds = 0; ///< of its layers' time, the forward pass's
  double sendSeconds = 0;    ///< its output on and its gradient back
  double syncSeconds = 0;    ///< its gradients' sync, once per step
  double peakBytes = 0;      ///< static bytes and the activations in flight
  int64_t inFlight = 0;      ///< microbatches whose activations it keeps
  int variant = 0;           ///< the LayerVariants' strategy it takes
};

struct PipelinePlan {
  /// In model order; interleaved, stages x chunks of them, stage s on
  /// rank s % ranks().
  std::vector<PipelineStage> stages;
  int64_t microbatches = 1;
  Schedule schedule = Schedule::OneFOneB;
  /// Stages per rank (interleaved: Megatron's virtual pipeline size).
  int64_t chunks = 1;
  int64_t ranks() const { return int64_t(stages.size()) / chunks; }
  /// pipelineStep's formula, and the schedule simulated event by event
  /// (simulatePipeline).
  double stepSeconds = 0, simulatedSeconds = 0;
  /// The share of the step a stage idles: fill and drain.
  double bubble = 0;
  /// The simulated step of the exact cut that refineCut's chain moved,
  /// where it found a faster one (0: the cut is the exact one).
  double refinedFrom = 0;
};

/// The step of \p stages run by schedule \p k over \p m microbatches,
/// simulated event by event: each stage runs its microbatches' forward and
/// backward passes in the schedule's order (GPipe: every forward, then
/// every backward; 1F1B: S - s - 1 forwards, then one forward and one
/// backward in turn, then the remaining backwards), each waiting for its
/// input (the previous stage's forward, the next stage's backward), sent
/// over the link between the two stages (one transfer at a time each way;
/// transfers overlap computing); each stage then syncs its gradients. The
/// step ends with the last sync.
double simulatePipeline(llvm::ArrayRef<PipelineStage> stages, int64_t m,
                        Schedule k, int64_t chunks = 1);

/// When each pass of simulatePipeline's run starts: stage s's forward and
/// backward passes of microbatch k at s * m + k (stages are virtual under
/// Interleaved: stage s runs on rank s % (stages / chunks)).
struct PassTimes {
  std::vector<double> forward, backward;
};
PassTimes simulatePasses(llvm::ArrayRef<PipelineStage> stages, int64_t m,
                         Schedule k, int64_t chunks = 1);

/// \p plan's schedule as Chrome trace events under process \p pid: a
/// thread per stage, each pass (`F k`, `B k`) where simulatePasses starts
/// it, each stage's gradient sync after its last pass.
llvm::json::Array pipelineTraceEvents(const PipelinePlan &plan, int pid);

/// The microbatches stage \p s of \p stages keeps in flight under \p k
/// with \p m microbatches.
int64_t inFlight(Schedule k, int64_t s, int64_t stages, int64_t m,
                 int64_t chunks = 1);

/// The step of \p stages (seconds each per microbatch) with \p m
/// microbatches and the first stage's gradient sync \p sync (interleaved,
/// \p chunks stages per rank: M times the busiest rank's chunks, plus one
/// chunk's fill per rank after the first).
double pipelineStep(llvm::ArrayRef<PipelineStage> stages, int64_t m,
                    double sync, int64_t chunks = 1);

/// The cut of \p layers into \p stages contiguous stages whose slowest
/// stage is fastest, every stage's peak within \p limit bytes (0: none),
/// for \p m microbatches on schedule \p k; an error when no cut fits.
/// Interleaved (\p chunks of at least 2): \p stages x \p chunks stages,
/// each within its share of the limit and every rank's together within
/// it.
llvm::Expected<PipelinePlan> planStages(llvm::ArrayRef<LayerCost> layers,
                                        int64_t stages, int64_t m, Schedule k,
                                        double limit, int64_t chunks = 1);
/// The same over \p layers' variants: each stage of each cut takes its
/// fastest variant that fits (LayerVariants; exact for the slowest stage
/// given that choice, which is each stage's own).
llvm::Expected<PipelinePlan> planStages(const LayerVariants &layers,
                                        int64_t stages, int64_t m, Schedule k,
                                        double limit, int64_t chunks = 1);

/// Megatron-LM's cut: \p stages stages (interleaved, \p stages x \p
/// chunks) of an equal number of layers (the first stages one more where
/// they do not divide the count), for comparison; its peaks are not
/// checked against a limit (ranksFit).
llvm::Expected<PipelinePlan> evenStages(llvm::ArrayRef<LayerCost> layers,
                                        int64_t stages, int64_t m, Schedule k,
                                        int64_t chunks = 1);

/// FlexFlow's MCMC over \p plan's stage boundaries (its layer costs
/// \p layers): \p steps proposals, each moving one boundary by one layer
/// (every stage keeping a layer, every stage and rank within \p limit),
/// taken by simulatePipeline's step (a fraction f slower with probability
/// exp(-50 f)); the fastest simulated cut seen, \p plan where none is
/// faster. planStages' cut is exact for the slowest stage; the schedule's
/// run can still gain from another (a stage slow forward before one slow
/// backward).
PipelinePlan refineCut(llvm::ArrayRef<LayerCost> layers,
                       const PipelinePlan &plan, double limit, unsigned steps,
                       uint64_t seed = 1);
/// The same over \p layers' variants (each stage its fastest that fits).
PipelinePlan refineCut(const LayerVariants &layers, const PipelinePlan &plan,
                       double limit, unsigned steps, uint64_t seed = 1);

/// Whether every rank of \p plan (its chunks together) peaks within
/// \p limit bytes (0: none).
bool ranksFit(const PipelinePlan &plan, double limit);

struct Func;
class Op;
class Value;

/// A run of ops [first, last) of a function in program order that a
/// pipeline stage may begin or end at: one activation (\p output, null
/// after the last) is all that crosses its end.
struct LayerSpan {
  size_t first = 0, last = 0;
  const Value *output = nullptr;
};

/// Cuts \p f's ops where a single activation crosses (an argument or an
/// op's result read after the cut; the values \p everywhere names, which
/// every device holds whole, as the results of ops computed from constants
/// and the small replicated inputs, do not count): a transformer's
/// residual stream between its blocks, a CNN's feature map between its
/// blocks. More than \p most runs are merged evenly (fewer, longer
/// layers).
std::vector<LayerSpan>
findLayers(const Func &f, llvm::function_ref<bool(const Value *)> everywhere,
           size_t most = 256);

} // namespace pax
