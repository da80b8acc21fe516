//===- TensorFiles.cpp - ONNX tensor files and runtime tensors for tools --===//
#include "tools/common/TensorFiles.h"

#include "codegen/EmitCompute.h"
#include "codegen/plan/PlanFile.h"
#include "frontend/TensorProto.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>
#include <optional>

#include <onnx/onnx_pb.h>

namespace pax {

llvm::Expected<ConstTensor>
readTensorFile(llvm::StringRef path, llvm::StringRef what, std::string *name) {
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                         /*RequiresNullTerminator=*/false);
  if (!buf)
    return llvm::createStringError("cannot read " + what + " '" + path +
                                   "': " + buf.getError().message());
  return parseTensorFile((*buf)->getBuffer(), path, name);
}

llvm::Expected<ConstTensor> parseTensorFile(llvm::StringRef bytes,
                                            llvm::StringRef path,
                                            std::string *name) {
  onnx::TensorProto t;
  if (bytes.size() > size_t(INT32_MAX) ||
      !t.ParseFromArray(bytes.data(), int(bytes.size())))
    return llvm::createStringError("'" + path + "' is not an ONNX TensorProto");
  if (name)
    *name = t.name();
  auto c = readTensorProto(t, llvm::sys::path::parent_path(path));
  if (!c)
    return llvm::createStringError("'" + path +
                                   "': " + llvm::toString(c.takeError()));
  return c;
}

/// The `.npy` descr of each plan dtype ('<' little-endian, '|' one byte).
static const std::pair<plan::DType, const char *> kNpyTypes[] = {
    {plan::F32, "<f4"}, {plan::F64, "<f8"}, {plan::F16, "<f2"},
    {plan::I8, "|i1"},  {plan::I16, "<i2"}, {plan::I32, "<i4"},
    {plan::I64, "<i8"}, {plan::U8, "|u1"},  {plan::U16, "<u2"},
    {plan::U32, "<u4"}, {plan::U64, "<u8"}, {plan::I1, "|b1"},
};

llvm::Expected<runtime::Tensor> readNpyFile(llvm::StringRef path,
                                            llvm::StringRef what) {
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                         /*RequiresNullTerminator=*/false);
  if (!buf)
    return llvm::createStringError("cannot read " + what + " '" + path +
                                   "': " + buf.getError().message());
  return parseNpy((*buf)->getBuffer(), path);
}

namespace {
/// Reads one `.npy` file's bytes step by step; errors name the file.
struct NpyReader {
  llvm::StringRef data;
  llvm::StringRef path;
  /// Where the header starts, and its length.
  size_t at = 0;
  size_t headerLen = 0;
  llvm::StringRef header;
  llvm::StringRef descr;
  llvm::StringRef shapeText;
  std::vector<int64_t> shape;
  /// The data's size in bytes, as the dtype and shape give it.
  uint64_t bytes = 0;

  NpyReader(llvm::StringRef data, llvm::StringRef path)
      : data(data), path(path) {}

  /// The error for a file that is not a `.npy` file paxrun reads.
  llvm::Error bad(const llvm::Twine &msg) const {
    return llvm::createStringError("'" + path +
                                   "' is not a .npy file paxrun "
                                   "reads: " +
                                   msg);
  }

  llvm::Error readPreamble();
  llvm::StringRef field(llvm::StringRef key) const;
  llvm::Error readHeader();
  llvm::Error readShape();
  llvm::Error checkBody(plan::DType dtype);
};
} // namespace

/// Reads the magic, the format version and the header's length, and finds
/// the header.
llvm::Error NpyReader::readPreamble() {
  if (data.size() < 10 || !data.starts_with("\x93NUMPY"))
    return bad("no .npy magic");
  unsigned major = uint8_t(data[6]);
  if (major == 1) {
    headerLen = uint8_t(data[8]) | size_t(uint8_t(data[9])) << 8;
    at = 10;
  } else if ((major == 2 || major == 3) && data.size() >= 12) {
    headerLen = 0;
    for (int i = 0; i < 4; ++i)
      headerLen |= size_t(uint8_t(data[8 + i])) << (8 * i);
    at = 12;
  } else {
    return bad("format version " + llvm::Twine(major));
  }
  if (data.size() < at + headerLen)
    return bad("the header is truncated");
  header = data.substr(at, headerLen);
  return llvm::Error::success();
}

/// The text after the header's key \p key and its colon ("" when absent).
llvm::StringRef NpyReader::field(llvm::StringRef key) const {
  size_t k = header.find("'" + key.str() + "'");
  if (k == llvm::StringRef::npos)
    return "";
  llvm::StringRef rest = header.substr(k + key.size() + 2).ltrim();
  return rest.consume_front(":") ? rest.ltrim() : "";
}

