//===- Solve.cpp - Choosing a configuration for every op ------------------===//
#include "passes/sharding/Solve.h"

#include "passes/sharding/PeakMemory.h"
#include "passes/sharding/SolveInternal.h"

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
#include <limits>
#include <numeric>
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
  case SolverKind::Megatron:
    return "megatron";
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
      .Case("megatron", SolverKind::Megatron)
      .Default(std::nullopt);
}

bool isBaseline(SolverKind k) {
  return k == SolverKind::DataParallel || k == SolverKind::Expert ||
         k == SolverKind::Megatron;
}

int64_t toPicos(double seconds) {
  double p = std::round(seconds * 1e12);
  return p >= double(kInfCost) ? kInfCost : int64_t(p);
}

bool isReplicatedInput(const Value &arg) {
  return !isFloat(arg.type.elem) || arg.type.rank() <= 1;
}

/// The ops that read only constants and \p dynamic's complement, given
/// \p dynamic (the values that vary); their results join \p dynamic
/// where they read it.
static llvm::DenseSet<const Op *>
constantsGiven(const Module &m, llvm::DenseSet<const Value *> dynamic) {
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

llvm::DenseSet<const Op *> constantOps(const Module &m) {
  llvm::DenseSet<const Value *> dynamic;
  for (const auto &a : m.main.args)
    if (!isReplicatedInput(*a))
      dynamic.insert(a.get());
  for (const auto &g : m.globals)
    if (g->isParameter)
      dynamic.insert(&g->value);
  // Optimizer state (a training step's updates write it) lives in shards
  // like the weights; scalars (the step count) are computed everywhere,
  // unless their update depends on what varies (the loss scale, on the
  // gradients): then they are placed like any value.
  std::vector<std::pair<const Value *, const Value *>> scalars;
  const Func &f = m.main;
  for (size_t i = 0; i < f.returns.size(); ++i) {
    llvm::StringRef name = f.returnNames[i];
    if (!name.consume_front("update/"))
      continue;
    if (const Global *g = m.findGlobal(name); g && g->value.type.rank() > 0)
      dynamic.insert(&g->value);
    else if (g)
      scalars.push_back({&g->value, f.returns[i]});
  }
  while (true) {
    llvm::DenseSet<const Op *> constants = constantsGiven(m, dynamic);
    bool more = false;
    for (auto [g, update] : scalars)
      if (!dynamic.count(g) && update->kind == Value::Kind::Result &&
          !constants.count(update->def)) {
        dynamic.insert(g);
        more = true;
      }
    if (!more)
      return constants;
  }
}

bool storedAtUpdate(const Module &m, size_t index) {
  const Value *v = m.main.returns[index];
  return v->kind == Value::Kind::Result && v->def->intAttr("zero", 0) >= 3;
}

std::vector<std::pair<const Op *, unsigned>> nextStepReaders(const Module &m,
                                                             size_t index) {
  const Func &f = m.main;
  llvm::StringRef name = f.returnNames[index];
  const Value *v = f.returns[index];
  std::vector<std::pair<const Op *, unsigned>> out;
  if (!name.consume_front("update/") || v->kind != Value::Kind::Result)
    return out;
  const Global *g = m.findGlobal(name);
  if (!g)
    return out;
  bool all = storedAtUpdate(m, index);
  for (const auto &op : f.ops)
    for (unsigned k = 0; k < op->operands.size(); ++k)
      if (op->operands[k].value == &g->value) {
        out.push_back({op.get(), k});
        if (!all)
          return out;
      }
  return out;
}

llvm::Expected<std::vector<std::pair<const Value *, TensorLayout>>>
keptLayouts(const Module &m, OpPlacement where) {
  const Func &f = m.main;
  std::vector<std::pair<const Value *, TensorLayout>> out;
  for (size_t i = 0; i < f.returns.size(); ++i) {
    auto readers = nextStepReaders(m, i);
    if (readers.empty())
      continue;
    llvm::StringRef name = f.returnNames[i];
    name.consume_front("update/");
    const Value *g = &m.findGlobal(name)->value;
    const Value *v = f.returns[i];
    bool own = storedAtUpdate(m, i);
    const Op &at = own ? *v->def : *readers[0].first;
    auto placement = where(at);
    if (!placement)
      return placement.takeError();
    auto &[c, offset] = *placement;
    TensorLayout l = own ? resultLayout(at, c, v->index)
                         : operandLayout(at, c, readers[0].second);
    out.push_back({g, placedAt(std::move(l), offset)});
  }
  return out;
}

/// Every use of a result by an operand, and each training-step update's use
/// by its next-step readers (nextStepReaders).
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
    for (auto [reader, k] : nextStepReaders(m, i)) {
      const Value *val = f.returns[i];
      uses.push_back({index[val->def], val->index, index[reader], k});
    }
  return uses;
}

