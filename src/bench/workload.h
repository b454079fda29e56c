// Workload: what bench sends. A workload is a weighted mix of tasks (as
// Locust's @task(weight)); each task names an API (chat or completions), an
// endpoint, a prompt source, sampling fields, extra headers and, for
// multi-turn tasks, a number of turns played by one virtual user in order.
//
// Prompt sources:
//   fixed     the task's messages / prompt as written ("{{prompt}}" in a
//             message or prompt template is replaced by generated text)
//   synthetic text of a drawn input length (words of ~1 token each)
//   jsonl     one JSON object per line: {"prompt": ...} or {"messages": [...]}
//             (optional "max_tokens"/"output_tokens" per line)
//   sharegpt  ShareGPT conversations ({"conversations": [{"from", "value"}]});
//             the human turns become the turns of a multi-turn session
// Shared-prefix groups: tasks with `shared_prefix_tokens` put the same
// generated prefix (one per group, `prefix_groups` distinct ones) in front of
// each prompt, to exercise prefix caches.
//
// Thread-safety: thread-compatible; bench drives it from its loop thread.
// Cost: Prepare() serializes one JSON body (cached for fixed, single-turn
// tasks, which is what the throughput runs use).
#ifndef REDLINE_BENCH_WORKLOAD_H_
#define REDLINE_BENCH_WORKLOAD_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "api/error.h"
#include "api/request.h"
#include "api/response.h"
#include "base/result.h"
#include "http/client.h"

namespace redline::bench {

// A token-length distribution: fixed, uniform[min,max], normal(mean,sd) or
// lognormal(mean,sd), clamped to [min, max].
struct LengthDist {
  enum class Kind { kFixed, kUniform, kNormal, kLognormal };
  Kind kind = Kind::kFixed;
  double mean = 0;
  double stddev = 0;
  int64_t min = 1;
  int64_t max = 1 << 20;
  int64_t Sample(std::mt19937_64& rng) const;
  // "128", "64..256" (uniform), "normal(256,64)", "lognormal(256,128)".
  static Result<LengthDist> Parse(std::string_view text);
};

struct TaskSpec {
  std::string name = "default";
  double weight = 1;
  api::ApiKind api = api::ApiKind::kChat;
  // Path relative to the base URL; empty: the API's default.
  std::string endpoint;
  bool stream = true;
  bool include_usage = true;
  // Empty: the run's --model.
  std::string model;

  enum class Source { kFixed, kSynthetic, kJsonl, kShareGpt };
  Source source = Source::kFixed;
  // Fixed chat messages (may hold {{prompt}}).
  std::vector<api::ChatMessage> messages;
  // Fixed completions prompt (may hold {{prompt}}).
  std::string prompt;
  // Prepended for synthetic/jsonl/sharegpt chat.
  std::string system_prompt;
  // JSONL or ShareGPT path.
  std::string file;
  // Synthetic prompt length.
  LengthDist input_tokens;
  // Sets max_tokens per request when given.
  std::optional<LengthDist> output_tokens;
  // Also send ignore_eos + min_tokens = max_tokens.
  bool pin_output_length = false;

  api::SamplingParams sampling;
  // Extra top-level request fields.
  std::string extra_json;
  // Extra HTTP headers.
  std::vector<http::Header> headers;

  // > 1: multi-turn session.
  int turns = 1;
  int64_t shared_prefix_tokens = 0;
  int prefix_groups = 1;
};

// Per virtual user (closed loop) or per session (open loop) state.
struct UserState {
  int64_t user = 0;
  std::mt19937_64 rng;
  int task = -1;  // task of the session in progress, -1 none
  int64_t session = -1;
  int turn = 0;
  int turns = 0;
  std::vector<api::ChatMessage> history;  // multi-turn chat history
  std::vector<std::string> script;        // remaining user turns (ShareGPT)
};

struct PreparedRequest {
  // Target and body set; common headers added by the runner.
  http::ClientRequest http;
  int32_t task = 0;
  int32_t turn = 0;
  int64_t session = -1;
  bool stream = true;
  int64_t input_tokens_planned = -1;
  // The runner must pass the response text back (multi-turn).
  bool keep_text = false;
};

class Workload {
 public:
  // `base_path` is the URL path of the API root ("/v1"). Loads files.
  static Result<std::unique_ptr<Workload>> Create(std::vector<TaskSpec> tasks,
                                                  std::string default_model,
                                                  std::string base_path,
                                                  uint64_t seed);

  // Reads a scenario YAML file (docs/BENCH_SCENARIO.md) into task specs.
  static Result<std::vector<TaskSpec>> LoadScenario(const std::string& path);

  PreparedRequest Prepare(UserState& user);
  // Feeds a finished response back (multi-turn history); `ok` false ends
  // the session.
  void OnResponse(UserState& user, bool ok, std::string_view content);

  const std::vector<TaskSpec>& tasks() const { return tasks_; }
  bool has_multi_turn() const;

  // Deterministic filler text of about `tokens` tokens (words from a fixed
  // list of common English words, each one token in common BPE vocabularies).
  static std::string SyntheticText(int64_t tokens, std::mt19937_64& rng);

 private:
  struct Item {  // one prompt from a file
    std::vector<api::ChatMessage> messages;
    std::string prompt;
    std::vector<std::string> turns;  // ShareGPT human turns
    int64_t max_tokens = -1;
  };
  struct TaskData {
    std::vector<Item> items;
    std::vector<std::string> prefixes;  // shared-prefix texts, one per group
    std::string cached_body;            // fixed single-turn tasks
    std::string target;
    uint64_t next_item = 0;
  };

  Workload() = default;
  int PickTask(std::mt19937_64& rng) const;
  std::string Render(std::string_view templ, const std::string& text) const;

  std::vector<TaskSpec> tasks_;
  std::vector<TaskData> data_;
  std::vector<double> cumulative_weights_;
  std::string default_model_;
  std::string base_path_;
  int64_t next_session_ = 0;
};

}  // namespace redline::bench

#endif  // REDLINE_BENCH_WORKLOAD_H_
