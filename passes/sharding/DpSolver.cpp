//===- DpSolver.cpp - PaSE's exact dynamic program over a cost graph ------===//
#include "passes/sharding/DpSolver.h"

#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/FormatVariadic.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cassert>
#include <chrono>
#include <deque>
#include <iterator>
#include <map>
#include <numeric>
#include <set>
#include <tuple>

using namespace pax;

namespace {

/// Sorted, duplicate-free neighbour lists.
using Adjacency = std::vector<std::vector<unsigned>>;

/// Edge costs summed over parallel edges, oriented per endpoint:
/// costs[{v, u}][cu * numConfigs[v] + cv] (v's configuration is contiguous).
using PairCosts = std::map<std::pair<unsigned, unsigned>, CostMatrix>;

/// One position of the vertex sequence.
struct Step {
  unsigned vertex = 0;
  /// D(i), latest-sequenced first: the first is the most significant digit
  /// of the table index, and the last is the vertex sequenced next among
  /// them, the parent that consumes this table, so that the parent reads it
  /// contiguously across its own configurations.
  std::vector<unsigned> dependents;
  /// Positions of the last vertices of the connected subsets of C(i).
  std::vector<unsigned> children;
};

/// One vertex's DP table, keyed by the configurations of its dependent set.
struct Table {
  /// Index stride of each dependent; the last one is 1.
  std::vector<uint64_t> strides;
  /// f(i, a); freed once every parent reading it has consumed it.
  std::vector<int64_t> cost;
  /// The configuration of v_i achieving f(i, a), for back-substitution.
  std::vector<uint16_t> best;
};

/// Disjoint sets over the vertices, for the connected sets of a prefix.
class UnionFind {
public:
  explicit UnionFind(unsigned n) : parent(n) {
    std::iota(parent.begin(), parent.end(), 0u);
  }
  unsigned find(unsigned v) {
    while (parent[v] != v)
      v = parent[v] = parent[parent[v]];
    return v;
  }
  void unite(unsigned a, unsigned b) { parent[find(a)] = find(b); }

private:
  std::vector<unsigned> parent;
};

} // namespace

static Adjacency buildAdjacency(const CostGraph &graph) {
  Adjacency adj(graph.size());
  for (const CostGraph::Edge &e : graph.edges) {
    adj[e.u].push_back(e.v);
    adj[e.v].push_back(e.u);
  }
  for (std::vector<unsigned> &list : adj) {
    llvm::sort(list);
    list.erase(std::unique(list.begin(), list.end()), list.end());
  }
  return adj;
}

// A pair joined by one edge shares the edge's array for one orientation,
// and the transpose of an array is built once for all the edges sharing it
// (repeated layers), so the DP holds each distinct table about twice.
static PairCosts buildPairCosts(const CostGraph &graph) {
  std::map<std::pair<unsigned, unsigned>, unsigned> parallel;
  for (const CostGraph::Edge &e : graph.edges)
    ++parallel[{std::min(e.u, e.v), std::max(e.u, e.v)}];
  std::map<const int64_t *, CostMatrix> clamped, transposed;
  auto clampedOf = [&](const CostMatrix &m) {
    if (llvm::none_of(m, [](int64_t c) { return c > kInfCost; }))
      return m;
    auto [it, fresh] = clamped.try_emplace(m.data());
    if (fresh) {
      std::vector<int64_t> out(m.begin(), m.end());
      for (int64_t &c : out)
        c = clampCost(c);
      it->second = std::move(out);
    }
    return it->second;
  };
  PairCosts costs;
  for (const CostGraph::Edge &e : graph.edges) {
    unsigned nu = graph.numConfigs[e.u], nv = graph.numConfigs[e.v];
    if (parallel[{std::min(e.u, e.v), std::max(e.u, e.v)}] == 1) {
      CostMatrix m = clampedOf(e.cost);
      auto [it, fresh] = transposed.try_emplace(m.data());
      if (fresh) {
        std::vector<int64_t> t(m.size());
        for (unsigned cu = 0; cu < nu; ++cu)
          for (unsigned cv = 0; cv < nv; ++cv)
            t[size_t(cv) * nu + cu] = m[size_t(cu) * nv + cv];
        it->second = std::move(t);
      }
      costs[{e.v, e.u}] = m;
      costs[{e.u, e.v}] = it->second;
      continue;
    }
    std::vector<int64_t> &atU = costs[{e.u, e.v}].edit();
    std::vector<int64_t> &atV = costs[{e.v, e.u}].edit();
    atU.resize(size_t(nu) * nv, 0);
    atV.resize(size_t(nu) * nv, 0);
    for (unsigned cu = 0; cu < nu; ++cu)
      for (unsigned cv = 0; cv < nv; ++cv) {
        int64_t c = clampCost(e.cost[size_t(cu) * nv + cv]);
        atU[size_t(cv) * nu + cu] = addCost(atU[size_t(cv) * nu + cu], c);
        atV[size_t(cu) * nv + cv] = addCost(atV[size_t(cu) * nv + cv], c);
      }
  }
  return costs;
}

/// Computes D(i) and the connected subsets of every position of \p order,
/// growing the connected sets of the prefix with union-find.
static std::vector<Step> analyzeOrder(const Adjacency &adj,
                                      llvm::ArrayRef<unsigned> order) {
  unsigned n = adj.size();
  std::vector<unsigned> position(n);
  for (auto [i, v] : llvm::enumerate(order))
    position[v] = unsigned(i);
  UnionFind sets(n);
  std::vector<unsigned> lastPos(n);
  std::vector<bool> done(n, false);
  std::vector<Step> steps(order.size());
  for (auto [i, v] : llvm::enumerate(order)) {
    Step &step = steps[i];
    step.vertex = v;
    done[v] = true;
    std::vector<unsigned> deps;
    for (unsigned u : adj[v]) {
      if (!done[u])
        deps.push_back(u);
      else
        step.children.push_back(lastPos[sets.find(u)]);
    }
    llvm::sort(step.children);
    step.children.erase(llvm::unique(step.children), step.children.end());
    for (unsigned child : step.children) {
      llvm::append_range(deps, steps[child].dependents);
      sets.unite(steps[child].vertex, v);
    }
    llvm::sort(deps);
    deps.erase(llvm::unique(deps), deps.end());
    llvm::erase(deps, v);
    llvm::sort(deps, [&](unsigned a, unsigned b) {
      return position[a] > position[b];
    });
    step.dependents = std::move(deps);
    lastPos[sets.find(v)] = i;
  }
  return steps;
}

std::vector<unsigned> pax::dependentSetSizes(const CostGraph &graph,
                                             llvm::ArrayRef<unsigned> order) {
  std::vector<unsigned> sizes;
  for (const Step &step : analyzeOrder(buildAdjacency(graph), order))
    sizes.push_back(step.dependents.size());
  return sizes;
}

/// Merges \p from into \p into, leaving out \p skipA and \p skipB.
static void mergeDependents(std::vector<unsigned> &into,
                            llvm::ArrayRef<unsigned> from, unsigned skipA,
                            unsigned skipB) {
  std::vector<unsigned> merged;
  merged.reserve(into.size() + from.size());
  std::set_union(into.begin(), into.end(), from.begin(), from.end(),
                 std::back_inserter(merged));
  llvm::erase(merged, skipA);
  llvm::erase(merged, skipB);
  into = std::move(merged);
}

