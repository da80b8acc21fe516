//===- Parser.cpp - Reads the text form of the paxc IR --------------------===//
//
// A hand-written lexer and recursive-descent parser for exactly what
// Printer.cpp emits (plus free spacing and `//` comments).
//
//===----------------------------------------------------------------------===//
#include "ir/Parser.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>
#include <cstring>

namespace pax {
namespace {

struct Token {
  enum Kind {
    Eof,
    Ident,
    String,
    Int,
    Float,
    LocalRef,
    GlobalRef,
    Punct,
    Error
  };
  Kind kind = Eof;
  llvm::StringRef text; ///< spelling in the buffer
  std::string str;      ///< decoded string / reference name
  int64_t i = 0;
  double f = 0;
  llvm::SMLoc loc() const { return llvm::SMLoc::getFromPointer(text.data()); }
  bool is(char c) const {
    return kind == Punct && text.size() == 1 && text[0] == c;
  }
  bool isKeyword(llvm::StringRef k) const { return kind == Ident && text == k; }
};

class Lexer {
public:
  explicit Lexer(llvm::StringRef buf) : buf(buf), pos(0) {}

  Token next();
  /// Raw access for `tensor<...>` shapes: the text up to the next '>'.
  llvm::StringRef rawUntil(char c);
  const char *cursor() const { return buf.data() + pos; }

private:
  void skipSpace();
  bool lexQuoted(Token &t); // after the opening quote
  /// Lexes `%name` or `@name`, plain or quoted; \p c is the sigil.
  Token lexRef(size_t start, char c);
  /// Lexes a `"string"` with its escapes decoded.
  Token lexString(size_t start);
  /// Lexes a number, with a leading '-' when \p neg: `-inf`, hex or decimal.
  Token lexNumber(size_t start, bool neg);
  /// Lexes a `0x` hexadecimal integer.
  Token lexHex(size_t start);
  /// Skips the digits, '.' and exponent of a decimal number; true if it has
  /// a '.' or an exponent (a float).
  bool skipDecimal();
  /// Lexes a decimal integer or float.
  Token lexDecimal(size_t start);
  /// Lexes an identifier; `inf` and `nan` become floats.
  Token lexIdent(size_t start);
  /// Lexes `->` or a one-character punctuator, or reports character \p c.
  Token lexPunct(size_t start, char c);
  Token make(Token::Kind k, size_t start) {
    Token t;
    t.kind = k;
    t.text = buf.slice(start, pos);
    return t;
  }
  Token error(size_t start, std::string msg) {
    Token t = make(Token::Error, start);
    t.str = std::move(msg);
    return t;
  }

