#include <gtest/gtest.h>

TEST(Placeholder_streaming_detokenizer_test, Nothing) {}