// GenerateSeq (Fig. 3): deps[u] is the dependent set u would have if it were
// sequenced next. Sequencing v merges C(v) into the connected set of every
// u in D(v), so those u inherit D(v) (Theorem 2); nobody else changes. The
// vertex with the smallest \p key (of its would-be dependent set) goes next;
// on a tie, the one with the fewest sequenced vertices merged into it, then
// the lowest id. So each repeated layer is reduced to its boundary before
// the layers are joined, and the layers' tables are equal (tableClasses()),
// instead of one sweep from the first layer carrying all the layers before.
// The merged count adds up along the way and may count a vertex twice; it
// only breaks ties.
static std::vector<unsigned> eliminationOrder(
    const CostGraph &graph,
    llvm::function_ref<uint64_t(unsigned, llvm::ArrayRef<unsigned>)> key) {
  Adjacency deps = buildAdjacency(graph);
  std::vector<uint64_t> keys(graph.size()), merged(graph.size(), 0);
  std::set<std::tuple<uint64_t, uint64_t, unsigned>> queue;
  for (unsigned v = 0; v < graph.size(); ++v)
    queue.insert({keys[v] = key(v, deps[v]), 0, v});
  std::vector<unsigned> order;
  order.reserve(graph.size());
  while (!queue.empty()) {
    unsigned v = std::get<2>(*queue.begin());
    queue.erase(queue.begin());
    order.push_back(v);
    for (unsigned u : deps[v]) {
      queue.erase({keys[u], merged[u], u});
      mergeDependents(deps[u], deps[v], u, v);
      merged[u] += merged[v] + 1;
      queue.insert({keys[u] = key(u, deps[u]), merged[u], u});
    }
    deps[v].clear();
  }
  return order;
}

std::vector<unsigned> pax::generateSeq(const CostGraph &graph) {
  return eliminationOrder(graph, [](unsigned, llvm::ArrayRef<unsigned> deps) {
    return uint64_t(deps.size());
  });
}

// Keyed by the work of sequencing a vertex next (its table's entries times
// its configurations) instead of the dependent set's size: a vertex with
// many configurations waits for a small table.
std::vector<unsigned> pax::minWorkOrder(const CostGraph &graph) {
  return eliminationOrder(
      graph, [&](unsigned v, llvm::ArrayRef<unsigned> deps) {
        uint64_t w = graph.numConfigs[v];
        for (unsigned u : deps)
          if (__builtin_mul_overflow(w, uint64_t(graph.numConfigs[u]), &w))
            return UINT64_MAX;
        return w;
      });
}

std::vector<unsigned> pax::breadthFirstOrder(const CostGraph &graph) {
  Adjacency adj = buildAdjacency(graph);
  std::vector<bool> seen(graph.size(), false);
  std::vector<unsigned> order;
  order.reserve(graph.size());
  for (unsigned root = 0; root < graph.size(); ++root) {
    if (seen[root])
      continue;
    seen[root] = true;
    std::deque<unsigned> queue{root};
    while (!queue.empty()) {
      unsigned v = queue.front();
      queue.pop_front();
      order.push_back(v);
      for (unsigned u : adj[v])
        if (!seen[u]) {
          seen[u] = true;
          queue.push_back(u);
        }
    }
  }
  return order;
}

const char *pax::vertexOrderName(VertexOrder order) {
  switch (order) {
  case VertexOrder::Best:
    return "best";
  case VertexOrder::GenerateSeq:
    return "generate-seq";
  case VertexOrder::MinWork:
    return "min-work";
  case VertexOrder::BreadthFirst:
    return "breadth-first";
  }
  llvm_unreachable("unknown vertex order");
}

std::vector<unsigned> pax::vertexOrder(const CostGraph &graph,
                                       VertexOrder order) {
  switch (order) {
  case VertexOrder::Best: // solveDp weighs both
  case VertexOrder::GenerateSeq:
    return generateSeq(graph);
  case VertexOrder::MinWork:
    return minWorkOrder(graph);
  case VertexOrder::BreadthFirst:
    return breadthFirstOrder(graph);
  }
  llvm_unreachable("unknown vertex order");
}

//===----------------------------------------------------------------------===//
// Table sizes
//===----------------------------------------------------------------------===//

/// Product of the configuration counts of \p vertices, or UINT64_MAX when it
/// does not fit.
static uint64_t tableSize(const CostGraph &graph,
                          llvm::ArrayRef<unsigned> vertices) {
  uint64_t size = 1;
  for (unsigned v : vertices)
    if (__builtin_mul_overflow(size, uint64_t(graph.numConfigs[v]), &size))
      return UINT64_MAX;
  return size;
}

/// The size of every step's table (saturating) and their total.
static std::vector<uint64_t> tableSizes(const CostGraph &graph,
                                        llvm::ArrayRef<Step> steps,
                                        uint64_t &total) {
  std::vector<uint64_t> sizes;
  total = 0;
  for (const Step &step : steps) {
    sizes.push_back(tableSize(graph, step.dependents));
    if (__builtin_add_overflow(total, sizes.back(), &total))
      total = UINT64_MAX;
  }
  return sizes;
}

static std::string statesStr(uint64_t n) {
  return n == UINT64_MAX ? std::string("more than 2^64") : std::to_string(n);
}

/// The error of an exact search that does not fit: the total and the
/// vertex with the largest table.
static llvm::Error
tooManyStates(llvm::ArrayRef<Step> steps, llvm::ArrayRef<uint64_t> sizes,
              uint64_t total, uint64_t maxStates,
              llvm::function_ref<std::string(unsigned)> vertexName) {
  size_t largest = 0;
  for (size_t i = 0; i < sizes.size(); ++i)
    if (sizes[i] > sizes[largest])
      largest = i;
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      llvm::formatv("too many DP states for an exact search: {0} in all, the "
                    "limit is --max-states={1}; the largest table is vertex "
                    "'{2}''s, with a dependent set of {3} vertices ({4} "
                    "states)",
                    statesStr(total), maxStates,
                    vertexName(steps[largest].vertex),
                    steps[largest].dependents.size(), statesStr(sizes[largest]))
          .str());
}

//===----------------------------------------------------------------------===//
// Table construction
//===----------------------------------------------------------------------===//

namespace {

/// Everything one table entry needs, prepared once per vertex and shared
/// read-only by the threads filling the table.
struct StepPlan {
  /// Clamped costs of v_i per configuration.
  std::vector<int64_t> vertexCost;
  /// numConfigs of each dependent (the radix of each index digit).
  std::vector<unsigned> radix;
  /// An edge (v_i, u) with u the dependent at index digit `digit`; row
  /// a(u) of `matrix` holds the costs for every configuration of v_i.
  struct EdgeTerm {
    unsigned digit;
    const int64_t *matrix;
  };
  std::vector<EdgeTerm> edges;
  /// A connected subset's table: f(j, .) is read at sum over digits of
  /// a(d) * digitStride[d] (0 when d is not in D(j)) + c * configStride.
  struct ChildTerm {
    const int64_t *cost;
    std::vector<uint64_t> digitStride;
    uint64_t configStride;
  };
  std::vector<ChildTerm> children;
};

} // namespace

