#include "engine/model_profile.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "base/thread_pool.h"
#include "model/arch/synthetic.h"

namespace redline::engine {
namespace {

class ModelProfileTest : public ::testing::TestWithParam<std::string> {};

// Every preset small enough for a test; each has its own shape.
TEST_P(ModelProfileTest, StagesAddUpToTheWallTime) {
  const std::string path =
      (std::filesystem::temp_directory_path() /
       ("redline_profile_" + GetParam() + std::to_string(getpid()) + ".gguf"))
          .string();
  auto preset = model::SyntheticPreset(GetParam());
  ASSERT_TRUE(preset.ok());
  ThreadPool pool(2);
  ASSERT_TRUE(
      model::WriteSyntheticModel(*preset, kernels::DType::kQ8_0, 3, path, pool)
          .ok());
  ModelProfileOptions o;
  o.prompt_tokens = 24;
  o.decode_tokens = 8;
  o.threads = 2;
  o.measure_bandwidth = false;
  o.overhead_repeats = 1;
  o.record_events = true;
  auto r = RunModelProfile(path, o);
  std::filesystem::remove(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (const ProfilePhase* ph : {&r->load, &r->prefill, &r->decode}) {
    ASSERT_FALSE(ph->rows.empty());
    double sum = 0;
    for (const ProfileRow& row : ph->rows) sum += row.ms;
    EXPECT_NEAR(sum, ph->wall_ms, 1e-6) << ph->name;
    // What the timers do not see ("other") is within 5 % of the wall time.
    EXPECT_EQ(ph->rows.back().stage, "other (unaccounted)");
    EXPECT_LE(std::abs(ph->rows.back().ms), 0.05 * ph->wall_ms + 0.05)
        << ph->name;
  }
  // Products read weights: bytes and rates are there.
  bool any_gbps = false;
  for (const ProfileRow& row : r->decode.rows) any_gbps |= row.gbps > 0;
  EXPECT_TRUE(any_gbps);
  EXPECT_EQ(r->prefill.tokens, 24);
  EXPECT_FALSE(r->events.empty());
  const std::string text = r->ToText();
  EXPECT_NE(text.find("matmul gate/up"), std::string::npos);
  EXPECT_NE(text.find("timer overhead"), std::string::npos);
  EXPECT_EQ(r->ToJson().front(), '{');
}

INSTANTIATE_TEST_SUITE_P(Presets, ModelProfileTest,
                         ::testing::Values("tiny", "tiny-qwen2"));

TEST(ModelProfileErrors, BadCountsAndFilesAreErrors) {
  ModelProfileOptions o;
  o.prompt_tokens = 0;
  EXPECT_FALSE(RunModelProfile("/nonexistent.gguf", o).ok());
  o.prompt_tokens = 4;
  auto r = RunModelProfile("/nonexistent.gguf", o);
  ASSERT_FALSE(r.ok());
}

}  // namespace
}  // namespace redline::engine
