//===- Checkpoint.cpp - A training session's checkpoint files -------------===//
#include "tools/common/Checkpoint.h"

#include "frontend/TensorProto.h"
#include "tools/common/TensorFiles.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/xxhash.h"

#include <onnx/onnx_pb.h>

namespace pax {

std::string planFingerprint(const plan::Plan &plan) {
  std::string bytes;
  plan.SerializeToString(&bytes);
  return llvm::utohexstr(llvm::xxh3_64bits(llvm::arrayRefFromStringRef(bytes)));
}

llvm::Expected<unsigned> parseCheckpointIndex(llvm::StringRef text,
                                              llvm::StringRef origin,
                                              llvm::StringRef fingerprint) {
  llvm::SmallVector<llvm::StringRef, 4> lines;
  text.split(lines, '\n', -1, false);
  std::optional<unsigned> step;
  std::string written;
  for (llvm::StringRef line : lines) {
    auto [key, value] = line.split(' ');
    unsigned n;
    if (key == "plan")
      written = value.str();
    else if (key == "step" && !value.getAsInteger(10, n))
      step = n;
    else
      return llvm::createStringError(origin +
                                     ": a line paxrun does not "
                                     "write: '" +
                                     line.take_front(80) + "'");
  }
  if (!step)
    return llvm::createStringError(origin + ": no step line");
  if (written != fingerprint)
    return llvm::createStringError(
        origin +
        ": the checkpoint was written by another plan (compile with the same "
        "model and options, or start afresh)");
  return *step;
}

llvm::Expected<std::pair<std::string, runtime::Tensor>>
parseCheckpointTensor(llvm::StringRef bytes, llvm::StringRef path,
                      const plan::Plan &plan) {
  onnx::TensorProto proto;
  if (bytes.size() > size_t(INT32_MAX) ||
      !proto.ParseFromArray(bytes.data(), int(bytes.size())))
    return llvm::createStringError("'" + path + "' is not an ONNX TensorProto");
  // The weight as the plan loads it: its whole shape and element type.
  const plan::LoadWeight *load = nullptr;
  plan::DType dtype = plan::F32;
  for (const plan::DeviceProgram &prog : plan.programs())
    for (const plan::Instruction &inst : prog.instructions())
      if (inst.has_load() && inst.load().tensor() == proto.name() &&
          inst.load().buffer() < uint32_t(prog.buffers_size())) {
        load = &inst.load();
        dtype = prog.buffers(int(inst.load().buffer())).dtype();
      }
  if (!load)
    return llvm::createStringError("'" + path + "' holds '" + proto.name() +
                                   "', which the plan does not load");
  auto c = readTensorProto(proto, llvm::sys::path::parent_path(path));
  if (!c)
    return llvm::createStringError("'" + path +
                                   "': " + llvm::toString(c.takeError()));
  runtime::Tensor t = toRuntimeTensor(*c);
  if (t.dtype != dtype ||
      t.shape != std::vector<int64_t>(load->global_shape().begin(),
                                      load->global_shape().end()))
    return llvm::createStringError(
        "'" + path + "' holds '" + proto.name() +
        "' in another shape or element type than the plan's");
  return std::pair{proto.name(), std::move(t)};
}

} // namespace pax
