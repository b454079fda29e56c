#include "bench/arrival.h"

#include <fmt/format.h>

#include <cmath>

#include "bench/units.h"

namespace redline::bench {

Result<ArrivalKind> ParseArrivalKind(std::string_view text) {
  if (text == "constant" || text == "uniform") return ArrivalKind::kConstant;
  if (text == "poisson") return ArrivalKind::kPoisson;
  if (text == "gamma") return ArrivalKind::kGamma;
  return Status::InvalidArgument(
      "arrival must be constant, poisson or gamma, not '" + std::string(text) +
      "'");
}

std::string_view ArrivalKindName(ArrivalKind kind) {
  switch (kind) {
    case ArrivalKind::kConstant:
      return "constant";
    case ArrivalKind::kPoisson:
      return "poisson";
    case ArrivalKind::kGamma:
      return "gamma";
  }
  return "?";
}

Result<std::vector<Stage>> ParseStages(std::string_view text) {
  std::vector<Stage> stages;
  while (!text.empty()) {
    size_t comma = text.find(',');
    std::string_view item = Trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view()
                                           : text.substr(comma + 1);
    if (item.empty()) continue;
    size_t colon = item.find(':');
    if (colon == std::string_view::npos) {
      return Status::InvalidArgument(
          "stage '" + std::string(item) +
          "' must look like 30s:5rps or 60s:5-20rps");
    }
    Stage st;
    RL_ASSIGN_OR_RETURN(st.duration_ns, ParseDurationNs(item.substr(0, colon)));
    std::string_view rate = Trim(item.substr(colon + 1));
    // A ramp "5-20rps": split at a '-' that is not the first character.
    size_t dash = rate.find('-', 1);
    if (dash != std::string_view::npos) {
      std::string_view unit;
      size_t u = rate.size();
      while (u > dash &&
             !std::isdigit(static_cast<unsigned char>(rate[u - 1])) &&
             rate[u - 1] != '.')
        --u;
      unit = rate.substr(u);
      RL_ASSIGN_OR_RETURN(
          st.start_rps,
          ParseRate(std::string(rate.substr(0, dash)) + std::string(unit)));
      RL_ASSIGN_OR_RETURN(st.end_rps, ParseRate(rate.substr(dash + 1)));
    } else {
      RL_ASSIGN_OR_RETURN(st.start_rps, ParseRate(rate));
      st.end_rps = st.start_rps;
    }
    stages.push_back(st);
  }
  if (stages.empty()) return Status::InvalidArgument("no stages given");
  return stages;
}

ArrivalPlan::ArrivalPlan(ArrivalKind kind, double burstiness,
                         std::vector<Stage> stages, uint64_t seed,
                         int64_t max_arrivals)
    : kind_(kind),
      burstiness_(burstiness > 0 ? burstiness : 1.0),
      stages_(std::move(stages)),
      max_arrivals_(max_arrivals),
      rng_(seed) {
  for (const Stage& s : stages_) total_ns_ += s.duration_ns;
  unbounded_ = total_ns_ == 0;
}

double ArrivalPlan::Gap() {
  switch (kind_) {
    case ArrivalKind::kConstant:
      return 1.0;
    case ArrivalKind::kPoisson: {
      std::exponential_distribution<double> d(1.0);
      return d(rng_);
    }
    case ArrivalKind::kGamma: {
      std::gamma_distribution<double> d(burstiness_, 1.0 / burstiness_);
      return d(rng_);
    }
  }
  return 1.0;
}

std::optional<int64_t> ArrivalPlan::Invert(double lambda) {
  double base_ns = 0;
  double remaining = lambda;
  for (const Stage& s : stages_) {
    const double d = static_cast<double>(s.duration_ns) / 1e9;  // seconds
    const double area = (s.start_rps + s.end_rps) / 2.0 * d;
    if (remaining <= area && area > 0) {
      double t;
      const double r0 = s.start_rps, r1 = s.end_rps;
      if (std::abs(r1 - r0) < 1e-12) {
        t = remaining / r0;
      } else {
        const double a = (r1 - r0) / (2.0 * d);
        // Numerically stable root of a t^2 + r0 t - remaining = 0.
        t = 2.0 * remaining / (r0 + std::sqrt(r0 * r0 + 4.0 * a * remaining));
      }
      return static_cast<int64_t>(std::llround(base_ns + t * 1e9));
    }
    remaining -= area;
    base_ns += static_cast<double>(s.duration_ns);
  }
  if (unbounded_) {
    const double r = stages_.empty() ? 0 : stages_.back().end_rps;
    if (r <= 0) return std::nullopt;
    return static_cast<int64_t>(std::llround(base_ns + remaining / r * 1e9));
  }
  return std::nullopt;
}

std::optional<int64_t> ArrivalPlan::Next() {
  if (max_arrivals_ >= 0 && produced_ >= max_arrivals_) return std::nullopt;
  std::optional<int64_t> t = Invert(lambda_);
  if (!t) return std::nullopt;
  if (!unbounded_ && *t >= total_ns_) return std::nullopt;
  lambda_ += Gap();
  produced_++;
  return t;
}

double ArrivalPlan::RateAt(int64_t offset_ns) const {
  int64_t base = 0;
  for (const Stage& s : stages_) {
    if (offset_ns < base + s.duration_ns) {
      const double f = static_cast<double>(offset_ns - base) /
                       static_cast<double>(s.duration_ns);
      return s.start_rps + (s.end_rps - s.start_rps) * f;
    }
    base += s.duration_ns;
  }
  return stages_.empty() ? 0 : stages_.back().end_rps;
}

Result<ThinkTime> ThinkTime::Parse(std::string_view text) {
  text = Trim(text);
  ThinkTime t;
  if (text.empty() || text == "0" || text == "none") return t;
  auto inner = [&](std::string_view prefix) -> std::optional<std::string_view> {
    if (text.substr(0, prefix.size()) == prefix && text.back() == ')') {
      return text.substr(prefix.size(), text.size() - prefix.size() - 1);
    }
    return std::nullopt;
  };
  std::string_view range;
  if (auto in = inner("between(")) {
    range = *in;
    size_t comma = range.find(',');
    if (comma == std::string_view::npos)
      return Status::InvalidArgument("between(a,b) needs two values");
    t.kind = Kind::kBetween;
    RL_ASSIGN_OR_RETURN(t.a_ns,
                        ParseDurationNs(range.substr(0, comma), 1'000'000'000));
    RL_ASSIGN_OR_RETURN(
        t.b_ns, ParseDurationNs(range.substr(comma + 1), 1'000'000'000));
  } else if (auto in = inner("constant(")) {
    t.kind = Kind::kConstant;
    RL_ASSIGN_OR_RETURN(t.a_ns, ParseDurationNs(*in, 1'000'000'000));
  } else if (auto in = inner("exponential(") ? inner("exponential(")
                                             : inner("exp(")) {
    t.kind = Kind::kExponential;
    RL_ASSIGN_OR_RETURN(t.a_ns, ParseDurationNs(*in, 1'000'000'000));
  } else if (size_t dots = text.find(".."); dots != std::string_view::npos) {
    t.kind = Kind::kBetween;
    RL_ASSIGN_OR_RETURN(t.a_ns,
                        ParseDurationNs(text.substr(0, dots), 1'000'000'000));
    RL_ASSIGN_OR_RETURN(t.b_ns,
                        ParseDurationNs(text.substr(dots + 2), 1'000'000'000));
  } else {
    t.kind = Kind::kConstant;
    RL_ASSIGN_OR_RETURN(t.a_ns, ParseDurationNs(text, 1'000'000'000));
  }
  if (t.kind == Kind::kBetween && t.b_ns < t.a_ns) {
    return Status::InvalidArgument("think time range '" + std::string(text) +
                                   "' has max < min");
  }
  if (t.kind == Kind::kConstant && t.a_ns == 0) t.kind = Kind::kNone;
  return t;
}

int64_t ThinkTime::SampleNs(std::mt19937_64& rng) const {
  switch (kind) {
    case Kind::kNone:
      return 0;
    case Kind::kConstant:
      return a_ns;
    case Kind::kBetween: {
      // a + U (b - a), U uniform in [0, 1), as Locust's between().
      std::uniform_real_distribution<double> u(0.0, 1.0);
      return a_ns +
             static_cast<int64_t>(u(rng) * static_cast<double>(b_ns - a_ns));
    }
    case Kind::kExponential: {
      std::exponential_distribution<double> e(1.0);
      return static_cast<int64_t>(e(rng) * static_cast<double>(a_ns));
    }
  }
  return 0;
}

std::string ThinkTime::ToString() const {
  switch (kind) {
    case Kind::kNone:
      return "none";
    case Kind::kConstant:
      return fmt::format("constant({}s)", static_cast<double>(a_ns) / 1e9);
    case Kind::kBetween:
      return fmt::format("between({}s,{}s)", static_cast<double>(a_ns) / 1e9,
                         static_cast<double>(b_ns) / 1e9);
    case Kind::kExponential:
      return fmt::format("exponential({}s)", static_cast<double>(a_ns) / 1e9);
  }
  return "?";
}

}  // namespace redline::bench
