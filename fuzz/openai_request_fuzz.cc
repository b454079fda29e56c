// Fuzzes the OpenAI request codec and everything a request passes through
// before the model runs: api::ParseRequest (either API), the
// serialize/parse round trip, the server's sampling resolution,
// SamplingParams::Validate, the engine's ResolveRequest and a few sampler
// steps. Asserts that no input reaches an RL_CHECK: every bad request must
// come out as a Status.
//
// Input: first byte picks the API (bit 0) and seeds the logits; the rest is
// the request body.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "api/request.h"
#include "base/check.h"
#include "engine/sequence.h"
#include "model/arch/model_config.h"
#include "model/sampling/sampler.h"
#include "server/session.h"

namespace {

using redline::StatusCode;
namespace api = redline::api;

constexpr int64_t kVocab = 512;
constexpr int64_t kCtx = 96;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const api::ApiKind kind =
      (data[0] & 1) ? api::ApiKind::kChat : api::ApiKind::kCompletions;
  const std::string_view body(reinterpret_cast<const char*>(data + 1),
                              size - 1);
  std::string param;
  auto parsed = api::ParseRequest(body, kind, &param);
  if (!parsed.ok()) {
    const StatusCode c = parsed.status().code();
    RL_CHECK(c == StatusCode::kInvalidArgument ||
             c == StatusCode::kUnimplemented)
        << parsed.status().ToString();
    return 0;
  }
  const api::CompletionRequest& r = *parsed;

  // What the codec writes, it reads back the same.
  auto text = api::SerializeRequest(r);
  RL_CHECK(text.ok());
  auto back = api::ParseRequest(*text, kind);
  RL_CHECK(back.ok()) << back.status().ToString() << " for " << *text;
  RL_CHECK(back->model == r.model && back->n == r.n &&
           back->stream == r.stream && back->prompt == r.prompt &&
           back->prompt_ids == r.prompt_ids &&
           back->messages.size() == r.messages.size() &&
           back->sampling.max_tokens == r.sampling.max_tokens &&
           back->sampling.seed == r.sampling.seed &&
           back->sampling.stop == r.sampling.stop &&
           back->sampling.logprobs == r.sampling.logprobs);

  redline::model::SamplingParams sp =
      redline::server::ResolveSampling(r, redline::server::SamplingDefaults{});
  if (!sp.Validate(kVocab).ok()) return 0;
  if (!sp.seed) sp.seed = data[0];  // reproducible runs

  std::vector<int32_t> prompt = r.prompt_ids;
  if (prompt.empty()) {
    for (unsigned char c : r.prompt.substr(0, kCtx * 2))
      prompt.push_back(static_cast<int32_t>(c) % kVocab);
    for (const api::ChatMessage& m : r.messages) {
      for (unsigned char c : m.content.substr(0, 32))
        prompt.push_back(static_cast<int32_t>(c) % kVocab);
    }
  }
  redline::model::ModelConfig config;
  config.vocab_size = kVocab;
  config.context_length_train = kCtx;
  auto resolved = redline::engine::ResolveRequest(config, kCtx, prompt, sp);
  if (!resolved.ok()) return 0;

  const int32_t eog[] = {0};
  redline::model::Sampler sampler(*resolved, kVocab, eog);
  std::vector<int32_t> history = prompt;
  std::vector<float> logits(kVocab);
  redline::model::SampleLogprobs lp;
  const int steps = std::min<int>(4, resolved->max_tokens);
  for (int step = 0; step < steps; ++step) {
    for (int64_t i = 0; i < kVocab; ++i)
      logits[i] =
          static_cast<float>((i * 2654435761u + data[0] + step) % 97) / 8.0f;
    const int32_t t = sampler.Sample(logits, history, prompt.size(),
                                     resolved->logprobs ? &lp : nullptr);
    RL_CHECK(t >= 0 && t < kVocab);
    history.push_back(t);
  }
  return 0;
}
