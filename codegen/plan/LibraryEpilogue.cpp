//===- LibraryEpilogue.cpp - A product's epilogue a BLAS library runs -----===//
#include "codegen/plan/LibraryEpilogue.h"

#include "codegen/plan/Access.h"
#include "codegen/plan/PlanFile.h"

#include <optional>
#include <string>

namespace pax::plan {
namespace {

/// String attribute \p name of \p c, or "".
std::string stringAttr(const Compute &c, const std::string &name) {
  for (const Attr &a : c.attrs())
    if (a.name() == name)
      return a.s();
  return "";
}

/// Real attribute \p name of \p c, or \p dflt.
double realAttr(const Compute &c, const std::string &name, double dflt) {
  for (const Attr &a : c.attrs())
    if (a.name() == name)
      return a.has_f() ? double(a.f()) : double(a.i());
  return dflt;
}

/// How many instructions read each buffer, and the program's outputs.
std::vector<int> readersOf(const DeviceProgram &prog) {
  std::vector<int> readers(size_t(prog.buffers_size()), 0);
  auto read = [&](uint32_t b) {
    if (b < readers.size())
      ++readers[b];
  };
  for (const Instruction &inst : prog.instructions()) {
    if (inst.has_compute())
      for (const Access &a : inst.compute().inputs())
        read(a.buffer());
    else if (inst.has_collective())
      read(inst.collective().input());
    else if (inst.has_slice())
      read(inst.slice().input());
  }
  for (const Binding &out : prog.outputs())
    read(out.buffer());
  return readers;
}

/// Matches epilogues against one program.
class Matcher {
public:
  explicit Matcher(const DeviceProgram &prog)
      : prog(prog), readers(readersOf(prog)) {}

  /// The epilogue of product \p i that kernel \p k computes, if a library
  /// runs them as one.
  std::optional<LibraryEpilogue> match(uint32_t i,
                                       const GeneratedKernel &k) const;

private:
  /// Whether \p a is buffer \p b's plain dims in order, \p b of \p shape
  /// and of its element type.
  bool plainOver(const Access &a, const Buffer &shape) const;
  /// Whether product \p p's operands and result have types a library
  /// product takes with an epilogue: all f32, or A and B of one 16-bit
  /// float type and the result of that type or f32 (fp32 accumulation).
  bool typesSuit(const Compute &p) const;
  /// Whether product \p c's own C is a bias: a row vector over its result's
  /// last dim, added with beta 1, of the result's or the operands' type.
  bool biasOf(const Compute &c) const;
  /// Takes pointwise compute \p c of the epilogue, reading \p from, into
  /// \p e; false where it is not one a library runs.
  bool take(const Compute &c, uint32_t from, LibraryEpilogue &e) const;