  llvm::StringRef buf;
  size_t pos;
};

static bool isIdentStart(char c) { return llvm::isAlpha(c) || c == '_'; }
static bool isIdentChar(char c) {
  return llvm::isAlnum(c) || c == '_' || c == '.' || c == '$';
}

void Lexer::skipSpace() {
  while (pos < buf.size()) {
    char c = buf[pos];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++pos;
    } else if (c == '/' && pos + 1 < buf.size() && buf[pos + 1] == '/') {
      while (pos < buf.size() && buf[pos] != '\n')
        ++pos;
    } else {
      break;
    }
  }
}

bool Lexer::lexQuoted(Token &t) {
  std::string s;
  while (pos < buf.size() && buf[pos] != '"') {
    char c = buf[pos++];
    if (c == '\n')
      return false;
    if (c == '\\' && pos < buf.size()) {
      char e = buf[pos++];
      if (e == 'n') {
        s += '\n';
      } else if (e == 'x' && pos + 1 < buf.size() &&
                 llvm::isHexDigit(buf[pos]) && llvm::isHexDigit(buf[pos + 1])) {
        s += char(llvm::hexFromNibbles(buf[pos], buf[pos + 1]));
        pos += 2;
      } else {
        s += e;
      }
    } else {
      s += c;
    }
  }
  if (pos >= buf.size())
    return false;
  ++pos; // closing quote
  t.str = std::move(s);
  return true;
}

Token Lexer::next() {
  skipSpace();
  size_t start = pos;
  if (pos >= buf.size())
    return make(Token::Eof, start);
  char c = buf[pos];

  if (c == '%' || c == '@')
    return lexRef(start, c);
  if (c == '"')
    return lexString(start);
  bool neg =
      c == '-' && pos + 1 < buf.size() &&
      (llvm::isDigit(buf[pos + 1]) || buf.substr(pos + 1).starts_with("inf"));
  if (llvm::isDigit(c) || neg)
    return lexNumber(start, neg);
  if (isIdentStart(c))
    return lexIdent(start);
  return lexPunct(start, c);
}

Token Lexer::lexRef(size_t start, char c) {
  ++pos;
  Token t;
  if (pos < buf.size() && buf[pos] == '"') {
    ++pos;
    if (!lexQuoted(t))
      return error(start, "unterminated quoted name");
  } else {
    size_t s = pos;
    while (pos < buf.size() && isIdentChar(buf[pos]))
      ++pos;
    if (s == pos)
      return error(start, std::string("expected a name after '") + c + "'");
    t.str = buf.slice(s, pos).str();
  }
  Token r = make(c == '%' ? Token::LocalRef : Token::GlobalRef, start);
  // `%"0"` (an argument called "0") is not the op result `%0`.
  bool quotedNumber = c == '%' && buf[start + 1] == '"' && !t.str.empty() &&
                      llvm::all_of(t.str, llvm::isDigit);
  r.str = quotedNumber ? "\"" + t.str : std::move(t.str);
  return r;
}

Token Lexer::lexString(size_t start) {
  ++pos;
  Token t;
  if (!lexQuoted(t))
    return error(start, "unterminated string");
  Token r = make(Token::String, start);
  r.str = std::move(t.str);
  return r;
}

Token Lexer::lexNumber(size_t start, bool neg) {
  if (neg)
    ++pos;
  if (buf.substr(pos).starts_with("inf")) {
    pos += 3;
    Token t = make(Token::Float, start);
    t.f = -INFINITY;
    return t;
  }
  if (buf.substr(pos).starts_with("0x"))
    return lexHex(start);
  return lexDecimal(start);
}

Token Lexer::lexHex(size_t start) {
  pos += 2;
  size_t s = pos;
  while (pos < buf.size() && llvm::isHexDigit(buf[pos]))
    ++pos;
  Token t = make(Token::Int, start);
  uint64_t v = 0;
  if (buf.slice(s, pos).getAsInteger(16, v))
    return error(start, "bad hexadecimal number");
  t.i = int64_t(v);
  return t;
}

bool Lexer::skipDecimal() {
  bool isFloat = false;
  while (pos < buf.size()) {
    char d = buf[pos];
    if (llvm::isDigit(d)) {
      ++pos;
    } else if (d == '.' || d == 'e' || d == 'E') {
      isFloat = true;
      ++pos;
      if ((d == 'e' || d == 'E') && pos < buf.size() &&
          (buf[pos] == '-' || buf[pos] == '+'))
        ++pos;
    } else {
      break;
    }
  }
  return isFloat;
}

Token Lexer::lexDecimal(size_t start) {
  bool isFloat = skipDecimal();
  Token t = make(isFloat ? Token::Float : Token::Int, start);
  if (isFloat) {
    std::string s = t.text.str();
    char *end = nullptr;
    t.f = std::strtod(s.c_str(), &end);
    if (end != s.c_str() + s.size())
      return error(start, "bad number '" + s + "'");
  } else if (t.text.getAsInteger(10, t.i)) {
    return error(start, "integer '" + t.text.str() + "' is out of range");
  }
  return t;
}

Token Lexer::lexIdent(size_t start) {
  while (pos < buf.size() && isIdentChar(buf[pos]))
    ++pos;
  Token t = make(Token::Ident, start);
  if (t.text == "inf" || t.text == "nan") {
    t.kind = Token::Float;
    t.f = t.text == "inf" ? INFINITY : NAN;
  }
  return t;
}

Token Lexer::lexPunct(size_t start, char c) {
  if (c == '-' && pos + 1 < buf.size() && buf[pos + 1] == '>') {
    pos += 2;
    return make(Token::Punct, start);
  }
  if (llvm::StringRef("()[]{}<>,:=*+-").contains(c)) {
    ++pos;
    return make(Token::Punct, start);
  }
  ++pos;
  return error(start, std::string("unexpected character '") + c + "'");
}

llvm::StringRef Lexer::rawUntil(char c) {
  size_t start = pos;
  while (pos < buf.size() && buf[pos] != c && buf[pos] != '\n')
    ++pos;
  return buf.slice(start, pos);
}

class Parser {
public:
  Parser(llvm::SourceMgr &sm, unsigned bufferId, OpLocations *locations)
      : sm(sm), lex(sm.getMemoryBuffer(bufferId)->getBuffer()),
        locations(locations) {
    advance();
  }

