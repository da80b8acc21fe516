//===- Profile.h - Where a run's compute time goes -------------*- C++ -*-===//
//
// runDevice times each compute instruction while timing is on, on every
// backend: a device whose work is asynchronous (a GPU's stream) is
// synchronized before the clock stops, so a kernel's time is its own.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_PROFILE_H
#define PAX_RUNTIME_PROFILE_H

#include "codegen/plan/Plan.pb.h"

#include <cstdint>
#include <string>
#include <vector>

namespace pax::runtime {

/// Starts (\p on) or stops adding up the wall time of compute instructions, for
/// benchmarks; devices running at once each add their own time.
void setKernelTiming(bool on);

/// Seconds compute instructions have taken while timing was on, since the
/// last reset.
double kernelSeconds();

/// Sets kernelSeconds (and the profile) back to zero.
void resetKernelSeconds();

/// One op kind's share of the timed runKernel calls.
struct KernelProfileEntry {
  std::string kind; ///< the kind, or the instruction as ProfileBy says
  int64_t calls = 0;
  double seconds = 0;
};

/// What the profile adds up time per.
enum class ProfileBy {
  Off,
  Kind,        ///< the compute's op kind ("matmul")
  Kernel,      ///< the kernel codegen chose for it ("gemm")
  Instruction, ///< kind, kernel, source node and local iteration space
  CostKey,     ///< the block's cost key (Compute.cost_key; else its kind)
};

/// Starts or stops adding up the compute instructions' wall time per kind,
/// kernel or instruction as well (implies setKernelTiming while not Off).
void setKernelProfiling(ProfileBy by);

/// The per-kind times since the last reset, the most time first.
std::vector<KernelProfileEntry> kernelProfile();

/// Whether compute instructions are being timed.
bool kernelTimingOn();

/// Adds \p nanoseconds of compute instruction \p c to the times and the
/// profile.
void recordKernelTime(const plan::Compute &c, int64_t nanoseconds);
/// The same for generated kernel \p k (kind and kernel "generated"; by
/// instruction, its name and ops).
void recordGeneratedKernelTime(const plan::GeneratedKernel &k,
                               int64_t nanoseconds);

} // namespace pax::runtime

#endif // PAX_RUNTIME_PROFILE_H
