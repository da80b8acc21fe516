//===- GridSample.cpp - GridSample as gathers and weighted sums -----------===//
#include "frontend/GridSample.h"

#include "frontend/GraphBuilder.h"

#include "llvm/ADT/StringMap.h"

#include <array>
#include <string>
#include <vector>

namespace pax {
namespace {

using Types = llvm::StringMap<onnx::TypeProto>;

/// One tap along an axis: the source position (as a float tensor), its
/// weight and, with zeros padding, whether it lies inside.
struct Tap {
  std::string index, weight, inside;
};

/// The rewrite of one GridSample node.
struct Sampler {
  GraphBuilder &b;
  std::string mode, padding;
  bool alignCorners = false;
  int32_t elem = onnx::TensorProto::FLOAT; // the grid's (coordinates')

  std::string k(double v) { return b.scalar(v, elem); }
  std::string op(llvm::StringRef type, std::vector<std::string> in) {
    return b.apply(type, in);
  }
  /// \p v reflected about [lo, hi] until inside (ONNX's _gs_reflect).
  std::string reflect(const std::string &v, double lo, double hi);
  /// Grid coordinate \p g (normalized) as a position along an axis of
  /// \p length, rounded (nearest) and moved inside per the padding.
  std::string position(const std::string &g, int64_t length);
  /// The taps of position \p p along an axis of \p length.
  std::vector<Tap> taps(const std::string &p, int64_t length);
  /// Tap position \p i as an int64 index inside [0, length), and whether
  /// it was inside (zeros padding).
  std::pair<std::string, std::string> fetch(const std::string &i,
                                            int64_t length);
  double lo(int64_t length) const { return alignCorners ? 0.0 : -0.5; }
  double hi(int64_t length) const {
    return alignCorners ? double(length - 1) : double(length) - 0.5;
  }
};

std::string Sampler::reflect(const std::string &v, double l, double h) {
  double range = h - l;
  // Below: dx = lo - v, n = floor(dx / range), r = dx - n range; even n
  // lands at lo + r, odd at hi - r. Above, mirrored.
  auto side = [&](const std::string &dx, double even, double odd,
                  bool evenAdds) {
    std::string n = op("Floor", {op("Div", {dx, k(range)})});
    std::string r = op("Sub", {dx, op("Mul", {n, k(range)})});
    std::string isEven = op("Equal", {op("Mod", {n, k(2.0)}), k(0.0)});
    std::string a = op(evenAdds ? "Add" : "Sub", {k(even), r});
    std::string c = op(evenAdds ? "Sub" : "Add", {k(odd), r});
    return op("Where", {isEven, a, c});
  };
  std::string below = side(op("Sub", {k(l), v}), l, h, true);
  std::string above = side(op("Sub", {v, k(h)}), h, l, false);
  return op("Where", {op("Less", {v, k(l)}), below,
                      op("Where", {op("Greater", {v, k(h)}), above, v})});
}

std::string Sampler::position(const std::string &g, int64_t length) {
  double n = double(length);
  std::string p =
      alignCorners
          ? op("Mul", {op("Add", {g, k(1.0)}), k((n - 1) / 2)})
          : op("Div",
               {op("Sub", {op("Mul", {op("Add", {g, k(1.0)}), k(n)}), k(1.0)}),
                k(2.0)});
  if (mode == "nearest")
    p = op("Round", {p});
  std::string outside = op("Or", {op("Less", {p, k(lo(length))}),
                                  op("Greater", {p, k(hi(length))})});
  if (padding == "border")
    return op("Where",
              {outside, op("Min", {op("Max", {p, k(0.0)}), k(n - 1)}), p});
  if (padding == "reflection")
    return reflect(p, lo(length), hi(length));
  return p;
}

/// Keys' cubic convolution weights (a = -0.75) of the four taps around a
/// position \p t past the first of the middle two.
std::array<std::string, 4> cubicWeights(Sampler &s, const std::string &t) {
  const double a = -0.75;
  auto far = [&](const std::string &x) { // 1 < |x| < 2
    std::string v = s.op("Sub", {s.op("Mul", {s.k(a), x}), s.k(5 * a)});
    v = s.op("Add", {s.op("Mul", {v, x}), s.k(8 * a)});
    return s.op("Sub", {s.op("Mul", {v, x}), s.k(4 * a)});
  };
  auto near = [&](const std::string &x) { // |x| <= 1
    std::string v = s.op("Sub", {s.op("Mul", {s.k(a + 2), x}), s.k(a + 3)});
    return s.op("Add", {s.op("Mul", {s.op("Mul", {v, x}), x}), s.k(1.0)});
  };
  std::string oneMinus = s.op("Sub", {s.k(1.0), t});
  return {far(s.op("Add", {t, s.k(1.0)})), near(t), near(oneMinus),
          far(s.op("Sub", {s.k(2.0), t}))};
}

std::vector<Tap> Sampler::taps(const std::string &p, int64_t length) {
  if (mode == "nearest")
    return {{p, "", ""}};
  std::string i0 = op("Floor", {p});
  std::string t = op("Sub", {p, i0});
  std::vector<Tap> out;
  if (mode == "linear") {
    out.push_back({i0, op("Sub", {k(1.0), t}), ""});
    out.push_back({op("Add", {i0, k(1.0)}), t, ""});
    return out;
  }
  std::array<std::string, 4> w = cubicWeights(*this, t);
  for (int j = 0; j < 4; ++j)
    out.push_back({op("Add", {i0, k(double(j - 1))}), w[size_t(j)], ""});
  return out;
}

std::pair<std::string, std::string> Sampler::fetch(const std::string &i,
                                                   int64_t length) {
  double n = double(length);
  std::string inside;
  std::string v = i;
  if (padding == "zeros")
    inside =
        op("And", {op("GreaterOrEqual", {i, k(0.0)}), op("Less", {i, k(n)})});
  if (padding == "reflection")
    v = reflect(v, lo(length), hi(length));
  // The reference truncates toward zero (int()), as Cast does.
  std::string idx =
      b.apply("Clip", {b.cast(v, onnx::TensorProto::INT64), b.int64s({0}, true),
                       b.int64s({length - 1}, true)});
  return {idx, inside};
}

/// The attributes of \p n (opset 16's bilinear and bicubic are opset 20's
/// linear and cubic), or an error.
llvm::Error readAttributes(const onnx::NodeProto &n, Sampler &s,
                           const std::string &where) {
  s.mode = "linear";
  s.padding = "zeros";
  for (const auto &a : n.attribute()) {
    if (a.name() == "mode")
      s.mode = a.s() == "bilinear"  ? "linear"
               : a.s() == "bicubic" ? "cubic"
                                    : a.s();
    if (a.name() == "padding_mode")
      s.padding = a.s();
    if (a.name() == "align_corners")
      s.alignCorners = a.i() != 0;
  }
  if (s.mode != "linear" && s.mode != "cubic" && s.mode != "nearest")
    return llvm::createStringError(
        where + ": mode '" + s.mode +
        "' is not linear (bilinear), cubic (bicubic) or nearest");
  if (s.padding != "zeros" && s.padding != "border" &&
      s.padding != "reflection")
    return llvm::createStringError(where + ": padding_mode '" + s.padding +
                                   "' is not zeros, border or reflection");
  return llvm::Error::success();
}

/// grid[..., c] as [N, 1, Ho*Wo].
std::string coordinate(Sampler &s, const std::string &grid, int64_t c,
                       int64_t n, int64_t points) {
  onnx::NodeProto &g = s.b.node("Gather", {grid, s.b.int64s({c}, true)});
  GraphBuilder::intAttr(g, "axis", 3);
  return s.op("Reshape", {g.output(0), s.b.int64s({n, 1, points}, false)});
}

/// The weighted sum of X's taps (x: [N, C, H*W]) over every pair of a
/// tap along y and one along x, as [N, C, Ho*Wo].
std::string sumOfTaps(Sampler &s, const std::string &x,
                      const std::vector<Tap> &ty, const std::vector<Tap> &tx,
                      llvm::ArrayRef<int64_t> xs, int64_t points,
                      int32_t xElem) {
  std::string sum;
  for (const Tap &a : ty) {
    auto [iy, insideY] = s.fetch(a.index, xs[2]);
    for (const Tap &c : tx) {
      auto [ix, insideX] = s.fetch(c.index, xs[3]);
      std::string flat =
          s.op("Add", {s.op("Mul", {iy, s.b.int64s({xs[3]}, true)}), ix});
      flat = s.op("Expand", {flat, s.b.int64s({xs[0], xs[1], points}, false)});
      onnx::NodeProto &g = s.b.node("GatherElements", {x, flat});
      GraphBuilder::intAttr(g, "axis", 2);
      std::string v = g.output(0);
      std::string w = a.weight.empty()   ? c.weight
                      : c.weight.empty() ? a.weight
                                         : s.op("Mul", {a.weight, c.weight});
      for (const std::string &inside : {insideY, insideX})
        if (!inside.empty()) {
          std::string m = s.b.cast(inside, s.elem);
          w = w.empty() ? m : s.op("Mul", {w, m});
        }
      if (!w.empty()) {
        v = s.op("Mul", {v, s.b.cast(w, xElem)});
      }
      sum = sum.empty() ? v : s.op("Add", {sum, v});
    }
  }
  return sum;
}

llvm::Error lowerGridSample(GraphBuilder &b, const onnx::NodeProto &n,
                            const Types &types, const std::string &where) {
  if (n.input_size() < 2)
    return llvm::createStringError(where + ": needs X and grid");
  auto xs = staticShape(types, n.input(0), where);
  if (!xs)
    return xs.takeError();
  auto gs = staticShape(types, n.input(1), where);
  if (!gs)
    return gs.takeError();
  if (xs->size() != 4 || gs->size() != 4 || (*gs)[3] != 2 ||
      (*gs)[0] != (*xs)[0])
    return llvm::createStringError(
        where + ": needs X [N, C, H, W] and grid [N, Ho, Wo, 2] (2 spatial "
                "dims)");
  Sampler s{b, "", "", false, elemOf(types, n.input(1))};
  if (auto err = readAttributes(n, s, where))
    return err;
  int64_t points = (*gs)[1] * (*gs)[2];
  std::string py =
      s.position(coordinate(s, n.input(1), 1, (*xs)[0], points), (*xs)[2]);
  std::string px =
      s.position(coordinate(s, n.input(1), 0, (*xs)[0], points), (*xs)[3]);
  std::string x =
      s.op("Reshape", {n.input(0), b.int64s({(*xs)[0], (*xs)[1], -1}, false)});
  std::string sum = sumOfTaps(s, x, s.taps(py, (*xs)[2]), s.taps(px, (*xs)[3]),
                              *xs, points, elemOf(types, n.input(0)));
  std::string y =
      s.op("Reshape",
           {sum, b.int64s({(*xs)[0], (*xs)[1], (*gs)[1], (*gs)[2]}, false)});
  b.rename(y, n.output(0));
  return llvm::Error::success();
}

} // namespace

llvm::Error lowerGridSamples(llvm::StringRef path, onnx::ModelProto &model,
                             int64_t opset) {
  return rewriteOpType(path, model, opset, "GridSample", lowerGridSample);
}

} // namespace pax
