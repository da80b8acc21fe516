//===- Mcmc.cpp - FlexFlow's MCMC search over the simulated step ----------===//
#include "passes/sharding/Simulator.h"
#include "passes/sharding/SolveInternal.h"

#include <tbb/parallel_for.h>

#include <chrono>
#include <cmath>
#include <random>

namespace pax {

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
  std::vector<std::vector<Config>> starts;
  // The strategy the chains must beat: the DP's, or the one refined.
  std::optional<Strategy> dp;
  if (from) {
    dp = *from;
    starts.push_back(from->configs);
  } else {
    ShardingOptions dpOptions = o;
    dpOptions.solver = SolverKind::Dp;
    auto solved = solveSharding(space, model, dpOptions);
    if (!solved)
      return solved.takeError();
    dp = std::move(*solved);
    starts.push_back(dp->configs);
    for (SolverKind k : {SolverKind::DataParallel, SolverKind::Expert}) {
      auto s = solveBaseline(space, model, o, k);
      if (s)
        starts.push_back(s->configs);
      else
        llvm::consumeError(s.takeError());
    }
    std::mt19937_64 seeder(o.seed);
    std::vector<Config> random;
    for (const Vertex &v : d.vertices)
      random.push_back(v.configs[seeder() % v.configs.size()]);
    starts.push_back(std::move(random));
  }
  // Inference strategies may also place ops on other devices than the
  // first (FlexFlow's device assignment): ops placed apart run at once. A
  // training program's backward ops keep their forward op's devices.
  int64_t devices = model.getCluster().gpus;
  bool place =
      model.getMode() == CostMode::Infer && !o.configs.keepGiven && devices > 1;
  std::vector<unsigned> movable;
  for (unsigned i = 0; i < d.vertices.size(); ++i)
    if (d.vertices[i].configs.size() > 1 ||
        (place && !d.constants.count(d.vertices[i].op)))
      movable.push_back(i);
  // A place proposal moves the op's chain: the ops before and after it
  // that read only the one before and are read only by the one after (a
  // branch of an Inception block, a layer's elementwise tail). Moving one
  // op of a chain alone costs two transfers; moving the chain, one.
  std::vector<std::vector<unsigned>> chainOf(d.vertices.size());
  if (place) {
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
  }
  uint64_t steps = o.mcmcSteps
                       ? o.mcmcSteps
                       : std::max<uint64_t>(2000, 100 * d.vertices.size());
  struct Chain {
    std::vector<Config> best;
    std::vector<int64_t> bestOffsets;
    double start = 0, bestSeconds = 0;
    uint64_t proposals = 0, accepted = 0;
    bool budgetHit = false;
  };
  std::vector<Chain> chains(starts.size());
  auto run = [&](size_t c) {
    Chain &ch = chains[c];
    std::mt19937_64 rng(o.seed * 0x9E3779B97F4A7C15ull + c + 1);
    std::uniform_real_distribution<double> unit(0, 1);
    Simulator sim(*d.module, model);
    std::vector<Config> now = starts[c];
    std::vector<int64_t> at(now.size(), 0);
    double cur = sim.simulate(now, at);
    ch.start = cur;
    ch.best = now;
    ch.bestOffsets = at;
    ch.bestSeconds = cur;
    uint64_t lastImproved = 0;
    // Metropolis-Hastings (FlexFlow's eq. 2): a proposal simulating
    // \p next is taken when faster, else with probability exp(-beta f)
    // for a slowdown by a fraction f.
    auto takes = [&](double next) {
      double worse = (next - cur) / std::max(cur, 1e-30);
      return next <= cur || unit(rng) < std::exp(-o.mcmcBeta * worse);
    };
    auto take = [&](double next, uint64_t k) {
      ++ch.accepted;
      cur = next;
      if (cur < ch.bestSeconds) {
        ch.bestSeconds = cur;
        ch.best = now;
        ch.bestOffsets = at;
        lastImproved = k;
      }
    };
    for (uint64_t k = 1; k <= steps && !movable.empty(); ++k) {
      if (o.searchBudget > 0 && (k & 63) == 0 &&
          std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                        start)
                  .count() > o.searchBudget) {
        ch.budgetHit = true;
        break;
      }
      unsigned i = movable[rng() % movable.size()];
      const std::vector<Config> &cs = d.vertices[i].configs;
      Config proposal = now[i];
      int64_t offset = at[i];
      if (place && (cs.size() == 1 || rng() % 4 == 0)) {
        // Another place for the same configuration, for the op's chain
        // where every op of it fits there.
        std::vector<int64_t> ps = placements(configDevices(now[i]), devices);
        offset = ps[rng() % ps.size()];
        std::vector<unsigned> moved;
        for (unsigned v : chainOf[i]) {
          int64_t k = configDevices(now[v]);
          if (v != i && !d.constants.count(d.vertices[v].op) &&
              offset % k == 0 && offset + k <= devices && at[v] != offset)
            moved.push_back(v);
        }
        if (!moved.empty() && rng() % 2 == 0) {
          ++ch.proposals;
          std::vector<int64_t> before = at;
          moved.push_back(i);
          double next = 0;
          for (unsigned v : moved) {
            at[v] = offset;
            if (!o.mcmcFullSimulation)
              next = sim.change(v, now[v], offset);
          }
          if (o.mcmcFullSimulation)
            next = sim.simulate(now, at);
          if (takes(next)) {
            take(next, k);
          } else {
            for (unsigned v : moved) {
              at[v] = before[v];
              if (!o.mcmcFullSimulation)
                sim.change(v, now[v], at[v]);
            }
          }
          if (k > 200 && k - lastImproved > k / 2)
            break;
          continue;
        }
      } else {
        // Another configuration, in place where it fits.
        proposal = cs[rng() % cs.size()];
        int64_t k = configDevices(proposal);
        if (offset % k || offset + k > devices)
          offset = 0;
      }
      if (proposal == now[i] && offset == at[i])
        continue;
      ++ch.proposals;
      double next;
      if (o.mcmcFullSimulation) {
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
      } else if (!o.mcmcFullSimulation) {
        sim.change(i, now[i], at[i]);
      }
      if (k > 200 && k - lastImproved > k / 2)
        break;
    }
  };
  if (o.threads == 1) {
    for (size_t c = 0; c < chains.size(); ++c)
      run(c);
  } else {
    tbb::parallel_for(size_t(0), chains.size(), run);
  }
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
  // A training step keeps the DP's microbatches and takes the levers that
  // fit the chain's configurations; where none do, the DP's strategy
  // stands (the chains price no memory).
  FittedLevers fitted =
      fitLevers(space, model, o, dp->microbatches, result.configs);
  if (!fitted.fits) {
    result.configs = dp->configs;
    result.offsets.clear();
    fitted.choices = dp->choices;
    result.cost.simulatedSeconds = chains[0].start;
  }
  result.microbatches = dp->microbatches;
  result.choices = std::move(fitted.choices);
  double simulated = result.cost.simulatedSeconds;
  result.cost = evaluateStrategy(
      space, leveredModel(space, model, o.levers, result.microbatches),
      result.configs, result.offsets, result.choices);
  result.cost.simulatedSeconds = simulated;
  result.searchCost = toPicos(result.cost.seconds);
  result.stats = dp->stats;
  result.stats.exact = false; // of the simulated time: a search, no proof
  for (const Vertex &v : d.vertices)
    result.spaceSizes.push_back(v.configs.size());
  return result;
}

} // namespace pax
