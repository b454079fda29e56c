#include "model/chat/jinja_lexer.h"

#include <cerrno>
#include <cstdint>
#include <cstdlib>

#include "model/chat/jinja_unicode.h"

namespace redline::model::chat::jinja {
namespace {

bool IsAsciiSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
         c == '\v';
}

// Byte length of the whitespace code point (Python's `\s`, Unicode-aware)
// starting at `p`, or 0 when there is none.
size_t SpaceLen(std::string_view s, size_t p) {
  if (p >= s.size()) return 0;
  const unsigned char c = static_cast<unsigned char>(s[p]);
  if (c < 0x80) return IsSpace(c) ? 1 : 0;
  std::u32string one = DecodeUtf8(s.substr(p, 4));
  if (one.empty() || !IsSpace(one[0])) return 0;
  std::string enc;
  AppendUtf8(one[0], &enc);
  return enc.size();
}

size_t SkipSpace(std::string_view s, size_t p) {
  while (size_t n = SpaceLen(s, p)) p += n;
  return p;
}

bool IsNameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

bool IsNameChar(char c) { return IsNameStart(c) || (c >= '0' && c <= '9'); }

bool IsDigitChar(char c) { return c >= '0' && c <= '9'; }

// Python's str.rstrip() (Unicode whitespace).
std::string_view RStripSpace(std::string_view s) {
  if (IsAscii(s)) {
    while (!s.empty() &&
           (IsAsciiSpace(s.back()) || (s.back() >= 0x1C && s.back() <= 0x1F))) {
      s.remove_suffix(1);
    }
    return s;
  }
  std::u32string cps = DecodeUtf8(s);
  size_t keep_cps = cps.size();
  while (keep_cps > 0 && IsSpace(cps[keep_cps - 1])) --keep_cps;
  size_t bytes =
      EncodeUtf8(std::u32string_view(cps).substr(0, keep_cps)).size();
  return s.substr(0, bytes);
}

// True when `s` is non-empty and all whitespace (Python's `\s+` fullmatch).
bool AllSpace(std::string_view s) {
  if (s.empty()) return false;
  for (char32_t cp : DecodeUtf8(s)) {
    if (!IsSpace(cp)) return false;
  }
  return true;
}

// Normalizes newlines and drops one trailing newline (keep_trailing_newline
// off).
std::string NormalizeSource(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

int CountNewlines(std::string_view s) {
  int n = 0;
  for (char c : s) n += (c == '\n');
  return n;
}

Status LexError(int line, std::string_view message) {
  return Status::InvalidArgument("line " + std::to_string(line) + ": " +
                                 std::string(message));
}

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {}

  Result<std::vector<Token>> Run() {
    while (pos_ < src_.size()) {
      RL_RETURN_IF_ERROR(LexRootStep());
    }
    Token eof;
    eof.type = Token::Type::kEof;
    eof.line = line_;
    tokens_.push_back(std::move(eof));
    return std::move(tokens_);
  }

 private:
  enum class Tag { kVar, kBlock, kComment };

  // Lexes data up to and including the next tag.
  Status LexRootStep() {
    size_t tag = std::string::npos;
    Tag kind = Tag::kVar;
    for (size_t i = src_.find('{', pos_); i != std::string::npos;
         i = src_.find('{', i + 1)) {
      if (i + 1 >= src_.size()) break;
      const char c = src_[i + 1];
      if (c == '{' || c == '%' || c == '#') {
        tag = i;
        kind = c == '{' ? Tag::kVar : (c == '%' ? Tag::kBlock : Tag::kComment);
        break;
      }
    }
    if (tag == std::string::npos) {
      EmitData(std::string_view(src_).substr(pos_));
      pos_ = src_.size();
      return Status::Ok();
    }
    std::string_view text = std::string_view(src_).substr(pos_, tag - pos_);
    size_t after = tag + 2;
    char sign = 0;
    if (after < src_.size() && (src_[after] == '-' || src_[after] == '+'))
      sign = src_[after++];

    // {% raw %} is recognized before other block tags.
    size_t raw_end = 0;
    const bool raw = kind == Tag::kBlock && MatchRawBegin(after, &raw_end);

    const int text_newlines = CountNewlines(text);
    text = StripBeforeTag(text, sign, kind != Tag::kVar);
    EmitData(text);
    line_ += text_newlines;
    pos_ = after;

    if (raw) {
      line_ +=
          CountNewlines(std::string_view(src_).substr(after, raw_end - after));
      pos_ = raw_end;
      line_starting_ = raw_end > 0 && src_[raw_end - 1] == '\n';
      return LexRawBody();
    }
    if (kind == Tag::kComment) return LexComment();
    Token begin;
    begin.type =
        kind == Tag::kVar ? Token::Type::kVarBegin : Token::Type::kBlockBegin;
    begin.line = line_;
    tokens_.push_back(std::move(begin));
    return LexTag(kind);
  }

  // Applies "-" stripping or lstrip_blocks to the data before a tag.
  std::string_view StripBeforeTag(std::string_view text, char sign,
                                  bool lstrip_allowed) const {
    if (sign == '-') return RStripSpace(text);
    if (sign != '+' && lstrip_allowed) {
      const size_t nl = text.rfind('\n');
      const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting_) && AllSpace(text.substr(l_pos))) {
        return text.substr(0, l_pos);
      }
    }
    return text;
  }

  // Matches `\s*raw\s*(-%}\s*|%})` at `p` (just after "{%" and its sign).
  bool MatchRawBegin(size_t p, size_t* end) const {
    p = SkipSpace(src_, p);
    if (src_.compare(p, 3, "raw") != 0) return false;
    p += 3;
    if (p < src_.size() && IsNameChar(src_[p])) return false;
    p = SkipSpace(src_, p);
    if (src_.compare(p, 3, "-%}") == 0) {
      p += 3;
      p = SkipSpace(src_, p);
    } else if (src_.compare(p, 2, "%}") == 0) {
      p += 2;
    } else {
      return false;
    }
    *end = p;
    return true;
  }

  Status LexRawBody() {
    // Find {%[-+]? \s* endraw \s* (+%} | -%}\s* | %}\n?)
    for (size_t i = src_.find("{%", pos_); i != std::string::npos;
         i = src_.find("{%", i + 1)) {
      size_t p = i + 2;
      char sign = 0;
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+'))
        sign = src_[p++];
      p = SkipSpace(src_, p);
      if (src_.compare(p, 6, "endraw") != 0) continue;
      p += 6;
      p = SkipSpace(src_, p);
      size_t end;
      if (src_.compare(p, 3, "+%}") == 0) {
        end = p + 3;
      } else if (src_.compare(p, 3, "-%}") == 0) {
        end = p + 3;
        end = SkipSpace(src_, end);
      } else if (src_.compare(p, 2, "%}") == 0) {
        end = p + 2;
        if (end < src_.size() && src_[end] == '\n') ++end;
      } else {
        continue;
      }
      std::string_view body = std::string_view(src_).substr(pos_, i - pos_);
      const int start_line = line_;
      body = StripBeforeTag(body, sign, true);
      EmitDataAt(body, start_line);
      line_ += CountNewlines(std::string_view(src_).substr(pos_, end - pos_));
      pos_ = end;
      line_starting_ = src_[end - 1] == '\n';
      return Status::Ok();
    }
    return LexError(line_, "missing end of raw directive");
  }

  Status LexComment() {
    for (size_t i = src_.find("#}", pos_); i != std::string::npos;
         i = src_.find("#}", i + 1)) {
      size_t end = i + 2;
      if (i > pos_ && src_[i - 1] == '-') {
        end = SkipSpace(src_, end);
      } else if (i > pos_ && src_[i - 1] == '+') {
        // keep the newline
      } else if (end < src_.size() && src_[end] == '\n') {
        ++end;  // trim_blocks
      }
      line_ += CountNewlines(std::string_view(src_).substr(pos_, end - pos_));
      pos_ = end;
      line_starting_ = src_[end - 1] == '\n';
      return Status::Ok();
    }
    return LexError(line_, "missing end of comment tag");
  }

  // Lexes the inside of {{ }} or {% %} including the closing delimiter.
  Status LexTag(Tag kind) {
    const int start_line = line_;
    std::vector<char> balance;
    while (true) {
      if (pos_ >= src_.size()) {
        return LexError(start_line,
                        kind == Tag::kVar
                            ? "unexpected end of template, expected '}}'"
                            : "unexpected end of template, expected '%}'");
      }
      if (balance.empty() && MatchTagEnd(kind)) return Status::Ok();
      const char c = src_[pos_];
      if (size_t n = SpaceLen(src_, pos_)) {
        if (c == '\n') ++line_;
        pos_ += n;
        continue;
      }
      Token tok;
      tok.line = line_;
      if (IsNameStart(c)) {
        size_t e = pos_ + 1;
        while (e < src_.size() && IsNameChar(src_[e])) ++e;
        tok.type = Token::Type::kName;
        tok.text = src_.substr(pos_, e - pos_);
        pos_ = e;
      } else if (IsDigitChar(c)) {
        RL_RETURN_IF_ERROR(LexNumber(&tok));
      } else if (c == '\'' || c == '"') {
        RL_RETURN_IF_ERROR(LexString(&tok));
      } else {
        RL_RETURN_IF_ERROR(LexOperator(&tok, &balance));
      }
      tokens_.push_back(std::move(tok));
    }
  }

  bool MatchTagEnd(Tag kind) {
    Token end;
    end.line = line_;
    if (kind == Tag::kVar) {
      end.type = Token::Type::kVarEnd;
      if (src_.compare(pos_, 3, "-}}") == 0) {
        pos_ += 3;
        SkipWhitespaceAfterTag();
      } else if (src_.compare(pos_, 2, "}}") == 0) {
        pos_ += 2;
        line_starting_ = false;
      } else {
        return false;
      }
    } else {
      end.type = Token::Type::kBlockEnd;
      if (src_.compare(pos_, 3, "-%}") == 0) {
        pos_ += 3;
        SkipWhitespaceAfterTag();
      } else if (src_.compare(pos_, 3, "+%}") == 0) {
        pos_ += 3;
        line_starting_ = false;
      } else if (src_.compare(pos_, 2, "%}") == 0) {
        pos_ += 2;
        line_starting_ = false;
        if (pos_ < src_.size() && src_[pos_] == '\n') {  // trim_blocks
          ++pos_;
          ++line_;
          line_starting_ = true;
        }
      } else {
        return false;
      }
    }
    tokens_.push_back(std::move(end));
    return true;
  }

  // After "-}}" / "-%}": Python's `\s*` (Unicode whitespace).
  void SkipWhitespaceAfterTag() {
    const size_t end = SkipSpace(src_, pos_);
    line_ += CountNewlines(std::string_view(src_).substr(pos_, end - pos_));
    line_starting_ = end > pos_ && src_[end - 1] == '\n';
    pos_ = end;
  }

  Status LexNumber(Token* tok) {
    // (\d+_)*\d+ with an optional fraction and exponent.
    auto digits = [&](size_t p) {
      size_t e = p;
      while (e < src_.size() &&
             (IsDigitChar(src_[e]) || (src_[e] == '_' && e + 1 < src_.size() &&
                                       IsDigitChar(src_[e + 1]) && e > p))) {
        ++e;
      }
      return e;
    };
    size_t e = digits(pos_);
    bool is_float = false;
    if (e + 1 < src_.size() && src_[e] == '.' && IsDigitChar(src_[e + 1])) {
      e = digits(e + 1);
      is_float = true;
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t p = e + 1;
      if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
      if (p < src_.size() && IsDigitChar(src_[p])) {
        e = digits(p);
        is_float = true;
      }
    }
    std::string text;
    for (size_t i = pos_; i < e; ++i) {
      if (src_[i] != '_') text.push_back(src_[i]);
    }
    pos_ = e;
    if (is_float) {
      tok->type = Token::Type::kFloat;
      tok->float_value = std::strtod(text.c_str(), nullptr);
    } else {
      tok->type = Token::Type::kInteger;
      errno = 0;
      const unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
      if (errno == ERANGE || v > static_cast<unsigned long long>(INT64_MAX)) {
        return LexError(tok->line, "integer literal too large");
      }
      tok->int_value = static_cast<int64_t>(v);
    }
    return Status::Ok();
  }

  // String literal with Python "unicode-escape" decoding.
  Status LexString(Token* tok) {
    const char quote = src_[pos_];
    size_t p = pos_ + 1;
    std::string out;
    while (true) {
      if (p >= src_.size()) return LexError(tok->line, "unterminated string");
      const char c = src_[p];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (c != '\\') {
        out.push_back(c);
        ++p;
        continue;
      }
      if (p + 1 >= src_.size())
        return LexError(tok->line, "unterminated string");
      const char e = src_[p + 1];
      p += 2;
      switch (e) {
        case '\n':
          ++line_;
          break;  // line continuation
        case '\\':
          out.push_back('\\');
          break;
        case '\'':
          out.push_back('\'');
          break;
        case '"':
          out.push_back('"');
          break;
        case 'a':
          out.push_back('\a');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'v':
          out.push_back('\v');
          break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t n = e == 'x' ? 2 : (e == 'u' ? 4 : 8);
          if (p + n > src_.size())
            return LexError(tok->line, "truncated escape in string");
          char32_t cp = 0;
          for (size_t k = 0; k < n; ++k) {
            const char h = src_[p + k];
            int d;
            if (h >= '0' && h <= '9') {
              d = h - '0';
            } else if (h >= 'a' && h <= 'f') {
              d = h - 'a' + 10;
            } else if (h >= 'A' && h <= 'F') {
              d = h - 'A' + 10;
            } else {
              return LexError(tok->line, "truncated escape in string");
            }
            cp = cp * 16 + d;
          }
          if (cp > 0x10FFFF)
            return LexError(tok->line, "illegal Unicode character in string");
          p += n;
          AppendUtf8(cp, &out);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            char32_t cp = e - '0';
            for (int k = 0;
                 k < 2 && p < src_.size() && src_[p] >= '0' && src_[p] <= '7';
                 ++k) {
              cp = cp * 8 + (src_[p++] - '0');
            }
            AppendUtf8(cp, &out);
          } else {
            // Unknown escapes keep the backslash, as in Python.
            out.push_back('\\');
            out.push_back(e);
            if (e == '\n') ++line_;
          }
          break;
      }
    }
    pos_ = p + 1;
    tok->type = Token::Type::kString;
    tok->text = std::move(out);
    return Status::Ok();
  }

  Status LexOperator(Token* tok, std::vector<char>* balance) {
    static constexpr std::string_view kTwo[] = {
        "**", "//", "==", "!=", ">=", "<="};
    for (std::string_view op : kTwo) {
      if (src_.compare(pos_, 2, op) == 0) {
        tok->type = Token::Type::kOperator;
        tok->text = std::string(op);
        pos_ += 2;
        return Status::Ok();
      }
    }
    const char c = src_[pos_];
    static constexpr std::string_view kOne = "+-/*%~[](){}><=.:|,;";
    if (kOne.find(c) == std::string_view::npos) {
      return LexError(line_, std::string("unexpected char '") + c + "'");
    }
    if (c == '(' || c == '[' || c == '{') {
      balance->push_back(c == '(' ? ')' : (c == '[' ? ']' : '}'));
    } else if (c == ')' || c == ']' || c == '}') {
      if (balance->empty())
        return LexError(line_, std::string("unexpected '") + c + "'");
      if (balance->back() != c) {
        return LexError(line_, std::string("unexpected '") + c +
                                   "', expected '" + balance->back() + "'");
      }
      balance->pop_back();
    }
    tok->type = Token::Type::kOperator;
    tok->text = std::string(1, c);
    ++pos_;
    return Status::Ok();
  }

  void EmitData(std::string_view text) { EmitDataAt(text, line_); }

  void EmitDataAt(std::string_view text, int line) {
    if (text.empty()) return;
    Token t;
    t.type = Token::Type::kData;
    t.text = std::string(text);
    t.line = line;
    tokens_.push_back(std::move(t));
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  // Whether the last consumed piece ended a line (lstrip_blocks then also
  // strips indentation when the data before a tag has no newline).
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

Result<std::vector<Token>> Tokenize(std::string_view source) {
  Lexer lexer(NormalizeSource(source));
  return lexer.Run();
}

std::string DescribeToken(const Token& token) {
  switch (token.type) {
    case Token::Type::kData:
      return "template data";
    case Token::Type::kVarBegin:
      return "begin of print statement";
    case Token::Type::kVarEnd:
      return "end of print statement";
    case Token::Type::kBlockBegin:
      return "begin of statement block";
    case Token::Type::kBlockEnd:
      return "end of statement block";
    case Token::Type::kName:
      return "'" + token.text + "'";
    case Token::Type::kString:
      return "string";
    case Token::Type::kInteger:
      return "integer";
    case Token::Type::kFloat:
      return "float";
    case Token::Type::kOperator:
      return "'" + token.text + "'";
    case Token::Type::kEof:
      return "end of template";
  }
  return "token";
}

}  // namespace redline::model::chat::jinja
