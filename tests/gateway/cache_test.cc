// Response cache and router pieces without sockets: the key, the local
// tier (LRU, TTL with an injected clock, forced hash collisions), the
// Redis value codec, class rules and overrides, the complexity scorer and
// the escalation check, and the YAML sections.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <memory>
#include <string>
#include <vector>

#include "api/request.h"
#include "gateway/cache_config.h"
#include "gateway/cache_key.h"
#include "gateway/cache_layer.h"
#include "gateway/config_yaml.h"
#include "gateway/gateway_metrics.h"
#include "gateway/response_cache.h"
#include "gateway/router.h"
#include "http/event_loop.h"

namespace redline::gateway {
namespace {

namespace json = boost::json;

api::CompletionRequest Parse(const std::string& body,
                             api::ApiKind kind = api::ApiKind::kChat) {
  auto r = api::ParseRequest(body, kind);
  EXPECT_TRUE(r.ok()) << r.status().ToString() << " " << body;
  return r.ok() ? *r : api::CompletionRequest();
}

CacheKey Key(const std::string& body, const std::string& model = "m") {
  json::value v = json::parse(body);
  return BuildCacheKey(Parse(body), model, "", v.as_object());
}

std::string Chat(const std::string& text, const std::string& extra = "") {
  return R"({"model":"m","messages":[{"role":"user","content":")" + text +
         R"("}],"temperature":0)" + extra + "}";
}

