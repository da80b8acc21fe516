//===- Fit.cpp - The search under a device's memory -----------------------===//
//
// A training step must fit a device's memory. The DP searches
// configurations with memory priced at lambda seconds per byte (each op's
// levers as they price best at that price): unpriced first, then at rising
// prices. Every configuration it finds then gets the levers that fit it
// (LeverTable: the least price of memory at which the ops' levers bring the
// peak within the limit, bisected over their priced choices without pricing
// anything again), at every microbatch count the configuration divides.
// The fastest that fits wins; when none fits, the error names the leanest.
//
//===----------------------------------------------------------------------===//
#include "passes/sharding/SolveInternal.h"

#include "llvm/Support/FormatVariadic.h"

#include <tbb/parallel_for.h>

#include <cmath>
#include <limits>
#include <numeric>

namespace pax {

namespace {
/// Configurations with their levers, priced.
struct Levered {
  std::vector<OpChoice> choices;
  double lambda = 0; ///< the price of memory the levers were chosen at
  double seconds = 0, peak = 0;
  bool fits = false;
};

/// Every op's levers priced in one configuration of every op, so that they
/// can be chosen at any price of memory without pricing anything again.
class LeverTable {
public:
  LeverTable(const SearchSpace &space, const CostModel &model,
             llvm::ArrayRef<Config> configs);
  /// The levers that price best at \p lambda.
  Levered at(double lambda, double limit) const;
  /// The levers of the least price of memory whose peak fits \p limit
  /// (none: 0); the leanest found when none fits.
  Levered fit(double limit) const;

private:
  std::vector<llvm::SmallVector<PricedChoice, 8>> options;
  double fixed = 0; ///< what no lever changes: edges, returned results
};

/// A strategy found: configurations, microbatches, levers.
struct Candidate {
  std::vector<Config> configs;
  int64_t microbatches = 1;
  Levered levers;
  /// The DP's unpriced optimum with unpriced levers: nothing is faster.
  bool unpriced = false;
  /// The DP run that found the configurations.
  DpStats stats;
  int64_t dpCost = 0;
};
} // namespace

LeverTable::LeverTable(const SearchSpace &space, const CostModel &model,
                       llvm::ArrayRef<Config> configs) {
  const Func &f = space.module().main;
  options.resize(f.ops.size());
  tbb::parallel_for(size_t(0), f.ops.size(), [&](size_t i) {
    options[i] = model.pricedChoices(*f.ops[i], configs[i]);
  });
  std::vector<OpChoice> firsts;
  double ops = 0;
  for (const auto &o : options) {
    firsts.push_back(o.front().choice);
    ops += o.front().seconds;
  }
  fixed = evaluateStrategy(space, model, configs, {}, firsts).seconds - ops;
}

/// The choice of \p options like \p c but keeping its results.
static size_t keeping(llvm::ArrayRef<PricedChoice> options, OpChoice c) {
  for (size_t k = 0; k < options.size(); ++k)
    if (!options[k].choice.recompute && options[k].choice.zero == c.zero)
      return k;
  return options.size();
}

Levered LeverTable::at(double lambda, double limit) const {
  std::vector<size_t> picked;
  std::vector<double> recomputed;
  for (const auto &o : options) {
    picked.push_back(cheapestChoice(o, lambda));
    const PricedChoice &p = o[picked.back()];
    recomputed.push_back(p.choice.recompute ? p.memory.recomputed : -1);
  }
  // Runs of recomputed ops are held whole while their backward runs: keep
  // some of their results to cut them short.
  for (size_t i : checkpoints(recomputed))
    if (size_t k = keeping(options[i], options[i][picked[i]].choice);
        k < options[i].size())
      picked[i] = k;
  Levered l;
  l.lambda = lambda;
  l.seconds = fixed;
  std::vector<OpMemory> memory;
  for (size_t i = 0; i < options.size(); ++i) {
    const PricedChoice &p = options[i][picked[i]];
    l.choices.push_back(p.choice);
    l.seconds += p.seconds;
    memory.push_back(p.memory);
  }
  l.peak = stepPeakBytes(memory, l.choices);
  l.fits = limit <= 0 || l.peak <= limit;
  return l;
}

Levered LeverTable::fit(double limit) const {
  Levered high = at(0, limit);
  if (high.fits)
    return high;
  double hi = 1e-15;
  for (int i = 0; i < 40 && !high.fits; ++i)
    high = at(hi *= 4, limit);
  if (!high.fits)
    return high;
  double lo = hi / 4;
  for (int i = 0; i < 20; ++i) {
    double mid = (lo + hi) / 2;
    Levered m = at(mid, limit);
    (m.fits ? hi : lo) = mid;
    if (m.fits)
      high = std::move(m);
  }
  return high;
}

/// Whether \p a beats \p b: one that fits over one that does not, then the
/// faster, or else the leaner.
static bool beats(const Candidate &a, const std::optional<Candidate> &b) {
  if (!b)
    return true;
  if (a.levers.fits != b->levers.fits)
    return a.levers.fits;
  return a.levers.fits ? a.levers.seconds < b->levers.seconds
                       : a.levers.peak < b->levers.peak;
}

/// Whether \p op in \p c splits each of its sample dims into blocks that
/// \p microbatches microbatches divide.
static bool samplesDivide(const SearchSpace::Data &d, const Op &op,
                          const Config &c, int64_t microbatches) {
  const auto &roles = d.roles.find(&op)->second;
  for (size_t k = 0; k < c.size(); ++k)
    if (roles[k] == SoapRole::Sample &&
        (op.iters[k].extent / c[k]) % microbatches)
      return false;
  return true;
}

/// \p vertices with only the configurations samplesDivide allows.
static std::vector<Vertex> forMicrobatches(const SearchSpace::Data &d,
                                           const std::vector<Vertex> &vertices,
                                           int64_t microbatches) {
  if (microbatches == 1)
    return vertices;
  std::vector<Vertex> out;
  for (const Vertex &v : vertices) {
    Vertex r{v.op, {}};
    llvm::copy_if(v.configs, std::back_inserter(r.configs),
                  [&](const Config &c) {
                    return samplesDivide(d, *v.op, c, microbatches);
                  });
    out.push_back(std::move(r));
  }
  return out;
}

bool samplesDivide(const SearchSpace::Data &d, llvm::ArrayRef<Config> configs,
                   int64_t microbatches) {
  for (size_t i = 0; i < d.vertices.size(); ++i)
    if (!samplesDivide(d, *d.vertices[i].op, configs[i], microbatches))
      return false;
  return true;
}

std::vector<int64_t> tensorDegrees(int64_t devices, int64_t perNode) {
  std::vector<int64_t> degrees = {1};
  for (int64_t t = 2; t <= std::min(devices, perNode); ++t)
    if (devices % t == 0)
      degrees.push_back(t);
  return degrees;
}

std::vector<Vertex> baselineVertices(const SearchSpace::Data &d,
                                     int64_t devices, int64_t tensor,
                                     bool wholeDataParallel) {
  std::vector<Vertex> restricted;
  for (const Vertex &v : d.vertices)
    restricted.push_back(
        {v.op, baselineConfigs(*v.op, d.roles.find(v.op)->second, v.configs,
                               devices, tensor, wholeDataParallel)});
  return restricted;
}

/// The candidate sets one solver searches: the whole space, or the
/// baseline's restrictions (expert: one per tensor-parallel degree, inside
/// a node as Megatron's).
static std::vector<std::vector<Vertex>>
candidateSets(const SearchSpace::Data &d, const ShardingOptions &o,
              int64_t perNode) {
  if (o.solver == SolverKind::DataParallel)
    return {baselineVertices(d, o.configs.devices, 1)};
  if (o.solver != SolverKind::Expert)
    return {d.vertices};
  std::vector<std::vector<Vertex>> sets;
  for (int64_t t : tensorDegrees(o.configs.devices, perNode))
    sets.push_back(baselineVertices(d, o.configs.devices, t));
  return sets;
}

llvm::Expected<std::vector<int64_t>> microbatchCounts(const SearchSpace &space,
                                                      int64_t requested) {
  const SearchSpace::Data &d = space.data();
  int64_t common = 0;
  for (const Vertex &v : d.vertices) {
    const auto &roles = d.roles.find(v.op)->second;
    for (size_t k = 0; k < roles.size(); ++k) {
      if (roles[k] != SoapRole::Sample)
        continue;
      int64_t extent = v.op->iters[k].extent;
      if (requested > 0 && extent % requested)
        return llvm::createStringError(llvm::formatv(
            "{0} microbatches do not divide the sample dim '{1}' ({2}) of op "
            "'{3}' ({4})",
            requested, v.op->iters[k].name, extent, v.op->name(),
            opKindName(v.op->kind)));
      common = std::gcd(common, extent);
    }
  }
  if (requested > 0)
    return std::vector<int64_t>{requested};
  std::vector<int64_t> counts;
  for (int64_t m = 1; m <= common; m *= 2)
    if (common % m == 0)
      counts.push_back(m);
  if (common > 1 && counts.back() != common)
    counts.push_back(common);
  if (counts.empty())
    counts.push_back(1);
  return counts;
}

namespace {
/// One search under the memory limit: the DP's configurations of every
/// candidate set at the first microbatch count, then the levers of each at
/// every count.
class FitSearch {
public:
  FitSearch(const SearchSpace &space, const CostModel &model,
            const ShardingOptions &o)
      : space(space), d(space.data()), model(model), o(o) {}
  llvm::Expected<Strategy> run();

private:
  llvm::Error explore(const std::vector<Vertex> &set, const CostModel &at);
  bool consider(std::vector<Config> configs, const CostModel &at,
                const Solution *found);
  llvm::Error refine(Searcher &searcher, const CostModel &at, double lo,
                     double hi);
  Strategy answer() const;

