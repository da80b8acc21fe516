//===- paxrun.cpp - Runs a paxc plan --------------------------------------===//
//
//   paxrun model.paxplan [--inputs DIR | --random-inputs --seed=S]
//          [--outputs DIR] [--devices=N] [--verify] [--comm-stats]
//          [--repeat=N] [--time]
//   mpirun -np N paxrun model.paxplan [same options]
//
// Reads the plan, runs every device's program (as threads of this process,
// or one device per MPI rank under mpirun), loads each weight block from
// the model the plan names, feeds the inputs (ONNX test-data layout:
// DIR/input_0.pb, ... in graph-input order), and writes the outputs
// (DIR/output_0.pb, ...), assembled from the devices' blocks. --verify also
// runs the plan's unpartitioned reference program on one device and
// reports the largest errors. Under mpirun (or with --mpi), rank r runs
// device r, and rank 0 gathers the outputs and statistics and reports.
//
//===----------------------------------------------------------------------===//
#include "codegen/plan/PlanFile.h"
#include "frontend/TensorProto.h"
#include "runtime/Backend.h"
#ifdef PAX_HAVE_CUDA
#include "runtime/cuda/Nvrtc.h"
#endif
#include "runtime/Device.h"
#include "runtime/Exchange.h"
#include "runtime/PlanCheck.h"
#include "runtime/Profile.h"
#include "runtime/Run.h"
#include "tools/common/Printable.h"
#include "tools/common/TensorFiles.h"
#include "tools/paxrun/Decode.h"
#include "tools/paxrun/Feed.h"
#include "tools/paxrun/Measure.h"
#include "tools/paxrun/RankRun.h"
#include "tools/paxrun/Timing.h"
#include "tools/paxrun/Training.h"
#ifdef PAX_HAVE_MPI
#include "runtime/mpi/MpiCommunicator.h"
#include "runtime/mpi/MpiWorld.h"
#endif

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/WithColor.h"

#include <google/protobuf/text_format.h>
#include <onnx/onnx_pb.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <random>
#include <set>

#ifdef __GLIBC__
#include <malloc.h>
#endif

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
enum class OutFormat { Pb, Npy };
static cl::opt<OutFormat> outputFormat(
    "output-format", cl::desc("What --outputs writes"),
    cl::values(clEnumValN(OutFormat::Pb, "pb", "output_N.pb TensorProtos"),
               clEnumValN(OutFormat::Npy, "npy", "output_N.npy NumPy files")),
    cl::init(OutFormat::Pb), cl::cat(runCategory));
static cl::opt<unsigned>
    devicesOpt("devices",
               cl::desc("The number of devices to run on (must match the "
                        "plan)"),
               cl::cat(runCategory));
static cl::opt<bool>
    verify("verify",
           cl::desc("Also run the unpartitioned model on one device and "
                    "report the largest errors"),
           cl::cat(runCategory));
static cl::opt<double> tolerance(
    "tolerance",
    cl::desc("--verify fails above this relative L2 error (default 1e-4)"),
    cl::init(1e-4), cl::cat(runCategory));
static cl::opt<bool> commStats(
    "comm-stats",
    cl::desc("Print the bytes each collective moved per device next to the "
             "cost model's prediction; fail where they differ"),
    cl::cat(runCategory));
static cl::opt<bool>
    mpiOpt("mpi",
           cl::desc("Run one device per MPI rank (the default when mpirun "
                    "or another MPI launcher started paxrun)"),
           cl::cat(runCategory));

static cl::opt<unsigned>
    repeat("repeat",
           cl::desc("Run the plan N times (the outputs are the last run's)"),
           cl::init(1), cl::value_desc("N"), cl::cat(runCategory));
static cl::opt<unsigned> decodeSteps(
    "decode-steps",
    cl::desc("Run the plan N times as a decoding loop: after each step the "
             "outputs --feedback names become the next step's inputs; "
             "prints the steps per second (the outputs are the last step's)"),
    cl::init(0), cl::value_desc("N"), cl::cat(runCategory));
static cl::opt<std::string> feedbackSpec(
    "feedback",
    cl::desc("With --decode-steps: OUTPUT=INPUT,... (a '*' matches alike: "
             "present_*=past_*); each output must have its input's type and "
             "shape"),
    cl::value_desc("SPEC"), cl::cat(runCategory));
static cl::list<std::string> printOutputs(
    "print-output",
    cl::desc("With --decode-steps: print this output's values (at most 16) "
             "after each step (repeatable)"),
    cl::value_desc("NAME"), cl::cat(runCategory));
static cl::opt<bool>
    timeKernels("time",
                cl::desc("Print each run's (or training step's) seconds in "
                         "compute instructions and in all"),
                cl::cat(runCategory));
static cl::opt<runtime::ProfileBy> profileKernels(
    "profile",
    cl::desc("Print the compute instructions' seconds per run or training "
             "step (the first of several, a warm-up, not counted), summed "
             "per"),
    cl::init(runtime::ProfileBy::Off), cl::ValueOptional,
    cl::values(clEnumValN(runtime::ProfileBy::Kind, "", "op kind (default)"),
               clEnumValN(runtime::ProfileBy::Kind, "kind", "op kind"),
               clEnumValN(runtime::ProfileBy::Kernel, "kernel",
                          "kernel codegen chose (gemm, conv2d, ...)"),
               clEnumValN(runtime::ProfileBy::Instruction, "instruction",
                          "instruction: kind, kernel, source node and the "
                          "local iteration space"),
               clEnumValN(runtime::ProfileBy::CostKey, "cost-key",
                          "op block, by its key in a cost database")),
    cl::cat(runCategory));

static cl::opt<int> injectReplicaFault(
    "inject-replica-fault",
    cl::desc("Testing: flip the lowest bit of device D's first copy of a "
             "replicated output before the replicas are compared"),
    cl::init(-1), cl::value_desc("D"), cl::Hidden, cl::cat(runCategory));

// cl::desc keeps a reference: the text must outlive the option.
static const std::string backendHelp =
    "What runs the devices: " + runtime::backendNames() + " (default cpu)";
static cl::opt<std::string> backendName("backend", cl::desc(backendHelp),
                                        cl::init("cpu"), cl::value_desc("name"),
                                        cl::cat(runCategory));

static cl::opt<bool> fuseKernels(
    "fuse-kernels", cl::init(true),
    cl::desc("Run each chain of computes the device fuses (a convolution or "
             "matrix product and its epilogue, elementwise ops) as one "
             "kernel (default true; =false: every compute on its own, so "
             "that a profile times each)"),
    cl::cat(runCategory));

static cl::opt<std::string> tracePath(
    "trace",
    cl::desc("Write the last run's instructions per device as a "
             "Chrome/Perfetto trace (JSON), as paxc --emit=trace writes the "
             "simulated step (under mpirun, rank 0 writes every rank's, "
             "each from its first instruction; not with --train)"),
    cl::value_desc("FILE.json"), cl::cat(runCategory));