TEST(CacheKeyTest, EveryOutputFieldCountsAndNothingElse) {
  const CacheKey base = Key(Chat("hi"));
  EXPECT_EQ(base.hash_hex.size(), 32u);
  EXPECT_EQ(Key(Chat("hi")).canonical, base.canonical);
  // Not output-determining: user, the gateway's own cache member.
  EXPECT_EQ(Key(Chat("hi", R"(,"user":"bob","cache":{"ttl":5})")).hash_hex,
            base.hash_hex);
  for (const std::string& extra :
       {std::string(R"(,"seed":1)"), std::string(R"(,"max_tokens":5)"),
        std::string(R"(,"stop":["x"])"), std::string(R"(,"top_p":0.5)"),
        std::string(R"(,"logit_bias":{"5":1})"),
        std::string(R"(,"stream":true)"),
        std::string(R"(,"response_format":{"type":"text"})"),
        std::string(
            R"(,"tools":[{"type":"function","function":{"name":"f"}}])")})
    EXPECT_NE(Key(Chat("hi", extra)).hash_hex, base.hash_hex) << extra;
  EXPECT_NE(Key(Chat("hi ")).hash_hex, base.hash_hex);
  EXPECT_NE(Key(Chat("hi"), "other").hash_hex, base.hash_hex);
  // Object key order in the body does not matter.
  EXPECT_EQ(
      Key(Chat("hi",
               R"(,"tool_choice":{"type":"function","function":{"name":"f"}})"))
          .canonical,
      Key(Chat("hi",
               R"(,"tool_choice":{"function":{"name":"f"},"type":"function"})"))
          .canonical);
  // Normalised-text keys fold case, whitespace and trailing punctuation.
  auto norm = [](const std::string& body) {
    json::value v = json::parse(body);
    return BuildCacheKey(Parse(body), "m", "", v.as_object(), true).hash_hex;
  };
  EXPECT_EQ(norm(Chat("What is  the Capital of France?")),
            norm(Chat("what is the capital of france")));
  EXPECT_NE(Key(Chat("What is  the Capital of France?")).hash_hex,
            Key(Chat("what is the capital of france")).hash_hex);
  EXPECT_NE(norm(Chat("hi")), base.hash_hex);
  EXPECT_TRUE(IsDeterministic(Parse(Chat("hi"))));
  EXPECT_FALSE(IsDeterministic(
      Parse(R"({"model":"m","messages":[{"role":"user","content":"x"}]})")));
  EXPECT_TRUE(IsDeterministic(Parse(
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"temperature":1,"seed":3})")));
}

std::shared_ptr<const CacheEntry> Entry(const std::string& canonical,
                                        int64_t stored_ms, int64_t ttl_ms,
                                        size_t body_bytes = 10) {
  auto e = std::make_shared<CacheEntry>();
  e->canonical = canonical;
  e->cls = "facts";
  e->stored_unix_ms = stored_ms;
  e->ttl_ms = ttl_ms;
  e->body = std::string(body_bytes, 'x');
  return e;
}

// The key from the codec's own parse (ParseRequest handing back the body,
// what the gateway does since the second parse was removed) is the key
// from a separate boost::json parse of the same bytes (what it did
// before), and both equal golden hashes, so entries stored by earlier
// builds (Redis) still hit.
TEST(CacheKeyTest, OneParseKeysEqualTwoParseKeysAndGoldens) {
  struct Case {
    api::ApiKind kind;
    std::string body;
    const char* golden;
  };
  const std::vector<Case> cases = {
      {api::ApiKind::kChat, Chat("hi"), "d46c1bf94f462649f3998581003a08d9"},
      {api::ApiKind::kChat,
       R"({"model":"m","messages":[{"role":"system","content":"Be brief."},)"
       R"({"role":"user","content":"Why?","name":"u1"}],"seed":7,)"
       R"("top_p":0.5,"stop":["END"],"max_tokens":16,"stream":true,)"
       R"("stream_options":{"include_usage":true},"user":"x",)"
       R"("cache":{"ttl":5}})",
       "54eb8ee4611bc98cbaecaecbea849c74"},
      {api::ApiKind::kChat,
       Chat("tools", R"(,"tools":[{"type":"function","function":{"name":"f",)"
                     R"("parameters":{"b":1,"a":2}}}],"tool_choice":"auto",)"
                     R"("response_format":{"type":"text"},)"
                     R"("parallel_tool_calls":false,"logit_bias":{"5":-1},)"
                     R"("logprobs":true,"top_logprobs":2)"),
       "fa47050cf3b9d0f43048b6e2656a04bd"},
      {api::ApiKind::kCompletions,
       R"({"model":"m","prompt":"Once upon","temperature":0,"n":1})",
       "052d29e601be2c797f1feb486f6f480e"},
      {api::ApiKind::kCompletions,
       R"({"model":"m","prompt":[1,2,3],"seed":1,"logprobs":3})",
       "2052bf2bdf49cd45f19a2fb42ded2170"},
  };
  for (const Case& c : cases) {
    json::object body;
    auto one = api::ParseRequest(c.body, c.kind, nullptr, &body);
    ASSERT_TRUE(one.ok()) << one.status().ToString() << " " << c.body;
    const CacheKey k1 = BuildCacheKey(*one, "m", "light", body);
    const json::value v = json::parse(c.body);
    const CacheKey k2 =
        BuildCacheKey(Parse(c.body, c.kind), "m", "light", v.as_object());
    EXPECT_EQ(k1.canonical, k2.canonical) << c.body;
    EXPECT_EQ(k1.hash_hex, k2.hash_hex);
    EXPECT_EQ(k1.hash_hex, c.golden) << c.body << "\n" << k1.canonical;
  }
}

TEST(LocalCacheTest, ForcedCollisionNeverReturnsAnotherAnswer) {
  LocalCache c(1 << 20);
  const CacheKey a = Key(Chat("first question"));
  const CacheKey b = Key(Chat("second question"));
  // Both stored under one (forced) hash: the canonical key decides.
  c.Put("ns:facts:m:forced", Entry(a.canonical, 0, 1000));
  EXPECT_EQ(c.Get("ns:facts:m:forced", b.canonical, 1).outcome,
            LocalCache::Outcome::kCollision);
  auto hit = c.Get("ns:facts:m:forced", a.canonical, 1);
  ASSERT_EQ(hit.outcome, LocalCache::Outcome::kHit);
  EXPECT_EQ(hit.entry->canonical, a.canonical);
}

TEST(LocalCacheTest, TtlClassesExpireOnTheInjectedClock) {
  LocalCache c(1 << 20);
  const int64_t kMin = 60'000, kHour = 60 * kMin;
  c.Put("opinion", Entry("o", 0, 5 * kMin));
  c.Put("fact", Entry("f", 0, 24 * kHour));
  EXPECT_EQ(c.Get("opinion", "o", 5 * kMin - 1).outcome,
            LocalCache::Outcome::kHit);
  EXPECT_EQ(c.Get("opinion", "o", 5 * kMin).outcome,
            LocalCache::Outcome::kExpired);
  EXPECT_EQ(c.Get("opinion", "o", 5 * kMin).outcome,
            LocalCache::Outcome::kMiss);
  EXPECT_EQ(c.Get("fact", "f", 24 * kHour - 1).outcome,
            LocalCache::Outcome::kHit);
  EXPECT_EQ(c.Get("fact", "f", 24 * kHour).outcome,
            LocalCache::Outcome::kExpired);
  EXPECT_EQ(c.expirations(), 2u);
}

TEST(LocalCacheTest, ByteBudgetEvictsLeastRecentlyUsed) {
  LocalCache c(3000);
  c.Put("a", Entry("a", 0, 1000, 1000));
  c.Put("b", Entry("b", 0, 1000, 1000));
  ASSERT_EQ(c.Get("a", "a", 1).outcome, LocalCache::Outcome::kHit);
  c.Put("c", Entry("c", 0, 1000, 1000));  // over budget: b is oldest
  EXPECT_LE(c.bytes(), 3000);
  EXPECT_EQ(c.Get("b", "b", 1).outcome, LocalCache::Outcome::kMiss);
  EXPECT_EQ(c.Get("a", "a", 1).outcome, LocalCache::Outcome::kHit);
  EXPECT_EQ(c.Get("c", "c", 1).outcome, LocalCache::Outcome::kHit);
  EXPECT_GE(c.evictions(), 1u);
  c.Put("huge", Entry("h", 0, 1000, 10000));  // larger than the budget
  EXPECT_EQ(c.Get("huge", "h", 1).outcome, LocalCache::Outcome::kMiss);
  EXPECT_EQ(c.Purge("a"), 1);
  EXPECT_EQ(c.Get("a", "a", 1).outcome, LocalCache::Outcome::kMiss);
}

TEST(CacheEntryCodecTest, RoundTripsPlainAndCompressedAndRejectsGarbage) {
  CacheEntry e;
  e.canonical = "[\"chat\"]";
  e.cls = "facts";
  e.stored_unix_ms = 123456789;
  e.ttl_ms = 1000;
  e.status = 200;
  e.content_type = "text/event-stream";
  e.stream = true;
  e.upstream = "u0";
  for (int i = 0; i < 50; ++i)
    e.events.push_back({"data: {\"x\":" + std::to_string(i) + "}\n\n", i});
  for (int64_t threshold : {int64_t{1} << 30, int64_t{16}}) {
    const std::string bytes = EncodeEntry(e, threshold);
    auto d = DecodeEntry(bytes);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_EQ(d->canonical, e.canonical);
    EXPECT_EQ(d->stored_unix_ms, e.stored_unix_ms);
    EXPECT_EQ(d->upstream, "u0");
    ASSERT_EQ(d->events.size(), e.events.size());
    EXPECT_EQ(d->events[7].raw, e.events[7].raw);
    EXPECT_EQ(d->events[7].gap_us, 7);
    EXPECT_FALSE(DecodeEntry(bytes.substr(0, bytes.size() - 3)).ok());
  }
  EXPECT_LT(EncodeEntry(e, 16).size(), EncodeEntry(e, 1 << 30).size());
  EXPECT_FALSE(DecodeEntry("hello").ok());
  EXPECT_FALSE(DecodeEntry("").ok());
}

class CacheDecisionTest : public ::testing::Test {
 protected:
  CacheDecisionTest() : metrics_("redline_") {}
  std::shared_ptr<CacheLayer> Layer(CacheConfig c) {
    auto l = std::make_shared<CacheLayer>(c, loop_, metrics_,
                                          [this] { return now_ms_; });
    EXPECT_TRUE(l->Init().ok());
    return l;
  }
  Result<CacheDecision> Decide(CacheLayer& l, const std::string& body,
                               http::ServerRequest* head = nullptr) {
    json::value v = json::parse(body);
    return l.Decide(Parse(body), "m", "", v.as_object(), head);
  }
  http::EventLoop loop_;
  GatewayMetrics metrics_;
  int64_t now_ms_ = 1000;
};

TEST_F(CacheDecisionTest, DefaultRulesAndOverrides) {
  auto l = Layer(CacheConfig());
  EXPECT_EQ(l->ClassFor("m", "What's the weather today in Paris?"),
            "time_sensitive");
  EXPECT_EQ(l->ClassFor("m", "What is the latest news?"), "time_sensitive");
  EXPECT_EQ(l->ClassFor("m", "What is the capital of France?"), "facts");
  EXPECT_EQ(l->ClassFor("m", "Who knows?"), "facts");  // "now" is a word

  auto d = Decide(*l, Chat("What is the capital of France?"));
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->lookup && d->store);
  EXPECT_EQ(d->cls, "facts");
  EXPECT_EQ(d->ttl_ms, 24ll * 3600 * 1000);
  EXPECT_EQ(d->storage_key.rfind("redline:facts:m:", 0), 0u);

  d = Decide(*l, Chat("What is the price of gold now?"));
  EXPECT_EQ(d->verdict, "uncacheable");
  EXPECT_FALSE(d->lookup || d->store);

  d = Decide(
      *l,
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"temperature":0.7})");
  EXPECT_EQ(d->verdict, "uncacheable");

  d = Decide(*l, Chat("x", R"(,"cache":{"class":"opinions"})"));
  EXPECT_EQ(d->cls, "opinions");
  EXPECT_EQ(d->ttl_ms, 5 * 60 * 1000);
  d = Decide(*l, Chat("x", R"(,"cache":{"ttl":2,"no-store":true})"));
  EXPECT_EQ(d->ttl_ms, 2000);
  EXPECT_TRUE(d->lookup);
  EXPECT_FALSE(d->store);
  d = Decide(*l, Chat("x", R"(,"cache":{"no-cache":true,"s-maxage":30})"));
  EXPECT_EQ(d->verdict, "bypass");
  EXPECT_FALSE(d->lookup);
  EXPECT_EQ(d->max_age_ms, 30000);
  // Per-request TTL on a time-sensitive question is the client's call.
  d = Decide(*l, Chat("weather today?", R"(,"cache":{"ttl":10})"));
  EXPECT_TRUE(d->store);

  http::ServerRequest head;
  head.headers = {{"Cache-Control", "no-store, s-maxage=5"},
                  {"x-redline-cache-class", "opinions"}};
  d = Decide(*l, Chat("x"), &head);
  EXPECT_EQ(d->cls, "opinions");
  EXPECT_FALSE(d->store);
  EXPECT_EQ(d->max_age_ms, 5000);

  EXPECT_FALSE(Decide(*l, Chat("x", R"(,"cache":{"class":"nope"})")).ok());
  EXPECT_FALSE(Decide(*l, Chat("x", R"(,"cache":{"ttl":-1})")).ok());
  EXPECT_FALSE(Decide(*l, Chat("x", R"(,"cache":"yes")")).ok());
}

