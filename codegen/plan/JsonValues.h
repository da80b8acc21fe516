//===- JsonValues.h - Reading untrusted JSON files --------------*- C++ -*-===//
//
// paxc's readers of JSON files (strategies, clusters, cost databases) parse
// through parseJson and read integers through jsonInteger, not LLVM's own:
// llvm::json::parse recurses once per nesting level (a file of 100,000
// '[' overflows the stack), and llvm::json::Value::getAsInteger converts a
// double up to and including 2^63 (INT64_MAX as a double rounds to it),
// which is undefined.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/Support/JSON.h"

#include <cmath>
#include <cstdint>
#include <optional>

namespace pax {

/// The deepest nesting of arrays and objects a file may have.
inline constexpr int kMaxJsonDepth = 256;

/// \p text parsed as JSON, refused where its arrays and objects nest
/// deeper than kMaxJsonDepth.
inline llvm::Expected<llvm::json::Value> parseJson(llvm::StringRef text) {
  int depth = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (c == '\\')
        ++i; // the escaped character, a quote too
      else if (c == '"')
        inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth)
        return llvm::createStringError(
            "arrays and objects nested deeper than " +
            llvm::Twine(kMaxJsonDepth) + " levels (at byte " +
            llvm::Twine(uint64_t(i)) + ")");
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return llvm::json::parse(text);
}

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
