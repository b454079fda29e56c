// UTF-8 helpers shared by the tokenizers, the streaming detokenizer and the
// OpenAI codec.
//
// All functions are pure and safe to call from any thread; only
// AppendCodepoint (which appends to the caller's string) and Sanitize
// allocate. They never read outside the given span and treat malformed input
// as data, not as an error: an invalid byte is reported as a one-byte
// "character" so callers can fall back to byte tokens instead of crashing.
#ifndef REDLINE_BASE_UTF8_H_
#define REDLINE_BASE_UTF8_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace redline::utf8 {

// U+FFFD, what DecodeCodepoint returns for a malformed sequence.
inline constexpr uint32_t kReplacementChar = 0xFFFD;

// Length in bytes of the well-formed UTF-8 character that starts at
// text[pos], or 1 if the bytes there do not form one (stray continuation
// byte, overlong form, surrogate, truncated sequence, > U+10FFFF).
// Requires pos < text.size().
size_t CharLength(std::string_view text, size_t pos);

// Decodes the character at text[pos] and stores its length in *length
// (as CharLength). Malformed input yields kReplacementChar with *length = 1.
uint32_t DecodeCodepoint(std::string_view text, size_t pos, size_t* length);

// Appends the UTF-8 encoding of `cp` (cp <= 0x10FFFF; surrogates are encoded
// as-is, callers never pass them).
void AppendCodepoint(uint32_t cp, std::string* out);

// True if `text` is entirely well-formed UTF-8.
bool IsValid(std::string_view text);

// Length of the longest prefix of `text` that does not end inside a
// character that could still be completed by more bytes. Bytes that can
// never become part of a valid character (e.g. 0xFF, or a lead byte followed
// by a non-continuation byte) count as complete: holding them back would
// stall a stream forever. Used by streaming detokenization so that no chunk
// ends with half a character.
size_t CompletePrefixLength(std::string_view text);

// `text` with every malformed sequence replaced by U+FFFD, so that it can be
// sent as a JSON string. Returns a copy of `text` when it is already valid.
std::string Sanitize(std::string_view text);

}  // namespace redline::utf8

#endif  // REDLINE_BASE_UTF8_H_