TEST_F(CacheDecisionTest, ConfiguredRulesInOrderWithModelDefaults) {
  CacheConfig c;
  CacheRuleSpec ts;
  ts.cls = "time_sensitive";
  ts.regex = "\\b(today|now)\\b";
  CacheRuleSpec op;
  op.cls = "opinions";
  op.keywords = {"do you think", "best", "should i"};
  CacheRuleSpec per_model;
  per_model.cls = "opinions";
  per_model.models = {"chatty"};
  c.rules = {ts, op, per_model};
  auto l = Layer(c);
  EXPECT_EQ(l->ClassFor("m", "Which is the BEST editor today?"),
            "time_sensitive");  // first matching rule wins
  EXPECT_EQ(l->ClassFor("m", "Which is the best editor?"), "opinions");
  EXPECT_EQ(l->ClassFor("m", "What is 2+2?"), "facts");
  EXPECT_EQ(l->ClassFor("chatty", "What is 2+2?"), "opinions");
}

TEST_F(CacheDecisionTest, DeterministicOnlyPerModel) {
  const std::string sampled =
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"temperature":0.7})";
  // One layer (and metrics registry) per configuration.
  std::vector<std::unique_ptr<GatewayMetrics>> registries;
  auto verdict_for = [&](const CacheConfig& c) {
    registries.push_back(std::make_unique<GatewayMetrics>("redline_"));
    CacheLayer l(c, loop_, *registries.back(), [this] { return now_ms_; });
    EXPECT_TRUE(l.Init().ok());
    json::value v = json::parse(sampled);
    auto d = l.Decide(Parse(sampled), "m", "", v.as_object(), nullptr);
    EXPECT_TRUE(d.ok());
    if (!d.ok()) return std::string("error");
    return d->lookup && d->store ? std::string("cacheable") : d->verdict;
  };
  CacheConfig c;
  EXPECT_EQ(verdict_for(c), "uncacheable");  // the global default
  c.model_deterministic_only = {{"m", false}};
  EXPECT_EQ(verdict_for(c), "cacheable");
  // Another model's setting leaves this one on the global rule.
  c.model_deterministic_only = {{"creative", false}};
  EXPECT_EQ(verdict_for(c), "uncacheable");
  // A per-model rule can be stricter than the global one.
  c.deterministic_only = false;
  EXPECT_EQ(verdict_for(c), "cacheable");
  c.model_deterministic_only = {{"m", true}};
  EXPECT_EQ(verdict_for(c), "uncacheable");
}

