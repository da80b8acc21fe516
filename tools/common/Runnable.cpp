//===- Runnable.cpp - Which IR ops the CPU runtime can run ----------------===//
#include "tools/common/Runnable.h"

#include "runtime/cpu/Kernels.h"

#include "llvm/ADT/Twine.h"

namespace pax {

std::string describeOpKind(const Op &op) {
  std::string kind = opKindName(op.kind).str();
  auto it = op.attrs.find("onnx_op");
  if (it != op.attrs.end())
    if (const auto *s = std::get_if<std::string>(&it->second))
      return *s + " (imported as " + kind + ")";
  return kind;
}

bool hasCpuKernel(const Op &op) {
  return runtime::hasKernel(opKindName(op.kind));
}

llvm::Error checkRunnable(const Module &m) {
  std::string list;
  int missing = 0;
  for (const auto &op : m.main.ops) {
    if (op->kind == OpKind::Opaque || !hasCpuKernel(*op)) {
      if (missing++ < 8)
        list += "\n  op '" + op->name().str() + "': " + describeOpKind(*op);
    }
  }
  if (!missing)
    return llvm::Error::success();
  if (missing > 8)
    list += "\n  ... and " + std::to_string(missing - 8) + " more";
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      llvm::Twine(missing) + " op(s) have no kernel in paxrun, so paxc " +
          "cannot compile a plan that runs them (--emit=report still prices " +
          "them as replicated):" + list);
}

} // namespace pax
