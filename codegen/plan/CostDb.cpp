//===- CostDb.cpp - Measured op costs: the cost database file -------------===//
#include "codegen/plan/CostDb.h"

#include "codegen/plan/JsonValues.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>

namespace pax {

static constexpr const char *kFormat = "paxc-cost-db";
static constexpr int64_t kVersion = 1;

std::optional<double> CostDb::seconds(llvm::StringRef key) const {
  auto it = ops.find(key);
  if (it == ops.end())
    return std::nullopt;
  return it->second.seconds;
}

/// The error \p msg about the cost database from \p origin.
static llvm::Error costDbError(llvm::StringRef origin, const llvm::Twine &msg) {
  return llvm::createStringError(origin + ": " + msg);
}

/// Checks the top object's "format" and "version".
static llvm::Error checkFormat(const llvm::json::Object &top,
                               llvm::StringRef origin) {
  auto format = top.getString("format");
  if (!format || *format != kFormat)
    return costDbError(origin, "not a cost database (\"format\" must be \"" +
                                   llvm::Twine(kFormat) + "\")");
  auto version = jsonInteger(top, "version");
  if (!version || *version != kVersion)
    return costDbError(
        origin, "cost database version " +
                    (version ? std::to_string(*version) : "(missing)") +
                    "; this paxc reads version " + std::to_string(kVersion));
  return llvm::Error::success();
}

/// Reads where the costs were measured: "backend", "threads" and "runs".
static llvm::Error readMachine(const llvm::json::Object &top, CostDb &db,
                               llvm::StringRef origin) {
  if (auto b = top.getString("backend"))
    db.backend = b->str();
  for (auto [field, out] :
       {std::pair{"threads", &db.threads}, std::pair{"runs", &db.runs}}) {
    if (!top.get(field))
      continue;
    auto v = jsonInteger(top, field);
    if (!v || *v < 0 || *v > 1 << 20)
      return costDbError(origin, "\"" + llvm::Twine(field) +
                                     "\" must be a non-negative integer");
    *out = unsigned(*v);
  }
  return llvm::Error::success();
}

/// Reads the entry \p value (named \p where in errors) into \p db.
static llvm::Error readEntry(const llvm::json::Value &value,
                             const std::string &where, CostDb &db,
                             llvm::StringRef origin) {
  const llvm::json::Object *e = value.getAsObject();
  if (!e)
    return costDbError(origin, where + ": expected an object");
  auto key = e->getString("key");
  if (!key || key->empty())
    return costDbError(origin, where + ": \"key\" must be a non-empty string");
  auto seconds = e->getNumber("seconds");
  if (!seconds || !std::isfinite(*seconds) || *seconds < 0)
    return costDbError(origin, where + ": \"seconds\" must be a finite, "
                                       "non-negative number");
  CostDb::Entry entry{"", *seconds, 1};
  if (auto op = e->getString("op"))
    entry.op = op->str();
  if (e->get("calls")) {
    auto calls = jsonInteger(*e, "calls");
    if (!calls || *calls < 1)
      return costDbError(origin,
                         where + ": \"calls\" must be a positive integer");
    entry.calls = *calls;
  }
  if (!db.ops.try_emplace(*key, std::move(entry)).second)
    return costDbError(origin, where + ": key '" + *key + "' appears twice");
  return llvm::Error::success();
}

llvm::Expected<CostDb> parseCostDb(llvm::StringRef text,
                                   llvm::StringRef origin) {
  auto json = parseJson(text);
  if (!json)
    return costDbError(origin, "not JSON: " + llvm::toString(json.takeError()));
  const llvm::json::Object *top = json->getAsObject();
  if (!top)
    return costDbError(origin, "expected a JSON object");
  if (llvm::Error err = checkFormat(*top, origin))
    return err;
  CostDb db;
  if (llvm::Error err = readMachine(*top, db, origin))
    return err;
  const llvm::json::Array *ops = top->getArray("ops");
  if (!ops)
    return costDbError(origin, "\"ops\" must be an array");
  for (size_t i = 0; i < ops->size(); ++i) {
    std::string where = "ops[" + std::to_string(i) + "]";
    if (llvm::Error err = readEntry((*ops)[i], where, db, origin))
      return err;
  }
  return db;
}

llvm::Expected<CostDb> readCostDb(llvm::StringRef path) {
  auto text = llvm::MemoryBuffer::getFile(path);
  if (!text)
    return llvm::createStringError("cannot read '" + path +
                                   "': " + text.getError().message());
  return parseCostDb((*text)->getBuffer(), path);
}

llvm::json::Value costDbToJson(const CostDb &db) {
  std::vector<llvm::StringRef> keys;
  for (const auto &e : db.ops)
    keys.push_back(e.getKey());
  llvm::sort(keys);
  llvm::json::Array ops;
  for (llvm::StringRef k : keys) {
    const CostDb::Entry &e = db.ops.find(k)->second;
    ops.push_back(llvm::json::Object{
        {"key", k}, {"op", e.op}, {"seconds", e.seconds}, {"calls", e.calls}});
  }
  return llvm::json::Object{
      {"format", kFormat},        {"version", kVersion},
      {"backend", db.backend},    {"threads", int64_t(db.threads)},
      {"runs", int64_t(db.runs)}, {"ops", std::move(ops)}};
}

} // namespace pax
