//===- paxc.cpp - The paxc compiler driver --------------------------------===//
//
//   paxc model.onnx --emit=summary --format=json
//   paxc model.onnx --emit=ir -o model.pir
//
//===----------------------------------------------------------------------===//
#include "frontend/OnnxImporter.h"
#include "ir/Printer.h"
#include "ir/Summary.h"
#include "ir/Verifier.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

using namespace pax;
namespace cl = llvm::cl;

static cl::OptionCategory paxcCategory("paxc options");

static cl::opt<std::string> inputPath(cl::Positional, cl::desc("<model.onnx>"),
                                      cl::Required, cl::cat(paxcCategory));

enum class Emit { IR, Summary };
static cl::opt<Emit> emit(
    "emit", cl::desc("What to produce"), cl::init(Emit::Summary),
    cl::values(clEnumValN(Emit::IR, "ir", "the iteration-space IR (.pir text)"),
               clEnumValN(Emit::Summary, "summary",
                          "parameters, forward FLOPs, op counts, inputs and "
                          "outputs")),
    cl::cat(paxcCategory));

enum class Format { Text, Json };
static cl::opt<Format>
    format("format", cl::desc("Output format of --emit=summary"),
           cl::init(Format::Text),
           cl::values(clEnumValN(Format::Text, "text", "human-readable text"),
                      clEnumValN(Format::Json, "json", "one JSON object")),
           cl::cat(paxcCategory));

static cl::opt<std::string>
    outputPath("o", cl::desc("Output file (default: stdout)"),
               cl::value_desc("file"), cl::init("-"), cl::cat(paxcCategory));

static cl::list<std::string>
    dimBindings("dim",
                cl::desc("Bind a symbolic dim: --dim NAME=VALUE (repeatable)"),
                cl::value_desc("NAME=VALUE"), cl::cat(paxcCategory));

static cl::opt<std::string> batch(
    "batch",
    cl::desc(
        "Set the leading (batch) dim of every data input, symbolic or not"),
    cl::value_desc("N"), cl::cat(paxcCategory));

static cl::opt<bool> quiet("quiet", cl::desc("Do not print warnings"),
                           cl::cat(paxcCategory));

static int fail(const llvm::Twine &msg) {
  llvm::WithColor::error(llvm::errs(), "paxc") << msg << "\n";
  return 1;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(paxcCategory);
  cl::SetVersionPrinter([](llvm::raw_ostream &os) { os << "paxc 0.1.0\n"; });
  cl::ParseCommandLineOptions(
      argc, argv,
      "paxc: an auto-parallelizing compiler for deep-learning models\n\n"
      "Reads an ONNX model (binary, or protobuf text for .onnxtxt files) into\n"
      "the iteration-space IR and prints its summary or its IR.\n");

  ImportOptions options;
  for (const std::string &b : dimBindings) {
    auto [name, value] = llvm::StringRef(b).split('=');
    int64_t v;
    if (name.empty() || value.getAsInteger(10, v))
      return fail("--dim '" + b +
                  "': expected NAME=VALUE with an integer value");
    options.dims[name.str()] = v;
  }
  if (batch.getNumOccurrences()) {
    int64_t n;
    if (llvm::StringRef(batch).getAsInteger(10, n) || n <= 0)
      return fail("--batch=" + batch +
                  ": the batch must be a positive integer");
    options.batch = n;
  }

  auto imported = importOnnxFile(inputPath, options);
  if (!imported)
    return fail(llvm::toString(imported.takeError()));
  if (!quiet)
    for (const std::string &w : imported->warnings)
      llvm::WithColor::warning(llvm::errs(), "paxc") << w << "\n";
  Module &m = *imported->module;

  std::string verifyErrors;
  if (!verifyModule(m, [&](const Op *op, const llvm::Twine &msg) {
        verifyErrors +=
            (op ? "op '" + op->name().str() + "': " : "") + msg.str() + "\n";
      }))
    return fail("internal: the imported IR does not verify:\n" + verifyErrors);

  std::error_code ec;
  llvm::ToolOutputFile out(outputPath, ec, llvm::sys::fs::OF_Text);
  if (ec)
    return fail("cannot write '" + outputPath + "': " + ec.message());
  switch (emit) {
  case Emit::IR:
    printModule(m, out.os());
    break;
  case Emit::Summary: {
    ModelSummary s = summarize(m);
    if (format == Format::Json)
      out.os() << llvm::formatv("{0:2}", summaryToJson(s)) << "\n";
    else
      printSummaryText(s, out.os());
    break;
  }
  }
  out.keep();
  return 0;
}
