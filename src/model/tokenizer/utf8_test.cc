#include <gtest/gtest.h>

TEST(Placeholder_utf8_test, Nothing) {}