static cl::opt<bool> allowTf32(
    "allow-tf32",
    cl::desc("--backend=cuda: f32 matrix products may use TF32 tensor cores "
             "(faster, about 1e-3 relative; off by default, on for a plan "
             "of paxc --precision=tf32)"),
    cl::cat(runCategory));

static cl::opt<unsigned> threadsOpt(
    "threads",
    cl::desc("Worker threads of the CPU kernels in this process (0: every "
             "core; under mpirun, each rank's)"),
    cl::init(0), cl::value_desc("N"), cl::cat(runCategory));

static cl::OptionCategory measureCategory("paxrun measurement options");
static cl::opt<std::string> costDbOut(
    "write-cost-db",
    cl::desc("Time every op block of a cost probe (paxc --emit=cost-probe) "
             "on --backend over --repeat runs after a warm-up, and write "
             "the cost database paxc --cost-db reads"),
    cl::value_desc("FILE.json"), cl::cat(measureCategory));
static cl::opt<std::string> compileKernelsFor(
    "compile-kernels",
    cl::desc("Compile every generated kernel of the plan with NVRTC for a "
             "GPU architecture (sm_90), through the kernel cache, and exit: "
             "checks a plan's kernels where there is no GPU"),
    cl::value_desc("ARCH"), cl::cat(measureCategory));
static cl::opt<std::string> measureLinksOut(
    "measure-links",
    cl::desc("Measure the links between --devices=N devices (or the ranks "
             "of mpirun) and one device's matrix-product rate, and write "
             "them as a cluster JSON for paxc --cluster (no plan)"),
    cl::value_desc("FILE.json"), cl::cat(measureCategory));

static cl::OptionCategory trainCategory("paxrun training options");

/// This process's devices (one per program it runs, or the rank's), made
/// once: their arenas last from run to run and step to step. The buffers
/// each run leaves (its outputs) are valid until that device's next run.
static runtime::DeviceSet deviceSet;

/// This process's rank among the MPI ranks of its machine (its GPU), from
/// the launcher's environment; 0 where none says.
[[maybe_unused]] static unsigned localRank() {
  for (const char *name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                           "MV2_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"})
    if (const char *v = std::getenv(name))
      return unsigned(std::strtoul(v, nullptr, 10));
  return 0;
}

/// Makes \p n devices of --backend (GPU ordinals from \p first on).
static llvm::Error makeDevices(size_t n, unsigned first = 0) {
  std::optional<runtime::Backend> b = runtime::parseBackend(backendName);
  if (!b)
    return llvm::createStringError("--backend=" + backendName +
                                   ": not a backend (" +
                                   runtime::backendNames() + ")");
  runtime::setAllowTf32(allowTf32);
  return runtime::addDevices(*b, n, first, deviceSet);
}
static cl::opt<bool>
    train("train",
          cl::desc("Run training steps: a plan of paxc --mode=train with a "
                   "loss; each step's `update/NAME` outputs become NAME's "
                   "value for the next step"),
          cl::cat(trainCategory));
static cl::opt<unsigned> steps("steps", cl::desc("Training steps to run"),
                               cl::init(1), cl::cat(trainCategory));
static cl::opt<std::string> dataDir(
    "data",
    cl::desc("Training data: input_N.pb files (the labels last), reused every "
             "step, or folders step_0, step_1, ... used in turn"),
    cl::value_desc("DIR"), cl::cat(trainCategory));
static cl::opt<std::string>
    savePath("save",
             cl::desc("After training, write the source model with its "
                      "trained initializers"),
             cl::value_desc("FILE.onnx"), cl::cat(trainCategory));
static cl::opt<std::string> checkpointDir(
    "checkpoint",
    cl::desc("Write the weights, the optimizer state and the step here"),
    cl::value_desc("DIR"), cl::cat(trainCategory));
static cl::opt<unsigned>
    every("every", cl::desc("With --checkpoint: every K steps (0: at the end)"),
          cl::init(0), cl::cat(trainCategory));
static cl::opt<std::string>
    resumeDir("resume", cl::desc("Continue from a checkpoint of the same plan"),
              cl::value_desc("DIR"), cl::cat(trainCategory));

static int fail(const llvm::Twine &msg) {
  // One write, so the lines of several MPI ranks sharing a stderr do not
  // interleave.
  llvm::errs() << printable("paxrun: error: " + msg + "\n");
  return 1;
}

/// An error where the tensor file \p path, read as input number \p index
/// for the plan's \p info, holds another of the model's inputs (\p names)
/// by its stored name \p stored: the folder's files follow the model's
/// graph inputs in order.
static llvm::Error checkStoredName(const std::string &stored,
                                   const plan::TensorInfo &info, unsigned index,
                                   const std::vector<std::string> &names,
                                   const std::string &path) {
  if (stored.empty() || stored == info.name() ||
      !llvm::is_contained(names, stored))
    return llvm::Error::success();
  return llvm::createStringError(llvm::formatv(
      "'{0}' holds input '{1}', but input_{2} is the model's '{3}' (a "
      "test-data folder's files follow the model's graph inputs in order)",
      path, stored, index, info.name()));
}

/// Reads graph input number \p index of the test-data folder
/// (DIR/input_N.pb, or DIR/input_N.npy) into a tensor of the type and shape
/// the plan expects; a `.pb` that names another of the model's inputs
/// (\p names) is an error.
static llvm::Expected<runtime::Tensor>
readInput(unsigned index, const plan::TensorInfo &info,
          const std::vector<std::string> &names) {
  std::string base = inputsDir + "/input_" + std::to_string(index);
  std::string path = base + ".pb";
  std::vector<int64_t> want = shapeOf(info.shape());
  runtime::Tensor r = runtime::Tensor::zeros(info.dtype(), want);
  std::vector<int64_t> got;
  bool real;
  if (!llvm::sys::fs::exists(path) && llvm::sys::fs::exists(base + ".npy")) {
    path = base + ".npy";
    auto t = readNpyFile(path, "input");
    if (!t)
      return t.takeError();
    got = t->shape;
    real = runtime::isFloatDType(t->dtype);
    if (got == want && real == runtime::isFloatDType(info.dtype()))
      for (int64_t i = 0; i < r.numel(); ++i)
        real ? r.setReal(i, t->real(i)) : r.setInteger(i, t->integer(i));
  } else {
    std::string stored;
    auto c = readTensorFile(path, "input", &stored);
    if (!c)
      return c.takeError();
    if (auto err = checkStoredName(stored, info, index, names, path))
      return err;
    got.assign(c->type.shape.begin(), c->type.shape.end());
    real = c->isReal();
    if (got == want && real == runtime::isFloatDType(info.dtype()))
      copyValues(*c, r);
  }
  if (got != want)
    return llvm::createStringError("input '" + info.name() + "' (" + path +
                                   ") has shape " + shapeStr(got) +
                                   ", the model expects " + shapeStr(want));
  if (runtime::isFloatDType(info.dtype()) != real)
    return llvm::createStringError("input '" + info.name() + "' (" + path +
                                   ") has the wrong element type");
  return r;
}

