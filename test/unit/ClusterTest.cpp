//===- ClusterTest.cpp - Cluster presets, JSON cluster files, overrides ---===//
#include "passes/cost/Cluster.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace pax;

namespace {

constexpr double kGB = 1e9;
constexpr double kGiB = 1u << 30;
constexpr double kTera = 1e12;
constexpr double kUs = 1e-6;

/// A JSON file that lives as long as the object.
class TempJson {
public:
  explicit TempJson(llvm::StringRef text) {
    int fd;
    std::error_code ec =
        llvm::sys::fs::createTemporaryFile("cluster", "json", fd, path);
    EXPECT_FALSE(ec) << ec.message();
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << text;
  }
  ~TempJson() { llvm::sys::fs::remove(path); }
  std::string str() const { return std::string(path.str()); }

private:
  llvm::SmallString<128> path;
};

/// The error of makeCluster(text as a file), or "" when it succeeds.
std::string jsonError(llvm::StringRef text, std::string *file = nullptr) {
  TempJson json(text);
  if (file)
    *file = json.str();
  auto c = makeCluster(json.str(), std::nullopt, std::nullopt);
  if (c)
    return "";
  return llvm::toString(c.takeError());
}

/// The error of makeCluster() with overrides, or "" when it succeeds.
std::string overrideError(llvm::StringRef preset, std::optional<unsigned> gpus,
                          std::optional<unsigned> perNode) {
  auto c = makeCluster(preset, gpus, perNode);
  return c ? "" : llvm::toString(c.takeError());
}

const char *kGoodJson = R"({
  "name": "lab",
  "gpus": 12,
  "gpus_per_node": 4,
  "peak_tflops": 19.5,
  "memory_gib": 40,
  "intra_node": {"bandwidth_gbps": 100, "latency_us": 2},
  "inter_node": {"bandwidth_gbps": 12.5, "latency_us": 8}
})";

/// kGoodJson with \p from replaced by \p to (which must occur once).
std::string edited(llvm::StringRef from, llvm::StringRef to) {
  std::string s = kGoodJson;
  size_t at = s.find(from.str());
  EXPECT_NE(at, std::string::npos) << from.str();
  EXPECT_EQ(s.find(from.str(), at + 1), std::string::npos) << from.str();
  if (at != std::string::npos)
    s.replace(at, from.size(), to.str());
  return s;
}

void expectLink(const LinkLevel &l, double gbPerSec, double us) {
  EXPECT_DOUBLE_EQ(l.bandwidth, gbPerSec * kGB);
  EXPECT_DOUBLE_EQ(l.latency, us * kUs);
}

TEST(ClusterTest, PresetsHaveTheirDocumentedNumbers) {
  auto pase = clusterPreset("pase");
  ASSERT_TRUE(pase);
  EXPECT_EQ(pase->gpus, 32u);
  EXPECT_EQ(pase->gpusPerNode, 8u);
  EXPECT_EQ(pase->nodes(), 4u);
  EXPECT_DOUBLE_EQ(pase->peakFlops, 10 * kTera);
  EXPECT_DOUBLE_EQ(pase->memoryBytes, 11 * kGiB);
  expectLink(pase->intraNode, 16, 5);
  expectLink(pase->interNode, 16, 10);

  auto p100 = clusterPreset("p100-nvlink");
  ASSERT_TRUE(p100);
  EXPECT_EQ(p100->gpus, 16u);
  EXPECT_EQ(p100->gpusPerNode, 4u);
  EXPECT_DOUBLE_EQ(p100->peakFlops, 10.6 * kTera);
  EXPECT_DOUBLE_EQ(p100->memoryBytes, 16 * kGiB);
  expectLink(p100->intraNode, 40, 3);
  expectLink(p100->interNode, 3.125, 10);

  auto a100 = clusterPreset("dgx-a100");
  ASSERT_TRUE(a100);
  EXPECT_EQ(a100->gpus, 8u);
  EXPECT_EQ(a100->gpusPerNode, 8u);
  EXPECT_DOUBLE_EQ(a100->peakFlops, 156 * kTera);
  EXPECT_DOUBLE_EQ(a100->memoryBytes, 80 * kGiB);
  expectLink(a100->intraNode, 300, 3);
  expectLink(a100->interNode, 25, 5);

  auto h100 = clusterPreset("dgx-h100");
  ASSERT_TRUE(h100);
  EXPECT_EQ(h100->gpus, 8u);
  EXPECT_EQ(h100->gpusPerNode, 8u);
  EXPECT_EQ(h100->nodes(), 1u);
  EXPECT_DOUBLE_EQ(h100->peakFlops, 495 * kTera);
  EXPECT_DOUBLE_EQ(h100->memoryBytes, 80 * kGiB);
  expectLink(h100->intraNode, 450, 3);
  expectLink(h100->interNode, 50, 5);
}

