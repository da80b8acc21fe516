//===- Soap.cpp - SOAP roles of iteration dims ----------------------------===//
#include "ir/Soap.h"

namespace pax {

llvm::StringRef soapRoleName(SoapRole r) {
  switch (r) {
  case SoapRole::Sample:
    return "sample";
  case SoapRole::Attribute:
    return "attribute";
  case SoapRole::Parameter:
    return "parameter";
  case SoapRole::Reduction:
    return "reduction";
  }
  llvm_unreachable("unknown SoapRole");
}

int carrierDim(const AccessExpr &e) {
  if (e.kind == AccessExpr::Kind::Affine || e.kind == AccessExpr::Kind::Group)
    return int(e.dims[0]);
  return -1;
}

/// Per value, which of its dims carry something: the batch (sample), or a
/// parameter's dims (seen through reshapes, transposes and casts).
using DimFlags = llvm::DenseMap<const Value *, llvm::SmallVector<bool, 4>>;

/// Flags of \p v's dims; parameters are flagged on every dim.
static llvm::SmallVector<bool, 4> flagsOf(const DimFlags &flags, const Value *v,
                                          bool paramGlobals) {
  auto it = flags.find(v);
  if (it != flags.end())
    return it->second;
  bool all = paramGlobals && v->global && v->global->isParameter;
  return llvm::SmallVector<bool, 4>(v->type.rank(), all);
}

/// The iteration dims of \p op that index a flagged dim of an operand.
static llvm::SmallVector<bool, 6> flaggedIters(const Op &op,
                                               const DimFlags &flags,
                                               bool paramGlobals,
                                               bool carrierOnly) {
  llvm::SmallVector<bool, 6> out(op.iters.size(), false);
  for (const Operand &o : op.operands) {
    auto f = flagsOf(flags, o.value, paramGlobals);
    for (size_t i = 0; i < o.map.size(); ++i) {
      if (!f[i])
        continue;
      if (carrierOnly) {
        if (int c = carrierDim(o.map[i]); c >= 0)
          out[c] = true;
      } else {
        for (unsigned d : o.map[i].dims)
          out[d] = true;
      }
    }
  }
  return out;
}

/// Flags the dims of \p op's results whose carrier dim is flagged in \p iters.
static void flagResults(const Op &op, llvm::ArrayRef<bool> iters,
                        DimFlags &flags) {
  for (const Result &res : op.results) {
    llvm::SmallVector<bool, 4> s(res.map.size(), false);
    for (size_t i = 0; i < res.map.size(); ++i) {
      int c = carrierDim(res.map[i]);
      s[i] = c >= 0 && iters[c] && op.iters[c].kind != IterKind::Reduction;
    }
    flags[res.value.get()] = s;
  }
}

/// Every function argument's dim 0 is a sample dim.
static DimFlags argumentSamples(const Func &f) {
  DimFlags sampleDims;
  for (const auto &a : f.args) {
    llvm::SmallVector<bool, 4> s(a->type.rank(), false);
    if (!s.empty())
      s[0] = true;
    sampleDims[a.get()] = s;
  }
  return sampleDims;
}

llvm::DenseMap<const Op *, llvm::SmallVector<bool, 6>>
sampleIters(const Func &f) {
  DimFlags sampleDims = argumentSamples(f);
  llvm::DenseMap<const Op *, llvm::SmallVector<bool, 6>> out;
  for (const auto &op : f.ops) {
    auto sample = flaggedIters(*op, sampleDims, false, true);
    flagResults(*op, sample, sampleDims);
    out[op.get()] = std::move(sample);
  }
  return out;
}

llvm::DenseMap<const Op *, llvm::SmallVector<SoapRole, 6>>
computeSoapRoles(const Func &f) {
  DimFlags sampleDims = argumentSamples(f), paramDims;
  llvm::DenseMap<const Op *, llvm::SmallVector<SoapRole, 6>> roles;
  for (const auto &opPtr : f.ops) {
    const Op &op = *opPtr;
    auto sample = flaggedIters(op, sampleDims, false, true);
    auto param = flaggedIters(op, paramDims, true, false);
    auto &r = roles[&op];
    for (size_t d = 0; d < op.iters.size(); ++d) {
      if (op.iters[d].kind == IterKind::Reduction)
        r.push_back(SoapRole::Reduction);
      else if (sample[d])
        r.push_back(SoapRole::Sample);
      else if (param[d])
        r.push_back(SoapRole::Parameter);
      else
        r.push_back(SoapRole::Attribute);
    }
    flagResults(op, sample, sampleDims);
    // A parameter moved or converted is still a parameter.
    bool carriesParams =
        opKindFamily(op.kind) == OpFamily::Layout || op.kind == OpKind::Cast;
    flagResults(op,
                carriesParams
                    ? param
                    : llvm::SmallVector<bool, 6>(op.iters.size(), false),
                paramDims);
  }
  return roles;
}

} // namespace pax
