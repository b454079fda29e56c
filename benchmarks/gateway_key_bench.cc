// The gateway's request-side JSON work on a cache hit: the codec's parse
// (api::ParseRequest) and the cache key's canonical form, with the body
// parsed once (the codec hands back its parsed object: what the gateway
// does) against twice (a separate boost::json parse for the key and the
// overrides: what it did before). Two bodies: a one-question chat and a
// six-turn chat with a system prompt (~3 KiB).
//
//   gateway_key_bench --benchmark_filter=Hit
#include <benchmark/benchmark.h>

#include <boost/json/parse.hpp>
#include <string>

#include "api/request.h"
#include "gateway/cache_key.h"

namespace {

namespace json = boost::json;
using redline::api::ApiKind;
using redline::api::ParseRequest;
using redline::gateway::BuildCacheKey;

std::string ShortBody() {
  return R"({"model":"tiny","messages":[{"role":"user","content":)"
         R"("What is the capital of France?"}],"temperature":0,)"
         R"("max_tokens":8,"cache":{"ttl":600}})";
}

std::string LongBody() {
  std::string m =
      R"({"role":"system","content":"You are a helpful assistant. )" +
      std::string(400, 'x') + R"("})";
  for (int i = 0; i < 6; ++i) {
    m += R"(,{"role":")" + std::string(i % 2 == 0 ? "user" : "assistant") +
         R"(","content":"Turn )" + std::to_string(i) + " " +
         std::string(350, 'a' + i) + R"("})";
  }
  return R"({"model":"tiny","messages":[)" + m +
         R"(],"temperature":0,"max_tokens":64,"stop":["\n\n"],)"
         R"("stream":true,"stream_options":{"include_usage":true}})";
}

const std::string& Body(int which) {
  static const std::string kShort = ShortBody();
  static const std::string kLong = LongBody();
  return which == 0 ? kShort : kLong;
}

// Before: the codec's parse, then a second parse for the key.
void BM_HitKeyTwoParses(benchmark::State& state) {
  const std::string& body = Body(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    auto r = ParseRequest(body, ApiKind::kChat);
    json::value v = json::parse(body);
    auto k = BuildCacheKey(*r, "tiny", "", v.as_object());
    benchmark::DoNotOptimize(k);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(body.size()));
}
BENCHMARK(BM_HitKeyTwoParses)->Arg(0)->Arg(1);

// After: one parse; the key reads the object the codec handed back.
void BM_HitKeyOneParse(benchmark::State& state) {
  const std::string& body = Body(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    json::object o;
    auto r = ParseRequest(body, ApiKind::kChat, nullptr, &o);
    auto k = BuildCacheKey(*r, "tiny", "", o);
    benchmark::DoNotOptimize(k);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(body.size()));
}
BENCHMARK(BM_HitKeyOneParse)->Arg(0)->Arg(1);

// The parts alone.
void BM_ParseRequestOnly(benchmark::State& state) {
  const std::string& body = Body(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    auto r = ParseRequest(body, ApiKind::kChat);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_ParseRequestOnly)->Arg(0)->Arg(1);

void BM_BuildCacheKeyOnly(benchmark::State& state) {
  const std::string& body = Body(static_cast<int>(state.range(0)));
  json::object o;
  auto r = ParseRequest(body, ApiKind::kChat, nullptr, &o);
  for (auto _ : state) {
    auto k = BuildCacheKey(*r, "tiny", "", o);
    benchmark::DoNotOptimize(k);
  }
}
BENCHMARK(BM_BuildCacheKeyOnly)->Arg(0)->Arg(1);

}  // namespace

BENCHMARK_MAIN();