TEST(ClusterTest, EveryPresetNameResolvesToAValidCluster) {
  std::vector<std::string> names;
  for (llvm::StringRef name : clusterPresetNames()) {
    names.push_back(name.str());
    auto c = makeCluster(name, std::nullopt, std::nullopt);
    ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
    EXPECT_EQ(c->name, name.str());
    EXPECT_FALSE(bool(validateCluster(*c)));
    // Inside a node is never slower than across nodes.
    EXPECT_GE(c->intraNode.bandwidth, c->interNode.bandwidth) << c->name;
    EXPECT_LE(c->intraNode.latency, c->interNode.latency) << c->name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"pase", "p100-nvlink", "dgx1-p100",
                                             "dgx-a100", "dgx-h100"}));
  EXPECT_FALSE(clusterPreset("dgx-b200"));
}

TEST(ClusterTest, UnknownNameThatIsNoFileIsAnError) {
  std::string err =
      overrideError("no-such-cluster", std::nullopt, std::nullopt);
  EXPECT_NE(err.find("unknown cluster 'no-such-cluster'"), std::string::npos)
      << err;
  EXPECT_NE(err.find("pase, p100-nvlink, dgx1-p100, dgx-a100, dgx-h100"),
            std::string::npos)
      << err;
}

TEST(ClusterTest, OverridesChangeCountAndNodeSize) {
  auto big = makeCluster("dgx-h100", 64, std::nullopt);
  ASSERT_TRUE(bool(big)) << llvm::toString(big.takeError());
  EXPECT_EQ(big->gpus, 64u);
  EXPECT_EQ(big->nodes(), 8u);

  auto halves = makeCluster("dgx-a100", std::nullopt, 4);
  ASSERT_TRUE(bool(halves)) << llvm::toString(halves.takeError());
  EXPECT_EQ(halves->gpus, 8u);
  EXPECT_EQ(halves->gpusPerNode, 4u);
  EXPECT_EQ(halves->nodes(), 2u);

  // Fewer GPUs than a node holds: one partial node.
  auto part = makeCluster("pase", 2, std::nullopt);
  ASSERT_TRUE(bool(part)) << llvm::toString(part.takeError());
  EXPECT_EQ(part->nodes(), 1u);

  auto both = makeCluster("p100-nvlink", 32, 8);
  ASSERT_TRUE(bool(both)) << llvm::toString(both.takeError());
  EXPECT_EQ(both->nodes(), 4u);
}

TEST(ClusterTest, ImpossibleOverridesAreErrors) {
  EXPECT_EQ(overrideError("dgx-h100", 0, std::nullopt),
            "cluster 'dgx-h100' with --gpus=0: the cluster needs at least 1 "
            "gpu");
  EXPECT_EQ(overrideError("dgx-h100", std::nullopt, 0),
            "cluster 'dgx-h100' with --gpus-per-node=0: a node needs at least "
            "1 gpu (gpus per node is 0)");
  EXPECT_EQ(overrideError("dgx-h100", 12, std::nullopt),
            "cluster 'dgx-h100' with --gpus=12: 12 gpus do not fill whole "
            "nodes of 8 (gpus per node must divide the gpu count)");
  EXPECT_EQ(overrideError("pase", 24, 16),
            "cluster 'pase' with --gpus=24 and --gpus-per-node=16: 24 gpus do "
            "not fill whole nodes of 16 (gpus per node must divide the gpu "
            "count)");
}

