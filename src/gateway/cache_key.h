// The response cache's key: a canonical text of every request field that
// determines the answer, and a stable hash of it.
//
// The request is read through the shared codec (api::ParseRequest's
// CompletionRequest): model (after alias resolution, and the route class
// when the router chose it), messages (role, content, every extra member
// such as tool_calls) or the prompt (text or token ids), every sampling
// field, seed, stop, max_tokens, logit_bias, logprobs, n, the stream flag
// and include_usage (they change the bytes of the answer), and tools.
// Fields the codec does not model but which change the answer
// (response_format, tool_choice, parallel_tool_calls) are taken from the
// body as sent. JSON objects are written with sorted keys, so key order in
// the body does not matter. `user` and the gateway's own `cache` member do
// not enter the key.
//
// Thread-safety: pure functions. Cost: linear in the request.
#ifndef REDLINE_GATEWAY_CACHE_KEY_H_
#define REDLINE_GATEWAY_CACHE_KEY_H_

#include <boost/json/object.hpp>
#include <string>
#include <string_view>

#include "api/request.h"

namespace redline::gateway {

struct CacheKey {
  std::string canonical;  // stored beside the value, compared on a hit
  std::string hash_hex;   // 32 hex digits (two 64-bit hashes)
};

// `normalize_text`: message and prompt text enter the key with case,
// whitespace and trailing punctuation folded (NormalizeQuestion), a cheap
// near-duplicate class.
CacheKey BuildCacheKey(const api::CompletionRequest& request,
                       std::string_view resolved_model,
                       std::string_view route_class,
                       const boost::json::object& body,
                       bool normalize_text = false);

// "<namespace>:<class>:<model>:<hash>" — the layout that makes purging by
// class or by class and model a key prefix.
std::string StorageKey(std::string_view name_space, std::string_view cls,
                       std::string_view model, std::string_view hash_hex);

// The last user message (chat) or the prompt (completions): what class
// rules and the scorer read.
std::string_view LastUserText(const api::CompletionRequest& request);

// temperature 0, or a seed given.
bool IsDeterministic(const api::CompletionRequest& request);

}  // namespace redline::gateway

#endif  // REDLINE_GATEWAY_CACHE_KEY_H_
