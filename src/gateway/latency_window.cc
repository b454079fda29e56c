#include "gateway/latency_window.h"

#include <algorithm>
#include <cmath>

namespace redline::gateway {

LatencyWindow::LatencyWindow(size_t capacity, size_t recompute_every)
    : ring_(std::max<size_t>(capacity, 1), 0),
      recompute_every_(std::max<size_t>(recompute_every, 1)) {}

void LatencyWindow::Add(double ms) {
  ring_[next_] = ms;
  next_ = (next_ + 1) % ring_.size();
  filled_ = std::min(filled_ + 1, ring_.size());
  ++since_recompute_;
}

double LatencyWindow::Quantile(double q, size_t min_samples) {
  if (filled_ == 0 || filled_ < min_samples) return 0;
  if (q == cached_q_ && since_recompute_ < recompute_every_) return cached_;
  scratch_.assign(ring_.begin(),
                  ring_.begin() + static_cast<std::ptrdiff_t>(filled_));
  // Nearest rank: the smallest sample with at least q of them at or below.
  const double rank =
      std::ceil(std::clamp(q, 0.0, 1.0) * static_cast<double>(filled_));
  const size_t k =
      std::min(filled_ - 1, static_cast<size_t>(std::max(rank, 1.0)) - 1);
  std::nth_element(scratch_.begin(),
                   scratch_.begin() + static_cast<std::ptrdiff_t>(k),
                   scratch_.end());
  cached_ = scratch_[k];
  cached_q_ = q;
  since_recompute_ = 0;
  return cached_;
}

}  // namespace redline::gateway
