#include "gateway/upstream_health.h"

#include <algorithm>

namespace redline::gateway {

namespace {
constexpr int64_t kNsPerMs = 1'000'000;
}

UpstreamHealth::UpstreamHealth(const HealthOptions& options, bool probed)
    : options_(options), probe_up_(!probed), ever_up_(!probed) {}

double UpstreamHealth::SlowStartFactor(int64_t now_ns,
                                       int64_t window_ms) const {
  const int64_t start = returned_at_ns();
  if (window_ms <= 0 || start <= 0 || now_ns < start) return 1;
  const double elapsed = static_cast<double>(now_ns - start);
  const double window = static_cast<double>(window_ms * kNsPerMs);
  if (elapsed >= window) return 1;
  return kSlowStartMinFraction + (1 - kSlowStartMinFraction) * elapsed / window;
}

int64_t UpstreamHealth::available_at_ns() const {
  return std::max(ejected_until_ns_, backoff_until_ns_);
}

bool UpstreamHealth::RecordProbe(bool ok, int64_t now_ns) {
  if (ok) {
    probe_fail_streak_ = 0;
    ++probe_ok_streak_;
    if (!probe_up_ && probe_ok_streak_ >= options_.healthy_threshold) {
      probe_up_ = true;
      // Back from the dead: a fresh process, not the one that failed.
      failures_ = 0;
      if (ever_up_) returned_ns_ = now_ns;
      ever_up_ = true;
      return true;
    }
    return false;
  }
  probe_ok_streak_ = 0;
  ++probe_fail_streak_;
  if (probe_up_ && probe_fail_streak_ >= options_.unhealthy_threshold) {
    probe_up_ = false;
    return true;
  }
  return false;
}

void UpstreamHealth::RecordSuccess() { failures_ = 0; }

bool UpstreamHealth::RecordFailure(int64_t now_ns, bool may_eject) {
  ++failures_;
  if (options_.consecutive_failures <= 0 ||
      failures_ < options_.consecutive_failures || !may_eject ||
      ejected(now_ns))
    return false;
  // Forgive one level per base_ejection spent un-ejected since the last
  // ejection ended.
  const int64_t base_ns = options_.base_ejection_ms * kNsPerMs;
  if (level_ > 0 && base_ns > 0 && now_ns > ejected_until_ns_) {
    const int64_t quiet = (now_ns - ejected_until_ns_) / base_ns;
    level_ = static_cast<int>(std::max<int64_t>(0, level_ - quiet));
  }
  ++level_;
  int64_t ms = options_.base_ejection_ms;
  for (int i = 1; i < level_ && ms < options_.max_ejection_ms; ++i) ms *= 2;
  ms = std::min(ms, options_.max_ejection_ms);
  ejected_until_ns_ = now_ns + ms * kNsPerMs;
  failures_ = 0;
  return true;
}

void UpstreamHealth::RecordBackoff(int64_t now_ns, int64_t retry_after_ms) {
  backoff_until_ns_ =
      std::max(backoff_until_ns_, now_ns + retry_after_ms * kNsPerMs);
}

}  // namespace redline::gateway
