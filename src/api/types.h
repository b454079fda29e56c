// Plain values of the OpenAI wire format shared by requests, responses and
// errors: which API, token usage, per-token logprobs, server timings and the
// identity fields of one response. docs/SERVING.md describes the wire format.
//
// Thread-safety: plain values; thread-compatible.
#ifndef REDLINE_API_TYPES_H_
#define REDLINE_API_TYPES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace redline::api {

enum class ApiKind { kChat, kCompletions };

// "chat/completions" or "completions": the route relative to the API root
// ("/v1/").
std::string_view ApiPath(ApiKind kind);

// Token counts of one response. -1 means "absent" when parsed from a body;
// builders send absent counts as 0 (cached_tokens: omitted).
struct Usage {
  int64_t prompt_tokens = -1;
  int64_t completion_tokens = -1;
  int64_t total_tokens = -1;      // prompt + completion when absent
  int64_t cached_tokens = -1;     // prompt_tokens_details.cached_tokens
  int64_t reasoning_tokens = -1;  // completion_tokens_details.reasoning_tokens
};

// One token with its log-probability. `token` holds the token's exact bytes
// (possibly not valid UTF-8 on its own); encoders send it with U+FFFD in
// `token` and the exact bytes in `bytes`, as OpenAI does.
struct TokenLogprob {
  std::string token;
  float logprob = 0;  // -inf allowed; sent as -9999 (JSON has no -inf)
};

// The chosen token of one position and the most likely alternatives.
struct LogprobEntry {
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;  // most likely first
};

// Server-side timings of one request (milliseconds from its arrival), sent
// as "timings" beside usage, as llama.cpp's server does.
struct ServerTimings {
  double queue_ms = 0;
  double prefill_ms = 0;
  double ttft_ms = 0;
  double decode_ms = 0;
  double e2e_ms = 0;
  // A gateway's own share (arrival -> upstream request sent), added to a
  // streamed answer's timings by the gateway; < 0 when absent.
  double gateway_ms = -1;
};

// Identity fields shared by every chunk of one response.
struct ResponseIdentity {
  std::string id;  // "chatcmpl-..." / "cmpl-..."
  std::string model;
  int64_t created = 0;  // Unix seconds
};

}  // namespace redline::api

#endif  // REDLINE_API_TYPES_H_
