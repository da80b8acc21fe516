//===- ParserPrinterTest.cpp - .pir text: print, parse, print again -------===//
#include "IrText.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace pax;
using namespace pax::test;

namespace {

/// A small model that uses every form of access and every data source.
std::unique_ptr<Module> buildModel() {
  auto m = std::make_unique<Module>();
  m->name = "tiny";
  m->attrs["source"] = std::string("tiny.onnx");
  m->attrs["opset"] = int64_t(17);
  Global *w = m->addGlobal("conv.w", TensorType{DType::F32, {4, 3, 3, 3}});
  w->isParameter = true;
  w->source = DataSource::Initializer;
  w->ref = "conv.weight";
  Global *emb = m->addGlobal("emb", TensorType{DType::F32, {10, 16}});
  emb->isParameter = true;
  emb->source = DataSource::Input;
  emb->ref = "emb";
  Global *scale = m->addGlobal("scale/0", TensorType{DType::F32, {}});
  scale->source = DataSource::Dense;
  float half = 0.5f;
  scale->bytes.resize(4);
  std::memcpy(scale->bytes.data(), &half, 4);
  Global *bias = m->addGlobal("b", TensorType{DType::F32, {4}});
  bias->isParameter = true;
  bias->fill = 0.02;

  Func &f = m->main;
  Value *x = f.addArg("x", TensorType{DType::F32, {2, 3, 8, 8}});
  Value *ids = f.addArg("ids.0", TensorType{DType::I64, {2, 5}});
  using E = AccessExpr;

  Op *conv = f.addOp(OpKind::Conv);
  conv->iters = {{"n", 2, IterKind::Parallel},   {"co", 4, IterKind::Parallel},
                 {"oh", 4, IterKind::Parallel},  {"ow", 4, IterKind::Parallel},
                 {"ci", 3, IterKind::Reduction}, {"kh", 3, IterKind::Reduction},
                 {"kw", 3, IterKind::Reduction}};
  conv->operands.push_back({x,
                            {E::dim(0), E::dim(4), E::window(2, 5, 2, 1, -1),
                             E::window(3, 6, 2, 1, -1)}});
  conv->operands.push_back(
      {&w->value, {E::dim(1), E::dim(4), E::dim(5), E::dim(6)}});
  conv->operands.push_back({&bias->value, {E::dim(1)}});
  Value *y = conv->addResult(TensorType{DType::F32, {2, 4, 4, 4}},
                             {E::dim(0), E::dim(1), E::dim(2), E::dim(3)});
  conv->attrs["name"] = std::string("/conv/Conv");
  conv->attrs["strides"] = std::vector<int64_t>{2, 2};
  conv->attrs["alpha"] = 1e-5f;
  conv->attrs["weights"] = std::vector<float>{1.0f, -2.5e-7f};

  Op *gather = f.addOp(OpKind::Gather);
  gather->iters = {{"i0", 2, IterKind::Parallel},
                   {"i1", 5, IterKind::Parallel},
                   {"v", 10, IterKind::Reduction},
                   {"d1", 16, IterKind::Parallel}};
  gather->operands.push_back({&emb->value, {E::lookup(2), E::dim(3)}});
  gather->operands.push_back({ids, {E::dim(0), E::dim(1)}});
  Value *g = gather->addResult(TensorType{DType::F32, {2, 5, 16}},
                               {E::dim(0), E::dim(1), E::dim(3)});

  Op *reshape = f.addOp(OpKind::Reshape);
  reshape->iters = {{"d0", 2, IterKind::Parallel},
                    {"d1", 5, IterKind::Parallel},
                    {"d2", 4, IterKind::Parallel},
                    {"d3", 4, IterKind::Parallel}};
  reshape->operands.push_back({g, {E::dim(0), E::dim(1), E::group({2, 3})}});
  reshape->addResult(TensorType{DType::F32, {2, 5, 4, 4}},
                     {E::dim(0), E::dim(1), E::dim(2), E::dim(3)});

  Op *split = f.addOp(OpKind::Split);
  split->iters = {{"d0", 2, IterKind::Parallel},
                  {"d1", 5, IterKind::Parallel},
                  {"d2", 16, IterKind::Parallel}};
  split->operands.push_back({g, {E::dim(0), E::dim(1), E::dim(2)}});
  split->addResult(TensorType{DType::F32, {2, 5, 6}},
                   {E::dim(0), E::dim(1), E::dim(2)});
  split->addResult(TensorType{DType::F32, {2, 5, 10}},
                   {E::dim(0), E::dim(1), E::shifted(2, 1, -6)});

  Op *mul = f.addOp(OpKind::Mul);
  mul->iters = {{"d0", 2, IterKind::Parallel},
                {"d1", 4, IterKind::Parallel},
                {"d2", 1, IterKind::Parallel},
                {"d3", 1, IterKind::Parallel}};
  mul->operands.push_back({y, {E::dim(0), E::dim(1), E::full(), E::full()}});
  mul->operands.push_back({&scale->value, {}});
  Value *p =
      mul->addResult(TensorType{DType::F32, {2, 4, 1, 1}},
                     {E::dim(0), E::dim(1), E::broadcast(), E::broadcast()});

  f.returns = {p, g};
  f.returnNames = {"y", "out/emb"};
  return m;
}

TEST(ParserPrinterTest, BuiltModuleRoundTrips) {
  auto m = buildModel();
  EXPECT_TRUE(verify(*m).empty());
  std::string text = expectRoundTrip(*m);
  EXPECT_NE(text.find("module @tiny attributes {opset = 17, source = "
                      "\"tiny.onnx\"} {"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("param @conv.w : tensor<4x3x3x3xf32> = "
                      "initializer(\"conv.weight\")"),
            std::string::npos);
  EXPECT_NE(text.find("const @\"scale/0\" : tensor<f32> = dense<[0.5]>"),
            std::string::npos);
  EXPECT_NE(text.find("param @b : tensor<4xf32> = fill(0.02)"),
            std::string::npos);
  EXPECT_NE(text.find("ins(%x[n, ci, 2*oh + kh - 1, 2*ow + kw - 1], "
                      "@conv.w[co, ci, kh, kw], @b[co])"),
            std::string::npos);
  EXPECT_NE(text.find("{alpha = 1e-05, name = \"/conv/Conv\", strides = [2, "
                      "2], weights = [1.0, -2.5e-07]}"),
            std::string::npos);
  EXPECT_NE(text.find("%3, %4 = compute \"split\""), std::string::npos);
  EXPECT_NE(text.find("[d0, d1, d2 - 6] : tensor<2x5x10xf32>"),
            std::string::npos);
  EXPECT_NE(text.find("-> (y: tensor<2x4x1x1xf32>, \"out/emb\": "
                      "tensor<2x5x16xf32>)"),
            std::string::npos);
  EXPECT_NE(text.find("return %5, %1"), std::string::npos);
}

TEST(ParserPrinterTest, ParsedModuleMatchesTheBuiltOne) {
  auto m = buildModel();
  auto parsed = parse(print(*m));
  ASSERT_NE(parsed, nullptr);
  EXPECT_TRUE(verify(*parsed).empty());
  ASSERT_EQ(parsed->globals.size(), m->globals.size());
  ASSERT_EQ(parsed->main.ops.size(), m->main.ops.size());
  for (size_t i = 0; i < m->main.ops.size(); ++i) {
    const Op &a = *m->main.ops[i], &b = *parsed->main.ops[i];
    EXPECT_EQ(a.kind, b.kind);
    ASSERT_EQ(a.operands.size(), b.operands.size());
    for (size_t j = 0; j < a.operands.size(); ++j)
      EXPECT_EQ(a.operands[j].map, b.operands[j].map) << "op " << i;
  }
  const Global &emb = *parsed->findGlobal("emb");
  EXPECT_TRUE(emb.isParameter);
  EXPECT_EQ(emb.source, DataSource::Input);
  EXPECT_EQ(emb.ref, "emb");
  EXPECT_FALSE(parsed->findGlobal("scale/0")->isParameter);
  EXPECT_EQ(parsed->main.args[1]->name, "ids.0");
  // The gather reads the embedding through the parsed global.
  EXPECT_EQ(parsed->main.ops[1]->operands[0].value, &emb.value);
}

TEST(ParserPrinterTest, OpLocationsPointAtEachOp) {
  auto m = buildModel();
  std::string text = print(*m);
  llvm::SourceMgr sm;
  unsigned id = sm.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(text, "t.pir"), llvm::SMLoc());
  OpLocations locs;
  auto parsed = parseModule(sm, id, &locs);
  ASSERT_NE(parsed, nullptr);
  ASSERT_EQ(locs.size(), parsed->main.ops.size());
  // Line 1 module, 4 globals, a blank line, the func line: ops start at 8.
  EXPECT_EQ(sm.getLineAndColumn(locs[parsed->main.ops[0].get()]).first, 8u);
  EXPECT_EQ(sm.getLineAndColumn(locs[parsed->main.ops[1].get()]).first, 11u);
}

TEST(FormatTest, Floats) {
  EXPECT_EQ(formatFloat(1e-5f), "1e-05");
  EXPECT_EQ(formatFloat(1.0f), "1.0");
  EXPECT_EQ(formatFloat(0.5f), "0.5");
  EXPECT_EQ(formatFloat(0.02f), "0.02");
  EXPECT_EQ(formatFloat(-3.0f), "-3.0");
  EXPECT_EQ(formatFloat(100.0f), "100.0");
  EXPECT_EQ(formatFloat(INFINITY), "inf");
  EXPECT_EQ(formatFloat(-INFINITY), "-inf");
  EXPECT_EQ(formatFloat(NAN), "nan");
  EXPECT_EQ(formatDouble(0.1), "0.1");
  EXPECT_EQ(formatDouble(double(0.02f)), "0.019999999552965164");
  EXPECT_EQ(formatDouble(2.0), "2.0");
}

TEST(FormatTest, Identifiers) {
  EXPECT_EQ(formatIdent("a.b"), "a.b");
  EXPECT_EQ(formatIdent("_x$1"), "_x$1");
  EXPECT_EQ(formatIdent("a/b"), "\"a/b\"");
  EXPECT_EQ(formatIdent("1a"), "\"1a\"");
  EXPECT_EQ(formatIdent("a b"), "\"a b\"");
  EXPECT_EQ(formatIdent(""), "\"\"");
}

TEST(FormatTest, StringEscapes) {
  EXPECT_EQ(formatString("plain"), "\"plain\"");
  EXPECT_EQ(formatString("a\"b\\c\nd\te"), "\"a\\\"b\\\\c\\nd\\x09e\"");
  EXPECT_EQ(formatAttr(AttrValue(int64_t(-3))), "-3");
  EXPECT_EQ(formatAttr(AttrValue(std::vector<int64_t>{})), "[]");
  EXPECT_EQ(formatAttr(AttrValue(std::vector<float>{0.5f, 2.0f})),
            "[0.5, 2.0]");
}

TEST(ParserPrinterTest, StringsAndNamesRoundTrip) {
  const std::string tricky = std::string("q\"b\\s\nnl\ttab\x01 é ") + '\x7f';
  Module m;
  m.attrs["doc"] = tricky;
  m.attrs["min"] = std::numeric_limits<int64_t>::min();
  m.attrs["odd key/1"] = std::vector<float>{INFINITY, -INFINITY, 1e20f};
  Value *a = m.main.addArg("0", TensorType{DType::F32, {2}});
  Value *b = m.main.addArg("in put", TensorType{DType::F32, {2}});
  Op *op = m.main.addOp(OpKind::Add);
  op->iters = {{"d0", 2, IterKind::Parallel}};
  op->operands = {{a, {AccessExpr::dim(0)}}, {b, {AccessExpr::dim(0)}}};
  op->addResult(TensorType{DType::F32, {2}}, {AccessExpr::dim(0)});
  op->attrs["name"] = tricky;
  m.main.returns = {op->results[0].value.get()};
  m.main.returnNames = {"1"};

  std::string text = expectRoundTrip(m);
  EXPECT_NE(text.find("func @main(%\"0\": tensor<2xf32>, %\"in put\": "),
            std::string::npos);
  auto parsed = parse(text);
  ASSERT_NE(parsed, nullptr);
  EXPECT_EQ(std::get<std::string>(parsed->attrs["doc"]), tricky);
  EXPECT_EQ(std::get<int64_t>(parsed->attrs["min"]),
            std::numeric_limits<int64_t>::min());
  EXPECT_EQ(parsed->main.ops[0]->name(), tricky);
  EXPECT_EQ(parsed->main.args[0]->name, "0");
  EXPECT_EQ(parsed->main.args[1]->name, "in put");
  EXPECT_EQ(parsed->main.returnNames[0], "1");
}

TEST(ParserPrinterTest, DenseDataOfEveryDTypeRoundTrips) {
  using L = std::numeric_limits<int64_t>;
  std::pair<DType, std::vector<uint8_t>> cases[] = {
      {DType::F32, raw<float>({0.1f, -1e-5f, 3.4028235e38f, 1e-45f, -0.0f,
                               INFINITY, -INFINITY})},
      {DType::F64, raw<double>({0.1, -1e-300, 1.7976931348623157e308})},
      {DType::F16, raw<uint16_t>({0x3c00, 0xfbff, 0x0001})},
      {DType::BF16, raw<uint16_t>({0x3f80, 0xff80})},
      {DType::I8, raw<int8_t>({-128, 0, 127})},
      {DType::I16, raw<int16_t>({-32768, 32767})},
      {DType::I32, raw<int32_t>({INT32_MIN, -1, INT32_MAX})},
      {DType::I64, raw<int64_t>({L::min(), -1, L::max()})},
      {DType::U8, raw<uint8_t>({0, 255})},
      {DType::U16, raw<uint16_t>({0, 65535})},
      {DType::U32, raw<uint32_t>({0, 4294967295u})},
      {DType::U64, raw<uint64_t>({0, 1ull << 40})},
      {DType::I1, raw<uint8_t>({0, 1, 1})},
  };
  for (auto &[elem, bytes] : cases) {
    SCOPED_TRACE(dtypeName(elem).str());
    Module m = denseModule(elem, bytes);
    EXPECT_TRUE(verify(m).empty());
    expectRoundTrip(m);
    auto parsed = parse(print(m));
    ASSERT_NE(parsed, nullptr);
    EXPECT_EQ(parsed->globals[0]->bytes, bytes);
  }
}

// u64 values of 2^63 and above print in hex, which reads back unsigned.
TEST(ParserPrinterTest, DenseU64AboveInt64MaxRoundTrips) {
  auto bytes = raw<uint64_t>({std::numeric_limits<uint64_t>::max()});
  Module m = denseModule(DType::U64, bytes);
  auto parsed = parse(print(m));
  ASSERT_NE(parsed, nullptr);
  EXPECT_EQ(parsed->globals[0]->bytes, bytes);
}

// `@"0"` (a global or module named by digits, common in PyTorch exports)
// reads back as the same name.
TEST(ParserPrinterTest, NumericGlobalAndModuleNamesRoundTrip) {
  Module m = denseModule(DType::I64, raw<int64_t>({7}));
  m.name = "1";
  m.globals[0]->value.name = "0";
  auto parsed = parse(print(m));
  ASSERT_NE(parsed, nullptr);
  EXPECT_EQ(parsed->name, "1");
  EXPECT_NE(parsed->findGlobal("0"), nullptr);
  EXPECT_EQ(print(*parsed), print(m));
}

// Names "inf" and "nan" are quoted, or they would read back as numbers.
TEST(ParserPrinterTest, IdentifiersNamedInfAndNanRoundTrip) {
  Module named = denseModule(DType::I64, raw<int64_t>({7}));
  named.main.returnNames = {"nan"};
  Diag diag;
  auto parsed = parse(print(named), &diag);
  ASSERT_NE(parsed, nullptr) << diag.message;
  EXPECT_EQ(parsed->main.returnNames[0], "nan");

  Module attr = denseModule(DType::I64, raw<int64_t>({7}));
  attr.attrs["inf"] = int64_t(1);
  EXPECT_NE(parse(print(attr)), nullptr);
}

} // namespace