static std::vector<uint64_t> computeStrides(const CostGraph &graph,
                                            llvm::ArrayRef<unsigned> deps) {
  std::vector<uint64_t> strides(deps.size());
  uint64_t stride = 1;
  for (size_t t = deps.size(); t-- > 0;) {
    strides[t] = stride;
    stride *= graph.numConfigs[deps[t]];
  }
  return strides;
}

/// Where a parent reads connected subset \p child's table: the stride of each
/// of the parent's dependents (0 when not in D(child)), then of the parent's
/// own configuration.
static std::vector<uint64_t> childStrides(llvm::ArrayRef<Step> steps,
                                          llvm::ArrayRef<Table> tables,
                                          unsigned pos, unsigned child) {
  const Step &step = steps[pos], &sub = steps[child];
  auto strideOf = [&](unsigned vertex) -> uint64_t {
    auto it = llvm::find(sub.dependents, vertex);
    return it == sub.dependents.end()
               ? 0
               : tables[child].strides[it - sub.dependents.begin()];
  };
  std::vector<uint64_t> strides;
  for (unsigned u : step.dependents)
    strides.push_back(strideOf(u));
  assert(llvm::is_contained(sub.dependents, step.vertex) &&
         "a connected subset is adjacent to its parent");
  strides.push_back(strideOf(step.vertex));
  return strides;
}

/// \p source[j]: the step whose table stands for step j's (see
/// tableClasses()).
static StepPlan planStep(const CostGraph &graph, const PairCosts &pairs,
                         llvm::ArrayRef<Step> steps,
                         llvm::ArrayRef<Table> tables,
                         llvm::ArrayRef<unsigned> source, unsigned pos) {
  const Step &step = steps[pos];
  StepPlan plan;
  for (int64_t c : graph.vertexCost[step.vertex])
    plan.vertexCost.push_back(clampCost(c));
  for (auto [t, u] : llvm::enumerate(step.dependents)) {
    plan.radix.push_back(graph.numConfigs[u]);
    auto it = pairs.find({step.vertex, u});
    if (it != pairs.end())
      plan.edges.push_back({unsigned(t), it->second.data()});
  }
  for (unsigned child : step.children) {
    std::vector<uint64_t> strides = childStrides(steps, tables, pos, child);
    uint64_t configStride = strides.back();
    strides.pop_back();
    plan.children.push_back(
        {tables[source[child]].cost.data(), std::move(strides), configStride});
  }
  return plan;
}

/// Repeated layers give steps whose tables are equal entry for entry: the
/// same vertex costs, dependents with the same configuration counts, the
/// same edge arrays to them at the same digits, and children of the same
/// class read at the same strides. Returns, per step, the first step of its
/// class: only that one is built, and the others read it.
static std::vector<unsigned> tableClasses(const CostGraph &graph,
                                          const PairCosts &pairs,
                                          llvm::ArrayRef<Step> steps,
                                          llvm::ArrayRef<Table> tables) {
  // Vertices with equal costs share an id.
  std::vector<uint64_t> costId(graph.size());
  std::map<size_t, std::vector<unsigned>> byHash;
  for (unsigned v = 0; v < graph.size(); ++v) {
    llvm::ArrayRef<int64_t> costs = graph.vertexCost[v];
    std::vector<unsigned> &alike =
        byHash[llvm::hash_combine_range(costs.begin(), costs.end())];
    auto it = llvm::find_if(alike, [&](unsigned u) {
      return llvm::ArrayRef<int64_t>(graph.vertexCost[u]) == costs;
    });
    costId[v] = it == alike.end() ? v : *it;
    if (it == alike.end())
      alike.push_back(v);
  }
  std::vector<unsigned> source(steps.size());
  std::map<std::vector<uint64_t>, unsigned> classes;
  for (size_t pos = 0; pos < steps.size(); ++pos) {
    const Step &step = steps[pos];
    std::vector<uint64_t> key = {costId[step.vertex], step.dependents.size()};
    for (auto [t, u] : llvm::enumerate(step.dependents)) {
      auto it = pairs.find({step.vertex, u});
      key.push_back(graph.numConfigs[u]);
      key.push_back(it == pairs.end()
                        ? 0
                        : reinterpret_cast<uintptr_t>(it->second.data()));
    }
    for (unsigned child : step.children) {
      key.push_back(source[child]);
      llvm::append_range(key, childStrides(steps, tables, pos, child));
    }
    source[pos] =
        classes.try_emplace(std::move(key), unsigned(pos)).first->second;
  }
  return source;
}

namespace {

/// One term of an entry's sum: an edge to a dependent, or a connected
/// subset's table.
struct FillTerm {
  const StepPlan::EdgeTerm *edge = nullptr;
  const StepPlan::ChildTerm *child = nullptr;
};

} // namespace

/// Sets \p digits to the index digits of entry \p begin.
static void firstDigits(const StepPlan &plan, uint64_t begin,
                        llvm::SmallVectorImpl<unsigned> &digits) {
  uint64_t rest = begin;
  for (size_t t = plan.radix.size(); t-- > 0;) {
    digits[t] = rest % plan.radix[t];
    rest /= plan.radix[t];
  }
}

/// Adds a term's costs for every configuration of v_i at the current
/// digits: out[c] = in[c] + term[c] (in may be out).
static inline void addTerm(const FillTerm &term,
                           const llvm::SmallVectorImpl<unsigned> &digits,
                           size_t numDigits, unsigned numConfigs,
                           const int64_t *in, int64_t *out) {
  const int64_t *costs;
  uint64_t stride = 1;
  if (term.edge) {
    costs = term.edge->matrix + size_t(digits[term.edge->digit]) * numConfigs;
  } else {
    const StepPlan::ChildTerm &child = *term.child;
    uint64_t base = 0;
    for (size_t t = 0; t < numDigits; ++t)
      base += digits[t] * child.digitStride[t];
    costs = child.cost + base;
    stride = child.configStride;
  }
  if (stride == 1) { // the usual case: contiguous
    for (unsigned c = 0; c < numConfigs; ++c)
      out[c] = addCost(in[c], costs[c]);
  } else {
    for (unsigned c = 0; c < numConfigs; ++c)
      out[c] = addCost(in[c], costs[c * stride]);
  }
}

/// Splits the plan's terms into \p inner, those that read the last (fastest)
/// digit, and \p outer, the others.
static void splitTerms(const StepPlan &plan,
                       llvm::SmallVectorImpl<FillTerm> &outer,
                       llvm::SmallVectorImpl<FillTerm> &inner) {
  size_t numDigits = plan.radix.size();
  size_t last = numDigits - 1;
  for (const StepPlan::EdgeTerm &edge : plan.edges)
    (edge.digit == last ? inner : outer).push_back({&edge, nullptr});
  for (const StepPlan::ChildTerm &child : plan.children)
    (numDigits && child.digitStride[last] ? inner : outer)
        .push_back({nullptr, &child});
}

