//===- DepthSpace.cpp - DepthToSpace and SpaceToDepth as layout ops -------===//
#include "frontend/DepthSpace.h"

#include "frontend/GraphBuilder.h"

#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <string>
#include <vector>

namespace pax {
namespace {

/// The reshape, transpose and reshape of one node: the 6-D shape, the
/// permutation and the 4-D result (0: the batch dim as it is).
struct BlockMove {
  std::vector<int64_t> split, perm, merged;
};

/// \p n's block move for an input of dims \p x ([N, C, H, W]), or an error.
llvm::Expected<BlockMove> blockMove(const onnx::NodeProto &n,
                                    llvm::ArrayRef<int64_t> x,
                                    const std::string &where) {
  int64_t b = 0;
  std::string mode = "DCR";
  for (const auto &a : n.attribute()) {
    if (a.name() == "blocksize")
      b = a.i();
    if (a.name() == "mode")
      mode = a.s();
  }
  auto fail = [&](const llvm::Twine &m) {
    return llvm::createStringError(where + ": " + m);
  };
  if (x.size() != 4 ||
      std::any_of(x.begin() + 1, x.end(), [](int64_t d) { return d < 1; }))
    return fail("needs an input of rank 4 with known channels and spatial "
                "dims");
  if (b < 1)
    return fail("blocksize must be positive");
  int64_t c = x[1], h = x[2], w = x[3];
  if (n.op_type() == "SpaceToDepth") {
    if (h % b || w % b)
      return fail("blocksize " + llvm::Twine(b) + " does not divide " +
                  llvm::Twine(h) + "x" + llvm::Twine(w));
    return BlockMove{{0, c, h / b, b, w / b, b},
                     {0, 3, 5, 1, 2, 4},
                     {0, c * b * b, h / b, w / b}};
  }
  if (c % (b * b))
    return fail("blocksize " + llvm::Twine(b) + " squared does not divide " +
                llvm::Twine(c) + " channels");
  std::vector<int64_t> merged{0, c / (b * b), h * b, w * b};
  if (mode == "DCR")
    return BlockMove{{0, b, b, c / (b * b), h, w}, {0, 3, 4, 1, 5, 2}, merged};
  if (mode == "CRD")
    return BlockMove{{0, c / (b * b), b, b, h, w}, {0, 1, 4, 2, 5, 3}, merged};
  return fail("unknown mode '" + mode + "' (DCR or CRD)");
}

} // namespace

llvm::Error lowerDepthSpace(llvm::StringRef path, onnx::ModelProto &model,
                            int64_t opset) {
  auto moves = [](const onnx::NodeProto &n) {
    return (n.domain().empty() || n.domain() == "ai.onnx") &&
           (n.op_type() == "DepthToSpace" || n.op_type() == "SpaceToDepth");
  };
  return rewriteNodes(
      path, model, opset, moves,
      [&](const onnx::NodeProto &n, int i, GraphBuilder &b,
          const llvm::StringMap<onnx::TypeProto> &types) -> llvm::Error {
        std::vector<int64_t> x;
        onnx::TypeProto type = types.lookup(n.input(0));
        for (const auto &d : type.tensor_type().shape().dim())
          x.push_back(d.has_dim_value() ? d.dim_value() : -1);
        auto m = blockMove(n, x, nodeWhere(path, n, i));
        if (!m)
          return m.takeError();
        std::string split =
            b.apply("Reshape", {n.input(0), b.int64s(m->split, false)});
        onnx::NodeProto &t = b.node("Transpose", {split});
        GraphBuilder::intsAttr(t, "perm", m->perm);
        std::string y =
            b.apply("Reshape", {t.output(0), b.int64s(m->merged, false)});
        b.rename(y, n.output(0));
        return llvm::Error::success();
      });
}

} // namespace pax
