#include "bench/histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace redline::bench {

int64_t Histogram::IndexOf(int64_t value) {
  if (value < kSubBucketCount) return value;
  // value = top << shift with top in [1024, 2048).
  const int shift =
      static_cast<int>(std::bit_width(static_cast<uint64_t>(value))) -
      kSubBucketBits;
  const int64_t top = value >> shift;
  return kSubBucketHalf * (shift + 1) + (top - kSubBucketHalf);
}

int64_t Histogram::LowestEquivalent(int64_t index) {
  if (index < kSubBucketCount) return index;
  const int64_t shift = index / kSubBucketHalf - 1;
  const int64_t top = index % kSubBucketHalf + kSubBucketHalf;
  return top << shift;
}

int64_t Histogram::HighestEquivalent(int64_t index) {
  if (index < kSubBucketCount) return index;
  const int64_t shift = index / kSubBucketHalf - 1;
  const int64_t top = index % kSubBucketHalf + kSubBucketHalf;
  return ((top + 1) << shift) - 1;
}

void Histogram::Record(int64_t value, int64_t count) {
  if (count <= 0) return;
  if (value < 0) value = 0;
  if (value > kMaxValue) {
    value = kMaxValue;
    clamped_ += count;
  }
  const size_t index = static_cast<size_t>(IndexOf(value));
  if (index >= counts_.size()) counts_.resize(index + 1, 0);
  counts_[index] += count;
  count_ += count;
  sum_ += static_cast<double>(value) * static_cast<double>(count);
  min_ = std::min(min_, value);
  max_ = std::max(max_, value);
}

void Histogram::Merge(const Histogram& other) {
  if (other.count_ == 0) return;
  if (other.counts_.size() > counts_.size())
    counts_.resize(other.counts_.size(), 0);
  for (size_t i = 0; i < other.counts_.size(); ++i)
    counts_[i] += other.counts_[i];
  count_ += other.count_;
  sum_ += other.sum_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
  clamped_ += other.clamped_;
}

void Histogram::Reset() { *this = Histogram(); }

double Histogram::ValueAtPercentile(double q, int64_t extra_infinite) const {
  const int64_t n = count_ + std::max<int64_t>(extra_infinite, 0);
  if (n == 0) return std::nan("");
  q = std::clamp(q, 0.0, 100.0);
  // ceil(q/100 * n) computed so that exact products (q=50, n=10) do not round
  // up.
  const long double exact =
      static_cast<long double>(q) / 100.0L * static_cast<long double>(n);
  int64_t rank = static_cast<int64_t>(std::ceil(exact - 1e-9L));
  rank = std::clamp<int64_t>(rank, 1, n);
  if (rank > count_) return std::numeric_limits<double>::infinity();
  int64_t seen = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    seen += counts_[i];
    if (seen >= rank) {
      // The bucket's highest equivalent value, but never above the largest
      // recorded sample (still >= the true nearest-rank value).
      return static_cast<double>(
          std::min(HighestEquivalent(static_cast<int64_t>(i)), max_));
    }
  }
  return static_cast<double>(max_);  // unreachable when counts are consistent
}

double Histogram::FractionAtOrBelow(int64_t value) const {
  if (count_ == 0) return 0;
  if (value < 0) return 0;
  const int64_t last = IndexOf(std::min(value, kMaxValue));
  int64_t seen = 0;
  for (int64_t i = 0; i <= last && i < static_cast<int64_t>(counts_.size());
       ++i)
    seen += counts_[static_cast<size_t>(i)];
  return static_cast<double>(seen) / static_cast<double>(count_);
}

}  // namespace redline::bench
