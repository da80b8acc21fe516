//===- RankRun.cpp - One device per MPI rank ------------------------------===//
#include "tools/paxrun/RankRun.h"

#ifdef PAX_HAVE_MPI
#include "runtime/Exchange.h"
#include "runtime/mpi/MpiCommunicator.h"
#include "runtime/mpi/MpiWorld.h"
#ifdef PAX_HAVE_NCCL
#include "runtime/cuda/NcclCommunicator.h"
#endif
#include "tools/common/Printable.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cstring>

namespace pax {

namespace {

/// What a rank sends rank 0 after its run: its statistics as int64s
/// (instructions, peak bytes, then the bytes it counted for every exchange
/// of the plan, -1 where it took no part), then the elements of the output
/// blocks it owns, in binding order.
llvm::Expected<std::vector<uint8_t>> packRankResults(
    const plan::Plan &plan, const plan::DeviceProgram &prog,
    runtime::Device &device, const std::vector<runtime::Tensor> &buffers,
    const runtime::DeviceStats &stats, const runtime::RunOptions &options) {
  std::vector<int64_t> header = {stats.instructions, stats.peakBytes,
                                 stats.arenaBytes,
                                 int64_t(stats.seconds * 1e9)};
  for (int x = 0; x < plan.exchanges_size(); ++x) {
    auto it = stats.exchangeBytes.find(uint32_t(x));
    header.push_back(it == stats.exchangeBytes.end() ? -1 : it->second);
  }
  std::vector<uint8_t> bytes(header.size() * sizeof(int64_t));
  std::memcpy(bytes.data(), header.data(), bytes.size());
  for (const plan::Binding &b : prog.outputs())
    if (b.owner() && options.gathers(b.index())) {
      auto block = runtime::hostCopy(device, buffers[b.buffer()]);
      if (!block)
        return block.takeError();
      llvm::append_range(bytes, block->data);
    }
  return bytes;
}

/// On rank 0, the inverse of packRankResults for \p prog's rank: fills
/// \p stats and moves the blocks into \p outputs.
llvm::Error unpackRankResults(const plan::Plan &plan,
                              const plan::DeviceProgram &prog,
                              llvm::ArrayRef<uint8_t> bytes,
                              std::vector<runtime::Tensor> &outputs,
                              runtime::DeviceStats &stats,
                              const runtime::RunOptions &options) {
  auto bad = [&] {
    return llvm::createStringError("rank " + llvm::Twine(prog.device()) +
                                   " sent results that do not match its "
                                   "program");
  };
  std::vector<int64_t> header(4 + size_t(plan.exchanges_size()));
  size_t at = header.size() * sizeof(int64_t);
  if (bytes.size() < at)
    return bad();
  std::memcpy(header.data(), bytes.data(), at);
  stats.instructions = header[0];
  stats.peakBytes = header[1];
  stats.arenaBytes = header[2];
  stats.seconds = double(header[3]) * 1e-9;
  for (size_t x = 4; x < header.size(); ++x)
    if (header[x] >= 0)
      stats.exchangeBytes[uint32_t(x - 4)] = header[x];
  for (const plan::Binding &b : prog.outputs()) {
    if (!b.owner() || !options.gathers(b.index()))
      continue;
    std::vector<int64_t> lo(b.offset().begin(), b.offset().end());
    if (b.index() >= outputs.size() ||
        b.buffer() >= uint32_t(prog.buffers_size()) ||
        lo.size() != outputs[b.index()].shape.size())
      return llvm::createStringError("device " + llvm::Twine(prog.device()) +
                                     ": an output binding does not match "
                                     "the plan's outputs");
    const plan::Buffer &buf = prog.buffers(int(b.buffer()));
    runtime::Tensor block =
        runtime::Tensor::zeros(buf.dtype(), shapeOf(buf.shape()));
    if (block.shape.size() != lo.size() ||
        bytes.size() - at < block.data.size())
      return bad();
    std::memcpy(block.data.data(), bytes.data() + at, block.data.size());
    at += block.data.size();
    runtime::moveOverlap(block, lo, outputs[b.index()],
                         std::vector<int64_t>(lo.size(), 0), false);
  }
  if (at != bytes.size())
    return bad();
  return llvm::Error::success();
}

} // namespace

/// On rank 0, every rank's trace (\p mine on this rank), each from its
/// first instruction; the other ranks send theirs and get nothing.
static llvm::Expected<std::vector<std::vector<runtime::TraceEvent>>>
gatherTraces(runtime::MpiWorld &world, const runtime::DeviceStats &mine) {
  llvm::json::Array events;
  double first = mine.trace.empty() ? 0 : mine.trace.front().start;
  for (const runtime::TraceEvent &e : mine.trace)
    events.push_back(
        llvm::json::Array{e.name, e.category, e.start - first, e.end - first});
  std::string text;
  llvm::raw_string_ostream(text) << llvm::json::Value(std::move(events));
  auto gathered =
      world.gatherOnRoot(std::vector<uint8_t>(text.begin(), text.end()));
  if (!gathered)
    runtime::abortMpiWorld(llvm::toString(gathered.takeError()));
  std::vector<std::vector<runtime::TraceEvent>> traces;
  for (const std::vector<uint8_t> &bytes : *gathered) {
    auto parsed = llvm::json::parse(llvm::StringRef(
        reinterpret_cast<const char *>(bytes.data()), bytes.size()));
    if (!parsed)
      return parsed.takeError();
    std::vector<runtime::TraceEvent> rankTrace;
    for (const llvm::json::Value &v : *parsed->getAsArray()) {
      const llvm::json::Array &a = *v.getAsArray();
      runtime::TraceEvent e;
      e.name = a[0].getAsString().value_or("").str();
      llvm::StringRef cat = a[1].getAsString().value_or("compute");
      for (const char *known : {"compute", "collective", "load", "slice"})
        if (cat == known)
          e.category = known;
      e.start = a[2].getAsNumber().value_or(0);
      e.end = a[3].getAsNumber().value_or(0);
      rankTrace.push_back(std::move(e));
    }
    traces.push_back(std::move(rankTrace));
  }
  return traces;
}

/// This rank's program of \p plan.
static llvm::Expected<const plan::DeviceProgram *>
rankProgram(const plan::Plan &plan, const runtime::MpiWorld &world) {
  for (const plan::DeviceProgram &p : plan.programs())
    if (p.device() == uint32_t(world.rank()))
      return &p;
  return llvm::createStringError("the plan has no program for device " +
                                 llvm::Twine(world.rank()));
}

/// The ranks agree to start, once (a training run runs every step): false
/// where some rank could not (rank 0 says which).
static llvm::Expected<bool> startRanks(runtime::MpiWorld &world) {
  if (world.hasStarted())
    return true;
  auto first = world.startTogether(true);
  if (!first)
    return first.takeError();
  if (*first == world.size())
    return true;
  if (world.rank() == 0)
    llvm::errs() << printable("paxrun: error: rank " + llvm::Twine(*first) +
                              " could not start, so no rank ran\n");
  return false;
}

/// The rank's communicator: GPUs exchange over NCCL (one communicator for
/// the process, made by every rank at its first run), host memory over MPI
/// (made into \p mpiComm).
static runtime::Communicator *
rankCommunicator(const plan::Plan &plan, runtime::MpiWorld &world,
                 runtime::Device &device,
                 std::unique_ptr<runtime::Communicator> &mpiComm) {
#ifdef PAX_HAVE_NCCL
  static std::unique_ptr<runtime::Communicator> nccl;
  if (device.backend() == runtime::Backend::Cuda) {
    if (!nccl) {
      auto made = runtime::makeNcclCommunicator(plan, world, device);
      if (!made)
        runtime::abortMpiWorld(llvm::toString(made.takeError()));
      nccl = std::move(*made);
    }
    return nccl.get();
  }
#else
  (void)world, (void)device;
#endif
  auto made = runtime::makeMpiCommunicator(plan);
  if (!made)
    runtime::abortMpiWorld(llvm::toString(made.takeError()));
  mpiComm = std::move(*made);
  return mpiComm.get();
}

/// On rank 0: every rank's gathered results \p all unpacked into
/// \p outputs (those left on the devices stay empty) and \p stats, with
/// their \p traces.
static llvm::Error
unpackOnRoot(const plan::Plan &plan, std::vector<std::vector<uint8_t>> &all,
             std::vector<std::vector<runtime::TraceEvent>> &traces,
             std::vector<runtime::Tensor> &outputs,
             std::vector<runtime::DeviceStats> &stats,
             const runtime::RunOptions &options) {
  outputs.clear();
  for (int i = 0; i < plan.outputs_size(); ++i)
    outputs.push_back(
        options.gathers(uint32_t(i))
            ? runtime::Tensor::zeros(plan.outputs(i).dtype(),
                                     shapeOf(plan.outputs(i).shape()))
            : runtime::Tensor());
  stats.assign(plan.devices(), {});
  for (const plan::DeviceProgram &p : plan.programs()) {
    if (p.device() >= all.size())
      return llvm::createStringError("the plan has a program for device " +
                                     llvm::Twine(p.device()));
    if (auto err = unpackRankResults(plan, p, all[p.device()], outputs,
                                     stats[p.device()], options))
      return err;
    if (p.device() < traces.size())
      stats[p.device()].trace = std::move(traces[p.device()]);
  }
  return llvm::Error::success();
}

/// Under MPI: runs this rank's program on the MPI transport and gathers
/// every rank's output blocks and statistics on rank 0, which fills
/// \p outputs and \p stats as runThreads does. False when some rank could
/// not start (it said why; rank 0 names it) and none ran. Once the ranks
/// run, a failure on any of them ends them all (MPI_Abort), so that none
/// waits for another.
llvm::Expected<bool> runRank(const plan::Plan &plan, runtime::MpiWorld &world,
                             runtime::DeviceSet &deviceSet, Feed &feed,
                             std::vector<runtime::Tensor> &outputs,
                             std::vector<runtime::DeviceStats> &stats,
                             ResidentFeed *resident,
                             const runtime::RunOptions &options) {
  auto prog = rankProgram(plan, world);
  if (!prog)
    return prog.takeError();
  auto started = startRanks(world);
  if (!started || !*started)
    return started;
  if (deviceSet.devices.empty())
    return llvm::createStringError("no device for the rank's program");
  runtime::Device &device = *deviceSet.devices[0];
  std::unique_ptr<runtime::Communicator> mpiComm;
  runtime::Communicator *comm = rankCommunicator(plan, world, device, mpiComm);
  std::vector<runtime::Tensor> &buffers = deviceSet.buffers[0];
  runtime::DeviceStats mine;
  runtime::DataFeed &source =
      resident ? static_cast<runtime::DataFeed &>(*resident) : feed;
  auto start = std::chrono::steady_clock::now();
  if (auto err = runtime::runDevice(plan, **prog, source, comm, device, buffers,
                                    mine, options))
    comm->abort(llvm::toString(std::move(err)));
  mine.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (resident)
    resident->carriedLoads += mine.carriedLoads;
  auto results = packRankResults(plan, **prog, device, buffers, mine, options);
  if (!results)
    runtime::abortMpiWorld(llvm::toString(results.takeError()));
  // The rank keeps its updated blocks (moved: they are packed).
  if (resident)
    if (auto err = keepUpdates(plan, **prog, device, buffers, *resident))
      runtime::abortMpiWorld(llvm::toString(std::move(err)));
  auto all = world.gatherOnRoot(std::move(*results));
  if (!all)
    runtime::abortMpiWorld(llvm::toString(all.takeError()));
  // --trace: every rank's instructions, each rank's times from its first.
  std::vector<std::vector<runtime::TraceEvent>> traces;
  if (options.trace) {
    auto gathered = gatherTraces(world, mine);
    if (!gathered)
      return gathered.takeError();
    traces = std::move(*gathered);
  }
  if (world.rank() != 0)
    return true;
  if (auto err = unpackOnRoot(plan, *all, traces, outputs, stats, options))
    return err;
  return true;
}

} // namespace pax

#endif // PAX_HAVE_MPI