/// The restricted configurations of the baselines. Data parallel: sample
/// dims only, on as many devices as divide them. Expert with tensor degree
/// t: per op, either data parallel on every device (Krizhevsky's "one weird
/// trick" for convolutions), or data parallel on p/t devices with one more
/// dim split by t: a weight's output dim (column parallel), a reduction
/// (row parallel), the vocabulary of an embedding, or an attribute such as
/// attention heads (Megatron). Megatron's grid (\p wholeDataParallel
/// false) leaves out the first: every op is data parallel on p/t devices.
std::vector<Config> baselineConfigs(const Op &op,
                                    llvm::ArrayRef<SoapRole> roles,
                                    const std::vector<Config> &all,
                                    int64_t devices, int64_t tensor,
                                    bool wholeDataParallel) {
  // A replica dim (a master weight's cast: each device casts its own
  // copy) splits as the samples do.
  auto sampleLike = [&](size_t d) {
    return roles[d] == SoapRole::Sample || op.isReplicaDim(unsigned(d));
  };
  auto sampleDevices = [&](const Config &c) {
    int64_t n = 1;
    for (size_t d = 0; d < c.size(); ++d)
      if (sampleLike(d))
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
      others += !sampleLike(d) && c[d] > 1;
    bool dataParallel =
        rest == 1 && ((wholeDataParallel && s == full) || s == data);
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
  d->samples = std::make_shared<const SampleInfo>(sampleInfo(f));
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

/// The signatures vertices share cost tables by: the op's, with its
/// configuration count and whether it runs per microbatch.
static std::vector<std::string>
vertexSignatures(const SearchSpace::Data &space, const CostModel &model,
                 const std::vector<Vertex> &vs) {
  std::vector<std::string> sigs;
  for (auto [v, sig] : llvm::zip_equal(vs, space.signatures))
    sigs.push_back(sig + "#" + std::to_string(v.configs.size()) +
                   (model.isSampleOp(*v.op) ? "s" : ""));
  return sigs;
}

/// A configuration's price at any price of memory: per lever choice that
/// is not dominated (slower and no leaner than another), its seconds
/// (compute, communication, a returned result's reduction) and its
/// persistent bytes; the cost at price lambda is the least seconds +
/// lambda * bytes.
using ConfigPrice = llvm::SmallVector<std::pair<double, double>, 4>;

static ConfigPrice priceConfig(const SearchSpace::Data &space,
                               const CostModel &model, const Op &op,
                               const Config &c) {
  // A returned result leaves reduced.
  double returns = 0;
  for (unsigned r = 0; r < op.results.size(); ++r)
    if (space.returned.count(op.results[r].value.get()) &&
        !space.constants.count(&op))
      returns += model.stepSeconds(model.returnStep(op, c, r));
  ConfigPrice out;
  for (const PricedChoice &p : model.pricedChoices(op, c)) {
    std::pair<double, double> sb{p.seconds + returns, p.memory.persistent};
    auto dominates = [](const std::pair<double, double> &a,
                        const std::pair<double, double> &b) {
      return a.first <= b.first && a.second <= b.second;
    };
    if (llvm::any_of(out, [&](const auto &o) { return dominates(o, sb); }))
      continue;
    llvm::erase_if(out, [&](const auto &o) { return dominates(sb, o); });
    out.push_back(sb);
  }
  return out;
}

static VertexPrices priceVertices(const SearchSpace::Data &space,
                                  const CostModel &model,
                                  const std::vector<Vertex> &vertices) {
  VertexPrices p;
  std::vector<std::string> sigs = vertexSignatures(space, model, vertices);
  llvm::StringMap<unsigned> distinct;
  std::vector<unsigned> first;
  for (unsigned i = 0; i < vertices.size(); ++i) {
    auto [it, fresh] = distinct.try_emplace(sigs[i], unsigned(first.size()));
    if (fresh)
      first.push_back(i);
    p.table.push_back(it->second);
  }
  p.configs.resize(first.size());
  tbb::parallel_for(size_t(0), first.size(), [&](size_t k) {
    const Vertex &v = vertices[first[k]];
    for (const Config &c : v.configs)
      p.configs[k].push_back(priceConfig(space, model, *v.op, c));
  });
  return p;
}

/// Sets \p g's vertex costs at memory price \p lambda; vertices alike share
/// one table.
static void setVertexCosts(CostGraph &g, const VertexPrices &p, double lambda) {
  g.numConfigs.clear();
  g.vertexCost.clear();
  std::vector<int> built(p.configs.size(), -1);
  for (unsigned i = 0; i < p.table.size(); ++i) {
    unsigned k = p.table[i];
    g.numConfigs.push_back(unsigned(p.configs[k].size()));
    if (built[k] >= 0) {
      g.vertexCost.push_back(g.vertexCost[built[k]]);
      continue;
    }
    built[k] = int(i);
    std::vector<int64_t> costs;
    for (const ConfigPrice &c : p.configs[k]) {
      double best = std::numeric_limits<double>::infinity();
      for (auto [seconds, bytes] : c)
        best = std::min(best, seconds + lambda * bytes);
      costs.push_back(toPicos(best));
    }
    g.vertexCost.push_back(std::move(costs));
  }
}

namespace {
/// A distinct edge's layouts on each side, and its key (type and layout
/// lists: edges with equal keys share one table).
struct EdgeLayouts {
  UniqueLayouts from, to;
  std::string key;
};
/// An edge of a type group to price: its layouts, the value it moves, its
/// table.
struct EdgePricing {
  const EdgeLayouts *layouts;
  const Value *value;
  CostMatrix *cost;
};
} // namespace

/// Prices the edges of one tensor type: each pair of its layouts once.
static void priceTypeGroup(const CostModel &model,
                           llvm::ArrayRef<EdgePricing> group) {
  llvm::StringMap<unsigned> fromIds, toIds;
  std::vector<TensorLayout> reduced; // per from id
  llvm::DenseMap<uint64_t, int64_t> prices;
  for (const EdgePricing &e : group) {
    const UniqueLayouts &from = e.layouts->from, &to = e.layouts->to;
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
              from.layouts[i], reduced[fromId[i]], to.layouts[j], *e.value));
        unique[i * to.layouts.size() + j] = it->second;
      }
    std::vector<int64_t> cost;
    cost.reserve(from.index.size() * to.index.size());
    for (unsigned i : from.index)
      for (unsigned j : to.index)
        cost.push_back(unique[size_t(i) * to.layouts.size() + j]);
    *e.cost = std::move(cost);
  }
}