TEST(RouterTest, ScorerTable) {
  RoutingConfig rc;
  rc.models = {"auto"};
  rc.classes = {{"light", "small", 0.3}, {"full", "big", INFINITY}};
  rc.pinned = {"How do I reset my password?"};
  auto router = Router::Create(rc);
  ASSERT_TRUE(router.ok());
  const std::string code = "```python\\nprint(1)\\n```";
  struct Row {
    std::string body;
    std::string want;
  } rows[] = {
      {Chat("Hi!"), "light"},
      {Chat("What is the capital of France?"), "light"},
      {Chat("Why is the sky blue? Explain step by step."), "full"},
      {Chat("Fix this: " + code + " and this " + code), "full"},
      {Chat("First parse the file, then sort it, next dedupe, finally "
            "print. Compare approaches."),
       "full"},
      {Chat(std::string(5000, 'a')), "full"},
      {Chat("weather?",
            R"(,"tools":[{"type":"function","function":{"name":"w"}}])"),
       "full"},
      // Pinned wins over markers, whitespace and case folded.
      {Chat("  how do I RESET my password  ?? "), "light"},
      {R"({"model":"auto","prompt":"Say hi","temperature":0})", "light"},
  };
  for (const Row& row : rows) {
    const api::ApiKind kind = row.body.find("\"prompt\"") != std::string::npos
                                  ? api::ApiKind::kCompletions
                                  : api::ApiKind::kChat;
    const RouteDecision d = router->Decide(Parse(row.body, kind));
    EXPECT_EQ(rc.classes[d.class_index].name, row.want)
        << row.body.substr(0, 120) << " score " << d.score;
  }
  ScoreFeatures f = router->Features(Parse(Chat("Prove it, step by step")));
  EXPECT_EQ(f.reasoning, 2);
  EXPECT_EQ(f.user_turns, 1);
  EXPECT_TRUE(router->Routes("auto"));
  EXPECT_FALSE(router->Routes("small"));
}

