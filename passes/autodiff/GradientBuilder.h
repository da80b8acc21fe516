//===- GradientBuilder.h - What a gradient rule builds with ---------------===//
//
// Internal to passes/autodiff. A rule receives the forward op and the
// gradient of its result, and adds the gradient of each operand that needs
// one through the builder. Backward ops are built over the forward op's
// iteration dims (`over`), with each dim's kind set by the op's result map:
// `par` where the result uses the dim, `red` where it is summed away.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace pax {

/// An operand of a backward op: a value read through a map of the forward
/// op's iteration dims.
struct Read {
  Value *value;
  AccessMap map;
};

class GradientBuilder {
public:
  /// Ops it builds are named `PREFIX/forward-op/what#N`.
  explicit GradientBuilder(Module &m, std::string prefix = "grad")
      : m(m), prefix(std::move(prefix)) {}

  /// The op whose rule is running (names and configurations come from it).
  void setForward(const Op *op) { forward = op; }
  /// Gives \p op the forward op's microbatch (Microbatches.h) and pipeline
  /// stage (passes/sharding/Stages.h), if any: a microbatch's backward runs
  /// with it, on its stage's devices.
  void tagPass(Op *op) const;

  /// Whether operand \p k of the forward op needs a gradient.
  bool needs(unsigned k) const;
  void setNeeds(std::vector<bool> n) { needed = std::move(n); }

  /// A new op of \p kind over the forward op's iteration dims, reading
  /// \p ins, writing one result of \p type through \p out; each dim is `par`
  /// when \p out uses it, `red` otherwise. Named after the forward op and
  /// \p what, with the forward op's configuration.
  Value *over(OpKind kind, llvm::ArrayRef<Read> ins, const AccessMap &out,
              const TensorType &type, llvm::StringRef what,
              AttrMap attrs = {});

  /// A new op of \p kind over \p iters, without operands or results yet,
  /// named after the forward op and \p what; with \p likeForward, over the
  /// forward op's own iteration dims and with its configuration.
  Op *newOp(OpKind kind, llvm::ArrayRef<IterDim> iters, llvm::StringRef what);
  Op *newOpLikeForward(OpKind kind, llvm::StringRef what);

  /// A new elementwise op over \p type's dims (d0, d1, ...), reading each of
  /// \p ins whole (they have \p type's shape) or as a scalar (rank 0).
  Value *elementwise(OpKind kind, llvm::ArrayRef<Value *> ins,
                     const TensorType &type, llvm::StringRef what);

  /// The identity map of the forward op's result 0 over its dims, as
  /// written; and an operand's map.
  const AccessMap &resultMap() const { return forward->results[0].map; }
  const AccessMap &operandMap(unsigned k) const {
    return forward->operands[k].map;
  }

  /// A pad over \p type's dims (d0, d1, ...): \p x read through \p read,
  /// zero where it reads outside \p x.
  Value *padded(Value *x, const AccessMap &read, const TensorType &type,
                llvm::StringRef what);

  /// A scalar constant of element type \p elem.
  Value *constant(double value, DType elem);
  /// A constant tensor of \p type (f32 or f64) holding \p values (row
  /// major), named after the forward op and \p what.
  Value *dense(const TensorType &type, llvm::ArrayRef<double> values,
               llvm::StringRef what);

  /// Gives \p op a replica dim `r` of extent \p replicas (nothing when 1):
  /// the search may then run the whole op on several devices at once
  /// (Op::isReplicaDim), as data-parallel training updates a replicated
  /// weight on every device, or scatters a sparse gradient's gathered rows.
  static void replicate(Op &op, int64_t replicas);
  /// The replica extent of the ops that take one (AutodiffOptions).
  int64_t replicas() const { return replicaCount; }
  void setReplicas(int64_t n) { replicaCount = n; }

  /// Adds \p g, laid out as \p g's op writes it over the forward op's dims
  /// through \p map (the operand's own map), to operand \p k's gradient:
  /// summed over the dims the operand does not have.
  void accumulateOperand(unsigned k, Value *g);

  /// Adds \p g (of \p v's type) to \p v's gradient.
  void accumulate(const Value *v, Value *g);
  /// The gradient of \p v so far, or nullptr.
  Value *gradientOf(const Value *v) const {
    auto it = grads.find(v);
    return it == grads.end() ? nullptr : it->second;
  }

private:
  std::string name(llvm::StringRef what) const;
  /// The identity map over a tensor of rank \p rank (d0, d1, ...).
  static AccessMap identity(unsigned rank);

  Module &m;
  std::string prefix;
  const Op *forward = nullptr;
  std::vector<bool> needed;
  llvm::DenseMap<const Value *, Value *> grads;
  unsigned counter = 0;
  int64_t replicaCount = 1;
};

/// Builds the gradients of the operands of \p op from \p dys, the
/// gradients of its results (nullptr for a result without one); an error
/// when \p op's kind has no rule.
llvm::Error applyGradientRule(GradientBuilder &b, const Op &op,
                              llvm::ArrayRef<Value *> dys);

/// The rule of lstm and gru (RecurrentRule.cpp): backpropagation through
/// time, one result gradient per layer output (nullptr where none).
llvm::Error recurrentRule(GradientBuilder &b, const Op &op,
                          llvm::ArrayRef<Value *> dys);

/// The rule of attention (AttentionRule.cpp): attention_grad_q and
/// attention_grad_kv, recomputing the probabilities from the rows'
/// log-sum-exp.
llvm::Error attentionRule(GradientBuilder &b, const Op &op,
                          llvm::ArrayRef<Value *> dys);

} // namespace pax