/// The key grouping edges by the tensor they move: its type and how many
/// times per step it moves (a tensor moved once per microbatch prices
/// differently).
static std::string edgeTypeKey(const CostModel &model,
                               const std::vector<Vertex> &vertices,
                               const Use &u) {
  const Value *v = vertices[u.producer].op->results[u.result].value.get();
  return v->type.str() + "x" + std::to_string(model.repeats(v));
}

namespace {
/// Uses grouped by signature: for each use, the first use of its signature
/// (whose table it shares); and those first uses, in use order.
struct DistinctUses {
  std::vector<unsigned> source;
  std::vector<unsigned> distinct;
};
} // namespace

/// Finds the uses with distinct (producer, result, consumer, operand)
/// signatures: one table each.
static DistinctUses distinctUses(const std::vector<Use> &uses,
                                 const std::vector<std::string> &sigs) {
  DistinctUses d;
  llvm::StringMap<unsigned> edgeTable;
  d.source.resize(uses.size());
  for (unsigned i = 0; i < uses.size(); ++i) {
    const Use &u = uses[i];
    std::string key = sigs[u.producer] + "@" + std::to_string(u.result) + ">" +
                      sigs[u.consumer] + "@" + std::to_string(u.operand);
    auto [it, fresh] = edgeTable.try_emplace(key, i);
    d.source[i] = it->second;
    if (fresh)
      d.distinct.push_back(i);
  }
  return d;
}

