//===- Pipeline.cpp - Stages, microbatches and schedules ------------------===//
#include "passes/sharding/Pipeline.h"

#include "ir/Module.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/FormatVariadic.h"

#include <string>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <tuple>

namespace pax {

llvm::StringRef scheduleName(Schedule s) {
  switch (s) {
  case Schedule::GPipe:
    return "gpipe";
  case Schedule::OneFOneB:
    return "1f1b";
  case Schedule::Interleaved:
    return "interleaved";
  }
  return "?";
}

std::string scheduleText(llvm::StringRef schedule, int64_t chunks) {
  return chunks > 1 ? llvm::formatv("{0} of {1} chunks", schedule, chunks).str()
                    : schedule.str();
}

std::optional<Schedule> parseSchedule(llvm::StringRef name) {
  if (name == "gpipe")
    return Schedule::GPipe;
  if (name == "1f1b")
    return Schedule::OneFOneB;
  if (name == "interleaved")
    return Schedule::Interleaved;
  return std::nullopt;
}

/// Interleaved 1F1B's warm-up on rank \p r of \p ranks with \p chunks
/// chunks each: the forwards it runs before its first backward.
static int64_t interleavedWarmUp(int64_t r, int64_t ranks, int64_t chunks,
                                 int64_t m) {
  return std::min((ranks - r - 1) * 2 + (chunks - 1) * ranks, m * chunks);
}

int64_t inFlight(Schedule k, int64_t s, int64_t stages, int64_t m,
                 int64_t chunks) {
  if (k == Schedule::Interleaved) {
    // The warm-up's forwards and the one after, spread over the chunks.
    int64_t ranks = stages / chunks;
    int64_t warm = interleavedWarmUp(s % ranks, ranks, chunks, m);
    return std::min(m, (warm + 1 + chunks - 1) / chunks);
  }
  return k == Schedule::GPipe ? m : std::min(m, stages - s);
}

namespace {

/// One pass of one microbatch on one (virtual) stage.
struct Pass {
  bool backward;
  int64_t microbatch;
  int64_t stage;
};

/// Rank \p r's passes in the order schedule \p k runs them, over \p ranks
/// ranks of \p chunks stages each (stage j on rank j % ranks). Interleaved
/// (Megatron-LM's): the k-th forward is of chunk (k / ranks) % chunks and
/// microbatch (k / (ranks chunks)) ranks + k % ranks, the k-th backward of
/// the chunks the other way round; \p m a multiple of \p ranks.
std::vector<Pass> passOrder(Schedule k, int64_t r, int64_t ranks,
                            int64_t chunks, int64_t m) {
  int64_t total = m * chunks;
  int64_t warm = k == Schedule::GPipe ? total
                 : k == Schedule::OneFOneB
                     ? std::min(ranks - r - 1, m)
                     : interleavedWarmUp(r, ranks, chunks, m);
  auto pass = [&](bool backward, int64_t i) {
    if (k != Schedule::Interleaved)
      return Pass{backward, i, r};
    int64_t chunk = (i / ranks) % chunks;
    if (backward)
      chunk = chunks - 1 - chunk;
    return Pass{backward, (i / (ranks * chunks)) * ranks + i % ranks,
                chunk * ranks + r};
  };
  std::vector<Pass> order;
  for (int64_t i = 0; i < warm; ++i)
    order.push_back(pass(false, i));
  for (int64_t i = 0; i < total; ++i) {
    if (warm + i < total)
      order.push_back(pass(false, warm + i));
    order.push_back(pass(true, i));
  }
  return order;
}

/// The event-by-event run of simulatePipeline: when each pass ends.
class PipelineRun {
public:
  PipelineRun(llvm::ArrayRef<PipelineStage> stages, int64_t m, Schedule k,
              int64_t chunks)
      : stages(stages), m(m), S(int64_t(stages.size())),
        R(S / std::max<int64_t>(1, chunks)), forwardEnd(size_t(S * m), -1),
        backwardEnd(size_t(S * m), -1), forwardArrive(size_t(S * m), -1),
        backwardArrive(size_t(S * m), -1), forwardStart(size_t(S * m), 0),
        backwardStart(size_t(S * m), 0), free(size_t(R), 0),
        linkForward(size_t(R), 0), linkBackward(size_t(R), 0),
        next(size_t(R), 0) {
    for (int64_t r = 0; r < R; ++r)
      orders.push_back(passOrder(k, r, R, S / R, m));
  }
  /// Runs every rank as far as its inputs allow; false when none moved.
  bool sweep() {
    bool moved = false;
    for (int64_t r = 0; r < R; ++r)
      while (next[size_t(r)] < orders[size_t(r)].size() && step(r))
        moved = true;
    return moved;
  }
  bool done() const {
    for (int64_t r = 0; r < R; ++r)
      if (next[size_t(r)] < orders[size_t(r)].size())
        return false;
    return true;
  }
  /// The step: each rank's last pass, then its stages' syncs.
  double end() const {
    std::vector<double> t(free);
    for (int64_t s = 0; s < S; ++s)
      t[size_t(s % R)] += stages[size_t(s)].syncSeconds;
    return *std::max_element(t.begin(), t.end());
  }
  /// When each pass started, per stage s and microbatch k at s * m + k.
  PassTimes starts() const { return {forwardStart, backwardStart}; }

private:
  /// Runs rank \p r's next pass if its input is there.
  bool step(int64_t r) {
    Pass p = orders[size_t(r)][next[size_t(r)]];
    int64_t s = p.stage;
    const PipelineStage &st = stages[size_t(s)];
    size_t at = size_t(s * m + p.microbatch);
    double ready = 0, length = st.forwardSeconds;
    if (!p.backward && s > 0)
      ready = forwardArrive[at - size_t(m)];
    if (p.backward) {
      length = st.seconds - st.sendSeconds - st.forwardSeconds;
      ready = s + 1 < S ? backwardArrive[at + size_t(m)] : forwardEnd[at];
    }
    if (ready < 0)
      return false;
    double end = std::max(ready, free[size_t(r)]) + length;
    free[size_t(r)] = end;
    (p.backward ? backwardStart : forwardStart)[at] = end - length;
    (p.backward ? backwardEnd : forwardEnd)[at] = end;
    // The result goes on over the link to the next stage's rank (a
    // gradient to the one before), one transfer at a time each way.
    if (!p.backward && s + 1 < S)
      forwardArrive[at] = linkForward[size_t(r)] =
          std::max(end, linkForward[size_t(r)]) + st.sendSeconds / 2;
    if (p.backward && s > 0) {
      size_t before = size_t((s - 1) % R);
      backwardArrive[at] = linkBackward[before] =
          std::max(end, linkBackward[before]) +
          stages[size_t(s - 1)].sendSeconds / 2;
    }
    ++next[size_t(r)];
    return true;
  }

