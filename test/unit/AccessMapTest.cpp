//===- AccessMapTest.cpp - Access expressions, op kinds, dtypes, FLOPs ----===//
#include "ir/AccessMap.h"
#include "ir/Module.h"
#include "ir/Summary.h"
#include "ir/Types.h"

#include "llvm/ADT/StringSet.h"

#include <gtest/gtest.h>

using namespace pax;

namespace {

using Kind = AccessExpr::Kind;

/// A conv-like space: [n: 2, ci: 3, oh: 5, kh: 3, h: 4, d: 8, v: 100].
const llvm::SmallVector<IterDim, 8> kSpace = {
    {"n", 2, IterKind::Parallel},   {"ci", 3, IterKind::Reduction},
    {"oh", 5, IterKind::Parallel},  {"kh", 3, IterKind::Reduction},
    {"h", 4, IterKind::Parallel},   {"d", 8, IterKind::Parallel},
    {"v", 100, IterKind::Reduction}};
enum : unsigned { N, CI, OH, KH, H, D, V };

TEST(AccessExprTest, DimIsPlainAffine) {
  AccessExpr e = AccessExpr::dim(OH);
  EXPECT_EQ(e.kind, Kind::Affine);
  EXPECT_EQ(e.dims, (llvm::SmallVector<unsigned, 2>{OH}));
  EXPECT_EQ(e.stride, 1);
  EXPECT_EQ(e.offset, 0);
  EXPECT_TRUE(e.isPlainDim());
  EXPECT_EQ(e, AccessExpr::shifted(OH, 1, 0));
}

TEST(AccessExprTest, ShiftedAndWindowAreNotPlain) {
  AccessExpr s = AccessExpr::shifted(OH, 2, -3);
  EXPECT_EQ(s.kind, Kind::Affine);
  EXPECT_EQ(s.stride, 2);
  EXPECT_EQ(s.offset, -3);
  EXPECT_FALSE(s.isPlainDim());
  EXPECT_FALSE(AccessExpr::shifted(OH, 1, -6).isPlainDim());
  EXPECT_FALSE(AccessExpr::shifted(OH, 2, 0).isPlainDim());

  AccessExpr w = AccessExpr::window(OH, KH, 2, 2, -3);
  EXPECT_EQ(w.kind, Kind::Affine);
  EXPECT_EQ(w.dims, (llvm::SmallVector<unsigned, 2>{OH, KH}));
  EXPECT_EQ(w.stride, 2);
  EXPECT_EQ(w.dilation, 2);
  EXPECT_EQ(w.offset, -3);
  EXPECT_FALSE(w.isPlainDim());
  EXPECT_FALSE(AccessExpr::window(OH, KH, 1, 1, 0).isPlainDim());
}

TEST(AccessExprTest, GroupLookupBroadcastFull) {
  AccessExpr g = AccessExpr::group({H, D});
  EXPECT_EQ(g.kind, Kind::Group);
  EXPECT_EQ(g.dims, (llvm::SmallVector<unsigned, 2>{H, D}));
  EXPECT_FALSE(g.isPlainDim());

  AccessExpr l = AccessExpr::lookup(V);
  EXPECT_EQ(l.kind, Kind::Lookup);
  EXPECT_EQ(l.dims, (llvm::SmallVector<unsigned, 2>{V}));
  EXPECT_FALSE(l.isPlainDim());

  AccessExpr b = AccessExpr::broadcast();
  EXPECT_EQ(b.kind, Kind::Broadcast);
  EXPECT_TRUE(b.dims.empty());
  EXPECT_FALSE(b.isPlainDim());

  AccessExpr f = AccessExpr::full();
  EXPECT_EQ(f.kind, Kind::Full);
  EXPECT_TRUE(f.dims.empty());
  EXPECT_FALSE(f == b);
}

TEST(AccessExprTest, EqualityComparesEveryField) {
  EXPECT_EQ(AccessExpr::window(OH, KH, 2, 1, -1),
            AccessExpr::window(OH, KH, 2, 1, -1));
  EXPECT_FALSE(AccessExpr::window(OH, KH, 2, 1, -1) ==
               AccessExpr::window(OH, KH, 2, 2, -1));
  EXPECT_FALSE(AccessExpr::window(OH, KH, 2, 1, -1) ==
               AccessExpr::window(OH, KH, 2, 1, 0));
  EXPECT_FALSE(AccessExpr::group({H, D}) == AccessExpr::group({D, H}));
  EXPECT_FALSE(AccessExpr::group({H}, 8) == AccessExpr::group({H}, 4));
  EXPECT_FALSE(AccessExpr::group({H}, 8) == AccessExpr::group({H}, 8, 32));
  EXPECT_FALSE(AccessExpr::dim(V) == AccessExpr::lookup(V));
}

TEST(AccessExprTest, Uses) {
  AccessExpr w = AccessExpr::window(OH, KH, 2, 1, 0);
  EXPECT_TRUE(w.uses(OH));
  EXPECT_TRUE(w.uses(KH));
  EXPECT_FALSE(w.uses(N));
  EXPECT_TRUE(AccessExpr::group({H, D}).uses(D));
  EXPECT_TRUE(AccessExpr::lookup(V).uses(V));
  EXPECT_FALSE(AccessExpr::lookup(V).uses(D));
  for (unsigned d = 0; d < kSpace.size(); ++d) {
    EXPECT_FALSE(AccessExpr::broadcast().uses(d));
    EXPECT_FALSE(AccessExpr::full().uses(d));
  }
}

TEST(AccessExprTest, TextOfEachForm) {
  auto str = [](const AccessExpr &e) { return accessExprStr(e, kSpace); };
  EXPECT_EQ(str(AccessExpr::dim(N)), "n");
  EXPECT_EQ(str(AccessExpr::shifted(D, 1, -6)), "d - 6");
  EXPECT_EQ(str(AccessExpr::shifted(D, 2, 1)), "2*d + 1");
  EXPECT_EQ(str(AccessExpr::window(OH, KH, 2, 2, -3)), "2*oh + 2*kh - 3");
  EXPECT_EQ(str(AccessExpr::window(OH, KH, 1, 1, 0)), "oh + kh");
  EXPECT_EQ(str(AccessExpr::window(OH, KH, 2, 1, -1)), "2*oh + kh - 1");
  EXPECT_EQ(str(AccessExpr::group({H, D})), "(h, d)");
  EXPECT_EQ(str(AccessExpr::group({N, H, D})), "(n, h, d)");
  EXPECT_EQ(str(AccessExpr::group({H}, 8)), "(h, *8)");
  EXPECT_EQ(str(AccessExpr::group({H}, 8, 32)), "(h, *8) + 32");
  EXPECT_EQ(str(AccessExpr::group({H, D}, 1, 32)), "(h, d) + 32");
  EXPECT_EQ(str(AccessExpr::lookup(V)), "gather(v)");
  EXPECT_EQ(str(AccessExpr::broadcast()), "_");
  EXPECT_EQ(str(AccessExpr::full()), "*");
}

TEST(AccessExprTest, TextOfMaps) {
  AccessMap m = {AccessExpr::dim(N), AccessExpr::dim(CI),
                 AccessExpr::window(OH, KH, 2, 1, -3), AccessExpr::broadcast(),
                 AccessExpr::full()};
  EXPECT_EQ(accessMapStr(m, kSpace), "[n, ci, 2*oh + kh - 3, _, *]");
  EXPECT_EQ(accessMapStr({}, kSpace), "[]");
}

TEST(AccessExprTest, SpanOfEachForm) {
  auto span = [](const AccessExpr &e) { return accessSpan(e, kSpace); };
  EXPECT_EQ(span(AccessExpr::dim(OH)), 5);
  // 2*(5-1) + 1: stride leaves gaps but the span runs to the last index.
  EXPECT_EQ(span(AccessExpr::shifted(OH, 2, 0)), 9);
  // The offset moves the range; it does not change its length.
  EXPECT_EQ(span(AccessExpr::shifted(OH, 1, -4)), 5);
  // 2*(5-1) + 2*(3-1) + 1.
  EXPECT_EQ(span(AccessExpr::window(OH, KH, 2, 2, -3)), 13);
  EXPECT_EQ(span(AccessExpr::window(OH, KH, 1, 1, 0)), 7);
  EXPECT_EQ(span(AccessExpr::group({H, D})), 32);
  EXPECT_EQ(span(AccessExpr::group({N, H, D})), 64);
  // Each of h's 4 indices reads 8 whole; the offset moves the range.
  EXPECT_EQ(span(AccessExpr::group({H}, 8)), 32);
  EXPECT_EQ(span(AccessExpr::group({H}, 8, 64)), 32);
  EXPECT_TRUE(AccessExpr::group({H}, 8).readsWhole());
  EXPECT_FALSE(AccessExpr::group({H, D}).readsWhole());
  EXPECT_EQ(span(AccessExpr::lookup(V)), 100);
  EXPECT_EQ(span(AccessExpr::broadcast()), 1);
  EXPECT_EQ(span(AccessExpr::full()), -1);
}

TEST(IterKindTest, NamesRoundTrip) {
  for (IterKind k :
       {IterKind::Parallel, IterKind::Reduction, IterKind::Sequential})
    EXPECT_EQ(parseIterKind(iterKindName(k)), k);
  EXPECT_EQ(iterKindName(IterKind::Parallel), "par");
  EXPECT_EQ(iterKindName(IterKind::Reduction), "red");
  EXPECT_EQ(iterKindName(IterKind::Sequential), "seq");
  EXPECT_EQ(parseIterKind("parallel"), std::nullopt);
  EXPECT_EQ(parseIterKind(""), std::nullopt);
}

TEST(OpKindTest, EveryKindRoundTrips) {
  struct Row {
    OpKind kind;
    const char *text;
    OpFamily family;
    unsigned flops;
  };
  const Row rows[] = {
#define PAX_OP(Enum, Text, Family, Flops, Partials)                            \
  {OpKind::Enum, Text, OpFamily::Family, Flops},
#include "ir/OpKinds.def"
  };
  llvm::StringSet<> seen;
  for (size_t i = 0; i < std::size(rows); ++i) {
    const Row &r = rows[i];
    SCOPED_TRACE(r.text);
    EXPECT_EQ(unsigned(r.kind), i);
    EXPECT_EQ(opKindName(r.kind), r.text);
    EXPECT_EQ(parseOpKind(r.text), r.kind);
    EXPECT_EQ(opKindFamily(r.kind), r.family);
    EXPECT_EQ(opKindFlopsPerPoint(r.kind), r.flops);
    EXPECT_TRUE(seen.insert(r.text).second) << "duplicate op kind text";
  }
  EXPECT_EQ(parseOpKind("MatMul"), std::nullopt);
  EXPECT_EQ(parseOpKind("mat_mul"), std::nullopt);
  EXPECT_EQ(parseOpKind(""), std::nullopt);
}

TEST(DTypeTest, EveryDTypeRoundTrips) {
  struct Row {
    DType type;
    const char *text;
    unsigned bytes;
    bool isFloat;
  };
  const Row rows[] = {
#define PAX_DTYPE(Enum, Text, Bytes, IsFloat)                                  \
  {DType::Enum, Text, Bytes, IsFloat},
#include "ir/DTypes.def"
  };
  for (const Row &r : rows) {
    SCOPED_TRACE(r.text);
    EXPECT_EQ(dtypeName(r.type), r.text);
    EXPECT_EQ(parseDType(r.text), r.type);
    EXPECT_EQ(dtypeBytes(r.type), r.bytes);
    EXPECT_EQ(isFloat(r.type), r.isFloat);
  }
  EXPECT_EQ(dtypeBytes(DType::F32), 4u);
  EXPECT_EQ(dtypeBytes(DType::BF16), 2u);
  EXPECT_EQ(dtypeBytes(DType::I1), 1u);
  EXPECT_FALSE(isFloat(DType::I64));
  EXPECT_EQ(parseDType("float32"), std::nullopt);
  EXPECT_EQ(parseDType("F32"), std::nullopt);
}

TEST(TensorTypeTest, NumelBytesAndText) {
  TensorType t{DType::F16, {2, 3, 4}};
  EXPECT_EQ(t.rank(), 3u);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.bytes(), 48);
  EXPECT_EQ(t.str(), "tensor<2x3x4xf16>");
  TensorType scalar{DType::I64, {}};
  EXPECT_EQ(scalar.numel(), 1);
  EXPECT_EQ(scalar.bytes(), 8);
  EXPECT_EQ(scalar.str(), "tensor<i64>");
  EXPECT_EQ(shapeStr({2, 3}), "2x3");
  EXPECT_EQ(shapeStr({}), "scalar");
  EXPECT_FALSE(t == (TensorType{DType::F32, {2, 3, 4}}));
}

