//===- DataDependent.cpp - Ops whose output shape depends on values -------===//
//
// NonZero, Unique and NonMaxSuppression: how many elements they write
// depends on their inputs' values, which a static plan cannot hold. Where
// those inputs are constant (folded, initializers, or bound by the user
// with --bind) they are evaluated while importing, as ONNX defines them;
// otherwise the input is an error naming the node ("must be a constant").
//
//===----------------------------------------------------------------------===//
#include "frontend/OnnxOps.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <vector>

namespace pax {
namespace {

/// Every input of \p ctx's node that its outputs' shape depends on, as
/// constants (\p names: what each is called in errors); absent optional
/// inputs are null.
llvm::Expected<std::vector<const ConstTensor *>>
constantInputs(NodeContext &ctx, llvm::ArrayRef<const char *> names) {
  std::vector<const ConstTensor *> out;
  for (unsigned i = 0; i < names.size(); ++i) {
    if (!ctx.hasInput(i)) {
      out.push_back(nullptr);
      continue;
    }
    auto c = ctx.requireConstant(i, names[i]);
    if (!c)
      return c.takeError();
    out.push_back(*c);
  }
  return out;
}

llvm::Error emptyResult(NodeContext &ctx) {
  return ctx.error("its result is empty for these values (paxc does not "
                   "support empty tensors)");
}

} // namespace

/// NonZero: the indices of the nonzero elements, one row per dim, in
/// row-major order.
llvm::Error importNonZero(NodeContext &ctx) {
  auto in = constantInputs(ctx, {"X"});
  if (!in)
    return in.takeError();
  const ConstTensor &x = *(*in)[0];
  llvm::ArrayRef<int64_t> shape = x.type.shape;
  std::vector<int64_t> hits;
  for (int64_t i = 0; i < x.numel(); ++i)
    if (x.real(i) != 0)
      hits.push_back(i);
  if (hits.empty())
    return emptyResult(ctx);
  size_t rank = std::max<size_t>(1, shape.size()), n = hits.size();
  std::vector<int64_t> out(rank * n);
  for (size_t k = 0; k < n; ++k) {
    int64_t rest = hits[k];
    for (size_t d = shape.size(); d-- > 0;) {
      out[d * n + k] = rest % shape[d];
      rest /= shape[d];
    }
  }
  ctx.setConstant(
      0, ConstTensor::ofInts(DType::I64, {int64_t(rank), int64_t(n)}, out));
  return llvm::Error::success();
}

namespace {

/// Unique's slices of \p x along \p axis (each element without an axis),
/// as rows of doubles.
std::vector<std::vector<double>> slicesOf(const ConstTensor &x,
                                          std::optional<unsigned> axis) {
  llvm::ArrayRef<int64_t> s = x.type.shape;
  int64_t count = axis ? s[*axis] : x.numel();
  int64_t inner = 1;
  for (size_t d = axis ? *axis + 1 : s.size(); d < s.size(); ++d)
    inner *= s[d];
  int64_t outer = count ? x.numel() / (count * inner) : 0;
  std::vector<std::vector<double>> rows(static_cast<size_t>(count));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < count; ++k)
      for (int64_t i = 0; i < inner; ++i)
        rows[size_t(k)].push_back(x.real((o * count + k) * inner + i));
  return rows;
}

/// Writes Unique's outputs from the distinct rows \p order (indices of
/// first occurrences, in output order) of \p rows.
void setUnique(NodeContext &ctx, const ConstTensor &x,
               std::optional<unsigned> axis,
               const std::vector<std::vector<double>> &rows,
               const std::vector<int64_t> &order) {
  std::map<std::vector<double>, int64_t> at;
  for (size_t j = 0; j < order.size(); ++j)
    at[rows[size_t(order[j])]] = int64_t(j);
  std::vector<int64_t> inverse, counts(order.size(), 0);
  for (const auto &r : rows) {
    inverse.push_back(at[r]);
    ++counts[size_t(at[r])];
  }
  TensorType yt = x.type;
  int64_t u = int64_t(order.size());
  if (axis)
    yt.shape[*axis] = u;
  else
    yt.shape = {u};
  ConstTensor y = ConstTensor::zeros(yt);
  // Rows interleave along the axis: write Y slice by slice.
  int64_t inner = int64_t(rows.empty() ? 0 : rows[0].size());
  llvm::ArrayRef<int64_t> s = x.type.shape;
  int64_t tail = 1;
  for (size_t d = axis ? *axis + 1 : s.size(); d < s.size(); ++d)
    tail *= s[d];
  for (int64_t j = 0; j < u; ++j)
    for (int64_t e = 0; e < inner; ++e) {
      int64_t o = e / tail, i = e % tail;
      y.set((o * u + j) * tail + i, rows[size_t(order[size_t(j)])][size_t(e)]);
    }
  ctx.setConstant(0, std::move(y));
  if (ctx.numOutputs() > 1)
    ctx.setConstant(1, ConstTensor::ofInts(DType::I64, {u}, order));
  if (ctx.numOutputs() > 2)
    ctx.setConstant(
        2, ConstTensor::ofInts(DType::I64, {int64_t(inverse.size())}, inverse));
  if (ctx.numOutputs() > 3)
    ctx.setConstant(3, ConstTensor::ofInts(DType::I64, {u}, counts));
}

} // namespace

