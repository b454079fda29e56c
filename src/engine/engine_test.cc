#include "engine/engine.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "engine/engine_test_model.h"
#include "engine/generator.h"
#include "model/arch/synthetic.h"

namespace redline::engine {
namespace {

using namespace std::chrono_literals;

const model::Model& TinyModel() { return testing::TinyTestModel(); }

model::SamplingParams Greedy(int max_tokens) {
  model::SamplingParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

struct Collected {
  std::vector<int32_t> tokens;
  std::string text;
  RequestEvent last;
};

Collected Drain(RequestStream& s) {
  Collected c;
  RequestEvent e;
  while (s.Pop(&e, 30s)) {
    if (e.type == RequestEvent::Type::kToken) {
      c.tokens.push_back(e.token);
      c.text += e.text;
      continue;
    }
    c.last = std::move(e);
    return c;
  }
  ADD_FAILURE() << "stream did not finish";
  return c;
}

std::vector<int32_t> Prompt(int i) {
  return {1, 300 + i, 301 + 2 * i, 290, 280 + i};
}

TEST(EngineTest, ConcurrentGreedyStreamsEqualSequentialGeneration) {
  const model::Model& m = TinyModel();
  ThreadPool pool(2);
  // Sequential reference with the single-sequence generator.
  std::vector<std::vector<int32_t>> expected;
  {
    Generator gen(m, pool, 256);
    for (int i = 0; i < 8; ++i) {
      auto r = gen.Generate(Prompt(i), Greedy(24),
                            [](std::string_view, int32_t) { return true; });
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      expected.push_back(r->tokens);
    }
  }
  EngineOptions o;
  o.n_ctx = 256;
  o.parallel = 4;          // 8 requests over 4 slots: also exercises queueing
  o.max_batch_tokens = 7;  // prompts of 5 split across steps with decodes
  Engine engine(m, pool, o);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 8; ++i) {
    EngineRequest r;
    r.prompt = Prompt(i);
    r.sampling = Greedy(24);
    auto s = engine.Submit(std::move(r));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    streams.push_back(*s);
  }
  for (int i = 0; i < 8; ++i) {
    Collected c = Drain(*streams[i]);
    EXPECT_EQ(c.last.type, RequestEvent::Type::kDone);
    EXPECT_EQ(c.last.finish_reason, model::FinishReason::kLength);
    EXPECT_EQ(c.last.completion_tokens, 24);
    EXPECT_EQ(c.tokens, expected[i]) << "request " << i;
  }
  // The stats snapshot is taken at the end of the step that pushed the
  // last event, a moment after the consumer may have seen it.
  for (int i = 0; i < 200 && engine.Stats().running != 0; ++i)
    std::this_thread::sleep_for(5ms);
  EXPECT_EQ(engine.Stats().running, 0);
}

TEST(EngineTest, CancelFreesTheSlotWithinAStep) {
  ThreadPool pool(2);
  EngineOptions o;
  o.n_ctx = 2048;
  o.parallel = 1;
  Engine engine(TinyModel(), pool, o);
  EngineRequest r;
  r.prompt = Prompt(0);
  r.sampling = Greedy(2000);
  auto s = engine.Submit(std::move(r));
  ASSERT_TRUE(s.ok());
  RequestEvent e;
  ASSERT_TRUE((*s)->Pop(&e, 10s));
  (*s)->Cancel();
  Collected c = Drain(**s);
  EXPECT_EQ(c.last.type, RequestEvent::Type::kError);
  EXPECT_EQ(c.last.status.code(), StatusCode::kCancelled);
  EXPECT_LT(c.tokens.size(), 1999u);
  // The slot is free again: a new request runs.
  EngineRequest r2;
  r2.prompt = Prompt(1);
  r2.sampling = Greedy(3);
  auto s2 = engine.Submit(std::move(r2));
  ASSERT_TRUE(s2.ok());
  EXPECT_EQ(Drain(**s2).last.type, RequestEvent::Type::kDone);
}

TEST(EngineTest, FullQueueIsRefusedAndAdmittedRequestsStillFinish) {
  ThreadPool pool(2);
  EngineOptions o;
  o.n_ctx = 2048;
  o.parallel = 1;
  o.max_waiting_requests = 1;
  Engine engine(TinyModel(), pool, o);
  EngineRequest a;
  a.prompt = Prompt(0);
  a.sampling = Greedy(600);
  auto sa = engine.Submit(a);
  ASSERT_TRUE(sa.ok());
  RequestEvent e;
  ASSERT_TRUE((*sa)->Pop(&e, 10s));  // A is running now
  EngineRequest b = a;
  b.sampling = Greedy(4);
  auto sb = engine.Submit(b);
  ASSERT_TRUE(sb.ok());  // B waits
  auto sc = engine.Submit(b);
  ASSERT_FALSE(sc.ok());
  EXPECT_EQ(sc.status().code(), StatusCode::kResourceExhausted);
  EXPECT_GE(engine.RetryAfterSeconds(), 1);
  EXPECT_EQ(Drain(**sa).last.type, RequestEvent::Type::kDone);
  EXPECT_EQ(Drain(**sb).last.type, RequestEvent::Type::kDone);
}

TEST(EngineTest, PrefixCacheReusesKvAndKeepsOutputs) {
  ThreadPool pool(2);
  EngineOptions o;
  o.n_ctx = 256;
  o.parallel = 2;
  std::vector<int32_t> system = {1,   300, 301, 302, 303, 304,
                                 305, 306, 307, 308, 309, 310};
  std::vector<int32_t> second = system;
  second.insert(second.end(), {400, 401, 402});
  std::vector<int32_t> expected;
  {
    EngineOptions no_cache = o;
    no_cache.prefix_cache = false;
    Engine engine(TinyModel(), pool, no_cache);
    EngineRequest r;
    r.prompt = second;
    r.sampling = Greedy(10);
    expected = Drain(**engine.Submit(r)).tokens;
  }
  Engine engine(TinyModel(), pool, o);
  EngineRequest first;
  first.prompt = system;
  first.sampling = Greedy(4);
  EXPECT_EQ(Drain(**engine.Submit(first)).last.cached_tokens, 0);
  EngineRequest r;
  r.prompt = second;
  r.sampling = Greedy(10);
  Collected c = Drain(**engine.Submit(r));
  EXPECT_GE(c.last.cached_tokens, static_cast<int64_t>(system.size()));
  EXPECT_EQ(c.tokens, expected);
  EngineStats st = engine.Stats();
  EXPECT_GE(st.prefix_cache_hits_tokens, system.size());
  EXPECT_EQ(st.prefix_cache_queries_tokens, system.size() + second.size());
}

TEST(EngineTest, BadRequestsAreRefusedAtSubmit) {
  ThreadPool pool(1);
  EngineOptions o;
  o.n_ctx = 64;
  Engine engine(TinyModel(), pool, o);
  EngineRequest r;
  r.prompt = Prompt(0);
  r.sampling = Greedy(100);
  EXPECT_EQ(engine.Submit(r).status().code(), StatusCode::kOutOfRange);
  r.sampling = Greedy(4);
  r.prompt = {};
  EXPECT_EQ(engine.Submit(r).status().code(), StatusCode::kInvalidArgument);
  r.prompt = {1, 100000};
  EXPECT_EQ(engine.Submit(r).status().code(), StatusCode::kInvalidArgument);
  r.prompt = Prompt(0);
  r.sampling.temperature = -1;
  EXPECT_EQ(engine.Submit(r).status().code(), StatusCode::kInvalidArgument);
}

TEST(EngineTest, ExpiredDeadlineEndsTheRequest) {
  ThreadPool pool(1);
  EngineOptions o;
  o.n_ctx = 2048;
  Engine engine(TinyModel(), pool, o);
  EngineRequest r;
  r.prompt = Prompt(0);
  r.sampling = Greedy(2000);
  r.deadline = Clock::now() + 20ms;
  Collected c = Drain(**engine.Submit(r));
  EXPECT_EQ(c.last.type, RequestEvent::Type::kError);
  EXPECT_EQ(c.last.status.code(), StatusCode::kDeadlineExceeded);
}

TEST(EngineTest, StopCancelsInFlightRequests) {
  ThreadPool pool(1);
  EngineOptions o;
  o.n_ctx = 2048;
  auto engine = std::make_unique<Engine>(TinyModel(), pool, o);
  EngineRequest r;
  r.prompt = Prompt(0);
  r.sampling = Greedy(2000);
  auto s = *engine->Submit(r);
  engine->Stop();
  Collected c = Drain(*s);
  EXPECT_EQ(c.last.type, RequestEvent::Type::kError);
  EXPECT_EQ(engine->Submit(r).status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace redline::engine
