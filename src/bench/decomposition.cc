#include "bench/decomposition.h"

#include <algorithm>
#include <cmath>

#include "bench/metrics.h"

namespace redline::bench {

namespace {

constexpr std::array<double, 3> kPercentiles = {50, 95, 99};

double Ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

// End of the request's E2E (metrics.h): the last content chunk when
// streamed and any arrived, else the end of the response.
int64_t E2eEndNs(const RequestRecord& r) {
  return r.streamed && !r.chunk_ns.empty() ? r.t_last_ns : r.t_end_ns;
}

bool Measured(const RequestRecord& r) {
  return r.phase == Phase::kMeasure && r.ok() && r.sent();
}

// 0-based nearest rank of percentile q among n sorted values.
size_t NearestRank(double q, size_t n) {
  const double k = std::ceil(q / 100.0 * static_cast<double>(n));
  return static_cast<size_t>(
      std::clamp<double>(k - 1, 0, static_cast<double>(n - 1)));
}

}  // namespace

std::string_view PartKey(Part part) {
  switch (part) {
    case Part::kClient:
      return "client";
    case Part::kNetwork:
      return "network";
    case Part::kGateway:
      return "gateway";
    case Part::kQueue:
      return "queue";
    case Part::kPrefill:
      return "prefill";
    case Part::kDecode:
      return "decode";
  }
  return "?";
}

std::optional<RequestDecomposition> Decompose(const RequestRecord& r) {
  if (!r.ok() || !r.sent() || !r.has_server_timing()) return std::nullopt;
  RequestDecomposition d;
  d.request_id = r.id;
  const int64_t sched = r.t_sched_ns != 0 ? r.t_sched_ns : r.t_send_ns;
  const double client = Ms(r.t_send_ns - sched);
  d.e2e_ms = Ms(E2eEndNs(r) - r.t_send_ns);
  d.total_ms = client + d.e2e_ms;
  auto& p = d.part_ms;
  p[static_cast<int>(Part::kClient)] = client;
  p[static_cast<int>(Part::kGateway)] = std::max(0.0, r.gateway_ms);
  p[static_cast<int>(Part::kQueue)] = std::max(0.0, r.server_queue_ms);
  p[static_cast<int>(Part::kPrefill)] = r.server_prefill_ms;
  p[static_cast<int>(Part::kDecode)] = r.server_decode_ms;
  // The remainder, so the parts add up to the client's own measurement.
  // It is what neither side times: the wire both ways, the server's parsing
  // and writing, a proxy without Server-Timing. A server whose clock runs
  // ahead of ours (or that counts time after the last chunk we use as the
  // end) can make it slightly negative; it is kept signed so the sum holds.
  p[static_cast<int>(Part::kNetwork)] =
      d.e2e_ms - p[static_cast<int>(Part::kGateway)] -
      p[static_cast<int>(Part::kQueue)] - p[static_cast<int>(Part::kPrefill)] -
      p[static_cast<int>(Part::kDecode)];
  return d;
}

Decomposition BuildDecomposition(std::span<const RequestRecord> records,
                                 int64_t start_ns, double bucket_s) {
  Decomposition out;
  std::vector<std::pair<RequestDecomposition, int64_t>> rows;  // end time
  for (const RequestRecord& r : records) {
    if (!Measured(r)) continue;
    out.ok_requests++;
    std::optional<RequestDecomposition> d = Decompose(r);
    if (!d) continue;
    out.has_gateway |= r.gateway_ms >= 0;
    double sum = 0;
    for (double v : d->part_ms) sum += v;
    const int64_t sched = r.t_sched_ns != 0 ? r.t_sched_ns : r.t_send_ns;
    out.max_sum_error_ms =
        std::max(out.max_sum_error_ms, std::abs(sum - Ms(E2eEndNs(r) - sched)));
    rows.emplace_back(std::move(*d), r.t_end_ns);
  }
  out.decomposed = static_cast<int64_t>(rows.size());
  if (rows.empty()) return out;
  for (const auto& [d, end] : rows) {
    for (int i = 0; i < kNumParts; ++i) out.mean_ms[i] += d.part_ms[i];
    out.mean_total_ms += d.total_ms;
  }
  const double n = static_cast<double>(rows.size());
  for (double& v : out.mean_ms) v /= n;
  out.mean_total_ms /= n;

  // Percentiles of the total: ranking by E2E alone would hide the client's
  // lateness, which happens before t_send.
  std::vector<size_t> order(rows.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return rows[a].first.total_ms < rows[b].first.total_ms;
  });
  const size_t half = static_cast<size_t>(n * 0.005);
  for (double q : kPercentiles) {
    DecompositionAt at;
    at.percentile = q;
    const size_t k = NearestRank(q, rows.size());
    at.rank_total_ms = rows[order[k]].first.total_ms;
    const size_t lo = k >= half ? k - half : 0;
    const size_t hi = std::min(rows.size() - 1, k + half);
    for (size_t j = lo; j <= hi; ++j) {
      const RequestDecomposition& d = rows[order[j]].first;
      for (int i = 0; i < kNumParts; ++i) at.part_ms[i] += d.part_ms[i];
      at.total_ms += d.total_ms;
      at.e2e_ms += d.e2e_ms;
      at.requests++;
    }
    for (double& v : at.part_ms) v /= static_cast<double>(at.requests);
    at.total_ms /= static_cast<double>(at.requests);
    at.e2e_ms /= static_cast<double>(at.requests);
    at.dominant = kAllParts[static_cast<size_t>(
        std::max_element(at.part_ms.begin(), at.part_ms.end()) -
        at.part_ms.begin())];
    out.at.push_back(at);
  }

