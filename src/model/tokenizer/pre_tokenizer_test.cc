#include <gtest/gtest.h>

TEST(Placeholder_pre_tokenizer_test, Nothing) {}
