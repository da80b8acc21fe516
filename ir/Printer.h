//===- Printer.h - Deterministic text form of the paxc IR -----------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/Support/raw_ostream.h"

namespace pax {

/// Prints \p m as `.pir` text. Op results are renumbered in order, attributes
/// are sorted: equal modules print identically.
void printModule(const Module &m, llvm::raw_ostream &os);

/// Shortest text that reads back as exactly \p v, always with a '.' or an
/// exponent so that it never reads back as an integer ("1.0", "1e-05").
std::string formatFloat(float v);
std::string formatDouble(double v);

/// \p name as an identifier: bare when it is `[A-Za-z_][A-Za-z0-9_.$]*`,
/// otherwise quoted with escapes.
std::string formatIdent(llvm::StringRef name);

/// A quoted, escaped string literal.
std::string formatString(llvm::StringRef s);

/// The text of an attribute value.
std::string formatAttr(const AttrValue &v);

} // namespace pax
