#include "gateway/text_match.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <fmt/format.h>
#include <pcre2.h>

namespace redline::gateway {

struct Regex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

Result<Regex> Regex::Compile(const std::string& pattern) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(
      reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
      PCRE2_CASELESS | PCRE2_UTF | PCRE2_MATCH_INVALID_UTF, &err, &offset,
      nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    return Status::InvalidArgument(
        fmt::format("bad regex '{}' at offset {}: {}", pattern, offset,
                    reinterpret_cast<const char*>(msg)));
  }
  // JIT is an optimisation: without it matching still works.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  auto c = std::make_shared<Code>();
  c->code = code;
  Regex r;
  r.code_ = std::move(c);
  return r;
}

bool Regex::Search(std::string_view text) const {
  if (code_ == nullptr) return false;
  pcre2_match_data* md =
      pcre2_match_data_create_from_pattern(code_->code, nullptr);
  const int rc =
      pcre2_match(code_->code, reinterpret_cast<PCRE2_SPTR>(text.data()),
                  text.size(), 0, 0, md, nullptr);
  pcre2_match_data_free(md);
  return rc >= 0;
}

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

int CountOccurrences(std::string_view lowered_text, std::string_view needle) {
  if (needle.empty()) return 0;
  int n = 0;
  size_t pos = 0;
  while ((pos = lowered_text.find(needle, pos)) != std::string_view::npos) {
    ++n;
    pos += needle.size();
  }
  return n;
}

}  // namespace redline::gateway
