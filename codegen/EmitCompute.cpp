//===- EmitCompute.cpp - IR ops as plan instructions ----------------------===//
#include "codegen/EmitCompute.h"

#include "codegen/plan/Kernels.h"

namespace pax {

plan::DType toPlanDType(DType t) {
  switch (t) {
  case DType::F32:
    return plan::F32;
  case DType::F64:
    return plan::F64;
  case DType::F16:
    return plan::F16;
  case DType::BF16:
    return plan::BF16;
  case DType::I8:
    return plan::I8;
  case DType::I16:
    return plan::I16;
  case DType::I32:
    return plan::I32;
  case DType::I64:
    return plan::I64;
  case DType::U8:
    return plan::U8;
  case DType::U16:
    return plan::U16;
  case DType::U32:
    return plan::U32;
  case DType::U64:
    return plan::U64;
  case DType::I1:
    return plan::I1;
  }
  llvm_unreachable("unknown dtype");
}

DType fromPlanDType(plan::DType t) {
#define PAX_DTYPE(Enum, Text, Bytes, IsFloat)                                  \
  if (toPlanDType(DType::Enum) == t)                                           \
    return DType::Enum;
#include "ir/DTypes.def"
  llvm_unreachable("a plan dtype without an IR dtype");
}

static plan::IterDim::Kind toPlanKind(IterKind k) {
  switch (k) {
  case IterKind::Parallel:
    return plan::IterDim::PAR;
  case IterKind::Reduction:
    return plan::IterDim::RED;
  case IterKind::Sequential:
    return plan::IterDim::SEQ;
  }
  llvm_unreachable("unknown iteration kind");
}

static plan::AccessExpr::Kind toPlanKind(AccessExpr::Kind k) {
  switch (k) {
  case AccessExpr::Kind::Broadcast:
    return plan::AccessExpr::BROADCAST;
  case AccessExpr::Kind::Full:
    return plan::AccessExpr::FULL;
  case AccessExpr::Kind::Affine:
    return plan::AccessExpr::AFFINE;
  case AccessExpr::Kind::Group:
    return plan::AccessExpr::GROUP;
  case AccessExpr::Kind::Lookup:
    return plan::AccessExpr::LOOKUP;
  }
  llvm_unreachable("unknown access kind");
}

static void emitAccess(const AccessMap &map, uint32_t buffer,
                       plan::Access &out) {
  out.set_buffer(buffer);
  for (const AccessExpr &e : map) {
    plan::AccessExpr *x = out.add_exprs();
    x->set_kind(toPlanKind(e.kind));
    for (unsigned d : e.dims)
      x->add_dims(d);
    x->set_stride(e.stride);
    x->set_dilation(e.dilation);
    x->set_offset(e.offset);
    if (e.whole > 1)
      x->set_whole(e.whole);
  }
}

static void emitAttr(const std::string &name, const AttrValue &v,
                     plan::Attr &out) {
  out.set_name(name);
  struct Visitor {
    plan::Attr &out;
    void operator()(int64_t i) const { out.set_i(i); }
    void operator()(float f) const { out.set_f(f); }
    void operator()(const std::string &s) const { out.set_s(s); }
    void operator()(const std::vector<int64_t> &l) const {
      for (int64_t i : l)
        out.mutable_ints()->add_values(i);
    }
    void operator()(const std::vector<float> &l) const {
      for (float f : l)
        out.mutable_floats()->add_values(f);
    }
    // Layouts and groups are collectives' (codegen reads them), never a
    // compute's.
    void operator()(const LayoutAttr &) const {}
    void operator()(const GroupsAttr &) const {}
  };
  std::visit(Visitor{out}, v);
}

plan::Compute emitCompute(const Op &op, llvm::ArrayRef<uint32_t> inputs,
                          llvm::ArrayRef<uint32_t> outputs) {
  assert(inputs.size() == op.operands.size() &&
         outputs.size() == op.results.size() && "one buffer per value");
  plan::Compute c;
  c.set_kind(opKindName(op.kind).str());
  // The kernel every backend runs it on; none (an error when the plan
  // runs) for a kind no backend has.
  if (std::optional<plan::KernelId> k = plan::kernelForKind(c.kind()))
    c.set_kernel(plan::kernelName(*k).str());
  c.set_name(op.name().str());
  for (const IterDim &d : op.iters) {
    plan::IterDim *x = c.add_iters();
    x->set_name(d.name);
    x->set_extent(d.extent);
    x->set_kind(toPlanKind(d.kind));
  }
  for (size_t i = 0; i < op.operands.size(); ++i)
    emitAccess(op.operands[i].map, inputs[i], *c.add_inputs());
  for (size_t i = 0; i < op.results.size(); ++i)
    emitAccess(op.results[i].map, outputs[i], *c.add_outputs());
  for (const auto &[name, value] : op.attrs) {
    if (name == "kernel") // pax-fuse-kernels' group
      if (const auto *s = std::get_if<std::string>(&value)) {
        c.set_fused(*s);
        continue;
      }
    if (name != "name")
      emitAttr(name, value, *c.add_attrs());
  }
  return c;
}

} // namespace pax
