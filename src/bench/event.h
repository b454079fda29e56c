// Timed events of a bench run (`redline bench --event 20s:'CMD'`): a shell
// command run at an offset of the load timeline (kill a replica, switch a
// `redline chaos` fault, restart a server), and what became of it. The
// reports mark each event on the time axis (docs/BENCH.md#events).
//
// This file holds the spec parser and the record; bench/event_runner.h runs
// the commands. Thread-safety: plain values and pure functions.
#ifndef REDLINE_BENCH_EVENT_H_
#define REDLINE_BENCH_EVENT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace redline::bench {

// One `--event OFFSET:COMMAND`. The offset counts from the load timeline's
// start (warm-up included, after the cold requests): the axis of the time
// series and charts.
struct EventSpec {
  int64_t offset_ns = 0;
  std::string command;  // run as /bin/sh -c COMMAND
  std::string source;   // the flag value as written
};

// Parses "OFFSET:COMMAND" (OFFSET in the bench duration syntax, a unit
// required: "20s", "1.5m", "500ms"). Errors name the flag and the value.
Result<EventSpec> ParseEventSpec(std::string_view text);

// Parses every value and sorts them by offset (stable: equal offsets keep
// their order on the command line). At most kMaxEvents.
inline constexpr size_t kMaxEvents = 64;
Result<std::vector<EventSpec>> ParseEventSpecs(
    const std::vector<std::string>& values);

// What happened to one event. Offsets are seconds from the load start.
struct EventRecord {
  EventSpec spec;
  bool started = false;        // false: the run ended first, or spawn failed
  bool finished = false;       // the shell exited and was reaped
  double start_s = 0;          // when it was spawned
  double end_s = 0;            // when its exit was seen (finished only)
  int exit_code = -1;          // the shell's exit status; -1 when signalled
  int signal = 0;              // the signal that ended the shell, 0 for none
  bool timed_out = false;      // killed by --event-timeout
  double timeout_s = 0;        // the timeout it ran under
  bool killed_at_end = false;  // still running when the run ended: killed
  std::string error;           // spawn failure, or not reaped in time
  // The last bytes of each stream (EventRunnerOptions::tail_bytes at most)
  // and how many bytes the stream carried in all.
  std::string stdout_tail, stderr_tail;
  int64_t stdout_bytes = 0, stderr_bytes = 0;

  // "exit 0", "exit 3", "killed by SIGTERM after the 30s timeout",
  // "not started (the run ended first)", ...
  std::string Outcome() const;
  // True when the command did not run to a zero exit.
  bool Failed() const { return !finished || exit_code != 0; }
};

// "SIGTERM" for 15, "signal 42" for an unnamed one.
std::string SignalName(int signal);

}  // namespace redline::bench

#endif  // REDLINE_BENCH_EVENT_H_
