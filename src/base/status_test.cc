#include "base/status.h"

#include <gtest/gtest.h>

#include "base/result.h"

namespace redline {
namespace {

TEST(StatusTest, OkByDefault) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_EQ(s.code(), StatusCode::kOk);
}

TEST(StatusTest, ErrorCarriesCodeAndMessage) {
  Status s = Status::DataLoss("truncated");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_EQ(s.ToString(), "data_loss: truncated");
  EXPECT_EQ(s.WithContext("model.gguf").message(), "model.gguf: truncated");
  Status copy = s;
  EXPECT_EQ(copy.message(), "truncated");
}

Result<int> Half(int x) {
  if (x % 2) return Status::InvalidArgument("odd");
  return x / 2;
}

Status UseHalf(int x, int* out) {
  RL_ASSIGN_OR_RETURN(*out, Half(x));
  return Status::Ok();
}

TEST(ResultTest, ValueAndError) {
  EXPECT_EQ(*Half(4), 2);
  EXPECT_FALSE(Half(3).ok());
  int v = 0;
  EXPECT_TRUE(UseHalf(8, &v).ok());
  EXPECT_EQ(v, 4);
  EXPECT_EQ(UseHalf(7, &v).code(), StatusCode::kInvalidArgument);
}

TEST(CheckDeathTest, FailedCheckAborts) {
  EXPECT_DEATH({ RL_CHECK(1 == 2) << "boom"; }, "check failed: 1 == 2 boom");
}

}  // namespace
}  // namespace redline
