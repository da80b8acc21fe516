//===- paxrun.cpp - Runs a paxc plan --------------------------------------===//
//
//   paxrun model.paxplan [--inputs DIR | --random-inputs --seed=S]
//          [--outputs DIR]
//
// Reads the plan, loads each weight from the model it names, feeds the
// inputs (ONNX test-data layout: DIR/input_0.pb, ... in graph-input order),
// runs every instruction on the CPU kernels, and writes the outputs
// (DIR/output_0.pb, ...). Plans run on one device for now.
//
//===----------------------------------------------------------------------===//
#include "codegen/plan/PlanFile.h"
#include "frontend/TensorProto.h"
#include "runtime/Tensor.h"
#include "runtime/cpu/Kernels.h"
#include "tools/common/TensorFiles.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/WithColor.h"

#include <google/protobuf/text_format.h>
#include <onnx/onnx_pb.h>

#include <fstream>
#include <random>

using namespace pax;
namespace cl = llvm::cl;

static cl::OptionCategory runCategory("paxrun options");
static cl::opt<std::string>
    planPath(cl::Positional, cl::desc("<model.paxplan>"), cl::cat(runCategory));
static cl::opt<std::string>
    inputsDir("inputs",
              cl::desc("Folder with input_0.pb, ... (graph-input order)"),
              cl::value_desc("DIR"), cl::cat(runCategory));
static cl::opt<bool> randomInputs("random-inputs",
                                  cl::desc("Feed seeded random inputs"),
                                  cl::cat(runCategory));
static cl::opt<unsigned> seed("seed", cl::desc("Seed of --random-inputs"),
                              cl::init(1), cl::cat(runCategory));
static cl::opt<std::string>
    outputsDir("outputs", cl::desc("Folder that receives output_0.pb, ..."),
               cl::value_desc("DIR"), cl::cat(runCategory));

static int fail(const llvm::Twine &msg) {
  llvm::WithColor::error(llvm::errs(), "paxrun") << msg << "\n";
  return 1;
}

static std::vector<int64_t>
shapeOf(const google::protobuf::RepeatedField<int64_t> &s) {
  return std::vector<int64_t>(s.begin(), s.end());
}

/// Reads input file \p path into a tensor of the type and shape the plan
/// expects.
static llvm::Expected<runtime::Tensor> readInput(const std::string &path,
                                                 const plan::TensorInfo &info) {
  auto c = readTensorFile(path, "input");
  if (!c)
    return c.takeError();
  std::vector<int64_t> want = shapeOf(info.shape());
  if (std::vector<int64_t>(c->type.shape.begin(), c->type.shape.end()) != want)
    return llvm::createStringError("input '" + info.name() + "' (" + path +
                                   ") has shape " + shapeStr(c->type.shape) +
                                   ", the model expects " + shapeStr(want));
  if (runtime::isFloatDType(info.dtype()) != c->isReal())
    return llvm::createStringError("input '" + info.name() + "' (" + path +
                                   ") has the wrong element type");
  runtime::Tensor r = runtime::Tensor::zeros(info.dtype(), want);
  copyValues(*c, r);
  return r;
}

/// Seeded random values: floats in [-1, 1), integers in [0, 10).
static runtime::Tensor randomTensor(const plan::TensorInfo &info,
                                    std::mt19937 &rng) {
  runtime::Tensor t =
      runtime::Tensor::zeros(info.dtype(), shapeOf(info.shape()));
  std::uniform_real_distribution<double> real(-1, 1);
  std::uniform_int_distribution<int64_t> integer(0, 9);
  for (int64_t i = 0; i < t.numel(); ++i)
    runtime::isFloatDType(t.dtype) ? t.setReal(i, real(rng))
                                   : t.setInteger(i, integer(rng));
  return t;
}