/// Collects, in parallel, each distinct edge's layouts on both sides and its
/// key; edges leaving constants get none.
static std::vector<EdgeLayouts>
collectEdgeLayouts(const SearchSpace::Data &space, const CostModel &model,
                   const std::vector<Vertex> &vertices,
                   const std::vector<unsigned> &distinct) {
  const std::vector<Use> &uses = space.uses;
  const llvm::DenseSet<const Op *> &constants = space.constants;
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
    os << edgeTypeKey(model, vertices, u);
    for (const auto *side : {&e.from, &e.to}) {
      os << '#';
      for (unsigned i : side->index)
        os << side->keys[i] << '/';
    }
  });
  return layouts;
}

/// For each distinct edge, the first distinct edge with its key (whose
/// table it shares); itself when it has no key.
static std::vector<size_t>
tableOwners(const std::vector<EdgeLayouts> &layouts) {
  std::vector<size_t> priced(layouts.size());
  llvm::StringMap<size_t> byKey;
  for (size_t n = 0; n < layouts.size(); ++n)
    priced[n] = layouts[n].key.empty()
                    ? n
                    : byKey.try_emplace(layouts[n].key, n).first->second;
  return priced;
}

/// Zeroes the tables of edges leaving constants, and groups the distinct
/// edges that own their table by tensor type, in first-seen order.
static std::vector<std::vector<size_t>>
groupByType(const SearchSpace::Data &space, const CostModel &model,
            const std::vector<Vertex> &vertices,
            const std::vector<unsigned> &distinct,
            const std::vector<size_t> &priced, CostGraph &g) {
  const std::vector<Use> &uses = space.uses;
  std::vector<std::vector<size_t>> byType;
  llvm::StringMap<size_t> typeGroup;
  for (size_t n = 0; n < distinct.size(); ++n) {
    const Use &u = uses[distinct[n]];
    const Vertex &p = vertices[u.producer], &q = vertices[u.consumer];
    if (space.constants.count(p.op)) {
      // Computed on every device, and constants take no gradient.
      g.edges[distinct[n]].cost =
          std::vector<int64_t>(p.configs.size() * q.configs.size(), 0);
      continue;
    }
    if (priced[n] != n)
      continue; // shares another edge's table, below
    auto [it, fresh] =
        typeGroup.try_emplace(edgeTypeKey(model, vertices, u), byType.size());
    if (fresh)
      byType.emplace_back();
    byType[it->second].push_back(n);
  }
  return byType;
}

/// Prices the type groups \p byType in parallel, into \p g's edge tables.
static void priceTypeGroups(const SearchSpace::Data &space,
                            const CostModel &model,
                            const std::vector<Vertex> &vertices,
                            const std::vector<unsigned> &distinct,
                            const std::vector<EdgeLayouts> &layouts,
                            const std::vector<std::vector<size_t>> &byType,
                            CostGraph &g) {
  const std::vector<Use> &uses = space.uses;
  tbb::parallel_for(size_t(0), byType.size(), [&](size_t k) {
    std::vector<EdgePricing> group;
    for (size_t n : byType[k]) {
      const Use &u = uses[distinct[n]];
      group.push_back({&layouts[n],
                       vertices[u.producer].op->results[u.result].value.get(),
                       &g.edges[distinct[n]].cost});
    }
    priceTypeGroup(model, group);
  });
}

