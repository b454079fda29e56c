// Cold start (--cold-start 'COMMAND'): launches the server under test, polls
// a readiness URL until it answers 2xx and records time-to-ready; the run's
// cold phase then measures the first request's latency
// (docs/METRICS.md#phases).
//
// Thread-safety: one ServerProcess per thread. The process is started in its
// own process group and the whole group is terminated by Stop() or the
// destructor (SIGTERM, then SIGKILL after a grace period).
#ifndef REDLINE_BENCH_COLD_START_H_
#define REDLINE_BENCH_COLD_START_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "bench/report.h"

namespace redline::bench {

class ServerProcess {
 public:
  // Runs `/bin/sh -c command`; its stdout/stderr go to `log_path` (or are
  // inherited when empty).
  static Result<std::unique_ptr<ServerProcess>> Launch(
      const std::string& command, const std::string& log_path);
  ~ServerProcess();

  bool Running();
  // Terminates the process group (SIGTERM, then SIGKILL after `grace_ms`)
  // and waits until it is gone; returns the shell's exit status (or -signal).
  int Stop(int64_t grace_ms = 5000);
  pid_t pid() const { return pid_; }

 private:
  explicit ServerProcess(pid_t pid) : pid_(pid) {}
  pid_t pid_;
  bool reaped_ = false;
  bool stopped_ = false;
  int status_ = 0;
};

// Polls the URLs (GET) every `interval_ms` until one answers 2xx, the
// process dies (when given) or `timeout_ms` passes. Fills `info`.
Status WaitReady(const std::vector<std::string>& urls, int64_t timeout_ms,
                 int64_t interval_ms, ServerProcess* process,
                 ColdStartInfo* info);

}  // namespace redline::bench

#endif  // REDLINE_BENCH_COLD_START_H_
