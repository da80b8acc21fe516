//===- paxc-conformance.cpp - ONNX node tests on paxc's CPU kernels -------===//
//
//   paxc-conformance [--node-dir=DIR] [--filter=SUBSTRING] [-v]
//
// For every ONNX node test (Debian's libonnx-testdata): import the model,
// run each op on the CPU kernels, compare with the expected outputs. A test
// whose op paxc does not import, or has no kernel for yet, is skipped with
// the reason; the summary counts passed, failed and skipped tests.
//
//===----------------------------------------------------------------------===//
#include "codegen/EmitCompute.h"
#include "frontend/OnnxImporter.h"
#include "frontend/TensorProto.h"
#include "runtime/Tensor.h"
#include "runtime/cpu/Kernels.h"
#include "tools/common/Runnable.h"
#include "tools/common/TensorFiles.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <optional>

using namespace pax;
namespace cl = llvm::cl;

static cl::opt<std::string>
    nodeDir("node-dir", cl::desc("The ONNX node tests"),
            cl::init("/usr/share/libonnx-testdata/data/node"));
static cl::opt<std::string>
    filter("filter", cl::desc("Only tests whose name contains this"));
static cl::opt<bool> verbose("v", cl::desc("Print every test"));

namespace {
/// A test's outcome.
struct Outcome {
  enum Kind { Pass, Fail, Skip } kind;
  std::string reason;
};
} // namespace

/// The tensor a global holds.
static llvm::Expected<runtime::Tensor>
globalTensor(const Global &g, const onnx::ModelProto &m, llvm::StringRef dir) {
  ConstTensor c;
  if (g.source == DataSource::Fill) {
    c = ConstTensor::zeros(g.value.type);
    for (int64_t i = 0; i < c.numel(); ++i)
      c.set(i, g.fill);
    return toRuntimeTensor(c);
  }
  if (g.source == DataSource::Dense) {
    runtime::Tensor t;
    t.dtype = toPlanDType(g.value.type.elem);
    t.shape.assign(g.value.type.shape.begin(), g.value.type.shape.end());
    t.data = runtime::Bytes(g.bytes.begin(), g.bytes.end());
    return t;
  }
  for (const auto &init : m.graph().initializer())
    if (init.name() == g.ref) {
      auto v = readTensorProto(init, dir);
      if (!v)
        return v.takeError();
      v->type = g.value.type; // a reshape of the initializer
      return toRuntimeTensor(*v);
    }
  return llvm::createStringError("no data for @" + g.name());
}

namespace {
/// A node test being run: its model, as a proto and imported, and the
/// values of its tensors.
struct NodeTest {
  std::string dir, data;
  onnx::ModelProto proto;
  /// The initializers of the model as imported: the file's, and the
  /// integer inputs bound where the file's model would not import.
  onnx::ModelProto initialized;
  std::unique_ptr<Module> module;
  llvm::DenseMap<const Value *, runtime::Tensor> values;
};
} // namespace

/// The test's graph inputs (initializers excluded) in order, each with
/// the data file that holds its value.
static std::vector<std::pair<std::string, std::string>>
inputFiles(const NodeTest &t) {
  std::vector<std::pair<std::string, std::string>> files;
  llvm::StringSet<> inits;
  for (const auto &init : t.proto.graph().initializer())
    inits.insert(init.name());
  for (const auto &vi : t.proto.graph().input())
    if (!inits.count(vi.name()))
      files.push_back({vi.name(), t.data + "/input_" +
                                      std::to_string(files.size()) + ".pb"});
  return files;
}

/// The test's data for each of its graph inputs, by name.
static std::map<std::string, onnx::TensorProto> inputData(const NodeTest &t) {
  std::map<std::string, onnx::TensorProto> data;
  for (const auto &[name, path] : inputFiles(t)) {
    auto buf = llvm::MemoryBuffer::getFile(path, false, false);
    onnx::TensorProto value;
    if (buf && value.ParseFromArray((*buf)->getBufferStart(),
                                    int((*buf)->getBufferSize())))
      data[name] = value;
  }
  return data;
}

