//===- OnnxImporter.cpp - ONNX models into the paxc IR --------------------===//
#include "frontend/OnnxImporter.h"

#include "frontend/Importer.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

namespace pax {

namespace {
/// Collects the first protobuf text-format error with its position.
class TextErrors : public google::protobuf::io::ErrorCollector {
public:
  void AddError(int line, google::protobuf::io::ColumnNumber col,
                const std::string &msg) override {
    if (first.empty())
      first =
          std::to_string(line + 1) + ":" + std::to_string(col + 1) + ": " + msg;
  }
  std::string first;
};
} // namespace

static bool isTextPath(llvm::StringRef path) {
  return path.ends_with(".onnxtxt") || path.ends_with(".txtpb") ||
         path.ends_with(".textproto") || path.ends_with(".pbtxt");
}

/// Parses and checks the model's envelope: versions and graph.
static llvm::Error parseModel(llvm::StringRef path, llvm::StringRef bytes,
                              onnx::ModelProto &model) {
  auto fail = [&](const llvm::Twine &msg) {
    return llvm::createStringError(path + ": " + msg);
  };
  if (bytes.empty())
    return fail("the file is empty");
  if (isTextPath(path)) {
    google::protobuf::TextFormat::Parser parser;
    TextErrors errors;
    parser.RecordErrorsTo(&errors);
    if (!parser.ParseFromString(bytes.str(), &model))
      return llvm::createStringError(path + ":" + errors.first);
  } else if (bytes.size() > size_t(INT32_MAX) ||
             !model.ParseFromArray(bytes.data(), int(bytes.size()))) {
    return fail("not a valid ONNX model (the protobuf does not parse; is the "
                "file truncated or not an ONNX model?)");
  }
  if (!model.has_graph())
    return fail("not a valid ONNX model (it has no graph)");
  int64_t ir = model.ir_version();
  if (ir < 3 || ir > 11)
    return fail("IR version " + llvm::Twine(ir) +
                " is not supported (paxc reads IR versions 3 to 11)");
  int64_t opset = -1;
  for (const auto &o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx")
      opset = o.version();
  if (opset < 0)
    return fail("the model imports no version of the default ONNX opset");
  if (opset < 7 || opset > 23)
    return fail("opset " + llvm::Twine(opset) +
                " is not supported (paxc reads opsets 7 to 23)");
  if (model.graph().output_size() == 0)
    return fail("the graph has no outputs");
  return llvm::Error::success();
}

llvm::Expected<ImportResult> importOnnxFile(llvm::StringRef path,
                                            const ImportOptions &options) {
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                         /*RequiresNullTerminator=*/false);
  if (!buf)
    return llvm::createStringError(
        path + ": cannot read the file: " + buf.getError().message());
  onnx::ModelProto model;
  if (auto err = parseModel(path, (*buf)->getBuffer(), model))
    return err;
  buf->reset(); // the protobuf holds its own copy
  for (const auto &[name, v] : options.dims)
    if (v <= 0 || v > kMaxExtent)
      return llvm::createStringError("--dim " + name + "=" + std::to_string(v) +
                                     ": a dim must be in [1, 2^48]");
  if (options.batch && (*options.batch <= 0 || *options.batch > kMaxExtent))
    return llvm::createStringError("--batch=" + std::to_string(*options.batch) +
                                   ": the batch must be in [1, 2^48]");
  return Importer(path, model, options).run();
}

} // namespace pax
