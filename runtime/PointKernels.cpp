//===- PointKernels.cpp - Describing computes for the point kernels -------===//
#include "runtime/PointKernels.h"

#include "runtime/PointKernelsHost.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/Reduction.h"
#include "runtime/cpu/ScalarOps.h"

#include "llvm/Support/FormatVariadic.h"

namespace pax::runtime {

namespace {

/// Fills \p g's operands from \p p (compiled maps, dtypes, buffers); an
/// error when the compute has more operands than the kernel takes.
llvm::Error fillOperands(const Prepared &p, Generic &g) {
  if (p.ins.size() > size_t(kMaxInputs) || p.outs.size() > size_t(kMaxOutputs))
    return computeError(
        p.c, llvm::formatv("has {0} inputs and {1} outputs; the cuda generic "
                           "kernel takes {2} and {3} at most",
                           p.ins.size(), p.outs.size(), kMaxInputs, kMaxOutputs)
                 .str());
  g.space = p.space.flatten();
  g.inputs = int32_t(p.ins.size());
  g.outputs = int32_t(p.outs.size());
  for (size_t k = 0; k < p.ins.size(); ++k) {
    g.in[k] = p.inMaps[k].flatMap();
    g.inType[k] = int32_t(p.ins[k]->dtype);
    g.inData[k] = p.ins[k]->data.data();
  }
  for (size_t r = 0; r < p.outs.size(); ++r) {
    g.out[r] = p.outMaps[r].flatMap();
    g.outType[r] = int32_t(p.outs[r]->dtype);
    g.outData[r] = p.outs[r]->data.data();
    g.outElements[r] = p.outs[r]->numel();
  }
  return llvm::Error::success();
}

/// Trilu's (row, col) dims: those writing the result's last two dims.
llvm::Error triluDims(const plan::Compute &c, Generic &g) {
  const plan::Access &out = c.outputs(0);
  int n = out.exprs_size();
  if (n < 2 || out.exprs(n - 2).kind() != plan::AccessExpr::AFFINE ||
      out.exprs(n - 2).dims_size() != 1 ||
      out.exprs(n - 1).kind() != plan::AccessExpr::AFFINE ||
      out.exprs(n - 1).dims_size() != 1)
    return computeError(c, "result's last two dims must be written by "
                           "one iteration dim each");
  g.trilu = true;
  g.triluRow = out.exprs(n - 2).dims(0);
  g.triluCol = out.exprs(n - 1).dims(0);
  return llvm::Error::success();
}

/// describeGeneric for each kernel: what the generic kernel computes for
/// the compute, checked against its operands.
static llvm::Error describePointwise(const Prepared &p, Generic &g) {
  const plan::Compute &c = p.c;
  std::optional<ScalarOp> op = cpu::parseScalarOp(c.kind());
  if (!op || p.outs.empty())
    return computeError(c, "not an elementwise compute");
  g.op = GenericOp::Pointwise;
  g.scalar = *op;
  g.params = cpu::scalarParams(*op, c);
  bool real = p.ins.empty() && isFloatDType(p.outs[0]->dtype);
  for (const Tensor *t : p.ins)
    real |= isFloatDType(t->dtype);
  g.real = real;
  if (*op == ScalarOp::Trilu)
    if (auto err = triluDims(c, g))
      return err;
  return llvm::Error::success();
}

static llvm::Error describeCopy(const Prepared &p, Generic &g) {
  const plan::Compute &c = p.c;
  bool gather = c.kind() == "gather";
  g.op = gather ? GenericOp::Gather : GenericOp::Copy;
  g.sources =
      int32_t(gather || c.kind() == "pad" ? std::min<size_t>(1, p.ins.size())
                                          : p.ins.size());
  g.fill = attrReal(c, "value", 0);
  g.tuple = gather ? int32_t(std::max(1u, p.inMaps[0].lookupCount())) : 0;
  return llvm::Error::success();
}

static llvm::Error describeReduce(const Prepared &p, Generic &g) {
  const plan::Compute &c = p.c;
  std::optional<cpu::ReduceOp> op = cpu::parseReduceOp(c.kind());
  if (!op || p.ins.size() != 1)
    return computeError(c, "a reduction takes one input");
  g.op = GenericOp::Reduce;
  g.reduce = *op;
  g.selectLast = attrInt(c, "select_last_index", 0) != 0;
  g.real = isFloatDType(p.ins[0]->dtype) || *op == ReduceOp::L2 ||
           *op == ReduceOp::LogSumExp;
  g.globalInnerPoints = std::max<int64_t>(1, p.space.globalInnerPoints());
  return llvm::Error::success();
}

static llvm::Error describeScatterAdd(const Prepared &p, Generic &g) {
  g.op = GenericOp::ScatterAdd;
  g.tuple =
      p.ins.size() == 2 ? int32_t(std::max(1u, p.outMaps[0].lookupCount())) : 0;
  return llvm::Error::success();
}

static llvm::Error describeSoftmaxRows(const Prepared &p, Generic &g) {
  const plan::Compute &c = p.c;
  if (p.ins.size() != 1 || p.outs.size() != 1)
    return computeError(c, "softmax takes one input and one output");
  g.op = GenericOp::SoftmaxRows;
  g.logSoftmax = c.kind() == "log_softmax";
  return llvm::Error::success();
}

static llvm::Error describeNormRows(const Prepared &p, Generic &g) {
  const plan::Compute &c = p.c;
  if (p.ins.empty() || p.ins.size() > 3 || p.outs.size() != 1)
    return computeError(c, "takes 1 to 3 inputs and one output");
  g.op = GenericOp::NormRows;
  g.eps = attrReal(c, "epsilon", 1e-5);
  g.rms = c.kind() == "rms_norm";
  return llvm::Error::success();
}

static llvm::Error describeConv2D(const Prepared &p, Generic &g) {
  const plan::Compute &c = p.c;
  if (p.ins.size() < 2 || p.ins.size() > 3 || p.outs.size() != 1)
    return computeError(c, "takes 2 or 3 inputs and one output");
  bool gemmKind = c.kind() == "gemm";
  g.op = GenericOp::Contract;
  g.alpha = gemmKind ? attrReal(c, "alpha", 1.0) : 1.0;
  g.beta = gemmKind ? attrReal(c, "beta", 1.0) : 1.0;
  return llvm::Error::success();
}

static llvm::Error describePool2D(const Prepared &p, Generic &g) {
  const plan::Compute &c = p.c;
  if (p.ins.size() != 1 || p.outs.size() != 1)
    return computeError(c, "a pool takes one input and one output");
  g.op = GenericOp::Pool;
  g.maxPool = c.kind() == "max_pool";
  g.includePad = !g.maxPool && attrInt(c, "count_include_pad", 0) != 0;
  if (auto err = paddedWindow(c, p.ins[0]->shape, g.padded))
    return err;
  return llvm::Error::success();
}

static llvm::Error describeLrn(const Prepared &p, Generic &g) {
  const plan::Compute &c = p.c;
  if (p.ins.size() != 1 || p.outs.size() != 1)
    return computeError(c, "lrn takes one input and one output");
  g.op = GenericOp::Lrn;
  g.lrnSize = double(attrInt(c, "size", 1));
  g.alpha = attrReal(c, "alpha", 1e-4);
  g.beta = attrReal(c, "beta", 0.75);
  g.lrnBias = attrReal(c, "bias", 1.0);
  g.lrnCenter = (int64_t(g.lrnSize) - 1) / 2;
  return llvm::Error::success();
}

static llvm::Error describeScan(const Prepared &p, Generic &g) {
  const plan::Compute &c = p.c;
  if (p.ins.size() != 1 || p.outs.size() != 1)
    return computeError(c, "takes one input and one output");
  int axis = -1;
  for (int d = 0; d < c.iters_size(); ++d)
    if (c.iters(d).kind() == plan::IterDim::SEQ)
      axis = axis < 0 ? d : -2;
  if (axis < 0)
    return computeError(c, "needs exactly one seq dim to scan along");
  g.op = GenericOp::Scan;
  g.scanAxis = uint32_t(axis);
  g.scanLength = p.space.extents[unsigned(axis)];
  g.reverse = attrInt(c, "reverse", 0) != 0;
  g.exclusive = attrInt(c, "exclusive", 0) != 0;
  g.real = isFloatDType(p.ins[0]->dtype);
  // The seq dim is walked here, not as an inner dim.
  g.space.innerCount = 0;
  g.space.innerPoints = 1;
  return llvm::Error::success();
}

static llvm::Error describeTopK(const Prepared &p, Generic &g) {
  const plan::Compute &c = p.c;
  int kDim = c.iters_size() - 1;
  int64_t axis = attrInt(c, "axis", -1);
  if (p.ins.size() != 1 || p.outs.size() != 2 || axis < 0 || axis >= kDim)
    return computeError(c, "takes one input, two outputs, a seq dim `axis` "
                           "and the seq dim `k` last");
  g.op = GenericOp::TopK;
  g.scanAxis = uint32_t(axis);
  g.scanLength = p.space.extents[size_t(axis)];
  g.topKDim = uint32_t(kDim);
  g.topK = p.space.extents[size_t(kDim)];
  g.largest = attrInt(c, "largest", 1) != 0;
  // Both seq dims are walked here, not as inner dims.
  g.space.innerCount = 0;
  g.space.innerPoints = 1;
  return llvm::Error::success();
}

static llvm::Error describeRandom(const Prepared &p, Generic &g) {
  const plan::Compute &c = p.c;
  if (p.ins.size() != 1 || p.outs.size() != 1 || p.ins[0]->numel() != 1)
    return computeError(c, "takes the step (one integer) and has "
                           "one result");
  g.op = GenericOp::Random;
  g.seed = uint64_t(attrInt(c, "seed", 0));
  g.key = uint64_t(attrInt(c, "key", 0));
  g.low = attrReal(c, "low", 0);
  g.high = attrReal(c, "high", 1);
  return llvm::Error::success();
}

static llvm::Error describeBatchNorm(const Prepared &p, Generic &g) {
  const plan::Compute &c = p.c;
  if (p.ins.size() != 5 || p.outs.size() != 1)
    return computeError(c, "takes 5 inputs and one output");
  g.op = GenericOp::BatchNorm;
  g.eps = attrReal(c, "epsilon", 1e-5);
  return llvm::Error::success();
}

} // namespace

llvm::Error describeGeneric(const Prepared &p, plan::KernelId id, Generic &g) {
  if (auto err = fillOperands(p, g))
    return err;
  switch (id) {
  case plan::KernelId::Pointwise:
    return describePointwise(p, g);
  case plan::KernelId::Copy:
    return describeCopy(p, g);
  case plan::KernelId::Reduce:
    return describeReduce(p, g);
  case plan::KernelId::ScatterAdd:
    return describeScatterAdd(p, g);
  case plan::KernelId::SoftmaxRows:
    return describeSoftmaxRows(p, g);
  case plan::KernelId::NormRows:
    return describeNormRows(p, g);
  case plan::KernelId::Gemm:
  case plan::KernelId::Conv2D:
    return describeConv2D(p, g);
  case plan::KernelId::Pool2D:
    return describePool2D(p, g);
  case plan::KernelId::Lrn:
    return describeLrn(p, g);
  case plan::KernelId::Scan:
    return describeScan(p, g);
  case plan::KernelId::TopK:
    return describeTopK(p, g);
  case plan::KernelId::Random:
    return describeRandom(p, g);
  case plan::KernelId::BatchNorm:
    return describeBatchNorm(p, g);
  default:
    return computeError(p.c, "not a generic kernel");
  }
}

void describeGemmBias(const Prepared &p, Generic &g) {
  g.op = GenericOp::Copy;
  g.space = p.space.flatten();
  g.space.innerCount = 0; // the reduced dims do not index C or the output
  g.space.innerPoints = 1;
  g.inputs = 1;
  g.outputs = 1;
  g.in[0] = p.inMaps[2].flatMap();
  g.inType[0] = int32_t(p.ins[2]->dtype);
  g.inData[0] = p.ins[2]->data.data();
  g.out[0] = p.outMaps[0].flatMap();
  g.outType[0] = int32_t(p.outs[0]->dtype);
  g.outData[0] = p.outs[0]->data.data();
  g.outElements[0] = p.outs[0]->numel();
  g.sources = 1;
}

llvm::Error emulateGeneric(const plan::Compute &c, const Generic &g) {
  GenericStatus status;
  if (g.op == GenericOp::ScatterAdd)
    point::scatterAddAll(g, &status);
  else if (point::linearOnly(g))
    for (int64_t p = 0; p < g.space.outerPoints; ++p)
      point::linearPoint(g, p);
  else
    for (int64_t p = 0; p < g.space.outerPoints; ++p)
      point::runOuterPoint(g, p, &status);
  if (status.badLookup)
    return computeError(
        c, llvm::formatv("index {0} is out of range for a dim of {1} "
                         "(valid: [-{1}, {1}))",
                         status.index, status.extent)
               .str());
  return llvm::Error::success();
}

} // namespace pax::runtime
