// libFuzzer target for the stream-chunk and response-body parsers and the
// gateway's timings rewrite (api/response.h): the bench and the gateway read
// them from servers they do not control.
//
// Input: one chunk's JSON. Checks:
//   - ParseStreamChunk and ParseResponse never crash, and a parser reused
//     after an earlier chunk gives the same result as a fresh one;
//   - AddGatewayTiming succeeds exactly when the chunk is an object with a
//     "timings" object whose parsed tree serialises back to JSON (a number
//     beyond a double's range does not), and then its output parses,
//     carries the gateway share, and keeps everything else ParseStreamChunk
//     reads (content, reasoning, finish, usage, error, logprobs, the
//     server's timings; numbers to within an ulp or so, see Near).
//
//   cmake --preset fuzz && cmake --build --preset fuzz --target stream_chunk_fuzz
//   ./build/fuzz/fuzz/stream_chunk_fuzz -max_total_time=60 tests/data/stream_chunk_seeds
#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/response.h"
#include "base/check.h"

namespace {

namespace api = redline::api;

bool SameUsage(const std::optional<api::Usage>& a,
               const std::optional<api::Usage>& b) {
  if (a.has_value() != b.has_value()) return false;
  return !a || (a->prompt_tokens == b->prompt_tokens &&
                a->completion_tokens == b->completion_tokens);
}

// Equal, or within a few units in the last place: Boost.JSON's parser is
// not correctly rounded for numbers written with more digits than a double
// holds, so its shortest serialisation can read back one ulp away.
bool Near(double a, double b) {
  return a == b ||
         std::fabs(a - b) <= 4e-16 * std::max(std::fabs(a), std::fabs(b));
}

bool NearAll(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!Near(a[i], b[i])) return false;
  return true;
}

// The server's entries; gateway_ms is compared separately.
bool SameTimings(const std::optional<api::ServerTimings>& a,
                 const std::optional<api::ServerTimings>& b) {
  if (a.has_value() != b.has_value()) return false;
  return !a ||
         (Near(a->queue_ms, b->queue_ms) &&
          Near(a->prefill_ms, b->prefill_ms) && Near(a->ttft_ms, b->ttft_ms) &&
          Near(a->decode_ms, b->decode_ms) && Near(a->e2e_ms, b->e2e_ms));
}

bool Same(const api::StreamChunk& a, const api::StreamChunk& b) {
  return a.content == b.content && a.reasoning == b.reasoning &&
         a.has_role == b.has_role && a.has_finish == b.has_finish &&
         a.finish_reason == b.finish_reason && a.num_choices == b.num_choices &&
         SameUsage(a.usage, b.usage) && SameTimings(a.timings, b.timings) &&
         a.error.has_value() == b.error.has_value() &&
         (!a.error || a.error->message == b.error->message) &&
         NearAll(a.token_logprobs, b.token_logprobs);
}

// An object with a "timings" object that survives a serialisation.
bool CanCarryGatewayTiming(std::string_view text) {
  boost::json::error_code ec;
  const boost::json::value v = boost::json::parse(text, ec);
  if (ec || !v.is_object()) return false;
  const boost::json::value* t = v.get_object().if_contains("timings");
  if (t == nullptr || !t->is_object()) return false;
  boost::json::parse(boost::json::serialize(v), ec);
  return !ec;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  api::StreamChunk fresh;
  const bool parsed = api::ParseStreamChunk(text, &fresh).ok();
  api::StreamChunk reused;
  (void)api::ParseStreamChunk(
      R"({"choices":[{"delta":{"content":"x"},"finish_reason":"stop"}],)"
      R"("usage":{"prompt_tokens":3,"completion_tokens":4}})",
      &reused);
  RL_CHECK(api::ParseStreamChunk(text, &reused).ok() == parsed);
  if (parsed) RL_CHECK(Same(fresh, reused)) << "a reused chunk kept state";

  (void)api::ParseResponse(text);

  const std::optional<std::string> with = api::AddGatewayTiming(text, 1.5);
  RL_CHECK(with.has_value() == CanCarryGatewayTiming(text))
      << "AddGatewayTiming disagrees with the chunk's shape";
  if (with) {
    api::StreamChunk after;
    const bool after_parsed = api::ParseStreamChunk(*with, &after).ok();
    RL_CHECK(after_parsed == parsed) << "the rewrite changed parseability";
    if (parsed) {
      // A timings object with none of the server's names reads as absent
      // before the rewrite; gateway_ms alone still does not make it one.
      RL_CHECK(SameTimings(fresh.timings, after.timings) || !fresh.timings)
          << "the server's timings changed";
      fresh.timings = after.timings;
      RL_CHECK(Same(fresh, after)) << "the rewrite changed the chunk";
      if (after.timings) RL_CHECK(after.timings->gateway_ms == 1.5);
    }
  }
  return 0;
}
