//===- Kernels.cpp - The kernels of a plan's computes ---------------------===//
#include "codegen/plan/Kernels.h"

#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/Twine.h"

namespace pax::plan {

std::optional<KernelId> parseKernelId(llvm::StringRef name) {
#define PAX_KERNEL(Id, Name, Description)                                      \
  if (name == Name)                                                            \
    return KernelId::Id;
#include "codegen/plan/Kernels.def"
  return std::nullopt;
}

llvm::StringRef kernelName(KernelId k) {
  switch (k) {
#define PAX_KERNEL(Id, Name, Description)                                      \
  case KernelId::Id:                                                           \
    return Name;
#include "codegen/plan/Kernels.def"
  }
  return "?";
}

llvm::StringRef kernelDescription(KernelId k) {
  switch (k) {
#define PAX_KERNEL(Id, Name, Description)                                      \
  case KernelId::Id:                                                           \
    return Description;
#include "codegen/plan/Kernels.def"
  }
  return "?";
}

std::optional<KernelId> kernelForKind(llvm::StringRef kind) {
  using K = KernelId;
  return llvm::StringSwitch<std::optional<K>>(kind)
      .Cases("matmul", "gemm", K::Gemm)
      .Case("conv", K::Conv2D)
      .Cases("max_pool", "average_pool", K::Pool2D)
      .Case("lrn", K::Lrn)
      .Case("batch_norm", K::BatchNorm)
      .Cases("instance_norm", "layer_norm", "rms_norm", K::NormRows)
      .Cases("softmax", "log_softmax", K::SoftmaxRows)
      .Cases("lstm", "gru", K::Recurrent)
      .Cases("lstm_grad", "gru_grad", K::RecurrentGrad)
      .Cases("attention", "attention_grad_q", "attention_grad_kv", K::Attention)
      .Case("cum_sum", K::Scan)
      .Case("top_k", K::TopK)
      // Elementwise.
      .Cases("add", "sub", "mul", "div", "pow", K::Pointwise)
      .Cases("max", "min", "sum", "mean", "where", K::Pointwise)
      .Cases("equal", "less", "less_or_equal", "greater", K::Pointwise)
      .Cases("greater_or_equal", "and", "or", "xor", "not", K::Pointwise)
      .Cases("relu", "leaky_relu", "prelu", "elu", "selu", K::Pointwise)
      .Cases("celu", "sigmoid", "hard_sigmoid", "hard_swish", K::Pointwise)
      .Cases("softplus", "softsign", "gelu", "mish", "tanh", K::Pointwise)
      .Case("gelu_grad", K::Pointwise)
      .Cases("erf", "exp", "log", "sqrt", "reciprocal", K::Pointwise)
      .Cases("neg", "abs", "sign", "floor", "ceil", K::Pointwise)
      .Cases("round", "cos", "sin", "clip", "cast", K::Pointwise)
      .Cases("trilu", "is_nan", "is_inf", "mod", K::Pointwise)
      .Cases("bit_shift_left", "bit_shift_right", K::Pointwise)
      .Cases("tan", "asin", "acos", "atan", "sinh", K::Pointwise)
      .Cases("cosh", "asinh", "acosh", "atanh", K::Pointwise)
      // Reductions.
      .Cases("reduce_sum", "reduce_mean", "reduce_max", "reduce_min", K::Reduce)
      .Cases("reduce_prod", "reduce_l1", "reduce_l2", "reduce_sum_square",
             K::Reduce)
      .Cases("reduce_log_sum_exp", "arg_max", "arg_min", K::Reduce)
      // Data movement.
      .Cases("reshape", "transpose", "concat", "split", "slice", K::Copy)
      .Cases("expand", "pad", "tile", "gather", K::Copy)
      .Case("scatter_add", K::ScatterAdd)
      .Case("random_uniform", K::Random)
      .Default(std::nullopt);
}

bool kernelTakesKind(KernelId k, llvm::StringRef kind) {
  return kernelForKind(kind) == k;
}

llvm::Expected<KernelId> computeKernel(const Compute &c) {
  auto bad = [&](const llvm::Twine &msg) {
    return llvm::createStringError("compute '" + c.name() + "' (" + c.kind() +
                                   "): " + msg);
  };
  std::optional<KernelId> k = parseKernelId(c.kernel());
  if (!k) {
    if (c.kernel().empty())
      return bad("no kernel runs this kind");
    return bad("unknown kernel '" + c.kernel() + "'");
  }
  if (!kernelTakesKind(*k, c.kind()))
    return bad("kernel '" + c.kernel() + "' does not run this kind");
  return *k;
}

} // namespace pax::plan
