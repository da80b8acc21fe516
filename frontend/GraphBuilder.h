//===- GraphBuilder.h - ONNX nodes appended to a graph before import ------===//
//
// The rewrites paxc makes on an ONNX graph before it imports it (the
// training loss, batch statistics) append ordinary ONNX nodes in the model's
// opset, so everything downstream sees ops it already knows. GraphBuilder
// names every new value freshly (under a prefix) and writes each node in the
// form the opset asks for (axes as attributes or as inputs).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Error.h"

#include <onnx/onnx_pb.h>

#include <optional>
#include <string>
#include <vector>

namespace pax {

class GraphBuilder {
public:
  /// Appends to \p g, whose default-domain opset is \p opset; new names
  /// start with \p prefix.
  GraphBuilder(onnx::GraphProto &g, int64_t opset, std::string prefix);

  /// The prefix of the names from now on.
  void setPrefix(std::string p) { prefix = std::move(p); }

  /// A name no value of the graph has yet, from \p base.
  std::string fresh(llvm::StringRef base);
  /// As fresh(), under another prefix.
  std::string fresh(llvm::StringRef base, llvm::StringRef prefix);

  /// Renames the value \p from, written by a node this builder added, and
  /// its readers among those nodes; an empty \p to (an output the model
  /// leaves out) keeps it.
  std::string rename(const std::string &from, const std::string &to);

  /// A node of \p type on \p inputs with one fresh output.
  onnx::NodeProto &node(llvm::StringRef type,
                        llvm::ArrayRef<std::string> inputs);
  /// node()'s output.
  std::string apply(llvm::StringRef type, llvm::ArrayRef<std::string> inputs) {
    return node(type, inputs).output(0);
  }

  static void intAttr(onnx::NodeProto &n, llvm::StringRef name, int64_t v);
  static void intsAttr(onnx::NodeProto &n, llvm::StringRef name,
                       llvm::ArrayRef<int64_t> v);

  /// \p x cast to ONNX element type \p elem.
  std::string cast(const std::string &x, int32_t elem);
  /// An int64 constant of shape [values.size()], or a scalar: a Constant
  /// node, so that its values live in the IR (the runtime reads
  /// initializers from the model file, which does not have this one).
  std::string int64s(llvm::ArrayRef<int64_t> values, bool scalar);
  /// A scalar of element type \p elem (an ONNX TensorProto data type) with
  /// the value \p v: a float constant cast to \p elem.
  std::string scalar(double v, int32_t elem);
  /// A Constant node holding \p t (as int64s() says why not an
  /// initializer).
  std::string constant(const onnx::TensorProto &t);

