// RetryBudget: caps retries and hedges of a pool to a share of its recent
// traffic (Finagle's and Envoy's retry budget), so an outage cannot
// multiply the load on the upstreams that are left: over a sliding window,
// extra attempts may be at most max(ratio x requests, min_per_s x window).
// The floor lets a quiet pool still retry a few requests.
//
// The window is `buckets` slots of window/buckets each, so old traffic
// leaves it in steps rather than all at once.
//
// Thread-safety: thread-compatible (the loop thread). Cost: O(buckets) per
// call, no allocation after construction.
#ifndef REDLINE_GATEWAY_RETRY_BUDGET_H_
#define REDLINE_GATEWAY_RETRY_BUDGET_H_

#include <cstdint>
#include <vector>

namespace redline::gateway {

struct RetryBudgetOptions {
  double ratio = 0.2;
  double min_per_s = 3;
  int64_t window_ms = 10'000;
};

class RetryBudget {
 public:
  explicit RetryBudget(const RetryBudgetOptions& options, int buckets = 10);

  // A new client request (not a retry).
  void RecordRequest(int64_t now_ns);
  // Takes one extra attempt from the budget; false when it is spent.
  bool TryAcquire(int64_t now_ns);

  // Over the current window.
  int64_t requests(int64_t now_ns);
  int64_t retries(int64_t now_ns);

 private:
  struct Bucket {
    int64_t slot = -1;  // which slot of time it holds
    int64_t requests = 0;
    int64_t retries = 0;
  };
  Bucket& Current(int64_t now_ns);
  void Sum(int64_t now_ns, int64_t* requests, int64_t* retries);

  RetryBudgetOptions options_;
  int64_t bucket_ns_;
  std::vector<Bucket> buckets_;
};

}  // namespace redline::gateway

#endif  // REDLINE_GATEWAY_RETRY_BUDGET_H_
