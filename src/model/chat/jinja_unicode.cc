#include "model/chat/jinja_unicode.h"

namespace redline::model::chat::jinja {

bool IsAscii(std::string_view s) {
  for (unsigned char c : s) {
    if (c >= 0x80) return false;
  }
  return true;
}

char32_t NextCodePoint(std::string_view s, size_t* i) {
  const size_t n = s.size();
  const unsigned char c = static_cast<unsigned char>(s[*i]);
  if (c < 0x80) {
    ++*i;
    return c;
  }
  int len = 0;
  char32_t cp = 0;
  char32_t min = 0;
  if ((c & 0xE0) == 0xC0) {
    len = 2, cp = c & 0x1F, min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3, cp = c & 0x0F, min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4, cp = c & 0x07, min = 0x10000;
  }
  bool valid = len > 0 && *i + len <= n;
  for (int k = 1; valid && k < len; ++k) {
    const unsigned char cc = static_cast<unsigned char>(s[*i + k]);
    if ((cc & 0xC0) != 0x80) {
      valid = false;
    } else {
      cp = (cp << 6) | (cc & 0x3F);
    }
  }
  // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
  if (valid && (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)))
    valid = false;
  if (valid) {
    *i += len;
    return cp;
  }
  ++*i;
  return 0xDC00 + c;  // surrogateescape
}

std::u32string DecodeUtf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) out.push_back(NextCodePoint(s, &i));
  return out;
}

size_t CodePointOffset(std::string_view s, size_t index) {
  size_t i = 0;
  for (size_t k = 0; k < index && i < s.size(); ++k) NextCodePoint(s, &i);
  return i;
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp >= 0xDC80 && cp <= 0xDCFF) {
    out->push_back(static_cast<char>(cp - 0xDC00));  // an escaped raw byte
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

std::string EncodeUtf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t cp : s) AppendUtf8(cp, &out);
  return out;
}

size_t CountCodePoints(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++n) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
    } else {
      NextCodePoint(s, &i);
    }
  }
  return n;
}

bool IsSpace(char32_t cp) {
  if (cp < 0x80)
    return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20);
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

bool IsDigit(char32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return cp == 0xB2 || cp == 0xB3 || cp == 0xB9 ||
         (cp >= 0x660 && cp <= 0x669) || (cp >= 0x6F0 && cp <= 0x6F9) ||
         (cp >= 0x966 && cp <= 0x96F) || (cp >= 0xFF10 && cp <= 0xFF19);
}

namespace {

// Simple one-to-one case pairs. Returns the other case or `cp` itself.
char32_t PairedUpper(char32_t cp) {
  if (cp >= 'a' && cp <= 'z') return cp - 32;
  if (cp < 0xB5) return cp;
  if (cp == 0xB5) return 0x39C;
  if (cp >= 0xE0 && cp <= 0xFE && cp != 0xF7) return cp - 32;
  if (cp == 0xFF) return 0x178;
  if (cp >= 0x100 && cp <= 0x17F) {
    if (cp == 0x131) return 'I';
    if (cp == 0x17F) return 'S';
    if ((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E)) {
      return (cp % 2 == 0) ? cp - 1 : cp;
    }
    if (cp == 0x138 || cp == 0x149 || cp == 0x130 || cp == 0x178) return cp;
    return (cp % 2 == 1) ? cp - 1 : cp;
  }
  if (cp >= 0x3B1 && cp <= 0x3C9) return cp == 0x3C2 ? 0x3A3 : cp - 32;
  if (cp == 0x3AC) return 0x386;
  if (cp >= 0x3AD && cp <= 0x3AF) return cp - 37;
  if (cp == 0x3CC) return 0x38C;
  if (cp == 0x3CD || cp == 0x3CE) return cp - 63;
  if (cp >= 0x430 && cp <= 0x44F) return cp - 32;
  if (cp >= 0x450 && cp <= 0x45F) return cp - 80;
  if ((cp >= 0x460 && cp <= 0x481) || (cp >= 0x48A && cp <= 0x4BF) ||
      (cp >= 0x4D0 && cp <= 0x52F)) {
    return (cp % 2 == 1) ? cp - 1 : cp;
  }
  if (cp == 0x4CF) return 0x4C0;
  if (cp >= 0x4C1 && cp <= 0x4CE) return (cp % 2 == 0) ? cp - 1 : cp;
  if (cp >= 0x561 && cp <= 0x586) return cp - 48;
  if (cp >= 0x1E00 && cp <= 0x1EFF && !(cp >= 0x1E96 && cp <= 0x1E9F)) {
    return (cp % 2 == 1) ? cp - 1 : cp;
  }
  if (cp >= 0xFF41 && cp <= 0xFF5A) return cp - 32;
  return cp;
}

char32_t PairedLower(char32_t cp) {
  if (cp >= 'A' && cp <= 'Z') return cp + 32;
  if (cp < 0xC0) return cp;
  if (cp >= 0xC0 && cp <= 0xDE && cp != 0xD7) return cp + 32;
  if (cp == 0x178) return 0xFF;
  if (cp >= 0x100 && cp <= 0x17F) {
    if (cp == 0x130) return 'i';
    if ((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E)) {
      return (cp % 2 == 1) ? cp + 1 : cp;
    }
    if (cp == 0x131 || cp == 0x138 || cp == 0x149 || cp == 0x17F) return cp;
    return (cp % 2 == 0) ? cp + 1 : cp;
  }
  if (cp >= 0x391 && cp <= 0x3A9 && cp != 0x3A2) return cp + 32;
  if (cp == 0x386) return 0x3AC;
  if (cp >= 0x388 && cp <= 0x38A) return cp + 37;
  if (cp == 0x38C) return 0x3CC;
  if (cp == 0x38E || cp == 0x38F) return cp + 63;
  if (cp >= 0x410 && cp <= 0x42F) return cp + 32;
  if (cp >= 0x400 && cp <= 0x40F) return cp + 80;
  if ((cp >= 0x460 && cp <= 0x481) || (cp >= 0x48A && cp <= 0x4BF) ||
      (cp >= 0x4D0 && cp <= 0x52F)) {
    return (cp % 2 == 0) ? cp + 1 : cp;
  }
  if (cp == 0x4C0) return 0x4CF;
  if (cp >= 0x4C1 && cp <= 0x4CE) return (cp % 2 == 1) ? cp + 1 : cp;
  if (cp >= 0x531 && cp <= 0x556) return cp + 48;
  if (cp >= 0x1E00 && cp <= 0x1EFF && !(cp >= 0x1E96 && cp <= 0x1E9F)) {
    return (cp % 2 == 0) ? cp + 1 : cp;
  }
  if (cp >= 0xFF21 && cp <= 0xFF3A) return cp + 32;
  return cp;
}

}  // namespace