  std::unique_ptr<Module> parse();

private:
  // Token helpers. Every parse function returns false after reporting.
  void advance() { tok = lex.next(); }
  bool fail(llvm::SMLoc loc, const llvm::Twine &msg);
  bool fail(const llvm::Twine &msg) { return fail(tok.loc(), msg); }
  bool expect(char c, llvm::StringRef context);
  bool expectKeyword(llvm::StringRef k);
  bool consumeIf(char c) {
    if (!tok.is(c))
      return false;
    advance();
    return true;
  }
  bool parseIdent(std::string &out, llvm::StringRef what);
  bool parseInt(int64_t &out, llvm::StringRef what);
  bool parseNumber(double &out, bool &isFloat);

  bool parseType(TensorType &t);
  bool parseAttrs(AttrMap &attrs);
  bool parseAttrValue(AttrValue &v);
  bool parseLayout(AttrValue &v);
  bool parseGroups(AttrValue &v);
  bool parseGroup(const Op &op, AccessExpr &e);
  bool parseIntList(std::vector<int64_t> &out, const char *what);
  bool parseGlobal(Module &m, bool isParam);
  bool parseDense(Global &g);
  bool parseFunc(Module &m);
  /// `(%a: type, ...)`, the function's arguments.
  bool parseArgs(Func &f);
  /// `-> (name: type, ...)`, the function's results' names and types.
  bool parseResults(Func &f, llvm::SmallVectorImpl<TensorType> &resultTypes);
  /// `return v, ...`, checked against the declared result types.
  bool parseReturn(Func &f, llvm::ArrayRef<TensorType> resultTypes);
  bool parseOp(Func &f);
  /// `%a, %b`, an op's result names, none defined before.
  bool parseDefs(llvm::SmallVectorImpl<Token> &defs);
  /// `= compute "KIND"`, the op's kind.
  bool parseComputeKind(OpKind &kind);
  /// `iter [d: N par, ...]`, the op's iteration space.
  bool parseIters(Op &op);
  /// `d: N par`, one iteration dim, not yet in \p op.
  bool parseIterDim(const Op &op, IterDim &d);
  /// `ins(%v map, ...)`, the op's operands and their access maps.
  bool parseIns(Op &op);
  /// `outs(map: type, ...)`, the op's results' access maps and types.
  bool parseOuts(Op &op);
  /// `fused "NAME" { op... }`: the ops of one fused kernel.
  bool parseFused(Func &f);
  llvm::StringSet<> kernels; ///< the fused kernels' names so far
  bool parseMap(const Op &op, AccessMap &map);
  bool parseExpr(const Op &op, AccessExpr &e);
  /// `gather(d)`, a data-dependent index in the range of dim d.
  bool parseGather(const Op &op, AccessExpr &e);
  /// `s*d + t*k + c`, an affine access of one or two dims.
  bool parseAffine(const Op &op, AccessExpr &e);
  /// One dim of an affine access and its coefficient.
  using AffineTerm = std::pair<int64_t, unsigned>;
  /// The terms `c*d`, `d` or `c` of an affine access, joined by + and -:
  /// the dims with their coefficients, and the constants' sum.
  bool parseAffineTerms(const Op &op, llvm::SmallVectorImpl<AffineTerm> &terms,
                        int64_t &offset);
  bool parseDimName(const Op &op, unsigned &dim);
  bool resolve(const Token &ref, Value *&v);

  llvm::SourceMgr &sm;
  Lexer lex;
  Token tok;
  OpLocations *locations;
  Module *module = nullptr;
  llvm::StringMap<Value *> locals;
  bool failed = false;
};

bool Parser::fail(llvm::SMLoc loc, const llvm::Twine &msg) {
  if (!failed)
    sm.PrintMessage(loc, llvm::SourceMgr::DK_Error, msg);
  failed = true;
  return false;
}

bool Parser::expect(char c, llvm::StringRef context) {
  if (tok.kind == Token::Error)
    return fail(tok.str);
  if (!tok.is(c))
    return fail(llvm::Twine("expected '") + llvm::Twine(c) + "' " + context);
  advance();
  return true;
}

bool Parser::expectKeyword(llvm::StringRef k) {
  if (!tok.isKeyword(k))
    return fail("expected '" + k + "'");
  advance();
  return true;
}

bool Parser::parseIdent(std::string &out, llvm::StringRef what) {
  if (tok.kind != Token::Ident && tok.kind != Token::String)
    return fail("expected " + what);
  out = tok.kind == Token::Ident ? tok.text.str() : tok.str;
  advance();
  return true;
}

bool Parser::parseInt(int64_t &out, llvm::StringRef what) {
  if (tok.kind != Token::Int)
    return fail("expected " + what);
  out = tok.i;
  advance();
  return true;
}

bool Parser::parseNumber(double &out, bool &isFloat) {
  if (tok.kind == Token::Int) {
    out = double(tok.i);
    isFloat = false;
  } else if (tok.kind == Token::Float) {
    out = tok.f;
    isFloat = true;
  } else {
    return fail("expected a number");
  }
  advance();
  return true;
}

bool Parser::parseType(TensorType &t) {
  llvm::SMLoc loc = tok.loc();
  if (!tok.isKeyword("tensor"))
    return fail("expected a tensor type");
  // The shape is lexed raw: "2x3xf32>" is not a token sequence.
  if (*lex.cursor() != '<')
    return fail(llvm::SMLoc::getFromPointer(lex.cursor()),
                "expected '<' after 'tensor'");
  lex.next();
  llvm::StringRef body = lex.rawUntil('>');
  if (*lex.cursor() != '>')
    return fail(loc, "expected '>' to close the tensor type");
  lex.next();
  llvm::SmallVector<llvm::StringRef, 6> parts;
  body.split(parts, 'x');
  t.shape.clear();
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    int64_t d;
    if (parts[i].trim().getAsInteger(10, d) || d < 0 || d > kMaxExtent)
      return fail(loc, "bad dimension '" + parts[i] + "' in tensor type");
    t.shape.push_back(d);
  }
  auto dt = parseDType(parts.back().trim());
  if (!dt)
    return fail(loc, "unknown element type '" + parts.back().trim() + "'");
  t.elem = *dt;
  advance();
  return true;
}