TEST(ClusterTest, ReadsAGoodJsonFile) {
  TempJson json(kGoodJson);
  auto c = makeCluster(json.str(), std::nullopt, std::nullopt);
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  EXPECT_EQ(c->name, "lab");
  EXPECT_EQ(c->gpus, 12u);
  EXPECT_EQ(c->gpusPerNode, 4u);
  EXPECT_EQ(c->nodes(), 3u);
  EXPECT_DOUBLE_EQ(c->peakFlops, 19.5 * kTera);
  EXPECT_DOUBLE_EQ(c->memoryBytes, 40 * kGiB);
  expectLink(c->intraNode, 100, 2);
  expectLink(c->interNode, 12.5, 8);

  // Overrides apply to files too.
  auto more = makeCluster(json.str(), 16, std::nullopt);
  ASSERT_TRUE(bool(more)) << llvm::toString(more.takeError());
  EXPECT_EQ(more->nodes(), 4u);
}

TEST(ClusterTest, GpuCountDefaultsToOneNode) {
  TempJson json(edited("\"gpus\": 12,", ""));
  auto c = makeCluster(json.str(), std::nullopt, std::nullopt);
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  EXPECT_EQ(c->gpus, 4u);
  EXPECT_EQ(c->nodes(), 1u);
}

TEST(ClusterTest, MissingFieldsAreNamed) {
  struct Case {
    const char *text, *field;
  } cases[] = {
      {"\"name\": \"lab\",", "name"},
      {"\"gpus_per_node\": 4,", "gpus_per_node"},
      {"\"peak_tflops\": 19.5,", "peak_tflops"},
      {"\"memory_gib\": 40,", "memory_gib"},
      {"\"intra_node\": {\"bandwidth_gbps\": 100, \"latency_us\": 2},",
       "intra_node"},
      {",\n  \"inter_node\": {\"bandwidth_gbps\": 12.5, \"latency_us\": 8}",
       "inter_node"},
      {"\"bandwidth_gbps\": 100, ", "intra_node.bandwidth_gbps"},
      {", \"latency_us\": 8", "inter_node.latency_us"},
  };
  for (const Case &c : cases) {
    std::string file;
    std::string err = jsonError(edited(c.text, ""), &file);
    EXPECT_EQ(err, file + ": field '" + c.field + "' is missing");
  }
}

TEST(ClusterTest, MistypedFieldsAreNamed) {
  struct Case {
    const char *from, *to, *message;
  } cases[] = {
      {"\"lab\"", "3", "field 'name' must be a non-empty string"},
      {"\"lab\"", "\"\"", "field 'name' must be a non-empty string"},
      {"\"gpus_per_node\": 4", "\"gpus_per_node\": \"4\"",
       "field 'gpus_per_node' must be a positive integer"},
      {"\"gpus_per_node\": 4", "\"gpus_per_node\": 2.5",
       "field 'gpus_per_node' must be a positive integer"},
      {"\"gpus_per_node\": 4", "\"gpus_per_node\": -4",
       "field 'gpus_per_node' must be a positive integer"},
      {"\"gpus\": 12", "\"gpus\": 0",
       "field 'gpus' must be a positive integer"},
      {"19.5", "\"fast\"", "field 'peak_tflops' must be a number"},
      {"40", "null", "field 'memory_gib' must be a number"},
      {"{\"bandwidth_gbps\": 100, \"latency_us\": 2}", "[100, 2]",
       "field 'intra_node' must be an object"},
      {"\"latency_us\": 8", "\"latency_us\": \"8us\"",
       "field 'inter_node.latency_us' must be a number"},
  };
  for (const Case &c : cases) {
    std::string file;
    std::string err = jsonError(edited(c.from, c.to), &file);
    EXPECT_EQ(err, file + ": " + c.message);
  }
}

