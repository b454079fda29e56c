#include "bench/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace redline::bench {

std::string_view MetricKey(Metric metric) {
  switch (metric) {
    case Metric::kTtft:
      return "ttft";
    case Metric::kTtfo:
      return "ttfo";
    case Metric::kTtftSched:
      return "ttft_sched";
    case Metric::kE2e:
      return "e2e";
    case Metric::kE2eStream:
      return "e2e_stream";
    case Metric::kE2eSched:
      return "e2e_sched";
    case Metric::kTpot:
      return "tpot";
    case Metric::kNtpot:
      return "ntpot";
    case Metric::kItl:
      return "itl";
    case Metric::kDispatchDelay:
      return "dispatch_delay";
  }
  return "?";
}

std::optional<Metric> MetricFromKey(std::string_view key) {
  for (Metric m : kAllMetrics) {
    if (MetricKey(m) == key) return m;
  }
  return std::nullopt;
}

bool MetricIsErrorAdjusted(Metric metric) {
  return metric != Metric::kItl && metric != Metric::kDispatchDelay;
}

void PhaseStats::RecordLatencies(const RequestRecord& r,
                                 const RequestLatencies& lat) {
  auto rec = [&](Metric m, const std::optional<int64_t>& v) {
    if (v) hist[static_cast<int>(m)].Record(*v);
  };
  rec(Metric::kDispatchDelay, lat.dispatch_delay_us);
  if (!r.ok()) return;
  rec(Metric::kTtft, lat.ttft_us);
  rec(Metric::kTtfo, lat.ttfo_us);
  rec(Metric::kTtftSched, lat.ttft_sched_us);
  rec(Metric::kE2e, lat.e2e_us);
  rec(Metric::kE2eStream, lat.e2e_stream_us);
  rec(Metric::kE2eSched, lat.e2e_sched_us);
  rec(Metric::kTpot, lat.tpot_us);
  rec(Metric::kNtpot, lat.ntpot_us);
  for (size_t j = 1; j < r.chunk_ns.size(); ++j) {
    hist[static_cast<int>(Metric::kItl)].Record(
        NsToUs(r.chunk_ns[j] - r.chunk_ns[j - 1]));
  }
}

RequestLatencies ComputeLatencies(const RequestRecord& r) {
  RequestLatencies lat;
  if (r.sent() && r.t_sched_ns != 0)
    lat.dispatch_delay_us = NsToUs(r.t_send_ns - r.t_sched_ns);
  if (!r.ok() || !r.sent()) return lat;
  const bool has_chunks = !r.chunk_ns.empty();
  if (r.streamed) {
    if (has_chunks) {
      lat.ttft_us = NsToUs(r.t_first_ns - r.t_send_ns);
      lat.ttft_sched_us = NsToUs(r.t_first_ns - r.t_sched_ns);
      if (r.t_first_output_ns != 0)
        lat.ttfo_us = NsToUs(r.t_first_output_ns - r.t_send_ns);
    }
    // E2E stops at c_last; a stream without any output falls back to t_end.
    const int64_t last = has_chunks ? r.t_last_ns : r.t_end_ns;
    lat.e2e_us = NsToUs(last - r.t_send_ns);
    lat.e2e_sched_us = NsToUs(last - r.t_sched_ns);
    lat.e2e_stream_us = NsToUs(r.t_end_ns - r.t_send_ns);
    const int64_t n = r.output_tokens;
    if (has_chunks && n >= 2) {
      // Kept in ns until the end to avoid compounding rounding.
      lat.tpot_us = NsToUs((r.t_last_ns - r.t_first_ns) / (n - 1));
    }
    if (n >= 1) lat.ntpot_us = NsToUs((last - r.t_send_ns) / n);
    if (r.chunk_ns.size() >= 2) {
      lat.mean_itl_us = NsToUs((r.chunk_ns.back() - r.chunk_ns.front()) /
                               static_cast<int64_t>(r.chunk_ns.size() - 1));
    }
  } else {
    lat.e2e_us = NsToUs(r.t_end_ns - r.t_send_ns);
    lat.e2e_stream_us = lat.e2e_us;
    lat.e2e_sched_us = NsToUs(r.t_end_ns - r.t_sched_ns);
    if (r.output_tokens >= 1)
      lat.ntpot_us = NsToUs((r.t_end_ns - r.t_send_ns) / r.output_tokens);
  }
  return lat;
}