/// Fills entries [begin, end) of \p table. Each entry is computed on its
/// own, so any split over threads gives the same table. The terms that do
/// not read the last (fastest) digit are summed once per run of that digit;
/// only the others are added per entry. Compiled for AVX-512 and AVX2 as
/// well, picked at load time: the saturating int64 sums and the minimum over
/// configurations vectorize there, not in baseline x86-64.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
static void
fillEntries(const StepPlan &plan, Table &table, uint64_t begin, uint64_t end) {
  size_t numDigits = plan.radix.size();
  unsigned numConfigs = plan.vertexCost.size();
  llvm::SmallVector<unsigned, 8> digits(numDigits);
  firstDigits(plan, begin, digits);
  llvm::SmallVector<FillTerm, 8> outer, inner;
  size_t last = numDigits - 1;
  splitTerms(plan, outer, inner);
  std::vector<int64_t> buffer(2 * size_t(numConfigs));
  int64_t *prefix = buffer.data(), *acc = prefix + numConfigs;
  const int64_t *vertexCost = plan.vertexCost.data();
  for (uint64_t index = begin; index < end; ++index) {
    if (index == begin || numDigits == 0 || digits[last] == 0) {
      const int64_t *in = vertexCost;
      for (const FillTerm &term : outer) {
        addTerm(term, digits, numDigits, numConfigs, in, prefix);
        in = prefix;
      }
      if (in != prefix)
        std::copy(vertexCost, vertexCost + numConfigs, prefix);
    }
    const int64_t *sum = prefix;
    for (const FillTerm &term : inner) {
      addTerm(term, digits, numDigits, numConfigs, sum, acc);
      sum = acc;
    }
    // The minimum, then the lowest configuration reaching it (a tie keeps
    // the lowest configuration), both as reductions that vectorize.
    int64_t least = sum[0];
    for (unsigned c = 1; c < numConfigs; ++c)
      least = std::min(least, sum[c]);
    uint64_t best = numConfigs;
    for (uint64_t c = 0; c < numConfigs; ++c)
      best = std::min(best, sum[c] == least ? c : uint64_t(numConfigs));
    table.cost[index] = least;
    table.best[index] = best;
    for (size_t t = numDigits; t-- > 0;) {
      if (++digits[t] < plan.radix[t])
        break;
      digits[t] = 0;
    }
  }
}

static size_t tableBytes(const Table &table) {
  return table.cost.capacity() * sizeof(int64_t) +
         table.best.capacity() * sizeof(uint16_t);
}

/// The DP's tables: one per step, or the table of an earlier step of the
/// same class (tableClasses()).
struct Tables {
  std::vector<Table> tables;
  /// The step whose table stands for each step's.
  std::vector<unsigned> source;
  const Table &operator[](size_t pos) const { return tables[source[pos]]; }
};

/// The entries the DP builds for \p steps: each class of equal tables once.
static uint64_t builtStates(const CostGraph &graph, llvm::ArrayRef<Step> steps,
                            llvm::ArrayRef<uint64_t> sizes) {
  std::vector<Table> tables(steps.size());
  for (size_t pos = 0; pos < steps.size(); ++pos)
    tables[pos].strides = computeStrides(graph, steps[pos].dependents);
  std::vector<unsigned> source =
      tableClasses(graph, buildPairCosts(graph), steps, tables);
  uint64_t total = 0;
  for (size_t pos = 0; pos < steps.size(); ++pos)
    if (source[pos] == pos && __builtin_add_overflow(total, sizes[pos], &total))
      return UINT64_MAX;
  return total;
}

/// Whether the DP over \p steps holds at most \p maxStates entries: \p total,
/// or failing that the entries built (equal tables held once).
static bool fitsBudget(const CostGraph &graph, llvm::ArrayRef<Step> steps,
                       llvm::ArrayRef<uint64_t> sizes, uint64_t total,
                       uint64_t maxStates) {
  return total <= maxStates || builtStates(graph, steps, sizes) <= maxStates;
}

/// Counts, per built table, the tables still to build that read its costs
/// (\p readers), and marks the steps some parent reads (\p consumed).
static void countReaders(llvm::ArrayRef<Step> steps,
                         llvm::ArrayRef<unsigned> source,
                         std::vector<unsigned> &readers,
                         std::vector<bool> &consumed) {
  for (size_t pos = 0; pos < steps.size(); ++pos)
    for (unsigned child : steps[pos].children) {
      consumed[child] = true;
      if (source[pos] == pos)
        ++readers[source[child]];
    }
}

/// Frees \p table's costs and takes them off \p liveBytes.
static void releaseCosts(Table &table, size_t &liveBytes) {
  liveBytes -= table.cost.capacity() * sizeof(int64_t);
  std::vector<int64_t>().swap(table.cost);
}

/// Sizes \p table for \p size entries and records the bytes now live.
static void allocateTable(Table &table, uint64_t size, size_t &liveBytes,
                          DpStats &stats) {
  table.cost.resize(size);
  table.best.resize(size);
  liveBytes += tableBytes(table);
  stats.peakTableBytes = std::max(stats.peakTableBytes, liveBytes);
}

/// Fills the \p size entries of \p table in parallel, in \p arena.
static void fillTable(tbb::task_arena &arena, const StepPlan &plan,
                      Table &table, uint64_t size) {
  arena.execute([&] {
    tbb::parallel_for(tbb::blocked_range<uint64_t>(0, size),
                      [&](const tbb::blocked_range<uint64_t> &range) {
                        fillEntries(plan, table, range.begin(), range.end());
                      });
  });
}

/// Builds every table in sequence order, once per class of equal tables,
/// freeing a table's costs once every parent that reads them has consumed
/// them.
static Tables buildTables(const CostGraph &graph, llvm::ArrayRef<Step> steps,
                          llvm::ArrayRef<uint64_t> sizes,
                          const DpOptions &options, DpStats &stats) {
  PairCosts pairs = buildPairCosts(graph);
  Tables out;
  std::vector<Table> &tables = out.tables;
  tables.resize(steps.size());
  for (size_t pos = 0; pos < steps.size(); ++pos)
    tables[pos].strides = computeStrides(graph, steps[pos].dependents);
  out.source = tableClasses(graph, pairs, steps, tables);
  const std::vector<unsigned> &source = out.source;
  // How many tables still to build read each built table's costs; a
  // component's last table (no parent) keeps its costs.
  std::vector<unsigned> readers(steps.size(), 0);
  std::vector<bool> consumed(steps.size(), false);
  countReaders(steps, source, readers, consumed);
  tbb::task_arena arena(options.threads ? int(options.threads)
                                        : tbb::task_arena::automatic);
  size_t liveBytes = 0;
  uint64_t done = 0,
           total = std::accumulate(sizes.begin(), sizes.end(), uint64_t(0));
  for (size_t pos = 0; pos < steps.size(); ++pos) {
    done += sizes[pos];
    if (source[pos] != pos) {
      if (options.progress)
        options.progress(double(done) / double(total));
      continue;
    }
    Table &table = tables[pos];
    allocateTable(table, sizes[pos], liveBytes, stats);
    StepPlan plan = planStep(graph, pairs, steps, tables, source, pos);
    fillTable(arena, plan, table, sizes[pos]);
    for (unsigned child : steps[pos].children)
      if (--readers[source[child]] == 0)
        releaseCosts(tables[source[child]], liveBytes);
    // Every parent of this class reads another.
    if (consumed[pos] && readers[pos] == 0)
      releaseCosts(tables[pos], liveBytes);
    stats.combinationsEvaluated += sizes[pos] * plan.vertexCost.size();
    stats.builtStates += sizes[pos];
    if (options.progress)
      options.progress(double(done) / double(total));
  }
  return out;
}

