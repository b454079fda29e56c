#include "model/chat/jinja_parser.h"

#include <algorithm>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "model/chat/jinja_builtins.h"
#include "model/chat/jinja_lexer.h"

namespace redline::model::chat::jinja {
namespace {

using TT = Token::Type;

Status ParseError(int line, std::string_view message) {
  return Status::InvalidArgument("line " + std::to_string(line) + ": " +
                                 std::string(message));
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  Result<Body> Run() {
    Body body;
    std::string end;
    RL_RETURN_IF_ERROR(ParseBody({}, &body, &end));
    return body;
  }

 private:
  // RAII nesting guard.
  class DepthGuard {
   public:
    explicit DepthGuard(Parser* p) : p_(p) { ++p_->depth_; }
    ~DepthGuard() { --p_->depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;

   private:
    Parser* p_;
  };

  Status CheckDepth() const {
    if (depth_ > kMaxParseDepth) {
      return ParseError(Cur().line, "template nests too deeply (limit " +
                                        std::to_string(kMaxParseDepth) + ")");
    }
    return Status::Ok();
  }

  const Token& Cur() const { return toks_[pos_]; }
  const Token& Look(size_t k = 1) const {
    return toks_[std::min(pos_ + k, toks_.size() - 1)];
  }
  void Advance() {
    if (pos_ + 1 < toks_.size()) ++pos_;
  }
  bool IsName(const Token& t, std::string_view name) const {
    return t.type == TT::kName && t.text == name;
  }
  bool IsOp(const Token& t, std::string_view op) const {
    return t.type == TT::kOperator && t.text == op;
  }
  bool SkipName(std::string_view name) {
    if (!IsName(Cur(), name)) return false;
    Advance();
    return true;
  }
  bool SkipOp(std::string_view op) {
    if (!IsOp(Cur(), op)) return false;
    Advance();
    return true;
  }
  Status Unexpected(std::string_view expected) const {
    return ParseError(Cur().line, "expected " + std::string(expected) +
                                      ", got " + DescribeToken(Cur()));
  }
  Status ExpectOp(std::string_view op) {
    if (!SkipOp(op)) return Unexpected("'" + std::string(op) + "'");
    return Status::Ok();
  }
  Status ExpectBlockEnd() {
    if (Cur().type != TT::kBlockEnd)
      return Unexpected("end of statement block");
    Advance();
    return Status::Ok();
  }
  Result<std::string> ExpectName() {
    if (Cur().type != TT::kName) return Unexpected("name");
    std::string n = Cur().text;
    Advance();
    return n;
  }

  // Parses statements until `{% <one of end_tags>` (consumed up to and
  // including the tag name, which goes to *found) or end of template (only
  // allowed when end_tags is empty).
  Status ParseBody(std::initializer_list<std::string_view> end_tags, Body* body,
                   std::string* found) {
    DepthGuard guard(this);
    RL_RETURN_IF_ERROR(CheckDepth());
    while (true) {
      const Token& t = Cur();
      switch (t.type) {
        case TT::kEof: {
          if (end_tags.size() == 0) return Status::Ok();
          std::string expected;
          for (std::string_view e : end_tags) {
            if (!expected.empty()) expected += " or ";
            expected += "'" + std::string(e) + "'";
          }
          return ParseError(t.line,
                            "unexpected end of template, expected " + expected);
        }
        case TT::kData: {
          auto s = std::make_unique<Stmt>();
          s->kind = StmtKind::kText;
          s->line = t.line;
          s->text = t.text;
          body->push_back(std::move(s));
          Advance();
          break;
        }
        case TT::kVarBegin: {
          auto s = std::make_unique<Stmt>();
          s->kind = StmtKind::kOutput;
          s->line = t.line;
          Advance();
          RL_ASSIGN_OR_RETURN(s->expr, ParseTuple(true, {}, false));
          if (Cur().type != TT::kVarEnd)
            return Unexpected("end of print statement");
          Advance();
          body->push_back(std::move(s));
          break;
        }
        case TT::kBlockBegin: {
          Advance();
          const Token& tag = Cur();
          if (tag.type != TT::kName) return Unexpected("statement name");
          for (std::string_view e : end_tags) {
            if (tag.text == e) {
              *found = tag.text;
              Advance();
              return Status::Ok();
            }
          }
          RL_RETURN_IF_ERROR(ParseStatement(body));
          break;
        }
        default:
          return ParseError(t.line, "unexpected " + DescribeToken(t));
      }
    }
  }

  Status ParseStatement(Body* body) {
    const Token& tag = Cur();
    const int line = tag.line;
    const std::string name = tag.text;
    auto s = std::make_unique<Stmt>();
    s->line = line;
    Advance();
    if (name == "if") {
      RL_RETURN_IF_ERROR(ParseIf(s.get()));
    } else if (name == "for") {
      RL_RETURN_IF_ERROR(ParseFor(s.get()));
    } else if (name == "set") {
      RL_RETURN_IF_ERROR(ParseSet(s.get()));
    } else if (name == "macro") {
      RL_RETURN_IF_ERROR(ParseMacro(s.get()));
    } else if (name == "break" || name == "continue") {
      if (loop_depth_ == 0)
        return ParseError(line, "'" + name + "' outside of a loop");
      s->kind = name == "break" ? StmtKind::kBreak : StmtKind::kContinue;
      RL_RETURN_IF_ERROR(ExpectBlockEnd());
    } else if (name == "filter") {
      s->kind = StmtKind::kFilterBlock;
      RL_ASSIGN_OR_RETURN(s->expr,
                          ParseFilterChain(nullptr, /*start_inline=*/true));
      RL_RETURN_IF_ERROR(ExpectBlockEnd());
      RL_RETURN_IF_ERROR(ParseSimpleBody("endfilter", s.get()));
    } else if (name == "with") {
      s->kind = StmtKind::kWith;
      while (Cur().type != TT::kBlockEnd) {
        if (!s->targets.empty()) RL_RETURN_IF_ERROR(ExpectOp(","));
        RL_ASSIGN_OR_RETURN(std::string target, ExpectName());
        RL_RETURN_IF_ERROR(ExpectOp("="));
        RL_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
        s->targets.push_back(std::move(target));
        s->values.push_back(std::move(value));
      }
      RL_RETURN_IF_ERROR(ExpectBlockEnd());
      RL_RETURN_IF_ERROR(ParseSimpleBody("endwith", s.get()));
    } else if (name == "generation") {
      // transformers' AssistantTracker marks assistant text; it renders in
      // place.
      s->kind = StmtKind::kScope;
      RL_RETURN_IF_ERROR(ExpectBlockEnd());
      RL_RETURN_IF_ERROR(ParseSimpleBody("endgeneration", s.get()));
    } else if (name == "call" || name == "include" || name == "import" ||
               name == "from" || name == "extends" || name == "block" ||
               name == "do" || name == "autoescape" || name == "trans") {
      return ParseError(line, "unsupported tag '" + name + "'");
    } else {
      return ParseError(line, "unknown tag '" + name + "'");
    }
    body->push_back(std::move(s));
    return Status::Ok();
  }

  // Body up to {% end_tag %}.
  Status ParseSimpleBody(std::string_view end_tag, Stmt* s) {
    s->bodies.emplace_back();
    std::string found;
    RL_RETURN_IF_ERROR(ParseBody({end_tag}, &s->bodies.back(), &found));
    return ExpectBlockEnd();
  }

  Status ParseIf(Stmt* s) {
    s->kind = StmtKind::kIf;
    while (true) {
      RL_ASSIGN_OR_RETURN(ExprPtr cond, ParseTuple(false, {}, false));
      RL_RETURN_IF_ERROR(ExpectBlockEnd());
      s->conds.push_back(std::move(cond));
      s->bodies.emplace_back();
      std::string found;
      RL_RETURN_IF_ERROR(
          ParseBody({"elif", "else", "endif"}, &s->bodies.back(), &found));
      if (found == "elif") continue;
      if (found == "else") {
        RL_RETURN_IF_ERROR(ExpectBlockEnd());
        s->bodies.emplace_back();
        RL_RETURN_IF_ERROR(ParseBody({"endif"}, &s->bodies.back(), &found));
      }
      return ExpectBlockEnd();
    }
  }

  // Assignment targets: `a`, `a, b`, `(a, b)`.
  Status ParseTargets(std::vector<std::string>* names) {
    const bool paren = SkipOp("(");
    while (true) {
      RL_ASSIGN_OR_RETURN(std::string n, ExpectName());
      if (n == "true" || n == "false" || n == "none" || n == "True" ||
          n == "False" || n == "None") {
        return ParseError(Cur().line, "cannot assign to '" + n + "'");
      }
      names->push_back(std::move(n));
      if (!SkipOp(",")) break;
      if (Cur().type != TT::kName) break;  // trailing comma
    }
    if (paren) RL_RETURN_IF_ERROR(ExpectOp(")"));
    return Status::Ok();
  }

  Status ParseFor(Stmt* s) {
    s->kind = StmtKind::kFor;
    RL_RETURN_IF_ERROR(ParseTargets(&s->targets));
    if (!SkipName("in")) return Unexpected("'in'");
    RL_ASSIGN_OR_RETURN(s->expr, ParseTuple(false, {"recursive", "if"}, false));
    if (SkipName("if")) {
      ++loop_depth_;  // the filter may not break, but shares the loop scope
      auto filter = ParseExpression(true);
      --loop_depth_;
      if (!filter.ok()) return filter.status();
      s->loop_filter = std::move(filter).value();
    }
    if (SkipName("recursive")) s->recursive = true;
    RL_RETURN_IF_ERROR(ExpectBlockEnd());
    s->bodies.emplace_back();
    std::string found;
    ++loop_depth_;
    Status st = ParseBody({"endfor", "else"}, &s->bodies.back(), &found);
    --loop_depth_;
    RL_RETURN_IF_ERROR(st);
    if (found == "else") {
      RL_RETURN_IF_ERROR(ExpectBlockEnd());
      s->bodies.emplace_back();
      RL_RETURN_IF_ERROR(ParseBody({"endfor"}, &s->bodies.back(), &found));
    }
    return ExpectBlockEnd();
  }

  Status ParseSet(Stmt* s) {
    if (Cur().type == TT::kName && IsOp(Look(), ".")) {
      s->targets.push_back(Cur().text);
      Advance();
      Advance();
      RL_ASSIGN_OR_RETURN(s->target_attr, ExpectName());
    } else {
      RL_RETURN_IF_ERROR(ParseTargets(&s->targets));
    }
    if (SkipOp("=")) {
      s->kind = StmtKind::kSet;
      RL_ASSIGN_OR_RETURN(s->expr, ParseTuple(true, {}, false));
      return ExpectBlockEnd();
    }
    if (!s->target_attr.empty() || s->targets.size() != 1) {
      return ParseError(s->line, "a block set needs a single name");
    }
    s->kind = StmtKind::kSetBlock;
    if (IsOp(Cur(), "|")) {
      RL_ASSIGN_OR_RETURN(s->expr, ParseFilterChain(nullptr, false));
    }
    RL_RETURN_IF_ERROR(ExpectBlockEnd());
    const int saved_loop_depth = loop_depth_;
    loop_depth_ = 0;
    Status st = ParseSimpleBody("endset", s);
    loop_depth_ = saved_loop_depth;
    return st;
  }

  Status ParseMacro(Stmt* s) {
    s->kind = StmtKind::kMacro;
    RL_ASSIGN_OR_RETURN(s->text, ExpectName());
    RL_RETURN_IF_ERROR(ExpectOp("("));
    while (!IsOp(Cur(), ")")) {
      if (!s->params.empty()) {
        RL_RETURN_IF_ERROR(ExpectOp(","));
        if (IsOp(Cur(), ")")) break;
      }
      MacroParam p;
      RL_ASSIGN_OR_RETURN(p.name, ExpectName());
      if (SkipOp("=")) {
        RL_ASSIGN_OR_RETURN(p.default_value, ParseExpression(true));
      } else if (!s->params.empty() && s->params.back().default_value) {
        return ParseError(s->line,
                          "non-default argument follows default argument");
      }
      s->params.push_back(std::move(p));
    }
    RL_RETURN_IF_ERROR(ExpectOp(")"));
    RL_RETURN_IF_ERROR(ExpectBlockEnd());
    const int saved_loop_depth = loop_depth_;
    loop_depth_ = 0;
    macros_.push_back(s);
    Status st = ParseSimpleBody("endmacro", s);
    macros_.pop_back();
    loop_depth_ = saved_loop_depth;
    return st;
  }

  // ---- expressions --------------------------------------------------------

  // Records the node's height and rejects trees deep enough to threaten the
  // stack of the (recursive) renderer.
  Result<ExprPtr> Seal(ExprPtr e) {
    int h = 0;
    for (const Expr* c : {e->a.get(), e->b.get(), e->c.get(), e->d.get()}) {
      if (c) h = std::max(h, c->height);
    }
    for (const auto& x : e->args) h = std::max(h, x->height);
    for (const auto& kv : e->kwargs) h = std::max(h, kv.second->height);
    for (const auto& op : e->cmp) h = std::max(h, op.second->height);
    e->height = h + 1;
    if (e->height > kMaxExprHeight) {
      return ParseError(e->line, "expression nests too deeply (limit " +
                                     std::to_string(kMaxExprHeight) + ")");
    }
    return e;
  }

  ExprPtr NewExpr(ExprKind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }

  bool IsTupleEnd(std::initializer_list<std::string_view> extra_end) const {
    const Token& t = Cur();
    if (t.type == TT::kVarEnd || t.type == TT::kBlockEnd || IsOp(t, ")"))
      return true;
    for (std::string_view e : extra_end) {
      if (IsName(t, e)) return true;
    }
    return false;
  }

  // Jinja's parse_tuple: a bare comma makes a tuple.
  Result<ExprPtr> ParseTuple(bool with_condexpr,
                             std::initializer_list<std::string_view> extra_end,
                             bool explicit_parens) {
    const int line = Cur().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) RL_RETURN_IF_ERROR(ExpectOp(","));
      if (IsTupleEnd(extra_end)) break;
      RL_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(with_condexpr));
      items.push_back(std::move(item));
      if (IsOp(Cur(), ",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parens)
        return ParseError(
            line, "expected an expression, got " + DescribeToken(Cur()));
    }
    ExprPtr t = NewExpr(ExprKind::kTuple, line);
    t->args = std::move(items);
    return Seal(std::move(t));
  }

  Result<ExprPtr> ParseExpression(bool with_condexpr) {
    DepthGuard guard(this);
    RL_RETURN_IF_ERROR(CheckDepth());
    if (!with_condexpr) return ParseOr();
    const int line = Cur().line;
    RL_ASSIGN_OR_RETURN(ExprPtr expr, ParseOr());
    while (SkipName("if")) {
      ExprPtr cond_expr = NewExpr(ExprKind::kCondExpr, line);
      RL_ASSIGN_OR_RETURN(cond_expr->a, ParseOr());
      if (SkipName("else")) {
        RL_ASSIGN_OR_RETURN(cond_expr->c, ParseExpression(true));
      }
      cond_expr->b = std::move(expr);
      RL_ASSIGN_OR_RETURN(expr, Seal(std::move(cond_expr)));
    }
    return expr;
  }

  Result<ExprPtr> ParseOr() {
    RL_ASSIGN_OR_RETURN(ExprPtr left, ParseAnd());
    while (IsName(Cur(), "or")) {
      ExprPtr e = NewExpr(ExprKind::kOr, Cur().line);
      Advance();
      e->a = std::move(left);
      RL_ASSIGN_OR_RETURN(e->b, ParseAnd());
      RL_ASSIGN_OR_RETURN(left, Seal(std::move(e)));
    }
    return left;
  }

  Result<ExprPtr> ParseAnd() {
    RL_ASSIGN_OR_RETURN(ExprPtr left, ParseNot());
    while (IsName(Cur(), "and")) {
      ExprPtr e = NewExpr(ExprKind::kAnd, Cur().line);
      Advance();
      e->a = std::move(left);
      RL_ASSIGN_OR_RETURN(e->b, ParseNot());
      RL_ASSIGN_OR_RETURN(left, Seal(std::move(e)));
    }
    return left;
  }

  Result<ExprPtr> ParseNot() {
    if (IsName(Cur(), "not")) {
      DepthGuard guard(this);
      RL_RETURN_IF_ERROR(CheckDepth());
      ExprPtr e = NewExpr(ExprKind::kNot, Cur().line);
      Advance();
      RL_ASSIGN_OR_RETURN(e->a, ParseNot());
      return Seal(std::move(e));
    }
    return ParseCompare();
  }

  Result<ExprPtr> ParseCompare() {
    const int line = Cur().line;
    RL_ASSIGN_OR_RETURN(ExprPtr first, ParseMath1());
    std::vector<std::pair<CmpOp, ExprPtr>> ops;
    while (true) {
      const Token& t = Cur();
      CmpOp op;
      if (IsOp(t, "==")) {
        op = CmpOp::kEq;
      } else if (IsOp(t, "!=")) {
        op = CmpOp::kNe;
      } else if (IsOp(t, "<")) {
        op = CmpOp::kLt;
      } else if (IsOp(t, "<=")) {
        op = CmpOp::kLe;
      } else if (IsOp(t, ">")) {
        op = CmpOp::kGt;
      } else if (IsOp(t, ">=")) {
        op = CmpOp::kGe;
      } else if (IsName(t, "in")) {
        op = CmpOp::kIn;
      } else if (IsName(t, "not") && IsName(Look(), "in")) {
        op = CmpOp::kNotIn;
        Advance();
      } else {
        break;
      }
      Advance();
      RL_ASSIGN_OR_RETURN(ExprPtr operand, ParseMath1());
      ops.emplace_back(op, std::move(operand));
    }
    if (ops.empty()) return first;
    ExprPtr e = NewExpr(ExprKind::kCompare, line);
    e->a = std::move(first);
    e->cmp = std::move(ops);
    return Seal(std::move(e));
  }

  Result<ExprPtr> MakeBinary(BinOp op, ExprPtr a, ExprPtr b, int line) {
    ExprPtr e = NewExpr(ExprKind::kBinary, line);
    e->binop = op;
    e->a = std::move(a);
    e->b = std::move(b);
    return Seal(std::move(e));
  }

  // + and -
  Result<ExprPtr> ParseMath1() {
    RL_ASSIGN_OR_RETURN(ExprPtr left, ParseConcat());
    while (IsOp(Cur(), "+") || IsOp(Cur(), "-")) {
      const BinOp op = Cur().text == "+" ? BinOp::kAdd : BinOp::kSub;
      const int line = Cur().line;
      Advance();
      RL_ASSIGN_OR_RETURN(ExprPtr right, ParseConcat());
      RL_ASSIGN_OR_RETURN(
          left, MakeBinary(op, std::move(left), std::move(right), line));
    }
    return left;
  }

  // ~
  Result<ExprPtr> ParseConcat() {
    const int line = Cur().line;
    RL_ASSIGN_OR_RETURN(ExprPtr first, ParseMath2());
    if (!IsOp(Cur(), "~")) return first;
    ExprPtr e = NewExpr(ExprKind::kConcat, line);
    e->args.push_back(std::move(first));
    while (SkipOp("~")) {
      RL_ASSIGN_OR_RETURN(ExprPtr next, ParseMath2());
      e->args.push_back(std::move(next));
    }
    return Seal(std::move(e));
  }

  // * / // %
  Result<ExprPtr> ParseMath2() {
    RL_ASSIGN_OR_RETURN(ExprPtr left, ParsePow());
    while (true) {
      const Token& t = Cur();
      BinOp op;
      if (IsOp(t, "*")) {
        op = BinOp::kMul;
      } else if (IsOp(t, "/")) {
        op = BinOp::kDiv;
      } else if (IsOp(t, "//")) {
        op = BinOp::kFloorDiv;
      } else if (IsOp(t, "%")) {
        op = BinOp::kMod;
      } else {
        break;
      }
      const int line = t.line;
      Advance();
      RL_ASSIGN_OR_RETURN(ExprPtr right, ParsePow());
      RL_ASSIGN_OR_RETURN(
          left, MakeBinary(op, std::move(left), std::move(right), line));
    }
    return left;
  }

  Result<ExprPtr> ParsePow() {
    RL_ASSIGN_OR_RETURN(ExprPtr left, ParseUnary(true));
    while (IsOp(Cur(), "**")) {
      const int line = Cur().line;
      Advance();
      RL_ASSIGN_OR_RETURN(ExprPtr right, ParseUnary(true));
      RL_ASSIGN_OR_RETURN(left, MakeBinary(BinOp::kPow, std::move(left),
                                           std::move(right), line));
    }
    return left;
  }

  Result<ExprPtr> ParseUnary(bool with_filter) {
    const int line = Cur().line;
    ExprPtr node;
    if (IsOp(Cur(), "-") || IsOp(Cur(), "+")) {
      DepthGuard guard(this);
      RL_RETURN_IF_ERROR(CheckDepth());
      node = NewExpr(Cur().text == "-" ? ExprKind::kNeg : ExprKind::kPos, line);
      Advance();
      RL_ASSIGN_OR_RETURN(node->a, ParseUnary(false));
      RL_ASSIGN_OR_RETURN(node, Seal(std::move(node)));
    } else {
      RL_ASSIGN_OR_RETURN(node, ParsePrimary());
    }
    RL_ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
    if (with_filter) {
      RL_ASSIGN_OR_RETURN(node, ParseFilterExpr(std::move(node)));
    }
    return node;
  }

  Result<ExprPtr> ParsePrimary() {
    const Token& t = Cur();
    const int line = t.line;
    if (t.type == TT::kName) {
      ExprPtr e;
      if (t.text == "true" || t.text == "True" || t.text == "false" ||
          t.text == "False") {
        e = NewExpr(ExprKind::kLiteral, line);
        e->value = Value::Bool(t.text == "true" || t.text == "True");
      } else if (t.text == "none" || t.text == "None") {
        e = NewExpr(ExprKind::kLiteral, line);
        e->value = Value::None();
      } else {
        e = NewExpr(ExprKind::kName, line);
        e->name = t.text;
        if (!macros_.empty()) {
          if (t.text == "varargs") macros_.back()->uses_varargs = true;
          if (t.text == "kwargs") macros_.back()->uses_kwargs = true;
        }
      }
      Advance();
      return e;
    }
    if (t.type == TT::kString) {
      std::string s = t.text;
      Advance();
      while (Cur().type == TT::kString) {  // adjacent literals concatenate
        s += Cur().text;
        Advance();
      }
      ExprPtr e = NewExpr(ExprKind::kLiteral, line);
      e->value = Value::Str(std::move(s));
      return e;
    }
    if (t.type == TT::kInteger || t.type == TT::kFloat) {
      ExprPtr e = NewExpr(ExprKind::kLiteral, line);
      e->value = t.type == TT::kInteger ? Value::Int(t.int_value)
                                        : Value::Float(t.float_value);
      Advance();
      return e;
    }
    if (IsOp(t, "(")) {
      Advance();
      RL_ASSIGN_OR_RETURN(ExprPtr e, ParseTuple(true, {}, true));
      RL_RETURN_IF_ERROR(ExpectOp(")"));
      return e;
    }
    if (IsOp(t, "[")) {
      Advance();
      ExprPtr e = NewExpr(ExprKind::kList, line);
      while (!IsOp(Cur(), "]")) {
        if (!e->args.empty()) {
          RL_RETURN_IF_ERROR(ExpectOp(","));
          if (IsOp(Cur(), "]")) break;
        }
        RL_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(true));
        e->args.push_back(std::move(item));
      }
      Advance();
      return Seal(std::move(e));
    }
    if (IsOp(t, "{")) {
      Advance();
      ExprPtr e = NewExpr(ExprKind::kDict, line);
      while (!IsOp(Cur(), "}")) {
        if (!e->args.empty()) {
          RL_RETURN_IF_ERROR(ExpectOp(","));
          if (IsOp(Cur(), "}")) break;
        }
        RL_ASSIGN_OR_RETURN(ExprPtr key, ParseExpression(true));
        RL_RETURN_IF_ERROR(ExpectOp(":"));
        RL_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
        e->args.push_back(std::move(key));
        e->args.push_back(std::move(value));
      }
      Advance();
      return Seal(std::move(e));
    }
    return ParseError(line, "unexpected " + DescribeToken(t));
  }

