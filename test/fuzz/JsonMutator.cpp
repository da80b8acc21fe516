//===- JsonMutator.cpp - Mutations that keep JSON inputs JSON -------------===//
#include "test/fuzz/JsonMutator.h"

#include "codegen/plan/JsonValues.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace pax::fuzz {

namespace {

/// Every value of \p v, and every string and key in it.
void collect(llvm::json::Value &v, std::vector<llvm::json::Value *> &values,
             std::vector<std::string> &words) {
  values.push_back(&v);
  if (auto s = v.getAsString())
    words.push_back(s->str());
  if (auto *a = v.getAsArray())
    for (llvm::json::Value &e : *a)
      collect(e, values, words);
  if (auto *o = v.getAsObject())
    for (auto &kv : *o) {
      words.push_back(kv.first.str());
      collect(kv.second, values, words);
    }
}

/// \p o without \p key, rebuilt rather than erased from: a json::Object
/// copied after an erase copies the erased key's tombstone as a live key
/// (ObjectKey keeps its owned string when a tombstone is assigned over it).
void eraseKey(llvm::json::Object &o, llvm::StringRef key) {
  llvm::json::Object rest;
  for (auto &kv : o)
    if (llvm::StringRef(kv.first) != key)
      rest.try_emplace(kv.first, std::move(kv.second));
  o = std::move(rest);
}

/// One edit of \p v; false when there was nothing to do.
bool edit(llvm::json::Value &v, const llvm::json::Value &other,
          const std::vector<std::string> &words, std::mt19937 &rng) {
  auto pick = [&](size_t n) { return size_t(rng() % (n ? n : 1)); };
  auto word = [&]() {
    return words.empty() ? std::string("x") : words[pick(words.size())];
  };
  switch (rng() % 4) {
  case 0: // replaced by a copy of another value, or a plain one
    switch (rng() % 6) {
    case 0:
      v = other;
      return true;
    case 1:
      v = nullptr;
      return true;
    case 2:
      v = llvm::json::Array();
      return true;
    case 3:
      v = llvm::json::Object();
      return true;
    case 4:
      v = word();
      return true;
    default:
      v = bool(rng() % 2);
      return true;
    }
  default:
    break;
  }
  if (auto n = v.getAsNumber()) {
    static const double edges[] = {0,    1,          -1,          2,
                                   3,    7,          8,           16,
                                   0.5,  -0.5,       1e-30,       1e300,
                                   2147483648.0, 4294967296.0, 9.2233720368547758e18,
                                   -9.2233720368547758e18};
    double x = *n;
    switch (rng() % 4) {
    case 0:
      v = edges[pick(sizeof edges / sizeof *edges)];
      break;
    case 1:
      v = x + 1;
      break;
    case 2:
      v = x - 1;
      break;
    default:
      v = x * 2;
      break;
    }
    return true;
  }
  if (v.getAsString()) {
    v = word();
    return true;
  }
  if (auto *a = v.getAsArray()) {
    if (a->empty()) {
      a->push_back(other);
      return true;
    }
    size_t i = pick(a->size());
    switch (rng() % 4) {
    case 0: { // json::Array has no erase
      llvm::json::Array rest;
      for (size_t j = 0; j < a->size(); ++j)
        if (j != i)
          rest.push_back((*a)[j]);
      *a = std::move(rest);
      break;
    }
    case 1:
      a->push_back((*a)[i]);
      break;
    case 2: {
      size_t j = pick(a->size());
      if (i != j) // json::Value's self-move destroys it first
        std::swap((*a)[i], (*a)[j]);
      break;
    }
    default:
      a->push_back(other);
      break;
    }
    return true;
  }
  if (auto *o = v.getAsObject()) {
    std::vector<std::string> keys;
    for (auto &kv : *o)
      keys.push_back(kv.first.str());
    if (keys.empty()) {
      (*o)[word()] = other;
      return true;
    }
    std::string key = keys[pick(keys.size())];
    switch (rng() % 3) {
    case 0:
      eraseKey(*o, key);
      break;
    case 1: { // renamed
      llvm::json::Value moved = *o->get(key);
      eraseKey(*o, key);
      (*o)[word()] = std::move(moved);
      break;
    }
    default:
      (*o)[word()] = other;
      break;
    }
    return true;
  }
  return false;
}

} // namespace

size_t mutateJson(uint8_t *data, size_t size, size_t maxSize, unsigned seed,
                  ByteMutator bytes) {
  std::mt19937 rng(seed);
  // Now and then bytes anyway: the parser's own errors are worth reaching.
  if (rng() % 8 == 0)
    return bytes(data, size, maxSize);
  // (parseJson: LLVM's parser recurses once per nesting level.)
  auto doc = parseJson(
      llvm::StringRef(reinterpret_cast<const char *>(data), size));
  if (!doc) {
    llvm::consumeError(doc.takeError());
    return bytes(data, size, maxSize);
  }
  std::vector<llvm::json::Value *> values;
  std::vector<std::string> words;
  collect(*doc, values, words);
  // A few edits at once, each of a value of the document as it is then.
  unsigned edits = 1 + rng() % 3;
  for (unsigned e = 0; e < edits; ++e) {
    llvm::json::Value *target = values[rng() % values.size()];
    llvm::json::Value other = *values[rng() % values.size()];
    if (!edit(*target, other, words, rng))
      break;
    // The edit may have freed values below the target: collect again.
    values.clear();
    words.clear();
    collect(*doc, values, words);
  }
  std::string text = llvm::formatv("{0}", *doc).str();
  // Copies of subtrees grow a document fast, and a big one is slow to
  // run: at most twice the input or 8 KiB.
  if (text.size() > maxSize || text.size() > std::max<size_t>(2 * size, 8192))
    return bytes(data, size, maxSize);
  std::memcpy(data, text.data(), text.size());
  return text.size();
}

} // namespace pax::fuzz
