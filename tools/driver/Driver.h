//===- Driver.h - paxc as a library: compile a model, run a plan -*- C++
//-*-===//
//
// What the command lines do, for other programs (the Python module): a
// model compiled with paxc's options into a plan (compile), and a plan run
// or trained on this process's devices (Session.h).
//
//   pax::driver::CompileOptions o;
//   o.model = "model.onnx";
//   o.options = {{"gpus", "4"}, {"mode", "train"}, {"loss", "mse"}};
//   auto compiled = pax::driver::compile(o);
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/plan/Plan.pb.h"

#include "llvm/Support/Error.h"

#include <string>
#include <utility>
#include <vector>

namespace pax::driver {

/// A compile's model and options.
struct CompileOptions {
  /// The model: the path of an ONNX file, or (where \c modelBytes is not
  /// empty) the name its bytes are known by in messages.
  std::string model;
  /// The model's bytes; written to a file of their own that the plan names
  /// (its weights are read from it at run time).
  std::string modelBytes;
  /// paxc's options by their command-line names (`gpus`, `mem-limit`;
  /// paxc --help lists them) with their values as the command line writes
  /// them (`4`, `true`); a name given more than once is a list option's
  /// values (--dim, --bind).
  std::vector<std::pair<std::string, std::string>> options;
};

/// A compiled plan and, where a strategy was searched or given, its report.
struct Compiled {
  plan::Plan plan;
  /// paxc --emit=report --format=json and --emit=report (empty on one
  /// device without a cluster or a strategy).
  std::string reportJson, reportText;
  /// The model file the plan reads its weights from.
  std::string modelPath;
};

/// Every option's name checked against paxc's table: an error names the
/// first that is not one of paxc's, or one a plan has no use for (--emit,
/// -o, --format: a compile makes a plan; --help, --list-clusters).
llvm::Error checkOptionNames(const CompileOptions &options);

/// \p options compiled as `paxc MODEL --NAME=VALUE ... -o FILE.paxplan`
/// would be: every option checked, errors with paxc's messages.
llvm::Expected<Compiled> compile(const CompileOptions &options);

/// The plan file at \p path (paxc -o FILE.paxplan), checked whole as
/// paxrun checks it before a run.
llvm::Expected<plan::Plan> loadPlan(const std::string &path);

} // namespace pax::driver