  // Over time, by the bucket each request finished in (as the report's
  // latency series).
  DecompositionSeries& s = out.series;
  s.bucket_s = bucket_s > 0 ? bucket_s : 1;
  int64_t last_end = start_ns;
  for (const auto& [d, end] : rows) last_end = std::max(last_end, end);
  const int64_t bucket_ns = std::max<int64_t>(
      1, static_cast<int64_t>(std::llround(s.bucket_s * 1e9)));
  const size_t buckets =
      static_cast<size_t>(std::max<int64_t>(0, last_end - start_ns) /
                          bucket_ns) +
      1;
  s.t_s.resize(buckets);
  s.requests.assign(buckets, 0);
  for (auto& v : s.part_ms) v.assign(buckets, 0);
  for (size_t b = 0; b < buckets; ++b)
    s.t_s[b] = static_cast<double>(b) * s.bucket_s;
  for (const auto& [d, end] : rows) {
    const size_t b =
        end <= start_ns
            ? 0
            : std::min(buckets - 1,
                       static_cast<size_t>((end - start_ns) / bucket_ns));
    s.requests[b]++;
    for (int i = 0; i < kNumParts; ++i) s.part_ms[i][b] += d.part_ms[i];
  }
  for (size_t b = 0; b < buckets; ++b) {
    for (auto& v : s.part_ms) {
      v[b] = s.requests[b] > 0 ? v[b] / static_cast<double>(s.requests[b])
                               : std::nan("");
    }
  }
  return out;
}

TraceIds BuildTraceIds(std::span<const RequestRecord> records, int64_t start_ns,
                       size_t slowest) {
  TraceIds out;
  std::vector<const RequestRecord*> ok;
  for (const RequestRecord& r : records) {
    if (r.phase == Phase::kMeasure && !r.trace_id.empty()) out.sent = true;
    if (Measured(r)) ok.push_back(&r);
  }
  if (ok.empty()) return out;
  auto e2e_ns = [](const RequestRecord* r) {
    return E2eEndNs(*r) - r->t_send_ns;
  };
  std::stable_sort(ok.begin(), ok.end(),
                   [&](const RequestRecord* a, const RequestRecord* b) {
                     return e2e_ns(a) < e2e_ns(b);
                   });
  auto traced = [&](const RequestRecord* r, std::string label) {
    TracedRequest t;
    t.label = std::move(label);
    t.request_id = r->id;
    t.trace_id = r->trace_id;
    t.e2e_ms = Ms(e2e_ns(r));
    if (r->streamed && !r->chunk_ns.empty())
      t.ttft_ms = Ms(r->t_first_ns - r->t_send_ns);
    t.t_s = static_cast<double>(r->t_send_ns - start_ns) / 1e9;
    t.parts = Decompose(*r);
    return t;
  };
  for (double q : kPercentiles) {
    out.percentile.push_back(traced(ok[NearestRank(q, ok.size())],
                                    "p" + std::to_string(static_cast<int>(q))));
  }
  for (size_t i = 0; i < std::min(slowest, ok.size()); ++i) {
    out.slowest.push_back(
        traced(ok[ok.size() - 1 - i], "slowest " + std::to_string(i + 1)));
  }
  return out;
}

}  // namespace redline::bench
