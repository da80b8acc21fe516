//===- GenerateRowKernels.cpp - Generated kernels over rows ---------------===//
//
// A row kernel computes a run of a fused group's computes that reduce over
// the last dims of their values (a layer norm as exported: a mean, a
// subtraction, a square, another mean, ...) together with the elementwise
// ops around them, one thread per row. The run's values are of two kinds:
// element values over the row and column dims E = R x C (the elementwise
// ops', and the reductions' inputs), and row values over R alone (the
// reductions' results, and the elementwise ops over them). A reduction is a
// loop over the row's columns that computes its input there, recomputing
// the elementwise ops it depends on from the run's inputs; an elementwise
// op over rows is computed once per row; the values that something outside
// the run reads are stored, the element values in a last loop over the
// columns. So the run reads its inputs once per reduction (the row stays in
// cache) and writes only what is read elsewhere.
//
//===----------------------------------------------------------------------===//
#include "runtime/GenerateKernels.h"
#include "runtime/GenerateKernelsInternal.h"
#include "runtime/GeneratedKernel.h"

#include "codegen/plan/PlanFile.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

namespace pax::runtime::kernelgen {

namespace {

/// What a member of a row run computes over.
enum class Over { Elements, Rows, Reduction };

/// A buffer's index in a row run: a base and a coefficient per E dim.
struct Index {
  int64_t base = 0;
  llvm::SmallVector<int64_t, 8> coef;
  bool operator==(const Index &o) const {
    return base == o.base && coef == o.coef;
  }
};

/// The dims of \p s of extent above 1: its outer dims, then (\p inner) its
/// inner ones.
llvm::SmallVector<uint32_t, 8> dimsOf(const flat::Space &s, bool inner) {
  llvm::SmallVector<uint32_t, 8> dims;
  for (int32_t i = 0; i < s.outerCount; ++i)
    if (s.extents[s.outer[i]] > 1)
      dims.push_back(s.outer[i]);
  for (int32_t i = 0; inner && i < s.innerCount; ++i)
    if (s.extents[s.inner[i]] > 1)
      dims.push_back(s.inner[i]);
  return dims;
}

llvm::SmallVector<int64_t, 8> extentsOf(const flat::Space &s,
                                        llvm::ArrayRef<uint32_t> dims) {
  llvm::SmallVector<int64_t, 8> e;
  for (uint32_t d : dims)
    e.push_back(s.extents[d]);
  return e;
}

/// A row run being gathered.
class RowRun {
public:
  bool tryAdd(Member &&m);
  bool complete() const { return hasReduction && members.size() > 1; }

