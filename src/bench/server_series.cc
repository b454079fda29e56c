#include "bench/server_series.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "bench/units.h"

namespace redline::bench {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A name matches a base name when it is the base, or ends in it right after
// a prefix separator ('_' or ':'): "vllm:num_requests_running",
// "redline_num_requests_running" and "num_requests_running" all match
// "num_requests_running"; "xnum_requests_running" does not.
bool MatchesBase(std::string_view name, std::string_view base) {
  if (name.size() < base.size() ||
      name.substr(name.size() - base.size()) != base)
    return false;
  if (name.size() == base.size()) return true;
  const char c = name[name.size() - base.size() - 1];
  return c == '_' || c == ':';
}

enum class LineKind { kGauge, kRate };
enum class Aggregate { kSum, kMax };

struct LineSpec {
  const char* name;
  // In priority order: a server that exports two of them (vLLM during a
  // rename) is read from the first.
  std::vector<std::string_view> bases;
  LineKind kind;
  double scale;
};

struct PanelSpec {
  const char* id;
  const char* title;
  ServerUnit unit;
  // Over label sets (several models): requests and tokens add up, a usage
  // share does not.
  Aggregate aggregate;
  std::vector<LineSpec> lines;
};

const std::vector<PanelSpec>& GaugePanels() {
  static const std::vector<PanelSpec> kPanels = {
      {"requests",
       "Requests running and waiting (server)",
       ServerUnit::kCount,
       Aggregate::kSum,
       {{"running",
         {"num_requests_running", "requests_processing", "num_running_reqs"},
         LineKind::kGauge,
         1},
        {"waiting",
         {"num_requests_waiting", "requests_deferred", "num_queue_reqs"},
         LineKind::kGauge,
         1}}},
      {"kv_cache",
       "KV-cache usage (server)",
       ServerUnit::kFraction,
       Aggregate::kMax,
       {{"KV usage",
         {"kv_cache_usage_perc", "gpu_cache_usage_perc", "kv_cache_usage_ratio",
          "token_usage"},
         LineKind::kGauge,
         1}}},
      {"tokens",
       "Prompt and generation tokens per second (server)",
       ServerUnit::kTokensPerSecond,
       Aggregate::kSum,
       {{"prompt", {"prompt_tokens_total"}, LineKind::kRate, 1},
        {"generation",
         {"generation_tokens_total", "tokens_predicted_total"},
         LineKind::kRate,
         1}}},
      {"cpu",
       "Server CPU (% of one core)",
       ServerUnit::kCpuPercent,
       Aggregate::kSum,
       {{"CPU", {"process_cpu_seconds_total"}, LineKind::kRate, 100}}},
      {"rss",
       "Server resident memory (RSS)",
       ServerUnit::kBytes,
       Aggregate::kSum,
       {{"RSS", {"process_resident_memory_bytes"}, LineKind::kGauge, 1}}},
  };
  return kPanels;
}

struct HistogramSpec {
  const char* id;
  const char* title;
  std::string_view base;
};
const HistogramSpec kHistograms[] = {
    {"ttft", "Server-side TTFT (from histogram buckets)",
     "time_to_first_token_seconds"},
    {"e2e", "Server-side E2E latency (from histogram buckets)",
     "e2e_request_latency_seconds"},
};

std::string Key(const ScrapeSeries& s) { return s.name + "{" + s.labels + "}"; }

bool IsConstant(const ScrapeSeries& s) {
  double lo = INFINITY, hi = -INFINITY;
  int n = 0;
  for (double v : s.value) {
    if (!std::isfinite(v)) continue;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    n++;
  }
  return n < 2 || lo == hi;
}

// Per-second rate between consecutive samples; NaN across a reset.
std::vector<std::pair<double, double>> Rates(const ScrapeSeries& s) {
  std::vector<std::pair<double, double>> out;
  for (size_t i = 1; i < s.t_s.size() && i < s.value.size(); ++i) {
    const double dt = s.t_s[i] - s.t_s[i - 1];
    const double dv = s.value[i] - s.value[i - 1];
    if (dt <= 0) continue;
    out.emplace_back(s.t_s[i], dv >= 0 ? dv / dt : kNaN);
  }
  return out;
}

std::string FormatIn(ServerUnit unit, double v) {
  switch (unit) {
    case ServerUnit::kCount:
      return FormatCompact(v);
    case ServerUnit::kFraction:
      return FormatPercent(v);
    case ServerUnit::kTokensPerSecond:
      return FormatTokensPerSecond(v);
    case ServerUnit::kLatencyUs:
      return FormatUs(v);
    case ServerUnit::kCpuPercent:
      return FormatCompact(v) + "%";
    case ServerUnit::kBytes:
      return FormatBytes(v);
  }
  return FormatCompact(v);
}

// Cumulative (bound, count) pairs of one scrape minus the previous one;
// empty across a counter reset.
std::vector<std::pair<double, double>> Delta(
    const std::map<double, double>& now, const std::map<double, double>* prev) {
  std::vector<std::pair<double, double>> out;
  for (const auto& [le, c] : now) {
    double before = 0;
    if (prev != nullptr) {
      auto it = prev->find(le);
      if (it != prev->end()) before = it->second;
    }
    if (c < before) return {};
    out.emplace_back(le, c - before);
  }
  return out;
}

}  // namespace

