#include "engine/model_bench.h"

#include <gtest/gtest.h>

namespace redline::engine {
namespace {

ModelBenchResult WithShare(int64_t bytes_per_token, double tok_per_s) {
  ModelBenchResult r;
  r.decode_bytes_per_token = bytes_per_token;
  r.tests.push_back({"tg64", 64, {tok_per_s}});
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

}  // namespace
}  // namespace redline::engine