/// Loads one weight of the model the plan names.
static llvm::Error loadWeight(const plan::LoadWeight &load,
                              const onnx::ModelProto &model,
                              llvm::StringRef modelDir, runtime::Tensor &out) {
  switch (load.source()) {
  case plan::LoadWeight::FILL:
    for (int64_t i = 0; i < out.numel(); ++i)
      runtime::isFloatDType(out.dtype)
          ? out.setReal(i, load.fill())
          : out.setInteger(i, int64_t(load.fill()));
    return llvm::Error::success();
  case plan::LoadWeight::DENSE:
    if (int64_t(load.dense().size()) != out.bytes())
      return llvm::createStringError("dense weight '" + load.tensor() +
                                     "' has the wrong size");
    std::memcpy(out.data.data(), load.dense().data(), load.dense().size());
    return llvm::Error::success();
  case plan::LoadWeight::INITIALIZER:
    for (const auto &init : model.graph().initializer())
      if (init.name() == load.tensor()) {
        auto c = readTensorProto(init, modelDir);
        if (!c)
          return c.takeError();
        copyValues(*c, out);
        return llvm::Error::success();
      }
    return llvm::createStringError("the model has no initializer '" +
                                   load.tensor() + "'");
  default:
    return llvm::createStringError("weight '" + load.tensor() +
                                   "' is a graph input; feeding weights at run "
                                   "time is not supported yet");
  }
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(runCategory);
  cl::ParseCommandLineOptions(argc, argv, "paxrun: runs a paxc plan\n");
  if (planPath.empty())
    return fail("no plan given (paxrun MODEL.paxplan [options])");
  auto plan = readPlanFile(planPath);
  if (!plan)
    return fail(llvm::toString(plan.takeError()));
  if (plan->devices() != 1 || plan->programs_size() != 1)
    return fail(planPath + ": plans for " + llvm::Twine(plan->devices()) +
                " devices are not supported yet");
  if (inputsDir.empty() == !randomInputs)
    return fail("give exactly one of --inputs DIR and --random-inputs");
  const plan::DeviceProgram &program = plan->programs(0);

  onnx::ModelProto model;
  {
    auto buf = llvm::MemoryBuffer::getFile(plan->source(), false, false);
    bool text = llvm::StringRef(plan->source()).ends_with("txt");
    bool ok =
        buf && (text ? google::protobuf::TextFormat::ParseFromString(
                           (*buf)->getBuffer().str(), &model)
                     : model.ParseFromArray((*buf)->getBufferStart(),
                                            int((*buf)->getBufferSize())));
    if (!ok)
      return fail("cannot read the model '" + plan->source() +
                  "' the plan names");
  }
  std::vector<runtime::Tensor> buffers;
  for (const plan::Buffer &b : program.buffers())
    buffers.push_back(runtime::Tensor::zeros(b.dtype(), shapeOf(b.shape())));

  std::mt19937 rng(seed);
  for (const plan::Binding &b : program.inputs()) {
    const plan::TensorInfo &info = plan->inputs(int(b.index()));
    if (randomInputs) {
      buffers[b.buffer()] = randomTensor(info, rng);
      continue;
    }
    auto t = readInput(
        inputsDir + "/input_" + std::to_string(b.index()) + ".pb", info);
    if (!t)
      return fail(llvm::toString(t.takeError()));
    buffers[b.buffer()] = std::move(*t);
  }
  std::string modelDir = llvm::sys::path::parent_path(plan->source()).str();
  for (const plan::Instruction &inst : program.instructions()) {
    if (inst.has_load()) {
      if (auto err = loadWeight(inst.load(), model, modelDir,
                                buffers[inst.load().buffer()]))
        return fail(llvm::toString(std::move(err)));
      continue;
    }
    if (!inst.has_compute())
      return fail("collectives and slices need a partitioned runtime, which "
                  "is not built yet");
    const plan::Compute &c = inst.compute();
    llvm::SmallVector<const runtime::Tensor *, 4> ins;
    llvm::SmallVector<runtime::Tensor *, 2> outs;
    for (const plan::Access &a : c.inputs())
      ins.push_back(&buffers[a.buffer()]);
    for (const plan::Access &a : c.outputs())
      outs.push_back(&buffers[a.buffer()]);
    if (auto err = runtime::runKernel(c, ins, outs))
      return fail(llvm::toString(std::move(err)));
  }
  if (!outputsDir.empty()) {
    llvm::sys::fs::create_directories(outputsDir);
    for (const plan::Binding &b : program.outputs()) {
      const runtime::Tensor &t = buffers[b.buffer()];
      onnx::TensorProto proto;
      proto.set_name(plan->outputs(int(b.index())).name());
      for (int64_t d : t.shape)
        proto.add_dims(d);
      proto.set_data_type(onnx::TensorProto::FLOAT);
      for (int64_t i = 0; i < t.numel(); ++i)
        proto.add_float_data(float(t.real(i)));
      std::ofstream f(outputsDir + "/output_" + std::to_string(b.index()) +
                          ".pb",
                      std::ios::binary);
      proto.SerializeToOstream(&f);
    }
  }
  llvm::outs() << "paxrun: ran " << program.instructions_size()
               << " instructions on 1 device\n";
  return 0;
}
