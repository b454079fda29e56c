#include "server/startup.h"

#include <algorithm>
#include <cmath>

namespace redline::server {

std::string_view PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kStarting:
      return "starting";
    case Phase::kLoading:
      return "loading";
    case Phase::kWarming:
      return "warming";
    case Phase::kReady:
      return "ready";
    case Phase::kDraining:
      return "draining";
    case Phase::kFailed:
      return "failed";
  }
  return "starting";
}

StartupTracker::StartupTracker() : created_(Clock::now()) {}

void StartupTracker::SetPhase(Phase phase) {
  if (phase == Phase::kReady && startup_s_.load() < 0) {
    startup_s_.store(
        std::chrono::duration<double>(Clock::now() - created_).count());
  }
  phase_.store(phase, std::memory_order_release);
}

void StartupTracker::SetLoadProgress(double p) {
  p = std::clamp(p, 0.0, 1.0);
  double cur = load_progress_.load();
  while (p > cur && !load_progress_.compare_exchange_weak(cur, p)) {
  }
}

void StartupTracker::SetLoadSeconds(double s) { load_s_.store(s); }
void StartupTracker::SetWarmupSeconds(double s) { warmup_s_.store(s); }

void StartupTracker::Fail(std::string error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = std::move(error);
  }
  phase_.store(Phase::kFailed, std::memory_order_release);
}

StartupSnapshot StartupTracker::Snapshot() const {
  StartupSnapshot s;
  s.phase = phase();
  s.load_progress = load_progress_.load();
  s.elapsed_s = std::chrono::duration<double>(Clock::now() - created_).count();
  s.load_s = load_s_.load();
  s.warmup_s = warmup_s_.load();
  s.startup_s = startup_s_.load();
  switch (s.phase) {
    case Phase::kStarting:
      s.progress = 0;
      break;
    case Phase::kLoading:
    case Phase::kFailed:
      s.progress = kLoadShare * s.load_progress;
      break;
    case Phase::kWarming:
      s.progress = kLoadShare;
      break;
    case Phase::kReady:
    case Phase::kDraining:
      s.progress = 1;
      break;
  }
  if (s.phase == Phase::kFailed) {
    std::lock_guard<std::mutex> lock(mu_);
    s.error = error_;
  }
  return s;
}

int StartupTracker::EstimatedSecondsToReady() const {
  const StartupSnapshot s = Snapshot();
  if (s.phase != Phase::kLoading && s.phase != Phase::kWarming) return 0;
  if (s.progress <= 0.01) return 5;  // nothing to extrapolate from yet
  const double left = s.elapsed_s * (1 - s.progress) / s.progress;
  return std::max(1, static_cast<int>(std::ceil(left)));
}

}  // namespace redline::server
