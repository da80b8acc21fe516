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
  int fd;
  llvm::SmallString<256> path;
  if (auto ec =
          llvm::sys::fs::createTemporaryFile("paxc-model", "onnx", fd, path))
    return llvm::createStringError("cannot write the model's bytes: " +
                                   ec.message());
  llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
  os << bytes;
  os.close();
  if (os.has_error())
    return llvm::createStringError("cannot write '" + path +
                                   "': " + os.error().message());
  return path.str().str();
}

llvm::Expected<Compiled> compile(const CompileOptions &options) {
  if (auto err = checkOptionNames(options))
    return err;
  std::string model = options.model;
  if (!options.modelBytes.empty()) {
    auto path = writeModelBytes(options.modelBytes, options.model);
    if (!path)
      return path.takeError();
    model = *path;
  }
  if (model.empty())
    return llvm::createStringError("no model given");
  std::vector<std::string> args = {model};
  for (const auto &[name, value] : options.options)
    args.push_back("--" + name + "=" + value);
  auto compiled = paxc::compilePlan(args);
  if (!compiled)
    return compiled.takeError();
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
