// Histogram: a high-dynamic-range histogram of non-negative integer values
// (bench records microseconds) with bounded relative error, fixed-size
// memory and exact count, sum, min and max.
//
// Layout (log-linear): values below 2048 get one bucket each (exact); above,
// each power-of-two range [2^k, 2^(k+1)) is split into 1024 equal buckets,
// so a bucket is never wider than 1/1024 of its lowest value: quantization
// <= 0.098 %, i.e. at least 3 significant decimal digits
// (docs/METRICS.md#percentiles). The trackable range is 0 .. 2^36-1 (about
// 19 hours in microseconds); larger values are clamped to the top and
// counted in `clamped()`.
//
// Percentiles use nearest rank without interpolation: p(q) is the highest
// value equivalent to the bucket that holds rank ceil(q/100 * n) (rank 1 for
// q = 0), the HdrHistogram convention, capped at the exact recorded maximum;
// it never under-reports.
//
// Error-adjusted views (docs/METRICS.md#error-adjusted-percentiles) add
// `extra_infinite` samples of +inf above every recorded value; see
// ValueAtPercentile().
//
// Thread-safety: thread-compatible. Cost: Record() is O(1) with no
// allocation once the bucket array has grown to cover the value (it grows on
// demand, at most 28,672 counters = 224 KiB); percentile queries are O(number
// of buckets).
#ifndef REDLINE_BENCH_HISTOGRAM_H_
#define REDLINE_BENCH_HISTOGRAM_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace redline::bench {

class Histogram {
 public:
  // 2048 exact values.
  static constexpr int kSubBucketBits = 11;
  static constexpr int64_t kSubBucketCount = int64_t{1} << kSubBucketBits;
  // 1024 per octave.
  static constexpr int64_t kSubBucketHalf = kSubBucketCount / 2;
  static constexpr int kMaxValueBits = 36;
  static constexpr int64_t kMaxValue = (int64_t{1} << kMaxValueBits) - 1;

  Histogram() = default;

  // Records `count` samples of `value` (negative values count as 0).
  void Record(int64_t value, int64_t count = 1);

  // Adds every sample of `other` (pooled percentiles across runs,
  // docs/METRICS.md#percentiles).
  void Merge(const Histogram& other);

  void Reset();

  int64_t count() const { return count_; }
  bool empty() const { return count_ == 0; }
  int64_t min() const { return count_ ? min_ : 0; }
  int64_t max() const { return count_ ? max_ : 0; }
  double sum() const { return sum_; }
  double mean() const {
    return count_ ? sum_ / static_cast<double>(count_) : 0.0;
  }
  int64_t clamped() const { return clamped_; }

  // Nearest-rank percentile, q in [0, 100], over count() recorded samples
  // plus `extra_infinite` samples of +inf ranked above them. Returns +inf
  // when the rank falls among the infinite samples, NaN when there are no
  // samples at all.
  double ValueAtPercentile(double q, int64_t extra_infinite = 0) const;

  // Fraction of recorded samples <= value (for CDF plots); 0 when empty.
  double FractionAtOrBelow(int64_t value) const;

  // Bucket arithmetic, exposed for tests.
  static int64_t IndexOf(int64_t value);
  static int64_t LowestEquivalent(int64_t index);
  static int64_t HighestEquivalent(int64_t index);

  // Calls fn(highest_equivalent_value, count) for each non-empty bucket in
  // increasing order.
  template <typename Fn>
  void ForEachBucket(Fn&& fn) const {
    for (size_t i = 0; i < counts_.size(); ++i) {
      if (counts_[i] != 0)
        fn(HighestEquivalent(static_cast<int64_t>(i)), counts_[i]);
    }
  }

 private:
  std::vector<int64_t> counts_;
  int64_t count_ = 0;
  int64_t min_ = std::numeric_limits<int64_t>::max();
  int64_t max_ = 0;
  double sum_ = 0;
  int64_t clamped_ = 0;
};

}  // namespace redline::bench

#endif  // REDLINE_BENCH_HISTOGRAM_H_
