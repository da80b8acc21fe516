//===- IterationSpace.cpp - Loop nests and access maps of a compute -------===//
#include "runtime/IterationSpace.h"

#include <algorithm>

namespace pax::runtime {

IterationSpace IterationSpace::of(const plan::Compute &c) {
  IterationSpace s;
  llvm::SmallVector<bool, 8> isLookup(c.iters_size(), false);
  auto mark = [&](const plan::Access &a) {
    for (const plan::AccessExpr &e : a.exprs())
      if (e.kind() == plan::AccessExpr::LOOKUP && e.dims_size() == 1 &&
          e.dims(0) < isLookup.size())
        isLookup[e.dims(0)] = true;
  };
  for (const plan::Access &a : c.inputs())
    mark(a);
  for (const plan::Access &a : c.outputs()) // scatter_add's result
    mark(a);
  // A replica dim (no access uses it) is walked once: its points repeat.
  llvm::SmallVector<bool, 8> used(c.iters_size(), false);
  auto use = [&](const plan::Access &a) {
    for (const plan::AccessExpr &e : a.exprs())
      for (uint32_t d : e.dims())
        if (d < used.size())
          used[d] = true;
  };
  for (const plan::Access &a : c.inputs())
    use(a);
  for (const plan::Access &a : c.outputs())
    use(a);
  for (int d = 0; d < c.iters_size(); ++d) {
    const plan::IterDim &it = c.iters(d);
    bool once = isLookup[d] || !used[d];
    s.extents.push_back(once ? 1 : std::max<int64_t>(it.extent(), 0));
    s.globalOffsets.push_back(it.global_offset());
    s.globalExtents.push_back(it.global_extent() > 0 ? it.global_extent()
                                                     : it.extent());
    if (once)
      continue;
    bool isInner = it.kind() != plan::IterDim::PAR;
    (isInner ? s.inner : s.outer).push_back(unsigned(d));
    (isInner ? s.innerPoints : s.outerPoints) *= s.extents.back();
  }
  return s;
}

void IterationSpace::setOuter(int64_t flat,
                              llvm::MutableArrayRef<int64_t> point) const {
  for (size_t i = outer.size(); i-- > 0;) {
    int64_t e = extents[outer[i]];
    point[outer[i]] = flat % e;
    flat /= e;
  }
}

void IterationSpace::nextOuter(llvm::MutableArrayRef<int64_t> point) const {
  for (size_t i = outer.size(); i-- > 0;) {
    if (++point[outer[i]] < extents[outer[i]])
      return;
    point[outer[i]] = 0;
  }
}

bool IterationSpace::nextInner(llvm::MutableArrayRef<int64_t> point) const {
  for (size_t i = inner.size(); i-- > 0;) {
    if (++point[inner[i]] < extents[inner[i]])
      return true;
    point[inner[i]] = 0;
  }
  return false;
}

flat::Space IterationSpace::flatten() const {
  flat::Space f;
  f.rank = int32_t(std::min<size_t>(extents.size(), flat::kMaxDims));
  for (int32_t d = 0; d < f.rank; ++d) {
    f.extents[d] = extents[size_t(d)];
    f.globalOffsets[d] = globalOffsets[size_t(d)];
    f.globalExtents[d] = globalExtents[size_t(d)];
  }
  for (unsigned d : outer)
    if (d < unsigned(f.rank))
      f.outer[f.outerCount++] = d;
  for (unsigned d : inner)
    if (d < unsigned(f.rank))
      f.inner[f.innerCount++] = d;
  f.outerPoints = outerPoints;
  f.innerPoints = innerPoints;
  flat::setDividers(f);
  return f;
}

/// Reads one access expression into \p t; an error message when it is not
/// one the generic kernel can walk.
static std::string
compileExpr(const plan::Compute &c, const plan::AccessExpr &e,
            bool fullFromZero, llvm::SmallVectorImpl<bool> &used,
            int64_t &offset,
            llvm::SmallVectorImpl<std::pair<unsigned, int64_t>> &coefs) {
  for (unsigned d : e.dims())
    if (d >= unsigned(c.iters_size()))
      return "names iteration dim " + std::to_string(d) + " of " +
             std::to_string(c.iters_size());
  switch (e.kind()) {
  case plan::AccessExpr::BROADCAST:
    return "";
  case plan::AccessExpr::FULL:
    if (fullFromZero)
      return "";
    return "has a full access '*', which the generic kernel cannot walk";
  case plan::AccessExpr::AFFINE:
    if (e.dims_size() < 1 || e.dims_size() > 2)
      return "has an affine access over " + std::to_string(e.dims_size()) +
             " dims";
    coefs.push_back({e.dims(0), e.stride()});
    if (e.dims_size() == 2)
      coefs.push_back({e.dims(1), e.dilation()});
    offset = e.offset();
    break;
  case plan::AccessExpr::GROUP: {
    if (e.dims_size() < 1)
      return "has an empty group access";
    if (e.whole() > 1 && !fullFromZero)
      return "has a group reading a dim whole '*" + std::to_string(e.whole()) +
             "', which the generic kernel cannot walk";
    int64_t scale = std::max<int64_t>(1, e.whole());
    for (int i = e.dims_size() - 1; i >= 0; --i) {
      coefs.push_back({e.dims(i), scale});
      scale *= c.iters(int(e.dims(i))).extent();
    }
    offset = e.offset();
    break;
  }
  case plan::AccessExpr::LOOKUP:
    if (e.dims_size() != 1)
      return "has a lookup over " + std::to_string(e.dims_size()) + " dims";
    break;
  default:
    return "has an unknown access kind " + std::to_string(int(e.kind()));
  }
  for (auto [d, k] : coefs)
    used[d] = true;
  return "";
}

/// The error compiling the map of \p what, an operand of \p c: \p msg
/// after the compute's name and kind and \p what.
static llvm::Error accessError(const plan::Compute &c, const llvm::Twine &what,
                               const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "compute '" + c.name() + "' (" + c.kind() +
                                     "): " + what + " " + msg);
}

