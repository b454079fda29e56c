#include "engine/kv_memory.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "engine/engine.h"
#include "engine/engine_test_model.h"
#include "engine/generator.h"
#include "model/arch/transformer.h"

namespace redline::engine {
namespace {

using namespace std::chrono_literals;
using testing::TinyTestModel;

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            (name + std::to_string(::getpid())))
                               .string();
  std::FILE* f = std::fopen(path.c_str(), "w");
  std::fputs(text.c_str(), f);
  std::fclose(f);
  return path;
}

TEST(KvMemoryTest, FormatBytes) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(int64_t{22} << 30), "22 GiB");
  EXPECT_EQ(FormatBytes(int64_t{1540} << 30), "1.5 TiB");
}

TEST(KvMemoryTest, KvCacheBytesMatchesTheAllocatedCache) {
  const model::Model& m = TinyTestModel();
  ThreadPool pool(1);
  model::Transformer tf(m.config(), m.weights(), pool, 4);
  for (model::KvType type : {model::KvType::kF16, model::KvType::kF32}) {
    EXPECT_EQ(model::KvCacheBytes(m.config(), 100, type),
              tf.NewCache(100, type).SizeBytes());
  }
  EXPECT_EQ(model::KvCacheBytes(m.config(), 0, model::KvType::kF16), 0);
  EXPECT_EQ(model::KvCacheBytes(m.config(), INT64_MAX, model::KvType::kF32),
            INT64_MAX);
}

// K and V each start on a 2 MiB boundary and span whole 2 MiB pages, so
// huge pages can back all of them (kv_cache.cc); the budget counts that.
TEST(KvMemoryTest, CachePagesAreWholeAlignedHugePages) {
  const model::Model& m = TinyTestModel();
  ThreadPool pool(1);
  model::Transformer tf(m.config(), m.weights(), pool, 4);
  const model::KvCache cache = tf.NewCache(100, model::KvType::kF16);
  constexpr int64_t kHuge = int64_t{2} << 20;
  EXPECT_EQ(cache.SizeBytes(), 2 * kHuge);  // a tiny model: one page each
#if !defined(__SANITIZE_ADDRESS__)
  EXPECT_EQ(reinterpret_cast<uintptr_t>(cache.KHead(0, 0, 0)) % kHuge, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(cache.VHead(0, 0, 0)) % kHuge, 0u);
#endif
}

TEST(KvMemoryTest, ReadsMemAvailable) {
  const std::string path =
      WriteTemp("redline_meminfo_",
                "MemTotal:       32000000 kB\nMemFree:  100 kB\n"
                "MemAvailable:   23068672 kB\nBuffers: 1 kB\n");
  EXPECT_EQ(ReadMemAvailableBytes(path), int64_t{23068672} * 1024);
  std::filesystem::remove(path);
  const std::string none =
      WriteTemp("redline_meminfo_none_", "MemFree: 5 kB\n");
  EXPECT_FALSE(ReadMemAvailableBytes(none).has_value());
  std::filesystem::remove(none);
  EXPECT_FALSE(ReadMemAvailableBytes("/nonexistent/meminfo").has_value());
}

TEST(KvMemoryTest, CheckNamesTheBytesItWouldNeed) {
  model::ModelConfig c;  // 30 layers x 192 K/V dims: 2.1 TiB per slot
  c.block_count = 30;
  c.head_count_kv = 3;
  c.head_dim = 64;
  const Status s =
      CheckKvCacheFits(c, 100000000, 4, model::KvType::kF16, int64_t{22} << 30);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(),
            "the KV cache for 4 slots x 100000000 tokens needs 8.4 TiB; this "
            "machine has 22 GiB available (MemAvailable); lower --ctx or "
            "--parallel");
  const Status one =
      CheckKvCacheFits(c, 100000000, 1, model::KvType::kF16, int64_t{1} << 30);
  EXPECT_TRUE(one.message().ends_with("lower --ctx")) << one.message();
  EXPECT_TRUE(
      CheckKvCacheFits(c, 4096, 4, model::KvType::kF16, int64_t{22} << 30)
          .ok());
  // Unknown memory: no check.
  EXPECT_TRUE(
      CheckKvCacheFits(c, 100000000, 4, model::KvType::kF16, std::nullopt)
          .ok());
}

TEST(KvMemoryTest, EngineCreateRefusesAContextThatCannotFit) {
  ThreadPool pool(1);
  EngineOptions o;
  o.n_ctx = int64_t{1} << 44;
  o.parallel = 4;
  auto e = Engine::Create(TinyTestModel(), pool, o);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(e.status().message().starts_with(
                  "the KV cache for 4 slots x 17592186044416 tokens needs") ||
              e.status().message().starts_with("allocating the KV cache"))
      << e.status().message();
  EXPECT_NE(e.status().message().find("lower --ctx or --parallel"),
            std::string::npos);
}

TEST(KvMemoryTest, EngineCreateChecksOptionsAndServes) {
  ThreadPool pool(1);
  EngineOptions o;
  o.n_ctx = 0;
  EXPECT_EQ(Engine::Create(TinyTestModel(), pool, o).status().code(),
            StatusCode::kInvalidArgument);
  o.n_ctx = 128;
  o.parallel = 0;
  EXPECT_EQ(Engine::Create(TinyTestModel(), pool, o).status().message(),
            "parallel must be >= 1, got 0");
  o.parallel = 2;
  o.queue_budget_s = -1;
  EXPECT_EQ(Engine::Create(TinyTestModel(), pool, o).status().code(),
            StatusCode::kInvalidArgument);
  o.queue_budget_s = 0;
  auto engine = Engine::Create(TinyTestModel(), pool, o);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  EngineRequest r;
  r.prompt = {1, 300, 301};
  r.sampling.temperature = 0;
  r.sampling.max_tokens = 3;
  auto s = (*engine)->Submit(r);
  ASSERT_TRUE(s.ok());
  RequestEvent e;
  while ((*s)->Pop(&e, 30s) && e.type == RequestEvent::Type::kToken) {
  }
  EXPECT_EQ(e.type, RequestEvent::Type::kDone);
}

TEST(KvMemoryTest, GeneratorCreateRefusesAContextThatCannotFit) {
  ThreadPool pool(1);
  auto g = Generator::Create(TinyTestModel(), pool, int64_t{1} << 44);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(g.status().message().ends_with("lower --ctx"))
      << g.status().message();
  EXPECT_EQ(Generator::Create(TinyTestModel(), pool, 0).status().code(),
            StatusCode::kInvalidArgument);
  auto ok = Generator::Create(TinyTestModel(), pool, 64);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  model::SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 2;
  auto r = (*ok)->Generate(std::vector<int32_t>{1, 300}, p,
                           [](std::string_view, int32_t) { return true; });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->tokens.size(), 2u);
}

}  // namespace
}  // namespace redline::engine