char32_t ToUpper(char32_t cp) { return PairedUpper(cp); }
char32_t ToLower(char32_t cp) { return PairedLower(cp); }
bool IsUpper(char32_t cp) { return PairedLower(cp) != cp; }
bool IsLower(char32_t cp) {
  return PairedUpper(cp) != cp || cp == 0xDF || cp == 0x138 || cp == 0x149;
}
bool IsCased(char32_t cp) { return IsUpper(cp) || IsLower(cp); }

bool IsAlpha(char32_t cp) {
  if (cp < 0x80) return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
  if (cp < 0x100)
    return cp == 0xAA || cp == 0xB5 || cp == 0xBA ||
           (cp >= 0xC0 && cp != 0xD7 && cp != 0xF7);
  if (IsSpace(cp) || IsDigit(cp) || !IsPrintable(cp)) return false;
  if (cp >= 0x300 && cp <= 0x36F) return false;  // combining marks
  if (cp >= 0x2000 && cp <= 0x2BFF)
    return false;  // punctuation, symbols, arrows
  if (cp >= 0x3000 && cp <= 0x303F) return false;  // CJK punctuation
  if (cp >= 0xFE00 && cp <= 0xFE0F) return false;  // variation selectors
  if (cp >= 0xFE30 && cp <= 0xFE4F) return false;
  if ((cp >= 0xFF00 && cp <= 0xFF20) || (cp >= 0xFF3B && cp <= 0xFF40) ||
      (cp >= 0xFF5B && cp <= 0xFF65)) {
    return false;
  }
  if (cp >= 0x1F000 && cp <= 0x1FAFF) return false;  // emoji and pictographs
  return true;
}

bool IsAlnum(char32_t cp) { return IsAlpha(cp) || IsDigit(cp); }

bool IsPrintable(char32_t cp) {
  if (cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD) return false;
  if (cp < 0x600) return true;
  if ((cp >= 0x600 && cp <= 0x605) || cp == 0x61C || cp == 0x6DD || cp == 0x70F)
    return false;
  if (cp == 0x1680 || cp == 0x180E) return false;
  if ((cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F) ||
      (cp >= 0x205F && cp <= 0x206F)) {
    return false;
  }
  if (cp == 0x3000 || cp == 0xFEFF || (cp >= 0xFFF9 && cp <= 0xFFFB))
    return false;
  if (cp >= 0xD800 && cp <= 0xF8FF) return false;  // surrogates, private use
  if (cp == 0xFFFE || cp == 0xFFFF) return false;
  if (cp >= 0xE0000) return false;  // tags, private use planes
  return true;
}

}  // namespace redline::model::chat::jinja
