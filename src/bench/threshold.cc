#include "bench/threshold.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "bench/units.h"

namespace redline::bench {

namespace {

enum class Category { kTrend, kError, kScalar };

struct KeyInfo {
  std::string_view key;
  Category category;
};

constexpr KeyInfo kKeys[] = {
    {"ttft", Category::kTrend},
    {"ttfo", Category::kTrend},
    {"ttft_sched", Category::kTrend},
    {"e2e", Category::kTrend},
    {"e2e_stream", Category::kTrend},
    {"e2e_sched", Category::kTrend},
    {"tpot", Category::kTrend},
    {"ntpot", Category::kTrend},
    {"itl", Category::kTrend},
    {"dispatch_delay", Category::kTrend},
    {"errors", Category::kError},
    {"connect", Category::kError},
    {"timeout", Category::kError},
    {"http_429", Category::kError},
    {"http_4xx", Category::kError},
    {"http_5xx", Category::kError},
    {"abort", Category::kError},
    {"parse", Category::kError},
    {"goodput", Category::kScalar},
    {"good_fraction", Category::kScalar},
    {"completed_rps", Category::kScalar},
    {"output_tps", Category::kScalar},
    {"offered_rps", Category::kScalar},
    {"achieved_send_rps", Category::kScalar},
    {"peak_output_tps", Category::kScalar},
    {"token_goodput", Category::kScalar},
    {"concurrency", Category::kScalar},
};

std::optional<KeyInfo> LookupKey(std::string_view key) {
  // Friendly aliases.
  if (key == "timeouts") key = "timeout";
  if (key == "5xx") key = "http_5xx";
  if (key == "4xx") key = "http_4xx";
  if (key == "429") key = "http_429";
  if (key == "error") key = "errors";
  if (key == "e2el" || key == "latency") key = "e2e";
  for (const KeyInfo& k : kKeys) {
    if (k.key == key) return k;
  }
  return std::nullopt;
}

Category CategoryOf(std::string_view key) { return LookupKey(key)->category; }

std::optional<ErrorClass> ClassOfKey(std::string_view key) {
  for (int i = 1; i < kNumErrorClasses; ++i) {
    if (ErrorClassKey(static_cast<ErrorClass>(i)) == key)
      return static_cast<ErrorClass>(i);
  }
  return std::nullopt;  // "errors"
}

Status Bad(std::string_view expr, std::string_view why) {
  return Status::InvalidArgument(fmt::format("threshold '{}': {}", expr, why));
}

}  // namespace

bool CanAbortOnFail(const Threshold& threshold) {
  auto info = LookupKey(threshold.metric_key);
  return info && info->category != Category::kScalar &&
         threshold.phase == Phase::kMeasure;
}

std::string_view CompareOpText(CompareOp op) {
  switch (op) {
    case CompareOp::kLt:
      return "<";
    case CompareOp::kLe:
      return "<=";
    case CompareOp::kGt:
      return ">";
    case CompareOp::kGe:
      return ">=";
    case CompareOp::kEq:
      return "==";
    case CompareOp::kNe:
      return "!=";
  }
  return "?";
}

Result<std::vector<Threshold>> ParseThresholds(std::string_view expression) {
  std::string_view expr = Trim(expression);
  // The metric part ends at the first ':' outside {...}.
  size_t colon = std::string_view::npos;
  int depth = 0;
  for (size_t i = 0; i < expr.size(); ++i) {
    if (expr[i] == '{') depth++;
    if (expr[i] == '}') depth--;
    if (expr[i] == ':' && depth == 0) {
      colon = i;
      break;
    }
  }
  if (colon == std::string_view::npos)
    return Bad(expression, "expected '<metric>: <assertion>'");
  std::string_view metric_part = Trim(expr.substr(0, colon));
  std::string_view rest = Trim(expr.substr(colon + 1));

  Phase phase = Phase::kMeasure;
  std::string_view key = metric_part;
  if (size_t brace = metric_part.find('{'); brace != std::string_view::npos) {
    if (metric_part.back() != '}') return Bad(expression, "unclosed tag '{'");
    key = Trim(metric_part.substr(0, brace));
    std::string_view tags =
        metric_part.substr(brace + 1, metric_part.size() - brace - 2);
    while (!tags.empty()) {
      size_t comma = tags.find(',');
      std::string_view tag = Trim(tags.substr(0, comma));
      tags = comma == std::string_view::npos ? std::string_view()
                                             : tags.substr(comma + 1);
      size_t c = tag.find(':');
      if (c == std::string_view::npos)
        return Bad(expression, "tags look like {phase:cold}");
      std::string_view name = Trim(tag.substr(0, c)),
                       value = Trim(tag.substr(c + 1));
      if (name != "phase")
        return Bad(expression,
                   "unknown tag '" + std::string(name) + "' (only phase)");
      if (value == "cold") {
        phase = Phase::kCold;
      } else if (value == "warmup") {
        phase = Phase::kWarmup;
      } else if (value == "measure" || value == "warm") {
        phase = Phase::kMeasure;
      } else {
        return Bad(expression, "phase must be cold, warmup or measure");
      }
    }
  }
  auto info = LookupKey(key);
  if (!info)
    return Bad(expression, "unknown metric '" + std::string(key) + "'");

  std::vector<Threshold> out;
  while (!rest.empty()) {
    // Assertions are separated by commas outside parentheses.
    size_t end = 0;
    int paren = 0;
    for (; end < rest.size(); ++end) {
      if (rest[end] == '(') paren++;
      if (rest[end] == ')') paren--;
      if (rest[end] == ',' && paren == 0) break;
    }
    std::string_view a = Trim(rest.substr(0, end));
    rest = end < rest.size() ? Trim(rest.substr(end + 1)) : std::string_view();
    if (a.empty()) continue;

    Threshold t;
    t.source = fmt::format("{}: {}", metric_part, a);
    t.metric_key = std::string(info->key);
    t.phase = phase;
    // Trailing "abort" / "abort(<delay>)", separated from the value by
    // whitespace ("abort" alone is also a metric key, so the word must follow
    // the assertion, not start it).
    if (size_t pos = a.rfind("abort");
        pos != std::string_view::npos && pos > 0 &&
        (a[pos - 1] == ' ' || a[pos - 1] == '\t')) {
      std::string_view suffix = a.substr(pos + 5);
      t.abort_delay_ns = kDefaultAbortDelayNs;
      if (!suffix.empty()) {
        if (suffix.front() != '(' || suffix.back() != ')')
          return Bad(expression, "abort takes an optional delay: abort(10s)");
        auto delay = ParseDurationNs(Trim(suffix.substr(1, suffix.size() - 2)));
        if (!delay.ok() || *delay < 0)
          return Bad(expression, "abort delay needs a unit: abort(10s)");
        t.abort_delay_ns = *delay;
      }
      t.abort_on_fail = true;
      a = Trim(a.substr(0, pos));
      if (!CanAbortOnFail(t)) {
        return Bad(expression,
                   "abort applies to latency and error thresholds of the "
                   "measurement phase");
      }
    }
    size_t op_pos = a.find_first_of("<>=!");
    if (op_pos == std::string_view::npos)
      return Bad(expression, "missing operator in '" + std::string(a) + "'");
    std::string_view agg = Trim(a.substr(0, op_pos));
    std::string_view op_and_value = a.substr(op_pos);
    if (op_and_value.substr(0, 2) == "<=") {
      t.op = CompareOp::kLe;
    } else if (op_and_value.substr(0, 2) == ">=") {
      t.op = CompareOp::kGe;
    } else if (op_and_value.substr(0, 2) == "==") {
      t.op = CompareOp::kEq;
    } else if (op_and_value.substr(0, 2) == "!=") {
      t.op = CompareOp::kNe;
    } else if (op_and_value[0] == '<') {
      t.op = CompareOp::kLt;
    } else if (op_and_value[0] == '>') {
      t.op = CompareOp::kGt;
    } else {
      return Bad(expression, "bad operator in '" + std::string(a) + "'");
    }
    std::string_view value =
        Trim(op_and_value.substr(CompareOpText(t.op).size()));

    if (agg == "avg" || agg == "mean") {
      t.aggregation = Aggregation::kAvg;
    } else if (agg == "min") {
      t.aggregation = Aggregation::kMin;
    } else if (agg == "max") {
      t.aggregation = Aggregation::kMax;
    } else if (agg == "med") {
      t.aggregation = Aggregation::kMed;
    } else if (agg.substr(0, 2) == "p(" && agg.back() == ')') {
      t.aggregation = Aggregation::kPercentile;
      auto q = ParseNumber(agg.substr(2, agg.size() - 3));
      if (!q.ok() || *q < 0 || *q > 100)
        return Bad(expression, "percentile must be p(0..100)");
      t.percentile = *q;
    } else if (agg == "rate") {
      t.aggregation = Aggregation::kRate;
    } else if (agg == "count") {
      t.aggregation = Aggregation::kCount;
    } else if (agg == "value") {
      t.aggregation = Aggregation::kValue;
    } else {
      return Bad(expression, "unknown aggregation '" + std::string(agg) + "'");
    }

    switch (info->category) {
      case Category::kTrend: {
        if (t.aggregation == Aggregation::kRate ||
            t.aggregation == Aggregation::kCount ||
            t.aggregation == Aggregation::kValue) {
          return Bad(expression,
                     "latency metrics take avg, min, max, med or p(N)");
        }
        auto ns = ParseDurationNs(value);
        if (!ns.ok())
          return Bad(expression, "times need a unit (us, ms, s): '" +
                                     std::string(value) + "'");
        t.value = static_cast<double>(*ns) / 1e3;
        break;
      }
      case Category::kError: {
        if (t.aggregation == Aggregation::kRate) {
          auto f = ParsePercentOrFraction(value);
          if (!f.ok())
            return Bad(expression, "rates take a percentage or a fraction");
          t.value = *f;
        } else if (t.aggregation == Aggregation::kCount) {
          auto n = ParseNumber(value);
          if (!n.ok()) return Bad(expression, "count needs a number");
          t.value = *n;
        } else {
          return Bad(expression, "error classes take rate or count");
        }
        break;
      }
      case Category::kScalar: {
        if (t.aggregation != Aggregation::kValue)
          return Bad(expression, "scalar metrics take value");
        auto f = t.metric_key == "good_fraction" ? ParsePercentOrFraction(value)
                                                 : ParseNumber(value);
        if (!f.ok())
          return Bad(expression, "bad value '" + std::string(value) + "'");
        t.value = *f;
        break;
      }
    }
    out.push_back(std::move(t));
  }
  if (out.empty()) return Bad(expression, "no assertion");
  return out;
}

Result<std::vector<Threshold>> ProfileThresholds(std::string_view profile) {
  if (profile == "three-second") {
    std::vector<Threshold> all;
    for (std::string_view e : {"e2e: p(50)<1s, p(95)<2s, p(99)<3s",
                               "http_5xx: rate<0.1%", "timeout: rate<1%"}) {
      RL_ASSIGN_OR_RETURN(auto ts, ParseThresholds(e));
      all.insert(all.end(), ts.begin(), ts.end());
    }
    return all;
  }
  return Status::InvalidArgument("unknown profile '" + std::string(profile) +
                                 "' (known: three-second)");
}

const PhaseStats* PhaseStatsSet::Get(Phase p) const {
  switch (p) {
    case Phase::kCold:
      return cold;
    case Phase::kWarmup:
      return warmup;
    case Phase::kMeasure:
      return measure;
    case Phase::kCooldown:
      return nullptr;
  }
  return nullptr;
}

namespace {

bool Compare(double observed, CompareOp op, double limit) {
  if (std::isnan(observed)) return false;
  switch (op) {
    case CompareOp::kLt:
      return observed < limit;
    case CompareOp::kLe:
      return observed <= limit;
    case CompareOp::kGt:
      return observed > limit;
    case CompareOp::kGe:
      return observed >= limit;
    case CompareOp::kEq:
      return observed == limit;
    case CompareOp::kNe:
      return observed != limit;
  }
  return false;
}

double TrendValue(const PhaseStats& s, Metric m, const Threshold& t,
                  bool adjusted) {
  switch (t.aggregation) {
    case Aggregation::kAvg:
      return s.Mean(m, adjusted);
    case Aggregation::kMin:
      return s.Min(m, adjusted);
    case Aggregation::kMax:
      return s.Max(m, adjusted);
    case Aggregation::kMed:
      return s.Percentile(m, 50, adjusted);
    case Aggregation::kPercentile:
      return s.Percentile(m, t.percentile, adjusted);
    default:
      return std::nan("");
  }
}

double ScalarValue(const PhaseStats& s, std::string_view key) {
  if (key == "goodput") return s.goodput_rps;
  if (key == "good_fraction") return s.good_fraction;
  if (key == "completed_rps") return s.completed_rps;
  if (key == "output_tps") return s.output_tps;
  if (key == "offered_rps") return s.offered_rps;
  if (key == "achieved_send_rps") return s.achieved_send_rps;
  if (key == "peak_output_tps") return s.peak_output_tps;
  if (key == "token_goodput") return s.token_goodput_tps;
  if (key == "concurrency") return s.mean_concurrency;
  return std::nan("");
}

}  // namespace

std::vector<ThresholdResult> EvaluateThresholds(
    const std::vector<Threshold>& thresholds, const PhaseStatsSet& stats) {
  std::vector<ThresholdResult> results;
  for (const Threshold& t : thresholds) {
    ThresholdResult r;
    r.threshold = t;
    const PhaseStats* s = stats.Get(t.phase);
    if (s == nullptr || s->attempted == 0) {
      r.observed = std::nan("");
      r.note = fmt::format("no requests in phase {}", PhaseName(t.phase));
      results.push_back(std::move(r));
      continue;
    }
    switch (CategoryOf(t.metric_key)) {
      case Category::kTrend: {
        Metric m = *MetricFromKey(t.metric_key);
        const bool adjusted = MetricIsErrorAdjusted(m);
        r.observed = TrendValue(*s, m, t, adjusted);
        if (adjusted) r.success_only = TrendValue(*s, m, t, false);
        if (s->SampleCount(m, adjusted) == 0) r.note = "no samples";
        break;
      }
      case Category::kError: {
        std::optional<ErrorClass> cls = ClassOfKey(t.metric_key);
        r.observed = t.aggregation == Aggregation::kRate
                         ? s->ErrorRate(cls)
                         : static_cast<double>(s->ErrorCount(cls));
        break;
      }
      case Category::kScalar:
        r.observed = ScalarValue(*s, t.metric_key);
        break;
    }
    r.pass = Compare(r.observed, t.op, t.value);
    results.push_back(std::move(r));
  }
  return results;
}

GoodputSlo GoodputFromThresholds(const std::vector<Threshold>& thresholds) {
  GoodputSlo slo;
  // The loosest upper bound per metric: with e2e p(50)<1s, p(99)<3s a single
  // request is acceptable up to 3 s (every request must meet the tail bound).
  auto tighten = [](int64_t& slot, double us) {
    const int64_t v = static_cast<int64_t>(us);
    if (slot == 0 || v > slot) slot = v;
  };
  for (const Threshold& t : thresholds) {
    if (t.phase != Phase::kMeasure) continue;
    if (t.op != CompareOp::kLt && t.op != CompareOp::kLe) continue;
    if (t.aggregation == Aggregation::kRate ||
        t.aggregation == Aggregation::kCount ||
        t.aggregation == Aggregation::kValue ||
        t.aggregation == Aggregation::kMin) {
      continue;
    }
    if (t.metric_key == "ttft") tighten(slo.ttft_us, t.value);
    if (t.metric_key == "tpot") tighten(slo.tpot_us, t.value);
    if (t.metric_key == "e2e") tighten(slo.e2e_us, t.value);
    if (t.metric_key == "itl") tighten(slo.itl_us, t.value);
  }
  return slo;
}

std::string FormatThresholdValue(const Threshold& t, double v) {
  switch (CategoryOf(t.metric_key)) {
    case Category::kTrend:
      return FormatUs(v);
    case Category::kError:
      if (t.aggregation == Aggregation::kRate)
        return std::isnan(v) ? "-" : fmt::format("{:.3g}%", v * 100);
      return fmt::format("{:.0f}", v);
    case Category::kScalar:
      if (t.metric_key == "good_fraction")
        return std::isnan(v) ? "-" : fmt::format("{:.3g}%", v * 100);
      return fmt::format("{:.4g}", v);
  }
  return "?";
}

}  // namespace redline::bench