  llvm::ArrayRef<PipelineStage> stages;
  int64_t m, S, R; ///< microbatches, (virtual) stages, ranks
  std::vector<double> forwardEnd, backwardEnd, forwardArrive, backwardArrive;
  std::vector<double> forwardStart, backwardStart;
  /// Per rank: when it is free; per link (from rank r on, into rank r
  /// back): when its next transfer each way may start.
  std::vector<double> free, linkForward, linkBackward;
  std::vector<size_t> next;
  std::vector<std::vector<Pass>> orders;
};

} // namespace

double simulatePipeline(llvm::ArrayRef<PipelineStage> stages, int64_t m,
                        Schedule k, int64_t chunks) {
  PipelineRun run(stages, m, k, chunks);
  while (!run.done())
    if (!run.sweep())
      return std::numeric_limits<double>::infinity(); // cannot happen
  return run.end();
}

PassTimes simulatePasses(llvm::ArrayRef<PipelineStage> stages, int64_t m,
                         Schedule k, int64_t chunks) {
  PipelineRun run(stages, m, k, chunks);
  while (!run.done() && run.sweep())
    ;
  return run.starts();
}

/// One complete event of a pipeline trace.
static llvm::json::Object traceEvent(std::string name, int pid, int64_t tid,
                                     double start, double seconds) {
  return llvm::json::Object{{"name", std::move(name)},
                            {"cat", "pipeline"},
                            {"ph", "X"},
                            {"pid", pid},
                            {"tid", tid},
                            {"ts", start * 1e6},
                            {"dur", seconds * 1e6}};
}

llvm::json::Array pipelineTraceEvents(const PipelinePlan &plan, int pid) {
  llvm::json::Array events;
  const auto &stages = plan.stages;
  int64_t m = plan.microbatches;
  PassTimes t = simulatePasses(stages, m, plan.schedule, plan.chunks);
  int64_t ranks = plan.ranks();
  for (size_t s = 0; s < stages.size(); ++s) {
    const PipelineStage &st = stages[s];
    int64_t tid = int64_t(s) % ranks;
    if (int64_t(s) < ranks)
      events.push_back(llvm::json::Object{
          {"name", "thread_name"},
          {"ph", "M"},
          {"pid", pid},
          {"tid", tid},
          {"args",
           llvm::json::Object{{"name", "stage " + std::to_string(s)}}}});
    // Interleaved: a rank's passes name their chunk.
    std::string chunk =
        plan.chunks > 1 ? " (chunk " + std::to_string(s / size_t(ranks)) + ")"
                        : std::string();
    double backward = st.seconds - st.sendSeconds - st.forwardSeconds;
    double last = 0;
    for (int64_t k = 0; k < m; ++k) {
      size_t at = s * size_t(m) + size_t(k);
      std::string mb = std::to_string(k) + chunk;
      events.push_back(
          traceEvent("F " + mb, pid, tid, t.forward[at], st.forwardSeconds));
      last = std::max(last, t.forward[at] + st.forwardSeconds);
      if (backward > 0) {
        events.push_back(
            traceEvent("B " + mb, pid, tid, t.backward[at], backward));
        last = std::max(last, t.backward[at] + backward);
      }
    }
    if (st.syncSeconds > 0)
      events.push_back(
          traceEvent("gradient sync" + chunk, pid, tid, last, st.syncSeconds));
  }
  return events;
}

double pipelineStep(llvm::ArrayRef<PipelineStage> stages, int64_t m,
                    double sync, int64_t chunks) {
  double sum = 0, slowest = 0;
  for (const PipelineStage &s : stages) {
    sum += s.seconds;
    slowest = std::max(slowest, s.seconds);
  }
  if (chunks <= 1)
    return sum + double(m - 1) * slowest + sync;
  // Interleaved: M passes of the busiest rank's chunks, and a fill and
  // drain of one chunk per rank.
  size_t ranks = stages.size() / size_t(chunks);
  std::vector<double> rank(ranks, 0);
  for (size_t s = 0; s < stages.size(); ++s)
    rank[s % ranks] += stages[s].seconds;
  return double(m) * *std::max_element(rank.begin(), rank.end()) +
         double(ranks - 1) * slowest + sync;
}

namespace {

/// Prefix sums of one variant's layer costs: a stage's totals in O(1).
struct Sums {
  explicit Sums(llvm::ArrayRef<LayerCost> layers) : layers(layers) {
    seconds.assign(layers.size() + 1, 0);
    forwards = statics = activations = syncs = seconds;
    for (size_t l = 0; l < layers.size(); ++l) {
      seconds[l + 1] = seconds[l] + layers[l].seconds;
      forwards[l + 1] = forwards[l] + layers[l].forwardSeconds;
      statics[l + 1] = statics[l] + layers[l].staticBytes;
      activations[l + 1] = activations[l] + layers[l].activationBytes;
      syncs[l + 1] = syncs[l] + layers[l].syncSeconds;
    }
  }
  /// Layers [a, b) as a stage keeping \p inFlight microbatches.
  PipelineStage stage(int a, int b, int64_t inFlight) const {
    PipelineStage st;
    st.first = a;
    st.last = b;
    st.sendSeconds =
        b < int(layers.size()) ? layers[size_t(b - 1)].sendSeconds : 0.0;
    st.seconds = seconds[size_t(b)] - seconds[size_t(a)] + st.sendSeconds;
    st.forwardSeconds = forwards[size_t(b)] - forwards[size_t(a)];
    st.syncSeconds = syncs[size_t(b)] - syncs[size_t(a)];
    st.inFlight = inFlight;
    st.peakBytes =
        statics[size_t(b)] - statics[size_t(a)] +
        double(inFlight) * (activations[size_t(b)] - activations[size_t(a)]);
    return st;
  }