bool Parser::parseAttrValue(AttrValue &v) {
  if (tok.isKeyword("layout"))
    return parseLayout(v);
  if (tok.isKeyword("groups"))
    return parseGroups(v);
  if (tok.kind == Token::String) {
    v = tok.str;
    advance();
    return true;
  }
  if (tok.kind == Token::Int || tok.kind == Token::Float) {
    if (tok.kind == Token::Int)
      v = tok.i;
    else
      v = float(tok.f);
    advance();
    return true;
  }
  if (!tok.is('['))
    return fail("expected an attribute value");
  advance();
  std::vector<int64_t> ints;
  std::vector<float> floats;
  bool anyFloat = false;
  while (!tok.is(']')) {
    double d = 0;
    bool isF = false;
    if (tok.kind == Token::Int)
      ints.push_back(tok.i);
    if (!parseNumber(d, isF))
      return false;
    anyFloat |= isF;
    floats.push_back(float(d));
    if (!tok.is(']') && !expect(',', "in attribute list"))
      return false;
  }
  advance();
  if (anyFloat)
    v = std::move(floats);
  else
    v = std::move(ints);
  return true;
}

bool Parser::parseIntList(std::vector<int64_t> &out, const char *what) {
  if (!expect('[', what))
    return false;
  while (!tok.is(']')) {
    if (tok.kind != Token::Int)
      return fail(std::string("expected an integer in ") + what);
    out.push_back(tok.i);
    advance();
    if (!tok.is(']') && !expect(',', what))
      return false;
  }
  advance();
  return true;
}

// layout[2 partial, 2 dim(0, 1), 3 rep]
bool Parser::parseLayout(AttrValue &v) {
  advance();
  LayoutAttr l;
  if (!expect('[', "after 'layout'"))
    return false;
  while (!tok.is(']')) {
    Digit d;
    if (tok.kind != Token::Int || tok.i < 1)
      return fail("expected a digit's size (a positive integer) in a layout");
    d.size = tok.i;
    advance();
    if (tok.isKeyword("rep")) {
      d.role = Digit::Role::Replicated;
      advance();
    } else if (tok.isKeyword("partial")) {
      d.role = Digit::Role::Partial;
      advance();
    } else if (tok.isKeyword("dim")) {
      advance();
      d.role = Digit::Role::Split;
      if (!expect('(', "after 'dim'"))
        return false;
      if (tok.kind != Token::Int || tok.i < 0)
        return fail("expected a tensor dim in 'dim(dim, level)'");
      d.tensorDim = int(tok.i);
      advance();
      if (!expect(',', "in 'dim(dim, level)'"))
        return false;
      if (tok.kind != Token::Int || tok.i < 0)
        return fail("expected a level in 'dim(dim, level)'");
      d.level = int(tok.i);
      advance();
      if (!expect(')', "after 'dim(dim, level'"))
        return false;
    } else {
      return fail("expected 'rep', 'partial' or 'dim(dim, level)' after a "
                  "digit's size");
    }
    l.digits.push_back(d);
    if (!tok.is(']') && !expect(',', "between a layout's digits"))
      return false;
  }
  advance();
  v = std::move(l);
  return true;
}

