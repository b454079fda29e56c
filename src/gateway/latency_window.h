// LatencyWindow: the last N samples of a latency (a pool's TTFT), for the
// quantile hedge_after: p95 waits for. Recomputed every `recompute_every`
// samples rather than per request.
//
// Thread-safety: thread-compatible (the loop thread). Memory: N doubles
// twice. Cost: O(N) per recompute (nth_element), O(1) otherwise.
#ifndef REDLINE_GATEWAY_LATENCY_WINDOW_H_
#define REDLINE_GATEWAY_LATENCY_WINDOW_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace redline::gateway {

class LatencyWindow {
 public:
  explicit LatencyWindow(size_t capacity = 512, size_t recompute_every = 32);

  void Add(double ms);
  // The q-quantile (0..1) of the window, or 0 with fewer than
  // `min_samples` samples.
  double Quantile(double q, size_t min_samples = 32);
  size_t size() const { return filled_; }

 private:
  std::vector<double> ring_;
  std::vector<double> scratch_;
  size_t next_ = 0;
  size_t filled_ = 0;
  size_t since_recompute_ = 0;
  size_t recompute_every_;
  double cached_q_ = -1;
  double cached_ = 0;
};

}  // namespace redline::gateway

#endif  // REDLINE_GATEWAY_LATENCY_WINDOW_H_
