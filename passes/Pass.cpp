//===- Pass.cpp - Pass options, registry and pipeline parsing -------------===//
#include "passes/Pass.h"

#include "passes/BasicPasses.h"
#include "passes/autodiff/Autodiff.h"
#include "passes/sharding/InsertCollectives.h"
#include "passes/sharding/ShardingPasses.h"

#include "llvm/ADT/StringExtras.h"

namespace pax {

llvm::Expected<PassOptions> PassOptions::parse(llvm::StringRef pass,
                                               llvm::StringRef text) {
  PassOptions opts;
  llvm::SmallVector<llvm::StringRef, 4> items;
  text.split(items, ' ', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef item : items) {
    auto [key, value] = item.split('=');
    if (key.empty() || value.empty() || !item.contains('='))
      return llvm::createStringError("pass '" + pass + "': option '" + item +
                                     "' is not key=value");
    opts.values[key.str()] = value.str();
  }
  return opts;
}

llvm::Error
PassOptions::checkKnown(llvm::StringRef pass,
                        llvm::ArrayRef<llvm::StringRef> known) const {
  for (const auto &[key, value] : values)
    if (!llvm::is_contained(known, key))
      return llvm::createStringError("pass '" + pass + "' has no option '" +
                                     key + "'");
  return llvm::Error::success();
}

std::string PassOptions::get(llvm::StringRef key, llvm::StringRef dflt) const {
  auto it = values.find(key);
  return it == values.end() ? dflt.str() : it->second;
}

template <typename T>
static llvm::Expected<std::unique_ptr<Pass>> createPass(const PassOptions &o) {
  return T::create(o);
}

static const PassInfo kPasses[] = {
#define PAX_PASS(Argument, Class, Description)                                 \
  {Argument, Description, &createPass<Class>},
#include "passes/Passes.def"
};

llvm::ArrayRef<PassInfo> registeredPasses() { return kPasses; }

llvm::Expected<std::vector<std::unique_ptr<Pass>>>
parsePipeline(llvm::StringRef text) {
  std::vector<std::unique_ptr<Pass>> passes;
  while (!(text = text.ltrim(" ,")).empty()) {
    size_t end = text.find_first_of(",{");
    llvm::StringRef name = text.substr(0, end).trim();
    llvm::StringRef opts;
    text = end == llvm::StringRef::npos ? "" : text.substr(end);
    if (text.starts_with("{")) {
      size_t close = text.find('}');
      if (close == llvm::StringRef::npos)
        return llvm::createStringError("pass '" + name +
                                       "': missing '}' after its options");
      opts = text.substr(1, close - 1);
      text = text.substr(close + 1);
    }
    const PassInfo *info = nullptr;
    for (const PassInfo &p : kPasses)
      if (name == p.argument)
        info = &p;
    if (!info)
      return llvm::createStringError("unknown pass '" + name +
                                     "' (paxc-opt --list-passes lists them)");
    auto parsed = PassOptions::parse(name, opts);
    if (!parsed)
      return parsed.takeError();
    auto pass = info->create(*parsed);
    if (!pass)
      return pass.takeError();
    passes.push_back(std::move(*pass));
  }
  return passes;
}

} // namespace pax
