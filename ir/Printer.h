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

/// Whether attribute \p key says where or when an op runs, or where it
/// came from, rather than what it computes: its source names, configuration,
/// device offset, pipeline stage, microbatch, pass, recomputation, the
/// parameter an update writes or a gradient is of, a kernel fusion's name.
bool isPlacementAttr(llvm::StringRef key);

/// What one device computes of \p op when its iteration dims have the local
/// extents \p local: the kind, the dims (kind and local extent), every
/// access map with its tensor's type, and the attributes that change the
/// computation (not the placement attributes: isPlacementAttr).
/// Equal signatures compute the same block the same way, whichever layer,
/// microbatch, stage or configuration they come from: measured costs are
/// keyed by it.
std::string opBlockSignature(const Op &op, llvm::ArrayRef<int64_t> local);

/// A short key of opBlockSignature: 16 hex digits of its 64-bit hash.
std::string opBlockKey(const Op &op, llvm::ArrayRef<int64_t> local);

/// The local extents of \p op split by \p factors (one per iteration dim;
/// each must divide its extent).
llvm::SmallVector<int64_t, 6> localExtents(const Op &op,
                                           llvm::ArrayRef<int64_t> factors);

} // namespace pax