  Result<ExprPtr> ParsePostfix(ExprPtr node) {
    while (true) {
      if (IsOp(Cur(), ".") || IsOp(Cur(), "[")) {
        RL_ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node)));
      } else if (IsOp(Cur(), "(")) {
        RL_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
      } else {
        return node;
      }
    }
  }

  Result<ExprPtr> ParseFilterExpr(ExprPtr node) {
    while (true) {
      if (IsOp(Cur(), "|")) {
        RL_ASSIGN_OR_RETURN(node, ParseFilterChain(std::move(node), false));
      } else if (IsName(Cur(), "is")) {
        RL_ASSIGN_OR_RETURN(node, ParseTest(std::move(node)));
      } else if (IsOp(Cur(), "(")) {
        RL_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
      } else {
        return node;
      }
    }
  }

  Result<ExprPtr> ParseSubscript(ExprPtr node) {
    const Token& t = Cur();
    const int line = t.line;
    if (IsOp(t, ".")) {
      Advance();
      const Token& attr = Cur();
      if (attr.type == TT::kName) {
        ExprPtr e = NewExpr(ExprKind::kGetAttr, line);
        e->a = std::move(node);
        e->name = attr.text;
        Advance();
        return Seal(std::move(e));
      }
      if (attr.type == TT::kInteger) {
        ExprPtr e = NewExpr(ExprKind::kGetItem, line);
        e->a = std::move(node);
        e->b = NewExpr(ExprKind::kLiteral, line);
        e->b->value = Value::Int(attr.int_value);
        Advance();
        return Seal(std::move(e));
      }
      return Unexpected("name or number");
    }
    Advance();  // [
    std::vector<ExprPtr> args;
    while (!IsOp(Cur(), "]")) {
      if (!args.empty()) RL_RETURN_IF_ERROR(ExpectOp(","));
      RL_ASSIGN_OR_RETURN(ExprPtr arg, ParseSubscribed());
      args.push_back(std::move(arg));
    }
    Advance();
    if (args.size() == 1) {
      if (args[0]->kind == ExprKind::kSlice) {
        args[0]->a = std::move(node);
        return Seal(std::move(args[0]));
      }
      ExprPtr e = NewExpr(ExprKind::kGetItem, line);
      e->a = std::move(node);
      e->b = std::move(args[0]);
      return Seal(std::move(e));
    }
    if (args.empty()) return ParseError(line, "expected a subscript");
    for (const auto& a : args) {
      if (a->kind == ExprKind::kSlice)
        return ParseError(line, "multi-dimensional slices are not supported");
    }
    ExprPtr tuple = NewExpr(ExprKind::kTuple, line);
    tuple->args = std::move(args);
    RL_ASSIGN_OR_RETURN(tuple, Seal(std::move(tuple)));
    ExprPtr e = NewExpr(ExprKind::kGetItem, line);
    e->a = std::move(node);
    e->b = std::move(tuple);
    return Seal(std::move(e));
  }

  // One subscript: an expression or a slice (returned as kSlice with a null
  // object).
  Result<ExprPtr> ParseSubscribed() {
    const int line = Cur().line;
    ExprPtr start;
    if (!IsOp(Cur(), ":")) {
      RL_ASSIGN_OR_RETURN(start, ParseExpression(true));
      if (!IsOp(Cur(), ":")) return start;
    }
    Advance();  // first colon
    ExprPtr slice = NewExpr(ExprKind::kSlice, line);
    slice->b = std::move(start);
    if (!IsOp(Cur(), ":") && !IsOp(Cur(), "]") && !IsOp(Cur(), ",")) {
      RL_ASSIGN_OR_RETURN(slice->c, ParseExpression(true));
    }
    if (SkipOp(":")) {
      if (!IsOp(Cur(), "]") && !IsOp(Cur(), ",")) {
        RL_ASSIGN_OR_RETURN(slice->d, ParseExpression(true));
      }
    }
    return slice;
  }

  Status ParseCallArgs(Expr* e) {
    const int line = Cur().line;
    RL_RETURN_IF_ERROR(ExpectOp("("));
    bool require_comma = false;
    while (!IsOp(Cur(), ")")) {
      if (require_comma) {
        RL_RETURN_IF_ERROR(ExpectOp(","));
        if (IsOp(Cur(), ")")) break;
      }
      if (IsOp(Cur(), "*")) {
        if (e->c || e->d)
          return ParseError(line,
                            "invalid syntax for function call expression");
        Advance();
        RL_ASSIGN_OR_RETURN(e->c, ParseExpression(true));
      } else if (IsOp(Cur(), "**")) {
        if (e->d)
          return ParseError(line,
                            "invalid syntax for function call expression");
        Advance();
        RL_ASSIGN_OR_RETURN(e->d, ParseExpression(true));
      } else if (Cur().type == TT::kName && IsOp(Look(), "=")) {
        if (e->d)
          return ParseError(line,
                            "invalid syntax for function call expression");
        std::string key = Cur().text;
        Advance();
        Advance();
        RL_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
        e->kwargs.emplace_back(std::move(key), std::move(value));
      } else {
        if (e->c || e->d || !e->kwargs.empty()) {
          return ParseError(line,
                            "positional argument follows keyword argument");
        }
        RL_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
        e->args.push_back(std::move(value));
      }
      require_comma = true;
    }
    Advance();
    return Status::Ok();
  }

  Result<ExprPtr> ParseCall(ExprPtr node) {
    ExprPtr e = NewExpr(ExprKind::kCall, Cur().line);
    e->a = std::move(node);
    RL_RETURN_IF_ERROR(ParseCallArgs(e.get()));
    return Seal(std::move(e));
  }

  Result<std::string> ParseDottedName() {
    RL_ASSIGN_OR_RETURN(std::string name, ExpectName());
    while (IsOp(Cur(), ".")) {
      Advance();
      RL_ASSIGN_OR_RETURN(std::string part, ExpectName());
      name += "." + part;
    }
    return name;
  }

  // `| f1(args) | f2 ...`; with start_inline the first "|" is absent
  // ({% filter f1 | f2 %}). A null `node` means the block's body.
  Result<ExprPtr> ParseFilterChain(ExprPtr node, bool start_inline) {
    if (!node) node = NewExpr(ExprKind::kBlockValue, Cur().line);
    while (IsOp(Cur(), "|") || start_inline) {
      if (!start_inline) Advance();
      start_inline = false;
      const int line = Cur().line;
      RL_ASSIGN_OR_RETURN(std::string name, ParseDottedName());
      ExprPtr e = NewExpr(ExprKind::kFilter, line);
      e->name = std::move(name);
      e->filter = FindFilter(e->name);
      e->a = std::move(node);
      if (IsOp(Cur(), "(")) RL_RETURN_IF_ERROR(ParseCallArgs(e.get()));
      RL_ASSIGN_OR_RETURN(node, Seal(std::move(e)));
    }
    return node;
  }

  Result<ExprPtr> ParseTest(ExprPtr node) {
    const int line = Cur().line;
    Advance();  // is
    ExprPtr e = NewExpr(ExprKind::kTest, line);
    if (SkipName("not")) e->negated = true;
    RL_ASSIGN_OR_RETURN(e->name, ParseDottedName());
    e->test = FindTest(e->name);
    e->a = std::move(node);
    const Token& t = Cur();
    if (IsOp(t, "(")) {
      RL_RETURN_IF_ERROR(ParseCallArgs(e.get()));
    } else if ((t.type == TT::kName || t.type == TT::kString ||
                t.type == TT::kInteger || t.type == TT::kFloat ||
                IsOp(t, "(") || IsOp(t, "[") || IsOp(t, "{")) &&
               !IsName(t, "else") && !IsName(t, "or") && !IsName(t, "and")) {
      if (IsName(t, "is"))
        return ParseError(t.line, "you cannot chain multiple tests with is");
      RL_ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
      RL_ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
      e->args.push_back(std::move(arg));
    }
    return Seal(std::move(e));
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
  std::vector<Stmt*> macros_;
};

