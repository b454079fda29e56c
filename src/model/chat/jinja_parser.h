// Parser for the Jinja2 3.1 subset that chat templates use: {{ }} output,
// {% if/elif/else %}, {% for %} (tuple targets, `if` filter, else, loop
// controls), {% set %} (names, tuples, namespace attributes, block form with
// filters), {% macro %}, {% filter %}, {% with %}, {% generation %}, and the
// full expression grammar with Jinja's precedence.
//
// Errors name the line and construct, e.g. "line 4: unknown tag 'include'",
// "line 2: expected 'endfor', got end of template". Like Jinja, an unknown
// filter or test is a parse error unless it sits inside an `if` (it then
// fails only when evaluated).
//
// Thread-safety: pure function. Cost: O(tokens); recursion is capped at
// kMaxParseDepth nested constructs so hostile input cannot exhaust the stack.
#ifndef REDLINE_MODEL_CHAT_JINJA_PARSER_H_
#define REDLINE_MODEL_CHAT_JINJA_PARSER_H_

#include <string_view>

#include "base/result.h"
#include "model/chat/jinja_ast.h"

namespace redline::model::chat::jinja {

// Nesting limit for blocks and expressions (CPython's own parser stops at a
// similar depth; real templates nest fewer than 20 levels).
inline constexpr int kMaxParseDepth = 100;
// Height limit of one expression tree (long `a + b + c ...` chains nest to
// the left; real templates stay below 30).
inline constexpr int kMaxExprHeight = 256;

// Tokenizes and parses a whole template.
Result<Body> ParseTemplate(std::string_view source);

}  // namespace redline::model::chat::jinja

#endif  // REDLINE_MODEL_CHAT_JINJA_PARSER_H_