/// `y[m, n] = sum_k x[m, k] * w[k, n]` for \p m x \p k by \p k x \p n.
static std::unique_ptr<Op> matmulOp(int64_t m, int64_t k, int64_t n, Value *x,
                                    Value *w) {
  auto op = std::make_unique<Op>(OpKind::MatMul);
  op->iters = {{"m", m, IterKind::Parallel},
               {"n", n, IterKind::Parallel},
               {"k", k, IterKind::Reduction}};
  op->operands.push_back({x, {AccessExpr::dim(0), AccessExpr::dim(2)}});
  op->operands.push_back({w, {AccessExpr::dim(2), AccessExpr::dim(1)}});
  op->addResult(TensorType{DType::F32, {m, n}},
                {AccessExpr::dim(0), AccessExpr::dim(1)});
  return op;
}

TEST(OpFlopsTest, MatMulCountsAMultiplyAddAsTwo) {
  Value x(Value::Kind::Argument, TensorType{DType::F32, {4, 5}});
  Value w(Value::Kind::Argument, TensorType{DType::F32, {5, 6}});
  EXPECT_DOUBLE_EQ(matmulOp(4, 5, 6, &x, &w)->flops(), 2.0 * 4 * 5 * 6);
}

TEST(OpFlopsTest, ConvCountsEveryPointOfTheWindow) {
  Value x(Value::Kind::Argument, TensorType{DType::F32, {1, 3, 9, 9}});
  Value w(Value::Kind::Argument, TensorType{DType::F32, {8, 3, 3, 3}});
  Op op(OpKind::Conv);
  op.iters = {{"n", 1, IterKind::Parallel},
              {"co", 8, IterKind::Parallel},
              {"oh", 4, IterKind::Parallel},
              {"ci", 3, IterKind::Reduction},
              {"kh", 3, IterKind::Reduction}};
  op.operands.push_back(
      {&x,
       {AccessExpr::dim(0), AccessExpr::dim(3),
        AccessExpr::window(2, 4, 2, 1, 0), AccessExpr::full()}});
  op.operands.push_back({&w,
                         {AccessExpr::dim(1), AccessExpr::dim(3),
                          AccessExpr::dim(4), AccessExpr::full()}});
  op.addResult(TensorType{DType::F32, {1, 8, 4}},
               {AccessExpr::dim(0), AccessExpr::dim(1), AccessExpr::dim(2)});
  EXPECT_DOUBLE_EQ(op.flops(), 2.0 * 1 * 8 * 4 * 3 * 3);
}

