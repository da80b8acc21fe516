//===- Mcmc.cpp - FlexFlow's MCMC search over the simulated step ----------===//
#include "passes/sharding/Simulator.h"
#include "passes/sharding/SolveInternal.h"

#include <tbb/parallel_for.h>

#include <chrono>
#include <cmath>
#include <random>

namespace pax {

namespace {

/// The chains' initial candidates and the strategy they must beat.
struct Starts {
  /// A configuration per op for each chain, in chain order.
  std::vector<std::vector<Config>> configs;
  /// The strategy the chains must beat: the DP's, or the one refined.
  Strategy dp;
};

/// What every chain of one search shares: the space, the model, the
/// options, the initial candidates, the ops a proposal may change and the
/// clock of the search budget.
struct Search {
  /// The search over \p data from \p candidates, its budget's clock
  /// started at \p begun.
  Search(const SearchSpace::Data &data, const CostModel &costModel,
         const ShardingOptions &options,
         std::chrono::steady_clock::time_point begun,
         std::vector<std::vector<Config>> candidates);

  /// Whether the search budget is spent at step \p k (looked at every
  /// 64th step).
  bool overBudget(uint64_t k) const;

  const SearchSpace::Data &d;
  const CostModel &model;
  const ShardingOptions &o;
  std::chrono::steady_clock::time_point start;
  std::vector<std::vector<Config>> starts;
  int64_t devices = 0;
  bool place = false;
  std::vector<unsigned> movable;
  std::vector<std::vector<unsigned>> chainOf;
  uint64_t steps = 0;
};

/// What one chain found: its best, its start and its counts.
struct Chain {
  std::vector<Config> best;
  std::vector<int64_t> bestOffsets;
  double start = 0, bestSeconds = 0;
  uint64_t proposals = 0, accepted = 0;
  bool budgetHit = false;
};

/// One Metropolis-Hastings chain of a search: its generator, its
/// simulator and where it stands.
class ChainWalk {
public:
  /// Starts chain \p c from its initial candidate, each op from device 0,
  /// with a generator of its own (the search's seed, \p c).
  ChainWalk(const Search &search, Chain &chain, size_t c);

  /// Runs the chain: a step at a time until its steps run out, the search
  /// budget is spent or it stalls.
  void run();

private:
  /// Step \p k: a proposal for a random movable op, taken or not; false
  /// when the chain stops there.
  bool step(uint64_t k);
  /// The other ops of op \p i's chain that fit from device \p offset and
  /// are not there yet.
  std::vector<unsigned> movedWith(unsigned i, int64_t offset) const;
  /// Proposes op \p i with the ops \p moved from device \p offset, at
  /// step \p k: takes it, or puts them back.
  void moveChain(std::vector<unsigned> moved, unsigned i, int64_t offset,
                 uint64_t k);
  /// Proposes op \p i in \p proposal from device \p offset, at step \p k:
  /// takes it, or puts the op back.
  void proposeOne(unsigned i, const Config &proposal, int64_t offset,
                  uint64_t k);
  /// Metropolis-Hastings (FlexFlow's eq. 2): a proposal simulating \p next
  /// is taken when faster, else with probability exp(-beta f) for a
  /// slowdown by a fraction f.
  bool takes(double next);
  /// Takes the proposal simulating \p next at step \p k, the chain's best
  /// where it beats it.
  void take(double next, uint64_t k);
  /// Whether the chain stops at step \p k: past step 200, none of the last
  /// half of its steps improved on its best.
  bool stalled(uint64_t k) const;