/// The test-data index of graph input \p name (\p fallback if unlisted).
static unsigned dataIndex(const std::vector<std::string> &names,
                          llvm::StringRef name, unsigned fallback) {
  auto it = llvm::find(names, name);
  return it == names.end() ? fallback : unsigned(it - names.begin());
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

/// An error where the test-data folder \p dir holds more inputs
/// (input_0, input_1, ... as .pb or .npy) than the \p reads the plan and
/// its model take from it.
static llvm::Error checkInputCount(const std::string &dir, size_t reads) {
  size_t held = 0;
  auto holds = [&](size_t k) {
    std::string base = dir + "/input_" + std::to_string(k);
    return llvm::sys::fs::exists(base + ".pb") ||
           llvm::sys::fs::exists(base + ".npy");
  };
  while (holds(held))
    ++held;
  if (held <= reads)
    return llvm::Error::success();
  return llvm::createStringError(llvm::formatv(
      "'{0}' holds {1} inputs (input_0 to input_{2}), but the plan reads {3}",
      dir, held, held - 1, reads));
}

/// \p plan's inputs into \p inputs: seeded random values with
/// --random-inputs, else the test-data folder's (\p names: the model's
/// graph inputs in its order), which must hold no more than it reads.
static llvm::Error loadPlanInputs(const plan::Plan &plan,
                                  const std::vector<std::string> &names,
                                  std::mt19937 &rng,
                                  std::vector<runtime::Tensor> &inputs) {
  inputs.clear();
  if (!randomInputs)
    if (auto err = checkInputCount(
            inputsDir, std::max(names.size(), size_t(plan.inputs_size()))))
      return err;
  // The names a file may hold: the model's inputs and the plan's (a
  // training plan's labels).
  std::vector<std::string> known = names;
  for (const plan::TensorInfo &info : plan.inputs())
    if (!llvm::is_contained(known, info.name()))
      known.push_back(info.name());
  for (int i = 0; i < plan.inputs_size(); ++i) {
    const plan::TensorInfo &info = plan.inputs(i);
    if (randomInputs) {
      inputs.push_back(randomTensor(info, rng));
      continue;
    }
    auto t = readInput(dataIndex(names, info.name(), unsigned(i)), info, known);
    if (!t)
      return t.takeError();
    inputs.push_back(std::move(*t));
  }
  return llvm::Error::success();
}

/// Runs \p programs of \p plan as threads on this process's devices, as
/// \p run says (fuseKernels applied); fills \p outputs (whole tensors;
/// none unless \p gather). With \p resident (a training session: one per
/// device), each device loads weights through its own and keeps its
/// updated blocks there.
static llvm::Error runThreads(const plan::Plan &plan,
                              llvm::ArrayRef<const plan::DeviceProgram *> progs,
                              Feed &feed, std::vector<runtime::Tensor> &outputs,
                              std::vector<runtime::DeviceStats> &stats,
                              std::vector<ResidentFeed> *resident,
                              const runtime::RunOptions &run,
                              bool gather = true) {
  runtime::ThreadRunOptions options;
  static_cast<runtime::RunOptions &>(options) = run;
  options.fuseChains = fuseKernels;
  options.gatherOutputs = gather;
  // Once, in a run that gathers (and so compares) every output.
  if (options.leaveOutputs.empty()) {
    options.injectReplicaFault = injectReplicaFault;
    injectReplicaFault = -1;
  }
  if (auto err = runtime::runThreads(
          plan, progs, deviceSet,
          [&](size_t d) -> runtime::DataFeed & {
            return resident ? static_cast<runtime::DataFeed &>((*resident)[d])
                            : feed;
          },
          outputs, stats, options))
    return err;
  // The devices keep their updated blocks (moved: the run is over).
  if (resident)
    for (size_t d = 0; d < progs.size(); ++d) {
      (*resident)[d].carriedLoads += stats[d].carriedLoads;
      if (auto err = keepUpdates(plan, *progs[d], *deviceSet.devices[d],
                                 deviceSet.buffers[d], (*resident)[d]))
        return err;
    }
  return llvm::Error::success();
}

/// Whether to run one device per MPI rank: --mpi, or an MPI launcher
/// started this process (Open MPI's mpirun sets OMPI_COMM_WORLD_SIZE; PMI
/// launchers such as MPICH's mpiexec set PMI_SIZE).
static bool launchedByMpi() {
  return mpiOpt || std::getenv("OMPI_COMM_WORLD_SIZE") ||
         std::getenv("PMI_SIZE");
}

#ifndef PAX_HAVE_MPI
/// Under an MPI launcher without MPI: says so once (on the launcher's rank
/// 0) and fails on every rank.
static int failWithoutMpi() {
  const char *rank = std::getenv("OMPI_COMM_WORLD_RANK");
  if (!rank)
    rank = std::getenv("PMI_RANK");
  if (rank && llvm::StringRef(rank) != "0")
    return 1;
  return fail("built without MPI: cannot run one device per MPI rank; "
              "rebuild paxrun with an MPI library installed (Debian: "
              "libopenmpi-dev), or run it without mpirun to run every "
              "device as a thread");
}
#endif

/// What --time, --profile and --backend ask of a RunClock.
static RunClock::Options clockOptions() {
  RunClock::Options o;
  o.time = timeKernels;
  o.profile = profileKernels;
  // Timing a kernel on an asynchronous device (a GPU) waits for it, which
  // would slow the very runs --time measures.
  o.asynchronous = runtime::parseBackend(backendName) == runtime::Backend::Cuda;
  return o;
}

/// runThreads --repeat times, timed and profiled by a RunClock.
static llvm::Error runTimed(const plan::Plan &plan,
                            llvm::ArrayRef<const plan::DeviceProgram *> progs,
                            Feed &feed, std::vector<runtime::Tensor> &outputs,
                            std::vector<runtime::DeviceStats> &stats) {
  unsigned runs = std::max(1u, unsigned(repeat));
  RunClock clock(runs, "run", true, clockOptions());
  for (unsigned run = 1; run <= runs; ++run) {
    clock.begin(run);
    // The constant weights stay in the devices' arenas after the first
    // run; the outputs are gathered from the last (the others' would be
    // overwritten).
    runtime::RunOptions o;
    o.weightsResident = run > 1;
    o.trace = !tracePath.empty() && run == runs;
    if (auto err = runThreads(plan, progs, feed, outputs, stats, nullptr, o,
                              run == runs))
      return err;
    clock.end();
  }
  clock.finish();
  if (!tracePath.empty())
    return writeTrace(stats, tracePath);
  return llvm::Error::success();
}

#ifdef PAX_HAVE_MPI
/// --repeat under MPI: the constant weights stay in the ranks' arenas after
/// the first run; --time reports the slowest rank's program too. Returns
/// the process's exit status where it is done (another rank than the first,
/// which reports for every rank; a rank that failed), else -1.
static llvm::Expected<int>
runRanksTimed(const plan::Plan &plan, runtime::MpiWorld &world, Feed &feed,
              std::vector<runtime::Tensor> &outputs,
              std::vector<runtime::DeviceStats> &stats) {
  unsigned runs = std::max(1u, unsigned(repeat));
  RunClock clock(runs, "run", world.rank() == 0, clockOptions());
  for (unsigned run = 1; run <= runs; ++run) {
    clock.begin(run);
    runtime::RunOptions options;
    options.fuseChains = fuseKernels;
    options.weightsResident = run > 1;
    options.trace = !tracePath.empty() && run == runs;
    auto ran =
        runRank(plan, world, deviceSet, feed, outputs, stats, nullptr, options);
    if (!ran)
      return ran.takeError();
    if (!*ran)
      return 1;
    double slowest = 0;
    for (const runtime::DeviceStats &s : stats)
      slowest = std::max(slowest, s.seconds);
    clock.end(slowest);
  }
  clock.finish();
  if (world.rank() != 0)
    return 0;
  if (!tracePath.empty())
    if (auto err = writeTrace(stats, tracePath))
      return err;
  return -1;
}
#endif

/// The pairs --feedback names (none without --decode-steps), or an error
/// where the flags do not go together.
static llvm::Expected<std::vector<FeedbackPair>>
decodeFeedback(const plan::Plan &plan, bool train) {
  if (!decodeSteps.getNumOccurrences() && !feedbackSpec.getNumOccurrences())
    return std::vector<FeedbackPair>();
  if (train || repeat.getNumOccurrences() || decodeSteps == 0 ||
      feedbackSpec.empty())
    return llvm::createStringError(
        "--decode-steps=N (N at least 1) and --feedback=SPEC go together, in "
        "an inference run (not --train or --repeat)");
  return parseFeedback(plan, feedbackSpec);
}

/// --decode-steps: the plan run step after step (Decode.h), the weights
/// staying on the devices after the first, and the fed-back blocks each
/// device computes where it reads them.
static llvm::Error runDecode(const plan::Plan &plan,
                             llvm::ArrayRef<const plan::DeviceProgram *> progs,
                             Feed &feed, std::vector<runtime::Tensor> &inputs,
                             std::vector<runtime::Tensor> &outputs,
                             std::vector<runtime::DeviceStats> &stats,
                             llvm::ArrayRef<FeedbackPair> pairs) {
  DecodeLoop loop{plan, pairs, printOutputs, decodeSteps,
                  keepOnDevices(progs, pairs)};
  return loop.run(inputs, outputs, [&](const runtime::RunOptions &o) {
    return runThreads(plan, progs, feed, outputs, stats, nullptr, o);
  });
}

/// Writes output_N.pb (each output's own element type) or output_N.npy.
static llvm::Error writeOutputs(const plan::Plan &plan,
                                const std::vector<runtime::Tensor> &outputs) {
  if (std::error_code ec = llvm::sys::fs::create_directories(outputsDir))
    return llvm::createStringError("cannot create '" + outputsDir +
                                   "': " + ec.message());
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::string base = outputsDir + "/output_" + std::to_string(i);
    if (auto err =
            outputFormat == OutFormat::Npy
                ? writeNpyFile(base + ".npy", outputs[i])
                : writeTensorFile(base + ".pb", plan.outputs(int(i)).name(),
                                  outputs[i]))
      return err;
  }
  return llvm::Error::success();
}

