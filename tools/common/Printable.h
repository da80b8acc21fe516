//===- Printable.h - Messages safe to print -------------------*- C++ -*-===//
#pragma once

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/Twine.h"

#include <string>

namespace pax {

/// \p msg with its control characters and the bytes of no UTF-8 character
/// (names read from a file may hold any byte) written as \xNN, so an error
/// message never drives the terminal or garbles it; line breaks and tabs
/// stay.
inline std::string printable(const llvm::Twine &msg) {
  std::string in = msg.str(), out;
  auto escape = [&](unsigned char c) {
    out += "\\x";
    out += llvm::hexdigit(c >> 4, true);
    out += llvm::hexdigit(c & 15, true);
  };
  for (size_t i = 0; i < in.size();) {
    unsigned char c = in[i];
    if (c < 0x80) {
      if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f)
        escape(c);
      else
        out += char(c);
      ++i;
      continue;
    }
    // A UTF-8 sequence: its length from the lead byte, then continuations.
    size_t n = c >= 0xF0 && c < 0xF5 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
    bool ok = n && c < 0xF5 && i + n <= in.size();
    for (size_t k = 1; ok && k < n; ++k)
      ok = (static_cast<unsigned char>(in[i + k]) & 0xC0) == 0x80;
    if (ok) {
      out.append(in, i, n);
      i += n;
    } else {
      escape(c);
      ++i;
    }
  }
  return out;
}

} // namespace pax
