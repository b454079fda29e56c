// UpstreamHealth: whether one upstream may take requests, from three
// signals (a pure state machine; the clock is passed in):
//
//   * active probes: `unhealthy_threshold` failed probes in a row mark it
//     down, `healthy_threshold` good ones bring it back;
//   * passive outlier ejection (Envoy's): `consecutive_failures` failed
//     requests in a row (connect errors, resets, 5xx, timeouts) eject it
//     for base_ejection x 2^(k-1), k counting recent ejections (capped at
//     max_ejection), unless the pool says it is the last routable one. The
//     count k drops by one for each base_ejection spent un-ejected, so a
//     flapping upstream stays out longer and a recovered one is forgiven;
//   * back-off: a 429/503 with Retry-After keeps it out for that long. It
//     is not ejected and its failure streak is untouched: it said "busy",
//     not "broken".
//
// Slow start (Envoy's): an upstream that comes back — probes pass again
// after they had marked it down, or an ejection ends — gets a share of its
// weight that grows linearly from kSlowStartMinFraction to 1 over the
// pool's window (SlowStartFactor). Its first time up after the gateway
// starts is not a return (every upstream starts so), nor is the end of a
// back-off (it was busy, its caches are warm).
//
// Thread-safety: thread-compatible (the loop thread).
#ifndef REDLINE_GATEWAY_UPSTREAM_HEALTH_H_
#define REDLINE_GATEWAY_UPSTREAM_HEALTH_H_

#include <cstdint>

namespace redline::gateway {

// Share of its weight a returning upstream starts its slow start with.
inline constexpr double kSlowStartMinFraction = 0.1;

struct HealthOptions {
  int healthy_threshold = 1;
  int unhealthy_threshold = 2;
  int consecutive_failures = 3;  // 0: passive ejection off
  int64_t base_ejection_ms = 5'000;
  int64_t max_ejection_ms = 60'000;
};

class UpstreamHealth {
 public:
  // `probed`: active probes run, and the upstream starts down until the
  // first probe passes (a replica still loading must not get traffic);
  // without probes it starts up.
  UpstreamHealth(const HealthOptions& options, bool probed);

  // May take requests at `now_ns`.
  bool Routable(int64_t now_ns) const {
    return probe_up_ && now_ns >= ejected_until_ns_ &&
           now_ns >= backoff_until_ns_;
  }
  bool probe_up() const { return probe_up_; }
  bool ejected(int64_t now_ns) const { return now_ns < ejected_until_ns_; }
  bool backed_off(int64_t now_ns) const { return now_ns < backoff_until_ns_; }
  // When it becomes routable again if probes keep passing (0: now).
  int64_t available_at_ns() const;

  // A probe result at `now_ns`. Returns true when probe_up() changed.
  bool RecordProbe(bool ok, int64_t now_ns);
  // A request that got a good (or a client-error) answer.
  void RecordSuccess();
  // A request that failed for the upstream's sake. `may_eject`: false when
  // ejecting would leave the pool without a routable upstream. Returns
  // true when this failure ejected it.
  bool RecordFailure(int64_t now_ns, bool may_eject);
  // 429/503 with Retry-After.
  void RecordBackoff(int64_t now_ns, int64_t retry_after_ms);

  // When its latest return began (the later of its last probe comeback
  // and the end of its last ejection); 0: it never came back.
  int64_t returned_at_ns() const {
    return returned_ns_ > ejected_until_ns_ ? returned_ns_ : ejected_until_ns_;
  }
  // The share of its weight at `now_ns` under a slow start of `window_ms`
  // (0: off): kSlowStartMinFraction at its return, rising linearly to 1 at
  // return + window; 1 outside a ramp.
  double SlowStartFactor(int64_t now_ns, int64_t window_ms) const;

  int consecutive_failures() const { return failures_; }
  int ejection_level() const { return level_; }

 private:
  HealthOptions options_;
  bool probe_up_;
  bool ever_up_;             // probes passed once (or none run)
  int64_t returned_ns_ = 0;  // last probe comeback
  int probe_ok_streak_ = 0;
  int probe_fail_streak_ = 0;
  int failures_ = 0;
  int level_ = 0;  // recent ejections (the exponent)
  int64_t ejected_until_ns_ = 0;
  int64_t backoff_until_ns_ = 0;
};

}  // namespace redline::gateway

#endif  // REDLINE_GATEWAY_UPSTREAM_HEALTH_H_
