// Settings of the gateway's response cache and of light/full model routing
// (docs/GATEWAY.md, "Response cache" and "Light/full routing"), and their
// YAML sections (`cache:` and `routing:` in the --config file).
//
// Ownership: plain values. Thread-safety: thread-compatible.
#ifndef REDLINE_GATEWAY_CACHE_CONFIG_H_
#define REDLINE_GATEWAY_CACHE_CONFIG_H_

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"

namespace YAML {
class Node;
}

namespace redline::gateway {

// A TTL class: answers of this class live ttl_ms; 0 means never cached.
struct CacheClassSpec {
  std::string name;
  int64_t ttl_ms = 0;
};

// One ordered class rule: the first rule whose every given condition holds
// picks the class. `regex` (PCRE2, case-insensitive) and `keywords` (any
// one, case-insensitive substring) look at the last user message (the
// prompt for /v1/completions); `models` limits the rule to those models.
// A rule with only `models` is that model's default class.
struct CacheRuleSpec {
  std::string cls;
  std::string regex;
  std::vector<std::string> keywords;
  std::vector<std::string> models;
};

struct CacheConfig {
  bool enabled = false;
  // Prefix of every key, local and in Redis ("<namespace>:<class>:...").
  std::string name_space = "redline";
  int64_t max_bytes = 256ll << 20;      // local tier byte budget
  int64_t max_entry_bytes = 4ll << 20;  // larger answers are not stored
  bool deterministic_only = true;       // temperature 0 or a seed
  // Per model (after alias resolution): overrides deterministic_only for
  // that model's requests (`cache.models: {NAME: {deterministic-only: B}}`).
  std::map<std::string, bool, std::less<>> model_deterministic_only;
  bool store_length = false;  // store finish_reason "length"
  // Near-duplicate keys: message and prompt text with case, whitespace
  // and trailing punctuation folded ("What is X?" = "what is x").
  bool normalize_text = false;
  std::string default_class = "facts";
  std::vector<CacheClassSpec> classes = {{"facts", 24ll * 3600 * 1000},
                                         {"opinions", 5ll * 60 * 1000},
                                         {"time_sensitive", 0}};
  // Empty: DefaultCacheRules().
  std::vector<CacheRuleSpec> rules;
  int64_t single_flight_wait_ms = 10'000;
  int max_single_flight_waiters = 64;
  // Redis: "" off; redis://host:port[/db] or unix:/path/to/socket.
  std::string redis_url;
  int64_t redis_timeout_ms = 50;
  int64_t redis_connect_timeout_ms = 200;
  int redis_queue = 1024;  // commands sent and unanswered, or waiting
  // How often each gateway reads the purge log (a Redis stream beside the
  // keys) and applies other gateways' purges to its local tier; 0: never.
  int64_t redis_purge_poll_ms = 1000;
  int64_t compress_above_bytes = 2048;  // zstd beyond this
  // Key for POST /admin/cache/purge; empty: the gateway's --api-key keys.
  std::string admin_key;
  // --warm FILE.jsonl: filled before /readyz turns 200.
  std::string warm_file;
  int warm_concurrency = 4;
};

// The built-in rule: time-sensitive words make an answer time_sensitive.
std::vector<CacheRuleSpec> DefaultCacheRules();

struct ScorerWeights {
  double tokens = 0.35;     // x min(estimated prompt tokens / tokens_full, 1)
  double code = 0.3;        // x min(code blocks / 2, 1)
  double reasoning = 0.3;   // x min(reasoning markers / 2, 1)
  double multi_step = 0.2;  // x min(step markers / 3, 1)
  double turns = 0.1;       // x min((user turns - 1) / 5, 1)
  double tools = 0.3;       // x (tools given)
  double tokens_full = 1000;
};

// A route class: requests scoring at most `max_score` (the last class:
// any score) go to `model`.
struct RouteClassSpec {
  std::string name;
  std::string model;
  double max_score = INFINITY;
};

struct RoutingConfig {
  // Model names that are routed ("auto"); empty: routing off.
  std::vector<std::string> models;
  // Ordered by max_score; at least two when routing is on.
  std::vector<RouteClassSpec> classes;
  ScorerWeights weights;
  std::vector<std::string> reasoning_markers = {
      "step by step", "prove",  "why",    "compare",   "explain",  "analyze",
      "analyse",      "derive", "reason", "trade-off", "tradeoff", "evaluate"};
  std::vector<std::string> step_markers = {
      "first", "then", "next", "finally", "after that", "\n1.", "\n2.", "\n3."};
  // Questions (normalised: case, whitespace, trailing punctuation folded)
  // always sent to the first class.
  std::vector<std::string> pinned;
  // Escalation of an answer of the first class to this class ("" off)
  // when it looks unreliable.
  std::string escalate_to;
  double min_mean_logprob = -INFINITY;  // -inf: not checked
  bool escalate_on_length = true;
  std::string refusal_regex;  // "" not checked
  // Streamed requests: the first `escalate_stream_tokens` content events
  // of the light answer are held (at most `escalate_stream_bytes` of
  // events) and judged before any byte reaches the client; 0: streamed
  // requests are not escalated.
  int64_t escalate_stream_tokens = 0;
  int64_t escalate_stream_bytes = 16 * 1024;
};

// Bounds of the streamed-escalation hold.
inline constexpr int64_t kMaxEscalateStreamTokens = 256;
inline constexpr int64_t kMaxEscalateStreamBytes = 64 * 1024;

// Parse the `cache:` / `routing:` mapping of the YAML file. `where` prefixes
// error messages ("--config FILE").
Status ParseCacheYaml(const YAML::Node& node, const std::string& where,
                      CacheConfig* out);
Status ParseRoutingYaml(const YAML::Node& node, const std::string& where,
                        RoutingConfig* out);

// Checks a cache/routing config (ranges, names of classes, regexes).
Status ValidateCacheConfig(const CacheConfig& c);
Status ValidateRoutingConfig(const RoutingConfig& r);

// Case, whitespace and trailing punctuation folded (pinned questions).
std::string NormalizeQuestion(std::string_view text);

}  // namespace redline::gateway

#endif  // REDLINE_GATEWAY_CACHE_CONFIG_H_
