//===- OnnxText.h - Small ONNX models as protobuf text, for unit tests ----===//
//
// Builds `.onnxtxt` models line by line, writes them to a temporary file and
// imports them with importOnnxFile, so tests read like the graphs they check.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "frontend/OnnxImporter.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace pax::test {

/// ONNX TensorProto data types used by the tests.
enum OnnxType : int { kFloat = 1, kInt64 = 7, kBool = 9 };

/// `attribute { ... }` of type INT.
inline std::string intAttr(const std::string &name, int64_t v) {
  return "attribute { name: \"" + name +
         "\" type: INT i: " + std::to_string(v) + " } ";
}

/// `attribute { ... }` of type INTS.
inline std::string intsAttr(const std::string &name,
                            const std::vector<int64_t> &vs) {
  std::string s = "attribute { name: \"" + name + "\" type: INTS";
  for (int64_t v : vs)
    s += " ints: " + std::to_string(v);
  return s + " } ";
}

/// `attribute { ... }` of type STRING.
inline std::string strAttr(const std::string &name, const std::string &v) {
  return "attribute { name: \"" + name + "\" type: STRING s: \"" + v + "\" } ";
}

/// A model under construction; str() is its protobuf text.
class OnnxText {
public:
  explicit OnnxText(int opset = 17) : opset(opset) {}

  /// A graph input of element type \p elem and static shape \p dims.
  OnnxText &input(const std::string &name, std::vector<int64_t> dims,
                  int elem = kFloat) {
    graph += "  input { name: \"" + name + "\" type { tensor_type { " +
             "elem_type: " + std::to_string(elem) + " shape {";
    for (int64_t d : dims)
      graph += " dim { dim_value: " + std::to_string(d) + " }";
    graph += " } } } }\n";
    return *this;
  }

  /// An int64 initializer holding \p values.
  OnnxText &ints(const std::string &name, std::vector<int64_t> dims,
                 std::vector<int64_t> values) {
    graph += "  initializer { name: \"" + name + "\" data_type: 7";
    for (int64_t d : dims)
      graph += " dims: " + std::to_string(d);
    for (int64_t v : values)
      graph += " int64_data: " + std::to_string(v);
    graph += " }\n";
    return *this;
  }

  /// A float initializer whose elements all equal \p v.
  OnnxText &floats(const std::string &name, std::vector<int64_t> dims,
                   float v) {
    int64_t n = 1;
    graph += "  initializer { name: \"" + name + "\" data_type: 1";
    for (int64_t d : dims)
      graph += " dims: " + std::to_string(d), n *= d;
    for (int64_t i = 0; i < n; ++i)
      graph += " float_data: " + std::to_string(v);
    graph += " }\n";
    return *this;
  }

  /// A node; \p attrs is attribute text from intAttr() and friends.
  OnnxText &node(const std::string &opType, std::vector<std::string> ins,
                 std::vector<std::string> outs, const std::string &attrs = "",
                 std::string name = "") {
    if (name.empty())
      name = opType;
    graph += "  node { name: \"" + name + "\" op_type: \"" + opType + "\"";
    for (const auto &i : ins)
      graph += " input: \"" + i + "\"";
    for (const auto &o : outs)
      graph += " output: \"" + o + "\"";
    graph += " " + attrs + "}\n";
    return *this;
  }

  /// A graph output (its shape is left to the importer).
  OnnxText &output(const std::string &name) {
    graph += "  output { name: \"" + name + "\" }\n";
    return *this;
  }

  std::string str() const {
    return "ir_version: 8\nopset_import { domain: \"\" version: " +
           std::to_string(opset) + " }\ngraph {\n  name: \"g\"\n" + graph +
           "}\n";
  }

private:
  int opset;
  std::string graph;
};

/// Writes \p model to a temporary `.onnxtxt` file and imports it.
inline llvm::Expected<ImportResult> importText(const OnnxText &model,
                                               const ImportOptions &opts = {}) {
  int fd = -1;
  llvm::SmallString<128> path;
  if (auto ec =
          llvm::sys::fs::createTemporaryFile("pax-unit", "onnxtxt", fd, path))
    return llvm::errorCodeToError(ec);
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << model.str();
  }
  auto result = importOnnxFile(path, opts);
  llvm::sys::fs::remove(path);
  return result;
}

/// The error message of \p e, or "" (with a test failure) when it holds a
/// value.
template <typename T> std::string errorText(llvm::Expected<T> &e) {
  if (e) {
    ADD_FAILURE() << "expected an import error";
    return "";
  }
  return llvm::toString(e.takeError());
}

/// The shape of the graph output called \p name, or {-1} when there is none.
inline std::vector<int64_t> outputShape(const Module &m,
                                        const std::string &name) {
  for (size_t i = 0; i < m.main.returns.size(); ++i)
    if (m.main.returnNames[i] == name)
      return {m.main.returns[i]->type.shape.begin(),
              m.main.returns[i]->type.shape.end()};
  return {-1};
}

} // namespace pax::test