/// Back-substitution: in reverse sequence order every dependent of v_i is
/// already fixed, so v_i's best configuration is read off its table.
static std::vector<unsigned> backSubstitute(llvm::ArrayRef<Step> steps,
                                            const Tables &tables) {
  std::vector<unsigned> strategy(steps.size());
  for (size_t pos = steps.size(); pos-- > 0;) {
    uint64_t index = 0;
    for (auto [t, u] : llvm::enumerate(steps[pos].dependents))
      index += strategy[u] * tables[pos].strides[t];
    strategy[steps[pos].vertex] = tables[pos].best[index];
  }
  return strategy;
}

/// PaSE's DP over \p steps, whose tables have \p sizes.
static Solution exactDp(const CostGraph &graph, llvm::ArrayRef<Step> steps,
                        llvm::ArrayRef<uint64_t> sizes,
                        const DpOptions &options) {
  Solution solution;
  DpStats &stats = solution.stats;
  for (auto [step, size] : llvm::zip_equal(steps, sizes)) {
    stats.largestDependentSet =
        std::max<unsigned>(stats.largestDependentSet, step.dependents.size());
    stats.states += size;
  }
  Tables tables = buildTables(graph, steps, sizes, options, stats);
  solution.strategy = backSubstitute(steps, tables);
  // The last vertex of each connected component has an empty dependent set
  // and no parent; its single entry is the component's optimum.
  std::vector<bool> consumed(steps.size(), false);
  for (const Step &step : steps)
    for (unsigned child : step.children)
      consumed[child] = true;
  for (size_t pos = 0; pos < steps.size(); ++pos)
    if (!consumed[pos])
      solution.cost = addCost(solution.cost, tables[pos].cost[0]);
  assert(solution.cost == evaluate(graph, solution.strategy) &&
         "back-substitution must reproduce the DP's cost");
  stats.lowerBound = solution.cost;
  return solution;
}

/// Per vertex, the entries of the tables it widens: those whose dependent
/// set holds it, and with \p own its own table too (breadth-first order
/// sequences a hub first, with every neighbour in its table).
static std::vector<uint64_t> tableWeights(unsigned n,
                                          llvm::ArrayRef<Step> steps,
                                          llvm::ArrayRef<uint64_t> sizes,
                                          bool own) {
  std::vector<uint64_t> weight(n, 0);
  auto credit = [&](unsigned v, uint64_t size) {
    if (__builtin_add_overflow(weight[v], size, &weight[v]))
      weight[v] = UINT64_MAX;
  };
  for (auto [step, size] : llvm::zip_equal(steps, sizes)) {
    if (own)
      credit(step.vertex, size);
    for (unsigned u : step.dependents)
      credit(u, size);
  }
  return weight;
}

/// \p graph with the vertices \p pinned names (a configuration, or -1 for
/// none) kept at that one configuration: they widen no table (a digit of
/// radix 1), and their edges keep the pinned row or column.
static CostGraph pinVertices(const CostGraph &graph,
                             llvm::ArrayRef<int> pinned) {
  CostGraph out = graph;
  for (unsigned v = 0; v < graph.size(); ++v)
    if (pinned[v] >= 0) {
      out.numConfigs[v] = 1;
      out.vertexCost[v] = {graph.vertexCost[v][pinned[v]]};
    }
  for (CostGraph::Edge &e : out.edges) {
    if (pinned[e.u] < 0 && pinned[e.v] < 0)
      continue;
    unsigned nv = graph.numConfigs[e.v];
    std::vector<int64_t> rows;
    for (unsigned cu = 0; cu < out.numConfigs[e.u]; ++cu)
      for (unsigned cv = 0; cv < out.numConfigs[e.v]; ++cv) {
        unsigned from = pinned[e.u] >= 0 ? unsigned(pinned[e.u]) : cu;
        unsigned to = pinned[e.v] >= 0 ? unsigned(pinned[e.v]) : cv;
        rows.push_back(e.cost[size_t(from) * nv + to]);
      }
    e.cost = std::move(rows);
  }
  return out;
}

/// The cost a vertex's choice adds with its neighbours' choices fixed: its
/// vertex cost and its edges.
class LocalCosts {
public:
  explicit LocalCosts(const CostGraph &graph)
      : graph(graph), pairs(buildPairCosts(graph)), around(graph.size()) {
    for (const auto &[key, matrix] : pairs)
      around[key.first].push_back({key.second, matrix.data()});
  }
  int64_t operator()(unsigned v, unsigned c,
                     llvm::ArrayRef<unsigned> strategy) const {
    unsigned n = graph.numConfigs[v];
    int64_t sum = clampCost(graph.vertexCost[v][c]);
    for (auto [u, matrix] : around[v])
      sum = addCost(sum, matrix[size_t(strategy[u]) * n + c]);
    return sum;
  }

private:
  const CostGraph &graph;
  PairCosts pairs;
  /// Per vertex, its edges as (neighbour, matrix with this vertex's
  /// configuration contiguous).
  std::vector<std::vector<std::pair<unsigned, const int64_t *>>> around;
};

//===----------------------------------------------------------------------===//
// Relaxation, when the exact tables do not fit
//===----------------------------------------------------------------------===//

namespace {
/// A graph some of whose vertices are split into one copy per neighbour.
struct Relaxation {
  CostGraph graph;
  /// Relaxed vertex -> vertex of the original graph.
  std::vector<unsigned> original;
  /// Vertices of the original graph that were split.
  unsigned split = 0;
};
} // namespace

/// Splits every vertex marked in \p split into one copy per neighbour: the
/// copy facing u carries the edges to u and an equal share of the vertex
/// costs (shares that sum to the cost exactly; a forbidden configuration
/// stays forbidden in every copy).
static void splitVertices(Relaxation &r, const std::vector<bool> &split) {
  const CostGraph &g = r.graph;
  Adjacency adj = buildAdjacency(g);
  CostGraph out;
  std::vector<unsigned> original, first(g.size());
  for (unsigned v = 0; v < g.size(); ++v) {
    first[v] = out.size();
    unsigned copies = split[v] ? unsigned(adj[v].size()) : 1u;
    for (unsigned j = 0; j < copies; ++j) {
      std::vector<int64_t> cost;
      for (int64_t c : g.vertexCost[v]) {
        c = clampCost(c);
        cost.push_back(c >= kInfCost ? kInfCost
                                     : c / copies + (j < c % copies ? 1 : 0));
      }
      out.numConfigs.push_back(g.numConfigs[v]);
      out.vertexCost.push_back(std::move(cost));
      original.push_back(r.original[v]);
    }
  }
  auto endpoint = [&](unsigned v, unsigned other) {
    if (!split[v])
      return first[v];
    return first[v] +
           unsigned(llvm::lower_bound(adj[v], other) - adj[v].begin());
  };
  for (const CostGraph::Edge &e : g.edges)
    out.edges.push_back({endpoint(e.u, e.v), endpoint(e.v, e.u), e.cost});
  r.split += unsigned(llvm::count(split, true));
  r.graph = std::move(out);
  r.original = std::move(original);
}

