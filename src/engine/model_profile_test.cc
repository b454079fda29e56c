#include "engine/model_profile.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <vector>

#include "base/thread_pool.h"
#include "model/arch/forward_profile.h"
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
  EXPECT_NE(text.find("timer cost"), std::string::npos);
  EXPECT_EQ(r->ToJson().front(), '{');
  // The direct timer cost: every decode step marks the same stages (about
  // ten per layer), each mark costs a clock read.
  EXPECT_EQ(r->marks_per_decode_step, std::floor(r->marks_per_decode_step));
  EXPECT_GE(r->marks_per_decode_step, 8.0 * preset->block_count);
  EXPECT_GT(r->mark_ns, 0);
  EXPECT_LT(r->mark_ns, 5000);
  EXPECT_GT(r->timer_cost_share, 0);
  EXPECT_LT(r->timer_cost_share, 1);
  EXPECT_NE(r->ToJson().find("\"timer_cost_share\""), std::string::npos);
}

TEST(ForwardProfile, RecordStageCountsMarksAndBoundsEvents) {
  model::ForwardProfile p;
  std::vector<model::ForwardEvent> events;
  p.events = &events;
  p.max_events = 2;
  int64_t t = model::ProfileNowNs();
  for (int i = 0; i < 3; ++i)
    model::RecordStage(p, model::ForwardStage::kNorm, i, &t);
  EXPECT_EQ(p.marks, 3);
  EXPECT_EQ(events.size(), 2u);
  EXPECT_EQ(p.events_dropped, 1);
  EXPECT_EQ(events[1].layer, 1);
  EXPECT_GE(p.ns[static_cast<int>(model::ForwardStage::kNorm)], 0);
  p.Clear();
  EXPECT_EQ(p.marks, 0);
  EXPECT_GT(model::MeasureStageMarkNs(3, 1000), 0);
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
