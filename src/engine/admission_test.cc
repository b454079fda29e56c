#include "engine/admission.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine/engine_test_model.h"

namespace redline::engine {
namespace {

using namespace std::chrono_literals;
using testing::TinyTestModel;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// --- The pure policy. ---

TEST(AdmissionTest, FreeSlotsAlwaysAdmit) {
  AdmissionState s;
  s.parallel = 4;
  s.in_flight = 2;
  AdmissionLimits l;
  l.queue_budget_s = 1e-9;
  const int64_t group[] = {10, 10};
  EXPECT_TRUE(DecideAdmission(s, l, group).ok());
  EXPECT_EQ(DecideAdmission(s, l, group).retry_after_s, 0);
}

TEST(AdmissionTest, WithoutAServiceEstimateOnlyFreeSlotsAdmit) {
  AdmissionState s;
  s.parallel = 2;
  s.in_flight = 2;
  AdmissionLimits l;
  l.queue_budget_s = 100;
  const int64_t one[] = {10};
  AdmissionDecision d = DecideAdmission(s, l, one);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status.code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(Contains(d.status.message(), "no request has finished yet"));
  EXPECT_GE(d.retry_after_s, 1);
  // The budget off: the queue takes it.
  l.queue_budget_s = 0;
  EXPECT_TRUE(DecideAdmission(s, l, one).ok());
}

TEST(AdmissionTest, QueueBudgetBoundsTheEstimatedWait) {
  AdmissionState s;
  s.parallel = 2;
  s.service_s = 1.5;
  AdmissionLimits l;
  l.queue_budget_s = 2.0;
  const int64_t one[] = {10};
  // 2 running + 1: one round ahead, 1.5 s <= 2 s.
  s.in_flight = 2;
  EXPECT_TRUE(DecideAdmission(s, l, one).ok());
  s.in_flight = 3;  // ahead 2: still one round
  EXPECT_TRUE(DecideAdmission(s, l, one).ok());
  s.in_flight = 4;  // ahead 3: two rounds, 3 s > 2 s
  AdmissionDecision d = DecideAdmission(s, l, one);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status.message(),
            "at capacity: the estimated wait for a slot is 3.0 s, over the "
            "queue budget of 2.0 s; retry later");
  EXPECT_EQ(d.retry_after_s, 1);  // ceil(3 - 2)
  s.in_flight = 9;                // ahead 8: 4 rounds, 6 s
  EXPECT_EQ(DecideAdmission(s, l, one).retry_after_s, 4);
}

TEST(AdmissionTest, AGroupIsDecidedAsAWhole) {
  AdmissionState s;
  s.parallel = 4;
  s.in_flight = 2;
  s.service_s = 10;
  AdmissionLimits l;
  l.queue_budget_s = 5;
  const int64_t two[] = {8, 8};
  const int64_t three[] = {8, 8, 8};
  EXPECT_TRUE(DecideAdmission(s, l, two).ok());
  // Three would need a slot that frees in ~10 s: all three are refused.
  EXPECT_FALSE(DecideAdmission(s, l, three).ok());
  // Queue count: two waiting of at most three.
  l.queue_budget_s = 0;
  l.max_waiting_requests = 3;
  s.queued_requests = 2;
  const int64_t one[] = {8};
  EXPECT_TRUE(DecideAdmission(s, l, one).ok());
  AdmissionDecision d = DecideAdmission(s, l, two);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status.message(), "the waiting queue is full (3 requests)");
  EXPECT_EQ(d.retry_after_s, 10);  // one finish: one round of 10 s
}

TEST(AdmissionTest, PromptTokenBoundSparesAGroupAloneInTheQueue) {
  AdmissionState s;
  s.parallel = 1;
  AdmissionLimits l;
  l.max_waiting_prompt_tokens = 100;
  const int64_t big[] = {80, 80};
  EXPECT_TRUE(DecideAdmission(s, l, big).ok());  // nothing else waits
  s.queued_requests = 1;
  s.queued_prompt_tokens = 30;
  const int64_t small[] = {70};
  EXPECT_TRUE(DecideAdmission(s, l, small).ok());
  const int64_t over[] = {71};
  AdmissionDecision d = DecideAdmission(s, l, over);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status.message(),
            "the waiting queue holds 30 prompt tokens; 71 more would exceed "
            "its bound of 100");
  // No service estimate yet: queued tokens over the prefill rate.
  s.prefill_tok_per_s = 10;
  EXPECT_EQ(DecideAdmission(s, l, over).retry_after_s, 3);
  s.service_s = 4;
  EXPECT_EQ(DecideAdmission(s, l, over).retry_after_s, 4);
}

