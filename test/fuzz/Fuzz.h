//===- Fuzz.h - What every fuzz harness shares ------------------*- C++ -*-===//
//
// Each harness is one LLVMFuzzerTestOneInput over one file paxc or paxrun
// reads. Built with -DPAX_FUZZ=ON (clang) it links libFuzzer; otherwise it
// links Driver.cpp, which runs the files named on its command line through
// it (the regression inputs in test/fuzz/regressions, run by ctest), so
// every finding stays a test of the normal builds.
//
// A harness returns 0 for every input: a clear error is a pass. A crash,
// a sanitizer report, a hang or an allocation past libFuzzer's limits is
// a finding.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace pax::fuzz {

/// The input as a string.
inline llvm::StringRef bytesOf(const uint8_t *data, size_t size) {
  return llvm::StringRef(reinterpret_cast<const char *>(data), size);
}

/// Consumes an expected error or value: either is a pass.
template <typename T> void consume(llvm::Expected<T> e) {
  if (!e)
    llvm::consumeError(e.takeError());
}
inline void consume(llvm::Error e) { llvm::consumeError(std::move(e)); }

/// A scratch folder of this process (made once), for inputs that name
/// files beside them (external data).
const std::string &scratchDir();

} // namespace pax::fuzz
