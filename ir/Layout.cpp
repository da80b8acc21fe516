//===- Layout.cpp - Layouts and device groups as IR attributes ------------===//
#include "ir/Layout.h"

#include "llvm/ADT/STLExtras.h"

#include <map>

namespace pax {

int64_t LayoutAttr::devices() const {
  int64_t n = 1;
  for (const Digit &g : digits)
    n *= g.size;
  return n;
}

llvm::Expected<Block> LayoutAttr::block(llvm::ArrayRef<int64_t> shape,
                                        int64_t d) const {
  Block b;
  b.lo.assign(shape.size(), 0);
  b.size.assign(shape.begin(), shape.end());
  if (d >= devices()) {
    b.held = false;
    return b;
  }
  auto value = [&](size_t p) { // digit p of device d
    int64_t v = d;
    for (size_t i = 0; i < p; ++i)
      v /= digits[i].size;
    return v % digits[p].size;
  };
  for (size_t i = 0; i < shape.size(); ++i) {
    // The dim's digits, deepest level (least significant) first.
    std::vector<std::pair<int, size_t>> on;
    for (size_t p = 0; p < digits.size(); ++p)
      if (digits[p].role == Digit::Role::Split && digits[p].tensorDim == int(i))
        on.push_back({digits[p].level, p});
    llvm::sort(on, [](auto x, auto y) { return x.first > y.first; });
    int64_t idx = 0, parts = 1;
    for (auto [level, p] : on) {
      idx += value(p) * parts;
      parts *= digits[p].size;
    }
    if (shape[i] % parts)
      return llvm::createStringError(
          std::to_string(parts) + " blocks do not divide dim " +
          std::to_string(i) + " of size " + std::to_string(shape[i]));
    b.size[i] = shape[i] / parts;
    b.lo[i] = idx * b.size[i];
  }
  return b;
}

llvm::Expected<TensorSharding> shardingOf(const LayoutAttr &l,
                                          llvm::ArrayRef<int64_t> shape) {
  TensorSharding s;
  std::vector<int64_t> parts(shape.size(), 1);
  for (const Digit &g : l.digits)
    if (g.role == Digit::Role::Split && g.tensorDim >= 0 &&
        size_t(g.tensorDim) < shape.size())
      parts[size_t(g.tensorDim)] *= g.size;
  int64_t shards = 1;
  for (size_t i = 0; i < shape.size(); ++i)
    if (parts[i] > 1) {
      s.dims.push_back({int(i), shape[i], parts[i]});
      shards *= parts[i];
    }
  s.devices.resize(size_t(shards));
  for (int64_t d = 0; d < l.devices(); ++d) {
    auto b = l.block(shape, d);
    if (!b)
      return b.takeError();
    int64_t index = 0;
    for (const TensorSharding::Dim &dim : s.dims)
      index = index * dim.shards +
              b->lo[size_t(dim.axis)] / (dim.extent / dim.shards);
    s.devices[size_t(index)].push_back(d);
  }
  return s;
}

int64_t GroupsAttr::devices() const {
  int64_t n = 1;
  for (int64_t s : space)
    n *= s;
  return n;
}

int64_t GroupsAttr::digit(int64_t d, size_t i) const {
  for (size_t j = 0; j < i; ++j)
    d /= space[j];
  return d % space[i];
}

std::vector<std::vector<int64_t>> GroupsAttr::groups() const {
  // A group's key: the device id with its `over` digits zeroed.
  std::map<int64_t, std::vector<int64_t>> members;
  int64_t n = devices();
  for (int64_t d = 0; d < n; ++d) {
    int64_t key = d, place = 1;
    for (size_t i = 0; i < space.size(); ++i) {
      if (llvm::is_contained(over, int64_t(i)))
        key -= digit(d, i) * place;
      place *= space[i];
    }
    members[key].push_back(d);
  }
  std::vector<std::vector<int64_t>> out;
  for (auto &[key, devs] : members)
    out.push_back(std::move(devs));
  llvm::sort(out, [](const auto &a, const auto &b) { return a[0] < b[0]; });
  return out;
}

std::string GroupsAttr::check() const {
  if (space.empty())
    return "an empty device space";
  for (int64_t s : space)
    if (s < 1)
      return "a device space digit of size " + std::to_string(s);
  for (int64_t o : over)
    if (o < 0 || o >= int64_t(space.size()))
      return "digit " + std::to_string(o) + " is outside the device space of " +
             std::to_string(space.size()) + " digits";
  return "";
}

static std::string formatInts(llvm::ArrayRef<int64_t> l) {
  std::string s = "[";
  for (size_t i = 0; i < l.size(); ++i)
    s += (i ? ", " : "") + std::to_string(l[i]);
  return s + "]";
}

std::string formatLayout(const LayoutAttr &l) {
  std::string s = "layout[";
  for (size_t i = 0; i < l.digits.size(); ++i) {
    const Digit &d = l.digits[i];
    s += (i ? ", " : "") + std::to_string(d.size) + " ";
    switch (d.role) {
    case Digit::Role::Replicated:
      s += "rep";
      break;
    case Digit::Role::Partial:
      s += "partial";
      break;
    case Digit::Role::Split:
      s += "dim(" + std::to_string(d.tensorDim) + ", " +
           std::to_string(d.level) + ")";
      break;
    }
  }
  return s + "]";
}

std::string formatGroups(const GroupsAttr &g) {
  return "groups[space " + formatInts(g.space) + ", over " +
         formatInts(g.over) + "]";
}

} // namespace pax