/// Compares each output with the reference's; false above the tolerance.
/// An output whose errors all lie below the tolerance times the largest
/// value of all the outputs passes too: a value that is zero but for
/// rounding (a gradient a softmax cancels) has no relative error to speak
/// of.
static bool compare(const plan::Plan &plan,
                    const std::vector<runtime::Tensor> &got,
                    const std::vector<runtime::Tensor> &want) {
  bool ok = true;
  double largest = 0;
  for (const runtime::Tensor &t : want)
    for (int64_t k = 0; k < t.numel(); ++k)
      if (std::isfinite(t.real(k)))
        largest = std::max(largest, std::fabs(t.real(k)));
  for (size_t i = 0; i < got.size(); ++i) {
    double maxAbs = 0, maxRel = 0, diff2 = 0, ref2 = 0;
    for (int64_t k = 0; k < got[i].numel(); ++k) {
      double a = got[i].real(k), b = want[i].real(k), e = std::fabs(a - b);
      if (std::isnan(a) != std::isnan(b))
        e = INFINITY;
      else if (std::isnan(a))
        e = 0;
      maxAbs = std::max(maxAbs, e);
      maxRel = std::max(maxRel, e / std::max(std::fabs(b), 1e-6));
      diff2 += e * e;
      ref2 += b * b;
    }
    double relL2 = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
    bool noise = relL2 > tolerance && maxAbs <= tolerance * largest;
    bool pass = relL2 <= tolerance || noise;
    ok &= pass;
    llvm::outs() << llvm::formatv(
        "verify: output '{0}': max abs error {1:e2}, max rel error {2:e2}, "
        "rel L2 error {3:e2}: {4}\n",
        plan.outputs(int(i)).name(), maxAbs, maxRel, relL2,
        pass ? (noise ? "ok (all errors below the tolerance times the "
                        "outputs' largest value)"
                      : "ok")
             : "FAILED");
  }
  return ok;
}

/// A link probe's trace: its first device's instructions.
static llvm::Expected<std::vector<runtime::TraceEvent>>
probeTrace(std::vector<runtime::DeviceStats> &st) {
  if (st.empty() || st[0].trace.empty())
    return llvm::createStringError("the probe recorded no instructions");
  return std::move(st[0].trace);
}

