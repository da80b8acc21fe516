//===- PlanFile.cpp - Reading and writing .paxplan files ------------------===//
#include "codegen/plan/PlanFile.h"

#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

#include <cstring>

#include <google/protobuf/text_format.h>

namespace pax {

static constexpr char kMagic[8] = {'P', 'A', 'X', 'P', 'L', 'A', 'N', '\0'};
static constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8 + 8;

static uint64_t checksum(llvm::StringRef payload) {
  return llvm::xxh3_64bits(llvm::ArrayRef<uint8_t>(
      reinterpret_cast<const uint8_t *>(payload.data()), payload.size()));
}

int64_t planBufferBytes(const plan::Buffer &buf) {
  int64_t bytes = planDTypeBytes(buf.dtype());
  for (int64_t d : buf.shape())
    bytes *= d;
  return bytes;
}

bool planBuffersShareBytes(const plan::DeviceProgram &prog, uint32_t a,
                           uint32_t b) {
  const plan::Buffer &x = prog.buffers(int(a)), &y = prog.buffers(int(b));
  return x.offset() < y.offset() + planBufferBytes(y) &&
         y.offset() < x.offset() + planBufferBytes(x);
}

int64_t planDTypeBytes(plan::DType dtype) {
  switch (dtype) {
  case plan::F64:
  case plan::I64:
  case plan::U64:
    return 8;
  case plan::F32:
  case plan::I32:
  case plan::U32:
    return 4;
  case plan::F16:
  case plan::BF16:
  case plan::I16:
  case plan::U16:
    return 2;
  default:
    return 1;
  }
}

std::string encodePlan(const plan::Plan &plan) {
  std::string payload;
  plan.SerializeToString(&payload);
  std::string out(kHeaderBytes, '\0');
  std::memcpy(out.data(), kMagic, 8);
  llvm::support::endian::write32le(out.data() + 8, kPlanVersion);
  llvm::support::endian::write64le(out.data() + 16, payload.size());
  llvm::support::endian::write64le(out.data() + 24, checksum(payload));
  return out + payload;
}

llvm::Expected<plan::Plan> decodePlan(llvm::StringRef bytes,
                                      llvm::StringRef origin) {
  auto fail = [&](const llvm::Twine &msg) {
    return llvm::createStringError(origin + ": " + msg);
  };
  if (bytes.size() < 8 || std::memcmp(bytes.data(), kMagic, 8) != 0)
    return fail("not a paxc plan (no PAXPLAN header)");
  if (bytes.size() < kHeaderBytes)
    return fail("the plan is truncated (its header is incomplete)");
  uint32_t version = llvm::support::endian::read32le(bytes.data() + 8);
  if (version != kPlanVersion)
    return fail("plan format version " + llvm::Twine(version) +
                " is not supported (this paxc reads version " +
                llvm::Twine(kPlanVersion) + "); compile the model again");
  uint64_t length = llvm::support::endian::read64le(bytes.data() + 16);
  uint64_t sum = llvm::support::endian::read64le(bytes.data() + 24);
  llvm::StringRef payload = bytes.drop_front(kHeaderBytes);
  if (payload.size() < length)
    return fail("the plan is truncated (" + llvm::Twine(payload.size()) +
                " of " + llvm::Twine(length) + " bytes)");
  if (payload.size() > length)
    return fail("the plan has " + llvm::Twine(payload.size() - length) +
                " bytes of trailing garbage");
  if (checksum(payload) != sum)
    return fail("the plan is corrupted (its checksum does not match)");
  plan::Plan plan;
  if (payload.size() > size_t(INT32_MAX) ||
      !plan.ParseFromArray(payload.data(), int(payload.size())))
    return fail("the plan's contents do not parse");
  return plan;
}

llvm::Error writeFileBytes(llvm::StringRef path, llvm::StringRef bytes,
                           bool text) {
  std::error_code ec;
  llvm::raw_fd_ostream os(
      path, ec, text ? llvm::sys::fs::OF_Text : llvm::sys::fs::OF_None);
  if (ec)
    return llvm::createStringError("cannot write '" + path +
                                   "': " + ec.message());
  os << bytes;
  os.close();
  if (!os.has_error())
    return llvm::Error::success();
  // (A stream destroyed with its error still set ends the process.)
  std::string why = os.error().message();
  os.clear_error();
  return llvm::createStringError("cannot write '" + path + "': " + why);
}

llvm::Error writePlanFile(const plan::Plan &plan, llvm::StringRef path) {
  return writeFileBytes(path, encodePlan(plan));
}

llvm::Expected<plan::Plan> readPlanFile(llvm::StringRef path) {
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                         /*RequiresNullTerminator=*/false);
  if (!buf)
    return llvm::createStringError("cannot read '" + path +
                                   "': " + buf.getError().message());
  if (path.ends_with(".txt")) { // paxc --emit=plan-text, maybe edited
    plan::Plan plan;
    if (!google::protobuf::TextFormat::ParseFromString(
            (*buf)->getBuffer().str(), &plan))
      return llvm::createStringError(path + ": not a plan in protobuf text "
                                            "(paxc --emit=plan-text)");
    return plan;
  }
  return decodePlan((*buf)->getBuffer(), path);
}

} // namespace pax