// A layout gives each device its block: the digits least significant
// first, a dim's coarsest level most significant; nothing past its devices.
TEST(LayoutTest, BlocksOfDevices) {
  using R = Digit::Role;
  // 2 x 3 x 2 devices: digit 0 splits dim 1 (fine level), digit 1 is a
  // partial sum, digit 2 splits dim 1 (coarse level).
  LayoutAttr l{{{2, R::Split, 1, 1}, {3, R::Partial, -1, 0},
                {2, R::Split, 1, 0}}};
  EXPECT_EQ(l.devices(), 12);
  EXPECT_EQ(formatLayout(l), "layout[2 dim(1, 1), 3 partial, 2 dim(1, 0)]");
  std::vector<int64_t> shape = {5, 8};
  for (int64_t d = 0; d < 12; ++d) {
    auto b = l.block(shape, d);
    ASSERT_TRUE(bool(b)) << llvm::toString(b.takeError());
    EXPECT_TRUE(b->held);
    EXPECT_EQ(b->lo[0], 0);
    EXPECT_EQ(b->size[0], 5);
    EXPECT_EQ(b->size[1], 2);
    int64_t fine = d % 2, coarse = d / 6;
    EXPECT_EQ(b->lo[1], 2 * (coarse * 2 + fine)) << "device " << d;
  }
  auto past = l.block(shape, 12);
  ASSERT_TRUE(bool(past));
  EXPECT_FALSE(past->held);
  auto odd = l.block({5, 6}, 0);
  ASSERT_FALSE(bool(odd));
  EXPECT_EQ(llvm::toString(odd.takeError()),
            "4 blocks do not divide dim 1 of size 6");
}

// Device groups: the devices that differ only in the digits a collective
// runs across.
TEST(LayoutTest, GroupsOfDevices) {
  GroupsAttr g{{2, 3}, {1}};
  EXPECT_EQ(g.check(), "");
  EXPECT_EQ(g.devices(), 6);
  EXPECT_EQ(g.groups(),
            (std::vector<std::vector<int64_t>>{{0, 2, 4}, {1, 3, 5}}));
  g.over = {0, 1};
  EXPECT_EQ(g.groups(),
            (std::vector<std::vector<int64_t>>{{0, 1, 2, 3, 4, 5}}));
  g.over = {};
  EXPECT_EQ(g.groups().size(), 6u);
  EXPECT_EQ(formatGroups(GroupsAttr{{2, 3}, {1}}),
            "groups[space [2, 3], over [1]]");
  EXPECT_EQ((GroupsAttr{{2, 3}, {2}}).check(),
            "digit 2 is outside the device space of 2 digits");
  EXPECT_EQ((GroupsAttr{{}, {}}).check(), "an empty device space");
}