  const SearchSpace &space;
  const SearchSpace::Data &d;
  const CostModel &model;
  const ShardingOptions &o;
  std::vector<std::vector<Config>> pool;
  /// Each pooled configuration's step with unpriced levers at the first
  /// microbatch count: no more microbatches make it faster.
  std::vector<double> bound;
  std::optional<Candidate> best;
};
} // namespace

/// Fits the levers of \p configs at \p at's microbatch count; \p found is
/// the DP's unpriced solution they are, if they are.
bool FitSearch::consider(std::vector<Config> configs, const CostModel &at,
                         const Solution *found) {
  Candidate c{std::move(configs), at.microbatches(), {}, false, {}, 0};
  LeverTable table(space, at, c.configs);
  if (bound.size() < pool.size())
    bound.push_back(table.at(0, 0).seconds);
  c.levers = table.fit(o.memoryLimit);
  c.unpriced = found && c.levers.fits && c.levers.lambda == 0;
  if (found) {
    c.stats = found->stats;
    c.dpCost = found->cost;
  } else if (best) {
    c.stats = best->stats;
  }
  bool fits = c.levers.fits;
  if (beats(c, best))
    best = std::move(c);
  return fits;
}

/// Between a price of memory whose configurations do not fit (\p lo) and
/// one whose do (\p hi), four bisections (geometric) for a faster fit.
llvm::Error FitSearch::refine(Searcher &searcher, const CostModel &at,
                              double lo, double hi) {
  for (int i = 0; i < 4; ++i) {
    double mid = std::sqrt(lo * hi);
    auto found = searcher.run(mid);
    if (!found)
      return found.takeError();
    pool.push_back(searcher.configs(*found));
    (consider(pool.back(), at, nullptr) ? hi : lo) = mid;
  }
  return llvm::Error::success();
}

/// The DP's configurations of one candidate set at \p at's microbatch
/// count: unpriced first; then, unless they fit as they are, with memory
/// priced from a guess (a 64th of the step per step's peak) rising by
/// eights, until two prices in a row find nothing better.
llvm::Error FitSearch::explore(const std::vector<Vertex> &set,
                               const CostModel &at) {
  ShardingOptions so = o;
  if (isBaseline(so.solver))
    so.solver = SolverKind::Dp;
  Searcher searcher(d, at, set, so);
  auto first = searcher.run(0);
  if (!first)
    return first.takeError();
  double fastest = double(first->cost) * 1e-12;
  pool.push_back(searcher.configs(*first));
  consider(pool.back(), at, &*first);
  // Nothing of this set beats a strategy that fits and is faster than its
  // unpriced optimum.
  if (o.memoryLimit <= 0 || best->unpriced ||
      (best->levers.fits && best->levers.seconds <= fastest))
    return llvm::Error::success();
  double lambda = std::max(fastest, 1e-9) / std::max(o.memoryLimit, 1.0) / 64;
  double fitAt = 0, unfitAt = 0;
  for (int i = 0, stale = 0; i < 6 && stale < 2; ++i, lambda *= 8) {
    auto found = searcher.run(lambda);
    if (!found)
      return found.takeError();
    pool.push_back(searcher.configs(*found));
    double before = best->levers.fits ? best->levers.seconds : 0;
    bool fits = consider(pool.back(), at, nullptr);
    if (fits && !fitAt)
      fitAt = lambda;
    if (!fits)
      unfitAt = lambda;
    stale = best->levers.fits && best->levers.seconds >= before ? stale + 1 : 0;
  }
  // The first price that fits is at most eight times one that does not.
  if (fitAt > 0 && unfitAt > 0 && unfitAt < fitAt)
    return refine(searcher, at, unfitAt, fitAt);
  return llvm::Error::success();
}

llvm::Expected<Strategy> FitSearch::run() {
  bool training = model.getMode() == CostMode::Train;
  auto counts = training ? microbatchCounts(space, o.levers.microbatches)
                         : std::vector<int64_t>{1};
  if (!counts)
    return counts.takeError();
  auto levered = [&](int64_t m) {
    return training ? leveredModel(space, model, o.levers, m) : model;
  };
  CostModel first = levered(counts->front());
  const Op *blocked = nullptr;
  for (const std::vector<Vertex> &set :
       candidateSets(d, o, model.getCluster().gpusPerNode)) {
    auto cand = forMicrobatches(d, set, counts->front());
    auto empty =
        llvm::find_if(cand, [](const Vertex &v) { return v.configs.empty(); });
    if (empty != cand.end()) {
      blocked = blocked ? blocked : empty->op;
      continue;
    }
    if (auto err = explore(cand, first))
      return err;
  }
  // The other microbatch counts for every configuration found, but those
  // whose unpriced step (which more microbatches never make faster) is no
  // faster than a fit found; while the step fits unpriced nothing is.
  for (size_t k = 1; k < counts->size() && best && !best->unpriced; ++k) {
    CostModel at = levered((*counts)[k]);
    for (size_t i = 0; i < pool.size(); ++i)
      if (!(best->levers.fits && bound[i] >= best->levers.seconds) &&
          samplesDivide(d, pool[i], (*counts)[k]))
        consider(pool[i], at, nullptr);
  }
  if (!best)
    return llvm::createStringError(llvm::formatv(
        "--microbatches={0}: no configuration of op '{1}' ({2}) on {3} "
        "devices leaves sample blocks that {0} microbatches divide",
        counts->front(), blocked ? blocked->name() : "",
        blocked ? opKindName(blocked->kind) : "", o.configs.devices));
  if (!best->levers.fits)
    return llvm::createStringError(
        llvm::formatv("no strategy fits in {0:F2} GiB per device; the "
                      "leanest one found needs {1:F3} GiB ({2})",
                      o.memoryLimit / double(1 << 30),
                      best->levers.peak / double(1 << 30),
                      describeLevers(best->microbatches, best->levers.choices))
            .str());
  return answer();
}

Strategy FitSearch::answer() const {
  Strategy s;
  s.configs = best->configs;
  bool training = model.getMode() == CostMode::Train;
  if (training) {
    s.microbatches = best->microbatches;
    s.choices = best->levers.choices;
  }
  CostModel at =
      training ? leveredModel(space, model, o.levers, s.microbatches) : model;
  s.cost = evaluateStrategy(space, at, s.configs, {}, s.choices);
  s.stats = best->stats;
  // The unconstrained optimum bounds the constrained one; a strategy priced
  // with memory is not proven optimal.
  if (!best->unpriced)
    s.stats.exact = false;
  s.searchCost = best->unpriced ? best->dpCost : toPicos(s.cost.seconds);
  return s;
}

FittedLevers fitLevers(const SearchSpace &space, const CostModel &model,
                       const ShardingOptions &o, int64_t microbatches,
                       llvm::ArrayRef<Config> configs) {
  if (model.getMode() != CostMode::Train)
    return {{}, true};
  if (!samplesDivide(space.data(), configs, microbatches))
    return {{}, false};
  CostModel at = leveredModel(space, model, o.levers, microbatches);
  Levered l = LeverTable(space, at, configs).fit(o.memoryLimit);
  return {std::move(l.choices), l.fits};
}

llvm::Expected<Strategy> solveWithinMemory(const SearchSpace &space,
                                           const CostModel &model,
                                           const ShardingOptions &o) {
  return FitSearch(space, model, o).run();
}

} // namespace pax
