//===- GenerateKernels.cpp - Kernels generated for fused groups -----------===//
#include "runtime/GenerateKernels.h"

#include "codegen/plan/Kernels.h"
#include "codegen/plan/PlanFile.h"
#include "runtime/GenerateKernelsInternal.h"
#include "runtime/GeneratedKernel.h"
#include "runtime/PointKernelsHost.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <optional>

namespace pax::runtime {

namespace kernelgen {

#include "KernelHeaders.inc"

bool isFloatType(int32_t t) {
  using namespace elements;
  return t == F32 || t == F64 || t == F16 || t == BF16;
}

/// Tensors shaped as \p ids' buffers, over no memory: what prepare checks
/// and compiles maps against (nothing reads them).
std::vector<Tensor> shapes(const plan::DeviceProgram &prog,
                           const plan::Compute &c, bool inputs) {
  static uint8_t none;
  std::vector<Tensor> ts;
  for (const plan::Access &a : inputs ? c.inputs() : c.outputs()) {
    const plan::Buffer &b = prog.buffers(int(a.buffer()));
    Tensor t;
    t.dtype = b.dtype();
    t.shape.assign(b.shape().begin(), b.shape().end());
    t.data = Bytes::view(&none, size_t(t.bytes()));
    ts.push_back(std::move(t));
  }
  return ts;
}

/// Whether \p g is a reduction a row kernel computes: float, not an
/// arg-reduction, over the whole of its inner dims, its maps linear.
bool rowReduction(const Generic &g) {
  return g.real && g.inputs == 1 && g.outputs == 1 && g.in[0].linear &&
         g.out[0].linear && g.in[0].lookups == 0 && g.out[0].lookups == 0 &&
         g.reduce != ReduceOp::ArgMax && g.reduce != ReduceOp::ArgMin &&
         g.reduce != ReduceOp::LogSumExp && // no blockMerge for it
         g.space.innerCount > 0 && g.globalInnerPoints == g.space.innerPoints;
}

std::optional<Member> describeMember(const plan::DeviceProgram &prog,
                                     const plan::Compute &c, bool reductions) {
  std::optional<plan::KernelId> id = plan::parseKernelId(c.kernel());
  bool reduce = reductions && id == plan::KernelId::Reduce;
  if (!id || (*id != plan::KernelId::Pointwise && *id != plan::KernelId::Copy &&
              !reduce))
    return std::nullopt;
  for (const plan::Access &a :
       llvm::concat<const plan::Access>(c.inputs(), c.outputs()))
    if (a.buffer() >= uint32_t(prog.buffers_size()))
      return std::nullopt;
  std::vector<Tensor> ins = shapes(prog, c, true),
                      outs = shapes(prog, c, false);
  llvm::SmallVector<const Tensor *, 4> inPtrs;
  llvm::SmallVector<Tensor *, 2> outPtrs;
  for (const Tensor &t : ins)
    inPtrs.push_back(&t);
  for (Tensor &t : outs)
    outPtrs.push_back(&t);
  auto p = prepare(c, inPtrs, outPtrs);
  if (!p) {
    llvm::consumeError(p.takeError());
    return std::nullopt;
  }
  Member m{&c, Generic(), {}, {}};
  if (llvm::Error err = describeGeneric(*p, *id, m.g)) {
    llvm::consumeError(std::move(err));
    return std::nullopt;
  }
  if (reduce ? !rowReduction(m.g)
             : !point::linearOnly(m.g) || m.g.space.outerCount == 0)
    return std::nullopt;
  if (m.g.op == GenericOp::Pointwise ? !m.g.real
      : m.g.op == GenericOp::Copy
          ? !isFloatType(m.g.inType[0]) || !isFloatType(m.g.outType[0])
          : false)
    return std::nullopt;
  for (const plan::Access &a : c.inputs())
    m.ins.push_back(a.buffer());
  for (const plan::Access &a : c.outputs())
    m.outs.push_back(a.buffer());
  return m;
}

bool sameSpace(const flat::Space &a, const flat::Space &b) {
  if (a.outerCount != b.outerCount || a.rank != b.rank)
    return false;
  for (int32_t i = 0; i < a.outerCount; ++i)
    if (a.outer[i] != b.outer[i] ||
        a.extents[a.outer[i]] != b.extents[b.outer[i]])
      return false;
  return true;
}

bool sameMap(const flat::Map &a, const flat::Map &b, const flat::Space &s) {
  if (a.base != b.base)
    return false;
  for (int32_t i = 0; i < s.outerCount; ++i)
    if (a.coef[s.outer[i]] != b.coef[s.outer[i]])
      return false;
  return true;
}

/// How many instructions and output bindings name each buffer.
std::vector<int> referenceCounts(const plan::DeviceProgram &prog) {
  std::vector<int> refs(size_t(prog.buffers_size()), 0);
  auto count = [&](uint32_t b) {
    if (b < refs.size())
      ++refs[b];
  };
  for (const plan::Instruction &inst : prog.instructions()) {
    if (inst.has_compute()) {
      for (const plan::Access &a : inst.compute().inputs())
        count(a.buffer());
      for (const plan::Access &a : inst.compute().outputs())
        count(a.buffer());
    } else if (inst.has_collective()) {
      count(inst.collective().input());
      count(inst.collective().output());
    } else if (inst.has_slice()) {
      count(inst.slice().input());
      count(inst.slice().output());
    } else if (inst.has_load()) {
      count(inst.load().buffer());
    }
  }
  for (const plan::Binding &b : prog.outputs())
    count(b.buffer());
  for (const plan::Binding &b : prog.inputs())
    count(b.buffer());
  return refs;
}

/// Whether buffers \p a and \p b share bytes of the arena (the arena
/// planner gives a buffer dead before another is written its bytes; in one
/// kernel both are live at once).
bool overlap(const plan::DeviceProgram &prog, uint32_t a, uint32_t b) {
  const plan::Buffer &x = prog.buffers(int(a)), &y = prog.buffers(int(b));
  return a != b && x.offset() < y.offset() + planBufferBytes(y) &&
         y.offset() < x.offset() + planBufferBytes(x);
}

/// A run being gathered: its members, and the one map through which they
/// all address each buffer they touch.
struct Run {
  uint32_t first = 0;
  std::vector<Member> members;
  llvm::DenseMap<uint32_t, flat::Map> maps;