/// Reads the header's descr, fortran_order and shape.
llvm::Error NpyReader::readHeader() {
  descr = field("descr");
  if (!descr.consume_front("'"))
    return bad("no descr");
  descr = descr.take_until([](char c) { return c == '\''; });
  if (field("fortran_order").starts_with("True"))
    return bad("Fortran order");
  shapeText = field("shape");
  if (!shapeText.consume_front("("))
    return bad("no shape");
  shapeText = shapeText.take_until([](char c) { return c == ')'; });
  return readShape();
}

/// Reads the dims of the shape's text.
llvm::Error NpyReader::readShape() {
  llvm::SmallVector<llvm::StringRef, 4> parts;
  shapeText.split(parts, ',', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef p : parts) {
    int64_t d;
    if (p.trim().getAsInteger(10, d) || d < 0)
      return bad("shape '(" + shapeText + ")'");
    shape.push_back(d);
  }
  return llvm::Error::success();
}

/// The plan dtype of the `.npy` descr \p descr ('=' native order too).
static std::optional<plan::DType> npyDType(llvm::StringRef descr) {
  std::optional<plan::DType> dtype;
  for (auto [t, name] : kNpyTypes)
    if (descr == name || (descr.size() == 3 && descr[0] == '=' &&
                          descr.substr(1) == llvm::StringRef(name).substr(1)))
      dtype = t;
  return dtype;
}

/// Checks that the data after the header holds exactly the bytes that
/// \p dtype and the shape give.
llvm::Error NpyReader::checkBody(plan::DType dtype) {
  // The data's size first: a shape is only believed when the bytes are
  // there (no allocation of what a header merely claims).
  size_t body = at + headerLen;
  // Past a zero dim the byte count stays 0 however large the others, so
  // the dims but zeros must multiply within int64 on their own too (the
  // tensor counts its elements).
  bytes = uint64_t(runtime::dtypeBytes(dtype));
  int64_t nonzero = 1;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(bytes, uint64_t(d), &bytes) ||
        (d && __builtin_mul_overflow(nonzero, d, &nonzero)))
      return bad("shape '(" + shapeText + ")' is too large");
  if (data.size() - body != bytes)
    return bad("it holds " + llvm::Twine(data.size() - body) +
               " bytes of data for " + llvm::Twine(bytes));
  return llvm::Error::success();
}

llvm::Expected<runtime::Tensor> parseNpy(llvm::StringRef data,
                                         llvm::StringRef path) {
  NpyReader r{data, path};
  if (llvm::Error err = r.readPreamble())
    return err;
  if (llvm::Error err = r.readHeader())
    return err;
  std::optional<plan::DType> dtype = npyDType(r.descr);
  if (!dtype)
    return r.bad("element type '" + r.descr + "'");
  if (llvm::Error err = r.checkBody(*dtype))
    return err;
  runtime::Tensor t = runtime::Tensor::zeros(*dtype, r.shape);
  if (r.bytes) // an empty tensor has no data to copy (nor a buffer)
    std::memcpy(t.data.data(), data.data() + r.at + r.headerLen,
                size_t(r.bytes));
  return t;
}

llvm::Error writeNpyFile(llvm::StringRef path, const runtime::Tensor &t) {
  const char *descr = nullptr;
  for (auto [d, name] : kNpyTypes)
    if (d == t.dtype)
      descr = name;
  if (!descr)
    return llvm::createStringError("cannot write '" + path +
                                   "': no .npy element type for it");
  std::string shape;
  for (int64_t d : t.shape)
    shape += std::to_string(d) + ", ";
  if (t.shape.size() > 1)
    shape.resize(shape.size() - 1);
  std::string header = "{'descr': '" + std::string(descr) +
                       "', 'fortran_order': False, 'shape': (" + shape + "), }";
  // Magic, version and length take 10 bytes; the header ends in '\n' and
  // pads the data to 64 bytes.
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec)
    return llvm::createStringError("cannot write '" + path +
                                   "': " + ec.message());
  os << "\x93NUMPY" << char(1) << char(0) << char(header.size() & 0xff)
     << char(header.size() >> 8) << header;
  os.write(reinterpret_cast<const char *>(t.data.data()), t.data.size());
  return llvm::Error::success();
}

onnx::TensorProto toTensorProto(llvm::StringRef name,
                                const runtime::Tensor &t) {
  onnx::TensorProto proto;
  proto.set_name(name.str());
  for (int64_t d : t.shape)
    proto.add_dims(d);
  proto.set_data_type(dtypeToOnnx(fromPlanDType(t.dtype)));
  proto.set_raw_data(t.data.data(), t.data.size());
  return proto;
}

llvm::Error writeTensorFile(llvm::StringRef path, llvm::StringRef name,
                            const runtime::Tensor &t) {
  onnx::TensorProto proto = toTensorProto(name, t);
  std::string bytes;
  proto.SerializeToString(&bytes);
  return writeFileBytes(path, bytes);
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
