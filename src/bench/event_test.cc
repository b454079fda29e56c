// --event: the OFFSET:COMMAND parser, and the runner against real processes
// with a fake clock (so "at the offset" and "after the timeout" are exact).
#include "bench/event.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "bench/clock.h"
#include "bench/event_runner.h"

namespace redline::bench {
namespace {

constexpr int64_t kSec = 1'000'000'000;

TEST(EventSpecTest, ParsesOffsetAndCommand) {
  auto e = ParseEventSpec("20s:kill $(cat /tmp/replica.pid)");
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->offset_ns, 20 * kSec);
  EXPECT_EQ(e->command, "kill $(cat /tmp/replica.pid)");
  EXPECT_EQ(e->source, "20s:kill $(cat /tmp/replica.pid)");

  // Only the first ':' splits: the command keeps its own.
  auto curl = ParseEventSpec(
      "1.5m: curl -X PUT 127.0.0.1:9181/faults -d latency=200ms");
  ASSERT_TRUE(curl.ok());
  EXPECT_EQ(curl->offset_ns, 90 * kSec);
  EXPECT_EQ(curl->command,
            "curl -X PUT 127.0.0.1:9181/faults -d latency=200ms");

  auto ms = ParseEventSpec("250ms:true");
  ASSERT_TRUE(ms.ok());
  EXPECT_EQ(ms->offset_ns, 250'000'000);
  auto zero = ParseEventSpec("0s:true");
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(zero->offset_ns, 0);
}

TEST(EventSpecTest, RejectsBadSpecsNamingTheFlag) {
  for (const char* bad : {"kill 1", ":kill 1", "20:kill 1", "20s:", "20s:   ",
                          "-1s:true", "soon:true", "1x:true"}) {
    auto e = ParseEventSpec(bad);
    ASSERT_FALSE(e.ok()) << bad;
    const std::string msg(e.status().message());
    EXPECT_NE(msg.find("--event '" + std::string(bad) + "'"), std::string::npos)
        << msg;
  }
  EXPECT_NE(std::string(ParseEventSpec("20:x").status().message())
                .find("needs a unit"),
            std::string::npos);
  EXPECT_NE(
      std::string(ParseEventSpec("20s:").status().message()).find("command"),
      std::string::npos);
}

TEST(EventSpecTest, SortsByOffsetKeepingTheOrderOfEqualOnes) {
  auto specs = ParseEventSpecs({"20s:b", "1s:a", "20s:c", "500ms:first"});
  ASSERT_TRUE(specs.ok());
  ASSERT_EQ(specs->size(), 4u);
  EXPECT_EQ((*specs)[0].command, "first");
  EXPECT_EQ((*specs)[1].command, "a");
  EXPECT_EQ((*specs)[2].command, "b");
  EXPECT_EQ((*specs)[3].command, "c");

  EXPECT_FALSE(ParseEventSpecs({"1s:a", "oops"}).ok());
  std::vector<std::string> many(kMaxEvents + 1, "1s:true");
  EXPECT_FALSE(ParseEventSpecs(many).ok());
}

// Polls with the fake clock standing still until `done` (real time, bounded).
template <typename Pred>
bool PollUntil(EventRunner& runner, const FakeClock& clock, Pred done) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    runner.Poll(clock.NowNs());
  }
  return true;
}

TEST(EventRunnerTest, RunsAtTheOffsetAndRecordsExitAndOutput) {
  FakeClock clock;
  auto specs = ParseEventSpecs({"2s:echo out; echo err >&2; exit 3"});
  ASSERT_TRUE(specs.ok());
  std::vector<std::string> updates;
  EventRunnerOptions opt;
  opt.on_update = [&](const EventRecord& e) {
    updates.push_back(e.finished ? e.Outcome() : "started");
  };
  EventRunner runner(*specs, opt);
  runner.Poll(clock.NowNs());  // before Start: nothing happens
  runner.Start(clock.NowNs());
  clock.AdvanceNs(2 * kSec - 1);
  runner.Poll(clock.NowNs());
  EXPECT_FALSE(runner.records()[0].started);
  EXPECT_EQ(runner.NextWakeNs(clock.NowNs()), 1);
  clock.AdvanceNs(1);
  runner.Poll(clock.NowNs());
  const EventRecord& r = runner.records()[0];
  ASSERT_TRUE(r.started) << r.error;
  EXPECT_DOUBLE_EQ(r.start_s, 2.0);
  ASSERT_TRUE(PollUntil(runner, clock, [&] { return r.finished; }));
  EXPECT_TRUE(runner.Done());
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.signal, 0);
  EXPECT_FALSE(r.timed_out);
  EXPECT_DOUBLE_EQ(r.end_s, 2.0);
  EXPECT_EQ(r.stdout_tail, "out\n");
  EXPECT_EQ(r.stderr_tail, "err\n");
  EXPECT_EQ(r.Outcome(), "exit 3");
  EXPECT_TRUE(r.Failed());
  EXPECT_EQ(updates, (std::vector<std::string>{"started", "exit 3"}));
}

