//===- Importer.h - Graph walk and the per-node context of the importer ---===//
//
// Internal to the frontend. The Importer walks an ONNX graph in topological
// order; for each node it calls the node's importer (OnnxOps.def) with a
// NodeContext, which gives typed access to inputs, constants and attributes,
// and builds IR ops. Ops whose inputs are all constants are folded.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "frontend/ConstTensor.h"
#include "frontend/OnnxImporter.h"

#include "ir/Module.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Error.h"

#include <onnx/onnx_pb.h>

#include <optional>

namespace pax {

class Importer;

/// What the importer knows about one ONNX tensor name.
struct Slot {
  TensorType type;
  /// The IR value, once something needed it as an operand.
  Value *value = nullptr;
  /// Known values (shape tensors, small initializers, folded results).
  std::optional<ConstTensor> constant;
  /// An initializer whose data stays in the model (named by this), possibly
  /// seen through a reshape.
  std::string initializer;
  /// A graph input that carries a weight (fed at run time).
  std::string weightInput;
  /// Produced by a computation on constants: never a parameter.
  bool computed = false;
  /// A constant a node writes (ConstantOfShape, Constant) that feeds a
  /// weight slot: it stands in for a weight.
  bool standIn = false;
};

/// Everything an op importer may ask about the node it imports.
class NodeContext {
public:
  NodeContext(Importer &imp, const onnx::NodeProto &node, int index)
      : imp(imp), node(node), index(index) {}

  const onnx::NodeProto &proto() const { return node; }
  llvm::StringRef opType() const { return node.op_type(); }
  /// The default-domain opset the model imports.
  int opset() const;
  /// The folder external data is relative to.
  std::string modelDir() const;
  /// The type of output \p i as the model's value_info or ONNX's own shape
  /// inference give it (for ops paxc has no importer for), if known.
  std::optional<TensorType> inferredOutputType(unsigned i) const;
  /// When --batch replaced a static batch dim: (old batch, new batch).
  std::optional<std::pair<int64_t, int64_t>> rebatch() const;

  // --- Inputs ---------------------------------------------------------------
  unsigned numInputs() const { return node.input_size(); }
  /// True when input \p i is present (optional inputs may be "" or absent).
  bool hasInput(unsigned i) const {
    return int(i) < node.input_size() && !node.input(i).empty();
  }
  const TensorType &type(unsigned i) const;
  llvm::ArrayRef<int64_t> shape(unsigned i) const { return type(i).shape; }
  unsigned rank(unsigned i) const { return type(i).rank(); }
  /// The input's values when known, else nullptr.
  const ConstTensor *constant(unsigned i) const;
  /// The input's values; an error naming \p what when they are not known.
  llvm::Expected<const ConstTensor *> requireConstant(unsigned i,
                                                      llvm::StringRef what);
  /// requireConstant of one value (a scalar or a one-element tensor); an
  /// error naming \p what otherwise.
  llvm::Expected<const ConstTensor *> requireScalar(unsigned i,
                                                    llvm::StringRef what);
  /// The input as an IR value.
  Value *value(unsigned i);
  /// The global step counter random ops read (`rng/step`, an int64 scalar
  /// that starts at 0), created on first use.
  Value *rngStep();
  /// The seed of the random ops (`--seed`).
  uint64_t seed() const;

  // --- Attributes -----------------------------------------------------------
  const onnx::AttributeProto *attr(llvm::StringRef name) const;
  int64_t attrInt(llvm::StringRef name, int64_t dflt) const;
  float attrFloat(llvm::StringRef name, float dflt) const;
  std::string attrString(llvm::StringRef name, llvm::StringRef dflt) const;
  std::vector<int64_t> attrInts(llvm::StringRef name) const;
  std::vector<float> attrFloats(llvm::StringRef name) const;

  // --- Results --------------------------------------------------------------
  /// Creates an op named after the node (not yet part of the function).
  std::unique_ptr<Op> newOp(OpKind kind);
  /// Adds \p op to the function, or folds it when every operand is a known
  /// constant; then binds the node's outputs to the op's results in order.
  /// With \p bound, only the first \p bound results are outputs of the node
  /// (the others are the op's own, as attention's log-sum-exp).
  llvm::Error finish(std::unique_ptr<Op> op,
                     std::optional<unsigned> bound = std::nullopt);
  /// Adds \p op, an intermediate step of the node (bound to no output),
  /// to the function; returns its first result.
  Value *emit(std::unique_ptr<Op> op);
  /// A module constant holding \p t (a fill where its values are all
  /// equal), named after the node and \p suffix: an operand of the node's
  /// intermediate steps.
  Value *constantValue(ConstTensor t, llvm::StringRef suffix);
  /// Binds output \p i to known values.
  void setConstant(unsigned i, ConstTensor t);
  /// Binds output \p i to the same data as input \p input (Identity).
  void forward(unsigned i, unsigned input);
  unsigned numOutputs() const { return node.output_size(); }

