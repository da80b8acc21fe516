//===- Profile.cpp - Where a run's compute time goes ----------------------===//
#include "runtime/Profile.h"

#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <atomic>
#include <mutex>

namespace pax::runtime {

namespace {
std::atomic<bool> timing{false};
std::atomic<ProfileBy> profiling{ProfileBy::Off};
std::atomic<int64_t> timedNanoseconds{0};
std::mutex profileMutex;
llvm::StringMap<std::pair<int64_t, int64_t>> profileByKind; // calls, ns
} // namespace

bool kernelTimingOn() { return timing.load(std::memory_order_relaxed); }

/// Adds \p ns to the profile's entry \p key.
static void addToProfile(const std::string &key, int64_t ns) {
  std::lock_guard<std::mutex> lock(profileMutex);
  auto &[calls, total] = profileByKind[key];
  ++calls;
  total += ns;
}

void recordGeneratedKernelTime(const plan::GeneratedKernel &k, int64_t ns) {
  timedNanoseconds += ns;
  ProfileBy by = profiling.load(std::memory_order_relaxed);
  if (by == ProfileBy::Off)
    return;
  std::string key = "generated";
  if (by == ProfileBy::Instruction) {
    key += " " + k.name() + " [";
    for (int i = 0; i < k.ops_size(); ++i)
      key += (i ? ", " : "") + k.ops(i);
    key += "]";
  }
  addToProfile(key, ns);
}

void recordKernelTime(const plan::Compute &c, int64_t ns) {
  timedNanoseconds += ns;
  ProfileBy by = profiling.load(std::memory_order_relaxed);
  if (by == ProfileBy::Off)
    return;
  std::string key = by == ProfileBy::Kernel ? c.kernel()
                    : by == ProfileBy::CostKey && !c.cost_key().empty()
                        ? c.cost_key()
                        : c.kind();
  if (by == ProfileBy::Instruction) {
    key += " (" + c.kernel() + ") " + c.name() + " [";
    for (int i = 0; i < c.iters_size(); ++i)
      key += (i ? ", " : "") + c.iters(i).name() + ":" +
             std::to_string(c.iters(i).extent()) +
             (c.iters(i).kind() == plan::IterDim::RED ? " red" : "");
    key += "]";
  }
  addToProfile(key, ns);
}

void setKernelTiming(bool on) { timing = on; }

double kernelSeconds() { return double(timedNanoseconds.load()) * 1e-9; }

void resetKernelSeconds() {
  timedNanoseconds = 0;
  std::lock_guard<std::mutex> lock(profileMutex);
  profileByKind.clear();
}

void setKernelProfiling(ProfileBy by) {
  profiling = by;
  if (by != ProfileBy::Off)
    timing = true;
}

std::vector<KernelProfileEntry> kernelProfile() {
  std::vector<KernelProfileEntry> out;
  {
    std::lock_guard<std::mutex> lock(profileMutex);
    for (const auto &entry : profileByKind)
      out.push_back({entry.getKey().str(), entry.getValue().first,
                     double(entry.getValue().second) * 1e-9});
  }
  std::sort(out.begin(), out.end(), [](const auto &a, const auto &b) {
    return a.seconds != b.seconds ? a.seconds > b.seconds : a.kind < b.kind;
  });
  return out;
}

} // namespace pax::runtime
