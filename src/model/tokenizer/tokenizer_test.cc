#include <gtest/gtest.h>

TEST(Placeholder_tokenizer_test, Nothing) {}