  std::vector<Member> members;
  std::vector<Over> over;
  llvm::SmallVector<int64_t, 8> rowExt, colExt, elemExt;
  llvm::DenseMap<uint32_t, Index> index; // every buffer the run touches
  llvm::DenseMap<uint32_t, bool> isRow;  // written: a row value?
  llvm::DenseMap<uint32_t, size_t> producer;
  bool hasReduction = false;

private:
  /// What \p m computes over, and the run's extents with it.
  struct Shape {
    Over over;
    llvm::SmallVector<int64_t, 8> rows, cols, elems;
  };
  std::optional<Shape> classify(const Member &m) const;
  bool fits(uint32_t b, const Index &ix, bool reads, Over o,
            const llvm::DenseMap<uint32_t, Index> &added) const;
};

std::optional<RowRun::Shape> RowRun::classify(const Member &m) const {
  const flat::Space &s = m.g.space;
  Shape sh{Over::Elements, rowExt, colExt, elemExt};
  if (m.g.op == GenericOp::Reduce) {
    auto outer = extentsOf(s, dimsOf(s, false));
    auto all = extentsOf(s, dimsOf(s, true));
    if (all.size() == outer.size() || outer.empty() ||
        (!elemExt.empty() && all != elemExt) ||
        (hasReduction && outer != rowExt))
      return std::nullopt;
    sh.over = Over::Reduction;
    sh.rows = outer;
    sh.cols.assign(all.begin() + long(outer.size()), all.end());
    sh.elems = all;
    return sh;
  }
  auto ext = extentsOf(s, dimsOf(s, false));
  if (hasReduction && ext == rowExt) {
    sh.over = Over::Rows;
    return sh;
  }
  if (elemExt.empty())
    sh.elems = ext;
  if (ext != sh.elems)
    return std::nullopt;
  return sh;
}

/// Whether buffer \p b's index \p ix agrees with the run's (and with
/// \p added, the member's so far).
bool RowRun::fits(uint32_t b, const Index &ix, bool reads, Over o,
                  const llvm::DenseMap<uint32_t, Index> &added) const {
  for (const auto *seen : {&index, &added}) {
    auto it = seen->find(b);
    if (it == seen->end())
      continue;
    if (!reads || !(it->second == ix))
      return false; // written once, and not after it was read
  }
  // A row op reads row values, or inputs through row dims only.
  auto w = isRow.find(b);
  return !(reads && o == Over::Rows && w != isRow.end() && !w->second);
}

bool RowRun::tryAdd(Member &&m) {
  std::optional<Shape> sh = classify(m);
  if (!sh || (sh->over == Over::Rows && sh->cols.empty()))
    return false;
  for (int32_t r = 0; r < m.g.outputs; ++r)
    if (!isFloatType(m.g.outType[r]))
      return false;
  auto dims = dimsOf(m.g.space, sh->over == Over::Reduction);
  auto indexOf = [&](const flat::Map &map) {
    Index ix;
    ix.base = map.base;
    for (uint32_t d : dims)
      ix.coef.push_back(map.coef[d]);
    ix.coef.resize(sh->elems.size(), 0); // a row op: no column coefficients
    return ix;
  };
  llvm::DenseMap<uint32_t, Index> added;
  for (int32_t k = 0; k < m.g.inputs; ++k) {
    Index ix = indexOf(m.g.in[k]);
    if (!fits(m.ins[size_t(k)], ix, true, sh->over, added))
      return false;
    added.try_emplace(m.ins[size_t(k)], ix);
  }
  for (int32_t r = 0; r < m.g.outputs; ++r) {
    Index ix = indexOf(m.g.out[r]);
    if (!fits(m.outs[size_t(r)], ix, false, sh->over, added))
      return false;
    added.try_emplace(m.outs[size_t(r)], ix);
  }
  if (index.size() + added.size() > size_t(gen::kMaxParams))
    return false;
  for (auto &[b, ix] : added)
    index.try_emplace(b, ix);
  for (uint32_t b : m.outs) {
    isRow[b] = sh->over != Over::Elements;
    producer[b] = members.size();
  }
  rowExt = sh->rows;
  colExt = sh->cols;
  elemExt = sh->elems;
  hasReduction |= sh->over == Over::Reduction;
  over.push_back(sh->over);
  members.push_back(std::move(m));
  return true;
}

/// The source of a complete row run.
class RowWriter {
public:
  RowWriter(const plan::DeviceProgram &prog, const std::vector<int> &refs,
            const RowRun &run)
      : prog(prog), refs(refs), run(run) {}
  plan::GeneratedKernel write(llvm::StringRef name, uint32_t first);

private:
  std::string indexExpr(uint32_t b) const;
  std::string param(uint32_t b, bool store);
  std::string element(uint32_t b, llvm::raw_ostream &os);
  std::string apply(size_t i, llvm::ArrayRef<std::string> args,
                    llvm::raw_ostream &os);
  void rowMember(size_t i);
  void reduction(size_t i);
  void columnLoop(llvm::raw_ostream &os) const;
  void stores();

