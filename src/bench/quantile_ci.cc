#include "bench/quantile_ci.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <vector>

namespace redline::bench {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Geyer's tau below this is read as independent samples: the batch-means
// bound, noisy with its three degrees of freedom, would only widen them.
constexpr double kCorrelationGate = 2;

// P(B = k) for B ~ Binomial(n, q), for k in [k0, k1].
std::vector<double> BinomialPmf(int64_t n, double q, int64_t k0, int64_t k1) {
  std::vector<double> pmf(static_cast<size_t>(k1 - k0 + 1));
  const double lq = std::log(q), l1q = std::log1p(-q);
  const double lgn = std::lgamma(static_cast<double>(n) + 1);
  for (int64_t k = k0; k <= k1; ++k) {
    const double kd = static_cast<double>(k);
    const double nk = static_cast<double>(n - k);
    pmf[static_cast<size_t>(k - k0)] = std::exp(
        lgn - std::lgamma(kd + 1) - std::lgamma(nk + 1) + kd * lq + nk * l1q);
  }
  return pmf;
}

// Value of 1-based rank `rank` in a histogram with `inf` samples above.
double HistValueAtRank(const Histogram& h, int64_t inf, int64_t rank) {
  if (rank <= 0) return -kInf;
  if (rank > h.count() + inf) return kInf;
  if (rank > h.count()) return kInf;
  int64_t seen = 0;
  double out = static_cast<double>(h.max());
  bool found = false;
  h.ForEachBucket([&](int64_t value, int64_t count) {
    if (found) return;
    seen += count;
    if (seen >= rank) {
      out = static_cast<double>(std::min(value, h.max()));
      found = true;
    }
  });
  return out;
}

// The standard normal's quantile at p in (0, 1), by bisection on erfc
// (60 halvings of [-40, 40] reach double precision).
double NormalQuantile(double p) {
  double lo = -40, hi = 40;
  for (int i = 0; i < 60; ++i) {
    const double mid = (lo + hi) / 2;
    (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

// Student's t quantile at p in [0.5, 1) with `df` degrees of freedom:
// bisection on its distribution function, whose density is integrated by
// Simpson's rule on [0, t], t <= 100 (smooth and bounded: 2000 panels
// are plenty; df >= 2 and p <= 0.9995 keep t below 32). The last answer
// is kept per thread: callers ask for one confidence level over and over.
double StudentTQuantile(double p, int df) {
  thread_local double last_p = -1, last_t = 0;
  thread_local int last_df = -1;
  if (p == last_p && df == last_df) return last_t;
  const double nu = df;
  const double norm =
      std::exp(std::lgamma((nu + 1) / 2) - std::lgamma(nu / 2)) /
      std::sqrt(nu * std::numbers::pi);
  auto density = [&](double x) {
    return norm * std::pow(1 + x * x / nu, -(nu + 1) / 2);
  };
  auto cdf = [&](double t) {
    constexpr int kPanels = 2000;
    const double h = t / kPanels;
    double sum = density(0) + density(t);
    for (int i = 1; i < kPanels; ++i) sum += density(i * h) * (i % 2 ? 4 : 2);
    return 0.5 + sum * h / 3;
  };
  double lo = 0, hi = 100;
  for (int i = 0; i < 50; ++i) {
    const double mid = (lo + hi) / 2;
    (cdf(mid) < p ? lo : hi) = mid;
  }
  last_p = p;
  last_df = df;
  last_t = (lo + hi) / 2;
  return last_t;
}

// Integrated autocorrelation time of the centred indicator x (variance
// sum `var`), Geyer's initial positive sequence up to lag n / 4.
double GeyerTau(const std::vector<double>& x, double var) {
  const int64_t n = static_cast<int64_t>(x.size());
  auto rho = [&](int64_t k) {
    double c = 0;
    for (int64_t i = 0; i + k < n; ++i)
      c += x[static_cast<size_t>(i)] * x[static_cast<size_t>(i + k)];
    return c / var;
  };
  double sum = 0;
  for (int64_t k = 1; k + 1 <= n / 4; k += 2) {
    const double pair = rho(k) + rho(k + 1);
    if (pair <= 0) break;
    sum += pair;
  }
  return std::max(1.0, 1 + 2 * sum);
}

// Batch-means estimate of the same tau from kBatches consecutive batches of
// the uncentred indicator (fraction p above the point overall), inflated
// by (t / z)^2 for the few degrees of freedom its variance rests on.
constexpr int kBatches = 4;
double BatchMeansTau(std::span<const double> in_send_order, double point,
                     double confidence) {
  const int64_t n = static_cast<int64_t>(in_send_order.size());
  const int64_t size = n / kBatches;
  double fractions[kBatches];
  double p = 0;
  for (int b = 0; b < kBatches; ++b) {
    int64_t above = 0;
    for (int64_t i = b * size; i < (b + 1) * size; ++i)
      above += in_send_order[static_cast<size_t>(i)] > point;
    fractions[b] = static_cast<double>(above) / static_cast<double>(size);
    p += fractions[b];
  }
  p /= kBatches;
  if (p <= 0 || p >= 1) return 1;
  double spread = 0;
  for (double f : fractions) spread += (f - p) * (f - p);
  spread /= kBatches - 1;
  const double tau = spread * static_cast<double>(size) / (p * (1 - p));
  const double level = 1 - (1 - confidence) / 2;
  const double inflation =
      StudentTQuantile(level, kBatches - 1) / NormalQuantile(level);
  return std::max(1.0, tau * inflation * inflation);
}

int64_t NearestRank(int64_t n, double q) {
  return std::clamp<int64_t>(
      static_cast<int64_t>(std::ceil(q * static_cast<double>(n) - 1e-9)), 1, n);
}

}  // namespace

RankInterval QuantileRankInterval(int64_t n, double q, double confidence) {
  RankInterval r{0, n + 1};
  if (n <= 0 || q <= 0 || q >= 1) return r;
  const double tail = (1 - confidence) / 2;
  // Only the terms within 15 sd (+10) of the mean carry mass above 1e-25;
  // outside that window the tails are taken as 0, which keeps the cost
  // O(sqrt(n)) for large samples (ITL has one sample per chunk).
  const double nd = static_cast<double>(n);
  const double sd = std::sqrt(nd * q * (1 - q));
  const int64_t k0 =
      std::max<int64_t>(0, static_cast<int64_t>(nd * q - 15 * sd) - 10);
  const int64_t k1 =
      std::min<int64_t>(n, static_cast<int64_t>(nd * q + 15 * sd) + 10);
  const std::vector<double> pmf = BinomialPmf(n, q, k0, k1);
  auto at = [&](int64_t k) { return pmf[static_cast<size_t>(k - k0)]; };
  // Lower: the largest l with P(B <= l-1) <= tail (0 below the window).
  r.lower = std::max<int64_t>(0, k0);
  double cdf = 0;
  for (int64_t l = std::max<int64_t>(1, k0 + 1); l <= n; ++l) {
    if (l - 1 >= k0 && l - 1 <= k1) cdf += at(l - 1);
    if (cdf > tail) break;
    r.lower = l;
  }
  // Upper: the smallest u with P(B >= u) <= tail (0 above the window).
  r.upper = std::min<int64_t>(n + 1, k1 + 1);
  double upper_tail = 0;
  for (int64_t u = std::min(n, k1); u >= 1; --u) {
    upper_tail += at(u);
    if (upper_tail > tail) break;
    r.upper = u;
  }
  return r;
}

int64_t SamplesForUpperBound(double q, double confidence) {
  if (q <= 0) return 1;
  if (q >= 1) return std::numeric_limits<int64_t>::max();
  const double tail = (1 - confidence) / 2;
  return static_cast<int64_t>(std::ceil(std::log(tail) / std::log(q) - 1e-9));
}

QuantileEstimate EstimateQuantile(std::span<const double> sorted, double q,
                                  double confidence) {
  QuantileEstimate e;
  e.n = static_cast<int64_t>(sorted.size());
  if (e.n == 0) {
    e.point = e.lower = e.upper = std::nan("");
    return e;
  }
  const RankInterval r = QuantileRankInterval(e.n, q, confidence);
  auto at = [&](int64_t rank) {
    if (rank <= 0) return -kInf;
    if (rank > e.n) return kInf;
    return sorted[static_cast<size_t>(rank - 1)];
  };
  e.point = at(NearestRank(e.n, q));
  e.lower = at(r.lower);
  e.upper = at(r.upper);
  return e;
}

QuantileEstimate EstimateQuantile(const Histogram& h, int64_t extra_infinite,
                                  double q, double confidence) {
  QuantileEstimate e;
  e.n = h.count() + extra_infinite;
  if (e.n == 0) {
    e.point = e.lower = e.upper = std::nan("");
    return e;
  }
  const RankInterval r = QuantileRankInterval(e.n, q, confidence);
  e.point = HistValueAtRank(h, extra_infinite, NearestRank(e.n, q));
  e.lower = HistValueAtRank(h, extra_infinite, r.lower);
  e.upper = HistValueAtRank(h, extra_infinite, r.upper);
  return e;
}

CorrelatedEstimate WidenForCorrelation(const QuantileEstimate& e,
                                       std::span<const double> in_send_order,
                                       double q, double confidence) {
  CorrelatedEstimate out;
  out.estimate = e;
  const int64_t n = static_cast<int64_t>(in_send_order.size());
  out.effective_n = n;
  if (n < 8 || q <= 0 || q >= 1 || !std::isfinite(e.point)) return out;
  // The indicator sequence, centred.
  std::vector<double> x(static_cast<size_t>(n));
  double mean = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[static_cast<size_t>(i)] = in_send_order[static_cast<size_t>(i)] > e.point;
    mean += x[static_cast<size_t>(i)];
  }
  mean /= static_cast<double>(n);
  double var = 0;
  for (double& v : x) {
    v -= mean;
    var += v * v;
  }
  if (var <= 0) return out;  // every sample on one side: nothing to learn
  out.tau = GeyerTau(x, var);
  // In a window only a few relaxation times long, Geyer's sum stops at the
  // first noisy negative pair and reads tau several times too low (the
  // M/D/c windows in the test: about 45 for a true 170, coverage 73 %).
  // Where it already sees correlation, four batch means with Student's t
  // bound tau from the slow component it misses.
  if (out.tau >= kCorrelationGate)
    out.tau =
        std::max(out.tau, BatchMeansTau(in_send_order, e.point, confidence));
  out.effective_n = std::max<int64_t>(
      1, static_cast<int64_t>(static_cast<double>(n) / out.tau));
  if (out.effective_n >= n) return out;
  const RankInterval r = QuantileRankInterval(out.effective_n, q, confidence);
  const double scale =
      static_cast<double>(n) / static_cast<double>(out.effective_n);
  std::vector<double> sorted(in_send_order.begin(), in_send_order.end());
  std::sort(sorted.begin(), sorted.end());
  double lower = -kInf, upper = kInf;
  if (r.lower > 0) {
    const auto rank = std::max<int64_t>(
        1,
        static_cast<int64_t>(std::floor(static_cast<double>(r.lower) * scale)));
    lower = sorted[static_cast<size_t>(std::min(rank, n) - 1)];
  }
  if (r.upper <= out.effective_n) {
    const auto rank =
        static_cast<int64_t>(std::ceil(static_cast<double>(r.upper) * scale));
    if (rank <= n) upper = sorted[static_cast<size_t>(rank - 1)];
  }
  out.estimate.lower = std::min(e.lower, lower);
  out.estimate.upper = std::max(e.upper, upper);
  return out;
}

}  // namespace redline::bench