/// Copies the shared tables to the edges that share them, and sets every
/// edge's ends.
static void fillSharedEdges(const std::vector<Use> &uses, const DistinctUses &d,
                            const std::vector<size_t> &priced, CostGraph &g) {
  for (size_t n = 0; n < d.distinct.size(); ++n)
    if (priced[n] != n)
      g.edges[d.distinct[n]].cost = g.edges[d.distinct[priced[n]]].cost;
  for (unsigned i = 0; i < uses.size(); ++i) {
    g.edges[i].u = uses[i].producer;
    g.edges[i].v = uses[i].consumer;
    if (d.source[i] != i)
      g.edges[i].cost = g.edges[d.source[i]].cost;
  }
}

/// Builds PaSE's cost graph's edges: an edge per use, whose tables do not
/// depend on the price of memory. Tables are shared between repeated layers
/// and built in parallel.
static CostGraph buildEdges(const SearchSpace::Data &space,
                            const CostModel &model,
                            const std::vector<Vertex> &vertices) {
  CostGraph g;
  const std::vector<Use> &uses = space.uses;
  std::vector<std::string> sigs = vertexSignatures(space, model, vertices);
  // One table per distinct (producer, result, consumer, operand) signature.
  DistinctUses d = distinctUses(uses, sigs);
  g.edges.resize(uses.size());
  // Each distinct edge's layouts. Many configurations lay a tensor out
  // alike (they differ in dims the tensor does not have): each distinct
  // pair of layouts is priced once. And edges whose tensor type and layout
  // lists are equal (a DenseNet feature map read by every later concat of
  // its block) share one table.
  std::vector<EdgeLayouts> layouts =
      collectEdgeLayouts(space, model, vertices, d.distinct);
  std::vector<size_t> priced = tableOwners(layouts);
  // Edges of one tensor type meet the same layouts again and again (a
  // DenseNet feature map of one width leaves a convolution, a normalization
  // and a concat alike): each pair of layouts of a type is priced once.
  std::vector<std::vector<size_t>> byType =
      groupByType(space, model, vertices, d.distinct, priced, g);
  priceTypeGroups(space, model, vertices, d.distinct, layouts, byType, g);
  fillSharedEdges(uses, d, priced, g);
  return g;
}

/// The compute, communication and peak memory of \p configs's ops.
static void priceOps(const Func &f, const CostModel &model,
                     const llvm::DenseSet<const Op *> &constants,
                     const llvm::DenseSet<const Value *> &returned,
                     llvm::ArrayRef<Config> configs,
                     llvm::ArrayRef<OpChoice> choices, StrategyCost &cost) {
  std::vector<OpMemory> memory;
  for (unsigned i = 0; i < f.ops.size(); ++i) {
    const Op &op = *f.ops[i];
    OpChoice choice = i < choices.size() ? choices[i] : OpChoice{};
    OpCost oc = model.opCost(op, configs[i], choice);
    cost.computeSeconds += oc.compute;
    cost.commSeconds += oc.communication;
    cost.commBytes += oc.gradientSyncBytes;
    memory.push_back(model.opMemory(op, configs[i], choice));
    for (unsigned r = 0; r < op.results.size(); ++r)
      if (returned.count(op.results[r].value.get()) && !constants.count(&op)) {
        ReshardStep s = model.returnStep(op, configs[i], r);
        cost.commSeconds += model.stepSeconds(s);
        cost.commBytes += double(s.bytes);
      }
  }
  cost.memoryBytes = stepPeakBytes(memory, choices);
}

/// The cost of \p configs for the ops of \p f.
static StrategyCost priceStrategy(const Func &f, const CostModel &model,
                                  const llvm::DenseSet<const Op *> &constants,
                                  const llvm::DenseSet<const Value *> &returned,
                                  llvm::ArrayRef<Use> uses,
                                  llvm::ArrayRef<Config> configs,
                                  llvm::ArrayRef<int64_t> offsets,
                                  llvm::ArrayRef<OpChoice> choices) {
  StrategyCost cost;
  priceOps(f, model, constants, returned, configs, choices, cost);
  for (const Use &u : uses) {
    const Op &p = *f.ops[u.producer], &q = *f.ops[u.consumer];
    if (constants.count(&p))
      continue; // computed on every device; no gradient
    const Value *v = p.results[u.result].value.get();
    auto [forward, backward] = model.edgePlans(
        placedAt(resultLayout(p, configs[u.producer], u.result),
                 offsetOf(offsets, u.producer)),
        placedAt(operandLayout(q, configs[u.consumer], u.operand),
                 offsetOf(offsets, u.consumer)),
        *v);
    cost.commSeconds += model.planSeconds(forward, model.repeats(v)) +
                        model.planSeconds(backward, model.repeats(v));
    for (const auto *plan : {&forward, &backward})
      for (const ReshardStep &s : *plan)
        cost.commBytes += double(s.bytes);
  }
  cost.seconds = cost.computeSeconds + cost.commSeconds;
  return cost;
}

