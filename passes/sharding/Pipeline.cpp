//===- Pipeline.cpp - Stages, microbatches and schedules ------------------===//
#include "passes/sharding/Pipeline.h"

#include "ir/Module.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/FormatVariadic.h"

#include <string>

#include <algorithm>
#include <limits>

namespace pax {

llvm::StringRef scheduleName(Schedule s) {
  return s == Schedule::GPipe ? "gpipe" : "1f1b";
}

std::optional<Schedule> parseSchedule(llvm::StringRef name) {
  if (name == "gpipe")
    return Schedule::GPipe;
  if (name == "1f1b")
    return Schedule::OneFOneB;
  return std::nullopt;
}

int64_t inFlight(Schedule k, int64_t s, int64_t stages, int64_t m) {
  return k == Schedule::GPipe ? m : std::min(m, stages - s);
}

namespace {

/// One pass of one microbatch on one stage.
struct Pass {
  bool backward;
  int64_t microbatch;
};

/// Stage \p s's passes in the order schedule \p k runs them.
std::vector<Pass> passOrder(Schedule k, int64_t s, int64_t stages, int64_t m) {
  std::vector<Pass> order;
  int64_t warm = k == Schedule::GPipe ? m : std::min(stages - s - 1, m);
  for (int64_t i = 0; i < warm; ++i)
    order.push_back({false, i});
  for (int64_t i = 0; i < m; ++i) {
    if (warm + i < m)
      order.push_back({false, warm + i});
    order.push_back({true, i});
  }
  return order;
}

/// The event-by-event run of simulatePipeline: when each pass ends.
class PipelineRun {
public:
  PipelineRun(llvm::ArrayRef<PipelineStage> stages, int64_t m, Schedule k)
      : stages(stages), m(m), S(int64_t(stages.size())),
        forwardEnd(size_t(S * m), -1), backwardEnd(size_t(S * m), -1),
        forwardArrive(size_t(S * m), -1), backwardArrive(size_t(S * m), -1),
        forwardStart(size_t(S * m), 0), backwardStart(size_t(S * m), 0),
        free(size_t(S), 0), linkForward(size_t(S), 0),
        linkBackward(size_t(S), 0), next(size_t(S), 0) {
    for (int64_t s = 0; s < S; ++s)
      orders.push_back(passOrder(k, s, S, m));
  }
  /// Runs every stage as far as its inputs allow; false when none moved.
  bool sweep() {
    bool moved = false;
    for (int64_t s = 0; s < S; ++s)
      while (next[size_t(s)] < orders[size_t(s)].size() && step(s))
        moved = true;
    return moved;
  }
  bool done() const {
    for (int64_t s = 0; s < S; ++s)
      if (next[size_t(s)] < orders[size_t(s)].size())
        return false;
    return true;
  }
  /// The step: each stage's last pass, then its sync.
  double end() const {
    double t = 0;
    for (int64_t s = 0; s < S; ++s)
      t = std::max(t, free[size_t(s)] + stages[size_t(s)].syncSeconds);
    return t;
  }
  /// When each pass started, per stage s and microbatch k at s * m + k.
  PassTimes starts() const { return {forwardStart, backwardStart}; }

private:
  /// Runs stage \p s's next pass if its input is there.
  bool step(int64_t s) {
    const PipelineStage &st = stages[size_t(s)];
    Pass p = orders[size_t(s)][next[size_t(s)]];
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
    double end = std::max(ready, free[size_t(s)]) + length;
    free[size_t(s)] = end;
    (p.backward ? backwardStart : forwardStart)[at] = end - length;
    (p.backward ? backwardEnd : forwardEnd)[at] = end;
    // The result goes on over the link to the next stage (a gradient to
    // the one before), one transfer at a time each way.
    if (!p.backward && s + 1 < S)
      forwardArrive[at] = linkForward[size_t(s)] =
          std::max(end, linkForward[size_t(s)]) + st.sendSeconds / 2;
    if (p.backward && s > 0)
      backwardArrive[at] = linkBackward[size_t(s - 1)] =
          std::max(end, linkBackward[size_t(s - 1)]) +
          stages[size_t(s - 1)].sendSeconds / 2;
    ++next[size_t(s)];
    return true;
  }