TEST(RouterTest, EscalationReasons) {
  RoutingConfig rc;
  rc.models = {"auto"};
  rc.classes = {{"light", "small", 0.3}, {"full", "big", INFINITY}};
  rc.escalate_to = "full";
  rc.min_mean_logprob = -1.0;
  rc.refusal_regex = "\\b(I can't|I cannot|as an AI)\\b";
  auto router = Router::Create(rc);
  ASSERT_TRUE(router.ok());
  EXPECT_TRUE(router->wants_logprobs());
  api::CompletionResponse a;
  a.content = "Paris.";
  a.finish_reason = "stop";
  a.token_logprobs = {-0.1, -0.2};
  EXPECT_EQ(router->Unreliable(a), "");
  a.token_logprobs = {-3, -0.5};
  EXPECT_EQ(router->Unreliable(a), "logprob");
  a.token_logprobs.clear();
  a.finish_reason = "length";
  EXPECT_EQ(router->Unreliable(a), "length");
  a.finish_reason = "stop";
  a.content = "Sorry, as an ai I cannot help.";
  EXPECT_EQ(router->Unreliable(a), "refusal");
  // The codec reads logprobs of both APIs.
  auto chat = api::ParseResponse(
      R"({"choices":[{"message":{"content":"x"},"finish_reason":"stop","logprobs":{"content":[{"token":"x","logprob":-0.5},{"token":"y","logprob":-1.5}]}}]})");
  ASSERT_TRUE(chat.ok());
  EXPECT_EQ(chat->token_logprobs, (std::vector<double>{-0.5, -1.5}));
  auto comp = api::ParseResponse(
      R"({"choices":[{"text":"x","finish_reason":"stop","logprobs":{"tokens":["x"],"token_logprobs":[-0.25]}}]})");
  ASSERT_TRUE(comp.ok());
  EXPECT_EQ(comp->token_logprobs, (std::vector<double>{-0.25}));
}