  llvm::ArrayRef<LayerCost> layers;
  std::vector<double> seconds, forwards, statics, activations, syncs;
};

/// Every variant's sums: a stage's totals in O(variants), each stage the
/// fastest variant whose peak is within the stage limit.
class Prefix {
public:
  Prefix(const LayerVariants &layers, double stageLimit)
      : count(layers.layers()), limit(stageLimit) {
    for (const std::vector<LayerCost> &v : layers.variants)
      sums.emplace_back(v);
  }
  /// Layers [a, b) as stage \p s of \p stages (\p chunks per rank) of a
  /// step of \p m microbatches: the fastest variant that fits (its time
  /// per microbatch with its sync shared over them; ties: the least
  /// peak), else the one of least peak (which the caller finds does not
  /// fit).
  PipelineStage stage(int a, int b, int64_t s, int64_t stages, int64_t m,
                      Schedule k, int64_t chunks = 1) const {
    int64_t kept = inFlight(k, s, stages, m, chunks);
    std::optional<PipelineStage> best;
    for (size_t v = 0; v < sums.size(); ++v) {
      PipelineStage st = sums[v].stage(a, b, kept);
      st.variant = int(v);
      if (!best || better(st, *best, m))
        best = st;
    }
    return *best;
  }
  size_t layers() const { return count; }

private:
  bool fits(const PipelineStage &st) const {
    return limit <= 0 || st.peakBytes <= limit;
  }
  bool better(const PipelineStage &a, const PipelineStage &b, int64_t m) const {
    if (fits(a) != fits(b))
      return fits(a);
    if (!fits(a))
      return a.peakBytes < b.peakBytes;
    double ta = a.seconds + a.syncSeconds / double(m),
           tb = b.seconds + b.syncSeconds / double(m);
    return std::tie(ta, a.peakBytes) < std::tie(tb, b.peakBytes);
  }