  llvm::ArrayRef<PipelineStage> stages;
  int64_t m, S;
  std::vector<double> forwardEnd, backwardEnd, forwardArrive, backwardArrive;
  std::vector<double> forwardStart, backwardStart;
  /// Per stage: when it is free; per link (after stage s): when its next
  /// transfer each way may start.
  std::vector<double> free, linkForward, linkBackward;
  std::vector<size_t> next;
  std::vector<std::vector<Pass>> orders;
};

} // namespace

double simulatePipeline(llvm::ArrayRef<PipelineStage> stages, int64_t m,
                        Schedule k) {
  PipelineRun run(stages, m, k);
  while (!run.done())
    if (!run.sweep())
      return std::numeric_limits<double>::infinity(); // cannot happen
  return run.end();
}

PassTimes simulatePasses(llvm::ArrayRef<PipelineStage> stages, int64_t m,
                         Schedule k) {
  PipelineRun run(stages, m, k);
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
  PassTimes t = simulatePasses(stages, m, plan.schedule);
  for (size_t s = 0; s < stages.size(); ++s) {
    const PipelineStage &st = stages[s];
    events.push_back(llvm::json::Object{
        {"name", "thread_name"},
        {"ph", "M"},
        {"pid", pid},
        {"tid", int64_t(s)},
        {"args", llvm::json::Object{{"name", "stage " + std::to_string(s)}}}});
    double backward = st.seconds - st.sendSeconds - st.forwardSeconds;
    double last = 0;
    for (int64_t k = 0; k < m; ++k) {
      size_t at = s * size_t(m) + size_t(k);
      std::string mb = std::to_string(k);
      events.push_back(traceEvent("F " + mb, pid, int64_t(s), t.forward[at],
                                  st.forwardSeconds));
      last = std::max(last, t.forward[at] + st.forwardSeconds);
      if (backward > 0) {
        events.push_back(
            traceEvent("B " + mb, pid, int64_t(s), t.backward[at], backward));
        last = std::max(last, t.backward[at] + backward);
      }
    }
    if (st.syncSeconds > 0)
      events.push_back(
          traceEvent("gradient sync", pid, int64_t(s), last, st.syncSeconds));
  }
  return events;
}

double pipelineStep(llvm::ArrayRef<PipelineStage> stages, int64_t m,
                    double sync) {
  double sum = 0, slowest = 0;
  for (const PipelineStage &s : stages) {
    sum += s.seconds;
    slowest = std::max(slowest, s.seconds);
  }
  return sum + double(m - 1) * slowest + sync;
}

namespace {

/// Prefix sums of the layers' costs: a stage's totals in O(1).
class Prefix {
public:
  explicit Prefix(llvm::ArrayRef<LayerCost> layers) : layers(layers) {
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
  /// Layers [a, b) as stage \p s of \p stages.
  PipelineStage stage(int a, int b, int64_t s, int64_t stages, int64_t m,
                      Schedule k) const {
    PipelineStage st;
    st.first = a;
    st.last = b;
    st.sendSeconds =
        b < int(layers.size()) ? layers[size_t(b - 1)].sendSeconds : 0.0;
    st.seconds = seconds[size_t(b)] - seconds[size_t(a)] + st.sendSeconds;
    st.forwardSeconds = forwards[size_t(b)] - forwards[size_t(a)];
    st.syncSeconds = syncs[size_t(b)] - syncs[size_t(a)];
    st.inFlight = inFlight(k, s, stages, m);
    st.peakBytes =
        statics[size_t(b)] - statics[size_t(a)] +
        double(st.inFlight) * (activations[size_t(b)] - activations[size_t(a)]);
    return st;
  }
  double sync(int a, int b) const {
    return syncs[size_t(b)] - syncs[size_t(a)];
  }

private:
  llvm::ArrayRef<LayerCost> layers;
  std::vector<double> seconds, forwards, statics, activations, syncs;
};

/// The plan of \p stages, its step and bubble.
PipelinePlan finish(std::vector<PipelineStage> stages, const Prefix &p,
                    int64_t m, Schedule k) {
  PipelinePlan plan;
  plan.microbatches = m;
  plan.schedule = k;
  double sync = p.sync(stages.front().first, stages.front().last);
  plan.stepSeconds = pipelineStep(stages, m, sync);
  plan.simulatedSeconds = simulatePipeline(stages, m, k);
  double work = 0;
  for (const PipelineStage &s : stages)
    work += double(m) * s.seconds;
  double span = plan.stepSeconds - sync;
  plan.bubble = span > 0 ? 1 - work / (double(stages.size()) * span) : 0.0;
  plan.stages = std::move(stages);
  return plan;
}

llvm::Error badShape(int64_t stages, size_t layers, int64_t m) {
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
                  double limit,
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
        PipelineStage st = p.stage(a, l, s - 1, S, m, k);
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

llvm::Expected<PipelinePlan> planStages(llvm::ArrayRef<LayerCost> layers,
                                        int64_t stages, int64_t m, Schedule k,
                                        double limit) {
  int L = int(layers.size());
  if (stages < 1 || stages > L || m < 1)
    return badShape(stages, layers.size(), m);
  Prefix p(layers);
  int S = int(stages);
  CutTable t = cutTable(p, L, S, m, k, limit);
  if (t.from[size_t(S)][size_t(L)] < 0)
    return llvm::createStringError(
        "no cut of " + std::to_string(L) + " layers into " +
        std::to_string(stages) + " stages fits " +
        llvm::formatv("{0:F2}", limit / 1073741824.0).str() +
        " GiB per device with " + std::to_string(m) + " microbatches under " +
        scheduleName(k).str());
  // Of the cuts whose slowest stage is that fast, the one whose layers'
  // work is the most even (where the slowest stage is a send that every
  // cut pays, the work still balances).
  double slowest = t.best[size_t(S)][size_t(L)];
  t = cutTable(p, L, S, m, k, limit, slowest * (1 + 1e-9));
  std::vector<PipelineStage> cut(static_cast<size_t>(S));
  for (int s = S, l = L; s > 0; --s) {
    int a = t.from[size_t(s)][size_t(l)];
    cut[size_t(s - 1)] = p.stage(a, l, s - 1, stages, m, k);
    l = a;
  }
  return finish(std::move(cut), p, m, k);
}

llvm::Expected<PipelinePlan> evenStages(llvm::ArrayRef<LayerCost> layers,
                                        int64_t stages, int64_t m, Schedule k) {
  int L = int(layers.size());
  if (stages < 1 || stages > L || m < 1)
    return badShape(stages, layers.size(), m);
  Prefix p(layers);
  int per = L / int(stages), extra = L % int(stages);
  std::vector<PipelineStage> cut;
  for (int s = 0, a = 0; s < int(stages); ++s) {
    int b = a + per + (s < extra ? 1 : 0);
    cut.push_back(p.stage(a, b, s, stages, m, k));
    a = b;
  }
  return finish(std::move(cut), p, m, k);
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
