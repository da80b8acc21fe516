//===- Order.cpp - Ops ordered by a key, dependences kept -----------------===//
#include "ir/Order.h"

#include <queue>

namespace pax {

std::vector<llvm::SmallVector<size_t, 4>> producersOf(const Func &f) {
  size_t n = f.ops.size();
  llvm::DenseMap<const Op *, size_t> index;
  for (size_t i = 0; i < n; ++i)
    index[f.ops[i].get()] = i;
  std::vector<llvm::SmallVector<size_t, 4>> out(n);
  for (size_t i = 0; i < n; ++i) {
    auto &producers = out[i];
    for (const Operand &o : f.ops[i]->operands)
      if (o.value->kind == Value::Kind::Result)
        if (auto it = index.find(o.value->def); it != index.end())
          producers.push_back(it->second);
    llvm::sort(producers);
    producers.erase(std::unique(producers.begin(), producers.end()),
                    producers.end());
  }
  return out;
}

void orderByKey(Func &f, llvm::ArrayRef<double> key) {
  size_t n = f.ops.size();
  auto producers = producersOf(f);
  std::vector<std::vector<size_t>> readers(n);
  std::vector<size_t> waiting(n, 0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t p : producers[i])
      readers[p].push_back(i);
    waiting[i] = producers[i].size();
  }
  using Entry = std::pair<double, size_t>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> ready;
  for (size_t i = 0; i < n; ++i)
    if (!waiting[i])
      ready.push({key[i], i});
  std::vector<std::unique_ptr<Op>> ordered;
  while (!ready.empty()) {
    size_t i = ready.top().second;
    ready.pop();
    for (size_t r : readers[i])
      if (!--waiting[r])
        ready.push({key[r], r});
    ordered.push_back(std::move(f.ops[i]));
  }
  f.ops = std::move(ordered);
}

} // namespace pax
