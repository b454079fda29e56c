// Routing policies, the hash ring and routing keys: pure decisions fed
// with loads (no sockets, no clock).
#include "gateway/policy.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "api/request.h"
#include "gateway/affinity_policy.h"
#include "gateway/hash_ring.h"
#include "gateway/routing_key.h"

namespace redline::gateway {
namespace {

std::vector<UpstreamLoad> Loads(int n) {
  std::vector<UpstreamLoad> v(static_cast<size_t>(n));
  for (auto& u : v) {
    u.eligible = true;
    u.routable = true;
  }
  return v;
}

std::vector<std::string> Names(int n) {
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.push_back("up" + std::to_string(i));
  return names;
}

TEST(RoundRobinTest, SmoothWeightedInterleaves) {
  auto p = MakePolicy(PolicyKind::kRoundRobin, Names(3), {5, 1, 1}, {}, 1);
  auto loads = Loads(3);
  loads[0].weight = 5;
  std::string order;
  for (int i = 0; i < 7; ++i)
    order += static_cast<char>('a' + *p->Pick(loads, {}, 0));
  // nginx's smooth weighted round robin for 5,1,1.
  EXPECT_EQ(order, "aabacaa");
}

TEST(RoundRobinTest, SkipsIneligibleAndReportsNone) {
  auto p = MakePolicy(PolicyKind::kRoundRobin, Names(3), {1, 1, 1}, {}, 1);
  auto loads = Loads(3);
  loads[1].eligible = false;
  std::map<size_t, int> counts;
  for (int i = 0; i < 10; ++i) counts[*p->Pick(loads, {}, 0)]++;
  EXPECT_EQ(counts[0], 5);
  EXPECT_EQ(counts[1], 0);
  EXPECT_EQ(counts[2], 5);
  for (auto& l : loads) l.eligible = false;
  EXPECT_FALSE(p->Pick(loads, {}, 0).has_value());
}

TEST(LeastOutstandingTest, FewestInFlightPerWeightAndRotatingTies) {
  auto p =
      MakePolicy(PolicyKind::kLeastOutstanding, Names(3), {1, 1, 1}, {}, 1);
  auto loads = Loads(3);
  loads[0].in_flight = 3;
  loads[1].in_flight = 1;
  loads[2].in_flight = 2;
  EXPECT_EQ(*p->Pick(loads, {}, 0), 1u);
  loads[2].weight = 4;  // 3/4 per weight beats 2/1
  EXPECT_EQ(*p->Pick(loads, {}, 0), 2u);
  auto ties = Loads(3);
  std::set<size_t> seen;
  for (int i = 0; i < 3; ++i) seen.insert(*p->Pick(ties, {}, 0));
  EXPECT_EQ(seen.size(), 3u) << "ties must rotate";
}

TEST(LeastTokensTest, CountsTokensNotRequests) {
  auto p = MakePolicy(PolicyKind::kLeastTokens, Names(2), {1, 1}, {}, 1);
  auto loads = Loads(2);
  loads[0].in_flight = 1;
  loads[0].tokens_in_flight = 100;
  loads[1].in_flight = 5;
  loads[1].tokens_in_flight = 5000;
  RouteRequest r;
  r.token_estimate = 300;
  EXPECT_EQ(*p->Pick(loads, r, 0), 0u);
  loads[0].tokens_in_flight = 9000;
  EXPECT_EQ(*p->Pick(loads, r, 0), 1u);
}

TEST(LatencyTest, SlowUpstreamLosesMostTraffic) {
  auto p = MakePolicy(PolicyKind::kLatency, Names(3), {1, 1, 1}, {}, 7);
  auto loads = Loads(3);
  const int64_t now = 100'000'000'000;
  for (auto& l : loads) {
    l.ewma_ttft_ms = 50;
    l.ewma_sample_ns = now;
  }
  loads[2].ewma_ttft_ms = 550;  // +500 ms
  std::map<size_t, int> counts;
  for (int i = 0; i < 3000; ++i) counts[*p->Pick(loads, {}, now)]++;
  // Power of two choices: the slow one only wins when paired with itself,
  // which distinct choices never do.
  EXPECT_EQ(counts[2], 0);
  EXPECT_GT(counts[0], 1200);
  EXPECT_GT(counts[1], 1200);
}

TEST(LatencyTest, UnsampledUpstreamIsTriedAndOldSamplesDecay) {
  const int64_t now = 100'000'000'000;
  UpstreamLoad u;
  u.ewma_ttft_ms = 400;
  u.ewma_sample_ns = now;
  EXPECT_DOUBLE_EQ(DecayedTtftMs(u, now), 400);
  EXPECT_NEAR(DecayedTtftMs(u, now + 10'000'000'000), 200, 1e-9);
  u.ewma_ttft_ms = 0;
  EXPECT_EQ(DecayedTtftMs(u, now), 0);

  auto p = MakePolicy(PolicyKind::kLatency, Names(2), {1, 1}, {}, 3);
  auto loads = Loads(2);
  loads[0].ewma_ttft_ms = 50;
  loads[0].ewma_sample_ns = now;
  // No sample yet on 1: it is preferred (explored) at once.
  EXPECT_EQ(*p->Pick(loads, {}, now), 1u);
}

TEST(LatencyTest, LoadCountsToo) {
  auto p = MakePolicy(PolicyKind::kLatency, Names(2), {1, 1}, {}, 3);
  auto loads = Loads(2);
  for (auto& l : loads) {
    l.ewma_ttft_ms = 100;
    l.ewma_sample_ns = 1;
  }
  loads[0].in_flight = 10;
  for (int i = 0; i < 20; ++i) EXPECT_EQ(*p->Pick(loads, {}, 1), 1u);
}

TEST(HashRingTest, RemovingANodeMovesOnlyItsKeys) {
  ConsistentHashRing three, two;
  three.Build({{"a", 1}, {"b", 1}, {"c", 1}}, 100);
  two.Build({{"a", 1}, {"b", 1}}, 100);
  EXPECT_EQ(three.points(), 300u);
  int moved = 0, owned_by_c = 0;
  std::map<size_t, int> share;
  for (uint64_t k = 0; k < 3000; ++k) {
    const uint64_t key = k * 0x9e3779b97f4a7c15ull;
    const size_t before = *three.Walk(key, [](size_t) { return true; });
    const size_t after = *two.Walk(key, [](size_t) { return true; });
    share[before]++;
    if (before == 2) {
      ++owned_by_c;
    } else if (before != after) {
      ++moved;
    }
  }
  EXPECT_EQ(moved, 0) << "keys of a and b must stay";
  for (auto& [node, n] : share) {
    EXPECT_GT(n, 700) << node;  // ~1000 each with 100 points per node
    EXPECT_LT(n, 1300) << node;
  }
  EXPECT_GT(owned_by_c, 0);
}

TEST(HashRingTest, WalkVisitsEachNodeOnceAndWeightsScalePoints) {
  ConsistentHashRing ring;
  ring.Build({{"a", 1}, {"b", 3}}, 10);
  EXPECT_EQ(ring.points(), 40u);
  int calls = 0;
  EXPECT_FALSE(ring.Walk(42,
                         [&](size_t) {
                           ++calls;
                           return false;
                         })
                   .has_value());
  EXPECT_EQ(calls, 2);
}

TEST(PrefixAffinityTest, SameKeySameUpstreamAndKeysSpread) {
  PrefixAffinity p(Names(3), {1, 1, 1}, {});
  auto loads = Loads(3);
  std::map<size_t, int> share;
  for (uint64_t k = 1; k <= 900; ++k) {
    RouteRequest r{true, k * 0x9e3779b97f4a7c15ull, 10};
    const size_t first = *p.Pick(loads, r, 0);
    EXPECT_EQ(*p.Pick(loads, r, 0), first);
    share[first]++;
  }
  for (auto& [node, n] : share) EXPECT_GT(n, 150) << node;
}

TEST(PrefixAffinityTest, OverloadedUpstreamLosesNewSessionsOnly) {
  AffinityOptions o;
  o.load_factor = 1.25;
  PrefixAffinity p(Names(3), {1, 1, 1}, o);
  auto loads = Loads(3);
  // A session placed while everything is idle.
  RouteRequest known{true, 12345, 1};
  const size_t home = *p.Pick(loads, known, 0);
  // Its upstream becomes the busy one: 10 in flight, others 1.
  for (size_t i = 0; i < 3; ++i) loads[i].in_flight = i == home ? 10 : 1;
  // The known session stays (its KV is there) while it is eligible...
  EXPECT_EQ(*p.Pick(loads, known, 0), home);
  // ...but new sessions whose ring home it is go elsewhere: mean in flight
  // is 4, bound ceil(1.25 * 13 / 3) = 6 < 11.
  int placed_on_busy = 0;
  for (uint64_t k = 1; k <= 300; ++k) {
    RouteRequest r{true, k * 0x9e3779b97f4a7c15ull, 1};
    if (*p.Pick(loads, r, 0) == home) ++placed_on_busy;
  }
  EXPECT_EQ(placed_on_busy, 0);
  // When its upstream cannot take it, the session moves and remembers.
  loads[home].eligible = false;
  const size_t moved = *p.Pick(loads, known, 0);
  EXPECT_NE(moved, home);
  loads[home].eligible = true;
  EXPECT_EQ(*p.Pick(loads, known, 0), moved);
}

TEST(PrefixAffinityTest, SessionTableIsBounded) {
  AffinityOptions o;
  o.max_sessions = 10;
  PrefixAffinity p(Names(2), {1, 1}, o);
  auto loads = Loads(2);
  for (uint64_t k = 1; k <= 100; ++k) p.Pick(loads, {true, k, 1}, 0);
  EXPECT_EQ(p.sessions(), 10u);
  EXPECT_TRUE(p.SessionOf(100).has_value());
  EXPECT_FALSE(p.SessionOf(1).has_value());
}

TEST(PrefixAffinityTest, NoKeyFallsBackToLeastOutstanding) {
  PrefixAffinity p(Names(3), {1, 1, 1}, {});
  auto loads = Loads(3);
  loads[0].in_flight = 2;
  loads[1].in_flight = 0;
  loads[2].in_flight = 1;
  EXPECT_EQ(*p.Pick(loads, {}, 0), 1u);
}

api::CompletionRequest Chat(std::vector<api::ChatMessage> messages) {
  api::CompletionRequest r;
  r.kind = api::ApiKind::kChat;
  r.messages = std::move(messages);
  return r;
}

TEST(RoutingKeyTest, EveryTurnOfAChatHasTheSessionKey) {
  const auto turn1 = Chat({{"system", "You are terse."}, {"user", "Hi"}});
  const auto turn2 = Chat({{"system", "You are terse."},
                           {"user", "Hi"},
                           {"assistant", "Hello."},
                           {"user", "Tell me more"}});
  const auto other = Chat({{"system", "You are terse."}, {"user", "Bye"}});
  const auto k1 = MakeRouteRequest(turn1, 4096);
  const auto k2 = MakeRouteRequest(turn2, 4096);
  EXPECT_TRUE(k1.has_key);
  EXPECT_EQ(k1.key, k2.key);
  EXPECT_NE(k1.key, MakeRouteRequest(other, 4096).key);
  // Role boundaries matter: ("ab", "c") is not ("a", "bc").
  EXPECT_NE(MakeRouteRequest(Chat({{"system", "ab"}, {"user", "c"}}), 99).key,
            MakeRouteRequest(Chat({{"system", "a"}, {"user", "bc"}}), 99).key);
}

TEST(RoutingKeyTest, PrefixBytesBoundTheKeyAndTokensAreEstimated) {
  api::CompletionRequest a;
  a.kind = api::ApiKind::kCompletions;
  a.prompt = std::string(100, 'x') + "tail one";
  api::CompletionRequest b = a;
  b.prompt = std::string(100, 'x') + "tail two";
  EXPECT_EQ(MakeRouteRequest(a, 64).key, MakeRouteRequest(b, 64).key);
  EXPECT_NE(MakeRouteRequest(a, 4096).key, MakeRouteRequest(b, 4096).key);
  // 108 bytes / 4 + the completions default of 16 tokens.
  EXPECT_EQ(MakeRouteRequest(a, 64).token_estimate, 27 + 16);
  a.sampling.max_tokens = 100;
  a.n = 2;
  EXPECT_EQ(MakeRouteRequest(a, 64).token_estimate, 27 + 200);
}

TEST(PolicyNamesTest, RoundTrip) {
  for (PolicyKind k : {PolicyKind::kRoundRobin, PolicyKind::kLeastOutstanding,
                       PolicyKind::kLeastTokens, PolicyKind::kLatency,
                       PolicyKind::kPrefixAffinity}) {
    auto parsed = ParsePolicyKind(PolicyName(k));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, k);
  }
  EXPECT_TRUE(ParsePolicyKind("least-outstanding").ok());
  EXPECT_FALSE(ParsePolicyKind("random").ok());
}

}  // namespace
}  // namespace redline::gateway