bool IsGood(const RequestRecord& r, const RequestLatencies& lat,
            const GoodputSlo& slo) {
  if (!r.ok()) return false;
  if (slo.ttft_us && lat.ttft_us && *lat.ttft_us > slo.ttft_us) return false;
  if (slo.ttft_us && !lat.ttft_us && r.streamed && !r.chunk_ns.empty())
    return false;
  if (slo.tpot_us && lat.tpot_us && *lat.tpot_us > slo.tpot_us)
    return false;  // N <= 1 passes
  if (slo.e2e_us && lat.e2e_us && *lat.e2e_us > slo.e2e_us) return false;
  if (slo.itl_us && lat.mean_itl_us && *lat.mean_itl_us > slo.itl_us)
    return false;
  return true;
}

double PhaseStats::Percentile(Metric m, double q, bool adjusted) const {
  return Hist(m).ValueAtPercentile(q, adjusted ? Infinite(m) : 0);
}

double PhaseStats::Mean(Metric m, bool adjusted) const {
  const Histogram& h = Hist(m);
  if (adjusted && Infinite(m) > 0)
    return std::numeric_limits<double>::infinity();
  if (h.empty()) return std::nan("");
  return h.mean();
}

double PhaseStats::Min(Metric m, bool adjusted) const {
  const Histogram& h = Hist(m);
  if (h.empty()) {
    if (adjusted && Infinite(m) > 0)
      return std::numeric_limits<double>::infinity();
    return std::nan("");
  }
  return static_cast<double>(h.min());
}

double PhaseStats::Max(Metric m, bool adjusted) const {
  const Histogram& h = Hist(m);
  if (adjusted && Infinite(m) > 0)
    return std::numeric_limits<double>::infinity();
  if (h.empty()) return std::nan("");
  return static_cast<double>(h.max());
}

int64_t PhaseStats::ErrorCount(std::optional<ErrorClass> cls) const {
  if (!cls) return failed;
  return errors[static_cast<int>(*cls)];
}

double PhaseStats::ErrorRate(std::optional<ErrorClass> cls) const {
  if (attempted == 0) return 0;
  return static_cast<double>(ErrorCount(cls)) / static_cast<double>(attempted);
}

bool PhaseStats::MixedTokenSources() const {
  int kinds = 0;
  for (int64_t c : token_sources) kinds += c > 0;
  return kinds > 1;
}