/// The inputs an import error says must be constants: "('NAME') must be a
/// constant", and those after "from graph input(s) " ('A', 'B').
static std::vector<std::string> inputsToBind(llvm::StringRef error) {
  std::vector<std::string> names;
  size_t at = error.find("') must be a constant");
  size_t open = at == llvm::StringRef::npos ? llvm::StringRef::npos
                                            : error.substr(0, at).rfind("('");
  if (open != llvm::StringRef::npos)
    names.push_back(error.substr(open + 2, at - open - 2).str());
  size_t from = error.find("from graph input(s) ");
  if (from == llvm::StringRef::npos)
    return names;
  llvm::StringRef rest = error.substr(from + 20);
  while (rest.consume_front("'")) {
    auto [name, tail] = rest.split('\'');
    names.push_back(name.str());
    rest = tail;
    if (!rest.consume_front(", "))
      break;
  }
  return names;
}

/// Imports \p modelPath as a user who knows the test's input values would
/// after paxc refused it: with the integer inputs (shapes, axes, repeats,
/// indices) bound, then binding each input an error names as needing to be
/// a constant. The error of the first attempt where none imports.
static llvm::Expected<ImportResult>
importBound(NodeTest &t, const std::string &modelPath, std::string first) {
  std::map<std::string, onnx::TensorProto> data = inputData(t);
  ImportOptions bound;
  for (const auto &[name, value] : data)
    if (value.data_type() == onnx::TensorProto::INT64 ||
        value.data_type() == onnx::TensorProto::INT32)
      bound.bindings[name] = value;
  for (int attempt = 0; attempt < 8; ++attempt) {
    auto imported = importOnnxFile(modelPath, bound);
    if (imported) {
      for (auto &[name, value] : bound.bindings) {
        onnx::TensorProto &init =
            *t.initialized.mutable_graph()->add_initializer();
        init = value;
        init.set_name(name);
      }
      return imported;
    }
    bool more = false;
    for (const std::string &name :
         inputsToBind(llvm::toString(imported.takeError())))
      if (data.count(name) && !bound.bindings.count(name)) {
        bound.bindings[name] = data[name];
        more = true;
      }
    if (!more)
      break;
  }
  return llvm::createStringError(first);
}

/// Imports \p t's model; where the importer refuses it, again with inputs
/// bound (importBound). A skip reason when it does not import.
static std::optional<Outcome> importTest(NodeTest &t) {
  std::string modelPath = t.dir + "/model.onnx";
  auto buf = llvm::MemoryBuffer::getFile(modelPath, false, false);
  if (!buf || !t.proto.ParseFromArray((*buf)->getBufferStart(),
                                      int((*buf)->getBufferSize())))
    return Outcome{Outcome::Skip, "import: cannot read " + modelPath};
  *t.initialized.mutable_graph()->mutable_initializer() =
      t.proto.graph().initializer();
  auto imported = importOnnxFile(modelPath, ImportOptions());
  if (!imported)
    imported = importBound(t, modelPath, llvm::toString(imported.takeError()));
  if (!imported)
    return Outcome{Outcome::Skip,
                   "import: " + llvm::toString(imported.takeError())};
  t.module = std::move(imported->module);
  return std::nullopt;
}

/// A reason to skip \p m: an op without an importer, a kernel, or whose
/// numbers cannot be the test's.
static std::optional<Outcome> unrunnable(const Module &m) {
  for (const auto &op : m.main.ops) {
    if (op->kind == OpKind::Opaque)
      return Outcome{Outcome::Skip, "no importer for the op"};
    // ONNX leaves the generator open; a test's numbers are numpy's.
    if (op->kind == OpKind::RandomUniform)
      return Outcome{Outcome::Skip,
                     "random: paxc's generator draws other numbers"};
    // paxc refuses plans holding such an op; it is never run.
    if (!hasCpuKernel(*op))
      return Outcome{Outcome::Skip, "no kernel: " + describeOpKind(*op)};
  }
  return std::nullopt;
}