// Jinja reports unknown filters and tests when compiling, except inside
// `if` statements and conditional expressions ("soft" frames), where the
// error waits until the node runs. Loops, macros and blocks start a fresh,
// strict frame.
class NameChecker {
 public:
  Status CheckBody(const Body& body, bool soft) {
    for (const auto& s : body) RL_RETURN_IF_ERROR(CheckStmt(*s, soft));
    return Status::Ok();
  }

 private:
  Status CheckStmt(const Stmt& s, bool soft) {
    switch (s.kind) {
      case StmtKind::kIf:
        for (const auto& c : s.conds)
          RL_RETURN_IF_ERROR(CheckExpr(c.get(), true));
        for (const auto& b : s.bodies) RL_RETURN_IF_ERROR(CheckBody(b, true));
        return Status::Ok();
      case StmtKind::kFor:
        RL_RETURN_IF_ERROR(CheckExpr(s.expr.get(), soft));
        RL_RETURN_IF_ERROR(CheckExpr(s.loop_filter.get(), false));
        RL_RETURN_IF_ERROR(CheckBody(s.bodies[0], false));
        if (s.bodies.size() > 1)
          RL_RETURN_IF_ERROR(CheckBody(s.bodies[1], soft));
        return Status::Ok();
      case StmtKind::kMacro:
        for (const auto& p : s.params)
          RL_RETURN_IF_ERROR(CheckExpr(p.default_value.get(), false));
        return CheckBody(s.bodies[0], false);
      case StmtKind::kSetBlock:
      case StmtKind::kFilterBlock:
        RL_RETURN_IF_ERROR(CheckExpr(s.expr.get(), soft));
        return CheckBody(s.bodies[0], false);
      case StmtKind::kWith:
        for (const auto& v : s.values)
          RL_RETURN_IF_ERROR(CheckExpr(v.get(), soft));
        return CheckBody(s.bodies[0], false);
      case StmtKind::kScope:
        return CheckBody(s.bodies[0], soft);
      default:
        return CheckExpr(s.expr.get(), soft);
    }
  }

