//===- paxc.cpp - The paxc compiler's command line ------------------------===//
//
//   paxc model.onnx --emit=summary --format=json
//   paxc model.onnx --gpus=4 -o model.paxplan
//
// The options and what they do are tools/paxc/Compile.h's.
//
//===----------------------------------------------------------------------===//
#include "tools/paxc/Compile.h"

#include "llvm/Support/InitLLVM.h"

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  pax::paxc::parseCommandLine(argc, argv);
  return pax::paxc::runCommandLine();
}
