#include "gateway/routing_key.h"

#include <algorithm>
#include <string_view>

#include "gateway/hash.h"

namespace redline::gateway {
namespace {

// Hashes at most *budget bytes of `text`, charging them to the budget.
uint64_t HashBounded(std::string_view text, int64_t* budget, uint64_t h) {
  const size_t n = static_cast<size_t>(
      std::clamp<int64_t>(*budget, 0, static_cast<int64_t>(text.size())));
  *budget -= static_cast<int64_t>(n);
  return Fnv1a(text.substr(0, n), h);
}

}  // namespace

RouteRequest MakeRouteRequest(const api::CompletionRequest& request,
                              int64_t prefix_bytes) {
  RouteRequest r;
  int64_t prompt_bytes = 0;
  int64_t budget = std::max<int64_t>(prefix_bytes, 1);
  uint64_t h = kFnvOffset;
  if (request.kind == api::ApiKind::kChat) {
    for (const api::ChatMessage& m : request.messages)
      prompt_bytes += static_cast<int64_t>(m.content.size());
    for (const api::ChatMessage& m : request.messages) {
      if (budget <= 0) break;
      // Separators keep ("ab","c") and ("a","bc") apart.
      h = HashBounded(m.role, &budget, h);
      h = Fnv1a(std::string_view("\x1f", 1), h);
      h = HashBounded(m.content, &budget, h);
      h = Fnv1a(std::string_view("\x1e", 1), h);
      if (m.role == "user") break;
    }
    r.has_key = !request.messages.empty();
  } else if (request.prompt_is_ids()) {
    prompt_bytes = static_cast<int64_t>(request.prompt_ids.size()) * 4;
    const size_t n = std::min<size_t>(request.prompt_ids.size(),
                                      static_cast<size_t>(budget / 4 + 1));
    h = Fnv1a(std::string_view(
                  reinterpret_cast<const char*>(request.prompt_ids.data()),
                  n * sizeof(int32_t)),
              h);
    r.has_key = true;
  } else {
    prompt_bytes = static_cast<int64_t>(request.prompt.size());
    h = HashBounded(request.prompt, &budget, h);
    r.has_key = !request.prompt.empty();
  }
  r.key = Mix64(h);
  const int64_t max_tokens = request.sampling.max_tokens.value_or(
      request.kind == api::ApiKind::kChat ? kChatAssumedMaxTokens
                                          : api::kCompletionsDefaultMaxTokens);
  r.token_estimate =
      prompt_bytes / 4 + std::max<int64_t>(max_tokens, 0) * request.n;
  return r;
}

}  // namespace redline::gateway
