//===- paxc-opt.cpp - Runs passes on .pir files ---------------------------===//
//
//   paxc-opt input.pir -p pax-dce,pax-strip-names
//   paxc-opt tests.pir --split-input-file --verify-each -p ...
//
//===----------------------------------------------------------------------===//
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/Pass.h"
#include "tools/common/Printable.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Timer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

using namespace pax;
namespace cl = llvm::cl;

static cl::OptionCategory optCategory("paxc-opt options");

static cl::opt<std::string> inputPath(cl::Positional, cl::desc("<input.pir>"),
                                      cl::init("-"), cl::cat(optCategory));
static cl::opt<std::string>
    outputPath("o", cl::desc("Output file (default: stdout)"),
               cl::value_desc("file"), cl::init("-"), cl::cat(optCategory));
static cl::opt<std::string>
    pipeline("p", cl::desc("Passes to run, comma separated: a,b{opt=v},c"),
             cl::value_desc("passes"), cl::cat(optCategory));
static cl::opt<bool> splitInputFile(
    "split-input-file",
    cl::desc("Treat '// -----' lines as separators between independent inputs"),
    cl::cat(optCategory));
static cl::opt<bool> verifyEach("verify-each",
                                cl::desc("Verify the IR after every pass"),
                                cl::cat(optCategory));
static cl::opt<bool> printAfterAll("print-ir-after-all",
                                   cl::desc("Print the IR after every pass"),
                                   cl::cat(optCategory));
static cl::list<std::string>
    printAfter("print-ir-after", cl::desc("Print the IR after the named pass"),
               cl::value_desc("pass"), cl::cat(optCategory));
static cl::opt<bool> timePasses("time-passes",
                                cl::desc("Report the time of each pass"),
                                cl::cat(optCategory));
static cl::opt<bool> listPasses("list-passes",
                                cl::desc("List the registered passes and exit"),
                                cl::cat(optCategory));

static int fail(const llvm::Twine &msg) {
  llvm::WithColor::error(llvm::errs(), "paxc-opt") << printable(msg) << "\n";
  return 1;
}

/// Verifies \p m, reporting at the parsed location of each bad op.
static bool verifyAt(const Module &m, llvm::SourceMgr &sm, unsigned buf,
                     const OpLocations &locs, llvm::StringRef when) {
  return verifyModule(m, [&](const Op *op, const llvm::Twine &msg) {
    auto it = op ? locs.find(op) : locs.end();
    llvm::SMLoc loc = it != locs.end()
                          ? it->second
                          : llvm::SMLoc::getFromPointer(
                                sm.getMemoryBuffer(buf)->getBufferStart());
    sm.PrintMessage(loc, llvm::SourceMgr::DK_Error,
                    (when.empty() ? "" : when + ": ") + msg);
  });
}

/// Parses, verifies, transforms and prints one input; false on failure.
static bool processChunk(llvm::StringRef text, llvm::raw_ostream &os,
                         llvm::TimerGroup &timers) {
  llvm::SourceMgr sm;
  unsigned buf = sm.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(text, inputPath), llvm::SMLoc());
  OpLocations locs;
  auto m = parseModule(sm, buf, &locs);
  if (!m || !verifyAt(*m, sm, buf, locs, ""))
    return false;
  auto passes = parsePipeline(pipeline);
  if (!passes) {
    fail(llvm::toString(passes.takeError()));
    return false;
  }
  PassContext ctx{os};
  for (auto &pass : *passes) {
    {
      llvm::Timer timer(pass->argument(), pass->argument(), timers);
      llvm::TimeRegion region(timePasses ? &timer : nullptr);
      if (auto err = pass->run(*m, ctx)) {
        // Point at this input's first token, inside the SourceMgr's copy.
        llvm::StringRef body = sm.getMemoryBuffer(buf)->getBuffer();
        size_t first = body.find_first_not_of(" \t\r\n");
        sm.PrintMessage(llvm::SMLoc::getFromPointer(
                            body.data() + std::min(first, body.size())),
                        llvm::SourceMgr::DK_Error,
                        pass->argument() + ": " +
                            llvm::toString(std::move(err)));
        return false;
      }
    }
    if (verifyEach &&
        !verifyAt(*m, sm, buf, locs, ("after " + pass->argument()).str()))
      return false;
    if (printAfterAll || llvm::is_contained(printAfter, pass->argument())) {
      os << "// -----// IR after " << pass->argument() << " //----- //\n";
      printModule(*m, os);
    }
  }
  printModule(*m, os);
  return true;
}

/// An error where --pipeline or --print-ir-after names a pass that is not
/// registered: caught before anything is read.
static llvm::Error checkPassFlags() {
  if (auto passes = parsePipeline(pipeline); !passes)
    return passes.takeError();
  for (const std::string &name : printAfter) {
    bool known = false;
    for (const PassInfo &p : registeredPasses())
      known |= name == p.argument;
    if (!known)
      return llvm::createStringError("--print-ir-after: unknown pass '" + name +
                                     "'");
  }
  return llvm::Error::success();
}

/// The chunks of \p all between `// -----` lines (with
/// --split-input-file; else all of it).
static llvm::SmallVector<llvm::StringRef, 8> splitChunks(llvm::StringRef all) {
  llvm::SmallVector<llvm::StringRef, 8> chunks;
  if (!splitInputFile) {
    chunks.push_back(all);
    return chunks;
  }
  llvm::StringRef rest = all;
  while (true) {
    size_t pos = rest.find("// -----");
    while (pos != llvm::StringRef::npos && pos > 0 && rest[pos - 1] != '\n')
      pos = rest.find("// -----", pos + 1);
    chunks.push_back(rest.substr(0, pos));
    if (pos == llvm::StringRef::npos)
      break;
    size_t eol = rest.find('\n', pos);
    rest = eol == llvm::StringRef::npos ? "" : rest.substr(eol + 1);
  }
  return chunks;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(optCategory);
  cl::SetVersionPrinter(
      [](llvm::raw_ostream &os) { os << "paxc-opt 0.1.0\n"; });
  cl::ParseCommandLineOptions(argc, argv,
                              "paxc-opt: run passes on paxc IR (.pir) files\n");
  if (listPasses) {
    for (const PassInfo &p : registeredPasses())
      llvm::outs() << "  " << p.argument << "  " << p.description << "\n";
    return 0;
  }
  if (auto err = checkPassFlags())
    return fail(llvm::toString(std::move(err)));
  auto file = llvm::MemoryBuffer::getFileOrSTDIN(inputPath);
  if (!file)
    return fail("cannot read '" + inputPath +
                "': " + file.getError().message());
  std::error_code ec;
  llvm::ToolOutputFile out(outputPath, ec, llvm::sys::fs::OF_Text);
  if (ec)
    return fail("cannot write '" + outputPath + "': " + ec.message());
  llvm::TimerGroup timers("paxc-opt", "Pass execution timing report");
  // Each chunk keeps its line numbers by starting with as many newlines as
  // precede it in the file.
  llvm::StringRef all = (*file)->getBuffer();
  llvm::SmallVector<llvm::StringRef, 8> chunks = splitChunks(all);
  bool ok = true;
  for (size_t i = 0; i < chunks.size(); ++i) {
    size_t lines =
        llvm::StringRef(all.data(), chunks[i].data() - all.data()).count('\n');
    std::string text = std::string(lines, '\n') + chunks[i].str();
    if (i)
      out.os() << "// -----\n";
    ok &= processChunk(text, out.os(), timers);
  }
  out.keep();
  return ok ? 0 : 1;
}
