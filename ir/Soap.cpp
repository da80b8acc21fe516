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

/// The iteration dim that carries a tensor dim's identity: `d`, the window's
/// output dim, a group's major dim. None for `_`, `*` and lookups.
static int carrierDim(const AccessExpr &e) {
  if (e.kind == AccessExpr::Kind::Affine || e.kind == AccessExpr::Kind::Group)
    return int(e.dims[0]);
  return -1;
}

llvm::DenseMap<const Op *, llvm::SmallVector<SoapRole, 6>>
computeSoapRoles(const Func &f) {
  // Which tensor dims of each value are sample (batch) dims.
  llvm::DenseMap<const Value *, llvm::SmallVector<bool, 4>> sampleDims;
  for (const auto &a : f.args) {
    llvm::SmallVector<bool, 4> s(a->type.rank(), false);
    if (!s.empty())
      s[0] = true;
    sampleDims[a.get()] = s;
  }

  llvm::DenseMap<const Op *, llvm::SmallVector<SoapRole, 6>> roles;
  for (const auto &opPtr : f.ops) {
    const Op &op = *opPtr;
    llvm::SmallVector<bool, 6> sample(op.iters.size(), false);
    llvm::SmallVector<bool, 6> param(op.iters.size(), false);
    for (const Operand &o : op.operands) {
      auto it = sampleDims.find(o.value);
      bool isParam = o.value->global && o.value->global->isParameter;
      for (size_t i = 0; i < o.map.size(); ++i) {
        int c = carrierDim(o.map[i]);
        if (c >= 0 && it != sampleDims.end() && it->second[i])
          sample[c] = true;
        if (isParam)
          for (unsigned d : o.map[i].dims)
            param[d] = true;
      }
    }
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
    for (const Result &res : op.results) {
      llvm::SmallVector<bool, 4> s(res.map.size(), false);
      for (size_t i = 0; i < res.map.size(); ++i) {
        int c = carrierDim(res.map[i]);
        s[i] = c >= 0 && sample[c] && op.iters[c].kind != IterKind::Reduction;
      }
      sampleDims[res.value.get()] = s;
    }
  }
  return roles;
}

} // namespace pax
