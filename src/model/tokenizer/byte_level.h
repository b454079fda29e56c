// GPT-2 byte-level alphabet: every byte maps to one printable Unicode
// character so that byte-level BPE vocabularies can be stored as text
// (space -> "Ġ" U+0120, newline -> "Ċ" U+010A, ...).
//
// Printable Latin-1 bytes ('!'..'~', U+00A1..U+00AC, U+00AE..U+00FF) map to
// themselves; the other 68 bytes map to U+0100.. in byte order. This is the
// `bytes_to_unicode` table of OpenAI's encoder.py, which every byte-level BPE
// tokenizer (GPT-2, Llama 3, Qwen2, ...) shares.
//
// Thread-safety: the tables are built on first use (thread-safe static
// initialization) and immutable afterwards.
#ifndef REDLINE_MODEL_TOKENIZER_BYTE_LEVEL_H_
#define REDLINE_MODEL_TOKENIZER_BYTE_LEVEL_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace redline::model::byte_level {

// The UTF-8 text (1 or 2 bytes) of the character byte `b` maps to.
std::string_view ByteToText(uint8_t b);

// Appends the byte-level form of `bytes` to *out.
void Encode(std::string_view bytes, std::string* out);

// Appends the raw bytes of a byte-level text to *out. Characters outside the
// alphabet (e.g. in tokens added as literal text) are copied unchanged.
void Decode(std::string_view text, std::string* out);

}  // namespace redline::model::byte_level

#endif  // REDLINE_MODEL_TOKENIZER_BYTE_LEVEL_H_
