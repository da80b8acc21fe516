//===- ImportFlags.cpp - paxc's options of the model's shapes and values -===//
#include "tools/paxc/ImportFlags.h"

#include "tools/common/TensorFiles.h"
#include "tools/paxc/Rewrites.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/MemoryBuffer.h"

namespace cl = llvm::cl;

namespace pax::paxc {
namespace {

cl::list<std::string>
    dimBindings("dim",
                cl::desc("Bind a symbolic dim: --dim NAME=VALUE (repeatable)"),
                cl::value_desc("NAME=VALUE"), cl::cat(paxcCategory));

cl::opt<std::string> batch(
    "batch",
    cl::desc(
        "Set the leading (batch) dim of every data input, symbolic or not"),
    cl::value_desc("N"), cl::cat(paxcCategory));

cl::list<std::string> valueBindings(
    "bind",
    cl::desc("Freeze a graph input to the values in FILE (.npy, or an ONNX "
             "TensorProto .pb): it becomes a constant of the model, and the "
             "shapes, axes and other values computed from it fold at import "
             "(repeatable; the plan no longer takes it as an input)"),
    cl::value_desc("NAME=FILE"), cl::cat(paxcCategory));

/// The value of --bind's \p file (for input \p name) as a TensorProto.
llvm::Expected<onnx::TensorProto> boundValue(llvm::StringRef name,
                                             llvm::StringRef file) {
  std::string what = ("--bind " + name).str();
  if (file.ends_with(".npy")) {
    auto t = readNpyFile(file, what);
    if (!t)
      return t.takeError();
    return toTensorProto(name, *t);
  }
  auto buf = llvm::MemoryBuffer::getFile(file, /*IsText=*/false,
                                         /*RequiresNullTerminator=*/false);
  if (!buf)
    return llvm::createStringError(what + ": cannot read '" + file +
                                   "': " + buf.getError().message());
  onnx::TensorProto proto;
  if (!proto.ParseFromArray((*buf)->getBufferStart(),
                            int((*buf)->getBufferSize())))
    return llvm::createStringError(what + ": '" + file +
                                   "' is neither a .npy file nor an ONNX "
                                   "TensorProto");
  // Checked as paxc checks test data: the values fill the shape.
  if (auto c = parseTensorFile((*buf)->getBuffer(), file); !c)
    return c.takeError();
  return proto;
}

} // namespace

llvm::Error shapeOptionsFromFlags(ImportOptions &options) {
  for (const std::string &b : dimBindings) {
    auto [name, value] = llvm::StringRef(b).split('=');
    int64_t v;
    if (name.empty() || value.getAsInteger(10, v))
      return llvm::createStringError(
          "--dim '" + b + "': expected NAME=VALUE with an integer value");
    options.dims[name.str()] = v;
  }
  if (batch.getNumOccurrences()) {
    int64_t n;
    if (llvm::StringRef(batch).getAsInteger(10, n) || n <= 0)
      return llvm::createStringError("--batch=" + batch +
                                     ": the batch must be a positive integer");
    options.batch = n;
  }
  for (const std::string &b : valueBindings) {
    auto [name, file] = llvm::StringRef(b).split('=');
    if (name.empty() || file.empty())
      return llvm::createStringError("--bind '" + b + "': expected NAME=FILE");
    if (options.bindings.count(name.str()))
      return llvm::createStringError("--bind " + name +
                                     ": the input is bound twice");
    auto value = boundValue(name, file);
    if (!value)
      return value.takeError();
    options.bindings[name.str()] = std::move(*value);
  }
  return llvm::Error::success();
}

} // namespace pax::paxc
