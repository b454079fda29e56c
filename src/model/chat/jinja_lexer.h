// Lexer for Jinja templates, configured like Hugging Face's chat-template
// environment: trim_blocks and lstrip_blocks on, keep_trailing_newline off,
// default delimiters ({{ }}, {% %}, {# #}).
//
// Whitespace control follows Jinja2 3.1 exactly:
//  * "{%-", "{{-", "{#-" strip all whitespace (newlines too) before the tag;
//    "-%}", "-}}", "-#}" strip all whitespace after it.
//  * trim_blocks: the first newline after "%}" or "#}" is dropped ("+%}"
//    keeps it).
//  * lstrip_blocks: spaces and tabs between the start of a line and "{%" or
//    "{#" are dropped ("{%+" keeps them); never before "{{".
//  * "\r\n" and "\r" become "\n"; one newline at the very end of the source is
//    dropped.
// Comments are dropped; {% raw %}...{% endraw %} becomes data.
//
// Thread-safety: pure function. Cost: O(source size).
#ifndef REDLINE_MODEL_CHAT_JINJA_LEXER_H_
#define REDLINE_MODEL_CHAT_JINJA_LEXER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace redline::model::chat::jinja {

struct Token {
  enum class Type : uint8_t {
    kData,        // literal template text (text holds it)
    kVarBegin,    // {{
    kVarEnd,      // }}
    kBlockBegin,  // {%
    kBlockEnd,    // %}
    kName,        // identifier or keyword (text)
    kString,      // string literal, escapes decoded (text)
    kInteger,     // int_value
    kFloat,       // float_value
    kOperator,    // text: "+", "//", "==", "(", ...
    kEof,
  };
  Type type = Type::kEof;
  std::string text;
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;  // 1-based line where the token starts
};

// Splits `source` into tokens ending with kEof. Errors name the line
// ("line 3: unterminated string").
Result<std::vector<Token>> Tokenize(std::string_view source);

// Human-readable token description for parse errors ("'endfor'",
// "end of print statement").
std::string DescribeToken(const Token& token);

}  // namespace redline::model::chat::jinja

#endif  // REDLINE_MODEL_CHAT_JINJA_LEXER_H_