/// Splits the vertices that sit in the most (and largest) dependent sets
/// until GenerateSeq's tables fit in \p maxStates, or until no vertex of
/// two or more neighbours is left to split. Returns whether they fit.
static bool relax(Relaxation &r, uint64_t maxStates) {
  for (;;) {
    Adjacency adj = buildAdjacency(r.graph);
    std::vector<Step> steps = analyzeOrder(adj, generateSeq(r.graph));
    uint64_t total;
    std::vector<uint64_t> sizes = tableSizes(r.graph, steps, total);
    if (fitsBudget(r.graph, steps, sizes, total, maxStates))
      return true;
    std::vector<uint64_t> weight =
        tableWeights(r.graph.size(), steps, sizes, /*own=*/false);
    std::vector<unsigned> candidates;
    for (unsigned v = 0; v < r.graph.size(); ++v)
      if (adj[v].size() >= 2 && weight[v] > 0)
        candidates.push_back(v);
    if (candidates.empty())
      return false;
    llvm::stable_sort(candidates, [&](unsigned a, unsigned b) {
      return weight[a] > weight[b];
    });
    // Split the heaviest until their weights cover the excess (weights
    // overlap, so the next round may split more).
    std::vector<bool> split(r.graph.size(), false);
    uint64_t excess = total - maxStates, covered = 0;
    for (unsigned v : candidates) {
      split[v] = true;
      if (__builtin_add_overflow(covered, weight[v], &covered) ||
          covered >= excess)
        break;
    }
    splitVertices(r, split);
  }
}

/// Improves \p strategy one vertex at a time: each takes the configuration
/// that is cheapest with its neighbours' as they are, until none changes.
static void improveLocally(const CostGraph &graph, const LocalCosts &local,
                           std::vector<unsigned> &strategy) {
  for (int round = 0; round < 1000; ++round) {
    bool changed = false;
    for (unsigned v = 0; v < graph.size(); ++v) {
      unsigned best = strategy[v];
      int64_t bestCost = local(v, best, strategy);
      for (unsigned c = 0; c < graph.numConfigs[v]; ++c)
        if (int64_t cost = local(v, c, strategy); cost < bestCost)
          best = c, bestCost = cost;
      changed |= best != strategy[v];
      strategy[v] = best;
    }
    if (!changed)
      break;
  }
}

/// The vertex to condition on: of those with two or more neighbours, the
/// one in the most (and largest) dependent sets, the first on ties. None
/// when no vertex has two neighbours.
static std::optional<unsigned> pickHub(const CostGraph &graph,
                                       llvm::ArrayRef<Step> steps,
                                       llvm::ArrayRef<uint64_t> sizes) {
  Adjacency adj = buildAdjacency(graph);
  std::vector<uint64_t> weight =
      tableWeights(graph.size(), steps, sizes, /*own=*/true);
  std::optional<unsigned> found;
  for (unsigned v = 0; v < graph.size(); ++v)
    if (adj[v].size() >= 2 && (!found || weight[v] > weight[*found]))
      found = v;
  return found;
}

namespace {
/// The hub conditioned on: its incident edges, and the ids of the other
/// vertices in the graph without it.
struct Hub {
  Hub(const CostGraph &graph, unsigned vertex) : graph(graph), vertex(vertex) {
    for (const CostGraph::Edge &e : graph.edges)
      if (e.u == vertex || e.v == vertex)
        incident.push_back(&e);
  }

  /// Adds the hub's costs at configuration \p c on edge \p e (calling
  /// \p add), indexed by the other endpoint's configuration.
  template <typename Add>
  void row(const CostGraph::Edge &e, unsigned c, Add &&add) const {
    unsigned nv = graph.numConfigs[e.v];
    if (e.u == vertex)
      for (unsigned x = 0; x < nv; ++x)
        add(x, clampCost(e.cost[size_t(c) * nv + x]));
    else
      for (unsigned x = 0; x < graph.numConfigs[e.u]; ++x)
        add(x, clampCost(e.cost[size_t(x) * nv + c]));
  }

  /// \p v's id in the graph without the hub: ids above it move down by one.
  unsigned id(unsigned v) const { return v < vertex ? v : v - 1; }

  const CostGraph &graph;
  unsigned vertex;
  std::vector<const CostGraph::Edge *> incident;
};

/// The best solution over the hub's classes, the hub's configuration in
/// it, and the DP work summed over the classes.
struct ClassBest {
  std::optional<Solution> best;
  unsigned config = 0;
  DpStats summed;
};
} // namespace

/// The classes of the hub's configurations: its vertex cost and its row
/// (or column) of every incident edge. Returns each class's first
/// configuration, in configuration order.
static std::vector<unsigned> hubClasses(const Hub &hub) {
  const CostGraph &graph = hub.graph;
  unsigned nh = graph.numConfigs[hub.vertex];
  std::map<std::vector<int64_t>, unsigned> classOf;
  std::vector<unsigned> representatives;
  for (unsigned c = 0; c < nh; ++c) {
    std::vector<int64_t> key{clampCost(graph.vertexCost[hub.vertex][c])};
    for (const CostGraph::Edge *e : hub.incident)
      hub.row(*e, c, [&](unsigned, int64_t cost) { key.push_back(cost); });
    if (classOf.try_emplace(std::move(key), c).second)
      representatives.push_back(c);
  }
  return representatives;
}

/// The graph without the hub; vertex ids above it move down by one.
static CostGraph withoutHub(const Hub &hub) {
  const CostGraph &graph = hub.graph;
  CostGraph rest;
  for (unsigned v = 0; v < graph.size(); ++v)
    if (v != hub.vertex) {
      rest.numConfigs.push_back(graph.numConfigs[v]);
      rest.vertexCost.push_back(graph.vertexCost[v]);
    }
  for (const CostGraph::Edge &e : graph.edges)
    if (e.u != hub.vertex && e.v != hub.vertex)
      rest.edges.push_back({hub.id(e.u), hub.id(e.v), e.cost});
  return rest;
}

/// \p rest with the hub fixed at configuration \p c: its edges folded into
/// its neighbours' vertex costs.
static CostGraph foldHub(const Hub &hub, const CostGraph &rest, unsigned c) {
  CostGraph g = rest;
  for (const CostGraph::Edge *e : hub.incident) {
    std::vector<int64_t> &costs =
        g.vertexCost[hub.id(e->u == hub.vertex ? e->v : e->u)];
    hub.row(*e, c, [&](unsigned x, int64_t cost) {
      costs[x] = addCost(clampCost(costs[x]), cost);
    });
  }
  return g;
}