// groups[space [2, 2], over [0, 1]]
bool Parser::parseGroups(AttrValue &v) {
  llvm::SMLoc loc = tok.loc();
  advance();
  GroupsAttr g;
  if (!expect('[', "after 'groups'"))
    return false;
  if (!tok.isKeyword("space"))
    return fail("expected 'space' in groups");
  advance();
  if (!parseIntList(g.space, "a groups' space"))
    return false;
  if (!expect(',', "after a groups' space"))
    return false;
  if (!tok.isKeyword("over"))
    return fail("expected 'over' in groups");
  advance();
  if (!parseIntList(g.over, "a groups' over"))
    return false;
  if (!expect(']', "after a groups' over"))
    return false;
  if (std::string why = g.check(); !why.empty())
    return fail(loc, "bad groups: " + why);
  v = std::move(g);
  return true;
}

bool Parser::parseAttrs(AttrMap &attrs) {
  if (!consumeIf('{'))
    return true;
  while (!tok.is('}')) {
    llvm::SMLoc loc = tok.loc();
    std::string key;
    AttrValue v;
    if (!parseIdent(key, "an attribute name") ||
        !expect('=', "after attribute name") || !parseAttrValue(v))
      return false;
    if (!attrs.emplace(key, std::move(v)).second)
      return fail(loc, "duplicate attribute '" + key + "'");
    if (!tok.is('}') && !expect(',', "between attributes"))
      return false;
  }
  advance();
  return true;
}

template <typename T> static void appendRaw(std::vector<uint8_t> &out, T v) {
  uint8_t b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.insert(out.end(), b, b + sizeof(T));
}

bool Parser::parseDense(Global &g) {
  llvm::SMLoc loc = tok.loc();
  if (!expect('<', "after 'dense'") || !expect('[', "to start dense values"))
    return false;
  DType t = g.value.type.elem;
  while (!tok.is(']')) {
    double d;
    bool isF;
    int64_t i = tok.i;
    if (!parseNumber(d, isF))
      return false;
    switch (t) {
    case DType::F32:
      appendRaw(g.bytes, float(d));
      break;
    case DType::F64:
      appendRaw(g.bytes, d);
      break;
    case DType::F16:
    case DType::BF16:
    case DType::I16:
    case DType::U16:
      appendRaw(g.bytes, uint16_t(i));
      break;
    case DType::I8:
    case DType::U8:
    case DType::I1:
      appendRaw(g.bytes, uint8_t(i));
      break;
    case DType::I32:
    case DType::U32:
      appendRaw(g.bytes, uint32_t(i));
      break;
    case DType::I64:
    case DType::U64:
      appendRaw(g.bytes, i);
      break;
    }
    if (!tok.is(']') && !expect(',', "between dense values"))
      return false;
  }
  advance();
  if (!expect('>', "to close dense values"))
    return false;
  int64_t want = g.value.type.numel();
  int64_t have = int64_t(g.bytes.size() / dtypeBytes(t));
  if (have != want)
    return fail(loc, "dense data of @" + g.name() + " has " +
                         llvm::Twine(have) + " values but its type " +
                         g.value.type.str() + " has " + llvm::Twine(want));
  return true;
}

bool Parser::parseGlobal(Module &m, bool isParam) {
  advance(); // param | const
  if (tok.kind != Token::GlobalRef)
    return fail("expected a global name '@...'");
  llvm::SMLoc loc = tok.loc();
  std::string name = tok.str;
  advance();
  if (m.findGlobal(name))
    return fail(loc, "redefinition of @" + name);
  TensorType type;
  if (!expect(':', "after global name") || !parseType(type) ||
      !expect('=', "before the global's data"))
    return false;
  Global *g = m.addGlobal(name, type);
  g->isParameter = isParam;
  if (tok.isKeyword("fill")) {
    advance();
    bool isF;
    g->source = DataSource::Fill;
    return expect('(', "after 'fill'") && parseNumber(g->fill, isF) &&
           expect(')', "after the fill value");
  }
  if (tok.isKeyword("initializer") || tok.isKeyword("input")) {
    g->source =
        tok.isKeyword("input") ? DataSource::Input : DataSource::Initializer;
    advance();
    if (!expect('(', "before the tensor name"))
      return false;
    if (tok.kind != Token::String)
      return fail("expected a quoted tensor name");
    g->ref = tok.str;
    advance();
    return expect(')', "after the tensor name");
  }
  if (tok.isKeyword("dense")) {
    advance();
    g->source = DataSource::Dense;
    return parseDense(*g);
  }
  return fail("expected fill(...), initializer(...), input(...) or dense<...>");
}

