//===- Timing.cpp - --time, --profile and --trace -------------------------===//
#include "tools/paxrun/Timing.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <string>

namespace pax {

/// --profile's table: seconds, share and calls per run for each op kind or
/// instruction, the most time first, summed over devices.
void printProfile(std::vector<runtime::KernelProfileEntry> profile,
                  unsigned runs, llvm::StringRef what, runtime::ProfileBy by) {
  llvm::sort(profile, [](const auto &a, const auto &b) {
    return a.seconds != b.seconds ? a.seconds > b.seconds : a.kind < b.kind;
  });
  double total = 0;
  for (const auto &e : profile)
    total += e.seconds;
  llvm::errs() << llvm::formatv(
      "paxrun: profile of the compute instructions over {0} {5}(s), per "
      "{5}, summed over this process's devices:\n  {1,12} {2,7} {3,7}  {4}\n",
      runs, "seconds", "share", "calls",
      by == runtime::ProfileBy::Kind      ? "kind"
      : by == runtime::ProfileBy::Kernel  ? "kernel"
      : by == runtime::ProfileBy::CostKey ? "cost key"
                                          : "instruction",
      what);
  for (const auto &e : profile)
    llvm::errs() << llvm::formatv(
        "  {0,12:F6} {1,6:F1}% {2,7}  {3}\n", e.seconds / runs,
        total > 0 ? 100 * e.seconds / total : 0.0, e.calls / runs, e.kind);
  llvm::errs() << llvm::formatv("  {0,12:F6} {1,6:F1}% {2,7}  total\n",
                                total / runs, 100.0, "");
}

/// Writes --trace: one row per device, its instructions as they ran (one
/// event for computes that ran fused, args.instructions saying how many).
llvm::Error writeTrace(llvm::ArrayRef<runtime::DeviceStats> stats,
                       llvm::StringRef tracePath) {
  llvm::json::Array events;
  double first = 1e300;
  for (const runtime::DeviceStats &s : stats)
    for (const runtime::TraceEvent &e : s.trace)
      first = std::min(first, e.start);
  for (size_t d = 0; d < stats.size(); ++d) {
    events.push_back(llvm::json::Object{
        {"name", "thread_name"},
        {"ph", "M"},
        {"pid", 0},
        {"tid", int64_t(d)},
        {"args", llvm::json::Object{{"name", "device " + std::to_string(d)}}}});
    for (const runtime::TraceEvent &e : stats[d].trace)
      events.push_back(llvm::json::Object{
          {"name", e.name},
          {"cat", e.category},
          {"ph", "X"},
          {"pid", 0},
          {"tid", int64_t(d)},
          {"ts", (e.start - first) * 1e6},
          {"dur", (e.end - e.start) * 1e6},
          {"args", llvm::json::Object{{"instructions", e.instructions}}}});
  }
  std::error_code ec;
  llvm::raw_fd_ostream os(tracePath, ec);
  if (ec)
    return llvm::createStringError("--trace: cannot write '" + tracePath +
                                   "': " + ec.message());
  os << llvm::formatv("{0:2}", llvm::json::Value(llvm::json::Object{
                                   {"traceEvents", std::move(events)},
                                   {"displayTimeUnit", "ms"}}))
     << "\n";
  return llvm::Error::success();
}

RunClock::RunClock(unsigned runs, llvm::StringRef what, bool reports,
                   Options options)
    : runs(runs), what(what), reports(reports), options(options) {
  // On an asynchronous device only --profile times kernels, and --time
  // gives the wall time alone.
  timesKernels = options.profile != runtime::ProfileBy::Off ||
                 (options.time && !options.asynchronous);
  runtime::setKernelTiming(timesKernels);
}

void RunClock::begin(unsigned number) {
  run = number;
  warm = started++ > 0 || runs == 1;
  runtime::resetKernelSeconds();
  runtime::setKernelProfiling(warm ? options.profile : runtime::ProfileBy::Off);
  start = std::chrono::steady_clock::now();
}

void RunClock::end(double slowestRank) {
  double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  std::string ranks;
  if (slowestRank >= 0)
    ranks = llvm::formatv(", {0:F6} s the slowest rank's program", slowestRank)
                .str();
  if (options.time && reports && timesKernels)
    llvm::errs() << llvm::formatv(
        "paxrun: {0} {1}: {2:F6} s in compute instructions, {3:F6} s in "
        "all{4}\n",
        what, run, runtime::kernelSeconds(), wall, ranks);
  else if (options.time && reports)
    llvm::errs() << llvm::formatv("paxrun: {0} {1}: {2:F6} s in all{3}\n", what,
                                  run, wall, ranks);
  for (runtime::KernelProfileEntry &e : runtime::kernelProfile()) {
    auto it =
        llvm::find_if(profile, [&](const auto &p) { return p.kind == e.kind; });
    if (it == profile.end()) {
      profile.push_back(std::move(e));
    } else {
      it->calls += e.calls;
      it->seconds += e.seconds;
    }
  }
}

void RunClock::finish() const {
  if (options.profile != runtime::ProfileBy::Off && reports)
    printProfile(profile, std::max(1u, started - (runs > 1 ? 1 : 0)), what,
                 options.profile);
}

} // namespace pax