  /// Adds \p m when its space is the run's and every buffer it shares
  /// with the run (or with itself) is addressed through the same map.
  bool tryAdd(Member &&m) {
    if (!members.empty() && (m.c->fused() != members[0].c->fused() ||
                             !sameSpace(m.g.space, members[0].g.space)))
      return false;
    llvm::DenseMap<uint32_t, flat::Map> added;
    auto fits = [&](uint32_t b, const flat::Map &map) {
      for (auto *seen : {&maps, &added}) {
        auto it = seen->find(b);
        if (it != seen->end())
          return sameMap(it->second, map, m.g.space);
      }
      added.try_emplace(b, map);
      return true;
    };
    for (size_t k = 0; k < m.ins.size(); ++k)
      if (!fits(m.ins[k], m.g.in[k]))
        return false;
    for (size_t r = 0; r < m.outs.size(); ++r)
      if (!fits(m.outs[r], m.g.out[r]))
        return false;
    if (maps.size() + added.size() > size_t(gen::kMaxParams))
      return false;

    for (auto &[b, map] : added)
      maps.try_emplace(b, map);
    members.push_back(std::move(m));
    return true;
  }
};

/// Whether something other than \p members reads or writes buffer \p b
/// (a later instruction, a binding), or it is a weight: a kernel of the
/// members stores it.
bool usedOutside(const plan::DeviceProgram &prog, const std::vector<int> &refs,
                 llvm::ArrayRef<Member> members, uint32_t b) {
  int inside = 0;
  for (const Member &m : members)
    inside += int(llvm::count(m.ins, b) + llvm::count(m.outs, b));
  return refs[b] > inside || prog.buffers(int(b)).persistent();
}

/// Whether buffers \p a and \p b, sharing bytes, are one in place of the
/// other for \p members: the same bytes, the same type and one map for
/// both, so each point reads and writes only its own element.
bool inPlace(const plan::DeviceProgram &prog, llvm::ArrayRef<Member> members,
             uint32_t a, uint32_t b) {
  const plan::Buffer &x = prog.buffers(int(a)), &y = prog.buffers(int(b));
  if (x.offset() != y.offset() || x.dtype() != y.dtype() ||
      planBufferBytes(x) != planBufferBytes(y))
    return false;
  if (!isFloatType(int32_t(x.dtype()))) // stored as soon as written
    return false;
  // Every access of a run's buffer goes through one map (Run::tryAdd).
  auto mapOf = [&](uint32_t buf) -> const flat::Map * {
    for (const Member &m : members) {
      for (size_t k = 0; k < m.ins.size(); ++k)
        if (m.ins[k] == buf)
          return &m.g.in[k];
      for (size_t r = 0; r < m.outs.size(); ++r)
        if (m.outs[r] == buf)
          return &m.g.out[r];
    }
    return nullptr;
  };
  const flat::Map *ma = mapOf(a), *mb = mapOf(b);
  const flat::Space &s = members[0].g.space;
  return ma && mb && sameMap(*ma, *mb, s);
}

/// Whether the buffers a kernel of \p members reads or writes in memory
/// (those it loads before writing them, and those it stores) lie apart in
/// the arena; values it keeps in registers need no bytes.
bool apartInArena(const plan::DeviceProgram &prog, const std::vector<int> &refs,
                  llvm::ArrayRef<Member> members, bool inPlaceToo) {
  llvm::SmallVector<uint32_t, 16> touched;
  llvm::DenseMap<uint32_t, bool> written;
  auto touch = [&](uint32_t b) {
    if (!llvm::is_contained(touched, b))
      touched.push_back(b);
  };
  for (const Member &m : members) {
    for (uint32_t b : m.ins)
      if (!written.count(b))
        touch(b);
    for (size_t r = 0; r < m.outs.size(); ++r) {
      written[m.outs[r]] = true;
      if (!isFloatType(m.g.outType[r]) ||
          usedOutside(prog, refs, members, m.outs[r]))
        touch(m.outs[r]);
    }
  }
  for (size_t i = 0; i < touched.size(); ++i)
    for (size_t j = i + 1; j < touched.size(); ++j)
      if (overlap(prog, touched[i], touched[j]) &&
          !(inPlaceToo && inPlace(prog, members, touched[i], touched[j])))
        return false;
  return true;
}

std::string realLiteral(double v) {
  if (std::isnan(v))
    return "NAN";
  if (std::isinf(v))
    return v < 0 ? "-INFINITY" : "INFINITY";
  return llvm::formatv("{0}", llvm::format("%.17g", v)).str();
}

/// Statements setting the fields of \p q that differ from the defaults.
void emitParams(const ScalarParams &q, llvm::StringRef name,
                llvm::raw_ostream &os) {
  ScalarParams d;
  os << "  pax::runtime::ScalarParams " << name << ";\n";
  auto real = [&](const char *field, double v, double def) {
    if (v != def && !(std::isnan(v) && std::isnan(def)))
      os << "  " << name << "." << field << " = " << realLiteral(v) << ";\n";
  };
  auto flag = [&](const char *field, bool v, bool def) {
    if (v != def)
      os << "  " << name << "." << field << " = " << (v ? "true" : "false")
         << ";\n";
  };
  real("alpha", q.alpha, d.alpha);
  real("beta", q.beta, d.beta);
  real("gamma", q.gamma, d.gamma);
  real("min", q.min, d.min);
  real("max", q.max, d.max);
  flag("tanhGelu", q.tanhGelu, d.tanhGelu);
  flag("upper", q.upper, d.upper);
  if (q.k != d.k)
    os << "  " << name << ".k = " << q.k << "L;\n";
  flag("fmod", q.fmod, d.fmod);
  flag("detectPositive", q.detectPositive, d.detectPositive);
  flag("detectNegative", q.detectNegative, d.detectNegative);
}

/// The source of one run, and what it addresses.
class KernelWriter {
public:
  KernelWriter(const plan::DeviceProgram &prog, const std::vector<int> &refs,
               const Run &run)
      : prog(prog), refs(refs), run(run), space(run.members[0].g.space) {}

