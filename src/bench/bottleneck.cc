// The rules of the bottleneck finder. Each rule looks at the signals of one
// cause and, when they cross its threshold, returns a finding whose score is
// the share of the tail latency the cause explains (0..1), or a fixed score
// for causes that are states rather than shares of time (memory, KV cache,
// CPU). The highest score is named; the rest are listed as also seen. The
// thresholds are documented in docs/OBSERVABILITY.md#the-bottleneck-finder.
#include "bench/bottleneck.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "bench/capacity.h"
#include "bench/report.h"
#include "bench/units.h"

namespace redline::bench {

namespace {

// Share of the p99 requests' time a part must reach to be a bottleneck.
constexpr double kClientShare = 0.20;
constexpr double kNetworkShare = 0.20;
constexpr double kGatewayShare = 0.20;
constexpr double kQueueShare = 0.20;
constexpr double kPrefillShare = 0.30;
constexpr double kDecodeShare = 0.30;
// Bench's own CPU (cores): one loop thread near full is a client limit.
constexpr double kClientCpu = 0.90;
// Fraction of scrape samples with requests waiting at the slot limit.
constexpr double kWaitingAtLimit = 0.20;
// Correlations that confirm prefill- and decode-bound behaviour.
constexpr double kPrefillCorr = 0.60;
constexpr double kPromptSpread = 2.0;
constexpr double kItlCorr = 0.50;
constexpr double kItlGrowth = 1.20;
constexpr double kConfirmBonus = 0.10;
// KV cache: usage near full, or high with refusals/preemptions.
constexpr double kKvFull = 0.95;
constexpr double kKvHigh = 0.80;
// CPU utilisation where scheduling delay starts to multiply.
constexpr double kCpuBusy = 0.75;
constexpr double kCpuSaturated = 0.90;
// Memory: used / limit, and swap-in pages per second.
constexpr double kMemoryFraction = 0.90;
constexpr double kSwapInPagesPerS = 10;

double Share(const PartArray& a, Part p) { return a[static_cast<int>(p)]; }

std::string Pct(double fraction) {
  return fmt::format("{:.0f} %", 100 * fraction);
}

std::string Ms(double ms) { return FormatUs(ms * 1000); }

bool Known(double v) { return !std::isnan(v); }

// "queue 12 % of p50 -> 71 % of p99": how a part grows into the tail.
std::string ShareLine(const BottleneckInput& in, Part p) {
  return fmt::format(
      "{} is {} of the time of the median request and {} at p99 "
      "(E2E p50 {}, p99 {})",
      PartKey(p), Pct(Share(in.share_p50, p)), Pct(Share(in.share_p99, p)),
      Ms(in.e2e_p50_ms), Ms(in.e2e_p99_ms));
}

bool HasTiming(const BottleneckInput& in) { return in.timing_coverage > 0; }

std::optional<Finding> MemoryRule(const BottleneckInput& in) {
  const bool swapping = Known(in.swap_in_pages_per_s) &&
                        in.swap_in_pages_per_s >= kSwapInPagesPerS;
  const bool near_limit = Known(in.memory_used_fraction) &&
                          in.memory_used_fraction >= kMemoryFraction;
  if (!swapping && !near_limit) return std::nullopt;
  Finding f;
  f.cause = Cause::kMemory;
  f.title = "memory pressure: the server is swapping or near its memory limit";
  f.score = 1.0;  // ahead of everything: a swapping server is slow at all
  if (swapping)
    f.evidence.push_back(fmt::format("swap-in {:.0f} pages/s during the run",
                                     in.swap_in_pages_per_s));
  if (near_limit)
    f.evidence.push_back(fmt::format("memory used reached {} of the limit",
                                     Pct(in.memory_used_fraction)));
  f.action =
      "give the server more memory, or need less: a smaller or quantized "
      "model, a smaller KV cache (fewer slots or a shorter context)";
  return f;
}

std::optional<Finding> KvRule(const BottleneckInput& in) {
  if (!Known(in.kv_usage_max)) return std::nullopt;
  const bool refusals = in.preemptions > 0 || in.http_429 > 0;
  double score = 0;
  if (in.kv_usage_max >= kKvFull) {
    // A full cache that turns requests away is the limit whatever the
    // shares say; full alone may just be a well-used cache.
    // (1: it outranks every share; a tie goes to the earlier cause.)
    score = refusals ? 1.0 : 0.8;
  } else if (in.kv_usage_max >= kKvHigh && refusals) {
    score = 0.75;
  }
  if (score == 0) return std::nullopt;
  Finding f;
  f.cause = Cause::kKvCache;
  f.title =
      "KV-cache bound: requests wait for, or are evicted from, cache space";
  f.score = score;
  f.evidence.push_back(
      fmt::format("KV-cache usage reached {}", Pct(in.kv_usage_max)));
  if (in.preemptions > 0)
    f.evidence.push_back(
        fmt::format("{:.0f} preemption(s) during the run", in.preemptions));
  if (in.http_429 > 0)
    f.evidence.push_back(
        fmt::format("{} request(s) refused with 429", in.http_429));
  f.action =
      "make room in the cache: fewer slots or a shorter context per slot, "
      "prefix caching for shared prompts, more memory, or more replicas";
  return f;
}

std::optional<Finding> ClientRule(const BottleneckInput& in) {
  const double share = Share(in.share_p99, Part::kClient);
  const bool cpu = in.client_cpu >= kClientCpu;
  if (share < kClientShare && !cpu) return std::nullopt;
  Finding f;
  f.cause = Cause::kClient;
  f.title = "the client: bench itself could not send on schedule";
  f.score = std::max(share, cpu ? 0.6 : 0.0);
  if (share >= kClientShare)
    f.evidence.push_back(fmt::format(
        "dispatch delay (scheduled -> sent) is {} of the p99 requests' time; "
        "dispatch delay p99 {}",
        Pct(share), Ms(in.dispatch_p99_ms)));
  if (cpu)
    f.evidence.push_back(
        fmt::format("bench used {} of a CPU (its loop runs on one thread)",
                    Pct(in.client_cpu)));
  if (in.max_connections > 0)
    f.evidence.push_back(fmt::format(
        "--max-connections {}: requests beyond it wait in the client",
        in.max_connections));
  f.action =
      "the numbers describe the client as much as the server: raise or drop "
      "--max-connections, give bench its own cores (--realtime), or split the "
      "load over several bench processes";
  return f;
}

std::optional<Finding> QueueRule(const BottleneckInput& in) {
  const double share = Share(in.share_p99, Part::kQueue);
  const bool full =
      Known(in.waiting_at_limit) && in.waiting_at_limit >= kWaitingAtLimit;
  double score = 0;
  if (share >= kQueueShare) {
    score = share + (full ? kConfirmBonus : 0);
  } else if (!HasTiming(in) && full) {
    score = 0.5;
  }
  if (score == 0) return std::nullopt;
  Finding f;
  f.cause = Cause::kQueueing;
  f.title = "queueing: requests wait for a free slot";
  f.score = std::min(1.0, score);
  if (HasTiming(in)) f.evidence.push_back(ShareLine(in, Part::kQueue));
  if (Known(in.waiting_at_limit))
    f.evidence.push_back(fmt::format(
        "requests were waiting while running sat at its limit ({:.0f}) in {} "
        "of the scrapes (waiting up to {:.0f})",
        in.slot_limit, Pct(in.waiting_at_limit), in.waiting_max));
  f.action =
      "add slots (--parallel) if memory and compute allow, or replicas; or "
      "offer less load per replica";
  return f;
}

std::optional<Finding> PrefillRule(const BottleneckInput& in) {
  const double share = Share(in.share_p99, Part::kPrefill);
  const bool grows = Known(in.ttft_prompt_corr) &&
                     in.ttft_prompt_corr >= kPrefillCorr &&
                     in.prompt_spread >= kPromptSpread;
  double score = 0;
  if (share >= kPrefillShare) {
    score = share + (grows ? kConfirmBonus : 0);
  } else if (!HasTiming(in) && grows) {
    score = 0.4;
  }
  if (score == 0) return std::nullopt;
  Finding f;
  f.cause = Cause::kPrefill;
  f.title = "prefill-bound: processing the prompt dominates";
  f.score = std::min(1.0, score);
  if (HasTiming(in)) f.evidence.push_back(ShareLine(in, Part::kPrefill));
  if (Known(in.ttft_prompt_corr))
    f.evidence.push_back(fmt::format(
        "TTFT grows with prompt length (rank correlation {:.2f}, prompts "
        "{:.1f}x apart)",
        in.ttft_prompt_corr, in.prompt_spread));
  f.action =
      "shorten the prefill: larger prefill chunks or batches, prefix caching "
      "for shared prefixes, shorter prompts or context";
  return f;
}

std::optional<Finding> DecodeRule(const BottleneckInput& in) {
  const double share = Share(in.share_p99, Part::kDecode);
  const bool grows = Known(in.itl_concurrency_corr) &&
                     in.itl_concurrency_corr >= kItlCorr &&
                     Known(in.itl_growth) && in.itl_growth >= kItlGrowth;
  double score = 0;
  if (share >= kDecodeShare) {
    score = share + (grows ? kConfirmBonus : 0);
  } else if (!HasTiming(in) && grows) {
    score = 0.4;
  }
  if (score == 0) return std::nullopt;
  Finding f;
  f.cause = Cause::kDecode;
  f.title = "decode-bound: generating the tokens dominates";
  f.score = std::min(1.0, score);
  if (HasTiming(in)) f.evidence.push_back(ShareLine(in, Part::kDecode));
  if (Known(in.itl_concurrency_corr))
    f.evidence.push_back(fmt::format(
        "inter-token latency vs requests in flight: rank correlation {:.2f}{}",
        in.itl_concurrency_corr,
        Known(in.itl_growth)
            ? fmt::format(", {:.2f}x from the lowest to the highest quarter",
                          in.itl_growth)
            : std::string()));
  f.action =
      "make each token cheaper or batch less: fewer concurrent sequences per "
      "replica, speculative decoding, a smaller or quantized model, more "
      "replicas";
  return f;
}

std::optional<Finding> ShareRule(const BottleneckInput& in, Part part,
                                 double threshold, Cause cause,
                                 std::string title, std::string action) {
  if (!HasTiming(in)) return std::nullopt;
  const double share = Share(in.share_p99, part);
  if (share < threshold) return std::nullopt;
  Finding f;
  f.cause = cause;
  f.title = std::move(title);
  f.score = share;
  f.evidence.push_back(ShareLine(in, part));
  f.action = std::move(action);
  return f;
}

std::optional<Finding> CpuRule(const BottleneckInput& in) {
  const double cpu = std::max(Known(in.system_cpu) ? in.system_cpu : 0,
                              Known(in.process_cpu) ? in.process_cpu : 0);
  if (cpu < kCpuBusy) return std::nullopt;
  Finding f;
  f.cause = Cause::kCpu;
  f.title = "CPU saturation on the server's machine";
  f.score = cpu >= kCpuSaturated ? 0.7 : 0.55;
  if (Known(in.system_cpu))
    f.evidence.push_back(
        fmt::format("machine CPU {} on average", Pct(in.system_cpu)));
  if (Known(in.process_cpu))
    f.evidence.push_back(
        fmt::format("server process CPU {} of all CPUs", Pct(in.process_cpu)));
  f.action =
      "near full CPU, scheduling delay multiplies every wait: give the server "
      "more cores, run fewer threads than cores, or move other work off the "
      "machine";
  return f;
}

}  // namespace

std::string_view CauseKey(Cause cause) {
  switch (cause) {
    case Cause::kMemory:
      return "memory";
    case Cause::kKvCache:
      return "kv_cache";
    case Cause::kClient:
      return "client";
    case Cause::kQueueing:
      return "queueing";
    case Cause::kPrefill:
      return "prefill";
    case Cause::kDecode:
      return "decode";
    case Cause::kNetwork:
      return "network";
    case Cause::kGateway:
      return "gateway";
    case Cause::kCpu:
      return "cpu";
    case Cause::kNone:
      return "none";
  }
  return "?";
}

BottleneckReport FindBottleneck(const BottleneckInput& in) {
  BottleneckReport out;
  if (!HasTiming(in))
    out.missing.push_back(
        "server timing (Server-Timing or `timings`): queue, prefill, decode "
        "and network cannot be told apart");
  if (!in.scraped)
    out.missing.push_back(
        "server metrics (--scrape URL): slots, KV cache, CPU and memory are "
        "not checked");
  std::vector<Finding> found;
  auto add = [&](std::optional<Finding> f) {
    if (f) found.push_back(std::move(*f));
  };
  add(MemoryRule(in));
  add(KvRule(in));
  add(ClientRule(in));
  add(QueueRule(in));
  add(PrefillRule(in));
  add(DecodeRule(in));
  add(ShareRule(in, Part::kNetwork, kNetworkShare, Cause::kNetwork,
                "network: time between bench and the server's own accounting",
                "look at the path between client and server: distance, "
                "proxies, TLS, connection reuse; measure from closer to the "
                "server"));
  add(ShareRule(in, Part::kGateway, kGatewayShare, Cause::kGateway,
                "the gateway: its own share of each request is large",
                "check the gateway's routing, cache lookups, retries and "
                "hedges (its trace spans show which)"));
  add(CpuRule(in));
  std::stable_sort(found.begin(), found.end(),
                   [](const Finding& a, const Finding& b) {
                     if (a.score != b.score) return a.score > b.score;
                     return a.cause < b.cause;
                   });
  if (found.empty()) {
    Finding none;
    none.cause = Cause::kNone;
    none.title = "no clear bottleneck";
    if (in.ok_requests == 0) {
      none.evidence.push_back("no successful request to analyse");
    } else if (HasTiming(in)) {
      const auto top =
          std::max_element(in.share_p99.begin(), in.share_p99.end()) -
          in.share_p99.begin();
      none.evidence.push_back(
          ShareLine(in, kAllParts[static_cast<size_t>(top)]));
    }
    none.action =
        "no rule's threshold was crossed; raise the load (or --find-max-rate) "
        "to see what gives first";
    out.primary = std::move(none);
    return out;
  }
  out.primary = std::move(found.front());
  for (size_t i = 1; i < found.size(); ++i) out.others.push_back(found[i]);
  return out;
}

std::vector<Knee> FindKnees(const CapacityResult& capacity) {
  // threshold -> (highest pass below the first fail, first fail)
  std::map<std::string, std::vector<std::pair<double, StepVerdict>>> by;
  std::vector<std::string> order;
  for (const CapacityPoint& p : capacity.curve) {
    // A step whose client could not keep its schedule (or that broke
    // another validity rule) did not offer its rate: it shows nothing.
    if (!p.valid) continue;
    auto add = [&](const std::string& threshold, StepVerdict v) {
      if (!by.count(threshold)) order.push_back(threshold);
      by[threshold].emplace_back(p.offered_rps, v);
    };
    for (const PercentileCheck& c : p.checks) add(c.threshold, c.verdict);
    for (const PointCheck& c : p.point_checks) add(c.threshold, c.verdict);
  }
  std::vector<Knee> out;
  for (const std::string& t : order) {
    Knee k;
    k.threshold = t;
    std::vector<double> pass_rps, fail_rps;
    for (const auto& [rate, v] : by[t]) {
      if (v == StepVerdict::kPass) pass_rps.push_back(rate);
      if (v == StepVerdict::kFail) fail_rps.push_back(rate);
    }
    k.breaks_rps = KneeRate(pass_rps, fail_rps);
    for (const auto& [rate, v] : by[t]) {
      if (v == StepVerdict::kPass && (k.breaks_rps == 0 || rate < k.breaks_rps))
        k.holds_rps = std::max(k.holds_rps, rate);
    }
    out.push_back(std::move(k));
  }
  return out;
}

double SpearmanCorrelation(std::span<const double> x,
                           std::span<const double> y) {
  const size_t n = std::min(x.size(), y.size());
  if (n < 8) return std::nan("");
  auto ranks = [n](std::span<const double> v) {
    std::vector<size_t> idx(n);
    for (size_t i = 0; i < n; ++i) idx[i] = i;
    std::sort(idx.begin(), idx.end(),
              [&](size_t a, size_t b) { return v[a] < v[b]; });
    std::vector<double> r(n);
    // Ties share their mean rank.
    for (size_t i = 0; i < n;) {
      size_t j = i;
      while (j + 1 < n && v[idx[j + 1]] == v[idx[i]]) ++j;
      const double mean = (static_cast<double>(i) + static_cast<double>(j)) / 2;
      for (size_t k = i; k <= j; ++k) r[idx[k]] = mean;
      i = j + 1;
    }
    return r;
  };
  const std::vector<double> rx = ranks(x), ry = ranks(y);
  double mx = 0, my = 0;
  for (size_t i = 0; i < n; ++i) {
    mx += rx[i];
    my += ry[i];
  }
  mx /= static_cast<double>(n);
  my /= static_cast<double>(n);
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < n; ++i) {
    sxy += (rx[i] - mx) * (ry[i] - my);
    sxx += (rx[i] - mx) * (rx[i] - mx);
    syy += (ry[i] - my) * (ry[i] - my);
  }
  if (sxx == 0 || syy == 0) return std::nan("");
  return sxy / std::sqrt(sxx * syy);
}

}  // namespace redline::bench