  // --- Diagnostics ----------------------------------------------------------
  /// An error that names the model, the node and its op type.
  llvm::Error error(const llvm::Twine &msg) const;
  /// A warning that names the node.
  void warn(const llvm::Twine &msg) const;
  /// Normalizes axis \p axis against \p rank; an error when out of range.
  llvm::Expected<unsigned> axis(int64_t axis, unsigned rank,
                                llvm::StringRef what = "axis") const;

private:
  Importer &imp;
  const onnx::NodeProto &node;
  int index;
};

/// Imports one node; set up per op type in OnnxOps.def.
using OpImportFn = llvm::Error (*)(NodeContext &ctx);

class Importer {
public:
  Importer(llvm::StringRef path, const onnx::ModelProto &model,
           const ImportOptions &options);

  llvm::Expected<ImportResult> run();

private:
  friend class NodeContext;

  llvm::Error declareInputs();
  llvm::Error declareInitializers();
  llvm::Error importNodes();
  /// Records in \p producer the node that writes each tensor; an error when
  /// two nodes write one, or a node writes a graph input or initializer.
  llvm::Error collectProducers(llvm::StringMap<int> &producer) const;
  /// Counts in \p pending the inputs each node reads from other nodes and
  /// lists in \p users the nodes that read each node's outputs; an error
  /// when a node reads a tensor nothing defines.
  llvm::Error collectUsers(const llvm::StringMap<int> &producer,
                           std::vector<int> &pending,
                           std::vector<std::vector<int>> &users) const;
  /// Imports node \p i with its op's importer and checks that it produced
  /// each of its outputs.
  llvm::Error importNode(int i);
  llvm::Error bindOutputs();
  void classifyWeightInputs();
  void removeUnusedGlobals();
  llvm::Error checkGraphInputs();

  llvm::Expected<std::vector<int64_t>>
  inputShape(const onnx::ValueInfoProto &vi, bool isData,
             std::vector<std::string> &unbound);
  Slot *slot(llvm::StringRef name);
  Value *materialize(Slot &s, llvm::StringRef name);
  /// Marks the parameters: the float initializers, weight inputs and weight
  /// stand-ins (two or more elements, not computed by paxc) that a graph
  /// output depends on through differentiable operands, where they meet
  /// activations other than as part of a table computed with constants
  /// (rotary frequencies); batch norm's running statistics are not. Each is
  /// one global, so it counts once.
  void markParameters();
  /// Folds \p op when all operands are known; the results, or std::nullopt.
  std::optional<std::vector<Slot>> tryFold(const Op &op);
  std::string nodeLabel(const onnx::NodeProto &node, int index) const;
  const llvm::StringMap<TensorType> &inferredTypes();

  std::string path;
  const onnx::ModelProto &model;
  const ImportOptions &options;
  int opsetVersion = 0;
  /// The static batch dim --batch replaced, if any.
  std::optional<int64_t> originalBatch;
  std::unique_ptr<Module> module;
  Global *rngStep = nullptr;
  std::vector<std::string> warnings;
  llvm::StringMap<Slot> slots;
  llvm::DenseMap<const Value *, Slot *> slotOf;
  llvm::StringSet<> weightInputs;
  /// Symbolic dims the graph inputs name (to flag an unused --dim).
  llvm::StringSet<> usedDims;
  /// Globals made from trainable leaves, and from computations on
  /// constants (see markParameters).
  llvm::DenseSet<const Global *> trainableGlobals, computedGlobals;
  /// The global of each initializer and weight input, by "initializer:" or
  /// "input:" and its name: a tensor the graph names twice (an Identity, a
  /// shared layer) is one global.
  llvm::StringMap<Global *> sourceGlobals;
  /// Outputs of ConstantOfShape / Constant nodes that stand in for weights.
  llvm::StringSet<> weightStandIns;
  /// Types from value_info and ONNX shape inference, computed on first need.
  std::optional<llvm::StringMap<TensorType>> inferred;
};

/// Imports a node paxc has no importer for as a replicated `opaque` op, when
/// its output types are known; otherwise an error.
llvm::Error importOpaque(NodeContext &ctx);

} // namespace pax
