//===- GenerateKernels.h - Kernels generated for fused groups --*- C++ -*-===//
//
// Codegen's kernel generator. It walks a device program for runs of
// consecutive computes of one fused group (Compute.fused, from
// pax-fuse-kernels) that one thread per point can compute together, and
// writes each run as one kernel (plan::GeneratedKernel) in the frame of
// runtime/GeneratedKernel.h:
//
//   - every compute of a run is elementwise or a one-source copy over the
//     same space, each map one dot product provably inside its tensor (the
//     generic kernel's linear points), and float math;
//   - every buffer the run touches is read and written at the same element
//     of each point by all its computes, so no point reads what another
//     thread writes;
//   - a value stays in a register from the compute that writes it to those
//     that read it, and is stored only where something outside the run
//     reads it (a later instruction, an output binding) or its type keeps
//     it from a register (an integer).
//
// Extents, strides and each op's attributes are constants of the source.
// The generator is backend-neutral (it lives with the runtime because it
// reads computes as the runtime does: prepare and describeGeneric), and
// paxc runs it when it writes a plan.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_GENERATEKERNELS_H
#define PAX_RUNTIME_GENERATEKERNELS_H

#include "codegen/plan/Plan.pb.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace pax::runtime {

/// Fills \p program's kernels (replacing any) for its fused groups; each is
/// named `pax_d<device>_<group>_<first instruction>` and records
/// generatorId(). Returns how many it generated.
unsigned generateKernels(plan::DeviceProgram &program);

/// What identifies \p prog's kernels for a device that has loaded them:
/// their names, sizes of source and ranges (a program object at the same
/// address may be another program).
std::string kernelsIdentity(const plan::DeviceProgram &prog);

/// What generated a kernel: paxc's version and a hash of the headers its
/// source includes (whose enums it names by number). A backend refuses a
/// kernel another generator wrote.
const std::string &generatorId();

/// The headers a generated kernel's source includes, by include name
/// (runtime/GeneratedKernel.h and what it includes), as text built into
/// the binary: NVRTC and the host compiler get them from here, so a plan
/// runs where the repository is not.
struct KernelHeader {
  const char *name;
  const char *text;
};
llvm::ArrayRef<KernelHeader> kernelHeaders();

} // namespace pax::runtime

#endif // PAX_RUNTIME_GENERATEKERNELS_H