#ifdef PAX_HAVE_MPI
/// --measure-links under mpirun: this rank's device among the ranks (the
/// ranks a node holds from the launcher's environment).
static int measureLinksRanked(int argc, char **argv) {
  auto started = runtime::MpiWorld::start(argc, argv);
  if (!started)
    return fail(llvm::toString(started.takeError()));
  runtime::MpiWorld &world = **started;
  if (auto err = makeDevices(1, localRank()))
    return fail(llvm::toString(std::move(err)));
  auto first = world.startTogether(true);
  if (!first)
    return fail(llvm::toString(first.takeError()));
  if (*first != world.size())
    return world.rank() == 0
               ? fail("rank " + llvm::Twine(*first) + " could not start")
               : 1;
  TracedRun run = [&](const plan::Plan &p)
      -> llvm::Expected<std::vector<runtime::TraceEvent>> {
    auto comm = runtime::makeMpiCommunicator(p);
    if (!comm)
      runtime::abortMpiWorld(llvm::toString(comm.takeError()));
    std::vector<runtime::DeviceStats> st(1);
    runtime::RunOptions o;
    o.fuseChains = fuseKernels;
    o.trace = true;
    if (auto err = runtime::runDevice(p, p.programs(world.rank()), fillFeed(),
                                      comm->get(), *deviceSet.devices[0],
                                      deviceSet.buffers[0], st[0], o))
      runtime::abortMpiWorld(llvm::toString(std::move(err)));
    return probeTrace(st);
  };
  const char *local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (!local)
    local = std::getenv("MPI_LOCALNRANKS");
  unsigned perNode =
      local ? unsigned(std::strtoul(local, nullptr, 10)) : world.size();
  if (auto err =
          measureLinks(world.size(), perNode, run,
                       world.rank() == 0 ? measureLinksOut : std::string()))
    return world.rank() == 0 ? fail(llvm::toString(std::move(err))) : 1;
  return 0;
}
#endif

/// --measure-links on the devices of --devices as threads.
static int measureLinksThreaded() {
  if (!devicesOpt.getNumOccurrences())
    return fail("--measure-links needs --devices=N (or mpirun -np N)");
  TracedRun run = [&](const plan::Plan &p)
      -> llvm::Expected<std::vector<runtime::TraceEvent>> {
    if (auto err = makeDevices(size_t(p.devices())))
      return err;
    std::vector<const plan::DeviceProgram *> progs;
    for (const plan::DeviceProgram &q : p.programs())
      progs.push_back(&q);
    std::vector<runtime::Tensor> outputs;
    std::vector<runtime::DeviceStats> st;
    runtime::ThreadRunOptions o;
    o.fuseChains = fuseKernels;
    o.trace = true;
    if (auto err = runtime::runThreads(
            p, progs, deviceSet,
            [](size_t) -> runtime::DataFeed & { return fillFeed(); }, outputs,
            st, o))
      return err;
    return probeTrace(st);
  };
  if (auto err = measureLinks(devicesOpt, devicesOpt, run, measureLinksOut))
    return fail(llvm::toString(std::move(err)));
  return 0;
}

/// --measure-links: the devices of --devices as threads, or this MPI rank
/// among the ranks of mpirun.
static int measureLinksMain(int argc, char **argv) {
#ifdef PAX_HAVE_MPI
  if (launchedByMpi())
    return measureLinksRanked(argc, argv);
#else
  if (launchedByMpi())
    return failWithoutMpi();
  (void)argc, (void)argv;
#endif
  return measureLinksThreaded();
}

/// The weight loads of a training session (carried, the devices' own, the
/// host's, stray), summed over the ranks on rank 0, printed there.
static int reportLoads(const std::vector<ResidentFeed> &resident,
                       runtime::MpiWorld *world, bool reports) {
  std::array<int64_t, 4> loads = {0, 0, 0, 0};
  for (const ResidentFeed &r : resident) {
    loads[0] += r.carriedLoads;
    loads[1] += r.residentLoads;
    loads[2] += r.hostLoads;
    loads[3] += r.strayLoads;
  }
#ifdef PAX_HAVE_MPI
  // Rank 0 speaks for the others: the sums of their counts.
  if (world) {
    auto all = world->gatherOnRoot(std::vector<uint8_t>(
        reinterpret_cast<const uint8_t *>(loads.data()),
        reinterpret_cast<const uint8_t *>(loads.data() + loads.size())));
    if (!all)
      return fail("could not gather the weight load counts");
    if (world->rank() == 0) {
      loads = {0, 0, 0, 0};
      for (const auto &v : *all)
        for (size_t i = 0; i < loads.size(); ++i)
          loads[i] += reinterpret_cast<const int64_t *>(v.data())[i];
    }
  }
#else
  (void)world;
#endif
  if (reports)
    llvm::errs() << llvm::formatv(
        "paxrun: weight loads: {0} carried on the devices from the step "
        "before (not run), {1} from the devices' own updated blocks, {2} "
        "from the host (the first step's, constants, and {3} of updated "
        "tensors held in another layout)\n",
        loads[0], loads[1], loads[2], loads[3]);
  return 0;
}

/// One training step on this process's devices (threads, or this rank's
/// under MPI): between checkpoints the updates stay on the devices (each
/// keeps its blocks in \p resident) and the loss alone is gathered.
static StepRunner stepRunner(const plan::Plan &plan,
                             llvm::ArrayRef<const plan::DeviceProgram *> progs,
                             Feed &feed, std::vector<ResidentFeed> &resident,
                             std::vector<runtime::DeviceStats> &stats,
                             runtime::MpiWorld *world) {
  std::vector<bool> onlyLoss(size_t(plan.outputs_size()), true);
  for (int i = 0; i < plan.outputs_size(); ++i)
    onlyLoss[size_t(i)] = !gatheredEveryStep(plan.outputs(i).name());
  // Whether the host's copies are the last step's; whether a step ran
  // (its updates carried in the devices' arenas).
  auto hostCurrent = std::make_shared<bool>(true);
  auto ran = std::make_shared<bool>(false);
  auto prepare = [&resident, onlyLoss, hostCurrent, ran](bool updates) {
    for (ResidentFeed &r : resident)
      r.hostCurrent = *hostCurrent;
    runtime::RunOptions o;
    o.fuseChains = fuseKernels;
    o.carryWeights = *ran;
    *ran = true;
    if (!updates)
      o.leaveOutputs = onlyLoss;
    return o;
  };
#ifdef PAX_HAVE_MPI
  if (world)
    // Rank 0 gathers the loss, and the updates after the last step; the
    // other ranks' host copies stay the first step's.
    return [&plan, &feed, &resident, &stats, world, prepare, hostCurrent](
               std::vector<runtime::Tensor> &out, bool updates) -> llvm::Error {
      runtime::RunOptions o = prepare(updates);
      *hostCurrent = updates && world->rank() == 0;
      auto ran =
          runRank(plan, *world, deviceSet, feed, out, stats, &resident[0], o);
      // A failure here stops every rank (no rank is left waiting).
      if (!ran)
        runtime::abortMpiWorld(llvm::toString(ran.takeError()));
      if (!*ran)
        return llvm::createStringError("a rank could not start");
      return llvm::Error::success();
    };
#else
  (void)world;
#endif
  return [&plan, progs, &feed, &resident, &stats, prepare,
          hostCurrent](std::vector<runtime::Tensor> &out, bool updates) {
    runtime::RunOptions o = prepare(updates);
    *hostCurrent = updates;
    return runThreads(plan, progs, feed, out, stats, &resident, o);
  };
}