  std::vector<Sums> sums;
  size_t count;
  double limit;
};

/// One variant of \p layers.
LayerVariants single(llvm::ArrayRef<LayerCost> layers) {
  return LayerVariants{{std::vector<LayerCost>(layers.begin(), layers.end())}};
}

/// The plan of \p stages (\p chunks per rank), its step and bubble.
PipelinePlan finish(std::vector<PipelineStage> stages, int64_t m, Schedule k,
                    int64_t chunks = 1) {
  PipelinePlan plan;
  plan.microbatches = m;
  plan.schedule = k;
  plan.chunks = chunks;
  size_t ranks = stages.size() / size_t(chunks);
  double sync = 0; // the first rank's
  for (size_t s = 0; s < stages.size(); s += ranks)
    sync += stages[s].syncSeconds;
  plan.stepSeconds = pipelineStep(stages, m, sync, chunks);
  plan.simulatedSeconds = simulatePipeline(stages, m, k, chunks);
  double work = 0;
  for (const PipelineStage &s : stages)
    work += double(m) * s.seconds;
  double span = plan.stepSeconds - sync;
  plan.bubble = span > 0 ? 1 - work / (double(ranks) * span) : 0.0;
  plan.stages = std::move(stages);
  return plan;
}

llvm::Error badShape(int64_t stages, int64_t chunks, size_t layers, int64_t m,
                     Schedule k) {
  if (chunks > 1 || k == Schedule::Interleaved)
    return llvm::createStringError(llvm::formatv(
        "an interleaved pipeline of {0} stage(s) of {1} chunk(s) over {2} "
        "layer(s) with {3} microbatch(es): needs at least 2 chunks, stages "
        "times chunks at most the layers, and microbatches a multiple of "
        "the stages",
        stages, chunks, layers, m));
  return llvm::createStringError(
      llvm::Twine("a pipeline of ") + llvm::Twine(stages) + " stage(s) over " +
      llvm::Twine(layers) + " layer(s) with " + llvm::Twine(m) +
      " microbatch(es): needs 1 to " + llvm::Twine(layers) +
      " stages and at least one microbatch");
}

} // namespace

namespace {

/// The DP of planStages: best[s][l] is the slowest of stages 0..s-1
/// covering layers [0, l), each within the limit (with a \p cap, the sum
/// of their layers' times squared, sends left out, each stage within the
/// cap); from[s][l] where stage
/// s-1 begins (-1: no such cut).
struct CutTable {
  std::vector<std::vector<double>> best;
  std::vector<std::vector<int>> from;
};

CutTable cutTable(const Prefix &p, int L, int S, int64_t m, Schedule k,
                  double limit, int64_t chunks,
                  double cap = std::numeric_limits<double>::infinity()) {
  const double inf = std::numeric_limits<double>::infinity();
  CutTable t{std::vector<std::vector<double>>(
                 size_t(S + 1), std::vector<double>(size_t(L + 1), inf)),
             std::vector<std::vector<int>>(
                 size_t(S + 1), std::vector<int>(size_t(L + 1), -1))};
  t.best[0][0] = 0;
  for (int s = 1; s <= S; ++s)
    for (int l = s; l <= L - (S - s); ++l)
      for (int a = s - 1; a < l; ++a) {
        double before = t.best[size_t(s - 1)][size_t(a)];
        if (before == inf)
          continue;
        PipelineStage st = p.stage(a, l, s - 1, S, m, k, chunks);
        if ((limit > 0 && st.peakBytes > limit) || st.seconds > cap)
          continue;
        double work = st.seconds - st.sendSeconds;
        double v =
            cap == inf ? std::max(before, st.seconds) : before + work * work;
        if (v < t.best[size_t(s)][size_t(l)]) {
          t.best[size_t(s)][size_t(l)] = v;
          t.from[size_t(s)][size_t(l)] = a;
        }
      }
  return t;
}

} // namespace

/// A rank's peak: its stages' (its chunks') together.
static double rankPeak(llvm::ArrayRef<PipelineStage> cut, size_t r,
                       size_t ranks) {
  double bytes = 0;
  for (size_t s = r; s < cut.size(); s += ranks)
    bytes += cut[s].peakBytes;
  return bytes;
}

llvm::Expected<PipelinePlan> planStages(llvm::ArrayRef<LayerCost> layers,
                                        int64_t stages, int64_t m, Schedule k,
                                        double limit, int64_t chunks) {
  return planStages(single(layers), stages, m, k, limit, chunks);
}

llvm::Expected<PipelinePlan> planStages(const LayerVariants &layers,
                                        int64_t stages, int64_t m, Schedule k,
                                        double limit, int64_t chunks) {
  int L = int(layers.layers());
  int S = int(stages * chunks);
  if (stages < 1 || S > L || m < 1 ||
      (chunks > 1) != (k == Schedule::Interleaved) ||
      (chunks > 1 && m % stages))
    return badShape(stages, chunks, size_t(L), m, k);
  // An interleaved rank holds its chunks together: each within its share.
  double stageLimit = limit / double(chunks);
  Prefix p(layers, stageLimit);
  CutTable t = cutTable(p, L, S, m, k, stageLimit, chunks);
  auto none = [&] {
    return llvm::createStringError(
        "no cut of " + std::to_string(L) + " layers into " + std::to_string(S) +
        " stages fits " + llvm::formatv("{0:F2}", limit / 1073741824.0).str() +
        " GiB per device with " + std::to_string(m) + " microbatches under " +
        scheduleName(k).str());
  };
  if (t.from[size_t(S)][size_t(L)] < 0)
    return none();
  // Of the cuts whose slowest stage is that fast, the one whose layers'
  // work is the most even (where the slowest stage is a send that every
  // cut pays, the work still balances).
  double slowest = t.best[size_t(S)][size_t(L)];
  t = cutTable(p, L, S, m, k, stageLimit, chunks, slowest * (1 + 1e-9));
  std::vector<PipelineStage> cut(static_cast<size_t>(S));
  for (int s = S, l = L; s > 0; --s) {
    int a = t.from[size_t(s)][size_t(l)];
    cut[size_t(s - 1)] = p.stage(a, l, s - 1, S, m, k, chunks);
    l = a;
  }
  for (size_t r = 0; r < size_t(stages); ++r)
    if (limit > 0 && rankPeak(cut, r, size_t(stages)) > limit)
      return none();
  return finish(std::move(cut), m, k, chunks);
}

llvm::Expected<PipelinePlan> evenStages(llvm::ArrayRef<LayerCost> layers,
                                        int64_t stages, int64_t m, Schedule k,
                                        int64_t chunks) {
  int L = int(layers.size());
  int S = int(stages * chunks);
  if (stages < 1 || S > L || m < 1 ||
      (chunks > 1) != (k == Schedule::Interleaved) ||
      (chunks > 1 && m % stages))
    return badShape(stages, chunks, layers.size(), m, k);
  LayerVariants one = single(layers);
  Prefix p(one, 0);
  int per = L / S, extra = L % S;
  std::vector<PipelineStage> cut;
  for (int s = 0, a = 0; s < S; ++s) {
    int b = a + per + (s < extra ? 1 : 0);
    cut.push_back(p.stage(a, b, s, S, m, k, chunks));
    a = b;
  }
  return finish(std::move(cut), m, k, chunks);
}

namespace {

/// refineCut's chain: the plan of each cut (the first layer of every
/// stage but the first), where it fits.
struct CutChain {
  const Prefix &p;
  const PipelinePlan &from;
  double limit;
  int layers;