bool Parser::resolve(const Token &ref, Value *&v) {
  if (ref.kind == Token::GlobalRef) {
    Global *g = module->findGlobal(ref.str);
    if (!g)
      return fail(ref.loc(), "use of undefined global @" + ref.str);
    v = &g->value;
    return true;
  }
  if (ref.kind != Token::LocalRef)
    return fail(ref.loc(), "expected a value '%...' or '@...'");
  auto it = locals.find(ref.str);
  if (it == locals.end())
    return fail(ref.loc(), "use of undefined value %" + ref.str);
  v = it->second;
  return true;
}

bool Parser::parseDimName(const Op &op, unsigned &dim) {
  if (tok.kind != Token::Ident)
    return fail("expected an iteration dim name");
  int d = op.findIter(tok.text);
  if (d < 0)
    return fail("unknown iteration dim '" + tok.text + "'");
  dim = unsigned(d);
  advance();
  return true;
}

// (h, d), (h, *64), (h, *64) + 768
bool Parser::parseGroup(const Op &op, AccessExpr &e) {
  advance();
  llvm::SmallVector<unsigned, 4> dims;
  int64_t whole = 1;
  do {
    if (consumeIf('*')) {
      if (tok.kind != Token::Int || tok.i < 2)
        return fail("expected the extent (2 or more) of the dim a group "
                    "reads whole after '*'");
      whole = tok.i;
      advance();
      break;
    }
    unsigned d;
    if (!parseDimName(op, d))
      return false;
    dims.push_back(d);
  } while (consumeIf(','));
  if (!expect(')', "to close the dim group (a whole dim '*N' comes last)"))
    return false;
  if (dims.empty() || dims.size() + (whole > 1) < 2)
    return fail(whole > 1 ? "a dim group needs a dim before its whole one"
                          : "a dim group needs at least two dims");
  int64_t offset = 0;
  if (consumeIf('+')) {
    if (tok.kind != Token::Int || tok.i < 0)
      return fail("expected a group's offset after '+'");
    offset = tok.i;
    advance();
  }
  e = AccessExpr::group(dims, whole, offset);
  return true;
}

bool Parser::parseExpr(const Op &op, AccessExpr &e) {
  if (tok.isKeyword("_")) {
    advance();
    e = AccessExpr::broadcast();
    return true;
  }
  if (tok.is('*')) {
    advance();
    e = AccessExpr::full();
    return true;
  }
  if (tok.isKeyword("gather"))
    return parseGather(op, e);
  if (tok.is('('))
    return parseGroup(op, e);
  return parseAffine(op, e);
}

bool Parser::parseGather(const Op &op, AccessExpr &e) {
  advance();
  unsigned d;
  if (!expect('(', "after 'gather'") || !parseDimName(op, d) ||
      !expect(')', "after the gathered dim"))
    return false;
  e = AccessExpr::lookup(d);
  return true;
}

bool Parser::parseAffine(const Op &op, AccessExpr &e) {
  // Affine: terms `c*d`, `d` or `c`, joined by + and -.
  llvm::SMLoc start = tok.loc();
  llvm::SmallVector<AffineTerm, 2> terms;
  int64_t offset = 0;
  if (!parseAffineTerms(op, terms, offset))
    return false;
  if (terms.empty() || terms.size() > 2)
    return fail(start, "an affine access needs one or two dims");
  for (auto &[c, d] : terms)
    if (c <= 0)
      return fail(start, "dim coefficients must be positive");
  e = terms.size() == 1
          ? AccessExpr::shifted(terms[0].second, terms[0].first, offset)
          : AccessExpr::window(terms[0].second, terms[1].second, terms[0].first,
                               terms[1].first, offset);
  return true;
}

bool Parser::parseAffineTerms(const Op &op,
                              llvm::SmallVectorImpl<AffineTerm> &terms,
                              int64_t &offset) {
  int sign = 1;
  while (true) {
    if (tok.kind == Token::Int) {
      int64_t c = tok.i * sign;
      advance();
      if (consumeIf('*')) {
        unsigned d;
        if (!parseDimName(op, d))
          return false;
        terms.push_back({c, d});
      } else {
        offset += c;
      }
    } else if (tok.kind == Token::Ident) {
      unsigned d = 0;
      if (!parseDimName(op, d))
        return false;
      terms.push_back({sign, d});
    } else {
      return fail("expected an access expression");
    }
    if (tok.is('+') || tok.is('-')) {
      sign = tok.is('-') ? -1 : 1;
      advance();
    } else if (tok.kind == Token::Int && tok.i < 0) {
      sign = 1; // "kh-3" lexes as `kh` `-3`
    } else {
      break;
    }
  }
  return true;
}

bool Parser::parseMap(const Op &op, AccessMap &map) {
  if (!expect('[', "to start an access map"))
    return false;
  while (!tok.is(']')) {
    AccessExpr e;
    if (!parseExpr(op, e))
      return false;
    map.push_back(e);
    if (!tok.is(']') && !expect(',', "between access expressions"))
      return false;
  }
  advance();
  return true;
}