/// --comm-stats: each collective's predicted bytes against the most any
/// device moved, and the totals; 1 where any differs.
static int printCommStats(const plan::Plan &plan,
                          llvm::ArrayRef<runtime::DeviceStats> stats) {
  int status = 0;
  int64_t predicted = 0, performed = 0;
  for (int x = 0; x < plan.exchanges_size(); ++x) {
    const plan::Exchange &e = plan.exchanges(x);
    int64_t most = 0;
    for (const runtime::DeviceStats &s : stats)
      if (auto it = s.exchangeBytes.find(uint32_t(x));
          it != s.exchangeBytes.end())
        most = std::max(most, it->second);
    predicted += e.predicted_bytes();
    performed += most;
    bool same = most == e.predicted_bytes();
    if (!same)
      status = 1;
    llvm::outs() << llvm::formatv(
        "comm: {0,-16} {1,12} B predicted {2,12} B performed  {3}{4}\n",
        plan::Collective::Kind_Name(e.kind()), e.predicted_bytes(), most,
        e.what(), same ? "" : "  MISMATCH");
  }
  llvm::outs() << llvm::formatv(
      "comm: total {0} B predicted, {1} B performed (per device, the most "
      "of any device per collective)\n",
      predicted, performed);
  return status;
}

/// `paxrun: ran N instructions ...`: the instructions, the peak buffers
/// and arena per device, and the cost model's peak against the measured.
static void printRunSummary(const plan::Plan &plan,
                            llvm::ArrayRef<runtime::DeviceStats> stats) {
  int64_t instructions = 0, peak = 0, arena = 0;
  for (const runtime::DeviceStats &s : stats) {
    instructions += s.instructions;
    peak = std::max(peak, s.peakBytes);
    arena = std::max(arena, s.arenaBytes);
  }
  int64_t predictedPeak = 0;
  for (const plan::DeviceProgram &p : plan.programs())
    predictedPeak = std::max(predictedPeak, p.predicted_peak_bytes());
  llvm::outs() << llvm::formatv(
      "paxrun: ran {0} instructions on {1} device(s); peak buffers {2:F2} "
      "MiB per device, in an arena of {3:F2} MiB (the plan's)",
      instructions, plan.devices(), double(peak) / (1 << 20),
      double(arena) / (1 << 20));
  if (predictedPeak > 0)
    llvm::outs() << llvm::formatv(
        "; the cost model's peak {0:F2} MiB ({1:F3}x the measured)",
        double(predictedPeak) / (1 << 20),
        double(predictedPeak) / double(std::max<int64_t>(peak, 1)));
  llvm::outs() << "\n";
}

/// --verify: the unpartitioned program on the CPU backend (whatever
/// --backend ran the plan) against \p outputs; non-zero where they differ.
static int verifyAgainstReference(const plan::Plan &plan,
                                  runtime::DataFeed &feed,
                                  const std::vector<runtime::Tensor> &outputs) {
  std::vector<runtime::Tensor> reference;
  std::vector<runtime::DeviceStats> refStats;
  runtime::DeviceSet cpu;
  cpu.devices.push_back(runtime::makeCpuDevice());
  if (auto err = runtime::runThreads(
          plan, {&plan.reference()}, cpu,
          [&](size_t) -> runtime::DataFeed & { return feed; }, reference,
          refStats))
    return fail("the reference run failed: " + llvm::toString(std::move(err)));
  if (!compare(plan, outputs, reference))
    return fail("the partitioned run differs from the reference");
  return 0;
}

/// A pipelined plan's stages, microbatches and schedule, on stderr.
static void sayPipeline(const plan::Plan &plan) {
  if (const plan::Pipeline &p = plan.pipeline(); p.stages())
    llvm::errs() << llvm::formatv(
        "paxrun: pipeline: {0} stages of {1} device(s), {2} microbatches per "
        "step, {3}{4}\n",
        p.stages(), p.stage_devices(), p.microbatches(), p.schedule(),
        p.chunks() > 1 ? llvm::formatv(" of {0} chunks", p.chunks()).str()
                       : std::string());
}

/// The plan of the command line, read and checked as a file (a cost probe
/// only with --write-cost-db, and that only with one); a plan of paxc
/// --precision=tf32 allows TF32.
static llvm::Expected<plan::Plan> readRunPlan() {
  auto plan = readPlanFile(planPath);
  if (!plan)
    return plan.takeError();
  if (plan->allow_tf32())
    allowTf32 = true;
  if (plan->probe() && costDbOut.empty())
    return llvm::createStringError(planPath + ": a cost probe: time it with "
                                              "--write-cost-db=FILE");
  if (!plan->probe() && !costDbOut.empty())
    return llvm::createStringError(
        "--write-cost-db times a cost probe (paxc MODEL --emit=cost-probe "
        "--gpus=N -o probe.paxplan), not a plan to run");
  return plan;
}

/// --devices, where given, must be the plan's device count.
static llvm::Error checkDevicesFlag(const plan::Plan &plan) {
  if (!devicesOpt.getNumOccurrences() || devicesOpt == plan.devices())
    return llvm::Error::success();
  return llvm::createStringError(
      "--devices=" + llvm::Twine(unsigned(devicesOpt)) +
      ", but the plan was compiled for " + runtime::planDevicesText(plan) +
      " (paxc --gpus=N compiles for N)");
}

/// What a run reads besides the model's initializers: the plan's inputs
/// from the test-data folder (or seeded random values) and the weights the
/// model takes as graph inputs, from the same folder or seeded by name (so
/// every device agrees).
class RunInputs {
public:
  RunInputs(const plan::Plan &plan, const onnx::ModelProto &model)
      : plan(plan), names(dataInputs(model)), rng(seed), loaded(inputsDir) {}
  llvm::Error load() { return loadPlanInputs(plan, names, rng, inputs); }
  /// A training step's data folder \p dir, read where it changed.
  llvm::Error loadFrom(const std::string &dir) {
    if (dir == loaded)
      return llvm::Error::success();
    inputsDir = dir;
    loaded = dir;
    return load();
  }
  llvm::Expected<runtime::Tensor> weight(const plan::LoadWeight &load,
                                         plan::DType dtype) const {
    plan::TensorInfo info;
    info.set_name(load.tensor());
    info.set_dtype(dtype);
    *info.mutable_shape() = load.global_shape();
    if (randomInputs) {
      std::mt19937 r(seed + unsigned(std::hash<std::string>()(load.tensor())));
      return randomTensor(info, r);
    }
    auto it = llvm::find(names, load.tensor());
    if (it == names.end())
      return llvm::createStringError("weight '" + load.tensor() +
                                     "' is neither an initializer nor a "
                                     "graph input of the model");
    return readInput(unsigned(it - names.begin()), info, names);
  }

  std::vector<runtime::Tensor> inputs;

private:
  const plan::Plan &plan;
  std::vector<std::string> names;
  std::mt19937 rng;
  std::string loaded;
};

