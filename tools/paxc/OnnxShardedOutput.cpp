//===- OnnxShardedOutput.cpp - paxc --emit=onnx-sharded -------------------===//
#include "tools/paxc/OnnxShardedOutput.h"

#include "frontend/OnnxImporter.h"
#include "frontend/OnnxSharding.h"
#include "passes/sharding/Layout.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

namespace pax::paxc {

/// The last op each source node became, by the node's name: an op fused
/// from several nodes (attention, a matmul and its bias add) stands for the
/// node named by its `onnx_node`, whose output it writes; a gemm also for
/// its own (the matmul's product has the gemm's layout).
static llvm::StringMap<size_t> lastOpOfNodes(const Module &m) {
  llvm::StringMap<size_t> last;
  for (size_t i = 0; i < m.main.ops.size(); ++i) {
    const Op &op = *m.main.ops[i];
    auto node = op.attrs.find("onnx_node");
    const auto *s = node == op.attrs.end()
                        ? nullptr
                        : std::get_if<std::string>(&node->second);
    if (!s || op.kind == OpKind::Gemm)
      last[op.name()] = i;
    if (s)
      last[*s] = i;
  }
  return last;
}

/// --emit=onnx-sharded: the source model, each node that became ops of the
/// IR annotated with the sharding of its outputs: those of the node's last
/// op, reduced (the layout the consumers read it in).
llvm::Error writeOnnxSharded(const Module &m, const StrategyReport &r,
                             llvm::StringRef inputPath,
                             llvm::StringRef outputPath, bool quiet,
                             llvm::raw_ostream &os) {
  auto model = readOnnxModel(inputPath);
  if (!model)
    return model.takeError();
  llvm::StringMap<int> outputsOf;
  for (const onnx::NodeProto &n : model->graph().node())
    outputsOf[n.name().empty() && n.output_size() ? n.output(0) : n.name()] =
        n.output_size();
  llvm::StringMap<size_t> last = lastOpOfNodes(m);
  llvm::DenseSet<const Op *> everywhere = constantOps(m);
  std::vector<OutputSharding> outputs;
  size_t nodes = 0;
  for (const auto &entry : last) {
    auto it = outputsOf.find(entry.getKey());
    const Op &op = *m.main.ops[entry.getValue()];
    if (it == outputsOf.end() || int(op.results.size()) < it->second ||
        (int(op.results.size()) > it->second && !op.attrs.count("onnx_node")))
      continue;
    ++nodes;
    for (unsigned k = 0; k < unsigned(it->second); ++k) {
      const TensorType &t = op.results[k].value->type;
      TensorSharding s;
      if (everywhere.contains(&op)) {
        // Computed whole on every device.
        s.devices.emplace_back();
        for (int64_t d = 0; d < int64_t(r.cluster->gpus); ++d)
          s.devices.back().push_back(d);
      } else {
        TensorLayout l = reducedLayout(
            resultLayout(op, r.strategy.configs[entry.getValue()], k));
        auto got = shardingOf(
            LayoutAttr{std::vector<Digit>(l.digits.begin(), l.digits.end())},
            t.shape);
        if (!got)
          return llvm::createStringError(
              "op '" + op.name() + "': " + llvm::toString(got.takeError()));
        s = std::move(*got);
        for (std::vector<int64_t> &holders : s.devices)
          for (int64_t &d : holders)
            d += offsetOf(r.strategy.offsets, entry.getValue());
      }
      outputs.push_back({entry.getKey().str(), k, std::move(s)});
    }
  }
  if (auto err = annotateSharding(*model, "paxc", r.cluster->gpus, outputs))
    return llvm::createStringError(inputPath.str() + ": " +
                                   llvm::toString(std::move(err)));
  os << model->SerializeAsString();
  if (!quiet && outputPath != "-")
    llvm::errs() << llvm::formatv(
        "paxc: wrote {0}: {1} of {2} nodes annotated with the sharding of "
        "their outputs on {3} devices (ONNX IR version 11)\n",
        outputPath, nodes, model->graph().node_size(), r.cluster->gpus);
  return llvm::Error::success();
}

} // namespace pax::paxc
