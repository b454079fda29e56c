// Helpers shared by the GGUF tests: deep value comparison, deterministic
// tensor contents, a writer that copies a parsed file, and the builders of the
// committed fuzz seeds (tests/data/gguf_seeds).
#ifndef REDLINE_MODEL_GGUF_GGUF_TEST_UTIL_H_
#define REDLINE_MODEL_GGUF_GGUF_TEST_UTIL_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "model/gguf/gguf.h"
#include "model/gguf/gguf_writer.h"

namespace redline::model::gguf::testing {

// Deep comparison: same type, same element type, same held value (floats
// compared bitwise, so NaN == NaN).
bool ValuesEqual(const Value& a, const Value& b);

// `n` deterministic bytes derived from `seed` (not all zero).
std::vector<uint8_t> PatternBytes(uint32_t seed, size_t n);
// A fill callback writing PatternBytes(seed, size).
std::function<void(std::span<uint8_t>)> PatternFill(uint32_t seed);

// A writer with `file`'s metadata (same order), alignment and tensors (same
// order, bytes copied from the file's data when Write runs, so the file must
// outlive the writer's use).
GgufWriter CopyToWriter(const GgufFile& file);

// The fuzz seeds: file name -> writer. Each file is < 4 KiB.
std::vector<std::pair<std::string, GgufWriter>> SeedWriters();

// Raw little-endian byte building for files the writer refuses to produce.
class RawBytes {
 public:
  RawBytes& U8(uint8_t v);
  RawBytes& U32(uint32_t v);
  RawBytes& U64(uint64_t v);
  RawBytes& I64(int64_t v);
  RawBytes& Str(std::string_view s);
  RawBytes& Bytes(size_t n, uint8_t fill);
  // "GGUF", version, tensor count, metadata count.
  RawBytes& Header(uint32_t version, uint64_t tensor_count, uint64_t kv_count);
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

}  // namespace redline::model::gguf::testing

#endif  // REDLINE_MODEL_GGUF_GGUF_TEST_UTIL_H_
