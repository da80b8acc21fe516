//===- PlanCheck.h - A plan checked whole before anything runs --*- C++ -*-===//
//
// paxrun reads plans people hand it. checkPlan checks everything the
// runtime relies on before a device allocates or runs anything: counts and
// ids in range, shapes whose sizes fit in 64 bits and in the limits below,
// buffers inside their arenas, every instruction's buffers, groups and
// exchanges, every compute's kernel, iteration space and access maps
// against its buffers (runtime/Prepared.h), bindings against the plan's
// inputs and outputs. A plan that passes cannot make a device read or
// write outside its buffers; one that fails gets an error naming the
// device, instruction or buffer.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_PLANCHECK_H
#define PAX_RUNTIME_PLANCHECK_H

#include "codegen/plan/Plan.pb.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace pax::runtime {

/// The most devices a plan may have.
inline constexpr int64_t kMaxPlanDevices = int64_t(1) << 16;
/// The largest arena one device may ask for (1 TiB).
inline constexpr int64_t kMaxArenaBytes = int64_t(1) << 40;
/// The most elements one tensor of a plan may have.
inline constexpr int64_t kMaxPlanElements = int64_t(1) << 48;

/// Checks \p prog's generated kernels: each covers a run of computes
/// after the last kernel's, inside the program, and names its buffers.
llvm::Error checkKernels(const plan::DeviceProgram &prog);

/// "N devices", with a pipelined plan's stages: "N devices (S pipeline
/// stages of D)".
std::string planDevicesText(const plan::Plan &plan);

/// Checks \p plan whole (see above).
llvm::Error checkPlan(const plan::Plan &plan);

/// Checks one program of \p plan (checkPlan checks them all).
llvm::Error checkProgram(const plan::Plan &plan,
                         const plan::DeviceProgram &prog);

} // namespace pax::runtime

#endif // PAX_RUNTIME_PLANCHECK_H
