//===- FuseBias.cpp - A matmul and the add after it as one gemm -----------===//
#include "passes/FuseBias.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"

#include <optional>

namespace pax {
namespace {

/// The add's map \p c of its other operand, over the matmul's dims: the
/// add's dim i is the matmul's dim \p product[i] (the matmul's result map);
/// nullopt unless \p c is plain dims and broadcasts.
std::optional<AccessMap> overMatmul(const AccessMap &c,
                                    const AccessMap &product) {
  AccessMap out;
  for (const AccessExpr &e : c) {
    if (e.kind == AccessExpr::Kind::Broadcast) {
      out.push_back(e);
      continue;
    }
    if (!e.isPlainDim() || e.dims[0] >= product.size() ||
        !product[e.dims[0]].isPlainDim())
      return std::nullopt;
    out.push_back(AccessExpr::dim(product[e.dims[0]].dims[0]));
  }
  return out;
}

class Fuser {
public:
  explicit Fuser(Module &m) : m(m) {
    for (size_t i = 0; i < m.main.ops.size(); ++i)
      position[m.main.ops[i].get()] = i;
    uses = m.main.countUses();
  }

  unsigned run();

private:
  /// The matmul whose product \p add's operand \p k is, where the pair
  /// can be one gemm (the header's conditions); its C map in \p c.
  Op *match(const Op &add, unsigned k, AccessMap &c) const;
  /// Makes \p mm the gemm of itself and \p add (operand \p k the product).
  void fuse(Op &mm, Op &add, unsigned k, AccessMap c);

  Module &m;
  llvm::DenseMap<const Op *, size_t> position;
  llvm::DenseMap<const Value *, unsigned> uses;
};

Op *Fuser::match(const Op &add, unsigned k, AccessMap &c) const {
  const Value *product = add.operands[k].value;
  const Value *other = add.operands[1 - k].value;
  if (product->kind != Value::Kind::Result ||
      product->def->kind != OpKind::MatMul)
    return nullptr;
  Op *mm = product->def;
  if (mm->operands.size() != 2 || mm->results.size() != 1 ||
      uses.lookup(product) != 1 || add.results.size() != 1 ||
      add.results[0].value->type != product->type ||
      other->type.elem != product->type.elem || !isFloat(product->type.elem) ||
      !isIdentityMap(add.operands[k].map) ||
      !isIdentityMap(add.results[0].map) ||
      add.operands[k].map.size() != product->type.shape.size())
    return nullptr;
  // C must exist where the gemm runs: before the matmul.
  if (other->kind == Value::Kind::Result &&
      position.lookup(other->def) > position.lookup(mm))
    return nullptr;
  std::optional<AccessMap> over =
      overMatmul(add.operands[1 - k].map, mm->results[0].map);
  if (!over)
    return nullptr;
  c = std::move(*over);
  return mm;
}

void Fuser::fuse(Op &mm, Op &add, unsigned k, AccessMap c) {
  mm.kind = OpKind::Gemm;
  mm.sources += add.sources;
  mm.operands.push_back({add.operands[1 - k].value, std::move(c)});
  mm.attrs["alpha"] = 1.0f;
  mm.attrs["beta"] = 1.0f;
  // The gemm writes the add's value and stands for its source node.
  if (!add.name().empty())
    mm.attrs["onnx_node"] = add.name().str();
  mm.results[0].value = std::move(add.results[0].value);
  mm.results[0].value->def = &mm;
  mm.results[0].value->index = 0;
  add.results.clear();
  add.operands.clear();
}

unsigned Fuser::run() {
  unsigned fused = 0;
  for (const auto &op : m.main.ops) {
    if (op->kind != OpKind::Add || op->operands.size() != 2)
      continue;
    for (unsigned k = 0; k < 2; ++k) {
      AccessMap c;
      if (Op *mm = match(*op, k, c)) {
        fuse(*mm, *op, k, std::move(c));
        ++fused;
        break;
      }
    }
  }
  llvm::erase_if(m.main.ops, [](const std::unique_ptr<Op> &op) {
    return op->kind == OpKind::Add && op->results.empty();
  });
  return fused;
}

} // namespace

unsigned fuseBias(Module &m) { return Fuser(m).run(); }

} // namespace pax
