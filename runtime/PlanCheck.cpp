//===- PlanCheck.cpp - A plan checked whole before anything runs ----------===//
#include "runtime/PlanCheck.h"

#include "codegen/plan/Kernels.h"
#include "runtime/Tensor.h"

#include "llvm/ADT/Twine.h"

#include <vector>

namespace pax::runtime {

namespace {
/// The elements of \p shape, or -1 when a dim is negative or the product
/// passes kMaxPlanElements.
int64_t elementsOf(const google::protobuf::RepeatedField<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return -1;
    if (d != 0 && n > kMaxPlanElements / d)
      return -1;
    n *= d;
  }
  return n;
}

bool validDType(int d) { return plan::DType_IsValid(d); }

/// A box of \p rank dims, or empty.
llvm::Error checkBox(const plan::Box &b, const llvm::Twine &what) {
  if (b.empty())
    return llvm::Error::success();
  if (b.lo_size() != b.size_size())
    return llvm::createStringError(what + ": a box with " +
                                   llvm::Twine(b.lo_size()) + " starts and " +
                                   llvm::Twine(b.size_size()) + " sizes");
  for (int i = 0; i < b.lo_size(); ++i)
    if (b.lo(i) < 0 || b.size(i) < 0 || b.lo(i) > kMaxPlanElements ||
        b.size(i) > kMaxPlanElements)
      return llvm::createStringError(what + ": a box reaches outside any "
                                            "tensor");
  return llvm::Error::success();
}
} // namespace

llvm::Error checkKernels(const plan::DeviceProgram &prog) {
  auto fail = [&](const plan::GeneratedKernel &k, const llvm::Twine &msg) {
    return llvm::createStringError("device " + llvm::Twine(prog.device()) +
                                   ": generated kernel " + k.name() + " " +
                                   msg);
  };
  int64_t end = 0, n = prog.instructions_size();
  for (const plan::GeneratedKernel &k : prog.kernels()) {
    int64_t first = k.first(), count = k.count();
    if (first < end || count < 1 || first + count > n)
      return fail(k, "covers instructions " + llvm::Twine(first) + " to " +
                         llvm::Twine(first + count) +
                         ", not a run after the last kernel's inside the " +
                         llvm::Twine(n) + " of the program");
    for (int64_t i = first; i < first + count; ++i)
      if (!prog.instructions(int(i)).has_compute())
        return fail(k, "covers instruction " + llvm::Twine(i) +
                           ", which is not a compute");
    for (uint32_t b : k.params())
      if (b >= uint32_t(prog.buffers_size()))
        return fail(k, "names buffer " + llvm::Twine(b) + " of " +
                           llvm::Twine(prog.buffers_size()));
    if (k.points() < 0)
      return fail(k, "has " + llvm::Twine(k.points()) + " points");
    end = first + count;
  }
  return llvm::Error::success();
}

namespace {

/// checkProgram's checks of one device's program, each a step: its
/// buffers, each instruction by its kind, its bindings.
class ProgramChecker {
public:
  ProgramChecker(const plan::Plan &plan, const plan::DeviceProgram &prog)
      : plan(plan), prog(prog), id(prog.device()),
        nb(size_t(prog.buffers_size())) {}

  llvm::Error run() {
    if (prog.arena_bytes() < 0 || prog.arena_bytes() > kMaxArenaBytes)
      return fail("an arena of " + llvm::Twine(prog.arena_bytes()) +
                  " bytes (at most " + llvm::Twine(kMaxArenaBytes) + ")");
    for (size_t b = 0; b < nb; ++b)
      if (auto err = checkBuffer(b))
        return err;
    for (int i = 0; i < prog.instructions_size(); ++i)
      if (auto err = checkInstruction(prog.instructions(i), i))
        return err;
    for (const plan::Binding &b : prog.inputs())
      if (auto err = binding(b, plan.inputs_size(), "input", plan.inputs()))
        return err;
    for (const plan::Binding &b : prog.outputs())
      if (auto err = binding(b, plan.outputs_size(), "output", plan.outputs()))
        return err;
    return llvm::Error::success();
  }

private:
  llvm::Error fail(const llvm::Twine &msg) const {
    return llvm::createStringError("device " + llvm::Twine(id) + ": " + msg);
  }
  /// Buffer \p b named by instruction \p i exists.
  llvm::Error buffer(uint32_t b, int64_t i) const {
    if (b >= nb)
      return fail("instruction " + llvm::Twine(i) + " names buffer " +
                  llvm::Twine(b) + " of " + llvm::Twine(nb));
    return llvm::Error::success();
  }
  llvm::Error checkBuffer(size_t b) const;
  llvm::Error checkInstruction(const plan::Instruction &inst, int i) const;
  llvm::Error checkLoad(const plan::LoadWeight &l, int i) const;
  llvm::Error checkCompute(const plan::Compute &c, int i) const;
  llvm::Error checkAccesses(const plan::Compute &c, int i) const;
  llvm::Error checkCollective(const plan::Collective &c, int i) const;
  llvm::Error checkSlice(const plan::Slice &s, int i) const;
  llvm::Error binding(
      const plan::Binding &b, int count, const char *what,
      const google::protobuf::RepeatedPtrField<plan::TensorInfo> &infos) const;