/// Adds one class's DP work \p s to \p summed (the peak table bytes: the
/// largest of any class).
static void addClassWork(DpStats &summed, const DpStats &s) {
  summed.states += s.states;
  summed.builtStates += s.builtStates;
  summed.combinationsEvaluated += s.combinationsEvaluated;
  summed.peakTableBytes = std::max(summed.peakTableBytes, s.peakTableBytes);
}

/// Solves \p rest once per class in \p representatives, with the hub's
/// costs at that configuration added, and keeps the cheapest (the first
/// on ties).
static ClassBest solveClasses(const Hub &hub, const CostGraph &rest,
                              llvm::ArrayRef<Step> restSteps,
                              llvm::ArrayRef<uint64_t> restSizes,
                              llvm::ArrayRef<unsigned> representatives,
                              const DpOptions &options) {
  ClassBest out;
  for (unsigned c : representatives) {
    CostGraph g = foldHub(hub, rest, c);
    Solution s = exactDp(g, restSteps, restSizes, options);
    s.cost = addCost(s.cost, clampCost(hub.graph.vertexCost[hub.vertex][c]));
    addClassWork(out.summed, s.stats);
    if (!out.best || s.cost < out.best->cost) {
      out.best = std::move(s);
      out.config = c;
    }
  }
  return out;
}

/// The whole graph's solution from the best class's: the work summed over
/// the \p numClasses classes, and the hub back in the strategy.
static Solution withHub(const Hub &hub, ClassBest &classes,
                        unsigned numClasses) {
  const CostGraph &graph = hub.graph;
  Solution out = std::move(*classes.best);
  out.stats.states = classes.summed.states;
  out.stats.builtStates = classes.summed.builtStates;
  out.stats.combinationsEvaluated = classes.summed.combinationsEvaluated;
  out.stats.peakTableBytes = classes.summed.peakTableBytes;
  std::vector<unsigned> strategy(graph.size());
  for (unsigned v = 0; v < graph.size(); ++v)
    strategy[v] = v == hub.vertex ? classes.config : out.strategy[hub.id(v)];
  out.strategy = std::move(strategy);
  assert(out.cost == evaluate(graph, out.strategy));
  out.stats.exact = true;
  out.stats.lowerBound = out.cost;
  out.stats.conditionedClasses = numClasses;
  return out;
}

/// Exact conditioning on a hub: the vertex in the most (and largest)
/// dependent sets is taken out, and the rest solved once per class of its
/// configurations (configurations with the same vertex cost and the same
/// costs on every edge form a class), each time with its edges folded into
/// its neighbours' vertex costs. The best over the classes is the optimum.
/// Returns nothing when the conditioned tables, times the classes, would
/// still pass the budget.
static std::optional<Solution> solveConditioned(const CostGraph &graph,
                                                llvm::ArrayRef<Step> steps,
                                                llvm::ArrayRef<uint64_t> sizes,
                                                const DpOptions &options) {
  std::optional<unsigned> found = pickHub(graph, steps, sizes);
  if (!found)
    return std::nullopt;
  Hub hub(graph, *found);
  std::vector<unsigned> representatives = hubClasses(hub);
  CostGraph rest = withoutHub(hub);
  std::vector<Step> restSteps =
      analyzeOrder(buildAdjacency(rest), vertexOrder(rest, options.order));
  uint64_t restTotal, work;
  std::vector<uint64_t> restSizes = tableSizes(rest, restSteps, restTotal);
  if (__builtin_mul_overflow(restTotal, uint64_t(representatives.size()),
                             &work) ||
      work > options.maxStates)
    return std::nullopt;
  ClassBest best =
      solveClasses(hub, rest, restSteps, restSizes, representatives, options);
  return withHub(hub, best, unsigned(representatives.size()));
}

/// The relaxation of \p graph that splits nothing: every vertex is its
/// own original.
static Relaxation unrelaxed(const CostGraph &graph) {
  Relaxation r{graph, {}, 0};
  r.original.resize(graph.size());
  std::iota(r.original.begin(), r.original.end(), 0u);
  return r;
}

/// Solves the relaxed graph exactly (its cost is a lower bound), taking its
/// work into \p stats, and gives each original vertex its copies'
/// configurations as \p candidates.
static void solveRelaxation(const Relaxation &r, const DpOptions &options,
                            DpStats &stats,
                            std::vector<std::vector<unsigned>> &candidates) {
  std::vector<Step> steps =
      analyzeOrder(buildAdjacency(r.graph), generateSeq(r.graph));
  uint64_t total;
  std::vector<uint64_t> sizes = tableSizes(r.graph, steps, total);
  Solution relaxed = exactDp(r.graph, steps, sizes, options);
  stats = relaxed.stats;
  for (unsigned v = 0; v < r.graph.size(); ++v)
    candidates[r.original[v]].push_back(relaxed.strategy[v]);
}

/// Not even the fully split graph fits: bounds each vertex and edge by
/// its cheapest entry (into \p stats' lower bound), and starts from each
/// vertex's cheapest configuration (its one candidate).
static void cheapestEach(const CostGraph &graph, DpStats &stats,
                         std::vector<std::vector<unsigned>> &candidates) {
  int64_t bound = 0;
  for (unsigned v = 0; v < graph.size(); ++v) {
    auto &costs = graph.vertexCost[v];
    unsigned best = unsigned(llvm::min_element(costs) - costs.begin());
    bound = addCost(bound, clampCost(costs[best]));
    candidates[v].push_back(best);
  }
  for (const CostGraph::Edge &e : graph.edges)
    bound = addCost(bound, clampCost(*llvm::min_element(e.cost)));
  stats.lowerBound = bound;
}

/// The first strategy: each vertex's first candidate, and for a split
/// vertex the cheapest of its candidates.
static std::vector<unsigned>
firstGuess(const CostGraph &graph, const LocalCosts &local,
           const std::vector<std::vector<unsigned>> &candidates) {
  std::vector<unsigned> strategy(graph.size(), 0);
  for (unsigned v = 0; v < graph.size(); ++v)
    strategy[v] = candidates[v].front();
  // A split vertex takes whichever of its copies' configurations is
  // cheapest with its neighbours' first guesses.
  for (unsigned v = 0; v < graph.size(); ++v)
    for (unsigned c : llvm::drop_begin(candidates[v]))
      if (local(v, c, strategy) < local(v, strategy[v], strategy))
        strategy[v] = c;
  return strategy;
}

