// Fills BottleneckInput from a run: bench's records (measurement phase), the
// decomposition, and the scraped /metrics series. Series are recognised by
// name suffix, so vLLM's (vllm:num_requests_waiting), Redline's
// (redline_num_requests_waiting) and the test server's names all match.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "bench/bottleneck.h"

namespace redline::bench {

namespace {

double Ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.substr(s.size() - suffix.size()) == suffix;
}

int64_t E2eEnd(const RequestRecord& r) {
  return r.streamed && !r.chunk_ns.empty() ? r.t_last_ns : r.t_end_ns;
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double k = std::ceil(q * static_cast<double>(v.size())) - 1;
  return v[static_cast<size_t>(
      std::clamp<double>(k, 0, static_cast<double>(v.size() - 1)))];
}

// The samples of a series inside the load window [0, span_s] (a scrape just
// before the start or after the end describes another load).
struct Samples {
  std::vector<double> t_s, value;
};
Samples InWindow(const ScrapeSeries& s, double span_s) {
  Samples out;
  for (size_t i = 0; i < s.t_s.size() && i < s.value.size(); ++i) {
    if (s.t_s[i] < -0.5 || s.t_s[i] > span_s + 0.5) continue;
    out.t_s.push_back(s.t_s[i]);
    out.value.push_back(s.value[i]);
  }
  return out;
}

const ScrapeSeries* Find(std::span<const ScrapeSeries> scrape,
                         std::string_view suffix) {
  for (const ScrapeSeries& s : scrape)
    if (EndsWith(s.name, suffix)) return &s;
  return nullptr;
}

const ScrapeSeries* FindContaining(std::span<const ScrapeSeries> scrape,
                                   std::string_view part) {
  for (const ScrapeSeries& s : scrape)
    if (s.name.find(part) != std::string::npos) return &s;
  return nullptr;
}

// The value at `t` of a series sampled by the same scrapes (nearest time).
double At(const Samples& s, double t) {
  if (s.t_s.empty()) return std::nan("");
  size_t best = 0;
  for (size_t i = 1; i < s.t_s.size(); ++i)
    if (std::abs(s.t_s[i] - t) < std::abs(s.t_s[best] - t)) best = i;
  return s.value[best];
}

double Mean(const std::vector<double>& v) {
  if (v.empty()) return std::nan("");
  double sum = 0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

// num_slots="4" in cache_config_info's labels, or -1.
double SlotsFromLabels(std::span<const ScrapeSeries> scrape) {
  for (const ScrapeSeries& s : scrape) {
    const size_t at = s.labels.find("num_slots=\"");
    if (at == std::string::npos) continue;
    return std::atof(s.labels.c_str() + at + 11);
  }
  return -1;
}

void FromScrape(std::span<const ScrapeSeries> scrape, double span_s,
                BottleneckInput& in) {
  in.scraped = !scrape.empty();
  if (!in.scraped) return;
  const ScrapeSeries* waiting = Find(scrape, "num_requests_waiting");
  const ScrapeSeries* running = Find(scrape, "num_requests_running");
  if (waiting && running) {
    const Samples w = InWindow(*waiting, span_s),
                  r = InWindow(*running, span_s);
    if (!w.value.empty() && !r.value.empty()) {
      in.waiting_max = *std::max_element(w.value.begin(), w.value.end());
      in.running_max = *std::max_element(r.value.begin(), r.value.end());
      in.slot_limit = SlotsFromLabels(scrape);
      if (in.slot_limit <= 0) in.slot_limit = in.running_max;
      int64_t full = 0;
      for (size_t i = 0; i < w.value.size(); ++i) {
        if (w.value[i] > 0 && At(r, w.t_s[i]) >= in.slot_limit) full++;
      }
      in.waiting_at_limit =
          static_cast<double>(full) / static_cast<double>(w.value.size());
    }
  }
  if (const ScrapeSeries* kv = FindContaining(scrape, "kv_cache_usage")) {
    const Samples s = InWindow(*kv, span_s);
    if (!s.value.empty()) {
      double m = *std::max_element(s.value.begin(), s.value.end());
      if (m > 1.5) m /= 100;  // a percentage
      in.kv_usage_max = m;
    }
  }
  if (const ScrapeSeries* p = FindContaining(scrape, "preempt")) {
    const Samples s = InWindow(*p, span_s);
    if (s.value.size() >= 2) in.preemptions = s.value.back() - s.value.front();
  }
  if (const ScrapeSeries* c = Find(scrape, "system_cpu_utilization"))
    in.system_cpu = Mean(InWindow(*c, span_s).value);
  if (const ScrapeSeries* c = Find(scrape, "process_cpu_utilization"))
    in.process_cpu = Mean(InWindow(*c, span_s).value);
  const ScrapeSeries* used = Find(scrape, "memory_used_bytes");
  const ScrapeSeries* limit = Find(scrape, "memory_limit_bytes");
  if (used && limit) {
    const Samples u = InWindow(*used, span_s), l = InWindow(*limit, span_s);
    double worst = std::nan("");
    for (size_t i = 0; i < u.value.size(); ++i) {
      const double lim = At(l, u.t_s[i]);
      if (lim > 0)
        worst = std::isnan(worst) ? u.value[i] / lim
                                  : std::max(worst, u.value[i] / lim);
    }
    in.memory_used_fraction = worst;
  }
  if (const ScrapeSeries* sw = Find(scrape, "swap_in_pages_total")) {
    const Samples s = InWindow(*sw, span_s);
    if (s.value.size() >= 2 && s.t_s.back() > s.t_s.front())
      in.swap_in_pages_per_s =
          (s.value.back() - s.value.front()) / (s.t_s.back() - s.t_s.front());
  }
}

// Requests in flight at each measured request's send time, and its mean
// inter-token latency: does decoding slow down as concurrency grows?
void ItlVsConcurrency(const RunResult& run, BottleneckInput& in) {
  std::vector<int64_t> sends, ends;
  for (const RequestRecord& r : run.records) {
    if (!r.sent()) continue;
    sends.push_back(r.t_send_ns);
    ends.push_back(r.t_end_ns);
  }
  std::sort(sends.begin(), sends.end());
  std::sort(ends.begin(), ends.end());
  std::vector<std::pair<double, double>> pairs;  // (concurrency, itl ms)
  for (const RequestRecord& r : run.records) {
    if (r.phase != Phase::kMeasure || !r.ok() || r.chunk_ns.size() < 2)
      continue;
    const int64_t t = r.t_send_ns;
    const auto started =
        std::upper_bound(sends.begin(), sends.end(), t) - sends.begin();
    const auto ended =
        std::upper_bound(ends.begin(), ends.end(), t) - ends.begin();
    const double itl = Ms(r.chunk_ns.back() - r.chunk_ns.front()) /
                       static_cast<double>(r.chunk_ns.size() - 1);
    pairs.emplace_back(static_cast<double>(started - ended), itl);
  }
  std::vector<double> c, itl;
  for (const auto& [a, b] : pairs) {
    c.push_back(a);
    itl.push_back(b);
  }
  in.itl_concurrency_corr = SpearmanCorrelation(c, itl);
  if (pairs.size() < 8) return;
  std::sort(pairs.begin(), pairs.end());
  const size_t q = pairs.size() / 4;
  double c_lo = 0, c_hi = 0, i_lo = 0, i_hi = 0;
  for (size_t i = 0; i < q; ++i) {
    c_lo += pairs[i].first;
    i_lo += pairs[i].second;
    c_hi += pairs[pairs.size() - 1 - i].first;
    i_hi += pairs[pairs.size() - 1 - i].second;
  }
  if (c_hi > c_lo && i_lo > 0) in.itl_growth = i_hi / i_lo;
}

}  // namespace

BottleneckInput GatherBottleneckInput(const RunResult& run,
                                      const Decomposition& decomposition,
                                      std::span<const ScrapeSeries> scrape,
                                      int max_connections) {
  BottleneckInput in;
  in.max_connections = max_connections;
  if (run.wall_seconds > 0.5)
    in.client_cpu = run.cpu_seconds / run.wall_seconds;
  std::vector<double> e2e, dispatch, prompt, first;
  // (E2E, dispatch) of each ok request, for the client's share without
  // server timing.
  std::vector<std::pair<double, double>> client;
  int64_t last_end = run.start_ns;
  for (const RequestRecord& r : run.records) {
    if (r.phase != Phase::kMeasure) continue;
    last_end = std::max(last_end, r.t_end_ns);
    if (r.http_status == 429) in.http_429++;
    if (r.sent() && r.t_sched_ns != 0)
      dispatch.push_back(Ms(r.t_send_ns - r.t_sched_ns));
    if (!r.ok() || !r.sent()) continue;
    in.ok_requests++;
    const double e = Ms(E2eEnd(r) - r.t_send_ns);
    e2e.push_back(e);
    client.emplace_back(
        e, r.t_sched_ns != 0 ? Ms(r.t_send_ns - r.t_sched_ns) : 0.0);
    const int64_t tokens =
        r.prompt_tokens > 0 ? r.prompt_tokens : r.input_tokens_planned;
    double ttft = -1;
    if (r.has_server_timing()) {
      ttft = r.server_prefill_ms;
    } else if (r.streamed && !r.chunk_ns.empty()) {
      ttft = Ms(r.t_first_ns - r.t_send_ns);
    }
    if (tokens > 0 && ttft >= 0) {
      prompt.push_back(static_cast<double>(tokens));
      first.push_back(ttft);
    }
  }
  in.e2e_p50_ms = Quantile(e2e, 0.50);
  in.e2e_p99_ms = Quantile(e2e, 0.99);
  in.dispatch_p99_ms = Quantile(dispatch, 0.99);
  in.ttft_prompt_corr = SpearmanCorrelation(prompt, first);
  if (!prompt.empty()) {
    const auto [lo, hi] = std::minmax_element(prompt.begin(), prompt.end());
    in.prompt_spread = *hi / std::max(1.0, *lo);
  }
  ItlVsConcurrency(run, in);

  if (in.ok_requests > 0)
    in.timing_coverage = static_cast<double>(decomposition.decomposed) /
                         static_cast<double>(in.ok_requests);
  for (const DecompositionAt& at : decomposition.at) {
    PartArray* dst = at.percentile == 50   ? &in.share_p50
                     : at.percentile == 99 ? &in.share_p99
                                           : nullptr;
    if (!dst) continue;
    for (Part p : kAllParts) (*dst)[static_cast<int>(p)] = at.Share(p);
  }
  if (decomposition.decomposed == 0 && !client.empty()) {
    // Without server timing the client's own share is still known; ranked
    // by the total, as the decomposition is.
    std::sort(client.begin(), client.end(), [](const auto& a, const auto& b) {
      return a.first + a.second < b.first + b.second;
    });
    auto share = [&](double q) {
      const size_t k = static_cast<size_t>(std::clamp<double>(
          std::ceil(q * static_cast<double>(client.size())) - 1, 0,
          static_cast<double>(client.size() - 1)));
      const size_t half = client.size() / 200;
      double d = 0, t = 0;
      for (size_t j = k >= half ? k - half : 0;
           j <= std::min(client.size() - 1, k + half); ++j) {
        d += client[j].second;
        t += client[j].second + client[j].first;
      }
      return t > 0 ? d / t : 0;
    };
    in.share_p50[static_cast<int>(Part::kClient)] = share(0.50);
    in.share_p99[static_cast<int>(Part::kClient)] = share(0.99);
  }
  FromScrape(scrape, static_cast<double>(last_end - run.start_ns) / 1e9, in);
  return in;
}

}  // namespace redline::bench