  const Search &s;
  Chain &ch;
  std::mt19937_64 rng;
  std::uniform_real_distribution<double> unit;
  Simulator sim;
  std::vector<Config> now;
  std::vector<int64_t> at;
  double cur = 0;
  uint64_t lastImproved = 0;
};

} // namespace

/// A configuration per op of \p d, each drawn at random from \p seed.
static std::vector<Config> randomStart(const SearchSpace::Data &d,
                                       uint64_t seed) {
  std::mt19937_64 seeder(seed);
  std::vector<Config> random;
  for (const Vertex &v : d.vertices)
    random.push_back(v.configs[seeder() % v.configs.size()]);
  return random;
}

/// The chains' initial candidates: the strategy refined (\p from) alone,
/// else the DP's, the data-parallel and expert baselines that solve, and
/// a random one.
static llvm::Expected<Starts> chainStarts(const SearchSpace &space,
                                          const CostModel &model,
                                          const ShardingOptions &o,
                                          const Strategy *from) {
  Starts starts;
  if (from) {
    starts.dp = *from;
    starts.configs.push_back(from->configs);
    return starts;
  }
  ShardingOptions dpOptions = o;
  dpOptions.solver = SolverKind::Dp;
  auto solved = solveSharding(space, model, dpOptions);
  if (!solved)
    return solved.takeError();
  starts.dp = std::move(*solved);
  starts.configs.push_back(starts.dp.configs);
  for (SolverKind k : {SolverKind::DataParallel, SolverKind::Expert}) {
    auto s = solveBaseline(space, model, o, k);
    if (s)
      starts.configs.push_back(s->configs);
    else
      llvm::consumeError(s.takeError());
  }
  starts.configs.push_back(randomStart(space.data(), o.seed));
  return starts;
}

/// The ops of \p d a proposal may change: those with a choice of
/// configuration and, where ops are placed (\p place), every non-constant.
static std::vector<unsigned> movableOps(const SearchSpace::Data &d,
                                        bool place) {
  std::vector<unsigned> movable;
  for (unsigned i = 0; i < d.vertices.size(); ++i)
    if (d.vertices[i].configs.size() > 1 ||
        (place && !d.constants.count(d.vertices[i].op)))
      movable.push_back(i);
  return movable;
}

/// Each op's chain in \p d, in order: the op with the ops before and after
/// it that read only the one before and are read only by the one after.
static std::vector<std::vector<unsigned>> opChains(const SearchSpace::Data &d) {
  std::vector<std::vector<unsigned>> chainOf(d.vertices.size());
  size_t n = d.vertices.size();
  std::vector<int> ins(n, 0), outs(n, 0);
  std::vector<unsigned> next(n, ~0u), prev(n, ~0u);
  for (const Use &u : d.uses) {
    if (d.constants.count(d.vertices[u.producer].op))
      continue;
    ++ins[u.consumer], ++outs[u.producer];
    next[u.producer] = u.consumer, prev[u.consumer] = u.producer;
  }
  auto linked = [&](unsigned a, unsigned b) { // a -> b only
    return outs[a] == 1 && ins[b] == 1 && next[a] == b;
  };
  for (unsigned i = 0; i < n; ++i) {
    unsigned first = i;
    while (prev[first] != ~0u && linked(prev[first], first))
      first = prev[first];
    for (unsigned v = first;; v = next[v]) {
      chainOf[i].push_back(v);
      if (next[v] == ~0u || !linked(v, next[v]))
        break;
    }
  }
  return chainOf;
}

Search::Search(const SearchSpace::Data &data, const CostModel &costModel,
               const ShardingOptions &options,
               std::chrono::steady_clock::time_point begun,
               std::vector<std::vector<Config>> candidates)
    : d(data), model(costModel), o(options), start(begun),
      starts(std::move(candidates)) {
  // Inference strategies may also place ops on other devices than the
  // first (FlexFlow's device assignment): ops placed apart run at once. A
  // training program's backward ops keep their forward op's devices.
  devices = model.getCluster().gpus;
  place =
      model.getMode() == CostMode::Infer && !o.configs.keepGiven && devices > 1;
  movable = movableOps(d, place);
  // A place proposal moves the op's chain: the ops before and after it
  // that read only the one before and are read only by the one after (a
  // branch of an Inception block, a layer's elementwise tail). Moving one
  // op of a chain alone costs two transfers; moving the chain, one.
  chainOf.resize(d.vertices.size());
  if (place)
    chainOf = opChains(d);
  steps = o.mcmcSteps ? o.mcmcSteps
                      : std::max<uint64_t>(2000, 100 * d.vertices.size());
}

bool Search::overBudget(uint64_t k) const {
  return o.searchBudget > 0 && (k & 63) == 0 &&
         std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                 .count() > o.searchBudget;
}

ChainWalk::ChainWalk(const Search &search, Chain &chain, size_t c)
    : s(search), ch(chain), rng(s.o.seed * 0x9E3779B97F4A7C15ull + c + 1),
      unit(0, 1), sim(*s.d.module, s.model), now(s.starts[c]),
      at(now.size(), 0) {
  cur = sim.simulate(now, at);
  ch.start = cur;
  ch.best = now;
  ch.bestOffsets = at;
  ch.bestSeconds = cur;
}

void ChainWalk::run() {
  for (uint64_t k = 1; k <= s.steps && !s.movable.empty(); ++k) {
    if (s.overBudget(k)) {
      ch.budgetHit = true;
      break;
    }
    if (!step(k))
      break;
  }
}

bool ChainWalk::step(uint64_t k) {
  unsigned i = s.movable[rng() % s.movable.size()];
  const std::vector<Config> &cs = s.d.vertices[i].configs;
  Config proposal = now[i];
  int64_t offset = at[i];
  if (s.place && (cs.size() == 1 || rng() % 4 == 0)) {
    // Another place for the same configuration, for the op's chain
    // where every op of it fits there.
    std::vector<int64_t> ps = placements(configDevices(now[i]), s.devices);
    offset = ps[rng() % ps.size()];
    std::vector<unsigned> moved = movedWith(i, offset);
    if (!moved.empty() && rng() % 2 == 0) {
      moveChain(std::move(moved), i, offset, k);
      return !stalled(k);
    }
  } else {
    // Another configuration, in place where it fits.
    proposal = cs[rng() % cs.size()];
    int64_t n = configDevices(proposal);
    if (offset % n || offset + n > s.devices)
      offset = 0;
  }
  if (proposal == now[i] && offset == at[i])
    return true;
  proposeOne(i, proposal, offset, k);
  return !stalled(k);
}

std::vector<unsigned> ChainWalk::movedWith(unsigned i, int64_t offset) const {
  std::vector<unsigned> moved;
  for (unsigned v : s.chainOf[i]) {
    int64_t k = configDevices(now[v]);
    if (v != i && !s.d.constants.count(s.d.vertices[v].op) && offset % k == 0 &&
        offset + k <= s.devices && at[v] != offset)
      moved.push_back(v);
  }
  return moved;
}

void ChainWalk::moveChain(std::vector<unsigned> moved, unsigned i,
                          int64_t offset, uint64_t k) {
  ++ch.proposals;
  std::vector<int64_t> before = at;
  moved.push_back(i);
  double next = 0;
  for (unsigned v : moved) {
    at[v] = offset;
    if (!s.o.mcmcFullSimulation)
      next = sim.change(v, now[v], offset);
  }
  if (s.o.mcmcFullSimulation)
    next = sim.simulate(now, at);
  if (takes(next)) {
    take(next, k);
  } else {
    for (unsigned v : moved) {
      at[v] = before[v];
      if (!s.o.mcmcFullSimulation)
        sim.change(v, now[v], at[v]);
    }
  }
}

void ChainWalk::proposeOne(unsigned i, const Config &proposal, int64_t offset,
                           uint64_t k) {
  ++ch.proposals;
  double next;
  if (s.o.mcmcFullSimulation) {
    std::vector<Config> candidate = now;
    std::vector<int64_t> candidateAt = at;
    candidate[i] = proposal;
    candidateAt[i] = offset;
    next = sim.simulate(candidate, candidateAt);
  } else {
    next = sim.change(i, proposal, offset);
  }
  if (takes(next)) {
    now[i] = proposal;
    at[i] = offset;
    take(next, k);
  } else if (!s.o.mcmcFullSimulation) {
    sim.change(i, now[i], at[i]);
  }
}

bool ChainWalk::takes(double next) {
  double worse = (next - cur) / std::max(cur, 1e-30);
  return next <= cur || unit(rng) < std::exp(-s.o.mcmcBeta * worse);
}

void ChainWalk::take(double next, uint64_t k) {
  ++ch.accepted;
  cur = next;
  if (cur < ch.bestSeconds) {
    ch.bestSeconds = cur;
    ch.best = now;
    ch.bestOffsets = at;
    lastImproved = k;
  }
}

bool ChainWalk::stalled(uint64_t k) const {
  return k > 200 && k - lastImproved > k / 2;
}

/// Runs a chain from each of \p s's initial candidates, in parallel unless
/// on one thread; what each found, in chain order.
static std::vector<Chain> runChains(const Search &s) {
  std::vector<Chain> chains(s.starts.size());
  auto run = [&](size_t c) {
    ChainWalk walk(s, chains[c], c);
    walk.run();
  };
  if (s.o.threads == 1) {
    for (size_t c = 0; c < chains.size(); ++c)
      run(c);
  } else {
    tbb::parallel_for(size_t(0), chains.size(), run);
  }
  return chains;
}

/// The best of \p chains (the first on ties) as a strategy, with every
/// chain's counts and the first chain's start as the DP's simulated time.
static Strategy bestOfChains(const std::vector<Chain> &chains) {
  size_t best = 0;
  Strategy result;
  for (size_t c = 0; c < chains.size(); ++c) {
    if (chains[c].bestSeconds < chains[best].bestSeconds)
      best = c;
    result.proposals += chains[c].proposals;
    result.accepted += chains[c].accepted;
    result.budgetHit |= chains[c].budgetHit;
  }
  result.configs = chains[best].best;
  if (llvm::any_of(chains[best].bestOffsets, [](int64_t o) { return o; }))
    result.offsets = chains[best].bestOffsets;
  result.dpSimulatedSeconds = chains[0].start;
  result.cost.simulatedSeconds = chains[best].bestSeconds;
  return result;
}

/// Gives \p result \p dp's microbatches and the levers that fit its
/// configurations, or, where none do, \p dp's configurations and levers.
static void takeLevers(Strategy &result, const SearchSpace &space,
                       const CostModel &model, const ShardingOptions &o,
                       const Strategy &dp) {
  // A training step keeps the DP's microbatches and takes the levers that
  // fit the chain's configurations; where none do, the DP's strategy
  // stands (the chains price no memory).
  FittedLevers fitted =
      fitLevers(space, model, o, dp.microbatches, result.configs);
  if (!fitted.fits) {
    result.configs = dp.configs;
    result.offsets.clear();
    fitted.choices = dp.choices;
    result.cost.simulatedSeconds = result.dpSimulatedSeconds;
  }
  result.microbatches = dp.microbatches;
  result.choices = std::move(fitted.choices);
}

/// Prices \p result under its levers, keeping its simulated time, and
/// takes that as its search cost.
static void priceStrategy(Strategy &result, const SearchSpace &space,
                          const CostModel &model, const ShardingOptions &o) {
  double simulated = result.cost.simulatedSeconds;
  result.cost = evaluateStrategy(
      space, leveredModel(space, model, o.levers, result.microbatches),
      result.configs, result.offsets, result.choices);
  result.cost.simulatedSeconds = simulated;
  result.searchCost = toPicos(result.cost.seconds);
}

/// FlexFlow's search: Metropolis-Hastings chains over the simulated step
/// time, one from each initial candidate (the DP's strategy, data-parallel,
/// expert, and a random one), each proposal a new configuration of one op
/// priced by delta simulation. A chain stops after its proposals, or when
/// none of the last half of them improved on its best. Chains run in
/// parallel, each with a generator of its own (seed, chain), and the best
/// is taken in chain order: the answer depends on the seed, not on the
/// threads. The DP's strategy starts a chain, so the answer never
/// simulates slower than it.
llvm::Expected<Strategy> searchMcmc(const SearchSpace &space,
                                    const CostModel &model,
                                    const ShardingOptions &o,
                                    const Strategy *from) {
  const SearchSpace::Data &d = space.data();
  auto start = std::chrono::steady_clock::now();
  auto starts = chainStarts(space, model, o, from);
  if (!starts)
    return starts.takeError();
  const Strategy &dp = starts->dp;
  Search search(d, model, o, start, std::move(starts->configs));
  Strategy result = bestOfChains(runChains(search));
  takeLevers(result, space, model, o, dp);
  priceStrategy(result, space, model, o);
  result.stats = dp.stats;
  result.stats.exact = false; // of the simulated time: a search, no proof
  for (const Vertex &v : d.vertices)
    result.spaceSizes.push_back(v.configs.size());
  return result;
}

} // namespace pax
