//===- PlanFile.h - Reading and writing .paxplan files --------------------===//
//
// A plan file is a header and a protobuf:
//
//   "PAXPLAN\0"  8 bytes magic
//   version      u32 little-endian (kPlanVersion)
//   reserved     u32
//   length       u64, bytes of the protobuf that follows
//   checksum     u64, xxh3-64 of those bytes
//   payload      pax.plan.Plan
//
// so a truncated, foreign, older or corrupted file is recognized before
// anything of it is used.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/plan/Plan.pb.h"

#include "llvm/Support/Error.h"

#include <string>

namespace pax {

/// The plan format this paxc writes and reads.
inline constexpr uint32_t kPlanVersion = 4;

/// The bytes of a plan file for \p plan.
/// Bytes one element of \p dtype takes in a buffer (I1 takes a byte).
int64_t planDTypeBytes(plan::DType dtype);
/// Bytes of \p buf's elements (its shape and element type).
int64_t planBufferBytes(const plan::Buffer &buf);
/// True when buffers \p a and \p b of \p prog share arena bytes.
bool planBuffersShareBytes(const plan::DeviceProgram &prog, uint32_t a,
                           uint32_t b);

std::string encodePlan(const plan::Plan &plan);

/// Decodes a plan file; errors name \p origin and say what is wrong.
llvm::Expected<plan::Plan> decodePlan(llvm::StringRef bytes,
                                      llvm::StringRef origin);

/// Writes \p bytes to \p path (binary; text with \p text); an error where
/// the file cannot be opened or written whole (a full disk).
llvm::Error writeFileBytes(llvm::StringRef path, llvm::StringRef bytes,
                           bool text = false);

/// Writes \p plan to \p path.
llvm::Error writePlanFile(const plan::Plan &plan, llvm::StringRef path);

/// Reads the plan at \p path: a plan file, or (a path ending in .txt) the
/// protobuf text paxc --emit=plan-text writes.
llvm::Expected<plan::Plan> readPlanFile(llvm::StringRef path);

} // namespace pax
