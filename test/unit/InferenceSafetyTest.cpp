//===- InferenceSafetyTest.cpp - ONNX's inference on hostile nodes -------===//
//
// paxc runs ONNX's shape inference on a copy of every model it imports,
// and the inference functions of ONNX 1.12 trust what they read: an
// untyped or absent input, a negative dim or attribute. inferShapesSafely
// sanitizes the copy first. These tests give it one node of every op ONNX
// defines at the opsets paxc imports, with inputs missing, untyped, of odd
// ranks and dims, and attributes of the wrong kind or sign: none may crash.
//
//===----------------------------------------------------------------------===//
#include "frontend/GraphBuilder.h"

#include <onnx/defs/schema.h>

#include <gtest/gtest.h>

#include <set>

#include <sys/wait.h>
#include <unistd.h>

using namespace pax;

namespace {

/// How the node's inputs are declared.
enum class Inputs {
  Untyped,
  Scalar,
  Vector,
  UnknownDims,
  NegativeDims,
  Ints,
  Rank5
};

void declare(onnx::TypeProto &type, Inputs kind) {
  auto &tensor = *type.mutable_tensor_type();
  tensor.set_elem_type(kind == Inputs::Ints ? onnx::TensorProto::INT64
                                            : onnx::TensorProto::FLOAT);
  auto &shape = *tensor.mutable_shape();
  switch (kind) {
  case Inputs::Vector:
  case Inputs::Ints:
    shape.add_dim()->set_dim_value(2);
    break;
  case Inputs::UnknownDims:
    for (int d = 0; d < 3; ++d)
      shape.add_dim();
    break;
  case Inputs::NegativeDims:
    shape.add_dim()->set_dim_value(-1);
    shape.add_dim()->set_dim_value(0);
    break;
  case Inputs::Rank5:
    for (int d = 0; d < 5; ++d)
      shape.add_dim()->set_dim_value(3);
    break;
  default:
    break;
  }
}

/// Every attribute the schema names, set to one odd value of one kind
/// (\p kind in [1, kAttributeKinds)).
constexpr int kAttributeKinds = 9;
void oddAttributes(onnx::NodeProto &n, const onnx::OpSchema &schema, int kind) {
  for (const auto &entry : schema.attributes()) {
    onnx::AttributeProto &a = *n.add_attribute();
    a.set_name(entry.first);
    const int64_t ints[] = {0, 0, -7, 0, -1, 1000000};
    if (kind == 1 || kind == 2 || kind == 5) {
      a.set_type(onnx::AttributeProto::INT);
      a.set_i(ints[kind]);
    } else if (kind == 3 || kind == 4) {
      a.set_type(onnx::AttributeProto::INTS);
      for (int i = 0; kind == 4 && i < 3; ++i)
        a.add_ints(-1);
    } else if (kind == 6) {
      a.set_type(onnx::AttributeProto::TENSOR);
      a.mutable_t();
    } else if (kind == 7) {
      a.set_type(onnx::AttributeProto::STRING);
    } else {
      a.set_type(onnx::AttributeProto::FLOAT);
      a.set_f(-1);
    }
  }
}

/// One node of \p schema's op with \p count inputs declared as \p kind,
/// the last named "" when \p lastAbsent.
onnx::ModelProto oneNode(const onnx::OpSchema &schema, int count, Inputs kind,
                         bool lastAbsent, int attributes) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto *opset = m.add_opset_import();
  opset->set_domain(schema.domain());
  opset->set_version(std::max(schema.SinceVersion(), 7));
  if (!schema.domain().empty()) {
    opset = m.add_opset_import();
    opset->set_version(17);
  }
  onnx::GraphProto &g = *m.mutable_graph();
  onnx::NodeProto &n = *g.add_node();
  n.set_op_type(schema.Name());
  n.set_domain(schema.domain());
  for (int i = 0; i < count; ++i) {
    std::string name =
        lastAbsent && i == count - 1 ? "" : "x" + std::to_string(i);
    n.add_input(name);
    if (kind != Inputs::Untyped && !name.empty()) {
      onnx::ValueInfoProto &vi = *g.add_input();
      vi.set_name(name);
      declare(*vi.mutable_type(), kind);
    }
  }
  if (attributes)
    oddAttributes(n, schema, attributes);
  for (int o = 0; o < std::max(1, schema.min_output()); ++o)
    n.add_output("y" + std::to_string(o));
  return m;
}

/// The schemas a model paxc imports can use: the default domain's from
/// opset 7 (older models are converted first), every other domain's.
std::vector<const onnx::OpSchema *> importableSchemas() {
  static const std::vector<onnx::OpSchema> all =
      onnx::OpSchemaRegistry::get_all_schemas_with_history();
  std::vector<const onnx::OpSchema *> schemas;
  for (const onnx::OpSchema &s : all) {
    if (s.Deprecated())
      continue;
    const onnx::OpSchema *at7 =
        onnx::OpSchemaRegistry::Schema(s.Name(), 7, s.domain());
    if (s.domain().empty() && s.SinceVersion() < 7 &&
        !(at7 && at7->SinceVersion() == s.SinceVersion()))
      continue;
    schemas.push_back(&s);
  }
  return schemas;
}

/// Runs inferShapesSafely on every variant of one node of \p s; how many.
int64_t inferVariants(const onnx::OpSchema &s) {
  const Inputs kinds[] = {
      Inputs::Untyped,      Inputs::Scalar, Inputs::Vector, Inputs::UnknownDims,
      Inputs::NegativeDims, Inputs::Ints,   Inputs::Rank5};
  int formal = int(s.inputs().size());
  std::set<int> counts = {0, s.min_input(), formal, std::min(formal + 1, 8)};
  int64_t models = 0;
  for (int count : counts)
    for (Inputs kind : kinds)
      for (bool lastAbsent : {false, true})
        for (int attributes = 0; attributes < kAttributeKinds; ++attributes) {
          if (lastAbsent && !count)
            continue;
          onnx::ModelProto m = oneNode(s, count, kind, lastAbsent, attributes);
          inferShapesSafely(m, /*dataPropagation=*/true);
          ++models;
        }
  return models;
}

/// Each op in a child process, so that a crash names its op and the rest
/// still run.
TEST(InferenceSafetyTest, NoOpCrashesONNXsInference) {
  std::vector<const onnx::OpSchema *> schemas = importableSchemas();
  ASSERT_GT(schemas.size(), 150u);
  for (const onnx::OpSchema *s : schemas) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0)
      _exit(inferVariants(*s) > 0 ? 0 : 1);
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << s->domain() << "/" << s->Name() << " v" << s->SinceVersion()
        << (WIFSIGNALED(status) ? " crashed ONNX's inference" : " failed");
  }
}

/// A placeholder type the inference did not fill is not reported as a type.
TEST(InferenceSafetyTest, UnfilledPlaceholdersAreDropped) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::NodeProto &n = *m.mutable_graph()->add_node();
  n.set_op_type("Shape");
  n.add_input("undeclared");
  n.add_output("s");
  llvm::StringMap<onnx::TypeProto> types = inferTypes(m);
  EXPECT_FALSE(types.count("undeclared"));
}

} // namespace
