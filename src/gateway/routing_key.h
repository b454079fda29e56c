// What routing needs from a request, computed once from the parsed
// CompletionRequest: the session key prefix affinity hashes, and the token
// estimate least_tokens counts.
//
// The session key is the conversation's head: every message up to and
// including the first user message (role and content), at most
// `prefix_bytes` bytes of it. Every later turn of the same chat starts with
// exactly these messages, so all turns of a session hash to the same
// upstream, the one whose prefix cache holds the earlier turns. (Hashing
// "everything but the last user turn" would give each turn a different key
// and scatter a session.) For /v1/completions the key is the first
// `prefix_bytes` bytes of the prompt (or the first prefix_bytes / 4 token
// ids).
//
// Thread-safety: pure functions. Cost: one pass over at most prefix_bytes
// bytes, plus summing the message sizes.
#ifndef REDLINE_GATEWAY_ROUTING_KEY_H_
#define REDLINE_GATEWAY_ROUTING_KEY_H_

#include <cstdint>

#include "api/request.h"

namespace redline::gateway {

// Tokens assumed for a request that sends no max_tokens: chat has no
// OpenAI default (the context bounds it); a typical answer is a few hundred.
inline constexpr int64_t kChatAssumedMaxTokens = 256;

struct RouteRequest {
  bool has_key = false;
  uint64_t key = 0;
  // Prompt bytes / 4 (about a token per 4 bytes of English text) plus
  // max_tokens: the tokens this request adds to an upstream's work.
  int64_t token_estimate = 0;
};

RouteRequest MakeRouteRequest(const api::CompletionRequest& request,
                              int64_t prefix_bytes);

}  // namespace redline::gateway

#endif  // REDLINE_GATEWAY_ROUTING_KEY_H_
