//===- Driver.cpp - paxc as a library: compile a model --------------------===//
#include "tools/driver/Driver.h"

#include "codegen/plan/PlanFile.h"
#include "runtime/PlanCheck.h"
#include "tools/paxc/Compile.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

namespace pax::driver {

llvm::Error checkOptionNames(const CompileOptions &options) {
  static const llvm::StringSet<> notForAPlan = {
      "emit", "o", "format", "help", "help-list", "list-clusters", "version"};
  for (const auto &[name, value] : options.options) {
    if (notForAPlan.contains(name))
      return llvm::createStringError(
          "option '" + name +
          "': a compile makes a plan (its report and strategy come with "
          "it); the command line's --" +
          name + " has no use here");
    if (!paxc::isOption(name))
      return llvm::createStringError("unknown option '" + name +
                                     "' (paxc --help lists the options)");
  }
  return llvm::Error::success();
}

/// \p bytes written to a file of their own (kept: the plan reads its
/// weights from it), named after \p name.
static llvm::Expected<std::string> writeModelBytes(llvm::StringRef bytes,
                                                   llvm::StringRef name) {
  if (bytes.empty())
    return llvm::createStringError("the model '" + name + "' has no bytes");
  llvm::SmallString<256> path;
  if (auto ec = llvm::sys::fs::createTemporaryFile("paxc-model", "onnx", path))
    return llvm::createStringError("cannot write the model's bytes: " +
                                   ec.message());
  if (auto err = writeFileBytes(path, bytes)) {
    llvm::sys::fs::remove(path);
    return err;
  }
  return path.str().str();
}

/// paxc's arguments for \p model and \p options: the model's absolute
/// path (no path reads as an option, `-x` or `@file`), then --NAME=VALUE.
static std::vector<std::string> compileArgs(const std::string &model,
                                            const CompileOptions &options) {
  llvm::SmallString<256> absolute(model);
  llvm::sys::fs::make_absolute(absolute);
  std::vector<std::string> args = {absolute.str().str()};
  for (const auto &[name, value] : options.options)
    args.push_back("--" + name + "=" + value);
  return args;
}

llvm::Expected<Compiled> compile(const CompileOptions &options) {
  if (auto err = checkOptionNames(options))
    return err;
  std::string model = options.model;
  bool fromBytes = !options.modelBytes.empty();
  if (fromBytes) {
    auto path = writeModelBytes(options.modelBytes, options.model);
    if (!path)
      return path.takeError();
    model = *path;
  }
  if (model.empty())
    return llvm::createStringError("no model given");
  auto compiled = paxc::compilePlan(compileArgs(model, options));
  if (!compiled) {
    if (!fromBytes)
      return compiled.takeError();
    // A plan that failed names no model file: the bytes' copy goes, and
    // the message names the bytes as the caller does.
    llvm::sys::fs::remove(model);
    std::string message = llvm::toString(compiled.takeError());
    for (size_t at; (at = message.find(model)) != std::string::npos;)
      message.replace(at, model.size(), options.model);
    return llvm::createStringError(message);
  }
  return Compiled{std::move(compiled->plan), std::move(compiled->reportJson),
                  std::move(compiled->reportText), model};
}

llvm::Expected<plan::Plan> loadPlan(const std::string &path) {
  auto plan = readPlanFile(path);
  if (!plan)
    return plan.takeError();
  if (auto err = runtime::checkPlan(*plan))
    return llvm::createStringError(path + ": " +
                                   llvm::toString(std::move(err)));
  return plan;
}

} // namespace pax::driver
