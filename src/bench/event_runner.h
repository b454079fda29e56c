// Runs the `--event` commands of a bench run (bench/event.h) off the load
// generator's thread.
//
// EventRunner is the single-threaded core, driven by Poll(now): it spawns
// each due command with posix_spawn as `/bin/sh -c COMMAND` in a process
// group of its own (stdin /dev/null, stdout and stderr into pipes, every
// other descriptor closed, signal dispositions and mask reset), reads the pipes without blocking into
// bounded tails, reaps with waitpid(WNOHANG) on the shell's pid only, and
// kills a command's whole group when it outlives its timeout (SIGTERM, then
// SIGKILL after a grace). Tests drive it with a FakeClock.
//
// EventThread owns an EventRunner on a thread of its own, so no spawn, read
// or wait ever runs on the load's event loop: the runner's only contact
// with the load is OnLoadStart(), called once from the loop thread.
//
// Bounds: kMaxEvents commands; per stream a tail of tail_bytes (older bytes
// are counted, not kept); per Poll at most 1 MiB read per stream; Finish()
// waits at most kill_grace + 1 s for killed groups.
//
// Thread-safety: EventRunner is thread-compatible. EventThread's methods may
// be called from any thread; Finish() once.
#ifndef REDLINE_BENCH_EVENT_RUNNER_H_
#define REDLINE_BENCH_EVENT_RUNNER_H_

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "bench/clock.h"
#include "bench/event.h"

namespace redline::bench {

struct EventRunnerOptions {
  int64_t timeout_ns = 30'000'000'000;    // --event-timeout, per command
  int64_t kill_grace_ns = 1'000'000'000;  // SIGTERM -> SIGKILL
  size_t tail_bytes = 4096;               // kept per stream
  // Called on the polling thread when a command starts (or fails to) and
  // when it ends, e.g. for a progress line. Must not block.
  std::function<void(const EventRecord&)> on_update;
};

class EventRunner {
 public:
  EventRunner(std::vector<EventSpec> specs, EventRunnerOptions options);
  ~EventRunner();  // kills (SIGKILL) any group still running, closes pipes
  EventRunner(const EventRunner&) = delete;
  EventRunner& operator=(const EventRunner&) = delete;

  // Offsets count from here (the load timeline's start).
  void Start(int64_t base_ns);
  bool started() const { return base_ns_.has_value(); }

  // Spawns the commands that are due, reads output, reaps exits, enforces
  // timeouts. Never blocks.
  void Poll(int64_t now_ns);
  // How long the caller may sleep before the next Poll is useful.
  int64_t NextWakeNs(int64_t now_ns) const;

  // The run is over: no more spawns; running commands get SIGTERM (SIGKILL
  // after the grace) and are marked killed_at_end. Keep polling until
  // Done().
  void StopAll(int64_t now_ns);
  // No command is running (or left to start, before StopAll).
  bool Done() const;
  // Last resort: SIGKILL to every group still running, and records for
  // commands that could not be reaped.
  void Abandon();

  const std::vector<EventRecord>& records() const { return records_; }
  const EventRunnerOptions& options() const { return options_; }

 private:
  struct Child {
    pid_t pid = -1;
    int out_fd = -1, err_fd = -1;
    int64_t started_ns = 0;
    int64_t term_sent_ns = 0;  // 0: not signalled yet
    bool kill_sent = false;
  };
  void Spawn(size_t i, int64_t now_ns);
  void ReadStreams(size_t i);
  void Reap(size_t i, int64_t now_ns);
  void Signal(size_t i, int64_t now_ns);
  double OffsetS(int64_t ns) const;

  EventRunnerOptions options_;
  std::vector<EventRecord> records_;
  std::vector<Child> children_;
  std::optional<int64_t> base_ns_;
  size_t next_ = 0;  // next spec to start
  bool stopping_ = false;
};

class EventThread {
 public:
  EventThread(std::vector<EventSpec> specs, EventRunnerOptions options,
              const Clock& clock);
  ~EventThread();  // Finish() if not called
  EventThread(const EventThread&) = delete;
  EventThread& operator=(const EventThread&) = delete;

  // From the load's thread: the timeline starts now (cheap, never blocks
  // beyond a mutex the event thread holds only briefly).
  void OnLoadStart(int64_t start_ns);
  // Ends the events (StopAll, bounded wait), joins the thread and returns
  // the records.
  std::vector<EventRecord> Finish();

 private:
  void Loop();

  const Clock& clock_;
  EventRunner runner_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<int64_t> start_ns_;  // guarded by mu_
  bool stop_ = false;                // guarded by mu_
  std::thread thread_;
  bool finished_ = false;
};

}  // namespace redline::bench

#endif  // REDLINE_BENCH_EVENT_RUNNER_H_