  const plan::Plan &plan;
  const plan::DeviceProgram &prog;
  uint32_t id;
  size_t nb;
};

llvm::Error ProgramChecker::checkBuffer(size_t b) const {
  const plan::Buffer &buf = prog.buffers(int(b));
  if (buf.id() != b)
    return fail("buffer " + llvm::Twine(b) + " has id " +
                llvm::Twine(buf.id()));
  if (!validDType(buf.dtype()))
    return fail("buffer " + llvm::Twine(b) + " has an unknown element type");
  int64_t n = elementsOf(buf.shape());
  if (n < 0)
    return fail("buffer " + llvm::Twine(b) +
                " has a negative dim or more than 2^48 elements");
  int64_t bytes = n * dtypeBytes(buf.dtype());
  if (buf.offset() < 0 || buf.offset() > prog.arena_bytes() ||
      bytes > prog.arena_bytes() - buf.offset())
    return fail("buffer " + llvm::Twine(b) + " (" + llvm::Twine(bytes) +
                " bytes at " + llvm::Twine(buf.offset()) +
                ") lies outside the arena of " +
                llvm::Twine(prog.arena_bytes()) + " bytes");
  if (buf.origin_size() && buf.origin_size() != buf.shape_size())
    return fail("buffer " + llvm::Twine(b) + " has " +
                llvm::Twine(buf.origin_size()) + " origin dims for " +
                llvm::Twine(buf.shape_size()) + " dims");
  return llvm::Error::success();
}

llvm::Error ProgramChecker::checkInstruction(const plan::Instruction &inst,
                                             int i) const {
  if (inst.has_load())
    return checkLoad(inst.load(), i);
  if (inst.has_compute())
    return checkCompute(inst.compute(), i);
  if (inst.has_collective())
    return checkCollective(inst.collective(), i);
  if (inst.has_slice())
    return checkSlice(inst.slice(), i);
  return fail("instruction " + llvm::Twine(i) + " is empty");
}

llvm::Error ProgramChecker::checkLoad(const plan::LoadWeight &l, int i) const {
  if (auto err = buffer(l.buffer(), i))
    return err;
  const plan::Buffer &buf = prog.buffers(int(l.buffer()));
  if (l.offset_size() != buf.shape_size() ||
      l.global_shape_size() != buf.shape_size())
    return fail("load " + llvm::Twine(i) + " of '" + l.tensor() +
                "': its offset and shape do not have its buffer's rank");
  if (elementsOf(l.global_shape()) < 0)
    return fail("load " + llvm::Twine(i) + " of '" + l.tensor() +
                "': a negative dim or more than 2^48 elements");
  for (int d = 0; d < l.offset_size(); ++d)
    if (l.offset(d) < 0 || l.offset(d) > l.global_shape(d) - buf.shape(d))
      return fail("load " + llvm::Twine(i) + " of '" + l.tensor() +
                  "' reaches past the tensor");
  if (!plan::LoadWeight::Source_IsValid(l.source()))
    return fail("load " + llvm::Twine(i) + " has an unknown source");
  return llvm::Error::success();
}

llvm::Error ProgramChecker::checkCompute(const plan::Compute &c, int i) const {
  for (const auto *accesses : {&c.inputs(), &c.outputs()})
    for (const plan::Access &a : *accesses)
      if (auto err = buffer(a.buffer(), i))
        return err;
  auto kernel = plan::computeKernel(c);
  if (!kernel)
    return fail("instruction " + llvm::Twine(i) + ": " +
                llvm::toString(kernel.takeError()));
  // What every kernel's own preparation starts from: its iteration dims,
  // and maps of its buffers' ranks over them.
  for (const plan::IterDim &d : c.iters())
    if (d.extent() < 0 || d.extent() > kMaxPlanElements ||
        !plan::IterDim::Kind_IsValid(d.kind()))
      return fail("instruction " + llvm::Twine(i) + ": compute '" + c.name() +
                  "' has an iteration dim of extent " +
                  llvm::Twine(d.extent()));
  return checkAccesses(c, i);
}

llvm::Error ProgramChecker::checkAccesses(const plan::Compute &c, int i) const {
  for (const auto *accesses : {&c.inputs(), &c.outputs()})
    for (const plan::Access &a : *accesses) {
      if (a.exprs_size() != prog.buffers(int(a.buffer())).shape_size())
        return fail("instruction " + llvm::Twine(i) + ": compute '" + c.name() +
                    "' maps buffer " + llvm::Twine(a.buffer()) + " with " +
                    llvm::Twine(a.exprs_size()) + " exprs for its " +
                    llvm::Twine(prog.buffers(int(a.buffer())).shape_size()) +
                    " dims");
      for (const plan::AccessExpr &e : a.exprs()) {
        if (!plan::AccessExpr::Kind_IsValid(e.kind()))
          return fail("instruction " + llvm::Twine(i) +
                      ": an access of an unknown kind");
        for (uint32_t d : e.dims())
          if (d >= uint32_t(c.iters_size()))
            return fail("instruction " + llvm::Twine(i) + ": compute '" +
                        c.name() + "' maps iteration dim " + llvm::Twine(d) +
                        " of " + llvm::Twine(c.iters_size()));
      }
    }
  return llvm::Error::success();
}

llvm::Error ProgramChecker::checkCollective(const plan::Collective &c,
                                            int i) const {
  if (auto err = buffer(c.input(), i))
    return err;
  if (auto err = buffer(c.output(), i))
    return err;
  if (c.group() >= uint32_t(plan.groups_size()) ||
      c.exchange() >= uint32_t(plan.exchanges_size()))
    return fail("collective " + llvm::Twine(i) +
                " names a group or exchange the plan lacks");
  bool member = false;
  for (uint32_t d : plan.groups(int(c.group())).devices())
    member |= d == id;
  if (!member)
    return fail("collective " + llvm::Twine(i) +
                " runs in a group without this device");
  const plan::Exchange &x = plan.exchanges(int(c.exchange()));
  const plan::Buffer &in = prog.buffers(int(c.input())),
                     &out = prog.buffers(int(c.output()));
  for (const auto &[box, buf] :
       {std::pair{&x.in(int(id)), &in}, std::pair{&x.out(int(id)), &out}})
    if (!box->empty() && box->size_size() != buf->shape_size())
      return fail("collective " + llvm::Twine(i) +
                  ": its exchange's box and its buffer differ in rank");
  return llvm::Error::success();
}

llvm::Error ProgramChecker::checkSlice(const plan::Slice &s, int i) const {
  if (auto err = buffer(s.input(), i))
    return err;
  if (auto err = buffer(s.output(), i))
    return err;
  const plan::Buffer &in = prog.buffers(int(s.input())),
                     &out = prog.buffers(int(s.output()));
  if (in.shape_size() != out.shape_size() ||
      s.offset_size() != out.shape_size())
    return fail("slice " + llvm::Twine(i) + " does not match its buffers");
  for (int d = 0; d < s.offset_size(); ++d)
    if (s.offset(d) < 0 || s.offset(d) > in.shape(d) - out.shape(d))
      return fail("slice " + llvm::Twine(i) + " reaches past its input");
  return llvm::Error::success();
}

llvm::Error ProgramChecker::binding(
    const plan::Binding &b, int count, const char *what,
    const google::protobuf::RepeatedPtrField<plan::TensorInfo> &infos) const {
  if (b.buffer() >= nb || b.index() >= uint32_t(count))
    return fail(llvm::Twine("a binding of ") + what + " " +
                llvm::Twine(b.index()) + " names buffer " +
                llvm::Twine(b.buffer()) + " (the plan has " +
                llvm::Twine(count) + " " + what + "s)");
  const plan::Buffer &buf = prog.buffers(int(b.buffer()));
  const plan::TensorInfo &t = infos[int(b.index())];
  if (b.offset_size() != buf.shape_size() || t.shape_size() != buf.shape_size())
    return fail(llvm::Twine("a binding of ") + what + " " +
                llvm::Twine(b.index()) + " does not have its tensor's rank");
  for (int d = 0; d < b.offset_size(); ++d)
    if (b.offset(d) < 0 || b.offset(d) > t.shape(d) - buf.shape(d))
      return fail(llvm::Twine("a binding of ") + what + " " +
                  llvm::Twine(b.index()) + " reaches past its tensor");
  if (buf.dtype() != t.dtype())
    return fail(llvm::Twine("a binding of ") + what + " " +
                llvm::Twine(b.index()) + " has another element type");
  return llvm::Error::success();
}

} // namespace