  plan::GeneratedKernel write(llvm::StringRef name, llvm::StringRef generator);

private:
  std::string index(uint32_t b) const;
  std::string param(uint32_t b, bool store);
  std::string read(uint32_t b, int32_t type);
  void writeMember(size_t i);
  void writeResult(uint32_t b, int32_t type, const std::string &value);
  void storeResults();
  bool readOutside(uint32_t b) const;

  const plan::DeviceProgram &prog;
  const std::vector<int> &refs;
  const Run &run;
  const flat::Space &space;
  std::string body, setup;
  llvm::raw_string_ostream os{body}, params{setup};
  llvm::SmallVector<uint32_t, 8> order;       // params, in entry order
  llvm::DenseMap<uint32_t, unsigned> slot;    // buffer -> param
  llvm::DenseMap<uint32_t, std::string> live; // buffer -> its register
  llvm::DenseMap<uint32_t, int32_t> pending;  // written, to store at the end
  llvm::DenseMap<uint32_t, bool> loaded, storedTo;
  unsigned next = 0;
};

std::string KernelWriter::index(uint32_t b) const {
  const flat::Map &m = run.maps.find(b)->second;
  std::string s = std::to_string(m.base);
  for (int32_t i = 0; i < space.outerCount; ++i) {
    uint32_t d = space.outer[i];
    if (m.coef[d] != 0)
      s += " + " + std::to_string(m.coef[d]) + "L * i" + std::to_string(d);
  }
  return s;
}

std::string KernelWriter::param(uint32_t b, bool store) {
  auto [it, fresh] = slot.try_emplace(b, unsigned(order.size()));
  if (fresh)
    order.push_back(b);
  (store ? storedTo : loaded)[b] = true;
  return "a.buf[" + std::to_string(it->second) + "]";
}

std::string KernelWriter::read(uint32_t b, int32_t type) {
  auto it = live.find(b);
  if (it != live.end())
    return it->second;
  std::string x = "x" + std::to_string(next++);
  os << "    const double " << x << " = pax::runtime::elements::readReal("
     << param(b, false) << ", " << type << ", " << index(b) << ");\n";
  if (isFloatType(type))
    live[b] = x;
  return x;
}

bool KernelWriter::readOutside(uint32_t b) const {
  return usedOutside(prog, refs, run.members, b);
}

void KernelWriter::writeResult(uint32_t b, int32_t type,
                               const std::string &value) {
  if (!isFloatType(type)) { // stored now, read back as the buffer holds it
    os << "    pax::runtime::elements::writeReal(" << param(b, true) << ", "
       << type << ", " << index(b) << ", " << value << ");\n";
    live.erase(b);
    return;
  }
  std::string x = "x" + std::to_string(next++);
  os << "    const double " << x << " = pax::gen::stored(" << type << ", "
     << value << ");\n";
  live[b] = x;
  if (readOutside(b))
    pending[b] = type;
}

void KernelWriter::writeMember(size_t i) {
  const Member &m = run.members[i];
  os << "    // " << m.c->kind() << " '" << m.c->name() << "'\n";
  llvm::SmallVector<std::string, 4> args;
  for (size_t k = 0; k < m.ins.size(); ++k)
    args.push_back(read(m.ins[k], m.g.inType[k]));
  std::string value;
  if (m.g.op == GenericOp::Copy) {
    value = args[0];
  } else {
    std::string q = "q" + std::to_string(i), in = "in" + std::to_string(i);
    emitParams(m.g.params, q, params);
    os << "    const double " << in << "[" << std::max<size_t>(1, args.size())
       << "] = {" << llvm::join(args, ", ") << "};\n";
    value =
        llvm::formatv("pax::runtime::applyReal(pax::runtime::ScalarOp({0}), "
                      "{1}, {2}, {3})",
                      int(m.g.scalar), in, args.size(), q)
            .str();
  }
  for (size_t r = 0; r < m.outs.size(); ++r)
    writeResult(m.outs[r], m.g.outType[r], value);
}

void KernelWriter::storeResults() {
  for (const Member &m : run.members)
    for (size_t r = 0; r < m.outs.size(); ++r) {
      uint32_t b = m.outs[r];
      if (!pending.count(b) || storedTo.count(b))
        continue;
      os << "    pax::runtime::elements::writeReal(" << param(b, true) << ", "
         << m.g.outType[r] << ", " << index(b) << ", " << live[b] << ");\n";
    }
}

plan::GeneratedKernel KernelWriter::write(llvm::StringRef name,
                                          llvm::StringRef generator) {
  for (size_t i = 0; i < run.members.size(); ++i)
    writeMember(i);
  storeResults();
  plan::GeneratedKernel k;
  k.set_name(name.str());
  k.set_first(run.first);
  k.set_count(uint32_t(run.members.size()));
  k.set_points(space.outerPoints);
  k.set_generator(generator.str());
  std::string src;
  llvm::raw_string_ostream out(src);
  out << "// " << name << ": generated by " << generator << " for fused kernel "
      << run.members[0].c->fused() << ", " << space.outerPoints << " points\n";
  for (const Member &m : run.members) {
    k.add_ops(m.c->kind() + " '" + m.c->name() + "'");
    out << "//   " << k.ops(k.ops_size() - 1) << "\n";
  }
  out << "#include \"runtime/GeneratedKernel.h\"\n\nPAX_GENERATED_KERNEL("
      << name << ") {\n"
      << setup << "  PAX_FOR_POINTS(p) {\n    int64_t r = p;\n";
  std::vector<std::string> names;
  llvm::SmallVector<int64_t, 8> extents;
  for (int32_t i = 0; i < space.outerCount; ++i) {
    names.push_back("i" + std::to_string(space.outer[i]));
    extents.push_back(space.extents[space.outer[i]]);
  }
  emitCoordinates(out, "    ", "r", names, extents);
  out << body << "  }\n}\n";
  k.set_source(src);
  setParamsAndTraffic(
      k, prog, order, [&](uint32_t b) { return loaded.count(b) > 0; },
      [&](uint32_t b) { return storedTo.count(b) > 0; }, space.outerPoints);
  return k;
}

void emitCoordinates(llvm::raw_ostream &os, llvm::StringRef indent,
                     llvm::StringRef flat, llvm::ArrayRef<std::string> names,
                     llvm::ArrayRef<int64_t> extents) {
  for (size_t k = names.size(); k-- > 0;) {
    if (k == 0)
      os << indent << "const int64_t " << names[k] << " = " << flat << ";\n";
    else
      os << indent << "const int64_t " << names[k] << " = " << flat << " % "
         << extents[k] << "L;\n"
         << indent << flat << " /= " << extents[k] << "L;\n";
  }
}

void setParamsAndTraffic(plan::GeneratedKernel &k,
                         const plan::DeviceProgram &prog,
                         llvm::ArrayRef<uint32_t> order,
                         llvm::function_ref<bool(uint32_t)> loaded,
                         llvm::function_ref<bool(uint32_t)> stored,
                         int64_t elements) {
  int64_t traffic = 0;
  for (uint32_t b : order) {
    k.add_params(b);
    const plan::Buffer &buf = prog.buffers(int(b));
    int64_t elems = 1;
    for (int64_t s : buf.shape())
      elems *= s;
    int64_t bytes = std::min(elems, elements) * dtypeBytes(buf.dtype());
    traffic += (loaded(b) ? bytes : 0) + (stored(b) ? bytes : 0);
  }
  k.set_traffic_bytes(traffic);
}

} // namespace kernelgen

using namespace kernelgen;

const std::string &generatorId() {
  static const std::string id = [] {
    uint64_t h = 1469598103934665603ull; // FNV-1a over the headers
    for (const KernelHeader &k : kHeaders)
      for (const char *c = k.text; *c; ++c)
        h = (h ^ uint8_t(*c)) * 1099511628211ull;
    return llvm::formatv("paxc {0} headers {1:x16}", PAX_VERSION, h).str();
  }();
  return id;
}

/// Writes \p run to \p kernels as point kernels: its longest prefix whose
/// buffers lie apart in the arena, then the rest likewise; empties it.
static void writePointRun(const plan::DeviceProgram &program,
                          const std::vector<int> &refs, Run &run,
                          std::vector<plan::GeneratedKernel> &kernels) {
  std::vector<Member> rest = std::move(run.members);
  uint32_t at = run.first;
  while (!rest.empty()) {
    size_t n = rest.size();
    while (n > 1 &&
           !apartInArena(program, refs, llvm::ArrayRef(rest).take_front(n)))
      --n;
    Run part;
    part.first = at;
    for (size_t i = 0; i < n; ++i)
      part.tryAdd(Member(rest[i]));
    std::string name = llvm::formatv("pax_d{0}_{1}_{2}", program.device(),
                                     rest[0].c->fused(), at)
                           .str();
    kernels.push_back(
        KernelWriter(program, refs, part).write(name, generatorId()));
    rest.erase(rest.begin(), rest.begin() + long(n));
    at += uint32_t(n);
  }
  run = Run();
}

unsigned generateKernels(plan::DeviceProgram &program) {
  program.clear_kernels();
  std::vector<int> refs = referenceCounts(program);
  std::vector<plan::GeneratedKernel> kernels;
  Run run;
  auto flush = [&] { writePointRun(program, refs, run, kernels); };
  for (int i = 0; i < program.instructions_size(); ++i) {
    const plan::Instruction &inst = program.instructions(i);
    bool fused = inst.has_compute() && !inst.compute().fused().empty();
    // A row kernel from here (a reduction among its computes) first.
    if (fused) {
      std::vector<plan::GeneratedKernel> row;
      if (unsigned n = generateRowKernel(program, refs, i, row)) {
        flush();
        kernels.push_back(std::move(row[0]));
        i += int(n) - 1;
        continue;
      }
    }
    std::optional<Member> m;
    if (fused)
      m = describeMember(program, inst.compute());
    if (!m) {
      flush();
      continue;
    }
    if (run.members.empty())
      run.first = uint32_t(i);
    if (run.tryAdd(std::move(*m)))
      continue;
    flush();
    run.first = uint32_t(i);
    run.tryAdd(std::move(*m)); // alone, it always fits
  }
  flush();
  for (plan::GeneratedKernel &k : kernels)
    *program.add_kernels() = std::move(k);
  return unsigned(kernels.size());
}

std::string kernelsIdentity(const plan::DeviceProgram &prog) {
  std::string id;
  for (const plan::GeneratedKernel &k : prog.kernels())
    id += llvm::formatv("{0}:{1}:{2}:{3};", k.name(), k.source().size(),
                        k.first(), k.count())
              .str();
  return id;
}

llvm::ArrayRef<KernelHeader> kernelHeaders() { return kHeaders; }

} // namespace pax::runtime
