//===- Printer.cpp - Deterministic text form of the paxc IR ---------------===//
#include "ir/Printer.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/xxhash.h"

#include <charconv>
#include <cmath>
#include <cstring>

namespace pax {

template <typename T> static std::string formatReal(T v) {
  if (std::isnan(v))
    return "nan";
  if (std::isinf(v))
    return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, res.ptr);
  if (s.find_first_of(".e") == std::string::npos)
    s += ".0";
  return s;
}

std::string formatFloat(float v) { return formatReal(v); }
std::string formatDouble(double v) { return formatReal(v); }

static bool isBareIdent(llvm::StringRef s) {
  // `inf` and `nan` would read back as numbers.
  if (s.empty() || !(llvm::isAlpha(s[0]) || s[0] == '_') || s == "inf" ||
      s == "nan")
    return false;
  return llvm::all_of(s, [](char c) {
    return llvm::isAlnum(c) || c == '_' || c == '.' || c == '$';
  });
}

std::string formatString(llvm::StringRef s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += "\\x";
      out += llvm::hexdigit((c >> 4) & 0xF, /*LowerCase=*/true);
      out += llvm::hexdigit(c & 0xF, /*LowerCase=*/true);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string formatIdent(llvm::StringRef name) {
  return isBareIdent(name) ? name.str() : formatString(name);
}

std::string formatAttr(const AttrValue &v) {
  struct Visitor {
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(float f) const { return formatFloat(f); }
    std::string operator()(const std::string &s) const {
      return formatString(s);
    }
    std::string operator()(const std::vector<int64_t> &l) const {
      std::string s = "[";
      for (size_t i = 0; i < l.size(); ++i)
        s += (i ? ", " : "") + std::to_string(l[i]);
      return s + "]";
    }
    std::string operator()(const std::vector<float> &l) const {
      std::string s = "[";
      for (size_t i = 0; i < l.size(); ++i)
        s += (i ? ", " : "") + formatFloat(l[i]);
      return s + "]";
    }
    std::string operator()(const LayoutAttr &l) const {
      return formatLayout(l);
    }
    std::string operator()(const GroupsAttr &g) const {
      return formatGroups(g);
    }
  };
  return std::visit(Visitor(), v);
}

static void printAttrs(const AttrMap &attrs, llvm::raw_ostream &os) {
  if (attrs.empty())
    return;
  os << " {";
  bool first = true;
  for (const auto &[key, value] : attrs) {
    os << (first ? "" : ", ") << formatIdent(key) << " = " << formatAttr(value);
    first = false;
  }
  os << "}";
}

/// One element of dense data, as IR text.
static std::string formatElement(DType t, const uint8_t *p) {
  auto load = [p](auto v) {
    std::memcpy(&v, p, sizeof(v));
    return v;
  };
  switch (t) {
  case DType::F32:
    return formatFloat(load(float()));
  case DType::F64:
    return formatDouble(load(double()));
  case DType::F16:
  case DType::BF16:
    return "0x" + llvm::utohexstr(load(uint16_t()), /*LowerCase=*/true);
  case DType::I8:
    return std::to_string(load(int8_t()));
  case DType::I16:
    return std::to_string(load(int16_t()));
  case DType::I32:
    return std::to_string(load(int32_t()));
  case DType::I64:
    return std::to_string(load(int64_t()));
  case DType::U8:
  case DType::I1:
    return std::to_string(load(uint8_t()));
  case DType::U16:
    return std::to_string(load(uint16_t()));
  case DType::U32:
    return std::to_string(load(uint32_t()));
  case DType::U64: {
    // Above INT64_MAX in hex, which the lexer reads as unsigned.
    uint64_t v = load(uint64_t());
    return v > uint64_t(INT64_MAX) ? "0x" + llvm::utohexstr(v, true)
                                   : std::to_string(v);
  }
  }
  llvm_unreachable("unknown dtype");
}

static void printGlobal(const Global &g, llvm::raw_ostream &os) {
  os << "  " << (g.isParameter ? "param" : "const") << " @"
     << formatIdent(g.name()) << " : " << g.value.type.str() << " = ";
  switch (g.source) {
  case DataSource::Fill:
    // An f32 fill prints at f32 precision: 0.02, not 0.019999999552965164.
    os << "fill("
       << (g.value.type.elem == DType::F32 ? formatFloat(float(g.fill))
                                           : formatDouble(g.fill))
       << ")";
    break;
  case DataSource::Initializer:
    os << "initializer(" << formatString(g.ref) << ")";
    break;
  case DataSource::Input:
    os << "input(" << formatString(g.ref) << ")";
    break;
  case DataSource::Dense: {
    os << "dense<[";
    unsigned bytes = dtypeBytes(g.value.type.elem);
    for (size_t i = 0; i * bytes < g.bytes.size(); ++i)
      os << (i ? ", " : "")
         << formatElement(g.value.type.elem, g.bytes.data() + i * bytes);
    os << "]>";
    break;
  }
  }
  os << "\n";
}

namespace {
/// Names values: arguments and globals by name, op results by number.
class ValueNamer {
public:
  std::string operator()(const Value *v) {
    switch (v->kind) {
    case Value::Kind::Global:
      return "@" + formatIdent(v->name);
    case Value::Kind::Argument:
      return "%" + formatIdent(v->name);
    case Value::Kind::Result: {
      auto it = numbers.find(v);
      if (it == numbers.end())
        it = numbers.try_emplace(v, numbers.size()).first;
      return "%" + std::to_string(it->second);
    }
    }
    llvm_unreachable("unknown value kind");
  }

private:
  llvm::DenseMap<const Value *, unsigned> numbers;
};
} // namespace

/// The fused kernel \p op belongs to (pax-fuse-kernels), or "".
static llvm::StringRef kernelOf(const Op &op) {
  auto it = op.attrs.find("kernel");
  if (it == op.attrs.end())
    return "";
  const auto *s = std::get_if<std::string>(&it->second);
  return s ? llvm::StringRef(*s) : "";
}

static void printOp(const Op &op, ValueNamer &name, llvm::raw_ostream &os,
                    llvm::StringRef indent = "    ") {
  os << indent;
  for (size_t i = 0; i < op.results.size(); ++i)
    os << (i ? ", " : "") << name(op.results[i].value.get());
  os << " = compute " << formatString(opKindName(op.kind)) << " iter [";
  for (size_t i = 0; i < op.iters.size(); ++i) {
    const IterDim &d = op.iters[i];
    os << (i ? ", " : "") << d.name << ": " << d.extent << " "
       << iterKindName(d.kind);
  }
  os << "]\n" << indent << "    ins(";
  for (size_t i = 0; i < op.operands.size(); ++i)
    os << (i ? ", " : "") << name(op.operands[i].value)
       << accessMapStr(op.operands[i].map, op.iters);
  os << ")\n" << indent << "    outs(";
  for (size_t i = 0; i < op.results.size(); ++i)
    os << (i ? ", " : "") << accessMapStr(op.results[i].map, op.iters) << " : "
       << op.results[i].value->type.str();
  os << ")";
  AttrMap attrs = op.attrs;
  if (!kernelOf(op).empty())
    attrs.erase("kernel"); // the region it is printed in says it
  printAttrs(attrs, os);
  os << "\n";
}

/// \p f's ops, each run of one fused kernel as a region:
/// `fused "k0" { ... }`.
static void printOps(const Func &f, ValueNamer &name, llvm::raw_ostream &os) {
  llvm::StringRef open;
  for (const auto &op : f.ops) {
    llvm::StringRef k = kernelOf(*op);
    if (k != open && !open.empty())
      os << "    }\n";
    if (k != open && !k.empty())
      os << "    fused " << formatString(k) << " {\n";
    open = k;
    printOp(*op, name, os, k.empty() ? "    " : "      ");
  }
  if (!open.empty())
    os << "    }\n";
}

void printModule(const Module &m, llvm::raw_ostream &os) {
  os << "module @" << formatIdent(m.name);
  if (!m.attrs.empty())
    os << " attributes";
  printAttrs(m.attrs, os);
  os << " {\n";
  for (const auto &g : m.globals)
    printGlobal(*g, os);
  if (!m.globals.empty())
    os << "\n";

  const Func &f = m.main;
  ValueNamer name;
  os << "  func @" << formatIdent(f.name) << "(";
  for (size_t i = 0; i < f.args.size(); ++i)
    os << (i ? ", " : "") << name(f.args[i].get()) << ": "
       << f.args[i]->type.str();
  os << ") -> (";
  for (size_t i = 0; i < f.returns.size(); ++i)
    os << (i ? ", " : "") << formatIdent(f.returnNames[i]) << ": "
       << f.returns[i]->type.str();
  os << ") {\n";
  printOps(f, name, os);
  os << "    return";
  for (size_t i = 0; i < f.returns.size(); ++i)
    os << (i ? ", " : " ") << name(f.returns[i]);
  os << "\n  }\n}\n";
}

bool isPlacementAttr(llvm::StringRef key) {
  return llvm::is_contained(
      std::initializer_list<llvm::StringRef>{
          "name", "onnx_node", "config", "everywhere", "kernel", "offset",
          "stage", "microbatch", "forward", "recomputed", "parameter",
          "gradient_of"},
      key);
}

std::string opBlockSignature(const Op &op, llvm::ArrayRef<int64_t> local) {
  assert(local.size() == op.iters.size() && "one extent per iteration dim");
  std::string s;
  llvm::raw_string_ostream os(s);
  os << opKindName(op.kind) << " [";
  for (size_t i = 0; i < op.iters.size(); ++i)
    os << (i ? ", " : "") << op.iters[i].name << ": " << local[i] << " "
       << iterKindName(op.iters[i].kind);
  os << "] ins(";
  for (size_t i = 0; i < op.operands.size(); ++i)
    os << (i ? ", " : "") << accessMapStr(op.operands[i].map, op.iters) << " : "
       << op.operands[i].value->type.str();
  os << ") outs(";
  for (size_t i = 0; i < op.results.size(); ++i)
    os << (i ? ", " : "") << accessMapStr(op.results[i].map, op.iters) << " : "
       << op.results[i].value->type.str();
  os << ")";
  AttrMap attrs;
  for (const auto &[key, value] : op.attrs)
    if (!isPlacementAttr(key))
      attrs.insert({key, value});
  printAttrs(attrs, os);
  return s;
}

std::string opBlockKey(const Op &op, llvm::ArrayRef<int64_t> local) {
  return llvm::utohexstr(llvm::xxh3_64bits(opBlockSignature(op, local)),
                         /*LowerCase=*/true, /*Width=*/16);
}

llvm::SmallVector<int64_t, 6> localExtents(const Op &op,
                                           llvm::ArrayRef<int64_t> factors) {
  assert(factors.size() == op.iters.size() && "one factor per iteration dim");
  llvm::SmallVector<int64_t, 6> local;
  for (size_t i = 0; i < op.iters.size(); ++i)
    local.push_back(op.iters[i].extent / std::max<int64_t>(1, factors[i]));
  return local;
}

} // namespace pax