std::vector<OpPrice> priceEachOp(const SearchSpace &space,
                                 const CostModel &model,
                                 llvm::ArrayRef<Config> configs,
                                 llvm::ArrayRef<OpChoice> choices) {
  const SearchSpace::Data &d = space.data();
  const Func &f = d.module->main;
  std::vector<OpPrice> prices(f.ops.size());
  for (size_t i = 0; i < f.ops.size(); ++i) {
    const Op &op = *f.ops[i];
    OpChoice choice = i < choices.size() ? choices[i] : OpChoice{};
    OpCost c = model.opCost(op, configs[i], choice);
    OpMemory kept = model.opMemory(op, configs[i], choice);
    OpChoice none = choice;
    none.recompute = true; // every result among the recomputed: weights alone
    double weights = model.opMemory(op, configs[i], none).persistent;
    prices[i] = {c.total() - c.gradientSync,
                 c.forward + c.communication - c.gradientSync, c.gradientSync,
                 weights, kept.persistent - weights};
  }
  for (const Use &u : d.uses) {
    const Op &p = *f.ops[u.producer], &q = *f.ops[u.consumer];
    if (d.constants.count(&p))
      continue;
    const Value *v = p.results[u.result].value.get();
    auto [forward, backward] =
        model.edgePlans(resultLayout(p, configs[u.producer], u.result),
                        operandLayout(q, configs[u.consumer], u.operand), *v);
    double there = model.planSeconds(forward, model.repeats(v));
    prices[u.consumer].seconds +=
        there + model.planSeconds(backward, model.repeats(v));
    prices[u.consumer].forwardSeconds += there;
  }
  return prices;
}

/// \p cost with the peak of the program as its plan holds it (a program:
/// not a lever-priced training step, whose peak stepPeakBytes models).
static StrategyCost withProgramPeak(const Module &m, const CostModel &model,
                                    StrategyCost cost,
                                    llvm::ArrayRef<Config> configs,
                                    llvm::ArrayRef<int64_t> offsets) {
  if (model.getMode() == CostMode::Infer)
    cost.memoryBytes =
        programPeakBytes(m, configs, offsets, model.getCluster().gpus,
                         model.getCluster().gpusPerNode);
  return cost;
}

StrategyCost evaluateStrategy(const Module &m, const CostModel &model,
                              llvm::ArrayRef<Config> configs,
                              llvm::ArrayRef<int64_t> offsets,
                              llvm::ArrayRef<OpChoice> choices) {
  const Func &f = m.main;
  llvm::DenseSet<const Value *> returned(f.returns.begin(), f.returns.end());
  return withProgramPeak(m, model,
                         priceStrategy(f, model, constantOps(m), returned,
                                       usesOf(m), configs, offsets, choices),
                         configs, offsets);
}

StrategyCost evaluateStrategy(const SearchSpace &space, const CostModel &model,
                              llvm::ArrayRef<Config> configs,
                              llvm::ArrayRef<int64_t> offsets,
                              llvm::ArrayRef<OpChoice> choices) {
  const SearchSpace::Data &d = space.data();
  return withProgramPeak(*d.module, model,
                         priceStrategy(d.module->main, model, d.constants,
                                       d.returned, d.uses, configs, offsets,
                                       choices),
                         configs, offsets);
}

