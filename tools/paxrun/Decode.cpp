//===- Decode.cpp - paxrun's step loop: outputs fed back as inputs --------===//
#include "tools/paxrun/Decode.h"

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

llvm::Error
DecodeLoop::run(std::vector<runtime::Tensor> &inputs,
                std::vector<runtime::Tensor> &outputs,
                llvm::function_ref<llvm::Error(bool first)> step) const {
  using Clock = std::chrono::steady_clock;
  Clock::time_point start = Clock::now(), second = start;
  for (unsigned k = 0; k < steps; ++k) {
    if (k == 1)
      second = Clock::now();
    if (auto err = step(k == 0))
      return err;
    printStep(k, outputs);
    feedBack(pairs, outputs, inputs);
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
  return llvm::Error::success();
}

void feedBack(llvm::ArrayRef<FeedbackPair> pairs,
              const std::vector<runtime::Tensor> &outputs,
              std::vector<runtime::Tensor> &inputs) {
  for (const FeedbackPair &p : pairs)
    inputs[p.input] = outputs[p.output];
}

} // namespace pax
