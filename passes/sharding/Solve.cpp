//===- Solve.cpp - Choosing a configuration for every op ------------------===//
#include "passes/sharding/Solve.h"

#include "passes/sharding/Simulator.h"

#include "passes/sharding/Exhaustive.h"

#include "ir/Soap.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <tbb/parallel_for.h>

#include <cassert>
#include <chrono>
#include <cmath>
#include <random>
#include <tuple>

namespace pax {

llvm::StringRef solverName(SolverKind k) {
  switch (k) {
  case SolverKind::Dp:
    return "dp";
  case SolverKind::DpBfs:
    return "dp-bfs";
  case SolverKind::Exhaustive:
    return "exhaustive";
  case SolverKind::DataParallel:
    return "data-parallel";
  case SolverKind::Expert:
    return "expert";
  case SolverKind::Mcmc:
    return "mcmc";
  }
  llvm_unreachable("unknown solver");
}

std::optional<SolverKind> parseSolver(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<SolverKind>>(name)
      .Case("dp", SolverKind::Dp)
      .Case("dp-bfs", SolverKind::DpBfs)
      .Case("exhaustive", SolverKind::Exhaustive)
      .Case("data-parallel", SolverKind::DataParallel)
      .Case("expert", SolverKind::Expert)
      .Case("mcmc", SolverKind::Mcmc)
      .Default(std::nullopt);
}

/// Costs are searched in integer picoseconds, so that every solver sums
/// exactly and ties break the same way.
static int64_t toPicos(double seconds) {
  double p = std::round(seconds * 1e12);
  return p >= double(kInfCost) ? kInfCost : int64_t(p);
}

namespace {
/// One op's candidate configurations and its producers.
struct Vertex {
  const Op *op;
  std::vector<Config> configs;
};

} // namespace

bool isReplicatedInput(const Value &arg) {
  return !isFloat(arg.type.elem) || arg.type.rank() <= 1;
}

llvm::DenseSet<const Op *> constantOps(const Module &m) {
  llvm::DenseSet<const Value *> dynamic;
  for (const auto &a : m.main.args)
    if (!isReplicatedInput(*a))
      dynamic.insert(a.get());
  for (const auto &g : m.globals)
    if (g->isParameter)
      dynamic.insert(&g->value);
  llvm::DenseSet<const Op *> constants;
  for (const auto &op : m.main.ops) {
    bool reads = llvm::any_of(op->operands, [&](const Operand &o) {
      return dynamic.count(o.value) > 0;
    });
    if (!reads) {
      constants.insert(op.get());
      continue;
    }
    for (const Result &r : op->results)
      dynamic.insert(r.value.get());
  }
  return constants;
}

std::optional<std::pair<const Op *, unsigned>> nextStepReader(const Module &m,
                                                              size_t index) {
  const Func &f = m.main;
  llvm::StringRef name = f.returnNames[index];
  const Value *v = f.returns[index];
  if (!name.consume_front("update/") || v->kind != Value::Kind::Result)
    return std::nullopt;
  const Global *g = m.findGlobal(name);
  if (!g)
    return std::nullopt;
  for (const auto &op : f.ops)
    for (unsigned k = 0; k < op->operands.size(); ++k)
      if (op->operands[k].value == &g->value)
        return std::pair{op.get(), k};
  return std::nullopt;
}

/// Every use of a result by an operand, and each training-step update's use
/// by its next-step reader (nextStepReader).
std::vector<Use> usesOf(const Module &m) {
  const Func &f = m.main;
  llvm::DenseMap<const Op *, unsigned> index;
  for (unsigned i = 0; i < f.ops.size(); ++i)
    index[f.ops[i].get()] = i;
  std::vector<Use> uses;
  for (unsigned v = 0; v < f.ops.size(); ++v)
    for (unsigned k = 0; k < f.ops[v]->operands.size(); ++k) {
      const Value *val = f.ops[v]->operands[k].value;
      if (val->kind == Value::Kind::Result)
        uses.push_back({index[val->def], val->index, v, k});
    }
  for (size_t i = 0; i < f.returns.size(); ++i)
    if (auto reader = nextStepReader(m, i)) {
      const Value *val = f.returns[i];
      uses.push_back(
          {index[val->def], val->index, index[reader->first], reader->second});
    }
  return uses;
}

/// The restricted configurations of the baselines. Data parallel: sample
/// dims only, on as many devices as divide them. Expert with tensor degree
/// t: per op, either data parallel on every device (Krizhevsky's "one weird
/// trick" for convolutions), or data parallel on p/t devices with one more
/// dim split by t: a weight's output dim (column parallel), a reduction
/// (row parallel), the vocabulary of an embedding, or an attribute such as
/// attention heads (Megatron).
static std::vector<Config> baselineConfigs(const Op &op,
                                           llvm::ArrayRef<SoapRole> roles,
                                           const std::vector<Config> &all,
                                           int64_t devices, int64_t tensor) {
  auto sampleDevices = [&](const Config &c) {
    int64_t n = 1;
    for (size_t d = 0; d < c.size(); ++d)
      if (roles[d] == SoapRole::Sample)
        n *= c[d];
    return n;
  };
  // The largest pure sample split within `limit` devices.
  auto bestSample = [&](int64_t limit) {
    int64_t best = 1;
    for (const Config &c : all)
      if (configDevices(c) == sampleDevices(c) && sampleDevices(c) <= limit)
        best = std::max(best, sampleDevices(c));
    return best;
  };
  int64_t full = bestSample(devices), data = bestSample(devices / tensor);
  std::vector<Config> out;
  for (const Config &c : all) {
    int64_t s = sampleDevices(c), rest = configDevices(c) / s;
    unsigned others = 0;
    for (size_t d = 0; d < c.size(); ++d)
      others += roles[d] != SoapRole::Sample && c[d] > 1;
    bool dataParallel = rest == 1 && (s == full || s == data);
    bool tensorParallel =
        tensor > 1 && s == data && others == 1 && rest == tensor;
    if (dataParallel || tensorParallel)
      out.push_back(c);
  }
  if (out.empty())
    out.push_back(all.front());
  return out;
}

/// Everything an op's costs depend on: kind, iteration space, accesses,
/// types, which operands are weights, which results are returned. Repeated
/// layers share signatures, so their cost tables are computed once (with
/// the number of configurations searched).
static std::string signature(const Op &op,
                             const llvm::DenseSet<const Value *> &returned) {
  std::string s = opKindName(op.kind).str() + "[";
  for (const IterDim &d : op.iters)
    s += std::to_string(d.extent) + iterKindName(d.kind).str() + ",";
  for (const Operand &o : op.operands)
    s += "|" + o.value->type.str() + accessMapStr(o.map, op.iters) +
         (o.value->global && o.value->global->isParameter ? "w" : "");
  for (const Result &r : op.results)
    s += "->" + r.value->type.str() + accessMapStr(r.map, op.iters) +
         (returned.count(r.value.get()) ? "ret" : "");
  return s;
}

struct SearchSpace::Data {
  const Module *module;
  ConfigOptions options;
  llvm::DenseSet<const Op *> constants;
  llvm::DenseSet<const Value *> returned;
  /// Every op with its configurations (one for an op computed everywhere).
  std::vector<Vertex> vertices;
  std::vector<Use> uses;
  llvm::DenseMap<const Op *, llvm::SmallVector<SoapRole, 6>> roles;
  std::vector<std::string> signatures;
};

SearchSpace::SearchSpace(const Module &m, const ConfigOptions &options)
    : d(std::make_unique<Data>()) {
  const Func &f = m.main;
  d->module = &m;
  d->options = options;
  d->constants = constantOps(m);
  d->returned.insert(f.returns.begin(), f.returns.end());
  d->vertices.resize(f.ops.size());
  d->signatures.resize(f.ops.size());
  tbb::parallel_for(size_t(0), f.ops.size(), [&](size_t i) {
    const Op &op = *f.ops[i];
    std::vector<Config> configs;
    auto given = op.attrs.find("config");
    if (options.keepGiven && given != op.attrs.end() &&
        !d->constants.count(&op)) {
      const auto &factors = std::get<std::vector<int64_t>>(given->second);
      auto ok = splittableDims(op, options.executable);
      Config c(op.iters.size(), 1);
      for (size_t k = 0; k < c.size() && k < factors.size(); ++k)
        if (ok[k] && factors[k] > 1 && op.iters[k].extent % factors[k] == 0)
          c[k] = factors[k];
      configs.push_back(std::move(c));
    } else {
      configs = enumerateConfigs(op, options);
    }
    if (d->constants.count(&op))
      configs.resize(1); // the unsplit configuration comes first
    d->signatures[i] = signature(op, d->returned);
    // Ops alike but kept at different configurations price differently.
    if (options.keepGiven && given != op.attrs.end())
      for (int64_t f : configs.front())
        d->signatures[i] += "/" + std::to_string(f);
    d->vertices[i] = {&op, std::move(configs)};
  });
  d->uses = usesOf(m);
  d->roles = computeSoapRoles(f);
}

SearchSpace::SearchSpace(SearchSpace &&) = default;
SearchSpace::~SearchSpace() = default;
const Module &SearchSpace::module() const { return *d->module; }
const ConfigOptions &SearchSpace::configOptions() const { return d->options; }

namespace {
/// The distinct layouts of a list, and each entry's index among them.
struct UniqueLayouts {
  std::vector<TensorLayout> layouts;
  std::vector<std::string> keys; ///< one per layout, equal iff alike
  std::vector<unsigned> index;
  llvm::StringMap<unsigned> seen;

