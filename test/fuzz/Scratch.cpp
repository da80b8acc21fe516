//===- Scratch.cpp - The harnesses' scratch folder ------------------------===//
#include "test/fuzz/Fuzz.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

namespace pax::fuzz {

const std::string &scratchDir() {
  static const std::string dir = [] {
    llvm::SmallString<128> path;
    if (llvm::sys::fs::createUniqueDirectory("pax-fuzz", path))
      return std::string("/tmp");
    // External data a model may name: a small file, and one of zeros.
    std::error_code ec;
    llvm::raw_fd_ostream small((path + "/weights.bin").str(), ec);
    for (int i = 0; i < 1024; ++i)
      small << char(i * 37);
    llvm::raw_fd_ostream zeros((path + "/zeros.bin").str(), ec);
    zeros << std::string(4096, '\0');
    return std::string(path.str());
  }();
  return dir;
}

} // namespace pax::fuzz
