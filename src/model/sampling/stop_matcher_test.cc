#include "model/sampling/stop_matcher.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/sampling/sampling_rng.h"

namespace redline::model {
namespace {

struct Fed {
  std::string text;  // everything emitted, Flush included when not stopped
  bool stopped = false;
  int matched = -1;
};

// Feeds `pieces` one by one; flushes at the end unless stopped.
Fed FeedAll(const std::vector<std::string>& stops,
            const std::vector<std::string>& pieces) {
  StopMatcher m(stops);
  Fed fed;
  for (const std::string& p : pieces) {
    if (m.Feed(p, &fed.text)) break;
  }
  fed.stopped = m.stopped();
  fed.matched = m.matched_stop();
  m.Flush(&fed.text);
  return fed;
}

TEST(StopMatcherTest, NoStopsPassesTextThrough) {
  StopMatcher m(std::vector<std::string>{});
  std::string out;
  EXPECT_FALSE(m.Feed("hello ", &out));
  EXPECT_FALSE(m.Feed("world", &out));
  EXPECT_EQ(out, "hello world");
  EXPECT_EQ(m.held_bytes(), 0u);
}

TEST(StopMatcherTest, StopAcrossPieceBoundaries) {
  const std::vector<std::string> stops = {"</s>"};
  StopMatcher m(stops);
  std::string out;
  EXPECT_FALSE(m.Feed("Hello </", &out));
  EXPECT_EQ(out, "Hello ");  // "</" is held back
  EXPECT_EQ(m.held_bytes(), 2u);
  EXPECT_FALSE(m.Feed("s", &out));
  EXPECT_EQ(out, "Hello ");
  EXPECT_TRUE(m.Feed("> and more", &out));
  EXPECT_EQ(out, "Hello ");  // the stop string and what follows are dropped
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.matched_stop(), 0);
  EXPECT_TRUE(m.Feed("ignored", &out));
  m.Flush(&out);
  EXPECT_EQ(out, "Hello ");
}

TEST(StopMatcherTest, PartialPrefixReleasedWhenItDiverges) {
  const std::vector<std::string> stops = {"<stop>"};
  StopMatcher m(stops);
  std::string out;
  EXPECT_FALSE(m.Feed("ab<st", &out));
  EXPECT_EQ(out, "ab");
  EXPECT_FALSE(m.Feed("x", &out));
  EXPECT_EQ(out, "ab<stx");
  EXPECT_EQ(m.held_bytes(), 0u);
  // A divergence that itself starts a new prefix keeps only that part.
  EXPECT_FALSE(m.Feed("<s<", &out));
  EXPECT_EQ(out, "ab<stx<s");
  EXPECT_EQ(m.held_bytes(), 1u);
  m.Flush(&out);
  EXPECT_EQ(out, "ab<stx<s<");
}

TEST(StopMatcherTest, StopAtTheVeryStart) {
  Fed fed = FeedAll({"STOP"}, {"STOP right away"});
  EXPECT_TRUE(fed.stopped);
  EXPECT_EQ(fed.text, "");
  fed = FeedAll({"STOP"}, {"ST", "OP"});
  EXPECT_TRUE(fed.stopped);
  EXPECT_EQ(fed.text, "");
}

TEST(StopMatcherTest, MultipleStopsEarliestCompletionWins) {
  // "b" completes (at byte 2) before "abc" (byte 3).
  Fed fed = FeedAll({"abc", "b"}, {"xabc"});
  EXPECT_EQ(fed.text, "xa");
  EXPECT_EQ(fed.matched, 1);
  // Same end: the longer one (earlier start) wins.
  fed = FeedAll({"c", "abc"}, {"xabc"});
  EXPECT_EQ(fed.text, "x");
  EXPECT_EQ(fed.matched, 1);
  // Empty stop strings are ignored; indices still refer to the caller's list.
  fed = FeedAll({"", "\n\n"}, {"one\n", "\ntwo"});
  EXPECT_EQ(fed.text, "one");
  EXPECT_EQ(fed.matched, 1);
}

TEST(StopMatcherTest, ResultIndependentOfPieceBoundaries) {
  const std::vector<std::string> stops = {"END", "ndx", "<|im_end|>", "abab"};
  const std::vector<std::string> texts = {
      "the end is near ENDING", "aba abab",
      "<|im_e <|im_end|>tail",  "no stop here at all <|im_",
      "endx and ndx",           "caf\xC3\xA9 \xF0\x9F\x98\x80 END"};
  SamplingRng rng(3);
  for (const std::string& text : texts) {
    const Fed whole = FeedAll(stops, {text});
    for (int trial = 0; trial < 50; ++trial) {
      std::vector<std::string> pieces;
      for (size_t i = 0; i < text.size();) {
        const size_t len = 1 + rng.Next() % 4;
        pieces.push_back(text.substr(i, len));
        i += len;
      }
      const Fed split = FeedAll(stops, pieces);
      EXPECT_EQ(split.text, whole.text) << text;
      EXPECT_EQ(split.matched, whole.matched) << text;
    }
  }
}

TEST(StopMatcherTest, IncompleteUtf8IsHeldBack) {
  EXPECT_EQ(IncompleteUtf8Suffix("abc"), 0u);
  EXPECT_EQ(IncompleteUtf8Suffix("caf\xC3"), 1u);
  EXPECT_EQ(IncompleteUtf8Suffix("caf\xC3\xA9"), 0u);
  EXPECT_EQ(IncompleteUtf8Suffix("\xF0\x9F\x98"), 3u);
  EXPECT_EQ(IncompleteUtf8Suffix("\xF0\x9F\x98\x80"), 0u);
  EXPECT_EQ(IncompleteUtf8Suffix("\xE2\x82"), 2u);
  EXPECT_EQ(IncompleteUtf8Suffix("x\xFF"), 0u);         // never valid: not held
  EXPECT_EQ(IncompleteUtf8Suffix("\x80\x80\x80"), 0u);  // stray continuations

  StopMatcher m(std::vector<std::string>{});
  std::string out;
  EXPECT_FALSE(m.Feed("caf\xC3", &out));
  EXPECT_EQ(out, "caf");
  EXPECT_FALSE(m.Feed("\xA9 \xF0\x9F", &out));
  EXPECT_EQ(out, "caf\xC3\xA9 ");
  EXPECT_FALSE(m.Feed("\x98", &out));
  EXPECT_EQ(out, "caf\xC3\xA9 ");
  EXPECT_FALSE(m.Feed("\x80!", &out));
  EXPECT_EQ(out, "caf\xC3\xA9 \xF0\x9F\x98\x80!");
  // Flush gives back even an incomplete tail.
  EXPECT_FALSE(m.Feed("\xE2", &out));
  m.Flush(&out);
  EXPECT_EQ(out, "caf\xC3\xA9 \xF0\x9F\x98\x80!\xE2");
}

TEST(StopMatcherTest, MultiByteStopString) {
  const Fed fed = FeedAll({"\xE3\x80\x82"}, {"\xE4\xBD\xA0\xE5", "\xA5\xBD\xE3",
                                             "\x80", "\x82\xE5\x86\x8D"});
  EXPECT_TRUE(fed.stopped);
  EXPECT_EQ(fed.text, "\xE4\xBD\xA0\xE5\xA5\xBD");
}

TEST(EndOfGenerationSetTest, SortsDedupsAndFinds) {
  const EndOfGenerationSet eog({7, 2, 7, 5});
  EXPECT_EQ(eog.tokens().size(), 3u);
  EXPECT_TRUE(eog.Contains(2));
  EXPECT_TRUE(eog.Contains(7));
  EXPECT_FALSE(eog.Contains(3));
  EXPECT_FALSE(EndOfGenerationSet().Contains(0));
}

TEST(FinishCheckerTest, EndOfGenerationTokenStopsWithoutItsText) {
  SamplingParams params;
  params.stop = {"##"};
  FinishChecker checker(params, EndOfGenerationSet({2}));
  std::string out;
  EXPECT_EQ(checker.Accept(5, "hi #", &out), FinishReason::kNone);
  EXPECT_EQ(out, "hi ");
  EXPECT_EQ(checker.Accept(2, "</s>", &out), FinishReason::kStop);
  EXPECT_EQ(out, "hi #");  // held text flushed, EOG text not emitted
  EXPECT_EQ(checker.num_generated(), 2);
  EXPECT_EQ(FinishReasonName(checker.finish_reason()), "stop");
}

TEST(FinishCheckerTest, IgnoreEosKeepsGoingUntilLength) {
  SamplingParams params;
  params.ignore_eos = true;
  params.max_tokens = 3;
  FinishChecker checker(params, EndOfGenerationSet({2}));
  std::string out;
  EXPECT_EQ(checker.Accept(2, "a", &out), FinishReason::kNone);
  EXPECT_EQ(checker.Accept(2, "b", &out), FinishReason::kNone);
  EXPECT_EQ(checker.Accept(4, "c\xC3", &out), FinishReason::kLength);
  EXPECT_EQ(out, "abc\xC3");
  EXPECT_EQ(FinishReasonName(FinishReason::kLength), "length");
  EXPECT_EQ(FinishReasonName(FinishReason::kNone), "");
}

TEST(FinishCheckerTest, StopStringBeatsLengthOnTheSameToken) {
  SamplingParams params;
  params.max_tokens = 2;
  params.stop = {"\n"};
  FinishChecker checker(params, EndOfGenerationSet());
  std::string out;
  EXPECT_EQ(checker.Accept(1, "x", &out), FinishReason::kNone);
  EXPECT_EQ(checker.Accept(1, "y\nz", &out), FinishReason::kStop);
  EXPECT_EQ(out, "xy");
}

TEST(FinishCheckerTest, OutsideFinishFlushes) {
  SamplingParams params;
  params.stop = {"STOP"};
  FinishChecker checker(params, EndOfGenerationSet());
  std::string out;
  EXPECT_EQ(checker.Accept(1, "abc ST", &out), FinishReason::kNone);
  checker.Finish(FinishReason::kLength, &out);  // context full
  EXPECT_EQ(out, "abc ST");
  EXPECT_EQ(checker.finish_reason(), FinishReason::kLength);
}

}  // namespace
}  // namespace redline::model