bool Parser::parseFused(Func &f) {
  advance();
  if (tok.kind != Token::String)
    return fail("expected the fused kernel's name as a string");
  std::string name = tok.str;
  if (name.empty())
    return fail("a fused kernel needs a name");
  if (!kernels.insert(name).second)
    return fail("fused kernel '" + name + "' appears twice");
  advance();
  if (!expect('{', "to start the fused kernel's ops"))
    return false;
  size_t first = f.ops.size();
  while (!consumeIf('}')) {
    if (tok.kind == Token::Eof || tok.isKeyword("return"))
      return fail("expected '}' to close fused kernel '" + name + "'");
    if (tok.isKeyword("fused"))
      return fail("fused kernels do not nest");
    if (!parseOp(f))
      return false;
    f.ops.back()->attrs["kernel"] = name;
  }
  if (f.ops.size() == first)
    return fail("fused kernel '" + name + "' has no ops");
  return true;
}

bool Parser::parseOp(Func &f) {
  llvm::SMLoc loc = tok.loc();
  llvm::SmallVector<Token, 2> defs;
  if (!parseDefs(defs))
    return false;
  OpKind kind{};
  if (!parseComputeKind(kind))
    return false;
  Op *op = f.addOp(kind);
  if (locations)
    (*locations)[op] = loc;

  if (!parseIters(*op) || !parseIns(*op) || !parseOuts(*op))
    return false;
  if (op->results.size() != defs.size())
    return fail(loc, llvm::Twine(defs.size()) + " result names for " +
                         llvm::Twine(op->results.size()) + " results");
  for (size_t i = 0; i < defs.size(); ++i)
    locals[defs[i].str] = op->results[i].value.get();
  return parseAttrs(op->attrs);
}

bool Parser::parseDefs(llvm::SmallVectorImpl<Token> &defs) {
  while (tok.kind == Token::LocalRef) {
    if (locals.count(tok.str))
      return fail("redefinition of %" + tok.str);
    defs.push_back(tok);
    advance();
    if (!consumeIf(','))
      break;
  }
  if (defs.empty())
    return fail("expected an op or 'return'");
  return true;
}

bool Parser::parseComputeKind(OpKind &kind) {
  if (!expect('=', "after result names") || !expectKeyword("compute"))
    return false;
  if (tok.kind != Token::String)
    return fail("expected the op kind as a string");
  auto k = parseOpKind(tok.str);
  if (!k)
    return fail("unknown op kind '" + tok.str + "'");
  advance();
  kind = *k;
  return true;
}

bool Parser::parseIters(Op &op) {
  if (!expectKeyword("iter") || !expect('[', "to start the iteration space"))
    return false;
  while (!tok.is(']')) {
    IterDim d;
    if (!parseIterDim(op, d))
      return false;
    op.iters.push_back(d);
    if (!tok.is(']') && !expect(',', "between iteration dims"))
      return false;
  }
  advance();
  return true;
}

bool Parser::parseIterDim(const Op &op, IterDim &d) {
  llvm::SMLoc dl = tok.loc();
  if (tok.kind != Token::Ident || tok.text == "_" || tok.text == "gather")
    return fail("expected an iteration dim name");
  d.name = tok.text.str();
  advance();
  if (op.findIter(d.name) >= 0)
    return fail(dl, "duplicate iteration dim '" + d.name + "'");
  if (!expect(':', "after the dim name") || !parseInt(d.extent, "an extent"))
    return false;
  if (d.extent <= 0 || d.extent > kMaxExtent)
    return fail(dl, "extent of '" + d.name + "' must be in [1, 2^48]");
  auto k = tok.kind == Token::Ident ? parseIterKind(tok.text) : std::nullopt;
  if (!k)
    return fail("expected 'par', 'red' or 'seq'");
  d.kind = *k;
  advance();
  return true;
}

bool Parser::parseIns(Op &op) {
  if (!expectKeyword("ins") || !expect('(', "after 'ins'"))
    return false;
  while (!tok.is(')')) {
    Operand o;
    Token ref = tok;
    advance();
    if (!resolve(ref, o.value) || !parseMap(op, o.map))
      return false;
    op.operands.push_back(std::move(o));
    if (!tok.is(')') && !expect(',', "between operands"))
      return false;
  }
  advance();
  return true;
}

