// Lookups over the generated tables in unicode_data.cc.
#include <algorithm>
#include <vector>

#include "base/utf8.h"
#include "model/tokenizer/unicode_data.h"

namespace redline::model::unicode_data {
namespace {

bool InRanges(const CodepointRange* ranges, size_t size, uint32_t cp) {
  const CodepointRange* end = ranges + size;
  const CodepointRange* it = std::upper_bound(
      ranges, end, cp,
      [](uint32_t value, const CodepointRange& r) { return value < r.first; });
  return it != ranges && cp <= (it - 1)->last;
}

const CodepointMapping* FindMapping(const CodepointMapping* table, size_t size,
                                    uint32_t cp) {
  const CodepointMapping* end = table + size;
  const CodepointMapping* it = std::lower_bound(
      table, end, cp,
      [](const CodepointMapping& m, uint32_t value) { return m.cp < value; });
  return it != end && it->cp == cp ? it : nullptr;
}

// Hangul syllable decomposition constants (Unicode chapter 3.12).
constexpr uint32_t kHangulBase = 0xAC00;
constexpr uint32_t kLeadBase = 0x1100;
constexpr uint32_t kVowelBase = 0x1161;
constexpr uint32_t kTrailBase = 0x11A7;
constexpr uint32_t kVowelCount = 21;
constexpr uint32_t kTrailCount = 28;
constexpr uint32_t kLeadCount = 19;
constexpr uint32_t kSyllableCount = kLeadCount * kVowelCount * kTrailCount;

// The primary composite of (first, second), or 0.
uint32_t Compose(uint32_t first, uint32_t second) {
  // Hangul: L + V -> LV, LV + T -> LVT.
  if (first >= kLeadBase && first < kLeadBase + kLeadCount &&
      second >= kVowelBase && second < kVowelBase + kVowelCount) {
    return kHangulBase +
           ((first - kLeadBase) * kVowelCount + (second - kVowelBase)) *
               kTrailCount;
  }
  if (first >= kHangulBase && first < kHangulBase + kSyllableCount &&
      (first - kHangulBase) % kTrailCount == 0 && second > kTrailBase &&
      second < kTrailBase + kTrailCount) {
    return first + (second - kTrailBase);
  }
  const uint64_t key = (static_cast<uint64_t>(first) << 21) | second;
  const Composition* end = kCompositions + kCompositionsSize;
  const Composition* it = std::lower_bound(
      kCompositions, end, key,
      [](const Composition& c, uint64_t k) { return c.key < k; });
  return it != end && it->key == key ? it->composite : 0;
}

}  // namespace

bool IsOther(uint32_t cp) {
  return InRanges(kOtherRanges, kOtherRangesSize, cp);
}

bool IsPunctuation(uint32_t cp) {
  return InRanges(kPunctuationRanges, kPunctuationRangesSize, cp);
}

bool IsNonspacingMark(uint32_t cp) {
  return InRanges(kNonspacingMarkRanges, kNonspacingMarkRangesSize, cp);
}

bool IsWhitespace(uint32_t cp) {
  switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

bool AppendDecomposition(uint32_t cp, uint32_t* out, size_t* n) {
  if (cp >= kHangulBase && cp < kHangulBase + kSyllableCount) {
    const uint32_t index = cp - kHangulBase;
    out[(*n)++] = kLeadBase + index / (kVowelCount * kTrailCount);
    out[(*n)++] =
        kVowelBase + (index % (kVowelCount * kTrailCount)) / kTrailCount;
    if (index % kTrailCount != 0)
      out[(*n)++] = kTrailBase + index % kTrailCount;
    return true;
  }
  const CodepointMapping* m =
      FindMapping(kDecompositions, kDecompositionsSize, cp);
  if (m == nullptr) return false;
  for (uint32_t i = 0; i < m->length; ++i)
    out[(*n)++] = kDecompositionsPool[m->offset + i];
  return true;
}

std::span<const uint32_t> Lowercase(uint32_t cp) {
  if (cp < 0x80) {
    // Fast path for ASCII; the table has the same entries.
    static const uint32_t kAsciiLower[26] = {
        'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k', 'l', 'm',
        'n', 'o', 'p', 'q', 'r', 's', 't', 'u', 'v', 'w', 'x', 'y', 'z'};
    if (cp >= 'A' && cp <= 'Z') return {&kAsciiLower[cp - 'A'], 1};
    return {};
  }
  const CodepointMapping* m = FindMapping(kLowercase, kLowercaseSize, cp);
  if (m == nullptr) return {};
  return {kLowercasePool + m->offset, m->length};
}

uint8_t CombiningClass(uint32_t cp) {
  if (cp < 0x300) return 0;
  const CombiningClassRange* end = kCombiningClasses + kCombiningClassesSize;
  const CombiningClassRange* it =
      std::upper_bound(kCombiningClasses, end, cp,
                       [](uint32_t value, const CombiningClassRange& r) {
                         return value < r.first;
                       });
  if (it == kCombiningClasses || cp > (it - 1)->last) return 0;
  return (it - 1)->ccc;
}

bool MayNeedNfc(std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    if (static_cast<uint8_t>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    size_t len = 0;
    const uint32_t cp = utf8::DecodeCodepoint(text, pos, &len);
    if (len > 1 && InRanges(kNfcMaybeRanges, kNfcMaybeRangesSize, cp))
      return true;
    pos += len;
  }
  return false;
}

void AppendNfc(std::string_view text, std::string* out) {
  // Code points of the decomposition; malformed bytes are kept as
  // kRawByteBase + byte, a starter that composes with nothing.
  constexpr uint32_t kRawByteBase = 0x80000000u;
  std::vector<uint32_t> cps;
  cps.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    size_t len = 0;
    const uint32_t cp = utf8::DecodeCodepoint(text, pos, &len);
    if (len == 1 && static_cast<uint8_t>(text[pos]) >= 0x80) {
      cps.push_back(kRawByteBase | static_cast<uint8_t>(text[pos]));
    } else {
      uint32_t buf[8];
      size_t n = 0;
      if (AppendDecomposition(cp, buf, &n)) {
        cps.insert(cps.end(), buf, buf + n);
      } else {
        cps.push_back(cp);
      }
    }
    pos += len;
  }
  auto ccc = [](uint32_t cp) -> uint8_t {
    return (cp & kRawByteBase) != 0 ? 0 : CombiningClass(cp);
  };
  // Canonical ordering: stable sort of each run of non-starters by class.
  for (size_t i = 0; i < cps.size();) {
    if (ccc(cps[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < cps.size() && ccc(cps[j]) != 0) ++j;
    std::stable_sort(cps.begin() + static_cast<std::ptrdiff_t>(i),
                     cps.begin() + static_cast<std::ptrdiff_t>(j),
                     [&](uint32_t a, uint32_t b) { return ccc(a) < ccc(b); });
    i = j;
  }
  // Canonical composition (UAX #15).
  if (!cps.empty()) {
    size_t starter = 0;
    int last_class = ccc(cps[0]) == 0 ? 0 : 256;
    size_t out_len = 1;
    for (size_t i = 1; i < cps.size(); ++i) {
      const uint32_t cp = cps[i];
      const int cls = ccc(cp);
      const bool raw =
          (cp & kRawByteBase) != 0 || (cps[starter] & kRawByteBase) != 0;
      const uint32_t composite =
          raw || last_class == 256 ? 0 : Compose(cps[starter], cp);
      if (composite != 0 && (last_class < cls || last_class == 0)) {
        cps[starter] = composite;
        continue;
      }
      if (cls == 0) starter = out_len;
      last_class = cls;
      cps[out_len++] = cp;
    }
    cps.resize(out_len);
  }
  for (uint32_t cp : cps) {
    if ((cp & kRawByteBase) != 0) {
      out->push_back(static_cast<char>(cp & 0xFF));
    } else {
      utf8::AppendCodepoint(cp, out);
    }
  }
}

}  // namespace redline::model::unicode_data
