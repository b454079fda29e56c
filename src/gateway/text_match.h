// Case-insensitive matching over message text for the cache's class rules,
// the router's refusal check and its markers: a compiled PCRE2 pattern
// (JIT when available), and substring search folded to ASCII lower case.
//
// Thread-safety: a compiled Regex is immutable and may be shared; each
// Search allocates its own match data. Cost: linear in the text for the
// patterns rules use.
#ifndef REDLINE_GATEWAY_TEXT_MATCH_H_
#define REDLINE_GATEWAY_TEXT_MATCH_H_

#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"

namespace redline::gateway {

class Regex {
 public:
  // InvalidArgument naming the offset of a syntax error.
  static Result<Regex> Compile(const std::string& pattern);
  // True when the pattern matches anywhere in `text`.
  bool Search(std::string_view text) const;
  bool empty() const { return code_ == nullptr; }

 private:
  struct Code;
  std::shared_ptr<const Code> code_;
};

// ASCII lower case.
std::string Lower(std::string_view text);

// Occurrences of `needle` (already lower case) in `lowered_text`.
int CountOccurrences(std::string_view lowered_text, std::string_view needle);

}  // namespace redline::gateway

#endif  // REDLINE_GATEWAY_TEXT_MATCH_H_
