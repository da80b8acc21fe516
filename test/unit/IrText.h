//===- IrText.h - Printing, parsing and verifying modules in unit tests ---===//
#pragma once

#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

#include <gtest/gtest.h>

#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

namespace pax::test {

/// The `.pir` text of \p m.
inline std::string print(const Module &m) {
  std::string s;
  llvm::raw_string_ostream os(s);
  printModule(m, os);
  return s;
}

/// The first diagnostic of a parse.
struct Diag {
  std::string message;
  int line = 0;
  int column = 0;
};

/// Parses \p text; \p diag receives the first diagnostic, if any.
inline std::unique_ptr<Module> parse(llvm::StringRef text, Diag *diag = nullptr,
                                     OpLocations *locations = nullptr) {
  llvm::SourceMgr sm;
  Diag local;
  Diag *out = diag ? diag : &local;
  sm.setDiagHandler(
      [](const llvm::SMDiagnostic &d, void *ctx) {
        auto *dg = static_cast<Diag *>(ctx);
        if (dg->message.empty())
          *dg = {d.getMessage().str(), d.getLineNo(), d.getColumnNo()};
      },
      out);
  unsigned id = sm.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(text, "test.pir"), llvm::SMLoc());
  return parseModule(sm, id, locations);
}

/// Prints \p m, parses it, prints again: both texts must be equal.
inline std::string expectRoundTrip(const Module &m) {
  std::string first = print(m);
  Diag diag;
  auto parsed = parse(first, &diag);
  EXPECT_NE(parsed, nullptr) << diag.line << ": " << diag.message << "\n"
                             << first;
  if (!parsed)
    return first;
  EXPECT_EQ(print(*parsed), first);
  return first;
}

/// The messages the verifier reports for \p m.
inline std::vector<std::string> verify(const Module &m,
                                       std::vector<const Op *> *ops = nullptr) {
  std::vector<std::string> msgs;
  bool ok = verifyModule(m, [&](const Op *op, const llvm::Twine &msg) {
    msgs.push_back(msg.str());
    if (ops)
      ops->push_back(op);
  });
  EXPECT_EQ(ok, msgs.empty());
  return msgs;
}

/// Bytes of \p values stored as \p T.
template <typename T>
std::vector<uint8_t> raw(std::initializer_list<T> values) {
  std::vector<uint8_t> out(values.size() * sizeof(T));
  std::memcpy(out.data(), values.begin(), out.size());
  return out;
}

/// A module whose only content is the dense global @c of \p elem.
inline Module denseModule(DType elem, std::vector<uint8_t> bytes) {
  Module m;
  int64_t n = int64_t(bytes.size() / dtypeBytes(elem));
  Global *g = m.addGlobal("c", TensorType{elem, {n}});
  g->source = DataSource::Dense;
  g->bytes = std::move(bytes);
  m.main.returns = {&g->value};
  m.main.returnNames = {"c"};
  return m;
}

} // namespace pax::test
