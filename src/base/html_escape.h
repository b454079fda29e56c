// HtmlEscape: text made safe inside HTML elements and quoted attributes, as
// Jinja's markupsafe.escape does it (chat templates need its exact
// entities; the bench's HTML report uses the same function).
#ifndef REDLINE_BASE_HTML_ESCAPE_H_
#define REDLINE_BASE_HTML_ESCAPE_H_

#include <string>
#include <string_view>

namespace redline {

// & < > ' " become &amp; &lt; &gt; &#39; &#34;; other bytes pass through.
inline std::string HtmlEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '\'':
        out += "&#39;";
        break;
      case '"':
        out += "&#34;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

}  // namespace redline

#endif  // REDLINE_BASE_HTML_ESCAPE_H_