/// Unique: the distinct elements (or slices along `axis`), sorted or in
/// order of first occurrence, their first indices, each input's index in
/// them and their counts.
llvm::Error importUnique(NodeContext &ctx) {
  auto in = constantInputs(ctx, {"X"});
  if (!in)
    return in.takeError();
  const ConstTensor &x = *(*in)[0];
  std::optional<unsigned> axis;
  if (ctx.attr("axis")) {
    auto a = ctx.axis(ctx.attrInt("axis", 0), x.type.rank());
    if (!a)
      return a.takeError();
    axis = *a;
  }
  std::vector<std::vector<double>> rows = slicesOf(x, axis);
  if (rows.empty())
    return emptyResult(ctx);
  std::vector<int64_t> order;
  std::map<std::vector<double>, int64_t> first;
  for (size_t k = 0; k < rows.size(); ++k)
    if (first.emplace(rows[k], int64_t(k)).second)
      order.push_back(int64_t(k));
  if (ctx.attrInt("sorted", 1))
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return rows[size_t(a)] < rows[size_t(b)];
    });
  setUnique(ctx, x, axis, rows, order);
  return llvm::Error::success();
}

namespace {

/// A box as its corners (y1 <= y2, x1 <= x2).
struct Box {
  double y1, x1, y2, x2;
  double area() const { return (y2 - y1) * (x2 - x1); }
};

Box boxAt(const ConstTensor &boxes, int64_t at, bool center) {
  double v[4];
  for (int k = 0; k < 4; ++k)
    v[k] = boxes.real(at * 4 + k);
  if (center) // [x_center, y_center, width, height]
    return {v[1] - v[3] / 2, v[0] - v[2] / 2, v[1] + v[3] / 2, v[0] + v[2] / 2};
  return {std::min(v[0], v[2]), std::min(v[1], v[3]), std::max(v[0], v[2]),
          std::max(v[1], v[3])};
}

double iou(const Box &a, const Box &b) {
  double h = std::min(a.y2, b.y2) - std::max(a.y1, b.y1);
  double w = std::min(a.x2, b.x2) - std::max(a.x1, b.x1);
  if (h <= 0 || w <= 0)
    return 0;
  double inter = h * w, uni = a.area() + b.area() - inter;
  return uni > 0 ? inter / uni : 0;
}

/// The boxes NonMaxSuppression keeps for batch \p b and class \p c, in
/// order: by score, highest first (lower index on ties), above the score
/// threshold, none overlapping a kept one by more than the IoU threshold.
std::vector<int64_t> keptBoxes(const ConstTensor &boxes,
                               const ConstTensor &scores, int64_t b, int64_t c,
                               int64_t classes, int64_t n, int64_t most,
                               double iouMax, std::optional<double> scoreMin,
                               bool center) {
  auto score = [&](int64_t i) {
    return scores.real((b * classes + c) * n + i);
  };
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t z) { return score(a) > score(z); });
  std::vector<int64_t> kept;
  for (int64_t i : order) {
    if (int64_t(kept.size()) >= most)
      break;
    if (scoreMin && !(score(i) > *scoreMin))
      break;
    Box bi = boxAt(boxes, b * n + i, center);
    if (std::none_of(kept.begin(), kept.end(), [&](int64_t k) {
          return iou(bi, boxAt(boxes, b * n + k, center)) > iouMax;
        }))
      kept.push_back(i);
  }
  return kept;
}

} // namespace

/// NonMaxSuppression: per batch and class, the boxes kept by greedy
/// suppression, as rows (batch, class, box).
llvm::Error importNonMaxSuppression(NodeContext &ctx) {
  auto in =
      constantInputs(ctx, {"boxes", "scores", "max_output_boxes_per_class",
                           "iou_threshold", "score_threshold"});
  if (!in)
    return in.takeError();
  const ConstTensor &boxes = *(*in)[0], &scores = *(*in)[1];
  llvm::ArrayRef<int64_t> bs = boxes.type.shape, ss = scores.type.shape;
  if (bs.size() != 3 || bs[2] != 4 || ss.size() != 3 || ss[0] != bs[0] ||
      ss[2] != bs[1])
    return ctx.error("needs boxes [B, N, 4] and scores [B, C, N]");
  int64_t most = (*in)[2] ? (*in)[2]->integer(0) : 0;
  double iouMax = (*in)[3] ? (*in)[3]->real(0) : 0;
  std::optional<double> scoreMin;
  if ((*in)[4])
    scoreMin = (*in)[4]->real(0);
  bool center = ctx.attrInt("center_point_box", 0) != 0;
  std::vector<int64_t> rows;
  for (int64_t b = 0; b < bs[0]; ++b)
    for (int64_t c = 0; c < ss[1]; ++c)
      for (int64_t i : keptBoxes(boxes, scores, b, c, ss[1], bs[1], most,
                                 iouMax, scoreMin, center))
        rows.insert(rows.end(), {b, c, i});
  if (rows.empty())
    return emptyResult(ctx);
  ctx.setConstant(
      0, ConstTensor::ofInts(DType::I64, {int64_t(rows.size() / 3), 3}, rows));
  return llvm::Error::success();
}

} // namespace pax
