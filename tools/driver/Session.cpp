//===- Session.cpp - A plan run or trained in this process ----------------===//
#include "tools/driver/Session.h"

#include "runtime/Backend.h"
#include "runtime/Exchange.h"
#include "runtime/PlanCheck.h"
#include "runtime/Run.h"
#include "tools/common/Checkpoint.h"
#include "tools/paxrun/Feed.h"
#include "tools/paxrun/Training.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Path.h"

#include <map>
#include <mutex>
#include <set>

namespace pax::driver {

std::string dtypeName(plan::DType d) {
  static const char *names[] = {
      "float32", "float64", "float16", "bfloat16", "int8",   "int16", "int32",
      "int64",   "uint8",   "uint16",  "uint32",   "uint64", "bool"};
  return unsigned(d) < std::size(names) ? names[d] : plan::DType_Name(d);
}

/// `float32 [2, 3]`.
static std::string typeText(plan::DType d, llvm::ArrayRef<int64_t> shape) {
  std::vector<std::string> dims;
  for (int64_t n : shape)
    dims.push_back(std::to_string(n));
  return dtypeName(d) + " [" + llvm::join(dims, ", ") + "]";
}

/// An error where \p t is not of type \p d and shape \p shape (\p what
/// names it).
static llvm::Error checkType(const runtime::Tensor &t, plan::DType d,
                             llvm::ArrayRef<int64_t> shape,
                             const std::string &what) {
  if (t.dtype == d && llvm::ArrayRef<int64_t>(t.shape) == shape)
    return llvm::Error::success();
  return llvm::createStringError(what + " is " + typeText(t.dtype, t.shape) +
                                 ", the plan reads " + typeText(d, shape));
}

class Session::State {
public:
  State(plan::Plan p, SessionOptions o)
      : plan(std::move(p)), options(std::move(o)) {}
  llvm::Error open();
  llvm::Error bindFeeds(const NamedTensors &feeds);
  llvm::Expected<runtime::Tensor> weight(const plan::LoadWeight &load,
                                         plan::DType dtype) const;
  llvm::Error runDevices(std::vector<runtime::Tensor> &outputs,
                         runtime::ThreadRunOptions o, bool training);
  llvm::Error keepStep(const std::vector<runtime::Tensor> &outputs);
  llvm::Error gatherUpdates();
  NamedTensors named(std::vector<runtime::Tensor> &outputs) const;