PhaseStats ComputePhaseStats(std::span<const RequestRecord> records,
                             Phase phase, const GoodputSlo& slo,
                             int64_t planned) {
  PhaseStats s;
  s.phase = phase;
  std::map<std::string, int64_t> labels;
  int64_t first_send = 0, last_send = 0, last_end = 0, first_sched = 0,
          last_sched = 0;
  double busy_ns = 0;
  int64_t good_tokens = 0;
  for (const RequestRecord& r : records) {
    if (r.phase != phase) continue;
    s.attempted++;
    if (r.t_sched_ns != 0) {
      if (first_sched == 0 || r.t_sched_ns < first_sched)
        first_sched = r.t_sched_ns;
      last_sched = std::max(last_sched, r.t_sched_ns);
    }
    if (r.sent()) {
      s.sent++;
      if (first_send == 0 || r.t_send_ns < first_send) first_send = r.t_send_ns;
      last_send = std::max(last_send, r.t_send_ns);
      if (r.t_end_ns > r.t_send_ns)
        busy_ns += static_cast<double>(r.t_end_ns - r.t_send_ns);
    }
    const int64_t end = r.ok() && !r.chunk_ns.empty()
                            ? std::max(r.t_last_ns, r.t_end_ns)
                            : r.t_end_ns;
    last_end = std::max(last_end, end);

    RequestLatencies lat = ComputeLatencies(r);
    s.RecordLatencies(r, lat);
    if (!r.ok()) {
      s.failed++;
      s.errors[static_cast<int>(r.error)]++;
      if (r.error == ErrorClass::kTimeout) {
        (r.timeout == TimeoutKind::kIdle ? s.timeouts_idle
                                         : s.timeouts_total)++;
      }
      labels[r.FailureLabel()]++;
      continue;
    }
    s.ok++;
    if (r.output_tokens > 0) s.output_tokens += r.output_tokens;
    s.token_sources[static_cast<int>(r.token_source)]++;
    if (IsGood(r, lat, slo)) {
      s.good++;
      if (r.output_tokens > 0) good_tokens += r.output_tokens;
    }
  }
  s.planned = planned >= 0 ? planned : s.attempted;
  s.t_first_send_ns = first_send;
  s.t_last_end_ns = last_end;
  s.window_s = first_send != 0 && last_end > first_send
                   ? static_cast<double>(last_end - first_send) / 1e9
                   : 0;
  s.send_window_s = last_send > first_send
                        ? static_cast<double>(last_send - first_send) / 1e9
                        : 0;
  s.sched_window_s = last_sched > first_sched
                         ? static_cast<double>(last_sched - first_sched) / 1e9
                         : 0;
  if (s.window_s > 0) {
    s.offered_rps = static_cast<double>(s.planned) / s.window_s;
    s.completed_rps = static_cast<double>(s.ok) / s.window_s;
    s.output_tps = static_cast<double>(s.output_tokens) / s.window_s;
    s.goodput_rps = static_cast<double>(s.good) / s.window_s;
    s.token_goodput_tps = static_cast<double>(good_tokens) / s.window_s;
    s.mean_concurrency = busy_ns / (s.window_s * 1e9);
  }
  // (sends - 1) intervals over the send window: n sends span n-1 gaps.
  if (s.send_window_s > 0 && s.sent > 1)
    s.achieved_send_rps = static_cast<double>(s.sent - 1) / s.send_window_s;
  s.good_fraction = s.attempted ? static_cast<double>(s.good) /
                                      static_cast<double>(s.attempted)
                                : 0;

  // Peak output throughput: tokens by 1 s bucket of chunk arrival; a
  // request's N tokens are spread evenly over its chunks.
  if (first_send != 0 && s.window_s > 0) {
    std::vector<double> buckets(static_cast<size_t>(s.window_s) + 2, 0.0);
    for (const RequestRecord& r : records) {
      if (r.phase != phase || !r.ok() || r.output_tokens <= 0) continue;
      if (r.chunk_ns.empty()) {
        size_t b = static_cast<size_t>(
            std::max<int64_t>(0, r.t_end_ns - first_send) / 1'000'000'000);
        if (b < buckets.size())
          buckets[b] += static_cast<double>(r.output_tokens);
        continue;
      }
      const double per_chunk = static_cast<double>(r.output_tokens) /
                               static_cast<double>(r.chunk_ns.size());
      for (int64_t c : r.chunk_ns) {
        size_t b = static_cast<size_t>(std::max<int64_t>(0, c - first_send) /
                                       1'000'000'000);
        if (b < buckets.size()) buckets[b] += per_chunk;
      }
    }
    // A partial last bucket would under-report; only full seconds count
    // unless the whole window is shorter than one second.
    const size_t full = static_cast<size_t>(s.window_s);
    if (full == 0) {
      s.peak_output_tps = s.output_tps;
    } else {
      for (size_t b = 0; b < full && b < buckets.size(); ++b)
        s.peak_output_tps = std::max(s.peak_output_tps, buckets[b]);
    }
  }

  s.failure_labels.assign(labels.begin(), labels.end());
  std::stable_sort(
      s.failure_labels.begin(), s.failure_labels.end(),
      [](const auto& a, const auto& b) { return a.second > b.second; });
  return s;
}

}  // namespace redline::bench
