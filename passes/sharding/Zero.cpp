//===- Zero.cpp - ZeRO stages of a training plan --------------------------===//
#include "passes/sharding/Zero.h"

#include <numeric>

namespace pax {

Config zeroConfig(const Op &op, int64_t devices) {
  Config c(op.iters.size(), 1);
  int64_t left = std::max<int64_t>(1, devices);
  for (unsigned d = 0; d < op.iters.size() && left > 1; ++d) {
    if (op.isReplicaDim(d))
      continue;
    c[d] = std::gcd(op.iters[d].extent, left);
    left /= c[d];
  }
  return c;
}

/// The ops that sum \p grad's terms: \p grad's op and, through its
/// operands, every add over the same shape that feeds it.
static void gradientSums(Op *op, const TensorType &type,
                         std::vector<Op *> &out) {
  if (!op || op->kind != OpKind::Add || op->results.size() != 1 ||
      op->results[0].value->type != type || op->attrs.count("parameter"))
    return;
  out.push_back(op);
  for (const Operand &o : op->operands)
    if (o.value->kind == Value::Kind::Result)
      gradientSums(o.value->def, type, out);
}

llvm::Error applyZero(Module &m, int64_t devices,
                      llvm::function_ref<unsigned(const Global &)> stageOf) {
  auto shard = [&](Op &op, unsigned stage) {
    Config c = zeroConfig(op, devices);
    op.attrs["config"] = std::vector<int64_t>(c.begin(), c.end());
    op.attrs["zero"] = int64_t(stage);
    op.attrs.erase("offset");
  };
  std::vector<std::pair<Op *, unsigned>> sums;
  for (auto &op : m.main.ops) {
    auto param = op->attrs.find("parameter");
    auto grad = op->attrs.find("gradient_of");
    auto it = param != op->attrs.end() ? param : grad;
    if (it == op->attrs.end())
      continue;
    const auto *name = std::get_if<std::string>(&it->second);
    const Global *g = name ? m.findGlobal(*name) : nullptr;
    if (!g || !g->isParameter)
      return llvm::createStringError(
          "op '" + op->name() + "' names no parameter in '" + it->first + "'");
    unsigned stage = stageOf(*g);
    if (stage > 3)
      return llvm::createStringError("parameter '" + g->name() +
                                     "': ZeRO stage " + std::to_string(stage) +
                                     " (0 to 3)");
    if (param != op->attrs.end() && stage >= 1)
      shard(*op, stage);
    else if (grad != op->attrs.end() && stage >= 2)
      sums.push_back({op.get(), stage});
  }
  for (auto [op, stage] : sums) {
    std::vector<Op *> chain;
    gradientSums(op, op->results[0].value->type, chain);
    for (Op *o : chain)
      shard(*o, stage);
  }
  return llvm::Error::success();
}

} // namespace pax