  Status CheckExpr(const Expr* e, bool soft) {
    if (e == nullptr) return Status::Ok();
    if (e->kind == ExprKind::kCondExpr) soft = true;
    if (e->kind == ExprKind::kFilter && e->filter == nullptr && !soft &&
        !IsJinjaFilter(e->name)) {
      return ParseError(e->line, "no filter named '" + e->name + "'");
    }
    if (e->kind == ExprKind::kTest && e->test == nullptr && !soft &&
        !IsJinjaTest(e->name)) {
      return ParseError(e->line, "no test named '" + e->name + "'");
    }
    for (const Expr* child : {e->a.get(), e->b.get(), e->c.get(), e->d.get()}) {
      RL_RETURN_IF_ERROR(CheckExpr(child, soft));
    }
    for (const auto& x : e->args) RL_RETURN_IF_ERROR(CheckExpr(x.get(), soft));
    for (const auto& kv : e->kwargs)
      RL_RETURN_IF_ERROR(CheckExpr(kv.second.get(), soft));
    for (const auto& op : e->cmp)
      RL_RETURN_IF_ERROR(CheckExpr(op.second.get(), soft));
    return Status::Ok();
  }
};

}  // namespace

Result<Body> ParseTemplate(std::string_view source) {
  RL_ASSIGN_OR_RETURN(std::vector<Token> tokens, Tokenize(source));
  Parser parser(std::move(tokens));
  RL_ASSIGN_OR_RETURN(Body body, parser.Run());
  NameChecker checker;
  RL_RETURN_IF_ERROR(checker.CheckBody(body, false));
  return body;
}

}  // namespace redline::model::chat::jinja
