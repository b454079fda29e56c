// StartupTracker: the server's lifecycle phase and start-up progress, as
// /startupz, /readyz, /health and the metrics report them (docs/SERVING.md, probes).
//
//   starting -> loading -> warming -> ready -> draining
//   loading or warming -> failed (the reason is kept)
//
// Progress is one number in [0, 1] over the whole start: loading covers
// [0, kLoadShare] in proportion to the model loader's own progress, warming
// the rest; ready is 1.
//
// Thread-safety: every method is thread-safe (the loader thread writes, the
// event loop reads). Cost: atomics and one mutex for the error text.
#ifndef REDLINE_SERVER_STARTUP_H_
#define REDLINE_SERVER_STARTUP_H_

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <string_view>

namespace redline::server {

enum class Phase { kStarting, kLoading, kWarming, kReady, kDraining, kFailed };
inline constexpr Phase kAllPhases[] = {Phase::kStarting, Phase::kLoading,
                                       Phase::kWarming,  Phase::kReady,
                                       Phase::kDraining, Phase::kFailed};
std::string_view PhaseName(Phase phase);

struct StartupSnapshot {
  Phase phase = Phase::kStarting;
  double progress = 0;       // overall, [0, 1]
  double load_progress = 0;  // the model loader's own, [0, 1]
  double elapsed_s = 0;      // since the tracker was created (process start)
  double load_s = -1;        // weights load time; -1 until known
  double warmup_s = -1;      // warm-up time; -1 until known
  double startup_s = -1;     // creation -> ready; -1 until ready
  std::string error;         // why the phase is failed
};

class StartupTracker {
 public:
  // Share of the overall progress that loading represents; warm-up is the
  // rest. Loading dominates start-up on CPU (page-in of the weights).
  static constexpr double kLoadShare = 0.9;

  StartupTracker();

  void SetPhase(Phase phase);
  // Loader progress in [0, 1] (monotonic; smaller values are ignored).
  void SetLoadProgress(double p);
  void SetLoadSeconds(double s);
  void SetWarmupSeconds(double s);
  // Phase failed with its reason.
  void Fail(std::string error);

  Phase phase() const { return phase_.load(std::memory_order_acquire); }
  StartupSnapshot Snapshot() const;
  // Seconds left until ready, estimated from progress so far (>= 1), or 0
  // when unknown (not loading).
  int EstimatedSecondsToReady() const;

 private:
  using Clock = std::chrono::steady_clock;
  const Clock::time_point created_;
  std::atomic<Phase> phase_{Phase::kStarting};
  std::atomic<double> load_progress_{0};
  std::atomic<double> load_s_{-1};
  std::atomic<double> warmup_s_{-1};
  std::atomic<double> startup_s_{-1};
  mutable std::mutex mu_;
  std::string error_;  // guarded by mu_
};

}  // namespace redline::server

#endif  // REDLINE_SERVER_STARTUP_H_
