//===- BasicPasses.cpp - Clean-up and inspection passes -------------------===//
#include "passes/BasicPasses.h"

#include "passes/Autocast.h"
#include "passes/ChannelsLast.h"
#include "passes/FoldCopies.h"
#include "passes/FuseAttention.h"
#include "passes/FuseBias.h"
#include "passes/FuseGelu.h"
#include "passes/FuseKernels.h"

#include "ir/Soap.h"
#include "ir/Summary.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"

namespace pax {

/// Creates a pass that takes no options; any option given is an error.
template <typename T>
static llvm::Expected<std::unique_ptr<Pass>>
createWithoutOptions(llvm::StringRef name, const PassOptions &o) {
  if (auto err = o.checkKnown(name, {}))
    return err;
  return std::make_unique<T>();
}

unsigned eliminateDeadCode(Module &m) {
  Func &f = m.main;
  llvm::DenseSet<const Value *> live(f.returns.begin(), f.returns.end());
  llvm::DenseSet<const Op *> keep;
  // Ops are in topological order: walk back from the results.
  for (auto it = f.ops.rbegin(); it != f.ops.rend(); ++it) {
    const Op &op = **it;
    bool used = llvm::any_of(
        op.results, [&](const Result &r) { return live.count(r.value.get()); });
    if (!used)
      continue;
    keep.insert(&op);
    for (const Operand &o : op.operands)
      live.insert(o.value);
  }
  size_t before = f.ops.size();
  llvm::erase_if(f.ops, [&](const std::unique_ptr<Op> &op) {
    return !keep.count(op.get());
  });
  llvm::erase_if(m.globals, [&](const std::unique_ptr<Global> &g) {
    return !live.count(&g->value);
  });
  return unsigned(before - f.ops.size());
}

llvm::Expected<std::unique_ptr<Pass>>
DeadCodePass::create(const PassOptions &o) {
  return createWithoutOptions<DeadCodePass>("pax-dce", o);
}

llvm::Error DeadCodePass::run(Module &m, PassContext &) {
  eliminateDeadCode(m);
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<Pass>>
FuseAttentionPass::create(const PassOptions &o) {
  return createWithoutOptions<FuseAttentionPass>("pax-fuse-attention", o);
}

llvm::Error FuseAttentionPass::run(Module &m, PassContext &) {
  fuseAttention(m);
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<Pass>>
FuseGeluPass::create(const PassOptions &o) {
  return createWithoutOptions<FuseGeluPass>("pax-fuse-gelu", o);
}

llvm::Error FuseGeluPass::run(Module &m, PassContext &) {
  fuseGelu(m);
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<Pass>>
FuseBiasPass::create(const PassOptions &o) {
  return createWithoutOptions<FuseBiasPass>("pax-fuse-bias", o);
}

llvm::Error FuseBiasPass::run(Module &m, PassContext &) {
  fuseBias(m);
  return llvm::Error::success();
}

/// Pass \p pass's option \p key, 0 (the default) or 1; \p known: every
/// option the pass takes (default: \p key alone).
static llvm::Expected<bool>
flagOption(const PassOptions &o, llvm::StringRef pass, llvm::StringRef key,
           llvm::ArrayRef<llvm::StringRef> known = {}) {
  if (auto err =
          o.checkKnown(pass, known.empty() ? llvm::ArrayRef(key) : known))
    return err;
  std::string v = o.get(key, "0");
  if (v != "0" && v != "1")
    return llvm::createStringError(pass + ": " + key + "=" + v +
                                   ": expected 0 or 1");
  return v == "1";
}

llvm::Expected<std::unique_ptr<Pass>>
FoldCopiesPass::create(const PassOptions &o) {
  auto inference = flagOption(o, "pax-fold-copies", "inference");
  if (!inference)
    return inference.takeError();
  auto p = std::make_unique<FoldCopiesPass>();
  p->inference = *inference;
  return p;
}

llvm::Error FoldCopiesPass::run(Module &m, PassContext &) {
  foldCopies(m, {inference});
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<Pass>>
AutocastPass::create(const PassOptions &o) {
  auto master = flagOption(o, "pax-autocast", "master-weights",
                           {"precision", "master-weights"});
  if (!master)
    return master.takeError();
  auto low = parseLowPrecision(o.get("precision", "bf16"));
  if (!low)
    return llvm::createStringError("pax-autocast: " +
                                   llvm::toString(low.takeError()));
  auto p = std::make_unique<AutocastPass>();
  p->low = *low;
  p->masterWeights = *master;
  return p;
}

llvm::Error AutocastPass::run(Module &m, PassContext &) {
  autocast(m, {low, masterWeights});
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<Pass>>
FoldCastsPass::create(const PassOptions &o) {
  auto downOnly = flagOption(o, "pax-fold-casts", "down-only");
  if (!downOnly)
    return downOnly.takeError();
  auto p = std::make_unique<FoldCastsPass>();
  p->downOnly = *downOnly;
  return p;
}

llvm::Error FoldCastsPass::run(Module &m, PassContext &) {
  foldCasts(m, downOnly ? CastFold::DownOnly : CastFold::All);
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<Pass>>
ChannelsLastPass::create(const PassOptions &o) {
  return createWithoutOptions<ChannelsLastPass>("pax-channels-last", o);
}

llvm::Error ChannelsLastPass::run(Module &m, PassContext &) {
  channelsLast(m);
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<Pass>>
FuseKernelsPass::create(const PassOptions &o) {
  auto remarks = flagOption(o, "pax-fuse-kernels", "remarks");
  if (!remarks)
    return remarks.takeError();
  auto p = std::make_unique<FuseKernelsPass>();
  p->remarks = *remarks;
  return p;
}

llvm::Error FuseKernelsPass::run(Module &m, PassContext &ctx) {
  fuseKernels(m, remarks ? &ctx.out : nullptr);
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<Pass>>
StripNamesPass::create(const PassOptions &o) {
  return createWithoutOptions<StripNamesPass>("pax-strip-names", o);
}

llvm::Error StripNamesPass::run(Module &m, PassContext &) {
  for (auto &op : m.main.ops)
    op->attrs.erase("name");
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<Pass>>
PrintSoapRolesPass::create(const PassOptions &o) {
  return createWithoutOptions<PrintSoapRolesPass>("pax-print-soap-roles", o);
}

llvm::Error PrintSoapRolesPass::run(Module &m, PassContext &ctx) {
  auto roles = computeSoapRoles(m.main);
  for (const auto &op : m.main.ops) {
    ctx.out << "soap " << opKindName(op->kind) << " '" << op->name() << "':";
    const auto &r = roles[op.get()];
    for (size_t d = 0; d < op->iters.size(); ++d)
      ctx.out << " " << op->iters[d].name << "=" << soapRoleName(r[d]);
    ctx.out << "\n";
  }
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<Pass>>
PrintSummaryPass::create(const PassOptions &o) {
  if (auto err = o.checkKnown("pax-print-summary", {"format"}))
    return err;
  std::string format = o.get("format", "text");
  if (format != "text" && format != "json")
    return llvm::createStringError("pass 'pax-print-summary': format must be "
                                   "text or json, not '" +
                                   format + "'");
  return std::make_unique<PrintSummaryPass>(format == "json");
}

llvm::Error PrintSummaryPass::run(Module &m, PassContext &ctx) {
  ModelSummary s = summarize(m);
  if (json)
    ctx.out << llvm::formatv("{0:2}", summaryToJson(s)) << "\n";
  else
    printSummaryText(s, ctx.out);
  return llvm::Error::success();
}

} // namespace pax