/// The run's flags that do not go together; with --train, its data
/// folder (the first step's) becomes the inputs' folder.
static llvm::Error checkRunFlags() {
  auto error = [](const char *msg) { return llvm::createStringError(msg); };
  if (!train && inputsDir.empty() == !randomInputs)
    return error("give exactly one of --inputs DIR and --random-inputs");
  if (!train &&
      (dataDir.getNumOccurrences() || steps.getNumOccurrences() ||
       savePath.getNumOccurrences() || checkpointDir.getNumOccurrences() ||
       resumeDir.getNumOccurrences()))
    return error("--data, --steps, --save, --checkpoint and --resume need "
                 "--train");
  if (!train)
    return llvm::Error::success();
  if (dataDir.empty() || !inputsDir.empty() || randomInputs)
    return error("--train reads its data from --data DIR (not --inputs or "
                 "--random-inputs)");
  if (!tracePath.empty())
    return error("--trace records a run of a plan (not --train)");
  if (repeat.getNumOccurrences())
    return error("--repeat runs a plan N times on fixed inputs; with --train "
                 "the steps are --steps=N");
  inputsDir = std::string(dataDir);
  if (llvm::sys::fs::exists(dataDir + "/step_0"))
    inputsDir = dataDir + "/step_0";
  return llvm::Error::success();
}

/// After a run: its summary and the pipeline's, the comm stats, the
/// outputs written, the check against the reference; the exit status.
static int reportRun(const plan::Plan &plan, runtime::DataFeed &feed,
                     const std::vector<runtime::Tensor> &outputs,
                     const std::vector<runtime::DeviceStats> &stats) {
  printRunSummary(plan, stats);
  sayPipeline(plan);
  int status = commStats ? printCommStats(plan, stats) : 0;
  if (!outputsDir.empty())
    if (auto err = writeOutputs(plan, outputs))
      return fail(llvm::toString(std::move(err)));
  if (verify)
    if (int failed = verifyAgainstReference(plan, feed, outputs))
      return failed;
  return status;
}

/// paxrun --train: the session's steps, its weight-load counts and, with
/// --outputs, the last step's outputs.
static int
trainSession(const plan::Plan &plan,
             llvm::ArrayRef<const plan::DeviceProgram *> progs, Feed &feed,
             const onnx::ModelProto &model, runtime::MpiWorld *world,
             llvm::function_ref<llvm::Error(const std::string &)> loadInputs) {
  std::vector<ResidentFeed> resident(progs.size(), ResidentFeed(feed));
  std::vector<runtime::DeviceStats> stats;
  std::vector<runtime::Tensor> outputs;
  StepRunner run = stepRunner(plan, progs, feed, resident, stats, world);
  // What reaches the host from the devices, in the steps that gather no
  // updates: the loss alone, whatever the model's size.
  int64_t hostBytes = 0, lossSteps = 0;
  StepRunner step = [&](std::vector<runtime::Tensor> &out, bool updates) {
    llvm::Error err = run(out, updates);
    if (!err && !updates) {
      ++lossSteps;
      for (const runtime::Tensor &t : out)
        hostBytes += int64_t(t.data.size());
    }
    return err;
  };
  bool reports = true;
#ifdef PAX_HAVE_MPI
  reports = !world || world->rank() == 0;
#endif
  // --time and --profile per step (this process's devices).
  RunClock clock(steps, "step", reports, clockOptions());
  TrainingOptions to;
  to.beforeStep = [&](unsigned k) { clock.begin(k); };
  to.afterStep = [&](unsigned) { clock.end(); };
  to.steps = steps;
  to.dataDir = dataDir;
  to.savePath = savePath;
  to.checkpointDir = checkpointDir;
  to.resumeDir = resumeDir;
  to.checkpoint = [&](const std::string &dir, unsigned next) {
    return writeShards(plan, progs, resident, world, dir, next);
  };
  to.every = every;
  to.reports = reports;
  if (auto err = runTraining(plan, feed, model, to, loadInputs, step, outputs))
    return fail(llvm::toString(std::move(err)));
  clock.finish();
  if (int status = reportLoads(resident, world, reports))
    return status;
  if (reports && lossSteps)
    llvm::errs() << llvm::formatv(
        "paxrun: {0} byte(s) per step reached the host from the devices in "
        "the {1} step(s) that gathered no updates\n",
        hostBytes / lossSteps, lossSteps);
  if (reports)
    sayPipeline(plan);
  if (reports && !outputsDir.empty())
    if (auto err = writeOutputs(plan, outputs))
      return fail(llvm::toString(std::move(err)));
  return 0;
}

/// --write-cost-db: times every block of cost probe \p plan on one device;
/// rank 0 (\p first) writes the database.
static int timeProbe(const plan::Plan &plan, bool first) {
  if (auto err = makeDevices(1, launchedByMpi() ? localRank() : 0))
    return fail(llvm::toString(std::move(err)));
  // The model's constants (exponents, masks) are read from it.
  onnx::ModelProto model;
  if (!readSourceModel(plan, model))
    return fail("cannot read the model '" + plan.source() +
                "' the probe names");
  std::vector<runtime::Tensor> none;
  Feed feed(model, llvm::sys::path::parent_path(plan.source()).str(), none,
            nullptr);
  if (auto err = writeCostDb(plan, feed, *deviceSet.devices[0],
                             std::max(1u, unsigned(repeat)), backendName,
                             threadsOpt, first ? costDbOut : std::string()))
    return fail(llvm::toString(std::move(err)));
  return 0;
}

/// --compile-kernels=ARCH: every generated kernel of \p plan through NVRTC.
static int compileKernels(const plan::Plan &plan) {
#ifdef PAX_HAVE_CUDA
  std::vector<const plan::GeneratedKernel *> kernels;
  for (const plan::DeviceProgram &prog : plan.programs())
    for (const plan::GeneratedKernel &k : prog.kernels())
      kernels.push_back(&k);
  // In parallel, as the CUDA backend compiles them; the first error in
  // kernel order is reported.
  std::vector<std::string> errors(kernels.size());
  tbb::parallel_for(size_t(0), kernels.size(), [&](size_t i) {
    auto cubin =
        runtime::cuda::compileGenerated(*kernels[i], compileKernelsFor);
    if (!cubin)
      errors[i] = llvm::toString(cubin.takeError());
  });
  for (const std::string &e : errors)
    if (!e.empty())
      return fail(e);
  size_t n = kernels.size();
  llvm::outs() << "paxrun: compiled " << n << " generated kernel(s) for "
               << compileKernelsFor << " with NVRTC "
               << runtime::cuda::compilerVersion() << "\n";
  return 0;
#else
  return fail("--compile-kernels: this paxrun was built without CUDA (no "
              "NVRTC)");
#endif
}

/// This process's rank among the run's ranks is the first (or it runs
/// every device).
static bool firstRank(runtime::MpiWorld *world) {
#ifdef PAX_HAVE_MPI
  return !world || world->rank() == 0;
#else
  (void)world;
  return true;
#endif
}

