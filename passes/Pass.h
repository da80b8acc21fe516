//===- Pass.h - Passes over the paxc IR and the pass registry -------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace pax {

/// Options of one pass, parsed from `name{key=value key2=value2}`.
class PassOptions {
public:
  /// Parses the text between the braces; an error names the bad token.
  static llvm::Expected<PassOptions> parse(llvm::StringRef pass,
                                           llvm::StringRef text);
  /// Fails when an option not in \p known was given.
  llvm::Error checkKnown(llvm::StringRef pass,
                         llvm::ArrayRef<llvm::StringRef> known) const;
  std::string get(llvm::StringRef key, llvm::StringRef dflt) const;

private:
  std::map<std::string, std::string, std::less<>> values;
};

/// What a pass may write besides the IR (reports of test passes).
struct PassContext {
  llvm::raw_ostream &out;
};

/// A transformation or analysis of a module. Thin: the logic lives in
/// library functions with their own tests.
class Pass {
public:
  virtual ~Pass() = default;
  /// The pipeline name, `pax-dce`.
  virtual llvm::StringRef argument() const = 0;
  /// Runs on \p m; an error is a problem in the user's input.
  virtual llvm::Error run(Module &m, PassContext &ctx) = 0;
};

/// One registered pass (see Passes.def).
struct PassInfo {
  const char *argument;
  const char *description;
  llvm::Expected<std::unique_ptr<Pass>> (*create)(const PassOptions &options);
};

/// Every registered pass, in registry order.
llvm::ArrayRef<PassInfo> registeredPasses();

/// Parses `a,b{opt=1},c` into passes; an error names an unknown pass or
/// option.
llvm::Expected<std::vector<std::unique_ptr<Pass>>>
parsePipeline(llvm::StringRef text);

} // namespace pax
