//===- JsonMutator.h - Mutations that keep JSON inputs JSON -----*- C++ -*-===//
//
// Byte-level mutation of a JSON file mostly breaks its syntax, so a
// harness behind a JSON parser (strategies, cost databases, clusters)
// spends its inputs on the parser. mutateJson edits the parsed document
// instead: a number becomes an edge value or its neighbour, a string one of
// the document's own strings or keys, an array loses, repeats or swaps an
// element, an object loses or renames a key, any value becomes a copy of
// another; inputs that do not parse get the byte mutator. A harness with
// it defines libFuzzer's LLVMFuzzerCustomMutator (PAX_FUZZ_JSON_MUTATOR).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <cstdint>

namespace pax::fuzz {

/// libFuzzer's own mutator (LLVMFuzzerMutate).
using ByteMutator = size_t (*)(uint8_t *data, size_t size, size_t maxSize);

/// Mutates the JSON text of \p data in place (at most \p maxSize bytes):
/// one edit of its parsed document chosen by \p seed, or \p bytes where
/// it does not parse or the edit would not fit. Returns the new size.
size_t mutateJson(uint8_t *data, size_t size, size_t maxSize, unsigned seed,
                  ByteMutator bytes);

} // namespace pax::fuzz

/// Defines libFuzzer's custom mutator as mutateJson, in a harness built
/// with libFuzzer (PAX_LIBFUZZER); nothing otherwise.
#if defined(PAX_LIBFUZZER)
#define PAX_FUZZ_JSON_MUTATOR                                                  \
  extern "C" size_t LLVMFuzzerMutate(uint8_t *, size_t, size_t);              \
  extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size,       \
                                            size_t maxSize, unsigned seed) {  \
    return pax::fuzz::mutateJson(data, size, maxSize, seed,                   \
                                 LLVMFuzzerMutate);                           \
  }
#else
#define PAX_FUZZ_JSON_MUTATOR
#endif
