// No request input may reach an RL_CHECK: every bad field is a Status from
// Engine::Submit and Generator::Generate alike (both use ResolveRequest).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/engine_test_model.h"
#include "engine/generator.h"

namespace redline::engine {
namespace {

using namespace std::chrono_literals;
using testing::TinyTestModel;

constexpr int64_t kCtx = 64;
constexpr int32_t kMax = std::numeric_limits<int32_t>::max();

struct Case {
  std::string name;
  std::function<void(EngineRequest&)> edit;
  StatusCode code;
  std::string message_start;  // the message starts with this
};

EngineRequest Base() {
  EngineRequest r;
  r.prompt = {1, 300, 301, 290, 280};
  r.sampling.temperature = 0;
  r.sampling.ignore_eos = true;
  return r;
}

std::vector<Case> BadCases() {
  return {
      // The crash: min_tokens beyond the room left, max_tokens unset.
      {"min_tokens beyond the context",
       [](EngineRequest& r) { r.sampling.min_tokens = 100; },
       StatusCode::kInvalidArgument,
       "min_tokens (100) must not exceed the 59 tokens"},
      {"min_tokens INT32_MAX",
       [](EngineRequest& r) { r.sampling.min_tokens = kMax; },
       StatusCode::kInvalidArgument, "min_tokens"},
      {"min_tokens over max_tokens",
       [](EngineRequest& r) {
         r.sampling.min_tokens = 10;
         r.sampling.max_tokens = 5;
       },
       StatusCode::kInvalidArgument, "min_tokens (10) must not exceed"},
      {"negative min_tokens",
       [](EngineRequest& r) { r.sampling.min_tokens = -1; },
       StatusCode::kInvalidArgument, "min_tokens"},
      {"huge top_logprobs",
       [](EngineRequest& r) {
         r.sampling.logprobs = true;
         r.sampling.top_logprobs = kMax;
       },
       StatusCode::kInvalidArgument, "top_logprobs"},
      {"negative top_logprobs",
       [](EngineRequest& r) {
         r.sampling.logprobs = true;
         r.sampling.top_logprobs = -3;
       },
       StatusCode::kInvalidArgument, "top_logprobs"},
      {"logit_bias id past the vocabulary",
       [](EngineRequest& r) {
         r.sampling.logit_bias = {{512, 1.0f}};
       },
       StatusCode::kInvalidArgument, "logit_bias token id 512"},
      {"negative logit_bias id",
       [](EngineRequest& r) {
         r.sampling.logit_bias = {{std::numeric_limits<int32_t>::min(), 1}};
       },
       StatusCode::kInvalidArgument, "logit_bias token id"},
      {"penalty_last_n below -1",
       [](EngineRequest& r) { r.sampling.penalty_last_n = -2; },
       StatusCode::kInvalidArgument, "penalty_last_n"},
      {"too many stop strings",
       [](EngineRequest& r) {
         r.sampling.stop = std::vector<std::string>(17, "x");
       },
       StatusCode::kInvalidArgument, "the number of stop strings"},
      {"stop string too long",
       [](EngineRequest& r) { r.sampling.stop = {std::string(100000, 'x')}; },
       StatusCode::kInvalidArgument, "each stop string"},
      {"max_tokens INT32_MAX",
       [](EngineRequest& r) { r.sampling.max_tokens = kMax; },
       StatusCode::kOutOfRange, "max_tokens (2147483647) is too large"},
      {"max_tokens one past the context",
       [](EngineRequest& r) { r.sampling.max_tokens = 60; },
       StatusCode::kOutOfRange, "max_tokens (60) is too large"},
      {"max_tokens 0", [](EngineRequest& r) { r.sampling.max_tokens = 0; },
       StatusCode::kInvalidArgument, "max_tokens"},
      {"max_tokens INT32_MIN",
       [](EngineRequest& r) {
         r.sampling.max_tokens = std::numeric_limits<int32_t>::min();
       },
       StatusCode::kInvalidArgument, "max_tokens"},
      {"prompt id = vocab size", [](EngineRequest& r) { r.prompt[2] = 512; },
       StatusCode::kInvalidArgument, "prompt token id 512 is outside"},
      {"negative prompt id", [](EngineRequest& r) { r.prompt[0] = -1; },
       StatusCode::kInvalidArgument, "prompt token id -1 is outside"},
      {"prompt id INT32_MAX", [](EngineRequest& r) { r.prompt[1] = kMax; },
       StatusCode::kInvalidArgument, "prompt token id"},
      {"empty prompt", [](EngineRequest& r) { r.prompt.clear(); },
       StatusCode::kInvalidArgument, "the prompt has no tokens"},
      {"prompt fills the context",
       [](EngineRequest& r) { r.prompt.assign(kCtx, 5); },
       StatusCode::kOutOfRange, "the prompt is too long"},
      {"prompt beyond the context",
       [](EngineRequest& r) { r.prompt.assign(10 * kCtx, 5); },
       StatusCode::kOutOfRange, "the prompt is too long"},
      {"NaN temperature",
       [](EngineRequest& r) { r.sampling.temperature = std::nanf(""); },
       StatusCode::kInvalidArgument, "temperature"},
      {"infinite repetition_penalty",
       [](EngineRequest& r) {
         r.sampling.repetition_penalty = std::numeric_limits<float>::infinity();
       },
       StatusCode::kInvalidArgument, "repetition_penalty"},
  };
}

void ExpectError(const Status& s, const Case& c) {
  EXPECT_EQ(s.code(), c.code) << c.name << ": " << s.ToString();
  EXPECT_TRUE(s.message().starts_with(c.message_start))
      << c.name << ": " << s.message();
  EXPECT_EQ(model::IsPromptTooLong(s),
            c.message_start == "the prompt is too long")
      << c.name;
}

TEST(RequestChecksTest, EngineRefusesEveryBadInputAtSubmit) {
  ThreadPool pool(1);
  EngineOptions o;
  o.n_ctx = kCtx;
  o.parallel = 1;
  Engine engine(TinyTestModel(), pool, o);
  for (const Case& c : BadCases()) {
    EngineRequest r = Base();
    c.edit(r);
    ExpectError(engine.Submit(r).status(), c);
  }
  EXPECT_EQ(engine.Stats().in_flight, 0);
  // Still serving.
  EngineRequest ok = Base();
  ok.sampling.max_tokens = 3;
  auto s = engine.Submit(ok);
  ASSERT_TRUE(s.ok());
  RequestEvent e;
  while ((*s)->Pop(&e, 30s) && e.type == RequestEvent::Type::kToken) {
  }
  EXPECT_EQ(e.type, RequestEvent::Type::kDone);
}

TEST(RequestChecksTest, GeneratorRefusesEveryBadInput) {
  ThreadPool pool(1);
  Generator gen(TinyTestModel(), pool, kCtx);
  for (const Case& c : BadCases()) {
    EngineRequest r = Base();
    c.edit(r);
    auto result = gen.Generate(r.prompt, r.sampling,
                               [](std::string_view, int32_t) { return true; });
    ASSERT_FALSE(result.ok()) << c.name;
    ExpectError(result.status(), c);
  }
}

// Edge values that are valid run to a normal end in both.
TEST(RequestChecksTest, ValidEdgesRunToTheEnd) {
  ThreadPool pool(1);
  EngineOptions o;
  o.n_ctx = kCtx;
  o.parallel = 2;
  Engine engine(TinyTestModel(), pool, o);
  Generator gen(TinyTestModel(), pool, kCtx);
  std::vector<std::function<void(EngineRequest&)>> edits = {
      // min_tokens exactly the room left: runs to the end of the context.
      [](EngineRequest& r) {
        r.sampling.min_tokens = 59;
        r.sampling.ignore_eos = false;
      },
      [](EngineRequest& r) {
        r.sampling.penalty_last_n = std::numeric_limits<int32_t>::max();
        r.sampling.repetition_penalty = 1.2f;
        r.sampling.max_tokens = 8;
      },
      [](EngineRequest& r) {
        r.sampling.stop = {"", std::string(256, 'x')};
        r.sampling.max_tokens = 8;
      },
      [](EngineRequest& r) {
        r.sampling.logprobs = true;
        r.sampling.top_logprobs = 20;
        r.sampling.max_tokens = 4;
      },
      [](EngineRequest& r) { r.sampling.max_tokens = 59; },
      [](EngineRequest& r) { r.prompt.assign(kCtx - 1, 7); },
  };
  for (size_t i = 0; i < edits.size(); ++i) {
    EngineRequest r = Base();
    edits[i](r);
    auto g = gen.Generate(r.prompt, r.sampling,
                          [](std::string_view, int32_t) { return true; });
    ASSERT_TRUE(g.ok()) << i << ": " << g.status().ToString();
    EXPECT_EQ(g->finish, model::FinishReason::kLength) << i;
    auto s = engine.Submit(r);
    ASSERT_TRUE(s.ok()) << i << ": " << s.status().ToString();
    std::vector<int32_t> tokens;
    RequestEvent e;
    while ((*s)->Pop(&e, 30s) && e.type == RequestEvent::Type::kToken) {
      tokens.push_back(e.token);
      if (r.sampling.logprobs) {
        ASSERT_TRUE(e.logprobs.has_value());
        EXPECT_EQ(e.logprobs->top.size(), 20u);
      }
    }
    EXPECT_EQ(e.type, RequestEvent::Type::kDone) << i;
    EXPECT_EQ(e.finish_reason, model::FinishReason::kLength) << i;
    EXPECT_EQ(tokens, g->tokens) << i;
  }
}

}  // namespace
}  // namespace redline::engine