llvm::Error checkProgram(const plan::Plan &plan,
                         const plan::DeviceProgram &prog) {
  return ProgramChecker(plan, prog).run();
}

std::string planDevicesText(const plan::Plan &plan) {
  std::string text = std::to_string(plan.devices()) +
                     (plan.devices() == 1 ? " device" : " devices");
  if (const plan::Pipeline &p = plan.pipeline(); p.stages())
    text += " (" + std::to_string(p.stages()) + " pipeline stages of " +
            std::to_string(p.stage_devices()) + ")";
  return text;
}

/// A pipelined plan's stages tile its devices; its schedule is known.
static llvm::Error checkPipeline(const plan::Plan &plan) {
  const plan::Pipeline &p = plan.pipeline();
  if (!p.stages())
    return llvm::Error::success();
  if (int64_t(p.stages()) * p.stage_devices() != int64_t(plan.devices()) ||
      p.microbatches() < 1 ||
      (p.schedule() != "gpipe" && p.schedule() != "1f1b" &&
       p.schedule() != "interleaved") ||
      (p.schedule() == "interleaved") != (p.chunks() > 1))
    return llvm::createStringError(
        "the plan's pipeline (" + llvm::Twine(p.stages()) + " stages of " +
        llvm::Twine(p.stage_devices()) + " devices, " +
        llvm::Twine(p.microbatches()) + " microbatches, schedule '" +
        p.schedule() + "') does not fit its " + llvm::Twine(plan.devices()) +
        " devices or is not one paxc writes");
  return llvm::Error::success();
}