TEST(ClusterTest, UnknownFieldsAreErrors) {
  std::string file;
  std::string err = jsonError(
      edited("\"gpus\": 12,", "\"gpus\": 12, \"nvlink\": true,"), &file);
  EXPECT_EQ(err, file + ": unknown field 'nvlink'");
  err = jsonError(
      edited("\"latency_us\": 2}", "\"latency_us\": 2, \"lanes\": 4}"), &file);
  EXPECT_EQ(err, file + ": unknown field 'intra_node.lanes'");
  // A misspelt field is unknown, not missing.
  err = jsonError(edited("\"gpus_per_node\"", "\"gpu_per_node\""), &file);
  EXPECT_EQ(err, file + ": unknown field 'gpu_per_node'");
}

TEST(ClusterTest, MalformedFilesAreErrors) {
  std::string file;
  std::string err = jsonError("{\"name\": \"lab\",", &file);
  EXPECT_EQ(err.rfind(file + ": invalid JSON: ", 0), 0u) << err;
  err = jsonError("[1, 2]", &file);
  EXPECT_EQ(err, file + ": expected a JSON object describing a cluster");
}

TEST(ClusterTest, ImpossibleValuesInFilesAreErrors) {
  std::string file;
  std::string err = jsonError(edited("100", "-100"), &file);
  EXPECT_EQ(err,
            file + ": intra-node bandwidth must be positive, got -100 GB/s");
  err = jsonError(edited("12.5", "0"), &file);
  EXPECT_EQ(err, file + ": inter-node bandwidth must be positive, got 0 GB/s");
  err = jsonError(edited("\"latency_us\": 8", "\"latency_us\": -1"), &file);
  EXPECT_EQ(err, file + ": inter-node latency must not be negative, got -1 us");
  err = jsonError(edited("19.5", "0"), &file);
  EXPECT_EQ(err, file + ": peak rate must be positive, got 0 TFLOP/s");
  err = jsonError(edited("40", "-8"), &file);
  EXPECT_EQ(err, file + ": memory must be positive, got -8 GiB");
  err = jsonError(edited("\"gpus\": 12", "\"gpus\": 10"), &file);
  EXPECT_EQ(err, file + ": 10 gpus do not fill whole nodes of 4 (gpus per node "
                        "must divide the gpu count)");
  // A zero latency is allowed: PaSE's own model has none.
  EXPECT_EQ(jsonError(edited("\"latency_us\": 8", "\"latency_us\": 0")), "");
}

TEST(ClusterTest, JsonRoundTripsEveryPreset) {
  for (llvm::StringRef name : clusterPresetNames()) {
    Cluster c = *clusterPreset(name);
    std::string text;
    llvm::raw_string_ostream(text) << clusterToJson(c);
    TempJson json(text);
    auto back = makeCluster(json.str(), std::nullopt, std::nullopt);
    ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
    EXPECT_EQ(back->name, c.name);
    EXPECT_EQ(back->gpus, c.gpus);
    EXPECT_EQ(back->gpusPerNode, c.gpusPerNode);
    EXPECT_DOUBLE_EQ(back->peakFlops, c.peakFlops);
    EXPECT_DOUBLE_EQ(back->memoryBytes, c.memoryBytes);
    EXPECT_DOUBLE_EQ(back->intraNode.bandwidth, c.intraNode.bandwidth);
    EXPECT_DOUBLE_EQ(back->intraNode.latency, c.intraNode.latency);
    EXPECT_DOUBLE_EQ(back->interNode.bandwidth, c.interNode.bandwidth);
    EXPECT_DOUBLE_EQ(back->interNode.latency, c.interNode.latency);
  }
}

TEST(ClusterTest, DescribeListsEveryPreset) {
  std::string table = describeClusters();
  for (llvm::StringRef name : clusterPresetNames())
    EXPECT_NE(table.find("\n" + name.str() + " "), std::string::npos)
        << name.str();
  EXPECT_NE(table.find("450 GB/s, 3 us"), std::string::npos) << table;
  EXPECT_NE(table.find("3.125 GB/s, 10 us"), std::string::npos) << table;
  EXPECT_NE(table.find("FlexFlow"), std::string::npos) << table;
}

} // namespace