  const plan::DeviceProgram &prog;
  const std::vector<int> &refs;
  const RowRun &run;
  std::string body, setup;
  llvm::raw_string_ostream os{body}, params{setup};
  llvm::SmallVector<uint32_t, 8> order;
  llvm::DenseMap<uint32_t, unsigned> slot;
  llvm::DenseMap<uint32_t, bool> loaded, storedTo;
  llvm::DenseMap<uint32_t, std::string> rowVar, memo;
  llvm::DenseSet<size_t> declared;
  unsigned next = 0;
};

std::string RowWriter::indexExpr(uint32_t b) const {
  const Index &ix = run.index.find(b)->second;
  std::string s = std::to_string(ix.base);
  size_t nr = run.rowExt.size();
  for (size_t k = 0; k < ix.coef.size(); ++k)
    if (ix.coef[k] != 0)
      s += " + " + std::to_string(ix.coef[k]) + "L * " +
           (k < nr ? "u" + std::to_string(k) : "v" + std::to_string(k - nr));
  return s;
}

std::string RowWriter::param(uint32_t b, bool store) {
  auto [it, fresh] = slot.try_emplace(b, unsigned(order.size()));
  if (fresh)
    order.push_back(b);
  (store ? storedTo : loaded)[b] = true;
  return "a.buf[" + std::to_string(it->second) + "]";
}

/// The value of \p b at the row's current column (inside a column loop).
std::string RowWriter::element(uint32_t b, llvm::raw_ostream &out) {
  if (auto it = rowVar.find(b); it != rowVar.end())
    return it->second;
  if (auto it = memo.find(b); it != memo.end())
    return it->second;
  std::string x;
  auto p = run.producer.find(b);
  if (p != run.producer.end() && run.over[p->second] == Over::Elements) {
    const Member &m = run.members[p->second];
    llvm::SmallVector<std::string, 4> args;
    for (uint32_t in : m.ins)
      args.push_back(element(in, out));
    x = apply(p->second, args, out);
  } else {
    x = "x" + std::to_string(next++);
    int32_t type = int32_t(prog.buffers(int(b)).dtype());
    out << "      const double " << x << " = pax::runtime::elements::readReal("
        << param(b, false) << ", " << type << ", " << indexExpr(b) << ");\n";
  }
  memo[b] = x;
  return x;
}

/// Member \p i applied to \p args: its value as its result buffer holds it.
std::string RowWriter::apply(size_t i, llvm::ArrayRef<std::string> args,
                             llvm::raw_ostream &out) {
  const Member &m = run.members[i];
  std::string x = "x" + std::to_string(next++);
  std::string value = args.empty() ? "0.0" : args[0];
  if (m.g.op == GenericOp::Pointwise) {
    std::string q = "q" + std::to_string(i), in = "in" + std::to_string(next++);
    if (declared.insert(i).second) // the params, once
      emitParams(m.g.params, q, params);
    out << "      const double " << in << "["
        << std::max<size_t>(1, args.size()) << "] = {" << llvm::join(args, ", ")
        << "};\n";
    value =
        llvm::formatv("pax::runtime::applyReal(pax::runtime::ScalarOp({0}), "
                      "{1}, {2}, {3})",
                      int(m.g.scalar), in, args.size(), q)
            .str();
  }
  out << "      const double " << x << " = pax::gen::stored(" << m.g.outType[0]
      << ", " << value << ");\n";
  return x;
}

void RowWriter::columnLoop(llvm::raw_ostream &out) const {
  int64_t cols = 1;
  for (int64_t e : run.colExt)
    cols *= e;
  out << "    PAX_FOR_COLUMNS(c, " << cols << "L) {\n"
      << "      int64_t q = c;\n";
  std::vector<std::string> names;
  for (size_t i = 0; i < run.colExt.size(); ++i)
    names.push_back("v" + std::to_string(i));
  emitCoordinates(out, "      ", "q", names, run.colExt);
}

void RowWriter::rowMember(size_t i) {
  const Member &m = run.members[i];
  os << "    // " << m.c->kind() << " '" << m.c->name() << "'\n";
  llvm::SmallVector<std::string, 4> args;
  for (uint32_t in : m.ins)
    args.push_back(element(in, os)); // row values, or loads by row
  memo.clear();
  std::string x = apply(i, args, os);
  for (uint32_t b : m.outs)
    rowVar[b] = x;
}

void RowWriter::reduction(size_t i) {
  const Member &m = run.members[i];
  std::string acc = "acc" + std::to_string(i);
  os << "    // " << m.c->kind() << " '" << m.c->name() << "'\n"
     << "    pax::runtime::Accumulator<double> " << acc
     << "(pax::runtime::ReduceOp(" << int(m.g.reduce) << "), false);\n";
  columnLoop(os);
  memo.clear();
  std::string v = element(m.ins[0], os);
  os << "      " << acc << ".add(" << v << ", c);\n    }\n"
     << "    pax::gen::blockMerge(" << acc << ", pax_scratch);\n";
  memo.clear();
  std::string x = "x" + std::to_string(next++);
  os << "    const double " << x << " = pax::gen::stored(" << m.g.outType[0]
     << ", " << acc << ".finishReal(" << m.g.globalInnerPoints << "L));\n";
  rowVar[m.outs[0]] = x;
}

void RowWriter::stores() {
  std::string loop;
  llvm::raw_string_ostream l(loop);
  bool any = false;
  for (const Member &m : run.members)
    for (size_t r = 0; r < m.outs.size(); ++r) {
      uint32_t b = m.outs[r];
      if (!usedOutside(prog, refs, run.members, b) || storedTo.count(b))
        continue;
      std::string store =
          "pax::runtime::elements::writeReal(" + param(b, true) + ", " +
          std::to_string(m.g.outType[r]) + ", " + indexExpr(b) + ", ";
      if (run.isRow.lookup(b)) {
        os << "    if (PAX_FIRST_THREAD)\n      " << store << rowVar[b]
           << ");\n";
        continue;
      }
      if (!any)
        columnLoop(l);
      any = true;
      std::string v = element(b, l);
      l << "      " << store << v << ");\n";
    }
  if (any)
    os << loop << "    }\n";
}

plan::GeneratedKernel RowWriter::write(llvm::StringRef name, uint32_t first) {
  for (size_t i = 0; i < run.members.size(); ++i) {
    if (run.over[i] == Over::Rows)
      rowMember(i);
    else if (run.over[i] == Over::Reduction)
      reduction(i);
  }
  memo.clear();
  stores();
  int64_t rows = 1, cols = 1;
  for (int64_t e : run.rowExt)
    rows *= e;
  for (int64_t e : run.colExt)
    cols *= e;
  plan::GeneratedKernel k;
  k.set_name(name.str());
  k.set_first(first);
  k.set_count(uint32_t(run.members.size()));
  k.set_points(rows);
  k.set_rows(true);
  k.set_generator(generatorId());
  std::string src;
  llvm::raw_string_ostream out(src);
  out << "// " << name << ": generated by " << generatorId()
      << " for fused kernel " << run.members[0].c->fused() << ", " << rows
      << " rows of " << cols << "\n";
  for (const Member &m : run.members) {
    k.add_ops(m.c->kind() + " '" + m.c->name() + "'");
    out << "//   " << k.ops(k.ops_size() - 1) << "\n";
  }
  out << "#include \"runtime/GeneratedKernel.h\"\n\nPAX_GENERATED_KERNEL("
      << name << ") {\n  PAX_ROW_SCRATCH;\n"
      << setup << "  PAX_FOR_ROWS(p) {\n    int64_t r = p;\n";
  std::vector<std::string> names;
  for (size_t i = 0; i < run.rowExt.size(); ++i)
    names.push_back("u" + std::to_string(i));
  emitCoordinates(out, "    ", "r", names, run.rowExt);
  out << body << "  }\n}\n";
  k.set_source(src);
  setParamsAndTraffic(
      k, prog, order, [&](uint32_t b) { return loaded.count(b) > 0; },
      [&](uint32_t b) { return storedTo.count(b) > 0; }, rows * cols);
  return k;
}

} // namespace

unsigned generateRowKernel(const plan::DeviceProgram &prog,
                           const std::vector<int> &refs, int at,
                           std::vector<plan::GeneratedKernel> &out) {
  RowRun run;
  const std::string &group = prog.instructions(at).compute().fused();
  for (int i = at; i < prog.instructions_size(); ++i) {
    const plan::Instruction &inst = prog.instructions(i);
    if (!inst.has_compute() || inst.compute().fused() != group)
      break;
    std::optional<Member> m = describeMember(prog, inst.compute(), true);
    if (!m || !run.tryAdd(std::move(*m)))
      break;
  }
  // The longest complete prefix whose buffers lie apart in the arena.
  while (!run.members.empty() &&
         (!run.complete() ||
          !apartInArena(prog, refs, run.members, /*inPlaceToo=*/false))) {
    RowRun shorter;
    for (size_t i = 0; i + 1 < run.members.size(); ++i)
      shorter.tryAdd(Member(run.members[i]));
    run = std::move(shorter);
  }
  if (run.members.empty())
    return 0;
  std::string name =
      llvm::formatv("pax_d{0}_{1}_{2}", prog.device(), group, at).str();
  out.push_back(RowWriter(prog, refs, run).write(name, uint32_t(at)));
  return unsigned(run.members.size());
}

} // namespace pax::runtime::kernelgen
