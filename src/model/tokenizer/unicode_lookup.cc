// Lookups over the generated tables in unicode_data.cc.
#include <algorithm>

#include "model/tokenizer/unicode_data.h"

namespace redline::model::unicode_data {
namespace {

bool InRanges(const CodepointRange* ranges, size_t size, uint32_t cp) {
  const CodepointRange* end = ranges + size;
  const CodepointRange* it = std::upper_bound(
      ranges, end, cp, [](uint32_t value, const CodepointRange& r) { return value < r.first; });
  return it != ranges && cp <= (it - 1)->last;
}

const CodepointMapping* FindMapping(const CodepointMapping* table, size_t size, uint32_t cp) {
  const CodepointMapping* end = table + size;
  const CodepointMapping* it = std::lower_bound(
      table, end, cp, [](const CodepointMapping& m, uint32_t value) { return m.cp < value; });
  return it != end && it->cp == cp ? it : nullptr;
}

// Hangul syllable decomposition constants (Unicode chapter 3.12).
constexpr uint32_t kHangulBase = 0xAC00;
constexpr uint32_t kLeadBase = 0x1100;
constexpr uint32_t kVowelBase = 0x1161;
constexpr uint32_t kTrailBase = 0x11A7;
constexpr uint32_t kVowelCount = 21;
constexpr uint32_t kTrailCount = 28;
constexpr uint32_t kSyllableCount = 19 * kVowelCount * kTrailCount;

}  // namespace

bool IsOther(uint32_t cp) { return InRanges(kOtherRanges, kOtherRangesSize, cp); }

bool IsPunctuation(uint32_t cp) {
  return InRanges(kPunctuationRanges, kPunctuationRangesSize, cp);
}

bool IsNonspacingMark(uint32_t cp) {
  return InRanges(kNonspacingMarkRanges, kNonspacingMarkRangesSize, cp);
}

bool IsWhitespace(uint32_t cp) {
  switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20: case 0x85: case 0xA0:
    case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

bool AppendDecomposition(uint32_t cp, uint32_t* out, size_t* n) {
  if (cp >= kHangulBase && cp < kHangulBase + kSyllableCount) {
    const uint32_t index = cp - kHangulBase;
    out[(*n)++] = kLeadBase + index / (kVowelCount * kTrailCount);
    out[(*n)++] = kVowelBase + (index % (kVowelCount * kTrailCount)) / kTrailCount;
    if (index % kTrailCount != 0) out[(*n)++] = kTrailBase + index % kTrailCount;
    return true;
  }
  const CodepointMapping* m = FindMapping(kDecompositions, kDecompositionsSize, cp);
  if (m == nullptr) return false;
  for (uint32_t i = 0; i < m->length; ++i) out[(*n)++] = kDecompositionsPool[m->offset + i];
  return true;
}

std::span<const uint32_t> Lowercase(uint32_t cp) {
  if (cp < 0x80) {
    // Fast path for ASCII; the table has the same entries.
    static const uint32_t kAsciiLower[26] = {'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i',
                                             'j', 'k', 'l', 'm', 'n', 'o', 'p', 'q', 'r',
                                             's', 't', 'u', 'v', 'w', 'x', 'y', 'z'};
    if (cp >= 'A' && cp <= 'Z') return {&kAsciiLower[cp - 'A'], 1};
    return {};
  }
  const CodepointMapping* m = FindMapping(kLowercase, kLowercaseSize, cp);
  if (m == nullptr) return {};
  return {kLowercasePool + m->offset, m->length};
}

}  // namespace redline::model::unicode_data