llvm::Error checkPlan(const plan::Plan &plan) {
  int64_t n = plan.devices();
  if (n < 1 || n > kMaxPlanDevices)
    return llvm::createStringError("the plan has " + llvm::Twine(n) +
                                   " devices (1 to " +
                                   llvm::Twine(kMaxPlanDevices) + ")");
  if (plan.programs_size() != n)
    return llvm::createStringError(
        "the plan has " + llvm::Twine(plan.programs_size()) + " programs for " +
        llvm::Twine(n) + " devices");
  if (auto err = checkPipeline(plan))
    return err;
  for (const auto *infos : {&plan.inputs(), &plan.outputs()})
    for (const plan::TensorInfo &t : *infos)
      if (!validDType(t.dtype()) || elementsOf(t.shape()) < 0)
        return llvm::createStringError(
            "tensor '" + t.name() +
            "' has an unknown element type, a negative dim or more than "
            "2^48 elements");
  for (const plan::Group &g : plan.groups())
    for (uint32_t d : g.devices())
      if (d >= uint32_t(n))
        return llvm::createStringError("group " + llvm::Twine(g.id()) +
                                       " names device " + llvm::Twine(d));
  for (int x = 0; x < plan.exchanges_size(); ++x) {
    const plan::Exchange &e = plan.exchanges(x);
    if (e.in_size() != n || e.out_size() != n)
      return llvm::createStringError("exchange " + llvm::Twine(x) +
                                     " does not give every device a box");
    for (int d = 0; d < n; ++d)
      for (const plan::Box *b : {&e.in(d), &e.out(d)})
        if (auto err = checkBox(*b, "exchange " + llvm::Twine(x)))
          return err;
  }
  std::vector<bool> seen(size_t(n), false);
  for (const plan::DeviceProgram &prog : plan.programs()) {
    if (prog.device() >= uint32_t(n) || seen[prog.device()])
      return llvm::createStringError(
          "a program for device " + llvm::Twine(prog.device()) +
          " of a plan for " + llvm::Twine(n) + " (or two for one device)");
    seen[prog.device()] = true;
    if (auto err = checkProgram(plan, prog))
      return err;
    if (auto err = checkKernels(prog))
      return err;
  }
  if (plan.has_reference()) {
    const plan::DeviceProgram &ref = plan.reference();
    if (ref.device() != 0)
      return llvm::createStringError("the reference program is not for "
                                     "device 0");
    // Its collectives are identities on one device: no groups to check.
    if (auto err = checkProgram(plan, ref))
      return llvm::createStringError("the reference program: " +
                                     llvm::toString(std::move(err)));
  }
  return llvm::Error::success();
}

} // namespace pax::runtime
