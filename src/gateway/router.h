// Light/full model routing: a rule-based complexity score of a request
// (estimated prompt tokens, code blocks, reasoning markers, multi-step
// markers, turns, tools) with configurable weights, mapped by thresholds to
// route classes (light, full, more when configured); pinned frequent
// questions always take the first class; and the check that decides
// whether a first-class answer looks unreliable enough to ask the
// escalation class instead (finish_reason length, a mean token logprob
// below a threshold, a refusal pattern).
//
// Thread-safety: immutable after Create; every method is const and pure.
// Cost: one pass over the messages' text (lower-cased once, markers
// searched with memmem-like scans): microseconds for chat-sized prompts.
#ifndef REDLINE_GATEWAY_ROUTER_H_
#define REDLINE_GATEWAY_ROUTER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>

#include "api/request.h"
#include "api/response.h"
#include "base/result.h"
#include "gateway/cache_config.h"
#include "gateway/text_match.h"

namespace redline::gateway {

struct ScoreFeatures {
  int64_t tokens = 0;   // prompt bytes / 4
  int code_blocks = 0;  // ``` fenced blocks
  int reasoning = 0;    // reasoning markers in the last user message
  int steps = 0;        // multi-step markers in the last user message
  int user_turns = 0;
  bool tools = false;
};

struct RouteDecision {
  int class_index = 0;
  double score = 0;
  bool pinned = false;
};

class Router {
 public:
  // The config must have passed ValidateRoutingConfig.
  static Result<Router> Create(const RoutingConfig& config);

  bool enabled() const { return !config_.models.empty(); }
  bool Routes(std::string_view model) const;
  const RoutingConfig& config() const { return config_; }
  // -1 when no class has that name.
  int ClassIndex(std::string_view name) const;

  ScoreFeatures Features(const api::CompletionRequest& request) const;
  double Score(const ScoreFeatures& f) const;
  RouteDecision Decide(const api::CompletionRequest& request) const;

  // Escalation asks logprobs of the first class when a threshold is set.
  bool wants_logprobs() const;
  // "" when the answer looks reliable; else the reason: "length",
  // "logprob" or "refusal".
  std::string Unreliable(const api::CompletionResponse& answer) const;

 private:
  RoutingConfig config_;
  Regex refusal_;
  std::unordered_set<std::string> pinned_;
  std::vector<std::string> reasoning_, steps_;  // lower case
};

}  // namespace redline::gateway

#endif  // REDLINE_GATEWAY_ROUTER_H_
