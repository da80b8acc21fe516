//===- CarryUpdates.cpp - Training updates kept on the devices -----------===//
#include "codegen/CarryUpdates.h"

#include "codegen/plan/Access.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"

#include <optional>

namespace pax {

/// True when instruction \p i of \p prog reads buffer \p b.
static bool readsBuffer(const plan::Instruction &inst, uint32_t b) {
  if (inst.has_compute())
    return llvm::any_of(inst.compute().inputs(),
                        [&](const plan::Access &a) { return a.buffer() == b; });
  if (inst.has_collective())
    return inst.collective().input() == b;
  return inst.has_slice() && inst.slice().input() == b;
}

/// True when compute \p c writes every element of \p buf through its
/// one output, plain dims each once.
static bool writesWholeOnce(const plan::Compute &c, const plan::Buffer &buf) {
  return c.outputs_size() == 1 && plan::coversPlainly(c, c.outputs(0), buf);
}

/// True when \p c reads \p w, if at all, at the points compute \p writer
/// writes (the same dims, the same expressions as its output): a kernel
/// that computes both point by point reads each element before it is
/// written.
static bool readsAtWrittenPoints(const plan::Compute &c, uint32_t w,
                                 const plan::Compute &writer) {
  bool sameSpace =
      llvm::equal(c.iters(), writer.iters(),
                  [](const plan::IterDim &x, const plan::IterDim &y) {
                    return x.extent() == y.extent() && x.kind() == y.kind();
                  });
  return llvm::all_of(c.inputs(), [&](const plan::Access &a) {
    return a.buffer() != w ||
           (sameSpace && plan::sameExprs(a, writer.outputs(0)));
  });
}

/// The instruction that may write update \p u in place of weight \p w:
/// the one compute writing u, a pointwise kernel that writes all of it,
/// after which nothing reads or writes w, and which, like the rest of its
/// fused group, reads w (if at all) at the points it writes.
static std::optional<int> inPlaceWriter(const plan::DeviceProgram &prog,
                                        uint32_t u, uint32_t w) {
  int writer = -1, n = prog.instructions_size();
  for (int i = 0; i < n; ++i) {
    const plan::Instruction &inst = prog.instructions(i);
    bool writes =
        inst.has_compute() &&
        llvm::any_of(inst.compute().outputs(), [&](const plan::Access &a) {
          return a.buffer() == u || a.buffer() == w;
        });
    if (writes && writer >= 0)
      return std::nullopt; // written twice
    if (writes)
      writer = i;
    else if (writer >= 0 && readsBuffer(inst, w))
      return std::nullopt; // read after the update
  }
  if (writer < 0)
    return std::nullopt;
  const plan::Compute &c = prog.instructions(writer).compute();
  if (c.kernel() != "pointwise" || c.outputs(0).buffer() != u ||
      !writesWholeOnce(c, prog.buffers(int(u))) ||
      !readsAtWrittenPoints(c, w, c))
    return std::nullopt;
  for (int i = 0; i < n && !c.fused().empty(); ++i) {
    const plan::Instruction &inst = prog.instructions(i);
    if (inst.has_compute() && inst.compute().fused() == c.fused() &&
        !readsAtWrittenPoints(inst.compute(), w, c))
      return std::nullopt;
  }
  return writer;
}

/// Keeps update \p b (output `update/NAME`) of \p prog in the buffer \p w
/// its weight block is loaded into: computed there in place where
/// inPlaceWriter allows (the output bound to w), else copied there by a
/// slice at the program's end.
static void keepUpdateIn(plan::DeviceProgram &prog, plan::Binding &b,
                         uint32_t w) {
  uint32_t u = b.buffer();
  if (u == w)
    return; // the update is the weight as loaded
  if (std::optional<int> writer = inPlaceWriter(prog, u, w)) {
    prog.mutable_instructions(*writer)
        ->mutable_compute()
        ->mutable_outputs(0)
        ->set_buffer(w);
    // What reads the update reads it there (after its writer: the new
    // values).
    for (plan::Instruction &inst : *prog.mutable_instructions()) {
      if (inst.has_compute())
        for (plan::Access &a : *inst.mutable_compute()->mutable_inputs())
          if (a.buffer() == u)
            a.set_buffer(w);
      if (inst.has_collective() && inst.collective().input() == u)
        inst.mutable_collective()->set_input(w);
      if (inst.has_slice() && inst.slice().input() == u)
        inst.mutable_slice()->set_input(w);
    }
    b.set_buffer(w);
    return;
  }
  plan::Slice &copy = *prog.add_instructions()->mutable_slice();
  copy.set_input(u);
  copy.set_output(w);
  for (int d = 0; d < prog.buffers(int(u)).shape_size(); ++d)
    copy.add_offset(0);
}

void carryUpdates(plan::DeviceProgram &prog,
                  llvm::ArrayRef<std::string> names) {
  for (int k = 0; k < prog.outputs_size(); ++k) {
    plan::Binding &b = *prog.mutable_outputs(k);
    if (b.index() >= names.size())
      continue;
    llvm::StringRef name = names[b.index()];
    if (!name.consume_front("update/"))
      continue;
    for (int i = 0, e = prog.instructions_size(); i < e; ++i) {
      if (!prog.instructions(i).has_load())
        continue;
      const plan::LoadWeight &l = prog.instructions(i).load();
      uint32_t w = l.buffer();
      const plan::Buffer &u = prog.buffers(int(b.buffer()));
      if (l.tensor() != name || !llvm::equal(l.offset(), b.offset()) ||
          !llvm::equal(prog.buffers(int(w)).shape(), u.shape()) ||
          prog.buffers(int(w)).dtype() != u.dtype() ||
          llvm::is_contained(prog.carried(), w))
        continue;
      prog.mutable_buffers(int(w))->set_persistent(true);
      prog.add_carried(w);
      keepUpdateIn(prog, b, w);
    }
  }
}

} // namespace pax
