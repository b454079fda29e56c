#include "gateway/router.h"

#include <algorithm>
#include <cmath>

#include "gateway/cache_key.h"

namespace redline::gateway {

Result<Router> Router::Create(const RoutingConfig& config) {
  Router r;
  r.config_ = config;
  if (!config.refusal_regex.empty()) {
    RL_ASSIGN_OR_RETURN(r.refusal_, Regex::Compile(config.refusal_regex));
  }
  for (const std::string& q : config.pinned)
    r.pinned_.insert(NormalizeQuestion(q));
  for (const std::string& m : config.reasoning_markers)
    r.reasoning_.push_back(Lower(m));
  for (const std::string& m : config.step_markers) r.steps_.push_back(Lower(m));
  return r;
}

bool Router::Routes(std::string_view model) const {
  return std::find(config_.models.begin(), config_.models.end(), model) !=
         config_.models.end();
}

int Router::ClassIndex(std::string_view name) const {
  for (size_t i = 0; i < config_.classes.size(); ++i)
    if (config_.classes[i].name == name) return static_cast<int>(i);
  return -1;
}

ScoreFeatures Router::Features(const api::CompletionRequest& r) const {
  ScoreFeatures f;
  int64_t bytes = 0;
  if (r.kind == api::ApiKind::kChat) {
    for (const api::ChatMessage& m : r.messages) {
      bytes += static_cast<int64_t>(m.content.size());
      if (m.role == "user") ++f.user_turns;
      f.code_blocks += CountOccurrences(m.content, "```") / 2;
    }
  } else {
    bytes = static_cast<int64_t>(r.prompt.size());
    f.user_turns = 1;
    f.code_blocks = CountOccurrences(r.prompt, "```") / 2;
    if (r.prompt_is_ids()) f.tokens = static_cast<int64_t>(r.prompt_ids.size());
  }
  if (f.tokens == 0) f.tokens = bytes / 4;
  f.tools = !r.tools.empty();
  // Markers are read in the last user message only (its head: the scorer
  // stays in microseconds whatever the prompt's size).
  const std::string text = Lower(LastUserText(r).substr(0, 16384));
  // A marker word counts at word starts only ("why" not in "anywhy").
  auto count = [&text](const std::vector<std::string>& markers) {
    int n = 0;
    for (const std::string& m : markers) {
      size_t pos = 0;
      while ((pos = text.find(m, pos)) != std::string::npos) {
        const bool start =
            pos == 0 ||
            !std::isalnum(static_cast<unsigned char>(text[pos - 1]));
        n += start ? 1 : 0;
        pos += m.size();
      }
    }
    return n;
  };
  f.reasoning = count(reasoning_);
  f.steps = count(steps_);
  return f;
}

double Router::Score(const ScoreFeatures& f) const {
  const ScorerWeights& w = config_.weights;
  auto cap = [](double x) { return std::clamp(x, 0.0, 1.0); };
  return w.tokens * cap(static_cast<double>(f.tokens) / w.tokens_full) +
         w.code * cap(f.code_blocks / 2.0) +
         w.reasoning * cap(f.reasoning / 2.0) +
         w.multi_step * cap(f.steps / 3.0) +
         w.turns * cap((f.user_turns - 1) / 5.0) + w.tools * (f.tools ? 1 : 0);
}

RouteDecision Router::Decide(const api::CompletionRequest& r) const {
  RouteDecision d;
  if (!pinned_.empty() &&
      pinned_.count(NormalizeQuestion(LastUserText(r).substr(0, 4096)))) {
    d.pinned = true;
    return d;
  }
  d.score = Score(Features(r));
  d.class_index = static_cast<int>(config_.classes.size()) - 1;
  for (size_t i = 0; i < config_.classes.size(); ++i) {
    if (d.score <= config_.classes[i].max_score) {
      d.class_index = static_cast<int>(i);
      break;
    }
  }
  return d;
}

bool Router::wants_logprobs() const {
  return !config_.escalate_to.empty() &&
         std::isfinite(config_.min_mean_logprob);
}

std::string Router::Unreliable(const api::CompletionResponse& a) const {
  if (config_.escalate_on_length && a.finish_reason == "length")
    return "length";
  if (wants_logprobs() && !a.token_logprobs.empty()) {
    double sum = 0;
    for (double lp : a.token_logprobs) sum += lp;
    if (sum / static_cast<double>(a.token_logprobs.size()) <
        config_.min_mean_logprob)
      return "logprob";
  }
  if (!refusal_.empty() && refusal_.Search(a.content)) return "refusal";
  return "";
}

}  // namespace redline::gateway