/// The test's inputs (those still inputs of the module) and globals into
/// \p t.values.
static std::optional<Outcome> feedTest(NodeTest &t) {
  Module &m = *t.module;
  // The data files follow the graph inputs (initializers excluded), which
  // became function arguments or, for weights, `input()` globals.
  llvm::StringMap<const Value *> byName;
  for (const auto &a : m.main.args)
    byName[a->name] = a.get();
  for (const auto &g : m.globals)
    if (g->source == DataSource::Input)
      byName[g->ref] = &g->value;
  unsigned index = 0;
  for (const auto &[name, path] : inputFiles(t)) {
    ++index;
    auto c = readTensorFile(path, "input");
    if (!c)
      return Outcome{Outcome::Skip, "inputs: " + llvm::toString(c.takeError())};
    const Value *v = byName.lookup(name);
    if (v && c->type.elem != v->type.elem)
      return Outcome{Outcome::Skip, "data: the test stores input " +
                                        std::to_string(index - 1) + " as " +
                                        dtypeName(c->type.elem).str() +
                                        ", not " +
                                        dtypeName(v->type.elem).str()};
    if (v)
      t.values[v] = toRuntimeTensor(*c);
  }
  for (const auto &g : m.globals) {
    if (g->source == DataSource::Input)
      continue; // fed above
    auto v = globalTensor(*g, t.initialized, t.dir);
    if (!v)
      return Outcome{Outcome::Skip, llvm::toString(v.takeError())};
    t.values[&g->value] = std::move(*v);
  }
  return std::nullopt;
}
/// Runs each op of \p t's module on the CPU kernels, in order.
static std::optional<Outcome> runOps(NodeTest &t) {
  for (const auto &op : t.module->main.ops) {
    llvm::SmallVector<const runtime::Tensor *, 4> ins;
    llvm::SmallVector<runtime::Tensor, 2> outs(op->results.size());
    llvm::SmallVector<uint32_t, 4> inIds, outIds;
    for (size_t i = 0; i < op->operands.size(); ++i)
      ins.push_back(&t.values[op->operands[i].value]), inIds.push_back(i);
    llvm::SmallVector<runtime::Tensor *, 2> outPtrs;
    for (size_t i = 0; i < op->results.size(); ++i) {
      const TensorType &type = op->results[i].value->type;
      outs[i].dtype = toPlanDType(type.elem);
      outs[i].shape.assign(type.shape.begin(), type.shape.end());
      outs[i].data = runtime::Bytes(size_t(type.bytes()));
      outPtrs.push_back(&outs[i]);
      outIds.push_back(uint32_t(op->operands.size() + i));
    }
    plan::Compute c = emitCompute(*op, inIds, outIds);
    if (auto err = runtime::runKernel(c, ins, outPtrs))
      return Outcome{Outcome::Fail,
                     "kernel: " + llvm::toString(std::move(err))};
    for (size_t i = 0; i < op->results.size(); ++i)
      t.values[op->results[i].value.get()] = std::move(outs[i]);
  }
  return std::nullopt;
}

