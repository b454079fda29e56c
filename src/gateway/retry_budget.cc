#include "gateway/retry_budget.h"

#include <algorithm>
#include <cmath>

namespace redline::gateway {

RetryBudget::RetryBudget(const RetryBudgetOptions& options, int buckets)
    : options_(options),
      bucket_ns_(std::max<int64_t>(options.window_ms, 1) * 1'000'000 /
                 std::max(buckets, 1)),
      buckets_(static_cast<size_t>(std::max(buckets, 1))) {
  if (bucket_ns_ <= 0) bucket_ns_ = 1;
}

RetryBudget::Bucket& RetryBudget::Current(int64_t now_ns) {
  const int64_t slot = now_ns / bucket_ns_;
  Bucket& b = buckets_[static_cast<size_t>(slot) % buckets_.size()];
  if (b.slot != slot) b = Bucket{slot, 0, 0};
  return b;
}

void RetryBudget::Sum(int64_t now_ns, int64_t* requests, int64_t* retries) {
  const int64_t slot = now_ns / bucket_ns_;
  const int64_t oldest = slot - static_cast<int64_t>(buckets_.size()) + 1;
  *requests = 0;
  *retries = 0;
  for (const Bucket& b : buckets_) {
    if (b.slot < oldest || b.slot > slot) continue;
    *requests += b.requests;
    *retries += b.retries;
  }
}

void RetryBudget::RecordRequest(int64_t now_ns) { Current(now_ns).requests++; }

bool RetryBudget::TryAcquire(int64_t now_ns) {
  int64_t req = 0, ret = 0;
  Sum(now_ns, &req, &ret);
  const double window_s = static_cast<double>(options_.window_ms) / 1e3;
  const double allowed = std::max(options_.ratio * static_cast<double>(req),
                                  options_.min_per_s * window_s);
  if (static_cast<double>(ret) + 1 > std::floor(allowed)) return false;
  Current(now_ns).retries++;
  return true;
}

int64_t RetryBudget::requests(int64_t now_ns) {
  int64_t req = 0, ret = 0;
  Sum(now_ns, &req, &ret);
  return req;
}

int64_t RetryBudget::retries(int64_t now_ns) {
  int64_t req = 0, ret = 0;
  Sum(now_ns, &req, &ret);
  return ret;
}

}  // namespace redline::gateway
