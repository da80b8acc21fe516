//===- AccessMap.cpp - Iteration dims and operand access maps -------------===//
#include "ir/AccessMap.h"

#include <algorithm>

#include "llvm/ADT/STLExtras.h"

namespace pax {

llvm::StringRef iterKindName(IterKind k) {
  switch (k) {
  case IterKind::Parallel:
    return "par";
  case IterKind::Reduction:
    return "red";
  case IterKind::Sequential:
    return "seq";
  }
  llvm_unreachable("unknown IterKind");
}

std::optional<IterKind> parseIterKind(llvm::StringRef text) {
  if (text == "par")
    return IterKind::Parallel;
  if (text == "red")
    return IterKind::Reduction;
  if (text == "seq")
    return IterKind::Sequential;
  return std::nullopt;
}

AccessExpr AccessExpr::dim(unsigned d) { return shifted(d, 1, 0); }

AccessExpr AccessExpr::shifted(unsigned d, int64_t stride, int64_t offset) {
  AccessExpr e;
  e.kind = Kind::Affine;
  e.dims = {d};
  e.stride = stride;
  e.offset = offset;
  return e;
}

AccessExpr AccessExpr::window(unsigned out, unsigned win, int64_t stride,
                              int64_t dilation, int64_t offset) {
  AccessExpr e = shifted(out, stride, offset);
  e.dims.push_back(win);
  e.dilation = dilation;
  return e;
}

AccessExpr AccessExpr::group(llvm::ArrayRef<unsigned> dims, int64_t whole,
                             int64_t offset) {
  AccessExpr e;
  e.kind = Kind::Group;
  e.dims.assign(dims.begin(), dims.end());
  e.whole = whole;
  e.offset = offset;
  return e;
}

AccessExpr AccessExpr::lookup(unsigned d) {
  AccessExpr e;
  e.kind = Kind::Lookup;
  e.dims = {d};
  return e;
}

AccessExpr AccessExpr::broadcast() {
  AccessExpr e;
  e.kind = Kind::Broadcast;
  return e;
}

AccessExpr AccessExpr::full() { return AccessExpr(); }

bool AccessExpr::uses(unsigned d) const { return llvm::is_contained(dims, d); }

static std::string termStr(int64_t coeff, llvm::StringRef name) {
  if (coeff == 1)
    return name.str();
  return std::to_string(coeff) + "*" + name.str();
}

std::string accessExprStr(const AccessExpr &e, llvm::ArrayRef<IterDim> space) {
  switch (e.kind) {
  case AccessExpr::Kind::Broadcast:
    return "_";
  case AccessExpr::Kind::Full:
    return "*";
  case AccessExpr::Kind::Lookup:
    return "gather(" + space[e.dims[0]].name + ")";
  case AccessExpr::Kind::Group: {
    std::string s = "(";
    for (size_t i = 0; i < e.dims.size(); ++i)
      s += (i ? ", " : "") + space[e.dims[i]].name;
    if (e.whole > 1)
      s += ", *" + std::to_string(e.whole);
    s += ")";
    if (e.offset > 0)
      s += " + " + std::to_string(e.offset);
    else if (e.offset < 0)
      s += " - " + std::to_string(-e.offset);
    return s;
  }
  case AccessExpr::Kind::Affine: {
    std::string s = termStr(e.stride, space[e.dims[0]].name);
    if (e.dims.size() > 1)
      s += " + " + termStr(e.dilation, space[e.dims[1]].name);
    if (e.offset > 0)
      s += " + " + std::to_string(e.offset);
    else if (e.offset < 0)
      s += " - " + std::to_string(-e.offset);
    return s;
  }
  }
  llvm_unreachable("unknown AccessExpr kind");
}

std::string accessMapStr(const AccessMap &m, llvm::ArrayRef<IterDim> space) {
  std::string s = "[";
  for (size_t i = 0; i < m.size(); ++i)
    s += (i ? ", " : "") + accessExprStr(m[i], space);
  return s + "]";
}

int64_t accessSpan(const AccessExpr &e, llvm::ArrayRef<IterDim> space) {
  switch (e.kind) {
  case AccessExpr::Kind::Broadcast:
    return 1;
  case AccessExpr::Kind::Full:
    return -1;
  case AccessExpr::Kind::Lookup:
    return space[e.dims[0]].extent;
  case AccessExpr::Kind::Group: {
    int64_t n = e.whole;
    for (unsigned d : e.dims)
      n *= space[d].extent;
    return n;
  }
  case AccessExpr::Kind::Affine: {
    auto [lo, hi] = affineRange(e, space);
    return hi - lo + 1;
  }
  }
  llvm_unreachable("unknown AccessExpr kind");
}

std::pair<int64_t, int64_t> affineRange(const AccessExpr &e,
                                        llvm::ArrayRef<IterDim> space) {
  int64_t lo = e.offset, hi = e.offset;
  auto term = [&](int64_t coef, unsigned d) {
    int64_t span = coef * (space[d].extent - 1);
    lo += std::min<int64_t>(0, span);
    hi += std::max<int64_t>(0, span);
  };
  term(e.stride, e.dims[0]);
  if (e.dims.size() > 1)
    term(e.dilation, e.dims[1]);
  return {lo, hi};
}

bool isIdentityMap(const AccessMap &m) {
  for (size_t i = 0; i < m.size(); ++i)
    if (!m[i].isPlainDim() || m[i].dims[0] != i)
      return false;
  return true;
}

} // namespace pax
