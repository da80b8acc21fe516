//===- PlanBuilder.h - Plan compute messages and tensors for kernel tests -===//
#pragma once

#include "codegen/plan/Kernels.h"
#include "codegen/plan/Plan.pb.h"
#include "runtime/Tensor.h"
#include "runtime/cpu/GenericKernel.h"
#include "runtime/cpu/Kernels.h"

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

namespace pax::test {

/// One access expression: `stride*d + dilation*k + offset`, `(a, b)`, `_`,
/// `*`, `gather(v)`.
struct Expr {
  plan::AccessExpr::Kind kind;
  std::vector<uint32_t> dims;
  int64_t stride = 1, dilation = 1, offset = 0;
};
inline Expr dim(uint32_t d, int64_t offset = 0, int64_t stride = 1) {
  return {plan::AccessExpr::AFFINE, {d}, stride, 1, offset};
}
inline Expr window(uint32_t o, uint32_t k, int64_t stride, int64_t dilation,
                   int64_t offset) {
  return {plan::AccessExpr::AFFINE, {o, k}, stride, dilation, offset};
}
inline Expr group(std::vector<uint32_t> dims) {
  return {plan::AccessExpr::GROUP, std::move(dims)};
}
inline Expr bcast() { return {plan::AccessExpr::BROADCAST, {}}; }
inline Expr full() { return {plan::AccessExpr::FULL, {}}; }
inline Expr lookup(uint32_t d) { return {plan::AccessExpr::LOOKUP, {d}}; }

/// Builds a compute message by hand.
struct ComputeBuilder {
  plan::Compute c;
  explicit ComputeBuilder(std::string kind) {
    c.set_kind(std::move(kind));
    c.set_name("n0");
    // The kernel codegen would choose.
    if (std::optional<plan::KernelId> k = plan::kernelForKind(c.kind()))
      c.set_kernel(plan::kernelName(*k).str());
  }
  ComputeBuilder &iter(std::string name, int64_t extent,
                       plan::IterDim::Kind kind = plan::IterDim::PAR) {
    plan::IterDim *d = c.add_iters();
    d->set_name(std::move(name));
    d->set_extent(extent);
    d->set_kind(kind);
    return *this;
  }
  ComputeBuilder &red(std::string name, int64_t extent) {
    return iter(std::move(name), extent, plan::IterDim::RED);
  }
  static void fill(plan::Access *a, std::initializer_list<Expr> exprs) {
    for (const Expr &e : exprs) {
      plan::AccessExpr *x = a->add_exprs();
      x->set_kind(e.kind);
      for (uint32_t d : e.dims)
        x->add_dims(d);
      x->set_stride(e.stride);
      x->set_dilation(e.dilation);
      x->set_offset(e.offset);
    }
  }
  ComputeBuilder &in(std::initializer_list<Expr> exprs) {
    fill(c.add_inputs(), exprs);
    return *this;
  }
  ComputeBuilder &out(std::initializer_list<Expr> exprs) {
    fill(c.add_outputs(), exprs);
    return *this;
  }
  ComputeBuilder &attr(std::string name, int64_t v) {
    plan::Attr *a = c.add_attrs();
    a->set_name(std::move(name));
    a->set_i(v);
    return *this;
  }
  ComputeBuilder &attrF(std::string name, float v) {
    plan::Attr *a = c.add_attrs();
    a->set_name(std::move(name));
    a->set_f(v);
    return *this;
  }
  ComputeBuilder &attrS(std::string name, std::string v) {
    plan::Attr *a = c.add_attrs();
    a->set_name(std::move(name));
    a->set_s(std::move(v));
    return *this;
  }
  ComputeBuilder &attrInts(std::string name, std::vector<int64_t> v) {
    plan::Attr *a = c.add_attrs();
    a->set_name(std::move(name));
    for (int64_t x : v)
      a->mutable_ints()->add_values(x);
    return *this;
  }
};

/// A tensor of \p shape holding \p values (zeros after them).
inline runtime::Tensor make(plan::DType dtype, std::vector<int64_t> shape,
                            std::vector<double> values = {}) {
  runtime::Tensor t = runtime::Tensor::zeros(dtype, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i)
    t.setReal(int64_t(i), values[i]);
  return t;
}

/// Every element of \p t as a double.
inline std::vector<double> reals(const runtime::Tensor &t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numel(); ++i)
    v.push_back(t.real(i));
  return v;
}

/// Runs \p c on \p kernel (runtime::runKernel, or runtime::cpu::runGeneric)
/// and returns the error text ("" on success).
template <typename Kernel>
std::string runWith(Kernel kernel, const plan::Compute &c,
                    std::vector<const runtime::Tensor *> ins,
                    std::vector<runtime::Tensor *> outs) {
  if (llvm::Error e = kernel(c, ins, outs))
    return llvm::toString(std::move(e));
  return "";
}

} // namespace pax::test
