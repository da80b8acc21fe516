//===- Opaque.cpp - Ops paxc cannot split, imported as replicated ---------===//
#include "frontend/OnnxOps.h"

namespace pax {

llvm::Error importOpaque(NodeContext &ctx) {
  std::string opName =
      (ctx.proto().domain().empty() || ctx.proto().domain() == "ai.onnx"
           ? ""
           : ctx.proto().domain() + ".") +
      ctx.opType().str();
  auto op = ctx.newOp(OpKind::Opaque);
  for (unsigned i = 0; i < ctx.numInputs(); ++i)
    if (ctx.hasInput(i))
      op->operands.push_back(
          {ctx.value(i), AccessMap(ctx.rank(i), AccessExpr::full())});
  for (unsigned i = 0; i < ctx.numOutputs(); ++i) {
    auto type = ctx.inferredOutputType(i);
    if (!type)
      return ctx.error("unsupported op type '" + opName +
                       "' (paxc has no importer for it, and the shape of "
                       "its output '" +
                       ctx.proto().output(i) +
                       "' is not known from the model)");
    op->addResult(*type, AccessMap(type->rank(), AccessExpr::full()));
  }
  copyAttributes(ctx, *op);
  op->attrs["onnx_op"] = opName;
  ctx.warn("paxc cannot split op type '" + opName +
           "'; it is imported as a replicated op");
  return ctx.finish(std::move(op));
}

} // namespace pax
