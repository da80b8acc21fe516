//===- DpSolverTest.cpp - PaSE's DP against the exhaustive oracle ---------===//
#include "passes/sharding/DpSolver.h"
#include "passes/sharding/Exhaustive.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

using namespace pax;

namespace {

std::string vertexName(unsigned v) { return "v" + std::to_string(v); }

/// Builds small cost graphs from a fixed seed. Draws use `rng() % n`, not
/// std:: distributions, so the graphs do not depend on the standard library.
class GraphMaker {
public:
  explicit GraphMaker(uint64_t seed) : rng(seed) {}

  unsigned below(unsigned n) { return rng() % n; }
  bool chance(unsigned percent) { return below(100) < percent; }

  /// A cost in [0, maxCost], sometimes forbidden, sometimes large enough
  /// that two of them saturate, sometimes over kInfCost (clamped).
  int64_t cost(unsigned maxCost) {
    unsigned roll = below(100);
    if (roll < 5)
      return kInfCost;
    if (roll < 7)
      return kInfCost / 2 + below(1000);
    if (roll < 8)
      return INT64_MAX;
    return below(maxCost + 1);
  }

  /// \p n vertices with 1-8 configurations each, at most \p maxStrategies
  /// strategies in all, random vertex costs.
  CostGraph vertices(unsigned n, uint64_t maxStrategies, unsigned maxCost) {
    CostGraph g;
    for (unsigned v = 0; v < n; ++v)
      g.numConfigs.push_back(1 + below(8));
    while (product(g) > maxStrategies) {
      unsigned v = below(n);
      g.numConfigs[v] = std::max(1u, g.numConfigs[v] / 2);
    }
    for (unsigned v = 0; v < n; ++v) {
      g.vertexCost.emplace_back();
      for (unsigned c = 0; c < g.numConfigs[v]; ++c)
        g.vertexCost[v].push_back(cost(maxCost));
    }
    return g;
  }

  /// Adds an edge u-v with random costs.
  void edge(CostGraph &g, unsigned u, unsigned v, unsigned maxCost) {
    CostGraph::Edge e{u, v, {}};
    for (unsigned i = 0; i < g.numConfigs[u] * g.numConfigs[v]; ++i)
      e.cost.edit().push_back(cost(maxCost));
    g.edges.push_back(std::move(e));
  }