/// An error when \p access does not have one expression per dim of
/// \p shape, or \p space or \p shape has more dims than kernels walk.
static llvm::Error checkSizes(const plan::Compute &c,
                              const plan::Access &access,
                              llvm::ArrayRef<int64_t> shape,
                              const IterationSpace &space,
                              const llvm::Twine &what) {
  auto fail = [&](const llvm::Twine &msg) { return accessError(c, what, msg); };
  if (size_t(access.exprs_size()) != shape.size())
    return fail("has " + llvm::Twine(access.exprs_size()) +
                " access exprs for a tensor of rank " +
                llvm::Twine(shape.size()));
  size_t n = space.extents.size();
  if (n > size_t(flat::kMaxDims))
    return fail("is over " + llvm::Twine(n) + " iteration dims; kernels walk " +
                llvm::Twine(flat::kMaxDims) + " at most");
  if (shape.size() > size_t(flat::kMaxRank))
    return fail("has rank " + llvm::Twine(shape.size()) +
                "; kernels address tensors of rank " +
                llvm::Twine(flat::kMaxRank) + " at most");
  return llvm::Error::success();
}

llvm::Expected<AccessIndexer>
AccessIndexer::compile(const plan::Compute &c, const plan::Access &access,
                       llvm::ArrayRef<int64_t> shape,
                       const IterationSpace &space, const llvm::Twine &what,
                       bool fullFromZero) {
  if (llvm::Error err = checkSizes(c, access, shape, space, what))
    return err;
  size_t n = space.extents.size();
  AccessIndexer a;
  a.coef.assign(n, 0);
  a.usedDims.assign(n, false);
  a.map.rank = int32_t(shape.size());
  int64_t stride = 1;
  bool inRange = true;
  for (size_t i = shape.size(); i-- > 0;) {
    const plan::AccessExpr &e = access.exprs(int(i));
    flat::Term &t = a.map.terms[i];
    t.size = shape[i];
    t.stride = stride;
    stride *= shape[i];
    if (llvm::Error err =
            a.compileTerm(c, e, space, what, fullFromZero, t, inRange))
      return err;
  }
  a.linear = inRange && a.lookups == 0;
  a.finishFlatMap(n);
  return a;
}

