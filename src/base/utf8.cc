#include "base/utf8.h"

namespace redline::utf8 {
namespace {

inline bool IsContinuation(uint8_t b) { return (b & 0xC0) == 0x80; }

// Expected length for a lead byte, 0 if `b` cannot start a character.
inline size_t LeadLength(uint8_t b) {
  if (b < 0x80) return 1;
  if (b < 0xC2) return 0;  // continuation byte or overlong 2-byte lead
  if (b < 0xE0) return 2;
  if (b < 0xF0) return 3;
  if (b < 0xF5) return 4;
  return 0;
}

// Valid range of the second byte given the lead (excludes overlongs,
// surrogates and code points above U+10FFFF).
inline bool SecondByteOk(uint8_t lead, uint8_t b) {
  switch (lead) {
    case 0xE0:
      return b >= 0xA0 && b <= 0xBF;
    case 0xED:
      return b >= 0x80 && b <= 0x9F;
    case 0xF0:
      return b >= 0x90 && b <= 0xBF;
    case 0xF4:
      return b >= 0x80 && b <= 0x8F;
    default:
      return IsContinuation(b);
  }
}

}  // namespace

size_t CharLength(std::string_view text, size_t pos) {
  const auto* p = reinterpret_cast<const uint8_t*>(text.data()) + pos;
  const size_t avail = text.size() - pos;
  const size_t len = LeadLength(p[0]);
  if (len <= 1) return 1;
  if (avail < len || !SecondByteOk(p[0], p[1])) return 1;
  for (size_t i = 2; i < len; ++i) {
    if (!IsContinuation(p[i])) return 1;
  }
  return len;
}

uint32_t DecodeCodepoint(std::string_view text, size_t pos, size_t* length) {
  const auto* p = reinterpret_cast<const uint8_t*>(text.data()) + pos;
  const size_t len = CharLength(text, pos);
  *length = len;
  switch (len) {
    case 1:
      return p[0] < 0x80 ? p[0] : kReplacementChar;
    case 2:
      return ((p[0] & 0x1Fu) << 6) | (p[1] & 0x3Fu);
    case 3:
      return ((p[0] & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
    default:
      return ((p[0] & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) |
             ((p[2] & 0x3Fu) << 6) | (p[3] & 0x3Fu);
  }
}

void AppendCodepoint(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool IsValid(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    const auto b = static_cast<uint8_t>(text[pos]);
    if (b < 0x80) {
      ++pos;
      continue;
    }
    const size_t len = CharLength(text, pos);
    if (len == 1) return false;
    pos += len;
  }
  return true;
}

size_t CompletePrefixLength(std::string_view text) {
  const size_t n = text.size();
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  // Find the last byte that is not a continuation byte within the last four.
  size_t back = 0;
  while (back < 4 && back < n && IsContinuation(p[n - 1 - back])) ++back;
  if (back == n || back == 4) return n;  // only continuations: never valid
  const size_t start = n - 1 - back;
  const size_t need = LeadLength(p[start]);
  const size_t have = back + 1;
  if (need <= 1 || have >= need) return n;
  // An incomplete tail; hold it back only if it can still become valid.
  if (have >= 2 && !SecondByteOk(p[start], p[start + 1])) return n;
  return start;
}

std::string Sanitize(std::string_view text) {
  if (IsValid(text)) return std::string(text);
  std::string out;
  out.reserve(text.size() + 8);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t len = 0;
    const uint32_t cp = DecodeCodepoint(text, pos, &len);
    if (len == 0) len = 1;
    if (cp == kReplacementChar && len == 1) {
      AppendCodepoint(kReplacementChar, &out);
    } else {
      out.append(text.substr(pos, len));
    }
    pos += len;
  }
  return out;
}

}  // namespace redline::utf8
