//===- Compile.h - What paxc does, from its options -------------*- C++ -*-===//
//
// paxc's options are one table (LLVM command-line options, listed by paxc
// --help); each is checked in one place whatever the path (checkFlagValues
// and the option groups' own checks). The command line and the driver
// library (tools/driver/Driver.h) are the two ways in.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/plan/Plan.pb.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>

namespace pax::paxc {

/// Parses paxc's command line into the option table (LLVM's parser: a
/// malformed option exits with its message; --help lists every option
/// group).
void parseCommandLine(int argc, char **argv);

/// What the parsed command line asks for, written where -o says; the
/// process's exit status (an error printed as `paxc: error: ...`).
int runCommandLine();

/// A plan compiled by compilePlan.
struct CompiledPlan {
  plan::Plan plan;
  /// Where a strategy was searched or given (more than one device, a
  /// cluster, --strategy): its report as JSON (paxc --emit=report
  /// --format=json: the strategy, its prediction and the search's
  /// statistics) and as text (--emit=report). Empty otherwise.
  std::string reportJson, reportText;
};

/// Whether \p name (without dashes) names one of paxc's options.
bool isOption(llvm::StringRef name);

/// The plan paxc writes for \p args (the model's path, then options as
/// `--NAME=VALUE`), as `paxc ARGS -o FILE.paxplan` would: every option
/// parsed and checked; errors carry paxc's messages. Calls are serialized
/// (the options are one table); warnings go to stderr unless --quiet.
llvm::Expected<CompiledPlan> compilePlan(llvm::ArrayRef<std::string> args);

} // namespace pax::paxc
