//===- Module.h - Values, ops, functions and modules of the paxc IR -------===//
#pragma once

#include "ir/AccessMap.h"
#include "ir/Layout.h"
#include "ir/Types.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace pax {

/// Kinds of compute op (see OpKinds.def).
enum class OpKind : uint16_t {
#define PAX_OP(Enum, Text, Family, Flops, Partials) Enum,
#include "ir/OpKinds.def"
};

/// The broad family of an op kind; informative only (reports, kernels).
enum class OpFamily : uint8_t {
  Elementwise,
  Contraction,
  Window,
  Normalization,
  Reduction,
  Layout,
  Lookup,
  Recurrent,
  Attention,
  Scan,
  Collective,
  Opaque,
};

/// How an op's results over blocks of a reduction dim the result drops
/// combine (OpKinds.def): by a sum, or not at all.
enum class PartialCombine : uint8_t { Sum, None };

llvm::StringRef opKindName(OpKind k);
PartialCombine opKindPartials(OpKind k);
OpFamily opKindFamily(OpKind k);
/// Flops per point of the iteration space (a multiply-add counts 2).
unsigned opKindFlopsPerPoint(OpKind k);
std::optional<OpKind> parseOpKind(llvm::StringRef text);

/// An attribute value: integer, float, string, a list of either number, a
/// tensor's layout over devices or a collective's device groups
/// (ir/Layout.h).
using AttrValue =
    std::variant<int64_t, float, std::string, std::vector<int64_t>,
                 std::vector<float>, LayoutAttr, GroupsAttr>;
/// Attributes, sorted by name so that printing is deterministic.
using AttrMap = std::map<std::string, AttrValue, std::less<>>;

class Op;
struct Global;

/// An SSA value: a function argument, an op result, or a global.
class Value {
public:
  enum class Kind : uint8_t { Argument, Result, Global };

  Value(Kind kind, TensorType type) : kind(kind), type(std::move(type)) {}

  Kind kind;
  TensorType type;
  /// Argument name or global symbol; empty for op results.
  std::string name;
  /// The defining op and result index (Kind::Result).
  Op *def = nullptr;
  unsigned index = 0;
  /// The global (Kind::Global).
  Global *global = nullptr;
};

/// Where a global's data comes from.
enum class DataSource : uint8_t {
  Dense,       ///< `dense<[...]>`: the values are in the IR
  Fill,        ///< `fill(v)`: every element equals v
  Initializer, ///< `initializer("name")`: an initializer of the source model
  Input,       ///< `input("name")`: a graph input fed at run time
};

/// The global that counts training steps for random ops (an int64 scalar,
/// fill 0): random_uniform reads it, a training step's updates add one.
inline constexpr const char *kRngStepName = "rng/step";

/// A module-level tensor: a parameter (a weight) or a constant.
struct Global {
  explicit Global(TensorType type) : value(Value::Kind::Global, type) {
    value.global = this;
  }
  /// True for weights (trainable parameters); false for masks, tables and
  /// other constants.
  bool isParameter = false;
  DataSource source = DataSource::Fill;
  Value value;
  /// DataSource::Dense: the elements, little-endian, dtype-sized. An
  /// Initializer of one element may hold its value here too, as imported
  /// (not printed): what passes fold (a scale, a mask's fill).
  std::vector<uint8_t> bytes;
  /// DataSource::Fill: the value of every element.
  double fill = 0;
  /// DataSource::Initializer / Input: the tensor's name in the source model.
  std::string ref;

  const std::string &name() const { return value.name; }
};

/// The value of a constant scalar (a global of one f32 or f64 element that
/// is not a parameter, its value in the IR), if \p v is one.
std::optional<double> scalarConstant(const Value *v);

/// An operand: a value and how the op's iteration dims index it.
struct Operand {
  Value *value = nullptr;
  AccessMap map;
};

/// A result: an owned value and the access map that writes it.
struct Result {
  std::unique_ptr<Value> value;
  AccessMap map;
};

/// A compute op: `%y = compute "matmul" iter [...] ins(...) outs(...)`.
class Op {
public:
  explicit Op(OpKind kind) : kind(kind) {}

  OpKind kind;
  llvm::SmallVector<IterDim, 6> iters;
  llvm::SmallVector<Operand, 4> operands;
  llvm::SmallVector<Result, 1> results;
  AttrMap attrs;
  /// How many ops of the program before the graph-level fusions this op
  /// stands for: 1, plus each op a fusion merged into it (attention's
  /// chain, a GELU's group, a bias add, the copies read through). Not part
  /// of the IR text; plans carry it for --plan-stats.
  unsigned sources = 1;

  /// Adds a result of \p type written through \p map; returns its value.
  Value *addResult(TensorType type, AccessMap map);
  /// Index of the iteration dim called \p name, or -1.
  int findIter(llvm::StringRef name) const;
  /// The source-model node name (attribute `name`), or "".
  llvm::StringRef name() const;
  /// Integer attribute \p key, or \p dflt when absent.
  int64_t intAttr(llvm::StringRef key, int64_t dflt) const;
  /// Numeric attribute \p key (a float, or an integer converted), or
  /// \p dflt when absent or not a number.
  double floatAttr(llvm::StringRef key, double dflt) const;
  /// Forward FLOPs of the whole op: points of the iteration space (dims
  /// indexed only by lookups, and replica dims, excluded) times the kind's
  /// flops per point.
  double flops() const;
  /// True when no access map uses iteration dim \p d: a replica dim. Split
  /// k ways, k devices each compute the whole op (every tensor is
  /// replicated along it); the kernels walk it once.
  bool isReplicaDim(unsigned d) const;
  /// True when the op sums over a dim (of more than one point) that its
  /// results drop: a contraction, a convolution, a reduction. Such results
  /// are the dearest to compute again.
  bool reducesAway() const;
};

/// A function: arguments, ops in topological order, returned values.
struct Func {
  std::string name = "main";
  std::vector<std::unique_ptr<Value>> args;
  std::vector<std::unique_ptr<Op>> ops;
  std::vector<Value *> returns;
  /// Names of the results (the source model's output names).
  std::vector<std::string> returnNames;

  Value *addArg(std::string name, TensorType type);
  Op *addOp(OpKind kind);
  /// How many times each value is read: by an op's operand, or returned.
  llvm::DenseMap<const Value *, unsigned> countUses() const;
};

/// A module: globals and one function, `@main`.
struct Module {
  std::string name = "model";
  AttrMap attrs;
  std::vector<std::unique_ptr<Global>> globals;
  Func main;

  Global *addGlobal(std::string name, TensorType type);
  /// The global called \p name, or nullptr.
  Global *findGlobal(llvm::StringRef name) const;
  /// Whether `@main` is a training step: it returns updates `update/NAME`
  /// (its weights change from step to step).
  bool isTrainingStep() const;
};

} // namespace pax