  /// `x` with new axes of size 1 at \p axes (of the result).
  std::string unsqueeze(const std::string &x, llvm::ArrayRef<int64_t> axes);
  /// A reduction of \p x over \p axes (every axis when empty).
  std::string reduce(llvm::StringRef type, const std::string &x,
                     llvm::ArrayRef<int64_t> axes, bool keepdims);
  /// A reduction of every axis of \p x to a scalar.
  std::string reduceAll(llvm::StringRef type, const std::string &x) {
    return reduce(type, x, {}, false);
  }

private:
  onnx::GraphProto &g;
  int64_t opset;
  std::string prefix;
  llvm::StringSet<> used;
};

/// Replaces, in place and in order, each node of \p model's graph that
/// \p match takes by the nodes \p build appends for it (node, its index, a
/// builder on a graph of its own, prefixed with the node's name, whose
/// last node must write the node's outputs; and the graph's types from
/// inferTypes, computed once, only where a node matches). A matched node
/// without its first input or without any output is an error naming
/// \p path and the node; the first error stops it, the graph unchanged.
llvm::Error rewriteNodes(
    llvm::StringRef path, onnx::ModelProto &model, int64_t opset,
    llvm::function_ref<bool(const onnx::NodeProto &)> match,
    llvm::function_ref<llvm::Error(const onnx::NodeProto &, int, GraphBuilder &,
                                   const llvm::StringMap<onnx::TypeProto> &)>
        build);

/// rewriteNodes of the default domain's nodes of type \p opType, each
/// built by \p build(builder, node, types, where) (where: nodeWhere).
llvm::Error rewriteOpType(
    llvm::StringRef path, onnx::ModelProto &model, int64_t opset,
    llvm::StringRef opType,
    llvm::function_ref<llvm::Error(GraphBuilder &, const onnx::NodeProto &,
                                   const llvm::StringMap<onnx::TypeProto> &,
                                   const std::string &)>
        build);

/// \p n's attribute \p name, or null.
const onnx::AttributeProto *findAttribute(const onnx::NodeProto &n,
                                          llvm::StringRef name);

/// \p t's values as doubles (float, double or integer tensors); none where
/// it cannot be read.
std::optional<std::vector<double>> constantValues(const onnx::TensorProto &t);

/// The constant input \p i of \p n as doubles; none where absent or empty;
/// an error naming \p what and \p where when it is computed at run time.
llvm::Expected<std::optional<std::vector<double>>>
constantInput(const onnx::GraphProto &g, const onnx::NodeProto &n, int i,
              llvm::StringRef what, const std::string &where);

/// \p name's static shape in \p types, or an error naming \p where.
llvm::Expected<std::vector<int64_t>>
staticShape(const llvm::StringMap<onnx::TypeProto> &types,
            const std::string &name, const std::string &where);

/// \p name's element type in \p types (an ONNX TensorProto data type; 0
/// when unknown).
int32_t elemOf(const llvm::StringMap<onnx::TypeProto> &types,
               const std::string &name);

/// The values of \p name in \p g where they follow from constants and
/// static shapes alone (a Resize's sizes cut from Shape(x) as exporters
/// write them): constants, Shape of a statically shaped value (\p types),
/// and Gather, Slice, Concat, Unsqueeze, Squeeze, Reshape, Identity, Cast,
/// Add, Sub, Mul, Div, Max, Min, Neg, Relu, Floor, Ceil, the comparisons,
/// And, Or and Not of such 1-D or scalar values (booleans as 1 and 0); none
/// otherwise.
std::optional<std::vector<double>>
shapeValues(const onnx::GraphProto &g, const std::string &name,
            const llvm::StringMap<onnx::TypeProto> &types);

/// The most elements a constant built while importing may hold (Range's
/// values, Hardmax's and EyeLike's tables, Resize's taps).
inline constexpr int64_t kMaxBuiltElements = int64_t(1) << 24;

/// An error naming \p where unless a constant of \p dims (each at least 0)
/// holds at most kMaxBuiltElements elements.
llvm::Error checkBuiltSize(const std::string &where,
                           llvm::ArrayRef<double> dims);

/// "PATH: node 'NAME' (OpType)" (node #INDEX when unnamed), as errors
/// name a node.
std::string nodeWhere(llvm::StringRef path, const onnx::NodeProto &n,
                      int index);

/// The tensor the constant \p name of \p g holds (an initializer or a
/// Constant node's value), or null.
const onnx::TensorProto *findConstant(const onnx::GraphProto &g,
                                      const std::string &name);

/// The type of every value of \p model's graph that its declarations or
/// ONNX's shape inference (on a copy) give: inputs, initializers, node
/// outputs, graph outputs. Values whose type is unknown are missing.
llvm::StringMap<onnx::TypeProto> inferTypes(const onnx::ModelProto &model);

/// The types \p model declares: its initializers', inputs', value_info's
/// and outputs'.
llvm::StringMap<onnx::TypeProto> typesIn(const onnx::ModelProto &model);

/// ONNX's shape inference on \p copy (a copy of a model: nodes ONNX's
/// inference cannot take safely are removed from it first, convolutions
/// given the kernel_shape of their weights); never throws.
void inferShapesSafely(onnx::ModelProto &copy, bool dataPropagation);

} // namespace pax
