#include "engine/model_bench.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "base/thread_pool.h"
#include "model/arch/model.h"
#include "model/arch/synthetic.h"

namespace redline::engine {
namespace {

ModelBenchResult WithShare(int64_t bytes_per_token, double tok_per_s) {
  ModelBenchResult r;
  r.decode_bytes_per_token = bytes_per_token;
  r.tests.push_back({"tg64", 64, 0, {tok_per_s}});
  r.bandwidth.read_gbps = 10;
  r.bandwidth.copy_gbps = 8;
  r.bandwidth.triad_gbps = 9;
  r.roofline_share = static_cast<double>(bytes_per_token) * tok_per_s / 10e9;
  return r;
}

TEST(ModelBenchReportTest, ShareAboveOneSaysFitsInCache) {
  // 10 MB/token x 2000 tok/s = 20 GB/s from a 10 GB/s DRAM: cache-resident.
  const ModelBenchResult cached = WithShare(10'000'000, 2000);
  EXPECT_TRUE(cached.fits_in_cache());
  EXPECT_NE(cached.ToMarkdown().find("fit in cache"), std::string::npos)
      << cached.ToMarkdown();
  EXPECT_NE(cached.ToJson().find("\"decode_fits_in_cache\": true"),
            std::string::npos);

  const ModelBenchResult dram = WithShare(10'000'000, 500);  // 50 %
  EXPECT_FALSE(dram.fits_in_cache());
  EXPECT_EQ(dram.ToMarkdown().find("fit in cache"), std::string::npos);
  EXPECT_NE(dram.ToMarkdown().find("= 50.0 %\n"), std::string::npos)
      << dram.ToMarkdown();
  EXPECT_NE(dram.ToJson().find("\"decode_fits_in_cache\": false"),
            std::string::npos);
}

TEST(ModelBenchReportTest, PairedSharesAreReportedWithTheirMedian) {
  ModelBenchResult r = WithShare(10'000'000, 500);
  EXPECT_EQ(r.paired_share(), 0);
  EXPECT_EQ(r.ToMarkdown().find("each repeat"), std::string::npos);
  EXPECT_NE(r.ToJson().find("\"decode_roofline_shares_paired\": []"),
            std::string::npos)
      << r.ToJson();
  // A single-figure share above 1 with paired shares below: a bandwidth
  // drift, not a cache-resident model.
  r.roofline_share = 1.05;
  r.paired_shares = {0.9, 0.5, 0.8, 0.7};
  EXPECT_FALSE(r.fits_in_cache());
  EXPECT_EQ(r.ToMarkdown().find("fit in cache"), std::string::npos);
  EXPECT_DOUBLE_EQ(r.paired_share(), 0.75);
  EXPECT_NE(r.ToMarkdown().find("median 75.0 % (min 50.0, max 90.0, 4 "
                                "repeats)"),
            std::string::npos)
      << r.ToMarkdown();
  EXPECT_NE(r.ToJson().find("\"decode_roofline_share_paired\": 0.7500"),
            std::string::npos)
      << r.ToJson();
  EXPECT_NE(r.ToJson().find("\"decode_roofline_shares_paired\": [0.9000, "
                            "0.5000, 0.8000, 0.7000]"),
            std::string::npos)
      << r.ToJson();
  // The passes' own figures, so a share can be checked against its
  // denominator.
  EXPECT_NE(r.ToJson().find("\"decode_paired_bandwidth_gbps\": []"),
            std::string::npos)
      << r.ToJson();
  r.paired_gbps = {55.5, 61.3, 48.0, 57.0};
  EXPECT_NE(r.ToMarkdown().find("those passes read 48.0-61.3 GB/s"),
            std::string::npos)
      << r.ToMarkdown();
  EXPECT_NE(r.ToJson().find("\"decode_paired_bandwidth_gbps\": [55.50, "
                            "61.30, 48.00, 57.00]"),
            std::string::npos)
      << r.ToJson();
}

TEST(ModelBenchDepthTest, EachDepthRunsEveryTestAfterThatMuchContext) {
  const std::string path =
      (std::filesystem::temp_directory_path() /
       ("redline_model_bench_depth_" + std::to_string(getpid()) + ".gguf"))
          .string();
  ThreadPool pool(2);
  auto preset = model::SyntheticPreset("tiny");
  ASSERT_TRUE(preset.ok());
  ASSERT_TRUE(
      model::WriteSyntheticModel(*preset, kernels::DType::kQ8_0, 3, path, pool)
          .ok());
  model::LoadOptions lo;
  lo.load_tokenizer = false;
  auto m = model::Model::Load(path, lo);
  std::filesystem::remove(path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();

  ModelBenchOptions o;
  o.prefill_tokens = {8};
  o.decode_tokens = 4;
  o.depths = {64, 0};  // any order
  o.repeats = 1;
  o.measure_bandwidth = false;
  auto r = RunModelBench(**m, pool, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->tests.size(), 4u);
  EXPECT_EQ(r->tests[0].name, "pp8");
  EXPECT_EQ(r->tests[1].name, "tg4");
  EXPECT_EQ(r->tests[2].name, "pp8 @ d64");
  EXPECT_EQ(r->tests[3].name, "tg4 @ d64");
  EXPECT_EQ(r->tests[3].depth, 64);
  for (const ModelBenchTest& t : r->tests) EXPECT_GT(t.median(), 0) << t.name;
  EXPECT_EQ(r->RooflineTest(), &r->tests[1]);
  EXPECT_NE(r->ToJson().find("\"depth\": 64"), std::string::npos);

  EXPECT_TRUE(r->paired_shares.empty());  // no bandwidth measured

  // With bandwidth: one paired share per repeat of the roofline test only.
  o.depths = {0, 64};
  o.repeats = 2;
  o.measure_bandwidth = true;
  // Small arrays: this tests the pairing, not the figure (the default
  // arrays are gigabytes on hosts with a large L3).
  o.bandwidth_array_bytes = int64_t{8} << 20;
  auto measured = RunModelBench(**m, pool, o);
  ASSERT_TRUE(measured.ok()) << measured.status().ToString();
  ASSERT_EQ(measured->paired_shares.size(), 2u);
  ASSERT_EQ(measured->paired_gbps.size(), 2u);
  for (double share : measured->paired_shares) EXPECT_GT(share, 0);
  for (double gbps : measured->paired_gbps) EXPECT_GT(gbps, 0);
  EXPECT_GT(measured->roofline_share, 0);

  // Past the model's context: an error naming it, nothing run.
  o.depths = {(*m)->config().context_length_train};
  auto too_deep = RunModelBench(**m, pool, o);
  ASSERT_FALSE(too_deep.ok());
  EXPECT_NE(too_deep.status().ToString().find("context"), std::string::npos)
      << too_deep.status().ToString();
  o.depths = {-1};
  EXPECT_FALSE(RunModelBench(**m, pool, o).ok());
  o.depths = {0};
  o.bandwidth_array_bytes = -1;
  EXPECT_FALSE(RunModelBench(**m, pool, o).ok());
}

}  // namespace
}  // namespace redline::engine