CostModel leveredModel(const SearchSpace &space, const CostModel &model,
                       const LeverOptions &levers, int64_t microbatches) {
  CostModel m = model;
  m.setLevers(levers, microbatches, space.data().samples);
  return m;
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

Searcher::Searcher(const SearchSpace::Data &space, const CostModel &model,
                   const std::vector<Vertex> &vertices,
                   const ShardingOptions &o)
    : space(space), model(model), vertices(vertices), o(o),
      graph(buildEdges(space, model, vertices)),
      prices(priceVertices(space, model, vertices)) {}

std::vector<Config> Searcher::configs(const Solution &s) const {
  std::vector<Config> out;
  for (unsigned i = 0; i < vertices.size(); ++i)
    out.push_back(vertices[i].configs[s.strategy[i]]);
  return out;
}

llvm::Expected<Solution> Searcher::run(double lambda) {
  const Func &f = space.module->main;
  setVertexCosts(graph, prices, lambda);
  ReducedGraph r = foldFixedVertices(graph);
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
  // A search and its report ask for the same baselines: each is searched
  // once per model, cluster and options.
  const LeverOptions &l = o.levers;
  const Cluster &c = model.getCluster();
  std::string key = llvm::formatv(
      "{0}/{1}/{2}/{3}/{4}/{5}/{6}/{7}/{8}/{9}/{10}", solverName(kind),
      llvm::json::Value(clusterToJson(c)), (const void *)c.measured.get(),
      int(model.getMode()), o.memoryLimit, l.microbatches, int(l.recompute),
      l.zero, l.optimizerSlots, b.maxStates, o.exactSearch);
  const SearchSpace::Data &d = space.data();
  {
    std::lock_guard<std::mutex> lock(d.baselineMutex);
    auto it = d.baselines.find(key);
    if (it != d.baselines.end())
      return it->second.strategy
                 ? llvm::Expected<Strategy>(*it->second.strategy)
                 : llvm::createStringError(it->second.error);
  }
  auto s = solveSharding(space, model, b);
  SearchSpace::Data::Baseline entry;
  if (s)
    entry.strategy = *s;
  else
    entry.error = llvm::toString(s.takeError());
  std::lock_guard<std::mutex> lock(d.baselineMutex);
  auto &kept = d.baselines.try_emplace(key, std::move(entry)).first->second;
  return kept.strategy ? llvm::Expected<Strategy>(*kept.strategy)
                       : llvm::createStringError(kept.error);
}

double simulateStrategy(const SearchSpace &space, const CostModel &model,
                        const LeverOptions &levers, const Strategy &s) {
  CostModel levered = leveredModel(space, model, levers, s.microbatches);
  SimOptions so;
  so.delta = false;
  Simulator sim(space.module(), levered, so);
  sim.setChoices(s.choices);
  return sim.simulate(s.configs, s.offsets);
}

llvm::Expected<Strategy> solveSharding(const Module &m, const CostModel &model,
                                       const ShardingOptions &o) {
  return solveSharding(SearchSpace(m, o.configs), model, o);
}

llvm::Expected<Strategy> solveSharding(const SearchSpace &space,
                                       const CostModel &model,
                                       const ShardingOptions &o) {
  if (o.solver == SolverKind::Mcmc)
    return searchMcmc(space, model, o);
  if (o.solver == SolverKind::Megatron) {
    auto best = solveMegatron(space, model, o);
    if (best)
      for (const Vertex &v : space.data().vertices)
        best->spaceSizes.push_back(v.configs.size());
    return best;
  }
  const SearchSpace::Data &d = space.data();
  auto fields = [](const ConfigOptions &c) {
    return std::tuple(c.devices, c.powersOfTwo, c.exact, c.maxPerDim,
                      c.maxSplitDims, c.executable, c.keepGiven);
  };
  (void)fields;
  assert(fields(d.options) == fields(o.configs) &&
         "the space must be built with the options' configurations");
  auto best = solveWithinMemory(space, model, o);
  if (!best)
    return best.takeError();
  bool baseline = isBaseline(o.solver);
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
        DpStats stats = best->stats;
        *best = std::move(*s);
        best->stats = stats;
      }
    }
  for (const Vertex &v : d.vertices)
    best->spaceSizes.push_back(v.configs.size());
  return best;
}

} // namespace pax
