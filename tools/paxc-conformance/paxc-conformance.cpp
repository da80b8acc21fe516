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

/// Runs one node test directory.
static Outcome runTest(const std::string &dir) {
  std::string modelPath = dir + "/model.onnx";
  auto imported = importOnnxFile(modelPath, ImportOptions());
  if (!imported)
    return {Outcome::Skip, "import: " + llvm::toString(imported.takeError())};
  Module &m = *imported->module;
  for (const auto &op : m.main.ops) {
    if (op->kind == OpKind::Opaque)
      return {Outcome::Skip, "no importer for the op"};
    // ONNX leaves the generator open; a test's numbers are numpy's.
    if (op->kind == OpKind::RandomUniform)
      return {Outcome::Skip, "random: paxc's generator draws other numbers"};
    // paxc refuses plans holding such an op; it is never run.
    if (!hasCpuKernel(*op))
      return {Outcome::Skip, "no kernel: " + describeOpKind(*op)};
  }
  onnx::ModelProto proto;
  {
    auto buf = llvm::MemoryBuffer::getFile(modelPath, false, false);
    proto.ParseFromArray((*buf)->getBufferStart(),
                         int((*buf)->getBufferSize()));
  }
  llvm::DenseMap<const Value *, runtime::Tensor> values;
  std::string data = dir + "/test_data_set_0";
  // The data files follow the graph inputs (initializers excluded), which
  // became function arguments or, for weights, `input()` globals.
  llvm::StringMap<const Value *> byName;
  for (const auto &a : m.main.args)
    byName[a->name] = a.get();
  for (const auto &g : m.globals)
    if (g->source == DataSource::Input)
      byName[g->ref] = &g->value;
  llvm::StringSet<> inits;
  for (const auto &init : proto.graph().initializer())
    inits.insert(init.name());
  unsigned index = 0;
  for (const auto &vi : proto.graph().input()) {
    if (inits.count(vi.name()))
      continue;
    auto c = readTensorFile(data + "/input_" + std::to_string(index++) + ".pb",
                            "input");
    if (!c)
      return {Outcome::Skip, "inputs: " + llvm::toString(c.takeError())};
    const Value *v = byName.lookup(vi.name());
    if (v && c->type.elem != v->type.elem)
      return {Outcome::Skip, "data: the test stores input " +
                                 std::to_string(index - 1) + " as " +
                                 dtypeName(c->type.elem).str() + ", not " +
                                 dtypeName(v->type.elem).str()};
    if (v)
      values[v] = toRuntimeTensor(*c);
  }
  for (const auto &g : m.globals) {
    if (g->source == DataSource::Input)
      continue; // fed above
    auto t = globalTensor(*g, proto, dir);
    if (!t)
      return {Outcome::Skip, llvm::toString(t.takeError())};
    values[&g->value] = std::move(*t);
  }
  for (const auto &op : m.main.ops) {
    llvm::SmallVector<const runtime::Tensor *, 4> ins;
    llvm::SmallVector<runtime::Tensor, 2> outs(op->results.size());
    llvm::SmallVector<uint32_t, 4> inIds, outIds;
    for (size_t i = 0; i < op->operands.size(); ++i)
      ins.push_back(&values[op->operands[i].value]), inIds.push_back(i);
    llvm::SmallVector<runtime::Tensor *, 2> outPtrs;
    for (size_t i = 0; i < op->results.size(); ++i) {
      const TensorType &t = op->results[i].value->type;
      outs[i].dtype = toPlanDType(t.elem);
      outs[i].shape.assign(t.shape.begin(), t.shape.end());
      outs[i].data = runtime::Bytes(size_t(t.bytes()));
      outPtrs.push_back(&outs[i]);
      outIds.push_back(uint32_t(op->operands.size() + i));
    }
    plan::Compute c = emitCompute(*op, inIds, outIds);
    if (auto err = runtime::runKernel(c, ins, outPtrs))
      return {Outcome::Fail, "kernel: " + llvm::toString(std::move(err))};
    for (size_t i = 0; i < op->results.size(); ++i)
      values[op->results[i].value.get()] = std::move(outs[i]);
  }
  for (size_t i = 0; i < m.main.returns.size(); ++i) {
    auto want =
        readTensorFile(data + "/output_" + std::to_string(i) + ".pb", "output");
    if (!want)
      return {Outcome::Skip, "outputs: " + llvm::toString(want.takeError())};
    const runtime::Tensor &got = values[m.main.returns[i]];
    if (want->type.elem != m.main.returns[i]->type.elem)
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