  plan::Plan plan;
  SessionOptions options;
  onnx::ModelProto model;
  runtime::DeviceSet devices;
  std::vector<const plan::DeviceProgram *> progs;
  /// The plan's inputs in its order, and the weights fed by name.
  std::vector<runtime::Tensor> inputs;
  std::map<std::string, runtime::Tensor> weightFeeds;
  /// The model's graph inputs that have no initializer.
  std::set<std::string> graphInputs;
  std::unique_ptr<Feed> feed;
  /// A training session's device-resident weights, from its first step.
  std::vector<ResidentFeed> resident;
  /// A training plan's updates: output index and weight (none, and why,
  /// for another plan).
  std::vector<std::pair<int, std::string>> updates;
  std::string notTraining;
  std::vector<runtime::DeviceStats> stats;
  /// The constant weights are in the devices' arenas from the last run.
  bool weightsWarm = false;
  /// Whether the host's copies of the updated weights are the last step's
  /// (a step gathers the loss alone; gatherUpdates assembles them).
  bool hostCurrent = true;
  unsigned step = 0;
  /// One call at a time (the devices and their arenas are the session's).
  std::mutex busy;
  /// Why the session cannot go on: a step failed while the only copy of
  /// the trained weights was on the devices (loadCheckpoint clears it).
  std::string broken;
  llvm::Error checkUsable() const {
    if (broken.empty())
      return llvm::Error::success();
    return llvm::createStringError(
        broken + "; the weights trained since the last save are lost: "
                 "load_checkpoint(DIR) to go on");
  }
};

/// The backend's devices, one per program of the plan.
static llvm::Error makeDevices(const plan::Plan &plan, const SessionOptions &o,
                               runtime::DeviceSet &set) {
  std::optional<runtime::Backend> b = runtime::parseBackend(o.backend);
  if (!b)
    return llvm::createStringError("backend '" + o.backend +
                                   "': not a backend (" +
                                   runtime::backendNames() + ")");
  runtime::setAllowTf32(plan.allow_tf32());
  return runtime::addDevices(*b, size_t(plan.programs_size()), 0, set);
}

llvm::Error Session::State::open() {
  if (options.devices != "threads")
    return llvm::createStringError(
        "devices '" + options.devices +
        "': a session runs the plan's devices as threads of this process "
        "(devices='threads'); run a plan over MPI ranks with mpirun paxrun");
  if (plan.probe())
    return llvm::createStringError(
        "a cost probe: time it with paxrun --write-cost-db=FILE");
  if (auto err = runtime::checkPlan(plan))
    return err;
  if (!readSourceModel(plan, model))
    return llvm::createStringError("cannot read the model '" + plan.source() +
                                   "' the plan names");
  if (auto err = makeDevices(plan, options, devices))
    return err;
  for (const plan::DeviceProgram &p : plan.programs())
    progs.push_back(&p);
  for (const std::string &name : dataInputs(model))
    graphInputs.insert(name);
  if (auto found = trainingUpdates(plan, "train_step"))
    updates = std::move(*found);
  else
    notTraining = llvm::toString(found.takeError());
  inputs.resize(size_t(plan.inputs_size()));
  feed = std::make_unique<Feed>(
      model, llvm::sys::path::parent_path(plan.source()).str(), inputs,
      [this](const plan::LoadWeight &load, plan::DType dtype) {
        return weight(load, dtype);
      });
  return llvm::Error::success();
}

/// The plan's input names, for messages.
static std::string inputNames(const plan::Plan &plan) {
  std::vector<std::string> names;
  for (const plan::TensorInfo &in : plan.inputs())
    names.push_back(in.name());
  return names.empty() ? "none" : llvm::join(names, ", ");
}

llvm::Error Session::State::bindFeeds(const NamedTensors &feeds) {
  std::map<std::string, const runtime::Tensor *> byName;
  for (const auto &[name, t] : feeds)
    byName[name] = &t;
  std::set<std::string> planInputs;
  for (int i = 0; i < plan.inputs_size(); ++i) {
    const plan::TensorInfo &info = plan.inputs(i);
    planInputs.insert(info.name());
    auto it = byName.find(info.name());
    if (it == byName.end())
      return llvm::createStringError("missing feed '" + info.name() +
                                     "' (the plan reads " + inputNames(plan) +
                                     ")");
    std::vector<int64_t> shape = shapeOf(info.shape());
    if (auto err = checkType(*it->second, info.dtype(), shape,
                             "feed '" + info.name() + "'"))
      return err;
    inputs[size_t(i)] = *it->second;
  }
  weightFeeds.clear();
  for (const auto &[name, t] : feeds) {
    if (planInputs.count(name))
      continue;
    if (!graphInputs.count(name))
      return llvm::createStringError("unknown feed '" + name +
                                     "' (the plan reads " + inputNames(plan) +
                                     ")");
    weightFeeds[name] = t;
  }
  // A weight fed by name is read anew each run (and checked then).
  for (const std::string &name : graphInputs)
    if (!planInputs.count(name))
      feed->forget(name);
  return llvm::Error::success();
}

llvm::Expected<runtime::Tensor>
Session::State::weight(const plan::LoadWeight &load, plan::DType dtype) const {
  auto it = weightFeeds.find(load.tensor());
  if (it == weightFeeds.end())
    return llvm::createStringError("weight '" + load.tensor() +
                                   "' is a graph input of the model: feed it "
                                   "by name");
  if (auto err = checkType(it->second, dtype, shapeOf(load.global_shape()),
                           "weight '" + load.tensor() + "'"))
    return err;
  return it->second;
}

llvm::Error Session::State::runDevices(std::vector<runtime::Tensor> &outputs,
                                       runtime::ThreadRunOptions o,
                                       bool training) {
  o.fuseChains = options.fuseKernels;
  o.gatherOutputs = true;
  return runtime::runThreads(
      plan, progs, devices,
      [&](size_t d) -> runtime::DataFeed & {
        return training ? static_cast<runtime::DataFeed &>(resident[d]) : *feed;
      },
      outputs, stats, o);
}

/// After a training step: each device keeps its blocks of the updates,
/// and the host its gathered copies (saveModel, and the loads in another
/// layout).
llvm::Error
Session::State::keepStep(const std::vector<runtime::Tensor> &outputs) {
  for (size_t d = 0; d < progs.size(); ++d) {
    resident[d].carriedLoads += stats[d].carriedLoads;
    if (auto err = keepUpdates(plan, *progs[d], *devices.devices[d],
                               devices.buffers[d], resident[d]))
      return err;
  }
  // The updates gathered every step (the loss scale's); the others stay on
  // the devices until gatherUpdates.
  for (const auto &[index, name] : updates)
    if (gatheredEveryStep(plan.outputs(index).name()))
      feed->set(name, outputs[size_t(index)]);
  return llvm::Error::success();
}

/// The host's copies of the updated weights, assembled from the blocks
/// each device owns (one owner per element), where the steps since the
/// last left them there.
llvm::Error Session::State::gatherUpdates() {
  if (hostCurrent)
    return llvm::Error::success();
  for (const auto &[index, name] : updates) {
    if (gatheredEveryStep(plan.outputs(index).name()))
      continue;
    const plan::TensorInfo &info = plan.outputs(index);
    std::vector<int64_t> shape = shapeOf(info.shape());
    runtime::Tensor whole = runtime::Tensor::zeros(info.dtype(), shape);
    std::vector<int64_t> origin(shape.size(), 0);
    int64_t covered = 0;
    for (const ResidentFeed &r : resident)
      for (const TensorBlock *b : r.ownedBlocks())
        if (b->name == name)
          covered +=
              runtime::moveOverlap(b->t, b->lo, whole, origin, /*add=*/false);
    if (covered != whole.numel())
      return llvm::createStringError(
          "internal: the devices own " + llvm::Twine(covered) + " of the " +
          llvm::Twine(whole.numel()) + " elements of update '" + name + "'");
    feed->set(name, std::move(whole));
  }
  hostCurrent = true;
  return llvm::Error::success();
}

NamedTensors
Session::State::named(std::vector<runtime::Tensor> &outputs) const {
  NamedTensors out;
  for (size_t i = 0; i < outputs.size(); ++i)
    out.push_back({plan.outputs(int(i)).name(), std::move(outputs[i]).owned()});
  return out;
}

Session::Session(std::unique_ptr<State> state) : state(std::move(state)) {}
Session::~Session() = default;

llvm::Expected<std::unique_ptr<Session>>
Session::open(plan::Plan plan, const SessionOptions &options) {
  auto state = std::make_unique<State>(std::move(plan), options);
  if (auto err = state->open())
    return err;
  return std::unique_ptr<Session>(new Session(std::move(state)));
}

const plan::Plan &Session::plan() const { return state->plan; }
unsigned Session::step() const { return state->step; }

llvm::Expected<NamedTensors> Session::run(const NamedTensors &feeds) {
  State &s = *state;
  std::lock_guard<std::mutex> lock(s.busy);
  if (auto err = s.checkUsable())
    return err;
  if (auto err = s.bindFeeds(feeds))
    return err;
  // A run overwrites the arenas that hold a training step's weights: the
  // next step loads the host's copies, gathered first.
  if (auto err = s.gatherUpdates())
    return err;
  s.resident.clear();
  runtime::ThreadRunOptions o;
  o.weightsResident = s.weightsWarm && s.weightFeeds.empty();
  std::vector<runtime::Tensor> outputs;
  if (auto err = s.runDevices(outputs, o, /*training=*/false))
    return err;
  s.weightsWarm = true;
  return s.named(outputs);
}

llvm::Expected<double> Session::trainStep(const NamedTensors &feeds) {
  State &s = *state;
  std::lock_guard<std::mutex> lock(s.busy);
  if (!s.notTraining.empty())
    return llvm::createStringError(s.notTraining);
  if (auto err = s.checkUsable())
    return err;
  if (auto err = s.bindFeeds(feeds))
    return err;
  runtime::ThreadRunOptions o;
  // The weights the step before left on the devices, where it ran.
  o.carryWeights = !s.resident.empty();
  if (s.resident.empty())
    s.resident.assign(s.progs.size(), ResidentFeed(*s.feed));
  for (ResidentFeed &r : s.resident)
    r.hostCurrent = s.hostCurrent;
  // The loss (and the loss scale) reach the host; the updates stay on the
  // devices that own them.
  o.leaveOutputs.assign(size_t(s.plan.outputs_size()), false);
  for (const auto &[index, name] : s.updates)
    o.leaveOutputs[size_t(index)] =
        !gatheredEveryStep(s.plan.outputs(index).name());
  s.weightsWarm = false;
  std::vector<runtime::Tensor> outputs;
  llvm::Error err = s.runDevices(outputs, o, /*training=*/true);
  if (!err)
    err = s.keepStep(outputs);
  if (err) {
    // The devices' blocks are no step's whole state now.
    if (!s.hostCurrent)
      s.broken =
          "a training step failed (" + llvm::toString(std::move(err)) + ")";
    s.resident.clear();
    return s.broken.empty() ? std::move(err) : s.checkUsable();
  }
  s.hostCurrent = false;
  ++s.step;
  return outputs[0].real(0);
}

llvm::Error Session::saveModel(const std::string &path) {
  std::lock_guard<std::mutex> lock(state->busy);
  if (auto err = state->checkUsable())
    return err;
  if (auto err = state->gatherUpdates())
    return err;
  return pax::saveModel(path, state->model, *state->feed);
}

llvm::Error Session::saveCheckpoint(const std::string &dir) {
  State &s = *state;
  std::lock_guard<std::mutex> lock(s.busy);
  if (auto err = s.checkUsable())
    return err;
  if (s.resident.empty())
    return llvm::createStringError(
        "save_checkpoint: no training step has run since the session "
        "started, loaded a checkpoint or ran the plan (a checkpoint holds "
        "what a step leaves on the devices)");
  return writeShards(s.plan, s.progs, s.resident, nullptr, dir, s.step);
}

llvm::Error Session::loadCheckpoint(const std::string &dir) {
  State &s = *state;
  std::lock_guard<std::mutex> lock(s.busy);
  auto reader = CheckpointReader::open(dir, s.plan);
  if (!reader)
    return reader.takeError();
  s.step = (*reader)->step();
  s.feed->clearUpdates();
  // The host's copies are the checkpoint's (saveModel writes them).
  for (const auto &[index, name] : s.updates) {
    const plan::TensorInfo &info = s.plan.outputs(index);
    std::vector<int64_t> shape = shapeOf(info.shape());
    runtime::Tensor whole = runtime::Tensor::zeros(info.dtype(), shape);
    if (auto err =
            (*reader)->read(name, std::vector<int64_t>(shape.size(), 0), whole))
      return err;
    s.feed->set(name, std::move(whole));
  }
  s.feed->resumeFrom(std::move(*reader));
  s.resident.clear();
  s.weightsWarm = false;
  s.hostCurrent = true;
  s.broken.clear();
  return llvm::Error::success();
}

} // namespace pax::driver