bool Parser::parseOuts(Op &op) {
  if (!expectKeyword("outs") || !expect('(', "after 'outs'"))
    return false;
  while (!tok.is(')')) {
    AccessMap map;
    TensorType type;
    if (!parseMap(op, map) || !expect(':', "before the result type") ||
        !parseType(type))
      return false;
    op.addResult(type, std::move(map));
    if (!tok.is(')') && !expect(',', "between results"))
      return false;
  }
  advance();
  return true;
}

bool Parser::parseArgs(Func &f) {
  if (!expect('(', "to start the arguments"))
    return false;
  while (!tok.is(')')) {
    if (tok.kind != Token::LocalRef)
      return fail("expected an argument '%name'");
    std::string name = tok.str;
    if (locals.count(name))
      return fail("duplicate argument %" + name);
    advance();
    TensorType t;
    if (!expect(':', "after the argument name") || !parseType(t))
      return false;
    locals[name] = f.addArg(llvm::StringRef(name).ltrim('"').str(), t);
    if (!tok.is(')') && !expect(',', "between arguments"))
      return false;
  }
  advance();
  return true;
}

bool Parser::parseResults(Func &f,
                          llvm::SmallVectorImpl<TensorType> &resultTypes) {
  if (!tok.is('-') && !(tok.kind == Token::Punct && tok.text == "->"))
    return fail("expected '->' before the results");
  advance();
  if (!expect('(', "to start the results"))
    return false;
  while (!tok.is(')')) {
    std::string name;
    TensorType t;
    if (!parseIdent(name, "a result name") ||
        !expect(':', "after the result name") || !parseType(t))
      return false;
    f.returnNames.push_back(name);
    resultTypes.push_back(t);
    if (!tok.is(')') && !expect(',', "between results"))
      return false;
  }
  advance();
  return true;
}

bool Parser::parseReturn(Func &f, llvm::ArrayRef<TensorType> resultTypes) {
  llvm::SMLoc retLoc = tok.loc();
  advance();
  while (tok.kind == Token::LocalRef || tok.kind == Token::GlobalRef) {
    Value *v;
    if (!resolve(tok, v))
      return false;
    f.returns.push_back(v);
    advance();
    if (!consumeIf(','))
      break;
  }
  if (f.returns.size() != resultTypes.size())
    return fail(retLoc, "'return' has " + llvm::Twine(f.returns.size()) +
                            " values but the function declares " +
                            llvm::Twine(resultTypes.size()) + " results");
  for (size_t i = 0; i < resultTypes.size(); ++i)
    if (!(f.returns[i]->type == resultTypes[i]))
      return fail(retLoc, "returned value " + llvm::Twine(i) + " has type " +
                              f.returns[i]->type.str() +
                              " but the function declares " +
                              resultTypes[i].str());
  return true;
}

bool Parser::parseFunc(Module &m) {
  if (!expectKeyword("func"))
    return false;
  if (tok.kind != Token::GlobalRef)
    return fail("expected the function name '@...'");
  Func &f = m.main;
  f.name = tok.str;
  advance();
  llvm::SmallVector<TensorType, 2> resultTypes;
  if (!parseArgs(f) || !parseResults(f, resultTypes))
    return false;
  if (!expect('{', "to start the function body"))
    return false;
  while (!tok.isKeyword("return")) {
    if (tok.kind == Token::Eof)
      return fail("expected 'return' before the end of the file");
    if (tok.kind == Token::Error)
      return fail(tok.str);
    if (!(tok.isKeyword("fused") ? parseFused(f) : parseOp(f)))
      return false;
  }
  return parseReturn(f, resultTypes) && expect('}', "to close the function");
}

std::unique_ptr<Module> Parser::parse() {
  auto m = std::make_unique<Module>();
  module = m.get();
  if (!expectKeyword("module"))
    return nullptr;
  if (tok.kind != Token::GlobalRef)
    return fail("expected the module name '@...'"), nullptr;
  m->name = tok.str;
  advance();
  if (tok.isKeyword("attributes")) {
    advance();
    if (!tok.is('{'))
      return fail("expected '{' after 'attributes'"), nullptr;
    if (!parseAttrs(m->attrs))
      return nullptr;
  }
  if (!expect('{', "to start the module body"))
    return nullptr;
  while (tok.isKeyword("param") || tok.isKeyword("const"))
    if (!parseGlobal(*m, tok.isKeyword("param")))
      return nullptr;
  if (!parseFunc(*m) || !expect('}', "to close the module"))
    return nullptr;
  if (tok.kind != Token::Eof)
    return fail("unexpected text after the module"), nullptr;
  return m;
}

} // namespace

std::unique_ptr<Module> parseModule(llvm::SourceMgr &sm, unsigned bufferId,
                                    OpLocations *locations) {
  return Parser(sm, bufferId, locations).parse();
}

} // namespace pax