TEST(CacheConfigTest, YamlSections) {
  const std::string text = R"(
cache:
  namespace: app1
  max-bytes: 1000000
  redis: {url: "redis://127.0.0.1:6390", timeout: 20ms, queue: 64, purge-poll: 250ms}
  classes: {opinions: 2s, short: 100ms}
  rules:
    - {class: time_sensitive, regex: "\\b(today|now)\\b"}
    - {class: opinions, keywords: [best, think]}
    - {class: short, models: [tiny]}
  models: {creative: {deterministic-only: false}}
routing:
  models: [auto]
  classes:
    - {name: light, model: small, max-score: 0.3}
    - {name: full, model: big}
  weights: {code: 0.5}
  pinned: ["hello"]
  escalate: {to: full, min-mean-logprob: -1.2, refusal: "I cannot", stream-tokens: 12, stream-bytes: 8192}
pools:
  - name: p
    upstreams: [http://127.0.0.1:1]
)";
  std::vector<PoolSpec> pools;
  std::vector<FlagItem> flags;
  CacheConfig cache;
  RoutingConfig routing;
  Status s =
      ParseGatewayYamlText(text, "t.yaml", &pools, &flags, &cache, &routing);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(cache.enabled);
  EXPECT_EQ(cache.name_space, "app1");
  EXPECT_EQ(cache.redis_url, "redis://127.0.0.1:6390");
  EXPECT_EQ(cache.redis_timeout_ms, 20);
  EXPECT_EQ(cache.redis_purge_poll_ms, 250);
  EXPECT_EQ(cache.rules.size(), 3u);
  ASSERT_EQ(cache.model_deterministic_only.count("creative"), 1u);
  EXPECT_FALSE(cache.model_deterministic_only.at("creative"));
  EXPECT_EQ(cache.classes.size(), 4u);
  EXPECT_EQ(routing.classes.size(), 2u);
  EXPECT_EQ(routing.weights.code, 0.5);
  EXPECT_EQ(routing.min_mean_logprob, -1.2);
  EXPECT_EQ(routing.escalate_stream_tokens, 12);
  EXPECT_EQ(routing.escalate_stream_bytes, 8192);

  for (const std::string& bad :
       {std::string("cache: {rules: [{class: nope}]}\n"),
        std::string("cache: {classes: {facts: 30}}\n"),
        std::string("cache: {rules: [{class: facts, regex: \"(\"}]}\n"),
        std::string("cache: {whatever: 1}\n"),
        std::string("cache: {models: {m: {ttl: 3}}}\n"),
        std::string("cache: {models: [m]}\n"),
        std::string("cache: {models: {m: {deterministic-only: maybe}}}\n"),
        std::string(
            "cache: {redis: {url: \"redis://h:1\", purge-poll: 1ms}}\n"),
        std::string("cache: {redis: {url: \"redis://h:1\", purge-pol: 1s}}\n"),
        std::string("routing: {escalate: {stream-tokens: -1}}\n"),
        std::string("routing: {escalate: {stream-tokens: 100000}}\n"),
        std::string("routing: {escalate: {stream-bytes: 0}}\n"),
        std::string("routing: {models: [auto], classes: [{name: a, model: "
                    "x}]}\n")}) {
    std::vector<PoolSpec> p;
    std::vector<FlagItem> f;
    CacheConfig c;
    RoutingConfig r;
    EXPECT_FALSE(ParseGatewayYamlText(bad, "b.yaml", &p, &f, &c, &r).ok())
        << bad;
  }
}

}  // namespace
}  // namespace redline::gateway
