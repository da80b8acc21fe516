//===- Cluster.cpp - Cluster presets, JSON cluster files, validation ------===//
#include "passes/cost/Cluster.h"

#include "codegen/plan/JsonValues.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <tuple>
#include <vector>

using namespace pax;

namespace {

// Units of the JSON format and of the preset table.
constexpr double kGB = 1e9;       // bytes, for GB/s
constexpr double kTera = 1e12;    // FLOP/s per TFLOP/s
constexpr double kGiB = 1u << 30; // bytes
constexpr double kMicro = 1e6;    // microseconds per second

LinkLevel link(double gbPerSec, double us) {
  return {gbPerSec * kGB, us / kMicro};
}

struct Preset {
  llvm::StringRef description;
  Cluster cluster;
};

/// The presets; docs/CLUSTERS.md lists the same numbers with their sources.
/// Bandwidths are per device and direction (see LinkLevel::bandwidth).
/// Latencies are the order of magnitude of one NCCL step: a few us over NVLink
/// or PCIe inside a node, 5-10 us through an InfiniBand NIC.
const std::vector<Preset> &presets() {
  static const std::vector<Preset> table = {
      // PaSE (Elango, IPDPS'21), sec. V: nodes of 8 GTX 1080 Ti on PCIe,
      // InfiniBand across nodes, up to 4 nodes. Its cost model (eq. 1) has
      // one peak rate F and one bandwidth B for every link; we take the
      // prototype's defaults F = 10 TFLOP/s (a 1080 Ti peaks at 11.3 in fp32)
      // and B = 16 GB/s (PCIe 3.0 x16: 15.75 GB/s per direction) at both
      // levels. 11 GiB: the 1080 Ti's memory. Its fp16 rate is no faster
      // (no 16-bit rate given: 16-bit products at F).
      {"GTX 1080 Ti nodes on PCIe, PaSE's experiments and cost constants",
       {"pase", 32, 8, 10 * kTera, 11 * kGiB, link(16, 5), link(16, 10), 0,
        nullptr, 484 * kGB, 0}},
      // FlexFlow (Jia, SysML'19), sec. 8, fig. 6: 4 nodes of 4 Tesla P100
      // (SXM2, 16 GB HBM2), NVLink inside a node, one 100 Gb/s EDR
      // InfiniBand HCA per node. 10.6 TFLOP/s is the P100's fp32 peak (21.2
      // in fp16); we price fp32 models at fp32 rates, as for pase. NVLink 1.0
      // moves 20 GB/s per link and direction; a ring through the node's GPUs
      // gets 2 links per direction: 40 GB/s (PaSE's prototype models P100
      // NVLink the same way). 12.5 GB/s of EDR shared by 4 GPUs: 3.125 GB/s
      // per device.
      {"4x Tesla P100 per node on NVLink, EDR InfiniBand: FlexFlow's cluster",
       {"p100-nvlink", 16, 4, 10.6 * kTera, 16 * kGiB, link(40, 3),
        link(12.5 / 4, 10), 0, nullptr, 732 * kGB, 21.2 * kTera}},
      // NVIDIA DGX-1 (P100): 8 Tesla P100 SXM2 16GB in a hybrid cube mesh of
      // NVLink 1 (4 links of 20 GB/s per direction per GPU; a ring through
      // the mesh sustains about two links: 40 GB/s), 4 EDR InfiniBand NICs
      // of 100 Gb/s per node (12.5 GB/s each, one per two GPUs: 6.25 GB/s).
      // 10.6 TFLOP/s fp32, as for p100-nvlink.
      {"8x Tesla P100 per node on NVLink (DGX-1), 4x EDR InfiniBand",
       {"dgx1-p100", 16, 8, 10.6 * kTera, 16 * kGiB, link(40, 3),
        link(12.5 / 2, 10), 0, nullptr, 732 * kGB, 21.2 * kTera}},
      // NVIDIA DGX A100 datasheet: 8 A100 SXM4 80GB, NVLink3 through
      // NVSwitch at 600 GB/s per GPU (300 per direction), 8 ConnectX-6
      // 200 Gb/s HDR InfiniBand NICs (one per GPU: 25 GB/s). 156 TFLOP/s is
      // the dense TF32 tensor-core peak: fp32 tensors with TF32 math, cuDNN's
      // default for convolutions (19.5 TFLOP/s without tensor cores).
      {"8x A100 80GB per node on NVSwitch, 8x 200 Gb/s HDR InfiniBand",
       {"dgx-a100", 8, 8, 156 * kTera, 80 * kGiB, link(300, 3), link(25, 5), 0,
        nullptr, 2039 * kGB, 312 * kTera}},
      // NVIDIA DGX H100 datasheet: 8 H100 SXM5 80GB, NVLink4 through NVSwitch
      // at 900 GB/s per GPU (450 per direction), 8 ConnectX-7 400 Gb/s NDR
      // InfiniBand NICs (one per GPU: 50 GB/s). 495 TFLOP/s is the dense TF32
      // tensor-core peak, as for the A100 (989 with sparsity; 67 without
      // tensor cores); 989 TFLOP/s is the dense bf16/fp16 tensor-core peak
      // (312 on the A100; the P100's fp16 rate is 21.2).
      {"8x H100 80GB per node on NVSwitch, 8x 400 Gb/s NDR InfiniBand",
       {"dgx-h100", 8, 8, 495 * kTera, 80 * kGiB, link(450, 3), link(50, 5), 0,
        nullptr, 3350 * kGB, 989 * kTera}},
  };
  return table;
}

/// "3.125", "16", "0.5": a number as a person writes it.
std::string num(double v) {
  std::string s;
  llvm::raw_string_ostream(s) << llvm::format("%g", v);
  return s;
}

/// "No such file" -> "no such file": our messages are lower-case.
std::string lowerFirst(std::string s) {
  if (!s.empty())
    s[0] = llvm::toLower(s[0]);
  return s;
}

llvm::Error checkPositive(llvm::StringRef where, const llvm::Twine &what,
                          double v, llvm::StringRef unit) {
  if (v > 0 && std::isfinite(v))
    return llvm::Error::success();
  return llvm::createStringError(where + ": " + what +
                                 " must be positive, got " + num(v) + unit);
}

llvm::Error checkLink(llvm::StringRef where, llvm::StringRef level,
                      const LinkLevel &l) {
  if (auto err = checkPositive(where, level + " bandwidth", l.bandwidth / kGB,
                               " GB/s"))
    return err;
  if (l.latency >= 0 && std::isfinite(l.latency))
    return llvm::Error::success();
  return llvm::createStringError(where + ": " + level +
                                 " latency must not be negative, got " +
                                 num(l.latency * kMicro) + " us");
}

/// validateCluster(), with \p where naming the cluster in errors.
llvm::Error validate(const Cluster &c, llvm::StringRef where) {
  if (c.gpus == 0)
    return llvm::createStringError(where +
                                   ": the cluster needs at least 1 gpu");
  if (c.gpusPerNode == 0)
    return llvm::createStringError(where +
                                   ": a node needs at least 1 gpu (gpus per "
                                   "node is 0)");
  if (c.gpus > c.gpusPerNode && c.gpus % c.gpusPerNode != 0)
    return llvm::createStringError(
        where + ": " + std::to_string(c.gpus) +
        " gpus do not fill whole nodes of " + std::to_string(c.gpusPerNode) +
        " (gpus per node must divide the gpu count)");
  if (auto err =
          checkPositive(where, "peak rate", c.peakFlops / kTera, " TFLOP/s"))
    return err;
  if (auto err = checkPositive(where, "memory", c.memoryBytes / kGiB, " GiB"))
    return err;
  if (auto err = checkLink(where, "intra-node", c.intraNode))
    return err;
  if (auto err = checkLink(where, "inter-node", c.interNode))
    return err;
  if (c.reduceBandwidth < 0 || !std::isfinite(c.reduceBandwidth))
    return llvm::createStringError(
        where + ": the reduce bandwidth must not be negative, got " +
        num(c.reduceBandwidth / kGB) + " GB/s");
  if (c.memoryBandwidth < 0 || !std::isfinite(c.memoryBandwidth))
    return llvm::createStringError(
        where + ": the memory bandwidth must not be negative, got " +
        num(c.memoryBandwidth / kGB) + " GB/s");
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// JSON
//===----------------------------------------------------------------------===//

/// Reads the fields of one JSON object and reports unknown, missing and
/// mistyped fields by their dotted path.
class FieldReader {
public:
  FieldReader(const llvm::json::Object &obj, llvm::StringRef origin,
              std::string prefix)
      : obj(obj), origin(origin), prefix(std::move(prefix)) {}

  /// The field \p key; an error when it is absent (and \p optional is false).
  llvm::Expected<const llvm::json::Value *> get(llvm::StringRef key,
                                                bool optional = false) {
    const llvm::json::Value *v = obj.get(key);
    if (!v && !optional)
      return error("field '" + path(key) + "' is missing");
    return v;
  }

  llvm::Expected<double> number(llvm::StringRef key) {
    auto v = get(key);
    if (!v)
      return v.takeError();
    if (auto d = (*v)->getAsNumber())
      return *d;
    return error("field '" + path(key) + "' must be a number");
  }

  /// A positive integer; nullopt when \p optional and absent.
  llvm::Expected<std::optional<unsigned>> count(llvm::StringRef key,
                                                bool optional = false) {
    auto v = get(key, optional);
    if (!v)
      return v.takeError();
    if (!*v)
      return std::nullopt;
    std::optional<int64_t> i = jsonInteger(**v);
    if (!i || *i < 1 || *i > int64_t(UINT32_MAX))
      return error("field '" + path(key) + "' must be a positive integer");
    return unsigned(*i);
  }

  llvm::Expected<std::string> string(llvm::StringRef key) {
    auto v = get(key);
    if (!v)
      return v.takeError();
    if (auto s = (*v)->getAsString(); s && !s->empty())
      return s->str();
    return error("field '" + path(key) + "' must be a non-empty string");
  }

  llvm::Expected<const llvm::json::Object *> object(llvm::StringRef key) {
    auto v = get(key);
    if (!v)
      return v.takeError();
    if (auto *o = (*v)->getAsObject())
      return o;
    return error("field '" + path(key) + "' must be an object");
  }

  /// Fails on the first field (in sorted order) not in \p known. Checked
  /// first, so that a misspelt field is reported as such, not as missing.
  llvm::Error checkKnown(llvm::ArrayRef<llvm::StringRef> known) const {
    llvm::SmallVector<llvm::StringRef> unknown;
    for (const auto &kv : obj)
      if (!llvm::is_contained(known, llvm::StringRef(kv.first)))
        unknown.push_back(kv.first);
    if (unknown.empty())
      return llvm::Error::success();
    llvm::sort(unknown);
    return error("unknown field '" + path(unknown.front()) + "'");
  }

  /// A reader of \p sub, the object in field \p key.
  FieldReader nested(const llvm::json::Object &sub, llvm::StringRef key) const {
    return FieldReader(sub, origin, path(key) + ".");
  }

  /// The dotted path of \p key, e.g. `intra_node.latency_us`.
  std::string path(llvm::StringRef key) const { return prefix + key.str(); }

  llvm::Error error(const llvm::Twine &msg) const {
    return llvm::createStringError(origin + ": " + msg);
  }

private:
  const llvm::json::Object &obj;
  llvm::StringRef origin;
  std::string prefix;
};

/// Reads `{"bandwidth_gbps": GB/s, "latency_us": us}` from field \p key.
llvm::Expected<LinkLevel> readLink(FieldReader &parent, llvm::StringRef key) {
  auto obj = parent.object(key);
  if (!obj)
    return obj.takeError();
  FieldReader r = parent.nested(**obj, key);
  if (auto err = r.checkKnown({"bandwidth_gbps", "latency_us"}))
    return err;
  auto bw = r.number("bandwidth_gbps");
  if (!bw)
    return bw.takeError();
  auto lat = r.number("latency_us");
  if (!lat)
    return lat.takeError();
  return link(*bw, *lat);
}

} // namespace

unsigned Cluster::nodes() const {
  assert(gpusPerNode > 0 && "a node has at least one gpu");
  return gpus <= gpusPerNode ? 1 : gpus / gpusPerNode;
}

llvm::ArrayRef<llvm::StringRef> pax::clusterPresetNames() {
  static const std::vector<llvm::StringRef> names = [] {
    std::vector<llvm::StringRef> v;
    for (const Preset &p : presets())
      v.push_back(p.cluster.name);
    return v;
  }();
  return names;
}

std::optional<Cluster> pax::clusterPreset(llvm::StringRef name) {
  for (const Preset &p : presets())
    if (p.cluster.name == name)
      return p.cluster;
  return std::nullopt;
}

llvm::Error pax::validateCluster(const Cluster &c) {
  return validate(c, "cluster '" + c.name + "'");
}

/// The cluster JSON's optional fields of \p obj into \p c.
static llvm::Error readOptionalFields(FieldReader &r,
                                      const llvm::json::Object &obj,
                                      llvm::StringRef origin, Cluster &c) {
  for (auto [key, unit, field] :
       {std::tuple{"reduce_gbps", kGB, &c.reduceBandwidth},
        std::tuple{"memory_gbps", kGB, &c.memoryBandwidth},
        std::tuple{"peak_tflops_16bit", kTera, &c.halfFlops}}) {
    if (!obj.get(key))
      continue;
    auto v = r.number(key);
    if (!v)
      return v.takeError();
    *field = *v * unit;
  }
  if (const llvm::json::Value *overlap = obj.get("overlap_collectives")) {
    std::optional<bool> b = overlap->getAsBoolean();
    if (!b)
      return llvm::createStringError(
          origin + ": \"overlap_collectives\" must be true or false");
    c.overlapCollectives = *b;
  }
  return llvm::Error::success();
}

llvm::Expected<Cluster> pax::parseClusterJson(llvm::StringRef text,
                                              llvm::StringRef origin) {
  auto value = parseJson(text);
  if (!value)
    return llvm::createStringError(
        origin + ": invalid JSON: " + llvm::toString(value.takeError()));
  const llvm::json::Object *obj = value->getAsObject();
  if (!obj)
    return llvm::createStringError(origin +
                                   ": expected a JSON object describing a "
                                   "cluster");
  FieldReader r(*obj, origin, "");
  if (auto err = r.checkKnown({"name", "gpus", "gpus_per_node", "peak_tflops",
                               "memory_gib", "intra_node", "inter_node",
                               "reduce_gbps", "memory_gbps",
                               "peak_tflops_16bit", "overlap_collectives"}))
    return err;
  Cluster c;
  auto name = r.string("name");
  if (!name)
    return name.takeError();
  c.name = *name;
  auto perNode = r.count("gpus_per_node");
  if (!perNode)
    return perNode.takeError();
  c.gpusPerNode = **perNode;
  auto gpus = r.count("gpus", /*optional=*/true);
  if (!gpus)
    return gpus.takeError();
  c.gpus = gpus->value_or(c.gpusPerNode);
  auto tflops = r.number("peak_tflops");
  if (!tflops)
    return tflops.takeError();
  c.peakFlops = *tflops * kTera;
  auto gib = r.number("memory_gib");
  if (!gib)
    return gib.takeError();
  c.memoryBytes = *gib * kGiB;
  auto intra = readLink(r, "intra_node");
  if (!intra)
    return intra.takeError();
  c.intraNode = *intra;
  auto inter = readLink(r, "inter_node");
  if (!inter)
    return inter.takeError();
  c.interNode = *inter;
  if (auto err = readOptionalFields(r, *obj, origin, c))
    return err;
  return c;
}

llvm::Expected<Cluster> pax::makeCluster(llvm::StringRef presetOrJsonPath,
                                         std::optional<unsigned> gpus,
                                         std::optional<unsigned> gpusPerNode) {
  std::string where;
  std::optional<Cluster> c = clusterPreset(presetOrJsonPath);
  if (c) {
    where = "cluster '" + c->name + "'";
  } else {
    auto buf = llvm::MemoryBuffer::getFile(presetOrJsonPath, /*IsText=*/true);
    if (!buf)
      return llvm::createStringError(
          "unknown cluster '" + presetOrJsonPath + "': not a preset (" +
          llvm::join(clusterPresetNames(), ", ") +
          ") and not a readable file (" + lowerFirst(buf.getError().message()) +
          ")");
    auto parsed = parseClusterJson((*buf)->getBuffer(), presetOrJsonPath);
    if (!parsed)
      return parsed.takeError();
    c = std::move(*parsed);
    where = presetOrJsonPath.str();
  }
  if (gpus) {
    c->gpus = *gpus;
    where += " with --gpus=" + std::to_string(*gpus);
  }
  if (gpusPerNode) {
    c->gpusPerNode = *gpusPerNode;
    where += std::string(gpus ? " and" : " with") +
             " --gpus-per-node=" + std::to_string(*gpusPerNode);
  }
  if (auto err = validate(*c, where))
    return err;
  return std::move(*c);
}

llvm::json::Value pax::clusterToJson(const Cluster &c) {
  auto linkJson = [](const LinkLevel &l) {
    return llvm::json::Object{{"bandwidth_gbps", l.bandwidth / kGB},
                              {"latency_us", l.latency * kMicro}};
  };
  llvm::json::Object o{{"name", c.name},
                       {"gpus", c.gpus},
                       {"gpus_per_node", c.gpusPerNode},
                       {"peak_tflops", c.peakFlops / kTera},
                       {"memory_gib", c.memoryBytes / kGiB},
                       {"intra_node", linkJson(c.intraNode)},
                       {"inter_node", linkJson(c.interNode)}};
  if (c.reduceBandwidth > 0)
    o["reduce_gbps"] = c.reduceBandwidth / kGB;
  if (c.memoryBandwidth > 0)
    o["memory_gbps"] = c.memoryBandwidth / kGB;
  if (c.halfFlops > 0)
    o["peak_tflops_16bit"] = c.halfFlops / kTera;
  if (c.overlapCollectives)
    o["overlap_collectives"] = true;
  return o;
}

std::string pax::describeClusters() {
  std::string s;
  llvm::raw_string_ostream os(s);
  auto linkText = [](const LinkLevel &l) {
    return num(l.bandwidth / kGB) + " GB/s, " + num(l.latency * kMicro) + " us";
  };
  // One row: preset, gpus, per node, TFLOP/s, memory, intra-node, inter-node.
  auto row = [&](llvm::StringRef name, llvm::StringRef gpus,
                 llvm::StringRef perNode, llvm::StringRef tflops,
                 llvm::StringRef memory, llvm::StringRef intra,
                 llvm::StringRef inter) {
    os << llvm::left_justify(name, 12) << llvm::right_justify(gpus, 5)
       << llvm::right_justify(perNode, 10) << llvm::right_justify(tflops, 9)
       << llvm::right_justify(memory, 8) << "  "
       << llvm::left_justify(intra, 18) << inter << "\n";
  };
  row("preset", "gpus", "per node", "TFLOP/s", "memory", "intra-node",
      "inter-node");
  for (const Preset &p : presets()) {
    const Cluster &c = p.cluster;
    row(c.name, std::to_string(c.gpus), std::to_string(c.gpusPerNode),
        num(c.peakFlops / kTera), num(c.memoryBytes / kGiB) + " GiB",
        linkText(c.intraNode), linkText(c.interNode));
    os << "    " << p.description << "\n";
  }
  os << "Bandwidths are per device and direction. --gpus=N and "
        "--gpus-per-node=G\noverride a preset; --cluster=FILE.json reads a "
        "cluster (docs/CLUSTERS.md).\n";
  return s;
}