/// \p t's returned values against the test's outputs: elementwise within
/// 1e-5 plus 1e-3 of the expected value, NaN equal to NaN.
static Outcome compareOutputs(NodeTest &t) {
  const Func &f = t.module->main;
  for (size_t i = 0; i < f.returns.size(); ++i) {
    auto want = readTensorFile(t.data + "/output_" + std::to_string(i) + ".pb",
                               "output");
    if (!want)
      return {Outcome::Skip, "outputs: " + llvm::toString(want.takeError())};
    const runtime::Tensor &got = t.values[f.returns[i]];
    if (want->type.elem != f.returns[i]->type.elem)
      return {Outcome::Skip, "data: the test stores output " +
                                 std::to_string(i) + " as " +
                                 dtypeName(want->type.elem).str()};
    if (int64_t(got.data.size()) / runtime::dtypeBytes(got.dtype) !=
        want->numel())
      return {Outcome::Fail,
              "output " + std::to_string(i) + " has the wrong size"};
    for (int64_t k = 0; k < want->numel(); ++k) {
      double a = got.real(k), b = want->real(k);
      bool same = (std::isnan(a) && std::isnan(b)) || a == b ||
                  std::fabs(a - b) <= 1e-5 + 1e-3 * std::fabs(b);
      if (!same)
        return {Outcome::Fail, "output " + std::to_string(i) + " element " +
                                   std::to_string(k) + ": " +
                                   std::to_string(a) + " instead of " +
                                   std::to_string(b)};
    }
  }
  return {Outcome::Pass, ""};
}

/// Tests whose stored outputs ONNX's later reference no longer computes:
/// align_corners from the unfloored output size (ONNX 1.12's data, fixed
/// since). paxc's outputs equal onnxruntime's on them.
static const char *const kOutdatedOutputs[] = {
    "test_resize_downsample_scales_cubic_align_corners",
    "test_resize_downsample_scales_linear_align_corners",
};

/// Runs one node test directory.
static Outcome runTest(const std::string &dir) {
  llvm::StringRef name = llvm::sys::path::filename(dir);
  for (const char *outdated : kOutdatedOutputs)
    if (name == outdated)
      return {Outcome::Skip, "data: the stored outputs are ONNX 1.12's "
                             "align_corners from the unfloored size "
                             "(onnxruntime computes paxc's)"};
  NodeTest t;
  t.dir = dir;
  t.data = dir + "/test_data_set_0";
  if (auto o = importTest(t))
    return *o;
  if (auto o = unrunnable(*t.module))
    return *o;
  if (auto o = feedTest(t))
    return *o;
  if (auto o = runOps(t))
    return *o;
  return compareOutputs(t);
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(
      argc, argv, "paxc-conformance: ONNX node tests on paxc's CPU kernels\n");
  std::error_code ec;
  std::vector<std::string> dirs;
  for (llvm::sys::fs::directory_iterator it(nodeDir, ec), end; it != end && !ec;
       it.increment(ec))
    if (llvm::StringRef(it->path()).contains(filter.getValue()))
      dirs.push_back(it->path());
  if (ec || dirs.empty()) {
    llvm::errs() << "paxc-conformance: error: no node tests under '" << nodeDir
                 << "'\n";
    return 1;
  }
  std::sort(dirs.begin(), dirs.end());
  std::map<std::string, int> skipReasons;
  int passed = 0, failed = 0, skipped = 0;
  for (const std::string &dir : dirs) {
    Outcome o = runTest(dir);
    std::string name = llvm::sys::path::filename(dir).str();
    if (o.kind == Outcome::Pass)
      ++passed;
    else if (o.kind == Outcome::Fail)
      ++failed;
    else
      ++skipped,
          ++skipReasons[llvm::StringRef(o.reason).split(':').first.str()];
    if (o.kind == Outcome::Fail || verbose)
      llvm::outs() << (o.kind == Outcome::Pass   ? "PASS "
                       : o.kind == Outcome::Fail ? "FAIL "
                                                 : "SKIP ")
                   << name << (o.reason.empty() ? "" : ": " + o.reason) << "\n";
  }
  for (const auto &[reason, n] : skipReasons)
    llvm::outs() << "skipped (" << reason << "): " << n << "\n";
  llvm::outs() << passed << " passed, " << failed << " failed, " << skipped
               << " skipped\n";
  return failed ? 1 : 0;
}
