//===- JsonValues.h - Integers of untrusted JSON files ----------*- C++ -*-===//
//
// llvm::json::Value::getAsInteger converts a double up to and including
// 2^63 (INT64_MAX as a double rounds to it), which is undefined: paxc's
// readers of JSON files (strategies, clusters, cost databases) read their
// integers through jsonInteger instead.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/Support/JSON.h"

#include <cmath>
#include <cstdint>
#include <optional>

namespace pax {

/// \p v as an int64, when it is one: an integer literal, or a whole double
/// inside [-2^63, 2^63).
inline std::optional<int64_t> jsonInteger(const llvm::json::Value &v) {
  // A non-negative integer literal is held exactly (and refused past
  // INT64_MAX by getAsInteger).
  if (v.getAsUINT64())
    return v.getAsInteger();
  std::optional<double> d = v.getAsNumber();
  if (!d)
    return std::nullopt;
  double x = *d;
  if (!(x >= -9223372036854775808.0 && x < 9223372036854775808.0) ||
      x != std::trunc(x))
    return std::nullopt;
  return v.getAsInteger();
}

/// Field \p key of \p o as an int64 (jsonInteger), or nullopt.
inline std::optional<int64_t> jsonInteger(const llvm::json::Object &o,
                                          llvm::StringRef key) {
  const llvm::json::Value *v = o.get(key);
  return v ? jsonInteger(*v) : std::nullopt;
}

} // namespace pax
