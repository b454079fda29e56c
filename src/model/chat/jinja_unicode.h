// Unicode helpers for the Jinja interpreter: Python's `str` counts, indexes,
// strips and case-maps by code point, while Redline keeps strings as UTF-8.
//
// Decoding is lossless: a byte that is not part of valid UTF-8 decodes to a
// lone surrogate U+DC80..U+DCFF (Python's "surrogateescape") and encodes back
// to the same byte, so a template never corrupts odd input it passes through.
//
// Case mapping and character classes cover ASCII, Latin-1, Latin Extended-A,
// Greek and Cyrillic (what chat content and templates use in practice);
// other scripts are treated as uncased letters. All functions are pure and
// thread-safe.
#ifndef REDLINE_MODEL_CHAT_JINJA_UNICODE_H_
#define REDLINE_MODEL_CHAT_JINJA_UNICODE_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace redline::model::chat::jinja {

// True when every byte is < 0x80 (then bytes are code points).
bool IsAscii(std::string_view s);

// Code points of `s` (see the note on invalid bytes above). O(n), and 4
// bytes per code point: loops over long strings use CodePoints instead.
std::u32string DecodeUtf8(std::string_view s);
// Decodes the code point at byte offset *i < s.size() exactly as DecodeUtf8
// does and moves *i past it.
char32_t NextCodePoint(std::string_view s, size_t* i);
// Byte offset of code point number `index` of `s` (s.size() past the end).
// O(index).
size_t CodePointOffset(std::string_view s, size_t index);
// The code points of `s` decoded one at a time as a range-for loop asks for
// them: DecodeUtf8(s) without the copy. Holds a view, so `s` must outlive
// the loop (never pass a temporary string).
class CodePoints {
 public:
  class Iterator {
   public:
    Iterator(std::string_view s, size_t pos) : s_(s), pos_(pos) { Load(); }
    char32_t operator*() const { return cp_; }
    Iterator& operator++() {
      pos_ = next_;
      Load();
      return *this;
    }
    bool operator!=(const Iterator& other) const { return pos_ != other.pos_; }
    // Byte offset of the current code point.
    size_t offset() const { return pos_; }

   private:
    void Load() {
      if (pos_ < s_.size()) {
        next_ = pos_;
        cp_ = NextCodePoint(s_, &next_);
      }
    }
    std::string_view s_;
    size_t pos_;
    size_t next_ = 0;
    char32_t cp_ = 0;
  };

  explicit CodePoints(std::string_view s) : s_(s) {}
  Iterator begin() const { return Iterator(s_, 0); }
  Iterator end() const { return Iterator(s_, s_.size()); }

 private:
  std::string_view s_;
};

// Appends the UTF-8 encoding of `cp` (lone surrogates from DecodeUtf8 turn
// back into their original byte).
void AppendUtf8(char32_t cp, std::string* out);
std::string EncodeUtf8(std::u32string_view s);

// Number of code points in `s`. O(n).
size_t CountCodePoints(std::string_view s);

// Python's str.isspace() for one code point.
bool IsSpace(char32_t cp);
// Python-like classes (see the coverage note above).
bool IsDigit(char32_t cp);
bool IsAlpha(char32_t cp);
bool IsAlnum(char32_t cp);
// Has an upper or lower case form (Python "cased").
bool IsCased(char32_t cp);
bool IsUpper(char32_t cp);
bool IsLower(char32_t cp);
char32_t ToUpper(char32_t cp);
char32_t ToLower(char32_t cp);
// Python's str.isprintable() for one code point (approximate outside the
// ranges above: format characters, separators and controls are caught).
bool IsPrintable(char32_t cp);

}  // namespace redline::model::chat::jinja

#endif  // REDLINE_MODEL_CHAT_JINJA_UNICODE_H_