  void add(TensorLayout l) {
    std::string key;
    llvm::raw_string_ostream os(key);
    for (const Digit &d : l.digits)
      os << d.size << ',' << int(d.role) << ',' << d.tensorDim << ',' << d.level
         << ';';
    for (auto *list : {&l.parts, &l.haloLo, &l.haloHi, &l.haloMost}) {
      os << '|';
      for (int64_t v : *list)
        os << v << ',';
    }
    os << (l.irregular ? 'i' : 'r');
    auto [it, fresh] = seen.try_emplace(os.str(), unsigned(layouts.size()));
    if (fresh) {
      layouts.push_back(std::move(l));
      keys.push_back(os.str());
    }
    index.push_back(it->second);
  }
};
} // namespace

/// Builds PaSE's cost graph: a vertex per op, an edge per use. Tables are
/// shared between repeated layers and built in parallel.
static CostGraph buildGraph(const SearchSpace::Data &space,
                            const CostModel &model,
                            const std::vector<Vertex> &vertices,
                            double lambda) {
  CostGraph g;
  const std::vector<Use> &uses = space.uses;
  const llvm::DenseSet<const Op *> &constants = space.constants;
  const llvm::DenseSet<const Value *> &returned = space.returned;
  std::vector<std::string> sigs;
  for (auto [v, sig] : llvm::zip_equal(vertices, space.signatures))
    sigs.push_back(sig + "#" + std::to_string(v.configs.size()));
  llvm::StringMap<unsigned> vertexTable;
  for (unsigned i = 0; i < vertices.size(); ++i) {
    const Vertex &v = vertices[i];
    g.numConfigs.push_back(unsigned(v.configs.size()));
    auto [it, fresh] = vertexTable.try_emplace(sigs[i], i);
    if (!fresh) {
      g.vertexCost.push_back(g.vertexCost[it->second]);
      continue;
    }
    std::vector<int64_t> costs;
    for (const Config &c : v.configs) {
      double seconds =
          model.opCost(*v.op, c).total() + lambda * model.memoryBytes(*v.op, c);
      // A returned result leaves reduced.
      for (unsigned r = 0; r < v.op->results.size(); ++r)
        if (returned.count(v.op->results[r].value.get()) &&
            !constants.count(v.op))
          seconds += model.stepSeconds(model.returnStep(*v.op, c, r));
      costs.push_back(toPicos(seconds));
    }
    g.vertexCost.push_back(std::move(costs));
  }
  // One table per distinct (producer, result, consumer, operand) signature.
  llvm::StringMap<unsigned> edgeTable;
  std::vector<unsigned> source(uses.size());
  std::vector<unsigned> distinct;
  for (unsigned i = 0; i < uses.size(); ++i) {
    const Use &u = uses[i];
    std::string key = sigs[u.producer] + "@" + std::to_string(u.result) + ">" +
                      sigs[u.consumer] + "@" + std::to_string(u.operand);
    auto [it, fresh] = edgeTable.try_emplace(key, i);
    source[i] = it->second;
    if (fresh)
      distinct.push_back(i);
  }
  g.edges.resize(uses.size());
  // Each distinct edge's layouts. Many configurations lay a tensor out
  // alike (they differ in dims the tensor does not have): each distinct
  // pair of layouts is priced once. And edges whose tensor type and layout
  // lists are equal (a DenseNet feature map read by every later concat of
  // its block) share one table.
  struct EdgeLayouts {
    UniqueLayouts from, to;
    std::string key;
  };
  std::vector<EdgeLayouts> layouts(distinct.size());
  tbb::parallel_for(size_t(0), distinct.size(), [&](size_t n) {
    const Use &u = uses[distinct[n]];
    const Vertex &p = vertices[u.producer], &q = vertices[u.consumer];
    if (constants.count(p.op))
      return;
    EdgeLayouts &e = layouts[n];
    for (const Config &c : p.configs)
      e.from.add(resultLayout(*p.op, c, u.result));
    for (const Config &c : q.configs)
      e.to.add(operandLayout(*q.op, c, u.operand));
    llvm::raw_string_ostream os(e.key);
    os << p.op->results[u.result].value->type.str();
    for (const auto *side : {&e.from, &e.to}) {
      os << '#';
      for (unsigned i : side->index)
        os << side->keys[i] << '/';
    }
  });
  std::vector<size_t> priced(distinct.size());
  llvm::StringMap<size_t> byKey;
  for (size_t n = 0; n < distinct.size(); ++n)
    priced[n] = layouts[n].key.empty()
                    ? n
                    : byKey.try_emplace(layouts[n].key, n).first->second;
  // Edges of one tensor type meet the same layouts again and again (a
  // DenseNet feature map of one width leaves a convolution, a normalization
  // and a concat alike): each pair of layouts of a type is priced once.
  std::vector<std::vector<size_t>> byType;
  llvm::StringMap<size_t> typeGroup;
  for (size_t n = 0; n < distinct.size(); ++n) {
    const Use &u = uses[distinct[n]];
    const Vertex &p = vertices[u.producer], &q = vertices[u.consumer];
    if (constants.count(p.op)) {
      // Computed on every device, and constants take no gradient.
      g.edges[distinct[n]].cost =
          std::vector<int64_t>(p.configs.size() * q.configs.size(), 0);
      continue;
    }
    if (priced[n] != n)
      continue; // shares another edge's table, below
    auto [it, fresh] = typeGroup.try_emplace(
        p.op->results[u.result].value->type.str(), byType.size());
    if (fresh)
      byType.emplace_back();
    byType[it->second].push_back(n);
  }
  tbb::parallel_for(size_t(0), byType.size(), [&](size_t k) {
    llvm::StringMap<unsigned> fromIds, toIds;
    std::vector<TensorLayout> reduced; // per from id
    llvm::DenseMap<uint64_t, int64_t> prices;
    for (size_t n : byType[k]) {
      const Use &u = uses[distinct[n]];
      const TensorType &t =
          vertices[u.producer].op->results[u.result].value->type;
      const UniqueLayouts &from = layouts[n].from, &to = layouts[n].to;
      std::vector<uint64_t> fromId, toId;
      for (auto [i, l] : llvm::enumerate(from.layouts)) {
        auto [it, fresh] = fromIds.try_emplace(from.keys[i], reduced.size());
        if (fresh)
          reduced.push_back(reducedLayout(l));
        fromId.push_back(it->second);
      }
      for (const std::string &key : to.keys)
        toId.push_back(toIds.try_emplace(key, toIds.size()).first->second);
      std::vector<int64_t> unique(from.layouts.size() * to.layouts.size());
      for (size_t i = 0; i < from.layouts.size(); ++i)
        for (size_t j = 0; j < to.layouts.size(); ++j) {
          auto [it, fresh] = prices.try_emplace(fromId[i] << 32 | toId[j]);
          if (fresh)
            it->second = toPicos(model.edgeSeconds(
                from.layouts[i], reduced[fromId[i]], to.layouts[j], t));
          unique[i * to.layouts.size() + j] = it->second;
        }
      std::vector<int64_t> cost;
      cost.reserve(from.index.size() * to.index.size());
      for (unsigned i : from.index)
        for (unsigned j : to.index)
          cost.push_back(unique[size_t(i) * to.layouts.size() + j]);
      g.edges[distinct[n]].cost = std::move(cost);
    }
  });
  for (size_t n = 0; n < distinct.size(); ++n)
    if (priced[n] != n)
      g.edges[distinct[n]].cost = g.edges[distinct[priced[n]]].cost;
  for (unsigned i = 0; i < uses.size(); ++i) {
    g.edges[i].u = uses[i].producer;
    g.edges[i].v = uses[i].consumer;
    if (source[i] != i)
      g.edges[i].cost = g.edges[source[i]].cost;
  }
  return g;
}

/// The cost of \p configs for the ops of \p f.
static StrategyCost priceStrategy(const Func &f, const CostModel &model,
                                  const llvm::DenseSet<const Op *> &constants,
                                  const llvm::DenseSet<const Value *> &returned,
                                  llvm::ArrayRef<Use> uses,
                                  llvm::ArrayRef<Config> configs,
                                  llvm::ArrayRef<int64_t> offsets) {
  StrategyCost cost;
  for (unsigned i = 0; i < f.ops.size(); ++i) {
    const Op &op = *f.ops[i];
    OpCost oc = model.opCost(op, configs[i]);
    cost.computeSeconds += oc.compute;
    cost.commSeconds += oc.communication;
    cost.memoryBytes += model.memoryBytes(op, configs[i]);
    for (unsigned r = 0; r < op.results.size(); ++r)
      if (returned.count(op.results[r].value.get()) && !constants.count(&op)) {
        ReshardStep s = model.returnStep(op, configs[i], r);
        cost.commSeconds += model.stepSeconds(s);
        cost.commBytes += double(s.bytes);
      }
  }
  for (const Use &u : uses) {
    const Op &p = *f.ops[u.producer], &q = *f.ops[u.consumer];
    if (constants.count(&p))
      continue; // computed on every device; no gradient
    auto [forward, backward] = model.edgePlans(
        placedAt(resultLayout(p, configs[u.producer], u.result),
                 offsetOf(offsets, u.producer)),
        placedAt(operandLayout(q, configs[u.consumer], u.operand),
                 offsetOf(offsets, u.consumer)),
        p.results[u.result].value->type);
    cost.commSeconds +=
        model.planSeconds(forward) + model.planSeconds(backward);
    for (const auto *plan : {&forward, &backward})
      for (const ReshardStep &s : *plan)
        cost.commBytes += double(s.bytes);
  }
  cost.seconds = cost.computeSeconds + cost.commSeconds;
  return cost;
}

StrategyCost evaluateStrategy(const Module &m, const CostModel &model,
                              llvm::ArrayRef<Config> configs,
                              llvm::ArrayRef<int64_t> offsets) {
  const Func &f = m.main;
  llvm::DenseSet<const Value *> returned(f.returns.begin(), f.returns.end());
  return priceStrategy(f, model, constantOps(m), returned, usesOf(m), configs,
                       offsets);
}

StrategyCost evaluateStrategy(const SearchSpace &space, const CostModel &model,
                              llvm::ArrayRef<Config> configs,
                              llvm::ArrayRef<int64_t> offsets) {
  const SearchSpace::Data &d = space.data();
  return priceStrategy(d.module->main, model, d.constants, d.returned, d.uses,
                       configs, offsets);
}

/// A cost graph without its single-configuration vertices: their edges are
/// folded into the other endpoint's vertex costs (exact, since their
/// configuration is fixed), so they no longer widen dependent sets.
struct ReducedGraph {
  CostGraph graph;
  std::vector<unsigned> original; ///< reduced vertex -> original vertex
  int64_t constant = 0;           ///< costs of the fixed vertices alone
};

static ReducedGraph foldFixedVertices(const CostGraph &g) {
  ReducedGraph r;
  std::vector<int> index(g.size(), -1);
  for (unsigned v = 0; v < g.size(); ++v) {
    if (g.numConfigs[v] == 1) {
      r.constant = addCost(r.constant, g.vertexCost[v][0]);
      continue;
    }
    index[v] = int(r.original.size());
    r.original.push_back(v);
    r.graph.numConfigs.push_back(g.numConfigs[v]);
    r.graph.vertexCost.push_back(g.vertexCost[v]);
  }
  for (const CostGraph::Edge &e : g.edges) {
    int u = index[e.u], v = index[e.v];
    if (u >= 0 && v >= 0) {
      r.graph.edges.push_back({unsigned(u), unsigned(v), e.cost});
    } else if (u >= 0) { // v fixed at configuration 0: column 0
      for (unsigned c = 0; c < g.numConfigs[e.u]; ++c)
        r.graph.vertexCost[u][c] =
            addCost(r.graph.vertexCost[u][c], e.cost[c * g.numConfigs[e.v]]);
    } else if (v >= 0) { // u fixed: row 0
      for (unsigned c = 0; c < g.numConfigs[e.v]; ++c)
        r.graph.vertexCost[v][c] = addCost(r.graph.vertexCost[v][c], e.cost[c]);
    } else {
      r.constant = addCost(r.constant, e.cost[0]);
    }
  }
  return r;
}

/// Runs the DP (or exhaustive search) on candidate sets.
static llvm::Expected<Solution> search(const SearchSpace::Data &space,
                                       const CostModel &model,
                                       const std::vector<Vertex> &vertices,
                                       const ShardingOptions &o,
                                       double lambda) {
  const Func &f = space.module->main;
  ReducedGraph r =
      foldFixedVertices(buildGraph(space, model, vertices, lambda));
  llvm::Expected<Solution> solved = Solution();
  if (o.solver == SolverKind::Exhaustive) {
    solved = solveExhaustive(r.graph, o.maxStates);
  } else {
    DpOptions dp;
    dp.order = o.solver == SolverKind::DpBfs ? VertexOrder::BreadthFirst
                                             : VertexOrder::Best;
    dp.maxStates = o.maxStates;
    dp.exact = o.exactSearch;
    dp.threads = o.threads;
    dp.progress = o.progress;
    solved = solveDp(r.graph, dp, [&](unsigned v) {
      const Op &op = *f.ops[r.original[v]];
      llvm::StringRef name = op.name();
      return (name.empty() ? "#" + std::to_string(r.original[v]) : name.str()) +
             " (" + opKindName(op.kind).str() + ")";
    });
  }
  if (!solved)
    return solved.takeError();
  // Back to every op: the folded ones keep their only configuration.
  Solution full = std::move(*solved);
  std::vector<unsigned> strategy(vertices.size(), 0);
  for (unsigned i = 0; i < r.original.size(); ++i)
    strategy[r.original[i]] = full.strategy[i];
  full.strategy = std::move(strategy);
  full.cost = addCost(full.cost, r.constant);
  full.stats.lowerBound = addCost(full.stats.lowerBound, r.constant);
  return full;
}

/// Searches under the memory limit: memory is priced at `lambda` seconds
/// per byte, raised until the strategy fits, then bisected down.
static llvm::Expected<Solution>
searchWithinMemory(const SearchSpace::Data &space, const CostModel &model,
                   const std::vector<Vertex> &vertices,
                   const ShardingOptions &o) {
  auto memoryOf = [&](const Solution &s) {
    double bytes = 0;
    for (unsigned i = 0; i < vertices.size(); ++i)
      bytes += model.memoryBytes(*vertices[i].op,
                                 vertices[i].configs[s.strategy[i]]);
    return bytes;
  };
  auto best = search(space, model, vertices, o, 0);
  if (!best || o.memoryLimit <= 0 || memoryOf(*best) <= o.memoryLimit)
    return best;
  // The unconstrained optimum bounds the constrained one; a strategy priced
  // with memory is not proven optimal.
  int64_t bound = best->stats.lowerBound;
  auto bounded = [&](Solution s) {
    s.stats.exact = false;
    s.stats.lowerBound = bound;
    return s;
  };
  double lo = 0, hi = 1e-15, leanest = memoryOf(*best);
  std::optional<Solution> fits;
  for (int i = 0; i < 40 && !fits; ++i, hi *= 8) {
    auto s = search(space, model, vertices, o, hi);
    if (!s)
      return s.takeError();
    leanest = std::min(leanest, memoryOf(*s));
    if (memoryOf(*s) <= o.memoryLimit)
      fits = bounded(std::move(*s));
  }
  if (!fits)
    return llvm::createStringError(
        llvm::formatv("no strategy fits in --mem-limit={0:F2} GiB per device; "
                      "the leanest one found needs {1:F3} GiB",
                      o.memoryLimit / double(1 << 30),
                      leanest / double(1 << 30))
            .str());
  for (int i = 0; i < 16; ++i) {
    double mid = (lo + hi) / 2;
    auto s = search(space, model, vertices, o, mid);
    if (!s)
      return s.takeError();
    if (memoryOf(*s) <= o.memoryLimit)
      hi = mid, fits = bounded(std::move(*s));
    else
      lo = mid;
  }
  return std::move(*fits);
}

llvm::Expected<Strategy> solveBaseline(const SearchSpace &space,
                                       const CostModel &model,
                                       const ShardingOptions &o,
                                       SolverKind kind) {
  ShardingOptions b = o;
  b.solver = kind;
  b.progress = nullptr;
  // The baselines' spaces are small: they get at least the default budget,
  // so that a small --max-states does not weaken them.
  b.maxStates = std::max(o.maxStates, ShardingOptions().maxStates);
  return solveSharding(space, model, b);
}

llvm::Expected<Strategy> solveSharding(const Module &m, const CostModel &model,
                                       const ShardingOptions &o) {
  return solveSharding(SearchSpace(m, o.configs), model, o);
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
static llvm::Expected<Strategy> searchMcmc(const SearchSpace &space,
                                           const CostModel &model,
                                           const ShardingOptions &o) {
  const SearchSpace::Data &d = space.data();
  auto start = std::chrono::steady_clock::now();
  std::vector<std::vector<Config>> starts;
  ShardingOptions dpOptions = o;
  dpOptions.solver = SolverKind::Dp;
  auto dp = solveSharding(space, model, dpOptions);
  if (!dp)
    return dp.takeError();
  starts.push_back(dp->configs);
  for (SolverKind k : {SolverKind::DataParallel, SolverKind::Expert}) {
    auto s = solveBaseline(space, model, o, k);
    if (s)
      starts.push_back(s->configs);
    else
      llvm::consumeError(s.takeError());
  }
  std::mt19937_64 seeder(o.seed);
  {
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
  result.cost = evaluateStrategy(space, model, result.configs, result.offsets);
  result.cost.simulatedSeconds = chains[best].bestSeconds;
  result.searchCost = toPicos(result.cost.seconds);
  result.stats = dp->stats;
  result.stats.exact = false; // of the simulated time: a search, no proof
  for (const Vertex &v : d.vertices)
    result.spaceSizes.push_back(v.configs.size());
  return result;
}

llvm::Expected<Strategy> solveSharding(const SearchSpace &space,
                                       const CostModel &model,
                                       const ShardingOptions &o) {
  if (o.solver == SolverKind::Mcmc)
    return searchMcmc(space, model, o);
  const SearchSpace::Data &d = space.data();
  auto fields = [](const ConfigOptions &c) {
    return std::tuple(c.devices, c.powersOfTwo, c.exact, c.maxPerDim,
                      c.maxSplitDims, c.executable, c.keepGiven);
  };
  (void)fields;
  assert(fields(d.options) == fields(o.configs) &&
         "the space must be built with the options' configurations");
  Strategy result;
  for (const Vertex &v : d.vertices)
    result.spaceSizes.push_back(v.configs.size());

  bool baseline =
      o.solver == SolverKind::DataParallel || o.solver == SolverKind::Expert;
  llvm::SmallVector<int64_t, 8> degrees = {1};
  if (o.solver == SolverKind::Expert)
    for (int64_t t = 2; t <= o.configs.devices; ++t)
      if (o.configs.devices % t == 0)
        degrees.push_back(t);
  std::optional<Strategy> best;
  for (int64_t t : degrees) {
    std::vector<Vertex> restricted;
    if (baseline)
      for (const Vertex &v : d.vertices)
        restricted.push_back(
            {v.op, baselineConfigs(*v.op, d.roles.find(v.op)->second, v.configs,
                                   o.configs.devices, t)});
    const std::vector<Vertex> &cand = baseline ? restricted : d.vertices;
    ShardingOptions so = o;
    if (baseline)
      so.solver = SolverKind::Dp;
    auto s = searchWithinMemory(d, model, cand, so);
    if (!s)
      return s.takeError();
    Strategy st;
    for (unsigned i = 0; i < cand.size(); ++i)
      st.configs.push_back(cand[i].configs[s->strategy[i]]);
    st.searchCost = s->cost;
    st.stats = s->stats;
    // The searched cost is the step time unless memory was priced in too;
    // only then is each candidate priced to compare them.
    if (o.memoryLimit > 0)
      st.cost = evaluateStrategy(space, model, st.configs);
    bool better =
        !best || (o.memoryLimit > 0 ? st.cost.seconds < best->cost.seconds
                                    : st.searchCost < best->searchCost);
    if (better)
      best = std::move(st);
  }
  if (o.memoryLimit <= 0)
    best->cost = evaluateStrategy(space, model, best->configs);
  // A strategy the search cannot prove optimal is never worse than the
  // baselines: they are searched too, and the best one kept.
  if (!baseline && !best->stats.exact)
    for (SolverKind k : {SolverKind::DataParallel, SolverKind::Expert}) {
      auto s = solveBaseline(space, model, o, k);
      if (!s) { // a baseline that does not fit in memory competes no more
        llvm::consumeError(s.takeError());
        continue;
      }
      if (s->cost.seconds < best->cost.seconds) {
        best->configs = std::move(s->configs);
        best->cost = s->cost;
        best->searchCost = s->searchCost;
      }
    }
  best->spaceSizes = std::move(result.spaceSizes);
  return std::move(*best);
}

} // namespace pax
