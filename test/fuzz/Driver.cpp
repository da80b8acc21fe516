//===- Driver.cpp - A harness run over files, without libFuzzer -----------===//
//
//   fuzz-NAME FILE...   runs each file through the harness; prints one
//                       line per file and exits 0 when none crashed.
//
//===----------------------------------------------------------------------===//
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv) {
  for (int i = 1; i < argc; ++i) {
    auto buf = llvm::MemoryBuffer::getFile(argv[i], /*IsText=*/false,
                                           /*RequiresNullTerminator=*/false);
    if (!buf) {
      llvm::errs() << argv[i] << ": cannot read: " << buf.getError().message()
                   << "\n";
      return 1;
    }
    LLVMFuzzerTestOneInput(
        reinterpret_cast<const uint8_t *>((*buf)->getBufferStart()),
        (*buf)->getBufferSize());
    llvm::outs() << argv[i] << ": ok\n";
  }
  return 0;
}