llvm::Error
AccessIndexer::compileTerm(const plan::Compute &c, const plan::AccessExpr &e,
                           const IterationSpace &space, const llvm::Twine &what,
                           bool fullFromZero, flat::Term &t, bool &inRange) {
  llvm::SmallVector<std::pair<unsigned, int64_t>, 2> coefs;
  std::string err = compileExpr(c, e, fullFromZero, usedDims, t.offset, coefs);
  if (!err.empty())
    return accessError(c, what, err);
  if (coefs.size() > size_t(flat::kMaxCoefs))
    return accessError(c, what,
                       "combines " + llvm::Twine(coefs.size()) +
                           " iteration dims in one tensor dim; kernels take " +
                           llvm::Twine(flat::kMaxCoefs) + " at most");
  for (auto [d, k] : coefs) {
    t.dims[t.coefCount] = d;
    t.coefs[t.coefCount++] = k;
  }
  if (e.kind() == plan::AccessExpr::LOOKUP) {
    t.lookupSlot = 0; // numbered in dim order below
    ++lookups;
    t.lookupOffset = space.globalOffsets[e.dims(0)];
    t.lookupExtent = space.globalExtents[e.dims(0)];
    return llvm::Error::success();
  }
  for (auto [d, k] : coefs)
    coef[d] += k * t.stride;
  base += t.offset * t.stride;
  // The index's range over the whole space decides the fast path.
  inRange &= termInRange(t, e, coefs, space);
  return llvm::Error::success();
}

bool AccessIndexer::termInRange(
    const flat::Term &t, const plan::AccessExpr &e,
    llvm::ArrayRef<std::pair<unsigned, int64_t>> coefs,
    const IterationSpace &space) {
  int64_t lo = t.offset, hi = t.offset;
  if (e.kind() == plan::AccessExpr::GROUP && e.whole() > 1)
    hi += e.whole() - 1; // read whole from the group's index
  for (auto [d, k] : coefs) {
    int64_t span = k * (space.extents[d] - 1);
    lo += std::min<int64_t>(0, span);
    hi += std::max<int64_t>(0, span);
  }
  return lo >= 0 && hi < t.size;
}

void AccessIndexer::finishFlatMap(size_t dims) {
  int slot = 0;
  for (int32_t i = 0; i < map.rank; ++i)
    if (map.terms[i].lookupSlot >= 0)
      map.terms[i].lookupSlot = slot++;
  map.lookups = int32_t(lookups);
  map.linear = linear;
  map.base = base;
  for (size_t d = 0; d < dims; ++d) {
    map.coef[d] = coef[d];
    if (coef[d]) {
      map.stepDims[map.steps] = uint32_t(d);
      map.stepCoefs[map.steps++] = coef[d];
    }
  }
}

std::optional<llvm::SmallVector<std::pair<int64_t, int64_t>, 8>>
AccessIndexer::inRangeBox(const IterationSpace &space) const {
  llvm::SmallVector<std::pair<int64_t, int64_t>, 8> box;
  for (int64_t e : space.extents)
    box.push_back({0, e});
  if (linear)
    return box;
  if (lookups)
    return std::nullopt;
  auto floorDiv = [](int64_t a, int64_t b) { // b > 0
    return a >= 0 ? a / b : -((-a + b - 1) / b);
  };
  for (int32_t i = 0; i < map.rank; ++i) {
    const flat::Term &t = map.terms[i];
    int64_t lo = t.offset, hi = t.offset;
    for (int32_t j = 0; j < t.coefCount; ++j) {
      int64_t span = t.coefs[j] * (space.extents[t.dims[j]] - 1);
      lo += std::min<int64_t>(0, span);
      hi += std::max<int64_t>(0, span);
    }
    if (lo >= 0 && hi < t.size)
      continue; // inside wherever the space reaches
    if (t.coefCount != 1 || t.coefs[0] == 0) {
      if (t.coefCount != 0)
        return std::nullopt; // a window or group partly outside
      box[0] = {0, 0};       // a constant index outside: nowhere
      continue;
    }
    // offset + k x in [0, size).
    unsigned d = t.dims[0];
    int64_t k = t.coefs[0];
    int64_t first, end;
    if (k > 0) {
      first = -floorDiv(t.offset, k);
      end = floorDiv(t.size - 1 - t.offset, k) + 1;
    } else {
      first = floorDiv(t.offset - t.size, -k) + 1;
      end = floorDiv(t.offset, -k) + 1;
    }
    box[d].first = std::max(box[d].first, first);
    box[d].second = std::min(box[d].second, end);
  }
  return box;
}

std::optional<std::pair<int64_t, int64_t>>
AccessIndexer::lookupOutOfRange(llvm::ArrayRef<int64_t> lookupValues) const {
  for (int32_t i = 0; i < map.rank; ++i) {
    const flat::Term &t = map.terms[i];
    if (t.lookupSlot < 0 || size_t(t.lookupSlot) >= lookupValues.size())
      continue;
    int64_t v = lookupValues[size_t(t.lookupSlot)];
    if (v < -t.lookupExtent || v >= t.lookupExtent)
      return std::make_pair(v, t.lookupExtent);
  }
  return std::nullopt;
}

} // namespace pax::runtime