  const DeviceProgram &prog;
  std::vector<int> readers;
};

bool Matcher::plainOver(const Access &a, const Buffer &shape) const {
  if (a.buffer() >= uint32_t(prog.buffers_size()))
    return false;
  const Buffer &b = prog.buffers(int(a.buffer()));
  if (b.dtype() != shape.dtype() || b.shape_size() != shape.shape_size())
    return false;
  for (int d = 0; d < b.shape_size(); ++d)
    if (b.shape(d) != shape.shape(d))
      return false;
  return plainDimsInOrder(a);
}

bool Matcher::biasOf(const Compute &c) const {
  const Access &a = c.inputs(2);
  if (!addsRowBias(c) || a.buffer() >= uint32_t(prog.buffers_size()))
    return false;
  // Of the result's type, or of the operands' (a 16-bit product into f32).
  DType t = prog.buffers(int(a.buffer())).dtype();
  return t == prog.buffers(int(c.outputs(0).buffer())).dtype() ||
         t == prog.buffers(int(c.inputs(0).buffer())).dtype();
}

bool Matcher::typesSuit(const Compute &p) const {
  if (p.outputs(0).buffer() >= uint32_t(prog.buffers_size()))
    return false;
  DType t = prog.buffers(int(p.outputs(0).buffer())).dtype();
  if (t != F32 && t != BF16 && t != F16)
    return false;
  DType in[2];
  for (int k = 0; k < 2; ++k) {
    if (p.inputs(k).buffer() >= uint32_t(prog.buffers_size()))
      return false;
    in[k] = prog.buffers(int(p.inputs(k).buffer())).dtype();
  }
  // A 16-bit product may write f32 (a cast up folded into it).
  return in[0] == in[1] &&
         (in[0] == t || (t == F32 && (in[0] == BF16 || in[0] == F16)));
}

bool Matcher::take(const Compute &c, uint32_t from, LibraryEpilogue &e) const {
  const Buffer &shape = prog.buffers(int(from));
  if (c.outputs_size() != 1 || !plainOver(c.outputs(0), shape) ||
      readers[from] != 1)
    return false;
  for (const Access &a : c.inputs())
    if (!plainOver(a, shape))
      return false;
  bool activated = e.activation != LibraryEpilogue::Activation::None;
  if (c.kind() == "add" && c.inputs_size() == 2 && e.addend < 0 && !activated) {
    int at = c.inputs(0).buffer() == from ? 0 : 1;
    if (c.inputs(at).buffer() != from || c.inputs(1 - at).buffer() == from)
      return false;
    e.addend = c.inputs(1 - at).buffer();
    return true;
  }
  if (c.inputs_size() != 1 || c.inputs(0).buffer() != from || activated)
    return false;
  if (c.kind() == "relu")
    e.activation = LibraryEpilogue::Activation::Relu;
  else if (c.kind() == "gelu" && stringAttr(c, "approximate") == "tanh")
    e.activation = LibraryEpilogue::Activation::GeluTanh;
  return activated != (e.activation != LibraryEpilogue::Activation::None);
}

std::optional<LibraryEpilogue> Matcher::match(uint32_t i,
                                              const GeneratedKernel &k) const {
  if (k.first() != i + 1 || k.count() < 1 ||
      int64_t(k.first()) + k.count() > prog.instructions_size())
    return std::nullopt;
  const Instruction &head = prog.instructions(int(i));
  if (!head.has_compute())
    return std::nullopt;
  const Compute &p = head.compute();
  if ((p.kind() != "gemm" && p.kind() != "matmul") || p.fused().empty() ||
      p.outputs_size() != 1 || p.inputs_size() < 2 || p.inputs_size() > 3 ||
      !typesSuit(p))
    return std::nullopt;
  LibraryEpilogue e;
  e.product = i;
  e.kernel = &k;
  uint32_t from = p.outputs(0).buffer();
  for (uint32_t j = k.first(); j < k.first() + k.count(); ++j) {
    const Instruction &inst = prog.instructions(int(j));
    if (!inst.has_compute() || inst.compute().fused() != p.fused() ||
        !take(inst.compute(), from, e))
      return std::nullopt;
    from = inst.compute().outputs(0).buffer();
  }
  if (p.inputs_size() == 3) {
    // The product's own C: a bias, or else the library's C, of the
    // result's shape, unless the epilogue adds one already.
    const Buffer &result = prog.buffers(int(p.outputs(0).buffer()));
    if (biasOf(p))
      e.bias = p.inputs(2).buffer();
    else if (e.addend < 0 && realAttr(p, "beta", 1.0) == 1.0 &&
             plainOver(p.inputs(2), result))
      e.addend = p.inputs(2).buffer();
    else
      return std::nullopt;
  }
  // One call reads the product's operands while it writes the result:
  // only the addend may lie where the result goes, exactly.
  for (const Access &a : p.inputs())
    if (int64_t(a.buffer()) != e.addend &&
        planBuffersShareBytes(prog, a.buffer(), from))
      return std::nullopt;
  if (e.addend >= 0 && planBuffersShareBytes(prog, uint32_t(e.addend), from) &&
      prog.buffers(int(e.addend)).offset() != prog.buffers(int(from)).offset())
    return std::nullopt;
  e.output = from;
  return e;
}

} // namespace

bool addsRowBias(const Compute &c) {
  if (c.inputs_size() != 3 || c.outputs_size() != 1)
    return false;
  const Access &a = c.inputs(2), &out = c.outputs(0);
  if (a.exprs_size() != 1 || realAttr(c, "beta", 1.0) != 1.0 ||
      out.exprs_size() < 1)
    return false;
  const AccessExpr &e = a.exprs(0), &last = out.exprs(out.exprs_size() - 1);
  return e.kind() == AccessExpr::AFFINE && e.dims_size() == 1 &&
         e.stride() == 1 && e.offset() == 0 &&
         last.kind() == AccessExpr::AFFINE && last.dims_size() == 1 &&
         last.stride() == 1 && last.offset() == 0 && e.dims(0) == last.dims(0);
}

std::vector<LibraryEpilogue> libraryEpilogues(const DeviceProgram &prog) {
  Matcher m(prog);
  std::vector<LibraryEpilogue> out;
  auto kernel = prog.kernels().begin();
  for (int i = 0; i + 1 < prog.instructions_size(); ++i) {
    while (kernel != prog.kernels().end() && kernel->first() <= uint32_t(i))
      ++kernel;
    if (kernel == prog.kernels().end())
      break;
    if (auto e = m.match(uint32_t(i), *kernel))
      out.push_back(*e);
  }
  return out;
}

} // namespace pax::plan