/// The devices of \p plan, before any data is read (a backend that cannot
/// run here says so first): every program's, or under MPI this rank's, its
/// node-local rank's GPU. 0, or the process's exit status.
static int prepareDevices(const plan::Plan &plan, runtime::MpiWorld *world) {
  if (auto err = checkDevicesFlag(plan))
    return fail(llvm::toString(std::move(err)));
  size_t n = size_t(plan.programs_size());
  unsigned first = 0;
#ifdef PAX_HAVE_MPI
  if (world && world->size() != int(plan.devices()))
    return world->rank() == 0
               ? fail("the plan was compiled for " +
                      runtime::planDevicesText(plan) + ", but mpirun started " +
                      llvm::Twine(world->size()) +
                      (world->size() == 1 ? " rank" : " ranks") +
                      " (run mpirun -np " + llvm::Twine(plan.devices()) + ")")
               : 1;
  if (world) {
    n = 1;
    first = localRank();
  }
#endif
  if (auto err = makeDevices(n, first))
    return fail(llvm::toString(std::move(err)));
  return 0;
}

/// A run of \p plan that is not training: timed (--repeat), decoding
/// (--decode-steps) or one rank's under MPI; then its report.
static int runInference(const plan::Plan &plan, RunInputs &data, Feed &feed,
                        llvm::ArrayRef<const plan::DeviceProgram *> progs,
                        llvm::ArrayRef<FeedbackPair> feedback,
                        runtime::MpiWorld *world) {
  std::vector<runtime::Tensor> outputs;
  std::vector<runtime::DeviceStats> stats;
#ifdef PAX_HAVE_MPI
  if (world) {
    auto code = runRanksTimed(plan, *world, feed, outputs, stats);
    if (!code)
      return fail(llvm::toString(code.takeError()));
    if (*code >= 0)
      return *code;
    return reportRun(plan, feed, outputs, stats);
  }
#else
  (void)world;
#endif
  if (auto err = decodeSteps ? runDecode(plan, progs, feed, data.inputs,
                                         outputs, stats, feedback)
                             : runTimed(plan, progs, feed, outputs, stats))
    return fail(llvm::toString(std::move(err)));
  return reportRun(plan, feed, outputs, stats);
}

/// \p plan run or trained on its inputs: the model read, the inputs
/// loaded, the weights fed from both.
static int runWithInputs(const plan::Plan &plan, runtime::MpiWorld *world) {
  onnx::ModelProto model;
  if (!readSourceModel(plan, model))
    return fail("cannot read the model '" + plan.source() + "' the plan names");
  auto feedbackPairs = decodeFeedback(plan, train);
  if (!feedbackPairs)
    return fail(llvm::toString(feedbackPairs.takeError()));
  RunInputs data(plan, model);
  if (auto err = data.load())
    return fail(llvm::toString(std::move(err)));
  Feed feed(model, llvm::sys::path::parent_path(plan.source()).str(),
            data.inputs,
            [&data](const plan::LoadWeight &load, plan::DType dtype) {
              return data.weight(load, dtype);
            });
  std::vector<const plan::DeviceProgram *> progs;
  for (const plan::DeviceProgram &p : plan.programs())
    progs.push_back(&p);
  if (train)
    return trainSession(
        plan, progs, feed, model, world,
        [&data](const std::string &dir) { return data.loadFrom(dir); });
  return runInference(plan, data, feed, progs, *feedbackPairs, world);
}

/// Every option's value checked before any work, whatever the other
/// options: an error names the first out of range.
static llvm::Error checkRunFlagValues() {
  auto error = [](const llvm::Twine &msg) {
    return llvm::createStringError(msg.str());
  };
  if (tolerance < 0 || !std::isfinite(tolerance))
    return error(llvm::formatv("--tolerance={0}: expected a relative error of "
                               "0 or more",
                               double(tolerance)));
  if (repeat.getNumOccurrences() && repeat == 0)
    return error("--repeat=0: expected at least 1 run");
  if (steps.getNumOccurrences() && steps == 0)
    return error("--steps=0: expected at least 1 step");
  if (every.getNumOccurrences() && checkpointDir.empty())
    return error("--every=" + llvm::Twine(unsigned(every)) +
                 " sets how often --checkpoint writes: give --checkpoint DIR");
  return llvm::Error::success();
}

/// The plan of the command line, read and checked whole before any device
/// allocates or runs anything, then timed (a cost probe), compiled
/// (--compile-kernels) or run.
static int runPlanFile(runtime::MpiWorld *world) {
  if (auto err = checkRunFlagValues())
    return fail(llvm::toString(std::move(err)));
  auto plan = readRunPlan();
  if (!plan)
    return fail(llvm::toString(plan.takeError()));
  // Under mpirun every rank times a probe on its own device at once, as
  // the ranks of a plan compute at once; rank 0 writes.
  if (plan->probe())
    return timeProbe(*plan, firstRank(world));
  if (auto err = runtime::checkPlan(*plan))
    return fail(planPath + ": " + llvm::toString(std::move(err)));
  if (!compileKernelsFor.empty())
    return compileKernels(*plan);
  if (int status = prepareDevices(*plan, world))
    return status;
  if (auto err = checkRunFlags())
    return fail(llvm::toString(std::move(err)));
  return runWithInputs(*plan, world);
}

/// A run frees each buffer after its last use and the next run (training
/// step) allocates it again: kept in the heap rather than handed back to
/// the system, the pages are not faulted in anew every time.
static void keepFreedPages() {
#ifdef __GLIBC__
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
#endif
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  keepFreedPages();
  cl::HideUnrelatedOptions({&runCategory, &measureCategory, &trainCategory});
  cl::ParseCommandLineOptions(argc, argv, "paxrun: runs a paxc plan\n");
  std::optional<tbb::global_control> threadLimit;
  if (threadsOpt)
    threadLimit.emplace(tbb::global_control::max_allowed_parallelism,
                        size_t(threadsOpt));
  if (!measureLinksOut.empty()) {
    if (!planPath.empty())
      return fail("--measure-links runs its own probes; give no plan");
    return measureLinksMain(argc, argv);
  }
  if (planPath.empty())
    return fail("no plan given (paxrun MODEL.paxplan [options])");
#ifdef PAX_HAVE_MPI
  // Under an MPI launcher every rank runs one device (runRank).
  std::unique_ptr<runtime::MpiWorld> world;
  if (launchedByMpi()) {
    auto started = runtime::MpiWorld::start(argc, argv);
    if (!started)
      return fail(llvm::toString(started.takeError()));
    world = std::move(*started);
  }
  return runPlanFile(world.get());
#else
  if (launchedByMpi())
    return failWithoutMpi();
  return runPlanFile(nullptr);
#endif
}
