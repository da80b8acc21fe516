//===- StepFlags.cpp - paxc's training step options -----------------------===//
#include "tools/paxc/StepFlags.h"

#include "tools/paxc/Rewrites.h"

namespace cl = llvm::cl;
using pax::paxc::trainCategory;

cl::OptionCategory pax::paxc::trainCategory(
    "paxc training step options (--mode=train with --loss)");
static cl::opt<std::string> optimizerKind(
    "optimizer", cl::desc("The parameter update of a training step"),
    cl::value_desc("sgd|adam|adamw"), cl::init("sgd"), cl::cat(trainCategory));
static cl::opt<double> learningRate("lr", cl::desc("Learning rate"),
                                    cl::init(0.01), cl::cat(trainCategory));
static cl::opt<double> momentum("momentum",
                                cl::desc("SGD momentum (torch's, dampening 0)"),
                                cl::init(0), cl::cat(trainCategory));
static cl::opt<bool> nesterov("nesterov", cl::desc("SGD: Nesterov momentum"),
                              cl::cat(trainCategory));
static cl::opt<double> weightDecay(
    "weight-decay",
    cl::desc("Weight decay (added to the gradient; decoupled for adamw)"),
    cl::init(0), cl::cat(trainCategory));
static cl::opt<double> beta1("beta1", cl::desc("Adam's beta1"), cl::init(0.9),
                             cl::cat(trainCategory));
static cl::opt<double> beta2("beta2", cl::desc("Adam's beta2"), cl::init(0.999),
                             cl::cat(trainCategory));
static cl::opt<double> adamEps("adam-eps", cl::desc("Adam's epsilon"),
                               cl::init(1e-8), cl::cat(trainCategory));
static cl::opt<double> clipNorm(
    "clip-norm",
    cl::desc("Clip the gradients' global norm, after aggregation (0: none)"),
    cl::init(0), cl::cat(trainCategory));
static cl::opt<std::string> lossScale(
    "loss-scale",
    cl::desc("Loss scaling: dynamic (the loss's gradient starts at a scale S; "
             "a step whose gradients hold an inf or NaN is skipped and S "
             "halves; S doubles after --loss-scale-interval clean steps), "
             "none, or auto (default: dynamic with --precision=fp16)"),
    cl::value_desc("auto|dynamic|none"), cl::init("auto"),
    cl::cat(trainCategory));
static cl::opt<std::string> gradReduce(
    "grad-reduce",
    cl::desc("With --precision=bf16|fp16: sum the weights' gradients across "
             "devices in the low precision (low, default: half the bytes of "
             "fp32) or in fp32 (the products of the backward pass write fp32 "
             "gradients)"),
    cl::value_desc("low|fp32"), cl::init("low"), cl::cat(trainCategory));
static cl::opt<double> lossScaleInit("loss-scale-init",
                                     cl::desc("The first loss scale"),
                                     cl::init(65536), cl::cat(trainCategory));
static cl::opt<int64_t> lossScaleInterval(
    "loss-scale-interval",
    cl::desc("Clean steps after which the loss scale doubles"), cl::init(2000),
    cl::cat(trainCategory));

namespace pax::paxc {

/// The optimizer of a training step, from the flags.
llvm::Expected<OptimizerOptions> optimizerFromFlags(int64_t replicas,
                                                    const Global *lossScale) {
  OptimizerOptions opt;
  auto kind = parseOptimizerKind(optimizerKind);
  if (!kind)
    return llvm::createStringError("--optimizer=" + optimizerKind +
                                   ": expected sgd, adam or adamw");
  opt.kind = *kind;
  opt.lr = learningRate;
  opt.replicas = replicas;
  opt.momentum = momentum;
  opt.nesterov = nesterov;
  opt.weightDecay = weightDecay;
  opt.beta1 = beta1;
  opt.beta2 = beta2;
  opt.eps = adamEps;
  opt.clipNorm = clipNorm;
  opt.lossScale = lossScale;
  opt.growthInterval = lossScaleInterval;
  return opt;
}

/// --loss-scale and, where it scales, --loss-scale-init and
/// --loss-scale-interval checked.
static llvm::Error checkLossScaleValues() {
  if (lossScale != "auto" && lossScale != "dynamic" && lossScale != "none")
    return llvm::createStringError("--loss-scale=" + lossScale +
                                   ": expected auto, dynamic or none");
  if (lossScale != "none" && !(lossScaleInit > 0))
    return llvm::createStringError("--loss-scale-init must be positive");
  if (lossScale != "none" && lossScaleInterval < 1)
    return llvm::createStringError("--loss-scale-interval must be at least 1");
  return llvm::Error::success();
}

/// Whether a training step scales its loss (--loss-scale; auto: with
/// --precision=fp16).
llvm::Expected<bool> lossScaling(bool trainingStep) {
  if (auto err = checkLossScaleValues())
    return err;
  if (lossScale == "auto")
    return trainingStep && lowPrecision() == DType::F16;
  if (lossScale == "dynamic" && !trainingStep)
    return llvm::createStringError(
        "--loss-scale=dynamic scales a training step's loss (--mode=train "
        "with --loss)");
  return lossScale == "dynamic";
}

double lossScaleInitial() { return lossScaleInit; }

llvm::Error checkStepFlagValues() {
  auto opt = optimizerFromFlags(1, nullptr);
  if (!opt)
    return opt.takeError();
  if (auto err = checkOptimizerOptions(*opt))
    return err;
  if (auto err = checkLossScaleValues())
    return err;
  if (gradReduce != "low" && gradReduce != "fp32")
    return llvm::createStringError("--grad-reduce=" + gradReduce +
                                   ": expected low or fp32");
  return llvm::Error::success();
}

/// --grad-reduce: whether the gradients are summed in fp32.
llvm::Expected<bool> fp32Gradients() {
  if (gradReduce != "low" && gradReduce != "fp32")
    return llvm::createStringError("--grad-reduce=" + gradReduce +
                                   ": expected low or fp32");
  if (gradReduce == "fp32" && !lowPrecision())
    return llvm::createStringError(
        "--grad-reduce=fp32 sums a mixed-precision step's gradients in fp32; "
        "give --precision=bf16 or fp16");
  return gradReduce == "fp32";
}

} // namespace pax::paxc