TEST(EventRunnerTest, TheCommandGetsNoOtherDescriptorOfBench) {
  const int leaky = ::dup(STDOUT_FILENO);  // not close-on-exec
  ASSERT_GE(leaky, 3);
  FakeClock clock;
  const std::string probe = "[ -e /proc/$$/fd/" + std::to_string(leaky) +
                            " ] && echo leaked || echo closed";
  auto specs = ParseEventSpecs({"0s:" + probe});
  ASSERT_TRUE(specs.ok());
  EventRunner runner(*specs, {});
  runner.Start(clock.NowNs());
  runner.Poll(clock.NowNs());
  const EventRecord& r = runner.records()[0];
  ASSERT_TRUE(PollUntil(runner, clock, [&] { return r.finished; }));
  ::close(leaky);
  EXPECT_EQ(r.stdout_tail, "closed\n");
}

TEST(EventRunnerTest, TimeoutKillsTheProcessGroup) {
  FakeClock clock;
  auto specs = ParseEventSpecs({"0s:sleep 100 & sleep 100; echo never"});
  ASSERT_TRUE(specs.ok());
  EventRunnerOptions opt;
  opt.timeout_ns = 30 * kSec;
  EventRunner runner(*specs, opt);
  runner.Start(clock.NowNs());
  runner.Poll(clock.NowNs());
  const EventRecord& r = runner.records()[0];
  ASSERT_TRUE(r.started) << r.error;
  const auto t0 = std::chrono::steady_clock::now();
  clock.AdvanceNs(30 * kSec - 1);
  runner.Poll(clock.NowNs());
  EXPECT_FALSE(r.timed_out);
  EXPECT_FALSE(r.finished);
  clock.AdvanceNs(1);
  runner.Poll(clock.NowNs());
  EXPECT_TRUE(r.timed_out);
  ASSERT_TRUE(PollUntil(runner, clock, [&] { return r.finished; }));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(r.signal, SIGTERM);
  EXPECT_EQ(r.stdout_tail, "");
  EXPECT_DOUBLE_EQ(r.end_s, 30.0);
  EXPECT_EQ(r.Outcome(), "killed by SIGTERM after the 30s timeout");
}

TEST(EventRunnerTest, SigkillAfterTheGraceWhenSigtermIsIgnored) {
  FakeClock clock;
  auto specs = ParseEventSpecs({"0s:trap '' TERM; sleep 100; sleep 100"});
  ASSERT_TRUE(specs.ok());
  EventRunnerOptions opt;
  opt.timeout_ns = kSec;
  opt.kill_grace_ns = kSec;
  EventRunner runner(*specs, opt);
  runner.Start(clock.NowNs());
  runner.Poll(clock.NowNs());
  const EventRecord& r = runner.records()[0];
  ASSERT_TRUE(r.started);
  // Let the shell install its trap before it is signalled.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  clock.AdvanceNs(kSec);
  runner.Poll(clock.NowNs());
  ASSERT_TRUE(r.timed_out);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  runner.Poll(clock.NowNs());
  EXPECT_FALSE(r.finished);  // SIGTERM ignored
  clock.AdvanceNs(kSec);
  ASSERT_TRUE(PollUntil(runner, clock, [&] { return r.finished; }));
  EXPECT_EQ(r.signal, SIGKILL);
}

