// Fuzzes the gateway's decoding of cached answers read back from Redis
// (gateway/response_cache.h), which another process or a corrupted store
// may have written: raw and zstd-compressed forms. Checks: no crash or
// unbounded allocation; a decoded entry encodes and decodes back to the
// same key, class, status and body.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "gateway/response_cache.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  auto e = redline::gateway::DecodeEntry(in);
  if (!e.ok()) return 0;
  for (int64_t threshold : {int64_t{1} << 40, int64_t{0}}) {
    auto back = redline::gateway::DecodeEntry(
        redline::gateway::EncodeEntry(*e, threshold));
    if (!back.ok() || back->canonical != e->canonical || back->cls != e->cls ||
        back->status != e->status || back->body != e->body ||
        back->events.size() != e->events.size() || back->stream != e->stream)
      std::abort();
  }
  return 0;
}
