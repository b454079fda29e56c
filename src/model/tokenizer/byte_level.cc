#include "model/tokenizer/byte_level.h"

#include <array>

#include "base/utf8.h"

namespace redline::model::byte_level {
namespace {

struct Tables {
  std::array<std::string, 256> byte_to_text;
  // Code points U+0000..U+01FF cover the whole alphabet; -1: not in it.
  std::array<int16_t, 512> codepoint_to_byte;

  Tables() {
    codepoint_to_byte.fill(-1);
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) ||
                             (b >= 0xA1 && b <= 0xAC) ||
                             (b >= 0xAE && b <= 0xFF);
      const uint32_t cp = printable ? b : next++;
      utf8::AppendCodepoint(cp, &byte_to_text[b]);
      codepoint_to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const Tables& GetTables() {
  static const Tables tables;
  return tables;
}

}  // namespace

std::string_view ByteToText(uint8_t b) { return GetTables().byte_to_text[b]; }

void Encode(std::string_view bytes, std::string* out) {
  const Tables& t = GetTables();
  for (char c : bytes) out->append(t.byte_to_text[static_cast<uint8_t>(c)]);
}

void Decode(std::string_view text, std::string* out) {
  const Tables& t = GetTables();
  size_t pos = 0;
  while (pos < text.size()) {
    size_t len = 0;
    const uint32_t cp = utf8::DecodeCodepoint(text, pos, &len);
    if (len > 1 || static_cast<uint8_t>(text[pos]) < 0x80) {
      if (cp < t.codepoint_to_byte.size() && t.codepoint_to_byte[cp] >= 0) {
        out->push_back(static_cast<char>(t.codepoint_to_byte[cp]));
        pos += len;
        continue;
      }
    }
    out->append(text.substr(pos, len));
    pos += len;
  }
}

}  // namespace redline::model::byte_level