TEST(OpFlopsTest, LookupOnlyDimDoesNotCount) {
  Value emb(Value::Kind::Argument, TensorType{DType::F32, {100, 16}});
  Value ids(Value::Kind::Argument, TensorType{DType::I64, {3}});
  // A gather fused with a scale: 1 flop per point, over [i, d] only.
  Op op(OpKind::Mul);
  op.iters = {{"i", 3, IterKind::Parallel},
              {"v", 100, IterKind::Reduction},
              {"d", 16, IterKind::Parallel}};
  op.operands.push_back({&emb, {AccessExpr::lookup(1), AccessExpr::dim(2)}});
  op.operands.push_back({&ids, {AccessExpr::dim(0)}});
  op.addResult(TensorType{DType::F32, {3, 16}},
               {AccessExpr::dim(0), AccessExpr::dim(2)});
  EXPECT_DOUBLE_EQ(op.flops(), 3.0 * 16);

  // Once `v` is also read directly it is a real loop again.
  Value bias(Value::Kind::Argument, TensorType{DType::F32, {100}});
  op.operands.push_back({&bias, {AccessExpr::dim(1)}});
  EXPECT_DOUBLE_EQ(op.flops(), 3.0 * 100 * 16);

  // Gather itself moves data: no flops at all.
  op.kind = OpKind::Gather;
  EXPECT_DOUBLE_EQ(op.flops(), 0.0);
}

