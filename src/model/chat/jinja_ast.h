// Syntax tree of a parsed Jinja template. Plain data: the parser builds it
// once, the renderer walks it (read-only, from any number of threads).
//
// Ownership: every node owns its children through unique_ptr; a Template
// owns the whole tree.
#ifndef REDLINE_MODEL_CHAT_JINJA_AST_H_
#define REDLINE_MODEL_CHAT_JINJA_AST_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "model/chat/jinja_value.h"

namespace redline::model::chat::jinja {

// A filter: `input | name(args)`. Null input means "undefined input".
using FilterFn = Result<Value> (*)(Renderer& renderer, const Value& input,
                                   CallArgs& args);
// A test: `input is name(args)`.
using TestFn = Result<bool> (*)(Renderer& renderer, const Value& input,
                                CallArgs& args);

enum class ExprKind : uint8_t {
  kLiteral,     // value
  kName,        // name
  kList,        // args: elements
  kTuple,       // args: elements
  kDict,        // args: key0, value0, key1, value1, ...
  kGetAttr,     // a.name
  kGetItem,     // a[b]
  kSlice,       // a[b:c:d]; b, c, d may be null
  kCall,        // a(args, kwargs, *c, **d)
  kFilter,      // a | name(args, kwargs); a is null in filter blocks
  kTest,        // a is [not] name(args, kwargs)
  kNeg,         // -a
  kPos,         // +a
  kNot,         // not a
  kBinary,      // a binop b
  kAnd,         // a and b
  kOr,          // a or b
  kConcat,      // args[0] ~ args[1] ~ ...
  kCompare,     // a cmp[0].second cmp[1].second ...
  kCondExpr,    // b if a else c; c may be null (then undefined)
  kBlockValue,  // the rendered body of a {% filter %} or {% set %} block
};

enum class BinOp : uint8_t { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow };
enum class CmpOp : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind = ExprKind::kLiteral;
  int line = 0;
  Value value;       // kLiteral
  std::string name;  // kName, kGetAttr, kFilter, kTest
  ExprPtr a, b, c, d;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::pair<CmpOp, ExprPtr>> cmp;
  BinOp binop = BinOp::kAdd;
  bool negated = false;  // kTest: `is not`
  int height = 1;        // longest path to a leaf (bounded by the parser)
  // kFilter / kTest: resolved builtin; null when Redline lacks it (the
  // render then fails if the node is reached).
  FilterFn filter = nullptr;
  TestFn test = nullptr;
};

enum class StmtKind : uint8_t {
  kText,    // text
  kOutput,  // {{ expr }}
  kIf,      // conds[i] guards bodies[i]; bodies may hold one more (else)
  kFor,     // for targets in expr [if loop_filter] [recursive]: bodies[0], else
            // bodies[1]
  kSet,     // set targets = expr | set name.attr = expr
  kSetBlock,  // set target %}bodies[0]{% endset; expr: optional filter chain
  kMacro,     // macro name(params): bodies[0]
  kBreak,
  kContinue,
  kFilterBlock,  // filter <expr chain>: bodies[0]
  kWith,         // with targets[i] = values[i]: bodies[0]
  kScope,        // bodies[0] in place ({% generation %})
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // null: no default (undefined when omitted)
};

struct Stmt {
  StmtKind kind = StmtKind::kText;
  int line = 0;
  std::string text;  // kText; kMacro: macro name
  ExprPtr expr;
  std::vector<ExprPtr> conds;
  std::vector<Body> bodies;
  // kFor, kSet, kSetBlock, kWith: assigned names (several: tuple unpacking).
  std::vector<std::string> targets;
  std::string target_attr;         // kSet: `set targets[0].target_attr = ...`
  ExprPtr loop_filter;             // kFor
  std::vector<ExprPtr> values;     // kWith
  std::vector<MacroParam> params;  // kMacro
  bool uses_varargs = false;       // kMacro body reads `varargs`
  bool uses_kwargs = false;        // kMacro body reads `kwargs`
  bool recursive = false;  // kFor: `recursive` (the body may call loop(items))
};

}  // namespace redline::model::chat::jinja

#endif  // REDLINE_MODEL_CHAT_JINJA_AST_H_
