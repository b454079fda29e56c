#include "base/progress.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace redline {
namespace {

std::string ReadAll(std::FILE* f) {
  std::rewind(f);
  std::string out;
  char buf[512];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  return out;
}

TEST(ProgressTest, DurationsReadAsPeopleWriteThem) {
  EXPECT_EQ(FormatProgressDuration(0.25), "250ms");
  EXPECT_EQ(FormatProgressDuration(12.04), "12.0s");
  EXPECT_EQ(FormatProgressDuration(185), "3m05s");
  EXPECT_EQ(FormatProgressDuration(3720), "1h02m");
  EXPECT_EQ(FormatProgressDuration(-1), "0ms");
}

TEST(ProgressTest, LineShowsPercentAmountAndEta) {
  const double gib = 1024.0 * 1048576.0;
  EXPECT_EQ(FormatProgressLine("writing", 1.2 * gib, 2.4 * gib,
                               ProgressUnit::kBytes, 5.0),
            "writing  50%  1.2/2.4 GiB  ETA 5.0s");
  EXPECT_EQ(FormatProgressLine("bench", 12, 60, ProgressUnit::kSeconds, 12),
            "bench  20%  12.0s / 1m00s  ETA 48.0s");
  EXPECT_EQ(FormatProgressLine("load", 0.25, 1, ProgressUnit::kFraction, 1),
            "load  25%  ETA 3.0s");
  // Nothing done yet: no ETA to guess.
  EXPECT_EQ(FormatProgressLine("load", 0, 1, ProgressUnit::kFraction, 1),
            "load   0%");
  EXPECT_EQ(FormatProgressLine("files", 3, 7, ProgressUnit::kCount, 0.1),
            "files  43%  3/7");
}

TEST(ProgressTest, PlainLinesEndWithOneFinalLine) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress p("make-model: writing", 100, ProgressUnit::kCount, f,
               ProgressStyle::kLines);
    for (int i = 0; i <= 100; ++i) p.Set(i);
    p.Finish();
    p.Finish();  // once only
  }
  const std::string out = ReadAll(f);
  std::fclose(f);
  EXPECT_EQ(out.find('\r'), std::string::npos);
  EXPECT_NE(out.find("make-model: writing 100%  100/100  in "),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("in "), out.rfind("in ")) << out;
}

TEST(ProgressTest, BarRedrawsOneLine) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress p("load", 1, ProgressUnit::kFraction, f, ProgressStyle::kBar);
    p.Set(0.5);
    p.Set(1);  // within 100 ms: not drawn, but the final line shows it
  }            // the destructor finishes
  const std::string out = ReadAll(f);
  std::fclose(f);
  EXPECT_NE(out.find("\r[############............] load  50%"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("\r[########################] load 100%  in "),
            std::string::npos)
      << out;
  EXPECT_EQ(out.back(), '\n');
}

TEST(ProgressTest, OffWritesNothing) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress p("x", 10, ProgressUnit::kCount, f, ProgressStyle::kOff);
    p.Set(5);
  }
  EXPECT_EQ(ReadAll(f), "");
  std::fclose(f);
}

}  // namespace
}  // namespace redline