TEST(OpTest, AttributesAndIterLookup) {
  Op op(OpKind::Relu);
  op.iters = {{"a", 2, IterKind::Parallel}, {"b", 3, IterKind::Parallel}};
  EXPECT_EQ(op.findIter("b"), 1);
  EXPECT_EQ(op.findIter("c"), -1);
  EXPECT_EQ(op.name(), "");
  op.attrs["name"] = std::string("/enc/relu");
  op.attrs["axis"] = int64_t(3);
  op.attrs["alpha"] = 0.5f;
  EXPECT_EQ(op.name(), "/enc/relu");
  EXPECT_EQ(op.intAttr("axis", -1), 3);
  EXPECT_EQ(op.intAttr("alpha", -1), -1); // a float is not an int
  EXPECT_EQ(op.intAttr("missing", 7), 7);
  Value *r = op.addResult(TensorType{DType::F32, {2, 3}}, {});
  EXPECT_EQ(r->def, &op);
  EXPECT_EQ(r->index, 0u);
  EXPECT_EQ(op.addResult(TensorType{}, {})->index, 1u);
}

TEST(SummaryTest, CountsParametersAndFlops) {
  Module m;
  Global *w = m.addGlobal("w", TensorType{DType::F32, {5, 6}});
  w->isParameter = true;
  Global *c = m.addGlobal("c", TensorType{DType::F32, {7}});
  EXPECT_EQ(m.findGlobal("c"), c);
  EXPECT_EQ(m.findGlobal("zz"), nullptr);
  Value *x = m.main.addArg("x", TensorType{DType::F32, {4, 5}});
  m.main.ops.push_back(matmulOp(4, 5, 6, x, &w->value));
  m.main.returns.push_back(m.main.ops[0]->results[0].value.get());
  m.main.returnNames.push_back("y");
  ModelSummary s = summarize(m);
  EXPECT_EQ(s.parameters, 30); // the constant @c does not count
  EXPECT_EQ(s.parameterBytes, 120);
  EXPECT_DOUBLE_EQ(s.flops, 240.0);
  EXPECT_EQ(s.computeOps, 1);
  EXPECT_EQ(s.ops["matmul"], 1);
  ASSERT_EQ(s.outputs.size(), 1u);
  EXPECT_EQ(s.outputs[0].first, "y");
  EXPECT_EQ(s.outputs[0].second.shape, (llvm::SmallVector<int64_t, 4>{4, 6}));
}

} // namespace
