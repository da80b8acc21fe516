//===- TensorProto.cpp - ONNX TensorProto data, checked -------------------===//
#include "frontend/TensorProto.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cmath>
#include <cstring>

namespace pax {

using onnx::TensorProto;

std::optional<DType> dtypeFromOnnx(int32_t t) {
  switch (t) {
  case TensorProto::FLOAT:
    return DType::F32;
  case TensorProto::DOUBLE:
    return DType::F64;
  case TensorProto::FLOAT16:
    return DType::F16;
  case TensorProto::BFLOAT16:
    return DType::BF16;
  case TensorProto::INT8:
    return DType::I8;
  case TensorProto::INT16:
    return DType::I16;
  case TensorProto::INT32:
    return DType::I32;
  case TensorProto::INT64:
    return DType::I64;
  case TensorProto::UINT8:
    return DType::U8;
  case TensorProto::UINT16:
    return DType::U16;
  case TensorProto::UINT32:
    return DType::U32;
  case TensorProto::UINT64:
    return DType::U64;
  case TensorProto::BOOL:
    return DType::I1;
  default:
    return std::nullopt;
  }
}

std::string onnxElemName(int32_t elem) {
  return onnx::TensorProto::DataType_IsValid(elem)
             ? llvm::StringRef(onnx::TensorProto::DataType_Name(
                                   onnx::TensorProto::DataType(elem)))
                   .lower()
             : "element type " + std::to_string(elem);
}

int32_t dtypeToOnnx(DType t) {
  for (int32_t o = TensorProto::FLOAT; o <= TensorProto::BFLOAT16; ++o)
    if (dtypeFromOnnx(o) == t)
      return o;
  llvm_unreachable("an IR dtype without an ONNX data type");
}

static llvm::Error tensorError(const TensorProto &t, const llvm::Twine &msg) {
  return llvm::createStringError("tensor '" + t.name() + "': " + msg);
}

llvm::Expected<TensorType> tensorProtoType(const TensorProto &t) {
  auto dt = dtypeFromOnnx(t.data_type());
  if (!dt)
    return tensorError(t,
                       "unsupported data type " + llvm::Twine(t.data_type()));
  TensorType type;
  type.elem = *dt;
  int64_t numel = 1;
  for (int64_t d : t.dims()) {
    if (d < 0)
      return tensorError(t, "negative dim " + llvm::Twine(d));
    if (d > kMaxExtent || (d > 0 && numel > kMaxExtent / d))
      return tensorError(t, "dim " + llvm::Twine(d) +
                                " makes the tensor larger than 2^48 elements");
    numel *= d;
    type.shape.push_back(d);
  }
  return type;
}

namespace {
/// Where a tensor's external data is: a file inside the model's folder.
struct ExternalRef {
  std::string file;
  int64_t offset = 0;
  int64_t length = -1;
};
} // namespace

static llvm::Expected<ExternalRef> externalRef(const TensorProto &t,
                                               llvm::StringRef modelDir) {
  ExternalRef ref;
  std::string location;
  for (const auto &kv : t.external_data()) {
    int64_t v = 0;
    if (kv.key() == "location")
      location = kv.value();
    else if ((kv.key() == "offset" || kv.key() == "length") &&
             (llvm::StringRef(kv.value()).getAsInteger(10, v) || v < 0))
      return tensorError(t, "external data " + kv.key() + " '" + kv.value() +
                                "' is not a non-negative integer");
    if (kv.key() == "offset")
      ref.offset = v;
    if (kv.key() == "length")
      ref.length = v;
  }
  if (location.empty())
    return tensorError(t, "external data has no location");
  // The location must stay inside the model's folder.
  llvm::SmallString<256> rel(location);
  llvm::sys::path::remove_dots(rel, /*remove_dot_dot=*/true);
  bool escapes = llvm::sys::path::is_absolute(location) ||
                 llvm::StringRef(rel).starts_with("..");
  for (auto it = llvm::sys::path::begin(location),
            end = llvm::sys::path::end(location);
       it != end; ++it)
    escapes |= *it == "..";
  if (escapes)
    return tensorError(t, "external data location '" + location +
                              "' escapes the model's folder");
  llvm::SmallString<256> full(modelDir);
  llvm::sys::path::append(full, rel);
  // Resolve links too: the real path must still be inside the folder.
  llvm::SmallString<256> real, realDir;
  if (llvm::sys::fs::real_path(full, real))
    return tensorError(t,
                       "external data file '" + location + "' does not exist");
  if (!llvm::sys::fs::real_path(modelDir.empty() ? "." : modelDir, realDir) &&
      !llvm::StringRef(real).starts_with((realDir + "/").str()))
    return tensorError(t, "external data location '" + location +
                              "' escapes the model's folder");
  ref.file = std::string(real);
  return ref;
}

static int64_t storedValues(const TensorProto &t, int64_t elemBytes) {
  if (t.has_raw_data())
    return int64_t(t.raw_data().size()) / elemBytes;
  switch (t.data_type()) {
  case TensorProto::FLOAT:
    return t.float_data_size();
  case TensorProto::DOUBLE:
    return t.double_data_size();
  case TensorProto::INT64:
    return t.int64_data_size();
  case TensorProto::UINT32:
  case TensorProto::UINT64:
    return t.uint64_data_size();
  default:
    return t.int32_data_size();
  }
}

llvm::Error checkTensorData(const TensorProto &t, llvm::StringRef modelDir) {
  auto type = tensorProtoType(t);
  if (!type)
    return type.takeError();
  int64_t numel = type->numel();
  int64_t bytes = type->bytes();
  if (t.data_location() == TensorProto::EXTERNAL) {
    auto ref = externalRef(t, modelDir);
    if (!ref)
      return ref.takeError();
    uint64_t size = 0;
    if (llvm::sys::fs::file_size(ref->file, size))
      return tensorError(t,
                         "cannot read external data file '" + ref->file + "'");
    int64_t length =
        ref->length < 0 ? int64_t(size) - ref->offset : ref->length;
    if (length < bytes || ref->offset + bytes > int64_t(size))
      return tensorError(t, "external data holds " +
                                llvm::Twine(std::max<int64_t>(length, 0)) +
                                " bytes but the tensor needs " +
                                llvm::Twine(bytes));
    return llvm::Error::success();
  }
  if (t.has_raw_data() && int64_t(t.raw_data().size()) != bytes)
    return tensorError(t, "raw data has " + llvm::Twine(t.raw_data().size()) +
                              " bytes but shape " + shapeStr(type->shape) +
                              " needs " + llvm::Twine(bytes));
  int64_t have = storedValues(t, dtypeBytes(type->elem));
  // 16-bit floats packed in int32_data hold one value per entry.
  if (have != numel)
    return tensorError(t, "holds " + llvm::Twine(have) + " values but shape " +
                              shapeStr(type->shape) + " needs " +
                              llvm::Twine(numel));
  return llvm::Error::success();
}

uint16_t roundTo16Bits(double v, bool bf16) {
  float f = float(v);
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if (bf16) {
    if (f != f)
      return uint16_t((x >> 16) | 0x40);
    return uint16_t((x + 0x7fff + ((x >> 16) & 1)) >> 16);
  }
  uint16_t sign = uint16_t((x >> 16) & 0x8000);
  float a = std::fabs(f);
  if (f != f)
    return sign | 0x7e00;
  if (a >= 65520.0f)
    return sign | 0x7c00;
  if (a < 6.103515625e-05f) // subnormal: a multiple of 2^-24
    return sign | uint16_t(std::nearbyint(a * 16777216.0f));
  uint32_t bits;
  std::memcpy(&bits, &a, 4);
  bits += 0xfff + ((bits >> 13) & 1);
  return sign | uint16_t(((bits >> 23) - 112) << 10 | ((bits >> 13) & 0x3ff));
}

static double halfToDouble(uint16_t h, bool bf16) {
  if (bf16) {
    uint32_t bits = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  int sign = (h >> 15) & 1, exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  double v;
  if (exp == 0)
    v = std::ldexp(double(mant), -24);
  else if (exp == 31)
    v = mant ? NAN : INFINITY;
  else
    v = std::ldexp(double(mant | 0x400), exp - 25);
  return sign ? -v : v;
}

/// Decodes little-endian raw bytes of \p type into \p out.
static void decodeRaw(const uint8_t *p, ConstTensor &out) {
  DType dt = out.type.elem;
  unsigned w = dtypeBytes(dt);
  for (int64_t i = 0; i < out.numel(); ++i, p += w) {
    auto load = [p](auto v) {
      std::memcpy(&v, p, sizeof(v));
      return v;
    };
    switch (dt) {
    case DType::F32:
      out.reals[i] = load(float());
      break;
    case DType::F64:
      out.reals[i] = load(double());
      break;
    case DType::F16:
      out.reals[i] = halfToDouble(load(uint16_t()), false);
      break;
    case DType::BF16:
      out.reals[i] = halfToDouble(load(uint16_t()), true);
      break;
    case DType::I8:
      out.ints[i] = load(int8_t());
      break;
    case DType::I16:
      out.ints[i] = load(int16_t());
      break;
    case DType::I32:
      out.ints[i] = load(int32_t());
      break;
    case DType::I64:
      out.ints[i] = load(int64_t());
      break;
    case DType::U8:
      out.ints[i] = load(uint8_t());
      break;
    case DType::I1:
      out.ints[i] = load(uint8_t()) != 0;
      break;
    case DType::U16:
      out.ints[i] = load(uint16_t());
      break;
    case DType::U32:
      out.ints[i] = load(uint32_t());
      break;
    case DType::U64:
      out.ints[i] = int64_t(load(uint64_t()));
      break;
    }
  }
}

llvm::Expected<ConstTensor> readTensorProto(const TensorProto &t,
                                            llvm::StringRef modelDir) {
  if (auto err = checkTensorData(t, modelDir))
    return err;
  auto type = tensorProtoType(t);
  ConstTensor out = ConstTensor::zeros(*type);
  if (t.data_location() == TensorProto::EXTERNAL) {
    auto ref = externalRef(t, modelDir);
    if (!ref)
      return ref.takeError();
    auto buf =
        llvm::MemoryBuffer::getFileSlice(ref->file, type->bytes(), ref->offset);
    if (!buf)
      return tensorError(t, "cannot read external data: " +
                                buf.getError().message());
    decodeRaw(reinterpret_cast<const uint8_t *>((*buf)->getBufferStart()), out);
    return out;
  }
  if (t.has_raw_data()) {
    decodeRaw(reinterpret_cast<const uint8_t *>(t.raw_data().data()), out);
    return out;
  }
  for (int64_t i = 0; i < out.numel(); ++i) {
    switch (t.data_type()) {
    case TensorProto::FLOAT:
      out.reals[i] = t.float_data(i);
      break;
    case TensorProto::DOUBLE:
      out.reals[i] = t.double_data(i);
      break;
    case TensorProto::INT64:
      out.ints[i] = t.int64_data(i);
      break;
    case TensorProto::UINT32:
    case TensorProto::UINT64:
      out.ints[i] = int64_t(t.uint64_data(i));
      break;
    case TensorProto::FLOAT16:
    case TensorProto::BFLOAT16:
      out.reals[i] = halfToDouble(uint16_t(t.int32_data(i)),
                                  t.data_type() == TensorProto::BFLOAT16);
      break;
    case TensorProto::BOOL:
      out.ints[i] = t.int32_data(i) != 0;
      break;
    default:
      out.ints[i] = t.int32_data(i);
      break;
    }
  }
  return out;
}

} // namespace pax