TEST(EventRunnerTest, OutputTailIsBounded) {
  FakeClock clock;
  auto specs =
      ParseEventSpecs({"0s:head -c 100000 /dev/zero | tr '\\0' a; printf END; "
                       "printf 'e%.0s' $(seq 10) >&2"});
  ASSERT_TRUE(specs.ok());
  EventRunnerOptions opt;
  opt.tail_bytes = 4096;
  EventRunner runner(*specs, opt);
  runner.Start(clock.NowNs());
  runner.Poll(clock.NowNs());
  const EventRecord& r = runner.records()[0];
  ASSERT_TRUE(PollUntil(runner, clock, [&] { return r.finished; }));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.stdout_bytes, 100'003);
  ASSERT_EQ(r.stdout_tail.size(), 4096u);
  EXPECT_EQ(r.stdout_tail.substr(4093), "END");
  EXPECT_EQ(r.stdout_tail.substr(0, 4093), std::string(4093, 'a'));
  EXPECT_EQ(r.stderr_tail, "eeeeeeeeee");
  EXPECT_EQ(r.stderr_bytes, 10);

  // Output below the read-time trim is cut to the bound at the exit.
  auto small = ParseEventSpecs({"0s:printf 0123456789abcdefghij"});
  ASSERT_TRUE(small.ok());
  opt.tail_bytes = 16;
  EventRunner small_runner(*small, opt);
  small_runner.Start(clock.NowNs());
  small_runner.Poll(clock.NowNs());
  const EventRecord& s = small_runner.records()[0];
  ASSERT_TRUE(PollUntil(small_runner, clock, [&] { return s.finished; }));
  EXPECT_EQ(s.stdout_tail, "456789abcdefghij");
  EXPECT_EQ(s.stdout_bytes, 20);
}

TEST(EventRunnerTest, StopAllKillsWhatRunsAndLeavesTheRestUnstarted) {
  FakeClock clock;
  auto specs = ParseEventSpecs({"0s:sleep 100", "50s:touch /nonexistent/x"});
  ASSERT_TRUE(specs.ok());
  EventRunner runner(*specs, {});
  runner.Start(clock.NowNs());
  runner.Poll(clock.NowNs());
  ASSERT_TRUE(runner.records()[0].started);
  EXPECT_FALSE(runner.Done());
  clock.AdvanceNs(3 * kSec);
  runner.StopAll(clock.NowNs());
  ASSERT_TRUE(PollUntil(runner, clock, [&] { return runner.Done(); }));
  const EventRecord& killed = runner.records()[0];
  EXPECT_TRUE(killed.finished);
  EXPECT_TRUE(killed.killed_at_end);
  EXPECT_FALSE(killed.timed_out);
  EXPECT_EQ(killed.signal, SIGTERM);
  EXPECT_DOUBLE_EQ(killed.end_s, 3.0);
  EXPECT_EQ(killed.Outcome(), "killed by SIGTERM at the end of the run");
  const EventRecord& never = runner.records()[1];
  EXPECT_FALSE(never.started);
  EXPECT_EQ(never.Outcome(), "not started (the run ended first)");
  // No spawn after the stop, whatever the clock says.
  clock.AdvanceNs(100 * kSec);
  runner.Poll(clock.NowNs());
  EXPECT_FALSE(runner.records()[1].started);
}

TEST(EventThreadTest, StartsNearTheOffsetOnTheSteadyClock) {
  const SteadyClock clock;
  auto specs = ParseEventSpecs({"150ms:echo late", "10s:true"});
  ASSERT_TRUE(specs.ok());
  EventThread thread(*specs, {}, clock);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  thread.OnLoadStart(clock.NowNs());
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<EventRecord> records = thread.Finish();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  ASSERT_EQ(records.size(), 2u);
  ASSERT_TRUE(records[0].started);
  EXPECT_GE(records[0].start_s, 0.15);
  EXPECT_LT(records[0].start_s, 0.45);  // a loaded machine's wake-up lag
  EXPECT_TRUE(records[0].finished);
  EXPECT_EQ(records[0].exit_code, 0);
  EXPECT_EQ(records[0].stdout_tail, "late\n");
  EXPECT_FALSE(records[1].started);
}

}  // namespace
}  // namespace redline::bench
