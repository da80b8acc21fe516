//===- Timing.h - --time, --profile and --trace -----------------*- C++ -*-===//
//
// paxrun's measurements of its runs (--repeat) and training steps: each
// run's seconds, the profile of its compute instructions summed over the
// runs but a warm-up, and a trace of every device's instructions.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Profile.h"
#include "runtime/Run.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <chrono>
#include <string>
#include <vector>

namespace pax {

/// --profile's table: seconds, share and calls per run for each entry of
/// \p profile (grouped \p by kind, kernel, instruction or cost key), the
/// most time first, summed over devices, on stderr.
void printProfile(std::vector<runtime::KernelProfileEntry> profile,
                  unsigned runs, llvm::StringRef what, runtime::ProfileBy by);

/// --time and --profile over the runs of --repeat or the steps of --train:
/// each run's seconds in compute instructions and in all, and the profile
/// summed over every run but the first of several (a warm-up).
class RunClock {
public:
  struct Options {
    bool time = false;                                    // --time
    runtime::ProfileBy profile = runtime::ProfileBy::Off; // --profile
    /// The devices run asynchronously (GPUs): timing each kernel would
    /// wait for it, so --time alone gives the wall time alone.
    bool asynchronous = false;
  };

  /// \p runs runs called \p what ("run", "step"), printed where this
  /// process \p reports.
  RunClock(unsigned runs, llvm::StringRef what, bool reports, Options options);

  /// Starts run (or step) \p number, the first of several a warm-up.
  void begin(unsigned number);

  /// Ends the run; \p slowestRank: the slowest MPI rank's program
  /// seconds, reported too (negative: not under MPI).
  void end(double slowestRank = -1);

  /// Prints the profile (with --profile, where this process reports).
  void finish() const;

private:
  unsigned runs, run = 0, started = 0;
  bool warm = false, timesKernels = false;
  std::string what;
  bool reports;
  Options options;
  std::chrono::steady_clock::time_point start;
  std::vector<runtime::KernelProfileEntry> profile;
};

/// Writes --trace to \p tracePath: one row per device, its instructions
/// as they ran (Chrome's trace format).
llvm::Error writeTrace(llvm::ArrayRef<runtime::DeviceStats> stats,
                       llvm::StringRef tracePath);

} // namespace pax