/// One conditioning round: with the vertices in \p wasSplit pinned at
/// their configurations in \p strategy, the DP's best strategy of all the
/// others, improved locally. None when the pinned tables do not fit.
static std::optional<std::vector<unsigned>>
conditionOnSplit(const CostGraph &graph, const LocalCosts &local,
                 const DpOptions &options, const std::vector<bool> &wasSplit,
                 const std::vector<unsigned> &strategy) {
  std::vector<int> pinned(graph.size(), -1);
  for (unsigned v = 0; v < graph.size(); ++v)
    if (wasSplit[v])
      pinned[v] = int(strategy[v]);
  CostGraph fixed = pinVertices(graph, pinned);
  std::vector<Step> steps =
      analyzeOrder(buildAdjacency(fixed), generateSeq(fixed));
  uint64_t states;
  std::vector<uint64_t> sizes = tableSizes(fixed, steps, states);
  if (!fitsBudget(fixed, steps, sizes, states, options.maxStates))
    return std::nullopt;
  Solution conditioned = exactDp(fixed, steps, sizes, options);
  std::vector<unsigned> next = strategy;
  for (unsigned v = 0; v < graph.size(); ++v)
    if (!wasSplit[v])
      next[v] = conditioned.strategy[v];
  improveLocally(graph, local, next);
  return next;
}

/// Repeats conditioning rounds on the split vertices (those with more than
/// one candidate) while they lower \p cost, at most four, and while it is
/// above \p lowerBound; \p strategy and \p cost keep the best.
static void conditionRounds(
    const CostGraph &graph, const LocalCosts &local, const DpOptions &options,
    const std::vector<std::vector<unsigned>> &candidates, int64_t lowerBound,
    std::vector<unsigned> &strategy, int64_t &cost) {
  std::vector<bool> wasSplit(graph.size(), false);
  for (unsigned v = 0; v < graph.size(); ++v)
    wasSplit[v] = candidates[v].size() > 1;
  for (int round = 0;
       round < 4 && cost > lowerBound && llvm::is_contained(wasSplit, true);
       ++round) {
    std::optional<std::vector<unsigned>> next =
        conditionOnSplit(graph, local, options, wasSplit, strategy);
    if (!next)
      break;
    int64_t nextCost = evaluate(graph, *next);
    if (nextCost >= cost)
      break;
    strategy = std::move(*next);
    cost = nextCost;
  }
}

/// The relaxation's answer: solves the relaxed graph exactly (a lower
/// bound), gives each split vertex the best of its copies' configurations,
/// and improves the strategy locally.
static Solution solveRelaxed(const CostGraph &graph, const DpOptions &options,
                             uint64_t exactStates) {
  Relaxation r = unrelaxed(graph);
  bool fits = relax(r, options.maxStates);
  Solution solution;
  std::vector<std::vector<unsigned>> candidates(graph.size());
  if (fits)
    solveRelaxation(r, options, solution.stats, candidates);
  else
    cheapestEach(graph, solution.stats, candidates);
  LocalCosts local(graph);
  std::vector<unsigned> strategy = firstGuess(graph, local, candidates);
  improveLocally(graph, local, strategy);
  int64_t cost = evaluate(graph, strategy);
  // Condition on the split vertices: with their configurations fixed they
  // widen no table, and the DP finds the best strategy of all the others
  // exactly. Then improve locally again, and repeat while it helps.
  conditionRounds(graph, local, options, candidates, solution.stats.lowerBound,
                  strategy, cost);
  solution.strategy = std::move(strategy);
  solution.cost = cost;
  solution.stats.exact = solution.cost <= solution.stats.lowerBound;
  solution.stats.splitVertices = fits ? r.split : 0;
  solution.stats.exactStates = exactStates;
  return solution;
}

/// The largest dependent set of \p steps.
static unsigned largestDependents(llvm::ArrayRef<Step> steps) {
  size_t largest = 0;
  for (const Step &step : steps)
    largest = std::max(largest, step.dependents.size());
  return unsigned(largest);
}

/// The work of an order: entries times configurations, saturating.
static uint64_t orderWork(const CostGraph &graph, llvm::ArrayRef<Step> steps,
                          llvm::ArrayRef<uint64_t> sizes) {
  uint64_t work = 0;
  for (auto [step, size] : llvm::zip_equal(steps, sizes)) {
    uint64_t w;
    if (__builtin_mul_overflow(size, uint64_t(graph.numConfigs[step.vertex]),
                               &w) ||
        __builtin_add_overflow(work, w, &work))
      return UINT64_MAX;
  }
  return work;
}

namespace {

/// The vertex order the DP runs on, with its steps and table sizes.
struct OrderChoice {
  VertexOrder order = VertexOrder::GenerateSeq;
  std::vector<Step> steps;
  std::vector<uint64_t> sizes;
  /// The tables' entries in all (saturating).
  uint64_t total = 0;
  /// The largest dependent set of the requested order (GenerateSeq for
  /// Best), and of the min-work order when Best weighs it (else 0).
  unsigned seqLargest = 0, workLargest = 0;
};

} // namespace

/// Analyzes the order \p options asks for; for Best, GenerateSeq unless the
/// min-work order does strictly less work.
static OrderChoice chooseOrder(const CostGraph &graph,
                               const DpOptions &options) {
  Adjacency adj = buildAdjacency(graph);
  OrderChoice choice;
  choice.order = options.order == VertexOrder::Best ? VertexOrder::GenerateSeq
                                                    : options.order;
  choice.steps = analyzeOrder(adj, vertexOrder(graph, choice.order));
  choice.sizes = tableSizes(graph, choice.steps, choice.total);
  choice.seqLargest = largestDependents(choice.steps);
  if (options.order == VertexOrder::Best) {
    // GenerateSeq unless the min-work order does strictly less work.
    std::vector<Step> other = analyzeOrder(adj, minWorkOrder(graph));
    uint64_t otherTotal;
    std::vector<uint64_t> otherSizes = tableSizes(graph, other, otherTotal);
    choice.workLargest = largestDependents(other);
    if (orderWork(graph, other, otherSizes) <
        orderWork(graph, choice.steps, choice.sizes)) {
      choice.order = VertexOrder::MinWork;
      choice.steps = std::move(other);
      choice.sizes = std::move(otherSizes);
      choice.total = otherTotal;
    }
  }
  return choice;
}

llvm::Expected<Solution>
pax::solveDp(const CostGraph &graph, const DpOptions &options,
             llvm::function_ref<std::string(unsigned vertex)> vertexName) {
  auto start = std::chrono::steady_clock::now();
  if (llvm::Error err = verifyCostGraph(graph))
    return err;
  OrderChoice choice = chooseOrder(graph, options);
  const std::vector<Step> &steps = choice.steps;
  const std::vector<uint64_t> &sizes = choice.sizes;
  Solution solution;
  // The budget counts the entries held: equal tables are held once.
  uint64_t held = choice.total <= options.maxStates
                      ? choice.total
                      : builtStates(graph, steps, sizes);
  bool fits = held <= options.maxStates;
  if (fits)
    solution = exactDp(graph, steps, sizes, options);
  else if (auto conditioned = solveConditioned(graph, steps, sizes, options))
    solution = std::move(*conditioned);
  else if (options.exact)
    return tooManyStates(steps, sizes, held, options.maxStates, vertexName);
  else
    solution = solveRelaxed(graph, options, held);
  if (!fits)
    solution.stats.exactStates = held;
  solution.stats.order = choice.order;
  solution.stats.largestGenerateSeq = choice.seqLargest;
  solution.stats.largestMinWork = choice.workLargest;
  solution.stats.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return solution;
}
