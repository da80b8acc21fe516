//===- Rewrites.cpp - paxc's graph-level rewrites after import ------------===//
#include "tools/paxc/Rewrites.h"

#include "passes/Autocast.h"
#include "passes/ChannelsLast.h"
#include "passes/FoldCopies.h"
#include "passes/FuseAttention.h"
#include "passes/FuseBias.h"
#include "passes/FuseGelu.h"

#include "llvm/Support/WithColor.h"

namespace cl = llvm::cl;

namespace pax::paxc {
namespace {

cl::opt<bool> fuseBiasOps(
    "fuse-bias", cl::init(true),
    cl::desc("Make each matmul whose only reader is an add (a bias, a "
             "residual) one gemm that adds it, the product never stored "
             "(default true; =false keeps the pair)"),
    cl::cat(paxcCategory));

cl::opt<bool> foldCopiesFlag(
    "fold-copies", cl::init(true),
    cl::desc("Read through copies (pax-fold-copies): identity reshapes, "
             "transposes and slices removed, a copy of a copy (a reshape "
             "then a transpose) one copy reading the first one's input; "
             "in an inference, attention reading Q, K and V and writing "
             "its output through the copies and splits around it, and "
             "matrix products reading through transposes "
             "(default true; =false keeps every copy; not with "
             "--emit=onnx-sharded)"),
    cl::cat(paxcCategory));

cl::opt<bool> channelsLastFlag(
    "channels-last", cl::init(false),
    cl::desc("Store the activations around 2-D convolutions [n, h, w, c] "
             "(pax-channels-last), where the CPU and cuDNN convolutions are "
             "fastest; inference only (a training step, and "
             "--emit=onnx-sharded, keep the model's layout)"),
    cl::cat(paxcCategory));

cl::opt<bool> fuseGeluOps(
    "fuse-gelu", cl::init(true),
    cl::desc("Replace each group of elementwise ops that computes a GELU "
             "(erf's or tanh's) of one value by one gelu op (default true; "
             "=false keeps the group)"),
    cl::cat(paxcCategory));

cl::opt<bool> fuseAttentionOps(
    "fuse-attention", cl::init(true),
    cl::desc("Replace each scaled-dot-product attention chain (Q.K^T, "
             "scales, masks, softmax, P.V) by one attention op whose scores "
             "are never stored (default true; =false keeps the chain)"),
    cl::cat(paxcCategory));

cl::opt<std::string> precision(
    "precision", cl::init("fp32"),
    cl::desc("What the plan computes in: fp32 (default), tf32 (fp32 tensors, "
             "products on TF32 tensor cores where the backend has them), "
             "bf16 or fp16 (mixed precision: products, convolutions and "
             "attention in the low precision with fp32 accumulation; "
             "reductions, softmaxes, norms, losses and the optimizer in fp32; "
             "a training step keeps fp32 master weights)"),
    cl::value_desc("fp32|tf32|bf16|fp16"), cl::cat(paxcCategory));

/// The copies, attention's and products' folds, and channels-last.
void foldAndLayout(Module &m, const RewriteContext &c) {
  if (foldCopiesFlag && !c.onnxSharded)
    foldCopies(m, {/*inference=*/!c.backward});
  if (!channelsLastFlag)
    return;
  if (!c.trainMode && !c.onnxSharded)
    channelsLast(m);
  else if (!c.quiet)
    llvm::WithColor::warning(llvm::errs(), "paxc")
        << "--channels-last applies to inference plans; "
        << (c.trainMode ? "a training step" : "--emit=onnx-sharded")
        << " keeps the model's layout\n";
}

/// --precision applied to \p m.
llvm::Error applyPrecision(Module &m, const RewriteContext &c) {
  if (precision == "fp32")
    return llvm::Error::success();
  m.attrs["precision"] = std::string(precision);
  if (precision == "tf32")
    return llvm::Error::success();
  auto low = parseLowPrecision(precision);
  if (!low || precision == "f16")
    return llvm::createStringError(
        "--precision=" + precision +
        ": unknown precision (expected fp32, tf32, bf16 or fp16)");
  if (c.onnxSharded)
    return llvm::createStringError(
        "--precision=" + precision +
        " changes the model's types; --emit=onnx-sharded keeps them (use "
        "--precision=fp32)");
  autocast(m, {*low, /*masterWeights=*/c.backward, c.replicas});
  return llvm::Error::success();
}

} // namespace

llvm::Error rewriteImported(Module &m, const RewriteContext &c) {
  if (fuseAttentionOps)
    fuseAttention(m);
  if (fuseGeluOps)
    fuseGelu(m);
  if (fuseBiasOps)
    fuseBias(m);
  foldAndLayout(m, c);
  return applyPrecision(m, c);
}

std::optional<DType> lowPrecision() {
  if (precision == "bf16")
    return DType::BF16;
  if (precision == "fp16")
    return DType::F16;
  return std::nullopt;
}

} // namespace pax::paxc