TEST(AdmissionTest, RetryAfterIsAtLeastOneSecondAndBounded) {
  AdmissionState s;
  EXPECT_EQ(RetryAfterForFinishes(s, 1), 1);
  s.service_s = 0.01;
  EXPECT_EQ(RetryAfterForFinishes(s, 1), 1);
  s.service_s = 1e300;
  EXPECT_EQ(RetryAfterForFinishes(s, 1), 24 * 3600);
  s.service_s = 2.5;
  s.parallel = 2;
  EXPECT_EQ(RetryAfterForFinishes(s, 3), 5);  // two rounds
}

// --- The policy inside the engine (synthetic model). ---

model::SamplingParams Greedy(int max_tokens) {
  model::SamplingParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

EngineRequest Request(int max_tokens, int32_t first = 300) {
  EngineRequest r;
  r.prompt = {1, first, first + 1, 290};
  r.sampling = Greedy(max_tokens);
  return r;
}

// Pops events until the final one.
RequestEvent Final(RequestStream& s) {
  RequestEvent e;
  while (s.Pop(&e, 30s)) {
    if (e.type != RequestEvent::Type::kToken) return e;
  }
  ADD_FAILURE() << "stream did not finish";
  return e;
}

// Waits for the first token event, so the request surely holds its slot.
void AwaitRunning(RequestStream& s) {
  RequestEvent e;
  ASSERT_TRUE(s.Pop(&e, 30s));
  ASSERT_EQ(e.type, RequestEvent::Type::kToken);
}

TEST(EngineAdmissionTest, QueueBudgetRefusesUntilTheSlotIsFree) {
  ThreadPool pool(2);
  EngineOptions o;
  o.n_ctx = 4096;
  o.parallel = 1;
  o.queue_budget_s = 1e-6;  // any wait is too long
  Engine engine(TinyTestModel(), pool, o);
  // No request has finished: only the free slot admits.
  auto hog = engine.Submit(Request(4000));
  ASSERT_TRUE(hog.ok());
  int retry = 0;
  auto refused = engine.Submit(Request(4), &retry);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(Contains(refused.status().message(), "no request has finished"));
  EXPECT_GE(retry, 1);
  (*hog)->Cancel();
  EXPECT_EQ(Final(**hog).status.code(), StatusCode::kCancelled);
  // Counted out before its final event: admitted at once, no race.
  EXPECT_EQ(engine.Stats().in_flight, 0);
  auto quick = engine.Submit(Request(4));
  ASSERT_TRUE(quick.ok()) << quick.status().ToString();
  EXPECT_EQ(Final(**quick).type, RequestEvent::Type::kDone);
  const double service_s = engine.Stats().service_s;
  EXPECT_GT(service_s, 0);

  // With an estimate: the wait behind a running request is over budget.
  hog = engine.Submit(Request(4000));
  ASSERT_TRUE(hog.ok());
  AwaitRunning(**hog);
  refused = engine.Submit(Request(4), &retry);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(Contains(refused.status().message(), "queue budget"))
      << refused.status().message();
  // Retry-After from the same estimate as the decision.
  EXPECT_EQ(retry, std::max(1, static_cast<int>(std::ceil(service_s - 1e-6))));
  EXPECT_EQ(engine.RetryAfterSeconds(), retry);
  EXPECT_EQ(engine.Stats().in_flight, 1);
  EXPECT_EQ(engine.Stats().waiting, 0);
  (*hog)->Cancel();
  Final(**hog);
  auto after = engine.Submit(Request(4));
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(Final(**after).type, RequestEvent::Type::kDone);
}

TEST(EngineAdmissionTest, GenerousBudgetQueuesBehindARunningRequest) {
  ThreadPool pool(2);
  EngineOptions o;
  o.n_ctx = 4096;
  o.parallel = 1;
  o.queue_budget_s = 1e6;
  Engine engine(TinyTestModel(), pool, o);
  auto first = engine.Submit(Request(2));
  ASSERT_TRUE(first.ok());
  Final(**first);  // teaches the engine its service time
  auto hog = engine.Submit(Request(4000));
  ASSERT_TRUE(hog.ok());
  AwaitRunning(**hog);
  auto queued = engine.Submit(Request(3));
  ASSERT_TRUE(queued.ok()) << queued.status().ToString();
  EngineStats st = engine.Stats();
  EXPECT_EQ(st.in_flight, 2);
  EXPECT_EQ(st.waiting, 1);
  (*hog)->Cancel();
  EXPECT_EQ(Final(**queued).type, RequestEvent::Type::kDone);
}

TEST(EngineAdmissionTest, SubmitGroupIsAllOrNone) {
  ThreadPool pool(2);
  EngineOptions o;
  o.n_ctx = 4096;
  o.parallel = 2;
  o.queue_budget_s = 1e-6;
  Engine engine(TinyTestModel(), pool, o);
  auto hog = engine.Submit(Request(4000));
  ASSERT_TRUE(hog.ok());
  AwaitRunning(**hog);
  // Two choices need two slots; one is free: none is queued.
  std::vector<EngineRequest> two = {Request(3), Request(3, 310)};
  int retry = 0;
  auto refused = engine.SubmitGroup(two, &retry);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_GE(retry, 1);
  EXPECT_EQ(engine.Stats().in_flight, 1);
  EXPECT_EQ(engine.Stats().waiting, 0);
  // An invalid member refuses the whole group too.
  std::vector<EngineRequest> bad = {Request(3), Request(3)};
  bad[1].sampling.top_p = 7;
  auto invalid = engine.SubmitGroup(bad);
  ASSERT_FALSE(invalid.ok());
  EXPECT_EQ(invalid.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(engine.Stats().in_flight, 1);
  EXPECT_EQ(engine.SubmitGroup({}).status().code(),
            StatusCode::kInvalidArgument);
  // With both slots free the group is admitted, streams in order.
  (*hog)->Cancel();
  Final(**hog);
  std::vector<EngineRequest> group = {Request(3), Request(5, 310)};
  auto streams = engine.SubmitGroup(group);
  ASSERT_TRUE(streams.ok()) << streams.status().ToString();
  ASSERT_EQ(streams->size(), 2u);
  EXPECT_EQ(Final(*(*streams)[0]).completion_tokens, 3);
  EXPECT_EQ(Final(*(*streams)[1]).completion_tokens, 5);
}

TEST(EngineAdmissionTest, GroupsCountAgainstTheQueueBound) {
  ThreadPool pool(2);
  EngineOptions o;
  o.n_ctx = 4096;
  o.parallel = 1;
  o.max_waiting_requests = 2;
  Engine engine(TinyTestModel(), pool, o);
  auto hog = engine.Submit(Request(4000));
  ASSERT_TRUE(hog.ok());
  AwaitRunning(**hog);
  std::vector<EngineRequest> three(3, Request(2));
  int retry = 0;
  auto refused = engine.SubmitGroup(three, &retry);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            "the waiting queue is full (2 requests)");
  EXPECT_GE(retry, 1);
  std::vector<EngineRequest> two(2, Request(2));
  auto admitted = engine.SubmitGroup(two);
  ASSERT_TRUE(admitted.ok());
  EXPECT_EQ(engine.Stats().waiting, 2);
  (*hog)->Cancel();
  for (auto& s : *admitted)
    EXPECT_EQ(Final(*s).type, RequestEvent::Type::kDone);
}

TEST(EngineAdmissionTest, WarmUpRequestsDoNotFeedTheServiceEstimate) {
  ThreadPool pool(2);
  EngineOptions o;
  o.n_ctx = 256;
  o.parallel = 1;
  Engine engine(TinyTestModel(), pool, o);
  EngineRequest warm = Request(4);
  warm.warmup = true;
  EXPECT_EQ(Final(**engine.Submit(warm)).type, RequestEvent::Type::kDone);
  EXPECT_EQ(engine.Stats().service_s, 0);
  EXPECT_EQ(Final(**engine.Submit(Request(4))).type, RequestEvent::Type::kDone);
  EXPECT_GT(engine.Stats().service_s, 0);
}

}  // namespace
}  // namespace redline::engine
