//===- Summary.cpp - Model statistics: parameters, FLOPs, op counts -------===//
#include "ir/Summary.h"

#include "llvm/Support/Format.h"

#include <set>

namespace pax {

ModelSummary summarize(const Module &m) {
  ModelSummary s;
  s.name = m.name;
  // A tensor of the source model counts once, however many globals view it
  // (reshaped).
  std::set<std::pair<DataSource, std::string>> counted;
  for (const auto &g : m.globals) {
    bool named = g->source == DataSource::Initializer ||
                 g->source == DataSource::Input;
    if (g->isParameter && (!named || counted.insert({g->source, g->ref}).second)) {
      s.parameters += g->value.type.numel();
      s.parameterBytes += g->value.type.bytes();
    }
  }
  std::set<std::string> unsupported;
  for (const auto &op : m.main.ops) {
    ++s.computeOps;
    ++s.ops[opKindName(op->kind).str()];
    double f = op->flops();
    s.flops += f;
    s.flopsByOp[opKindName(op->kind).str()] += f;
    if (op->kind == OpKind::Opaque) {
      auto it = op->attrs.find("onnx_op");
      if (it != op->attrs.end())
        if (auto *t = std::get_if<std::string>(&it->second))
          unsupported.insert(*t);
    }
  }
  s.unsupportedOps.assign(unsupported.begin(), unsupported.end());
  for (const auto &a : m.main.args)
    s.inputs.push_back({a->name, a->type});
  for (size_t i = 0; i < m.main.returns.size(); ++i)
    s.outputs.push_back({m.main.returnNames[i], m.main.returns[i]->type});
  return s;
}

static llvm::json::Array
tensorsJson(const std::vector<std::pair<std::string, TensorType>> &ts) {
  llvm::json::Array a;
  for (const auto &[name, type] : ts) {
    llvm::json::Array shape;
    for (int64_t d : type.shape)
      shape.push_back(d);
    a.push_back(llvm::json::Object{{"name", name},
                                   {"dtype", dtypeName(type.elem)},
                                   {"shape", std::move(shape)}});
  }
  return a;
}

llvm::json::Value summaryToJson(const ModelSummary &s) {
  llvm::json::Object ops;
  for (const auto &[k, n] : s.ops)
    ops[k] = n;
  llvm::json::Object flopsByOp;
  for (const auto &[k, f] : s.flopsByOp)
    flopsByOp[k] = f;
  llvm::json::Array unsupported;
  for (const auto &u : s.unsupportedOps)
    unsupported.push_back(u);
  return llvm::json::Object{
      {"model", s.name},
      {"parameters", s.parameters},
      {"parameter_bytes", s.parameterBytes},
      {"flops", s.flops},
      {"flops_by_op", std::move(flopsByOp)},
      {"compute_ops", s.computeOps},
      {"ops", std::move(ops)},
      {"unsupported_ops", std::move(unsupported)},
      {"inputs", tensorsJson(s.inputs)},
      {"outputs", tensorsJson(s.outputs)},
  };
}

static void
printTensors(llvm::StringRef title,
             const std::vector<std::pair<std::string, TensorType>> &ts,
             llvm::raw_ostream &os) {
  os << title << ":\n";
  for (const auto &[name, type] : ts)
    os << "  " << name << " : " << type.str() << "\n";
}

void printSummaryText(const ModelSummary &s, llvm::raw_ostream &os) {
  os << "model " << s.name << "\n";
  printTensors("inputs", s.inputs, os);
  printTensors("outputs", s.outputs, os);
  os << "parameters: " << s.parameters << " ("
     << llvm::format("%.1f", double(s.parameterBytes) / (1 << 20)) << " MiB)\n";
  os << "forward flops: " << llvm::format("%.4g", s.flops) << "\n";
  os << "compute ops: " << s.computeOps << "\n";
  for (const auto &[k, n] : s.ops)
    os << "  " << k << ": " << n << " ("
       << llvm::format("%.3g", s.flopsByOp.at(k)) << " flops)\n";
  os << "unsupported ops: ";
  if (s.unsupportedOps.empty())
    os << "none";
  for (size_t i = 0; i < s.unsupportedOps.size(); ++i)
    os << (i ? ", " : "") << s.unsupportedOps[i];
  os << "\n";
}

} // namespace pax
