//===- Decode.cpp - paxrun's step loop: outputs fed back as inputs --------===//
#include "tools/paxrun/Decode.h"

#include "codegen/plan/PlanFile.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>

namespace pax {
namespace {

/// What `*` stands for where \p name matches \p pattern (the name itself
/// when the pattern has no `*` and equals it).
std::optional<std::string> starOf(llvm::StringRef pattern,
                                  llvm::StringRef name) {
  size_t star = pattern.find('*');
  if (star == llvm::StringRef::npos)
    return pattern == name ? std::optional<std::string>("") : std::nullopt;
  llvm::StringRef head = pattern.take_front(star),
                  tail = pattern.drop_front(star + 1);
  if (name.size() < head.size() + tail.size() || !name.starts_with(head) ||
      !name.ends_with(tail))
    return std::nullopt;
  return name.drop_front(head.size()).drop_back(tail.size()).str();
}

/// The index of the plan tensor named \p name in \p infos, or none.
std::optional<unsigned>
indexOf(const google::protobuf::RepeatedPtrField<plan::TensorInfo> &infos,
        llvm::StringRef name) {
  for (int i = 0; i < infos.size(); ++i)
    if (infos[i].name() == name)
      return unsigned(i);
  return std::nullopt;
}

/// An error unless output \p o can stand for input \p i of \p plan.
llvm::Error checkPair(const plan::Plan &plan, unsigned o, unsigned i) {
  const plan::TensorInfo &out = plan.outputs(int(o)), &in = plan.inputs(int(i));
  bool sameShape =
      out.shape_size() == in.shape_size() &&
      std::equal(out.shape().begin(), out.shape().end(), in.shape().begin());
  if (out.dtype() == in.dtype() && sameShape)
    return llvm::Error::success();
  auto shape = [](const plan::TensorInfo &t) {
    std::string s = plan::DType_Name(t.dtype()) + "[";
    for (int d = 0; d < t.shape_size(); ++d)
      s += (d ? ", " : "") + std::to_string(t.shape(d));
    return s + "]";
  };
  return llvm::createStringError(
      "--feedback: output '" + out.name() + "' (" + shape(out) +
      ") cannot be input '" + in.name() + "' (" + shape(in) +
      "): a fed-back output must have its input's type and shape (a cache "
      "of fixed size)");
}

/// The pairs of one OUTPUT=INPUT term, appended to \p out.
llvm::Error parseTerm(const plan::Plan &plan, llvm::StringRef term,
                      std::vector<FeedbackPair> &out) {
  auto [from, to] = term.split('=');
  from = from.trim();
  to = to.trim();
  if (from.empty() || to.empty() || from.count('*') != to.count('*') ||
      from.count('*') > 1)
    return llvm::createStringError(
        "--feedback '" + term.str() +
        "': expected OUTPUT=INPUT (a '*' on both sides or neither)");
  size_t before = out.size();
  for (int o = 0; o < plan.outputs_size(); ++o) {
    std::optional<std::string> star = starOf(from, plan.outputs(o).name());
    if (!star)
      continue;
    std::string name = to.str();
    if (size_t s = name.find('*'); s != std::string::npos)
      name.replace(s, 1, *star);
    std::optional<unsigned> i = indexOf(plan.inputs(), name);
    if (!i)
      return llvm::createStringError(
          "--feedback '" + term.str() + "': the plan has no input '" + name +
          "' for output '" + plan.outputs(o).name() + "'");
    if (auto err = checkPair(plan, unsigned(o), *i))
      return err;
    out.push_back({unsigned(o), *i});
  }
  if (out.size() == before)
    return llvm::createStringError("--feedback '" + term.str() +
                                   "': no output of the plan matches '" +
                                   from.str() + "'");
  return llvm::Error::success();
}

} // namespace

llvm::Expected<std::vector<FeedbackPair>> parseFeedback(const plan::Plan &plan,
                                                        llvm::StringRef spec) {
  llvm::SmallVector<llvm::StringRef, 8> terms;
  spec.split(terms, ',', -1, false);
  std::vector<FeedbackPair> pairs;
  for (llvm::StringRef term : terms)
    if (auto err = parseTerm(plan, term, pairs))
      return err;
  for (size_t a = 0; a < pairs.size(); ++a)
    for (size_t b = a + 1; b < pairs.size(); ++b)
      if (pairs[a].input == pairs[b].input)
        return llvm::createStringError("--feedback: input '" +
                                       plan.inputs(int(pairs[a].input)).name() +
                                       "' is fed twice");
  if (pairs.empty())
    return llvm::createStringError("--feedback: no OUTPUT=INPUT pair");
  return pairs;
}

void DecodeLoop::printStep(unsigned k,
                           const std::vector<runtime::Tensor> &outputs) const {
  for (const std::string &name : print)
    for (int o = 0; o < plan.outputs_size(); ++o) {
      if (plan.outputs(o).name() != name)
        continue;
      const runtime::Tensor &t = outputs[size_t(o)];
      llvm::outs() << "step " << k << ": " << name << " =";
      bool real = runtime::isFloatDType(t.dtype);
      for (int64_t i = 0; i < std::min<int64_t>(t.numel(), 16); ++i) {
        if (real)
          llvm::outs() << ' ' << llvm::formatv("{0:g}", t.real(i));
        else
          llvm::outs() << ' ' << t.integer(i);
      }
      llvm::outs() << (t.numel() > 16 ? " ...\n" : "\n");
    }
}

runtime::RunOptions DecodeLoop::optionsFor(unsigned k) const {
  runtime::RunOptions o;
  o.weightsResident = k > 0;
  o.keptBlocks = kept.blocks;
  o.keptInputs = k > 0;
  if (k + 1 == steps)
    return o;
  o.leaveOutputs.assign(size_t(plan.outputs_size()), false);
  for (size_t p = 0; p < pairs.size(); ++p)
    o.leaveOutputs[pairs[p].output] =
        p < kept.onDevices.size() && kept.onDevices[p] &&
        !llvm::is_contained(print, plan.outputs(int(pairs[p].output)).name());
  return o;
}

llvm::Error DecodeLoop::run(
    std::vector<runtime::Tensor> &inputs, std::vector<runtime::Tensor> &outputs,
    llvm::function_ref<llvm::Error(const runtime::RunOptions &)> step) const {
  using Clock = std::chrono::steady_clock;
  Clock::time_point start = Clock::now(), second = start;
  for (unsigned k = 0; k < steps; ++k) {
    if (k == 1)
      second = Clock::now();
    if (auto err = step(optionsFor(k)))
      return err;
    printStep(k, outputs);
    feedBack(pairs, kept.onDevices, outputs, inputs);
  }
  double all = std::chrono::duration<double>(Clock::now() - start).count();
  double later = std::chrono::duration<double>(Clock::now() - second).count();
  llvm::outs() << llvm::formatv(
      "paxrun: decoded {0} steps in {1:F3} s ({2:F1} steps/s", steps, all,
      steps / all);
  if (steps > 1)
    llvm::outs() << llvm::formatv("; after the first, {0:F1} steps/s",
                                  (steps - 1) / later);
  llvm::outs() << ")\n";
  size_t stay = size_t(llvm::count(kept.onDevices, true));
  llvm::outs() << "paxrun: " << stay << " of " << pairs.size()
               << " fed-back outputs stay on the devices between steps";
  if (stay < pairs.size())
    llvm::outs() << " (the others go through the host: a device reads a "
                    "block of them it does not compute)";
  llvm::outs() << "\n";
  return llvm::Error::success();
}

void feedBack(llvm::ArrayRef<FeedbackPair> pairs,
              const std::vector<bool> &onDevices,
              const std::vector<runtime::Tensor> &outputs,
              std::vector<runtime::Tensor> &inputs) {
  for (size_t p = 0; p < pairs.size(); ++p)
    if (p >= onDevices.size() || !onDevices[p])
      inputs[pairs[p].input] = outputs[pairs[p].output];
}

/// The output binding of \p prog for output \p output with input binding
/// \p in's box (offset, type and shape), or -1.
static int sameBox(const plan::DeviceProgram &prog, uint32_t output,
                   const plan::Binding &in) {
  const plan::Buffer &ib = prog.buffers(int(in.buffer()));
  for (int o = 0; o < prog.outputs_size(); ++o) {
    const plan::Binding &out = prog.outputs(o);
    if (out.index() != output || out.buffer() >= uint32_t(prog.buffers_size()))
      continue;
    const plan::Buffer &ob = prog.buffers(int(out.buffer()));
    if (std::equal(out.offset().begin(), out.offset().end(),
                   in.offset().begin(), in.offset().end()) &&
        ob.dtype() == ib.dtype() &&
        std::equal(ob.shape().begin(), ob.shape().end(), ib.shape().begin(),
                   ib.shape().end()))
      return o;
  }
  return -1;
}

/// Pair \p p's blocks on each device, or none where a device reads a box
/// of the input it does not compute.
static std::optional<std::map<uint32_t, std::vector<runtime::KeptBlock>>>
blocksOf(llvm::ArrayRef<const plan::DeviceProgram *> progs,
         const FeedbackPair &p) {
  std::map<uint32_t, std::vector<runtime::KeptBlock>> blocks;
  for (const plan::DeviceProgram *prog : progs)
    for (int i = 0; i < prog->inputs_size(); ++i) {
      const plan::Binding &in = prog->inputs(i);
      if (in.index() != p.input)
        continue;
      if (in.buffer() >= uint32_t(prog->buffers_size()))
        return std::nullopt;
      int o = sameBox(*prog, p.output, in);
      if (o < 0)
        return std::nullopt;
      blocks[prog->device()].push_back({uint32_t(o), uint32_t(i), 0});
    }
  return blocks;
}

KeptPairs keepOnDevices(llvm::ArrayRef<const plan::DeviceProgram *> progs,
                        llvm::ArrayRef<FeedbackPair> pairs) {
  KeptPairs kept;
  kept.onDevices.assign(pairs.size(), false);
  for (size_t p = 0; p < pairs.size(); ++p) {
    auto blocks = blocksOf(progs, pairs[p]);
    if (!blocks)
      continue;
    kept.onDevices[p] = true;
    for (auto &[device, list] : *blocks)
      llvm::append_range(kept.blocks[device], list);
  }
  // Each device's blocks one after another past its arena, 256-aligned.
  auto align = [](int64_t x) { return (x + 255) / 256 * 256; };
  for (const plan::DeviceProgram *prog : progs) {
    auto it = kept.blocks.find(prog->device());
    if (it == kept.blocks.end())
      continue;
    int64_t at = align(prog->arena_bytes());
    for (runtime::KeptBlock &k : it->second) {
      k.offset = at;
      at = align(at + planBufferBytes(prog->buffers(
                          int(prog->inputs(int(k.input)).buffer()))));
    }
  }
  return kept;
}

} // namespace pax