bool IsCuratedSeries(std::string_view name) {
  for (const PanelSpec& p : GaugePanels()) {
    for (const LineSpec& l : p.lines) {
      for (std::string_view b : l.bases) {
        if (MatchesBase(name, b)) return true;
      }
    }
  }
  return false;
}

std::string CuratedHistogramFamily(std::string_view name) {
  constexpr std::string_view kSuffix = "_bucket";
  if (name.size() <= kSuffix.size() ||
      name.substr(name.size() - kSuffix.size()) != kSuffix)
    return "";
  const std::string_view family = name.substr(0, name.size() - kSuffix.size());
  for (const HistogramSpec& h : kHistograms) {
    if (MatchesBase(family, h.base)) return std::string(family);
  }
  return "";
}

double HistogramQuantile(
    double q, const std::vector<std::pair<double, double>>& buckets) {
  if (buckets.empty() || !(q >= 0) || q > 1) return kNaN;
  // Cumulative counts can be read mid-update; keep them monotonic as
  // Prometheus does.
  std::vector<double> cum(buckets.size());
  double running = 0;
  for (size_t i = 0; i < buckets.size(); ++i) {
    running = std::max(running, buckets[i].second);
    cum[i] = running;
  }
  const double total = cum.back();
  if (!(total > 0)) return kNaN;
  const double rank = q * total;
  for (size_t i = 0; i < buckets.size(); ++i) {
    if (cum[i] < rank) continue;
    const double upper = buckets[i].first;
    if (std::isinf(upper))
      return i > 0 && std::isfinite(buckets[i - 1].first) ? buckets[i - 1].first
                                                          : kNaN;
    const double lower = i == 0 ? std::min(0.0, upper) : buckets[i - 1].first;
    const double prev = i == 0 ? 0 : cum[i - 1];
    const double count = cum[i] - prev;
    if (count <= 0) return upper;
    return lower + (upper - lower) * (rank - prev) / count;
  }
  return kNaN;
}