  static uint64_t product(const CostGraph &g) {
    uint64_t p = 1;
    for (unsigned n : g.numConfigs)
      p *= n;
    return p;
  }

private:
  std::mt19937_64 rng;
};

enum class Shape {
  Chain,
  Diamonds,
  SkipConnections,
  Inception,
  RandomSparse,
  Disconnected,
  ParallelEdges,
  Hub,
  LongSkips,
  RepeatedLayers,
};
constexpr unsigned kNumShapes = 10;

using EdgeList = std::vector<std::pair<unsigned, unsigned>>;

/// A source fans out into 2-4 branches of length 1-2 that join in a sink,
/// which is the next source.
EdgeList inceptionEdges(unsigned n, GraphMaker &maker) {
  EdgeList edges;
  unsigned source = 0, v = 1;
  while (v < n) {
    unsigned branches = 2 + maker.below(3);
    std::vector<unsigned> tails;
    for (unsigned b = 0; b < branches && v + 1 < n; ++b) {
      edges.push_back({source, v});
      if (maker.chance(50) && v + 2 < n) {
        edges.push_back({v, v + 1});
        ++v;
      }
      tails.push_back(v++);
    }
    unsigned sink = v++;
    if (sink >= n)
      break;
    if (tails.empty())
      tails.push_back(source);
    for (unsigned t : tails)
      edges.push_back({t, sink});
    source = sink;
  }
  return edges;
}

/// Each vertex joins one or two earlier ones; with \p parallel, some edges
/// are repeated, some of them in the other orientation.
EdgeList sparseEdges(unsigned n, bool parallel, GraphMaker &maker) {
  EdgeList edges;
  for (unsigned v = 1; v < n; ++v) {
    edges.push_back({maker.below(v), v});
    if (v >= 2 && maker.chance(40))
      edges.push_back({maker.below(v), v});
  }
  if (parallel)
    for (unsigned i = 0, e = edges.size(); i < e; ++i)
      if (maker.chance(40))
        edges.push_back(maker.chance(50)
                            ? edges[i]
                            : std::pair(edges[i].second, edges[i].first));
  return edges;
}

/// Vertex pairs of a graph of \p shape over \p n vertices.
EdgeList shapeEdges(Shape shape, unsigned n, GraphMaker &maker) {
  EdgeList edges;
  switch (shape) {
  case Shape::Chain:
    for (unsigned v = 1; v < n; ++v)
      edges.push_back({v - 1, v});
    return edges;
  case Shape::Diamonds:
    // 0 -> {1, 2} -> 3 -> {4, 5} -> 6 ...
    for (unsigned v = 1; v < n; ++v) {
      if (v % 3 == 0) {
        edges.push_back({v - 2, v});
        edges.push_back({v - 1, v});
      } else {
        edges.push_back({v - v % 3, v});
      }
    }
    return edges;
  case Shape::SkipConnections:
    for (unsigned v = 1; v < n; ++v) {
      edges.push_back({v - 1, v});
      if (v >= 2 && maker.chance(50))
        edges.push_back({v - 2, v});
      if (v >= 3 && maker.chance(30))
        edges.push_back({v - 3, v});
    }
    return edges;
  case Shape::Inception:
    return inceptionEdges(n, maker);
  case Shape::RandomSparse:
    return sparseEdges(n, /*parallel=*/false, maker);
  case Shape::ParallelEdges:
    return sparseEdges(n, /*parallel=*/true, maker);
  case Shape::Hub:
    // A chain whose every vertex also reads vertex 0 (a mask, a rotary
    // table), sometimes twice.
    for (unsigned v = 1; v < n; ++v) {
      if (v >= 2)
        edges.push_back({v - 1, v});
      edges.push_back({0, v});
      if (maker.chance(20))
        edges.push_back({v, 0});
    }
    return edges;
  case Shape::LongSkips:
    // A chain whose first vertex is read by its last (a tied embedding),
    // plus residual skips of random length.
    for (unsigned v = 1; v < n; ++v) {
      edges.push_back({v - 1, v});
      if (v >= 3 && maker.chance(40))
        edges.push_back({maker.below(v - 1), v});
    }
    if (n >= 3)
      edges.push_back({0, n - 1});
    return edges;
  case Shape::RepeatedLayers: // built by repeatedGraph()
    return edges;
  case Shape::Disconnected:
    // Random forests plus a few extra edges: a vertex may start a new tree.
    for (unsigned v = 1; v < n; ++v)
      if (maker.chance(60))
        edges.push_back({maker.below(v), v});
    if (n >= 4 && maker.chance(50))
      edges.push_back({maker.below(n / 2), n / 2 + maker.below(n - n / 2)});
    return edges;
  }
  return edges;
}

/// \p blocks copies of one random block of \p blockSize vertices in a
/// chain, as the cost model gives repeated layers: every copy's vertices
/// have the same costs and its edges share arrays (CostMatrix), so the DP
/// builds equal tables once. With \p hub, a vertex read by every block.
CostGraph repeatedGraph(GraphMaker &maker, unsigned blockSize, unsigned blocks,
                        bool hub, uint64_t maxBlockStrategies) {
  unsigned maxCost = maker.chance(30) ? 3 : 1000;
  CostGraph block = maker.vertices(blockSize, maxBlockStrategies, maxCost);
  EdgeList inner;
  for (unsigned v = 1; v < blockSize; ++v) {
    inner.push_back({v - 1, v});
    if (v >= 2 && maker.chance(40))
      inner.push_back({maker.below(v - 1), v});
  }
  for (auto [u, v] : inner)
    maker.edge(block, u, v, maxCost);
  // The edge from one block's last vertex to the next block's first, a
  // residual skip between the blocks' first vertices, and the hub's edge
  // to each block's first vertex.
  auto matrix = [&](unsigned rows, unsigned columns) {
    CostMatrix m;
    for (unsigned i = 0; i < rows * columns; ++i)
      m.edit().push_back(maker.cost(maxCost));
    return m;
  };
  unsigned head = block.numConfigs[0], tail = block.numConfigs.back();
  CostMatrix linkCost = matrix(tail, head);
  bool skip = blockSize > 1 && maker.chance(50);
  CostMatrix skipCost = matrix(head, head);
  unsigned hubConfigs = 1 + maker.below(3), hubId = blockSize * blocks;
  CostMatrix hubCost = matrix(hubConfigs, head);
  CostGraph g;
  for (unsigned b = 0; b < blocks; ++b) {
    unsigned first = b * blockSize;
    llvm::append_range(g.numConfigs, block.numConfigs);
    llvm::append_range(g.vertexCost, block.vertexCost);
    for (const CostGraph::Edge &e : block.edges)
      g.edges.push_back({first + e.u, first + e.v, e.cost});
    if (b > 0) {
      g.edges.push_back({first - 1, first, linkCost});
      if (skip)
        g.edges.push_back({first - blockSize, first, skipCost});
    }
    if (hub)
      g.edges.push_back({hubId, first, hubCost});
  }
  if (hub) {
    g.numConfigs.push_back(hubConfigs);
    g.vertexCost.emplace_back();
    for (unsigned c = 0; c < hubConfigs; ++c)
      g.vertexCost.back().push_back(maker.cost(maxCost));
  }
  return g;
}

CostGraph randomGraph(Shape shape, GraphMaker &maker) {
  if (shape == Shape::RepeatedLayers) {
    // At most 8^4 * 3 strategies, for the exhaustive oracle.
    unsigned blockSize = 1 + maker.below(3), blocks = 2 + maker.below(3);
    return repeatedGraph(maker, blockSize, blocks, maker.chance(50), 8);
  }
  unsigned n = 2 + maker.below(8);
  // Small cost ranges make many ties, large ones make distinct optima.
  unsigned maxCost = maker.chance(30) ? 3 : 1000;
  CostGraph g = maker.vertices(n, 20'000, maxCost);
  for (auto [u, v] : shapeEdges(shape, n, maker))
    if (u != v)
      maker.edge(g, u, v, maxCost);
  return g;
}

Solution solveOk(const CostGraph &g, const DpOptions &options) {
  auto s = solveDp(g, options, vertexName);
  if (!s) {
    ADD_FAILURE() << llvm::toString(s.takeError());
    return {};
  }
  return std::move(*s);
}

/// An Inception-like graph: a stem, three blocks of six branches of
/// lengths 1-3 between a fan-out and a concat, and a head. 2 configurations
/// per vertex, all costs zero; the order does not look at costs.
CostGraph inceptionGraph() {
  CostGraph g;
  auto add = [&] {
    g.numConfigs.push_back(2);
    g.vertexCost.push_back({0, 0});
    return g.size() - 1;
  };
  auto link = [&](unsigned u, unsigned v) {
    g.edges.push_back({u, v, {0, 0, 0, 0}});
  };
  unsigned prev = add();
  link(prev, add());
  prev = g.size() - 1;
  for (unsigned block = 0; block < 3; ++block) {
    unsigned concat = add();
    for (unsigned branch = 0; branch < 6; ++branch) {
      unsigned from = prev;
      for (unsigned len = 0; len < 1 + branch % 3; ++len) {
        unsigned v = add();
        link(from, v);
        from = v;
      }
      link(from, concat);
    }
    prev = concat;
  }
  link(prev, add());
  return g;
}

unsigned largest(llvm::ArrayRef<unsigned> sizes) {
  return sizes.empty() ? 0 : *std::max_element(sizes.begin(), sizes.end());
}

/// |D| of \p v by PaSE's definition, if the vertices in \p prefix (plus v)
/// are sequenced: the neighbours of the connected set of v, outside them.
unsigned definedDependentSetSize(const CostGraph &g,
                                 const std::vector<bool> &prefix, unsigned v) {
  std::vector<std::vector<unsigned>> adj(g.size());
  for (const CostGraph::Edge &e : g.edges) {
    adj[e.u].push_back(e.v);
    adj[e.v].push_back(e.u);
  }
  std::vector<bool> inC(g.size(), false), inD(g.size(), false);
  std::vector<unsigned> stack{v};
  inC[v] = true;
  while (!stack.empty()) {
    unsigned w = stack.back();
    stack.pop_back();
    for (unsigned u : adj[w]) {
      if (u != v && !prefix[u])
        inD[u] = true;
      else if (!inC[u]) {
        inC[u] = true;
        stack.push_back(u);
      }
    }
  }
  return std::count(inD.begin(), inD.end(), true);
}

} // namespace

// The DP (either order) must find exactly the exhaustive optimum, and the
// strategy it reports must cost what it says.
TEST(DpSolver, MatchesExhaustiveOnRandomGraphs) {
  GraphMaker maker(20240611);
  unsigned checked = 0;
  for (unsigned round = 0; round < 50; ++round)
    for (unsigned s = 0; s < kNumShapes; ++s) {
      CostGraph g = randomGraph(Shape(s), maker);
      auto oracle = solveExhaustive(g);
      ASSERT_TRUE(bool(oracle)) << llvm::toString(oracle.takeError());
      for (VertexOrder order :
           {VertexOrder::GenerateSeq, VertexOrder::BreadthFirst,
            VertexOrder::MinWork, VertexOrder::Best}) {
        DpOptions options;
        options.order = order;
        options.threads = 1;
        Solution dp = solveOk(g, options);
        ASSERT_EQ(dp.strategy.size(), g.size());
        EXPECT_EQ(dp.cost, oracle->cost)
            << "shape " << s << " round " << round << " order " << int(order);
        EXPECT_EQ(evaluate(g, dp.strategy), dp.cost);
      }
      ++checked;
    }
  EXPECT_EQ(checked, 50u * kNumShapes);
}

// With a state budget too small for the plain DP: conditioning on a hub
// finds the optimum, the relaxation's bound never exceeds it, the strategy
// costs what it says and never less than the optimum, and a strategy marked
// exact is optimal.
TEST(DpSolver, RelaxationBoundsTheOptimum) {
  GraphMaker maker(20261124);
  unsigned relaxed = 0, proven = 0, conditioned = 0;
  for (unsigned round = 0; round < 60; ++round)
    for (unsigned s = 0; s < kNumShapes; ++s) {
      CostGraph g = randomGraph(Shape(s), maker);
      auto oracle = solveExhaustive(g);
      ASSERT_TRUE(bool(oracle)) << llvm::toString(oracle.takeError());
      DpOptions options;
      options.threads = 1;
      options.maxStates = 1 + maker.below(3 * g.size());
      Solution dp = solveOk(g, options);
      std::string where =
          "shape " + std::to_string(s) + " round " + std::to_string(round);
      ASSERT_EQ(dp.strategy.size(), g.size()) << where;
      EXPECT_EQ(evaluate(g, dp.strategy), dp.cost) << where;
      EXPECT_LE(dp.stats.lowerBound, oracle->cost) << where;
      EXPECT_GE(dp.cost, oracle->cost) << where;
      if (dp.stats.exact) {
        EXPECT_EQ(dp.cost, oracle->cost) << where;
      }
      if (dp.stats.conditionedClasses) {
        ++conditioned;
        EXPECT_TRUE(dp.stats.exact) << where;
      } else if (dp.stats.exactStates) {
        ++relaxed;
        proven += dp.stats.exact;
      }
    }
  // Every outcome occurs: conditioning on a hub, and relaxations proven
  // optimal or not.
  EXPECT_GT(conditioned, 5u);
  EXPECT_GT(relaxed, 50u);
  EXPECT_GT(proven, 0u);
  EXPECT_LT(proven, relaxed);
}

// Repeated layers: the copies' tables are built once and read by every
// copy, with the same optimum as when every edge has its own array (no
// table is then equal to another), and fewer entries built; a state budget
// of the entries built is enough for the exact DP.
TEST(DpSolver, RepeatedLayersBuildTheirTablesOnce) {
  GraphMaker maker(1124);
  uint64_t built = 0, states = 0;
  unsigned fewer = 0;
  for (unsigned round = 0; round < 20; ++round) {
    CostGraph g = repeatedGraph(maker, 2 + maker.below(4), 12 + maker.below(20),
                                maker.chance(50), 64);
    CostGraph unshared = g;
    for (CostGraph::Edge &e : unshared.edges)
      e.cost.edit(); // each edge its own array
    DpOptions options;
    options.threads = 1 + round % 2;
    Solution shared = solveOk(g, options), alone = solveOk(unshared, options);
    std::string where = "round " + std::to_string(round);
    EXPECT_EQ(shared.cost, alone.cost) << where;
    EXPECT_EQ(evaluate(g, shared.strategy), shared.cost) << where;
    EXPECT_EQ(shared.stats.states, alone.stats.states) << where;
    EXPECT_EQ(alone.stats.builtStates, alone.stats.states) << where;
    EXPECT_LE(shared.stats.builtStates, shared.stats.states) << where;
    // The budget counts the entries held: equal tables once.
    options.maxStates = shared.stats.builtStates;
    Solution within = solveOk(g, options);
    EXPECT_EQ(within.cost, alone.cost) << where;
    EXPECT_TRUE(within.stats.exact) << where;
    EXPECT_EQ(within.stats.exactStates, 0u) << where;
    EXPECT_EQ(within.stats.splitVertices, 0u) << where;
    built += shared.stats.builtStates;
    states += shared.stats.states;
    fewer += shared.stats.builtStates < shared.stats.states;
  }
  // How much is shared depends on the order: GenerateSeq may sweep the
  // chain from its first vertex, every table then holding the blocks before.
  EXPECT_GT(fewer, 10u);
  EXPECT_LT(built * 2, states);
}

// dependentSetSizes follows the definition, for either order; GenerateSeq
// always sequences a vertex with the smallest dependent set.
TEST(DpSolver, DependentSetsFollowTheDefinition) {
  GraphMaker maker(99);
  for (unsigned round = 0; round < 20; ++round)
    for (unsigned s = 0; s < kNumShapes; ++s) {
      CostGraph g = randomGraph(Shape(s), maker);
      for (const auto &order : {generateSeq(g), breadthFirstOrder(g)}) {
        std::vector<unsigned> sizes = dependentSetSizes(g, order);
        std::vector<bool> prefix(g.size(), false);
        for (auto [i, v] : llvm::enumerate(order)) {
          EXPECT_EQ(sizes[i], definedDependentSetSize(g, prefix, v));
          prefix[v] = true;
        }
      }
      std::vector<bool> prefix(g.size(), false);
      for (unsigned v : generateSeq(g)) {
        unsigned size = definedDependentSetSize(g, prefix, v);
        for (unsigned u = 0; u < g.size(); ++u)
          if (!prefix[u] && u != v) {
            // Ties go to the vertex with the fewest vertices merged in.
            EXPECT_LE(size, definedDependentSetSize(g, prefix, u));
          }
        prefix[v] = true;
      }
    }
}

// Ties everywhere (costs 0-2) and tables big enough to be split over
// threads: the strategy must not depend on the thread count.
TEST(DpSolver, SameResultForAnyThreadCount) {
  GraphMaker maker(7);
  CostGraph g = inceptionGraph();
  for (unsigned v = 0; v < g.size(); ++v) {
    g.numConfigs[v] = 3;
    g.vertexCost[v].clear();
    for (unsigned c = 0; c < 3; ++c)
      g.vertexCost[v].push_back(maker.below(3));
  }
  for (CostGraph::Edge &e : g.edges) {
    e.cost.edit().clear();
    for (unsigned i = 0; i < 9; ++i)
      e.cost.edit().push_back(maker.below(3));
  }
  for (VertexOrder order :
       {VertexOrder::GenerateSeq, VertexOrder::BreadthFirst}) {
    DpOptions options;
    options.order = order;
    std::vector<double> fractions;
    options.progress = [&](double f) { fractions.push_back(f); };
    options.threads = 1;
    Solution one = solveOk(g, options);
    options.threads = 2;
    Solution two = solveOk(g, options);
    EXPECT_EQ(one.cost, two.cost);
    EXPECT_EQ(one.strategy, two.strategy);
    EXPECT_EQ(evaluate(g, one.strategy), one.cost);
    ASSERT_EQ(fractions.size(), 2 * g.size());
    EXPECT_TRUE(
        std::is_sorted(fractions.begin(), fractions.begin() + g.size()));
    EXPECT_DOUBLE_EQ(fractions.back(), 1.0);
  }
}

// The min-work order is a valid elimination order (every vertex once), and
// the default order, which takes it where it does less table work than
// GenerateSeq, finds the same optimum and reports both orders' largest
// dependent sets.
TEST(DpSolver, BestOrderKeepsTheOptimum) {
  GraphMaker maker(4242);
  unsigned minWork = 0;
  for (unsigned round = 0; round < 20; ++round)
    for (unsigned s = 0; s < kNumShapes; ++s) {
      CostGraph g = randomGraph(Shape(s), maker);
      std::vector<unsigned> sorted = minWorkOrder(g);
      std::sort(sorted.begin(), sorted.end());
      for (unsigned v = 0; v < g.size(); ++v)
        ASSERT_EQ(sorted[v], v);
      DpOptions seq, best;
      seq.order = VertexOrder::GenerateSeq;
      Solution a = solveOk(g, seq), b = solveOk(g, best);
      EXPECT_EQ(a.cost, b.cost);
      EXPECT_EQ(b.stats.largestGenerateSeq, a.stats.largestDependentSet);
      EXPECT_EQ(b.stats.largestMinWork,
                largest(dependentSetSizes(g, minWorkOrder(g))));
      minWork += b.stats.order == VertexOrder::MinWork;
    }
  EXPECT_GT(minWork, 0u);
}

// PaSE section III-C: breadth-first order reaches a concat while the other
// branches of its block are still open and the next block's branches are
// starting, so they all sit in one dependent set (12 here); GenerateSeq
// sequences the branches first and the fan-out and concat vertices last,
// so no dependent set holds more than a fan-out and a concat (2).
TEST(DpSolver, GenerateSeqKeepsDependentSetsSmall) {
  CostGraph g = inceptionGraph();
  unsigned seq = largest(dependentSetSizes(g, generateSeq(g)));
  unsigned bfs = largest(dependentSetSizes(g, breadthFirstOrder(g)));
  EXPECT_EQ(seq, 2u);
  EXPECT_EQ(bfs, 12u);

  DpOptions options;
  Solution s = solveOk(g, options);
  EXPECT_EQ(s.stats.largestDependentSet, 2u);
  options.order = VertexOrder::BreadthFirst;
  EXPECT_EQ(solveOk(g, options).stats.largestDependentSet, 12u);
}

TEST(DpSolver, TooManyStatesNamesTheVertex) {
  // A hub with ten leaves: breadth-first starts at the hub, whose dependent
  // set holds every leaf; GenerateSeq takes the leaves first.
  CostGraph g;
  for (unsigned v = 0; v <= 10; ++v) {
    g.numConfigs.push_back(2);
    g.vertexCost.push_back({1, 2});
    if (v)
      g.edges.push_back({0, v, {0, 1, 1, 0}});
  }
  auto name = [](unsigned v) { return v ? "leaf" + std::to_string(v) : "hub"; };
  DpOptions options;
  options.order = VertexOrder::BreadthFirst;
  options.maxStates = 15;
  options.exact = true;
  auto s = solveDp(g, options, name);
  ASSERT_FALSE(bool(s));
  EXPECT_EQ(llvm::toString(s.takeError()),
            "too many DP states for an exact search: 2047 in all, the limit "
            "is --max-states=15; the largest table is vertex 'hub''s, with "
            "a dependent set of 10 vertices (1024 states)");

  // With room for it, conditioning on the hub is exact: without it the
  // leaves are alone, solved once per class of the hub's configurations
  // (two: their costs differ).
  options.maxStates = 1000;
  auto conditioned = solveDp(g, options, name);
  ASSERT_TRUE(bool(conditioned)) << llvm::toString(conditioned.takeError());
  EXPECT_EQ(conditioned->cost, 11);
  EXPECT_TRUE(conditioned->stats.exact);
  EXPECT_EQ(conditioned->stats.conditionedClasses, 2u);
  EXPECT_EQ(conditioned->stats.exactStates, 2047u);

  // Without `exact` and without room to condition (20 states) or for
  // GenerateSeq's order (21), the relaxation cannot fit either (a split
  // star has more tables, not smaller ones): every vertex takes its
  // cheapest configuration, and the bound (the cheapest entry of every
  // vertex and edge) proves it optimal.
  options.exact = false;
  options.maxStates = 19;
  auto relaxed = solveDp(g, options, name);
  ASSERT_TRUE(bool(relaxed)) << llvm::toString(relaxed.takeError());
  EXPECT_EQ(relaxed->cost, 11);
  EXPECT_TRUE(relaxed->stats.exact);
  EXPECT_EQ(relaxed->stats.lowerBound, 11);
  EXPECT_EQ(relaxed->stats.splitVertices, 0u);
  EXPECT_EQ(relaxed->stats.conditionedClasses, 0u);
  EXPECT_EQ(relaxed->stats.exactStates, 2047u);

  options.order = VertexOrder::GenerateSeq;
  options.maxStates = 1000;
  auto ok = solveDp(g, options, name);
  ASSERT_TRUE(bool(ok)) << llvm::toString(ok.takeError());
  EXPECT_EQ(ok->cost, 11);
  EXPECT_EQ(ok->stats.states, 21u);
  EXPECT_EQ(ok->stats.largestDependentSet, 1u);
}

// a - b - c, configuration 0 replicated and 1 split: splitting a and b is
// cheap, splitting c is not, and a change of configuration costs 7.
//   (1,1,0): 4 + 4 + 10 + 0 + 7 = 25 beats (1,1,1) = 28 and (0,0,0) = 30.
TEST(DpSolver, HandCheckedChain) {
  CostGraph g;
  g.numConfigs = {2, 2, 2};
  g.vertexCost = {{10, 4}, {10, 4}, {10, 20}};
  g.edges = {{0, 1, {0, 7, 7, 0}}, {1, 2, {0, 7, 7, 0}}};
  for (VertexOrder order :
       {VertexOrder::GenerateSeq, VertexOrder::BreadthFirst}) {
    DpOptions options;
    options.order = order;
    Solution s = solveOk(g, options);
    EXPECT_EQ(s.cost, 25);
    EXPECT_EQ(s.strategy, (std::vector<unsigned>{1, 1, 0}));
    EXPECT_EQ(s.stats.largestDependentSet, 1u);
  }
  EXPECT_EQ(dependentSetSizes(g, {0, 1, 2}), (std::vector<unsigned>{1, 1, 0}));

  Solution empty = solveOk(CostGraph(), DpOptions());
  EXPECT_EQ(empty.cost, 0);
  EXPECT_TRUE(empty.strategy.empty());
}

TEST(DpSolver, EvaluateSaturatesAtInf) {
  CostGraph g;
  g.numConfigs = {2, 1};
  g.vertexCost = {{kInfCost - 1, 3}, {INT64_MAX}};
  g.edges = {{0, 1, {5, 6}}, {1, 0, {1, 2}}};
  EXPECT_EQ(evaluate(g, {0, 0}), kInfCost);
  g.vertexCost[1] = {0};
  EXPECT_EQ(evaluate(g, {0, 0}), kInfCost);
  EXPECT_EQ(evaluate(g, {1, 0}), 3 + 6 + 2);
  Solution s = solveOk(g, DpOptions());
  EXPECT_EQ(s.cost, 11);
}

TEST(DpSolver, RejectsMalformedGraph) {
  CostGraph g;
  g.numConfigs = {2, 2};
  g.vertexCost = {{0, 0}, {0, 0}};
  g.edges = {{0, 1, {0, 0, 0}}};
  auto s = solveDp(g, DpOptions(), vertexName);
  ASSERT_FALSE(bool(s));
  EXPECT_EQ(llvm::toString(s.takeError()),
            "cost graph: edge 0 has 3 costs, expected 4");
}

TEST(ExhaustiveSolver, BreaksTiesLexicographically) {
  CostGraph g;
  g.numConfigs = {2, 3};
  g.vertexCost = {{1, 1}, {5, 0, 0}};
  g.edges = {{0, 1, {9, 0, 0, 9, 0, 0}}};
  auto s = solveExhaustive(g);
  ASSERT_TRUE(bool(s));
  EXPECT_EQ(s->cost, 1);
  EXPECT_EQ(s->strategy, (std::vector<unsigned>{0, 1}));
  EXPECT_EQ(s->stats.states, 6u);
}

TEST(ExhaustiveSolver, TooManyStrategies) {
  CostGraph g;
  for (unsigned v = 0; v < 5; ++v) {
    g.numConfigs.push_back(4);
    g.vertexCost.push_back({0, 0, 0, 0});
  }
  auto s = solveExhaustive(g, 1000);
  ASSERT_FALSE(bool(s));
  EXPECT_EQ(llvm::toString(s.takeError()),
            "too many strategies for exhaustive search: 1024 (the limit is "
            "1000)");
}