  std::optional<PipelinePlan> planOf(llvm::ArrayRef<int> cuts) const {
    int S = int(from.stages.size());
    std::vector<PipelineStage> stages;
    for (int s = 0, a = 0; s < S; ++s) {
      int b = s + 1 < S ? cuts[size_t(s)] : layers;
      stages.push_back(
          p.stage(a, b, s, S, from.microbatches, from.schedule, from.chunks));
      if (limit > 0 && stages.back().peakBytes > limit / double(from.chunks))
        return std::nullopt;
      a = b;
    }
    PipelinePlan q = finish(std::move(stages), from.microbatches, from.schedule,
                            from.chunks);
    if (!ranksFit(q, limit))
      return std::nullopt;
    return q;
  }

  /// \p cuts with cut \p i moved by \p d layers, if every stage keeps one.
  std::optional<std::vector<int>> moved(std::vector<int> cuts, size_t i,
                                        int d) const {
    cuts[i] += d;
    int lo = i ? cuts[i - 1] : 0;
    int hi = i + 1 < cuts.size() ? cuts[i + 1] : layers;
    if (cuts[i] <= lo || cuts[i] >= hi)
      return std::nullopt;
    return cuts;
  }
};

} // namespace

PipelinePlan refineCut(llvm::ArrayRef<LayerCost> layers,
                       const PipelinePlan &plan, double limit, unsigned steps,
                       uint64_t seed) {
  return refineCut(single(layers), plan, limit, steps, seed);
}

PipelinePlan refineCut(const LayerVariants &layers, const PipelinePlan &plan,
                       double limit, unsigned steps, uint64_t seed) {
  Prefix p(layers, limit / double(plan.chunks));
  CutChain chain{p, plan, limit, int(layers.layers())};
  std::vector<int> cuts;
  for (size_t s = 1; s < plan.stages.size(); ++s)
    cuts.push_back(plan.stages[s].first);
  PipelinePlan best = plan, current = plan;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> coin(0, 1);
  for (unsigned step = 0; step < steps && !cuts.empty(); ++step) {
    auto next = chain.moved(cuts, rng() % cuts.size(), rng() % 2 ? 1 : -1);
    std::optional<PipelinePlan> q = next ? chain.planOf(*next) : std::nullopt;
    if (!q)
      continue;
    // FlexFlow's acceptance: a fraction f slower with probability
    // exp(-50 f).
    double f = (q->simulatedSeconds - current.simulatedSeconds) /
               current.simulatedSeconds;
    if (f > 0 && coin(rng) >= std::exp(-50 * f))
      continue;
    current = std::move(*q);
    cuts = std::move(*next);
    if (current.simulatedSeconds < best.simulatedSeconds * (1 - 1e-12))
      best = current;
  }
  if (best.simulatedSeconds < plan.simulatedSeconds * (1 - 1e-12))
    best.refinedFrom = plan.simulatedSeconds;
  return best;
}

bool ranksFit(const PipelinePlan &plan, double limit) {
  for (size_t r = 0; r < size_t(plan.ranks()); ++r)
    if (limit > 0 && rankPeak(plan.stages, r, size_t(plan.ranks())) > limit)
      return false;
  return true;
}

namespace {

/// The index of the last op reading each argument and op result of \p f
/// (f.ops.size() for a returned value).
llvm::DenseMap<const Value *, size_t> lastReads(const Func &f) {
  llvm::DenseMap<const Value *, size_t> last;
  for (size_t i = 0; i < f.ops.size(); ++i)
    for (const Operand &o : f.ops[i]->operands)
      if (o.value->kind != Value::Kind::Global)
        last[o.value] = i;
  for (const Value *v : f.returns)
    last[v] = f.ops.size();
  return last;
}

/// \p spans merged into at most \p most runs of about equal op counts.
std::vector<LayerSpan> mergeEvenly(std::vector<LayerSpan> spans, size_t most) {
  if (spans.size() <= most || most == 0)
    return spans;
  std::vector<LayerSpan> out;
  for (size_t k = 0; k < most; ++k) {
    size_t a = k * spans.size() / most, b = (k + 1) * spans.size() / most;
    out.push_back({spans[a].first, spans[b - 1].last, spans[b - 1].output});
  }
  return out;
}

} // namespace

std::vector<LayerSpan>
findLayers(const Func &f, llvm::function_ref<bool(const Value *)> everywhere,
           size_t most) {
  llvm::DenseMap<const Value *, size_t> last = lastReads(f);
  llvm::DenseSet<const Value *> live;
  for (const auto &arg : f.args)
    if (last.count(arg.get()) && !everywhere(arg.get()))
      live.insert(arg.get());
  std::vector<LayerSpan> spans;
  size_t first = 0;
  for (size_t i = 0; i < f.ops.size(); ++i) {
    const Op *op = f.ops[i].get();
    for (const Operand &o : op->operands)
      if (auto it = last.find(o.value); it != last.end() && it->second == i)
        live.erase(o.value);
    for (const Result &r : op->results)
      if (auto it = last.find(r.value.get());
          it != last.end() && it->second > i && !everywhere(r.value.get()))
        live.insert(r.value.get());
    if (live.size() == 1 && i + 1 < f.ops.size()) {
      spans.push_back({first, i + 1, *live.begin()});
      first = i + 1;
    }
  }
  if (first < f.ops.size() || spans.empty())
    spans.push_back({first, f.ops.size(), nullptr});
  return mergeEvenly(std::move(spans), most);
}

} // namespace pax