ServerMetricsView CurateServerMetrics(
    const std::vector<ScrapeSeries>& series,
    const std::vector<ScrapeHistogram>& histograms) {
  ServerMetricsView view;
  std::set<std::string> used;  // keys consumed by a curated line
  std::set<std::string> constant_keys;
  for (const ScrapeSeries& s : series) {
    if (IsConstant(s)) constant_keys.insert(Key(s));
  }

  auto gauge_panel = [&](const PanelSpec& spec) {
    ServerPanel panel;
    panel.id = spec.id;
    panel.title = spec.title;
    panel.unit = spec.unit;
    for (const LineSpec& ls : spec.lines) {
      std::vector<const ScrapeSeries*> sources;
      for (std::string_view base : ls.bases) {
        for (const ScrapeSeries& s : series) {
          if (MatchesBase(s.name, base)) sources.push_back(&s);
        }
        if (!sources.empty()) break;
      }
      if (sources.empty()) continue;
      bool all_constant = true;
      for (const ScrapeSeries* s : sources) {
        used.insert(Key(*s));
        all_constant &= constant_keys.count(Key(*s)) > 0;
      }
      if (all_constant) {
        const ScrapeSeries& s = *sources.front();
        panel.constant.push_back(
            ls.kind == LineKind::kRate
                ? fmt::format("{}: {} did not move", ls.name, s.name)
                : fmt::format(
                      "{} constant at {}", ls.name,
                      FormatIn(spec.unit,
                               (s.value.empty() ? 0 : s.value[0]) * ls.scale)));
        continue;
      }
      // Sum or max over the label sets, by scrape time (one scrape writes
      // the same time into every series).
      std::map<double, double> by_t;
      for (const ScrapeSeries* s : sources) {
        std::vector<std::pair<double, double>> pts;
        if (ls.kind == LineKind::kRate) {
          pts = Rates(*s);
        } else {
          for (size_t i = 0; i < s->t_s.size() && i < s->value.size(); ++i)
            pts.emplace_back(s->t_s[i], s->value[i]);
        }
        for (const auto& [t, v] : pts) {
          auto [it, fresh] = by_t.emplace(t, v);
          if (fresh) continue;
          it->second = spec.aggregate == Aggregate::kSum
                           ? it->second + v
                           : std::max(it->second, v);
        }
      }
      ServerLine line;
      line.name = ls.name;
      line.source = sources.front()->name;
      for (const auto& [t, v] : by_t) {
        line.t_s.push_back(t);
        line.y.push_back(v * ls.scale);
      }
      panel.lines.push_back(std::move(line));
    }
    return panel;
  };

  auto histogram_panel = [&](const HistogramSpec& spec,
                             const ScrapeHistogram& h) {
    ServerPanel panel;
    panel.id = spec.id;
    panel.title = spec.title;
    panel.unit = ServerUnit::kLatencyUs;
    panel.slo_metric = spec.id;
    ServerLine p50{"p50", h.name, {}, {}}, p99{"p99", h.name, {}, {}};
    for (size_t i = 1; i < h.buckets.size() && i < h.t_s.size(); ++i) {
      const auto d = Delta(h.buckets[i], &h.buckets[i - 1]);
      p50.t_s.push_back(h.t_s[i]);
      p99.t_s.push_back(h.t_s[i]);
      p50.y.push_back(d.empty() ? kNaN : HistogramQuantile(0.5, d) * 1e6);
      p99.y.push_back(d.empty() ? kNaN : HistogramQuantile(0.99, d) * 1e6);
    }
    panel.lines = {std::move(p50), std::move(p99)};
    return panel;
  };

  auto add_if_any = [&](ServerPanel panel, std::string_view missing_name) {
    bool any = false;
    for (const ServerLine& l : panel.lines) {
      for (double v : l.y) any |= std::isfinite(v);
    }
    if (any) {
      view.panels.push_back(std::move(panel));
    } else if (!panel.constant.empty()) {
      // Every line was constant: the panel goes, the lines are counted.
      for (std::string& c : panel.constant)
        view.constant_curated.push_back(std::move(c));
    } else {
      view.missing.push_back(std::string(missing_name));
    }
  };

  const auto& gauges = GaugePanels();
  add_if_any(gauge_panel(gauges[0]), "requests running/waiting");
  add_if_any(gauge_panel(gauges[1]), "KV-cache usage");
  add_if_any(gauge_panel(gauges[2]), "prompt/generation tokens");
  std::set<std::string> histogram_families;
  for (const HistogramSpec& spec : kHistograms) {
    const ScrapeHistogram* found = nullptr;
    for (const ScrapeHistogram& h : histograms) {
      if (MatchesBase(h.name, spec.base)) {
        found = &h;
        break;
      }
    }
    const bool ttft = std::string_view(spec.id) == "ttft";
    const std::string missing =
        ttft ? "server-side TTFT histogram" : "server-side E2E histogram";
    if (found == nullptr) {
      view.missing.push_back(missing);
      continue;
    }
    histogram_families.insert(found->name);
    add_if_any(histogram_panel(spec, *found), missing);
    // The whole run: last scrape minus the first.
    const auto d = Delta(found->buckets.back(), &found->buckets.front());
    const double p50 =
        found->buckets.size() > 1 ? HistogramQuantile(0.5, d) * 1e6 : kNaN;
    const double p99 =
        found->buckets.size() > 1 ? HistogramQuantile(0.99, d) * 1e6 : kNaN;
    if (ttft) {
      view.ttft_p50_us = p50;
      view.ttft_p99_us = p99;
      view.ttft_source = found->name;
    } else {
      view.e2e_p50_us = p50;
      view.e2e_p99_us = p99;
      view.e2e_source = found->name;
    }
  }
  add_if_any(gauge_panel(gauges[3]), "process CPU");
  add_if_any(gauge_panel(gauges[4]), "process RSS");

  for (const ScrapeSeries& s : series) {
    const std::string key = Key(s);
    if (constant_keys.count(key)) {
      view.constant.push_back(key);
      continue;
    }
    if (used.count(key)) continue;
    // A curated histogram's _sum and _count are in its panel already.
    bool histogram_part = false;
    for (const std::string& f : histogram_families)
      histogram_part |= s.name == f + "_sum" || s.name == f + "_count";
    if (histogram_part) continue;
    OtherSeries o;
    o.series = &s;
    o.min = INFINITY;
    o.max = -INFINITY;
    for (double v : s.value) {
      if (!std::isfinite(v)) continue;
      o.min = std::min(o.min, v);
      o.max = std::max(o.max, v);
      o.last = v;
    }
    view.others.push_back(o);
  }
  std::sort(view.others.begin(), view.others.end(),
            [](const OtherSeries& a, const OtherSeries& b) {
              return Key(*a.series) < Key(*b.series);
            });
  std::sort(view.constant.begin(), view.constant.end());
  return view;
}

}  // namespace redline::bench
