//===- TensorFiles.cpp - ONNX tensor files and runtime tensors for tools --===//
#include "tools/common/TensorFiles.h"

#include "codegen/EmitCompute.h"
#include "frontend/TensorProto.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <onnx/onnx_pb.h>

namespace pax {

llvm::Expected<ConstTensor> readTensorFile(llvm::StringRef path,
                                           llvm::StringRef what) {
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                         /*RequiresNullTerminator=*/false);
  if (!buf)
    return llvm::createStringError("cannot read " + what + " '" + path +
                                   "': " + buf.getError().message());
  onnx::TensorProto t;
  if (!t.ParseFromArray((*buf)->getBufferStart(), int((*buf)->getBufferSize())))
    return llvm::createStringError("'" + path + "' is not an ONNX TensorProto");
  auto c = readTensorProto(t, llvm::sys::path::parent_path(path));
  if (!c)
    return llvm::createStringError("'" + path +
                                   "': " + llvm::toString(c.takeError()));
  return c;
}

void copyValues(const ConstTensor &c, runtime::Tensor &out) {
  for (int64_t i = 0; i < c.numel(); ++i) {
    if (c.isReal())
      out.setReal(i, c.real(i));
    else
      out.setInteger(i, c.integer(i));
  }
}

runtime::Tensor toRuntimeTensor(const ConstTensor &c) {
  runtime::Tensor t = runtime::Tensor::zeros(
      toPlanDType(c.type.elem), {c.type.shape.begin(), c.type.shape.end()});
  copyValues(c, t);
  return t;
}

} // namespace pax
