//===- Model.cpp - A small fixed model for harnesses that need one --------===//
#include "test/fuzz/Model.h"

#include "codegen/EmitPlan.h"
#include "frontend/OnnxImporter.h"
#include "passes/sharding/InsertCollectives.h"
#include "passes/sharding/StrategyIO.h"
#include "test/fuzz/Fuzz.h"

#include <cstdlib>

namespace pax::fuzz {

static const char *kModel = R"(
ir_version: 8
opset_import { version: 17 }
graph {
  name: "mlp"
  node { input: "x" input: "W1" output: "h" op_type: "MatMul" name: "fc1" }
  node { input: "h" input: "b1" output: "hb" op_type: "Add" name: "bias1" }
  node { input: "hb" output: "r" op_type: "Relu" name: "relu" }
  node { input: "r" input: "W2" output: "l" op_type: "MatMul" name: "fc2" }
  node { input: "l" output: "y" op_type: "Softmax" name: "softmax"
         attribute { name: "axis" i: -1 type: INT } }
  initializer { name: "W1" dims: 8 dims: 16 data_type: 1
                float_data: [0.5] raw_data: "" }
  input { name: "x" type { tensor_type { elem_type: 1 shape {
    dim { dim_value: 4 } dim { dim_value: 8 } } } } }
  output { name: "y" type { tensor_type { elem_type: 1 shape {
    dim { dim_value: 4 } dim { dim_value: 5 } } } } }
}
)";

static std::unique_ptr<Module> importSmall() {
  // The weights as ConstantOfShape-free initializers, filled by the text.
  std::string text = kModel;
  auto weight = [](const char *name, std::initializer_list<int> dims) {
    std::string s = std::string("  initializer { name: \"") + name + "\"";
    int n = 1;
    for (int d : dims)
      s += " dims: " + std::to_string(d), n *= d;
    s += " data_type: 1";
    for (int i = 0; i < n; ++i)
      s += " float_data: " + std::to_string(0.01 * (i % 17));
    return s + " }\n";
  };
  size_t at = text.find("  initializer");
  size_t end = text.find("\n", text.find("raw_data", at)) + 1;
  text.replace(at, end - at,
               weight("W1", {8, 16}) + weight("b1", {16}) +
                   weight("W2", {16, 5}));
  auto m = importOnnxBytes(scratchDir() + "/small.onnxtxt", text, {});
  if (!m) {
    llvm::errs() << "fuzz: the small model does not import: "
                 << llvm::toString(m.takeError()) << "\n";
    std::abort();
  }
  return std::move(m->module);
}

const Module &smallModule() {
  static std::unique_ptr<Module> m = importSmall();
  return *m;
}

const plan::Plan &smallPlan() {
  static plan::Plan p = [] {
    std::unique_ptr<Module> m = importSmall();
    auto cluster = makeCluster("pase", 4, std::nullopt);
    ShardingOptions o;
    o.configs.devices = 4;
    o.configs.executable = true;
    o.threads = 1;
    auto r = cluster
                 ? buildReport(*m, *cluster, CostMode::Infer, o, std::nullopt)
                 : llvm::Expected<StrategyReport>(cluster.takeError());
    if (!r) {
      llvm::errs() << "fuzz: " << llvm::toString(r.takeError()) << "\n";
      std::abort();
    }
    for (size_t i = 0; i < m->main.ops.size(); ++i)
      m->main.ops[i]->attrs["config"] = std::vector<int64_t>(
          r->strategy.configs[i].begin(), r->strategy.configs[i].end());
    if (auto err = insertCollectives(*m, 4, 4)) {
      llvm::errs() << "fuzz: " << llvm::toString(std::move(err)) << "\n";
      std::abort();
    }
    auto plan = emitPlan(*m, PlanOptions());
    if (!plan) {
      llvm::errs() << "fuzz: " << llvm::toString(plan.takeError()) << "\n";
      std::abort();
    }
    return *plan;
  }();
  return p;
}

} // namespace pax::fuzz
