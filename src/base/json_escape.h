// JsonQuote: a string as a JSON string literal (quotes included), for the few
// places that write JSON by hand (reports) without a JSON library.
#ifndef REDLINE_BASE_JSON_ESCAPE_H_
#define REDLINE_BASE_JSON_ESCAPE_H_

#include <string>
#include <string_view>

namespace redline {

// Escapes ", \ and control characters; other bytes (UTF-8) pass through.
inline std::string JsonQuote(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
  return out;
}

}  // namespace redline

#endif  // REDLINE_BASE_JSON_ESCAPE_H_
