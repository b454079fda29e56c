#include "gateway/gateway_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <set>

#include "gateway/duration.h"
#include "http/url.h"

namespace redline::gateway {
namespace {

std::string Trim(std::string s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  const size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// "--config FILE:LINE: KEY: why", or "KEY: why" for a flag.
Status Bad(const GatewayConfig& c, int line, const std::string& key,
           std::string_view why) {
  if (line > 0 && !c.config_path.empty())
    return Status::InvalidArgument(
        fmt::format("--config {}:{}: {}: {}", c.config_path, line, key, why));
  return Status::InvalidArgument(fmt::format("{}: {}", key, why));
}

Status CheckUpstream(const GatewayConfig& c, const PoolSpec& p,
                     const std::string& where, UpstreamSpec* u) {
  auto url = http::ParseUrl(u->url);
  if (!url.ok())
    return Bad(c, u->line, where + ".url",
               fmt::format("bad URL '{}': {}", u->url.substr(0, 256),
                           url.status().message()));
  if (url->target.find('?') != std::string::npos)
    return Bad(c, u->line, where + ".url", "must not have a query");
  if (u->name.empty())
    u->name = fmt::format("{}:{}", url->origin.host, url->origin.port);
  if (u->max_in_flight < 0) u->max_in_flight = p.max_in_flight;
  if (u->connect_timeout_ms < 0) u->connect_timeout_ms = p.connect_timeout_ms;
  if (u->first_byte_timeout_ms < 0)
    u->first_byte_timeout_ms = p.first_byte_timeout_ms;
  if (u->idle_timeout_ms < 0) u->idle_timeout_ms = p.idle_timeout_ms;
  if (u->connect_timeout_ms == 0)
    return Bad(c, u->line, where + ".connect-timeout", "must be above 0");
  if (u->scrape_interval_ms < 0) u->scrape_interval_ms = p.scrape.interval_ms;
  if (u->scrape_interval_ms > 0 && u->scrape_interval_ms < 100)
    return Bad(c, u->line, where + ".scrape-metrics",
               "must be at least 100ms (or off)");
  return Status::Ok();
}

// "off" or a duration ("0" is off too).
Status FlagDuration(const std::string& flag, const std::string& text,
                    int64_t* out_ms) {
  if (text == "off" || text == "false" || text.empty()) {
    *out_ms = 0;
    return Status::Ok();
  }
  auto ms = ParseDurationMs(text);
  if (!ms.ok())
    return Status::InvalidArgument(
        fmt::format("{}: {} (or off)", flag, ms.status().message()));
  *out_ms = *ms;
  return Status::Ok();
}

}  // namespace

Status FinalizeGatewayConfig(GatewayConfig* c) {
  if (!c->api_key_file.empty()) {
    std::ifstream in(c->api_key_file);
    if (!in)
      return Status::IoError("--api-key-file: cannot read " + c->api_key_file);
    std::string line;
    while (std::getline(in, line)) {
      line = Trim(line);
      if (!line.empty() && line[0] != '#') c->api_keys.push_back(line);
    }
  }
  if (c->port < 0 || c->port > 65535)
    return Status::InvalidArgument("--port must be in 0..65535");
  if (c->max_body_bytes < 1024)
    return Status::InvalidArgument("--max-body-bytes must be at least 1024");
  if (c->shutdown_grace_s < 0)
    return Status::InvalidArgument("--shutdown-grace must be >= 0");
  if (c->metrics_prefix != "redline_" && c->metrics_prefix != "redline:")
    return Status::InvalidArgument(
        "--metrics-prefix must be \"redline_\" or \"redline:\"");
  if (c->trace_sample != -1 && !(c->trace_sample >= 0 && c->trace_sample <= 1))
    return Status::InvalidArgument("--trace-sample must be in [0, 1]");

  int64_t scrape_default_ms = 0, slow_start_default_ms = 0;
  RL_RETURN_IF_ERROR(
      FlagDuration("--scrape-metrics", c->scrape_metrics, &scrape_default_ms));
  RL_RETURN_IF_ERROR(
      FlagDuration("--slow-start", c->slow_start, &slow_start_default_ms));

  if (!c->cache.redis_url.empty() || !c->cache.warm_file.empty())
    c->cache.enabled = true;
  if (c->cache.enabled) RL_RETURN_IF_ERROR(ValidateCacheConfig(c->cache));
  RL_RETURN_IF_ERROR(ValidateRoutingConfig(c->routing));

  if (c->pools.empty()) {
    if (c->upstream_urls.empty())
      return Status::InvalidArgument(
          "no upstreams: give --upstream URL (repeatable) or a --config file "
          "with pools:");
    PoolSpec p;
    p.name = "default";
    auto kind = ParsePolicyKind(c->policy);
    if (!kind.ok())
      return Status::InvalidArgument("--policy: " + kind.status().message());
    p.policy = *kind;
    for (const std::string& m : c->models) p.models.push_back({m, {}, {}});
    for (const std::string& url : c->upstream_urls) {
      UpstreamSpec u;
      u.url = url;
      p.upstreams.push_back(std::move(u));
    }
    c->pools.push_back(std::move(p));
  } else if (!c->upstream_urls.empty() || !c->models.empty()) {
    return Status::InvalidArgument(
        "give the upstreams either with --upstream/--model or under pools: "
        "in --config, not both");
  }

  std::set<std::string> pool_names, model_names;
  bool wildcard = false;
  for (size_t i = 0; i < c->pools.size(); ++i) {
    PoolSpec& p = c->pools[i];
    const std::string where = fmt::format("pools[{}]", i);
    if (p.name.empty()) return Bad(*c, p.line, where + ".name", "is required");
    if (!pool_names.insert(p.name).second)
      return Bad(*c, p.line, where + ".name",
                 fmt::format("pool '{}' is defined twice", p.name));
    if (p.upstreams.empty())
      return Bad(*c, p.line, where + ".upstreams", "a pool needs an upstream");
    if (p.probe.interval_ms > 0 && p.probe.timeout_ms <= 0)
      return Bad(*c, p.line, where + ".health.timeout", "must be above 0");
    if (p.health.max_ejection_ms < p.health.base_ejection_ms)
      return Bad(*c, p.line, where + ".outlier.max-ejection",
                 "must be at least base-ejection");
    if (p.deadline_ms <= 0)
      return Bad(*c, p.line, where + ".deadline", "must be above 0");
    if (p.slow_start_ms < 0) p.slow_start_ms = slow_start_default_ms;
    if (p.scrape.interval_ms < 0) p.scrape.interval_ms = scrape_default_ms;
    if (p.scrape.interval_ms > 0 && p.scrape.interval_ms < 100)
      return Bad(*c, p.line, where + ".scrape-metrics",
                 "must be at least 100ms (or off)");
    if (p.scrape.timeout_ms < 0) {
      int64_t longest = p.scrape.interval_ms;
      for (const UpstreamSpec& u : p.upstreams)
        longest = std::max(longest, u.scrape_interval_ms);
      p.scrape.timeout_ms =
          std::min<int64_t>(std::max<int64_t>(longest, 100), 1'000);
    }
    if (p.scrape.timeout_ms == 0)
      return Bad(*c, p.line, where + ".scrape-metrics.timeout",
                 "must be above 0");
    std::set<std::string> upstream_names;
    for (size_t j = 0; j < p.upstreams.size(); ++j) {
      const std::string uw = fmt::format("{}.upstreams[{}]", where, j);
      RL_RETURN_IF_ERROR(CheckUpstream(*c, p, uw, &p.upstreams[j]));
      if (!upstream_names.insert(p.upstreams[j].name).second)
        return Bad(*c, p.upstreams[j].line, uw + ".name",
                   fmt::format("upstream '{}' appears twice in pool '{}'; "
                               "give each a distinct name",
                               p.upstreams[j].name, p.name));
    }
    for (const ModelRoute& m : p.models) {
      std::vector<std::string> names = m.aliases;
      names.push_back(m.name);
      for (const std::string& n : names) {
        if (n == "*") {
          if (wildcard)
            return Bad(*c, p.line, where + ".models",
                       "only one pool may serve \"*\"");
          wildcard = true;
          continue;
        }
        if (!model_names.insert(n).second)
          return Bad(*c, p.line, where + ".models",
                     fmt::format("model '{}' is served by two pools", n));
      }
    }
  }
  if (!c->default_pool.empty() && !pool_names.contains(c->default_pool)) {
    std::vector<std::string> names(pool_names.begin(), pool_names.end());
    return Status::InvalidArgument(
        fmt::format("default-pool: '{}' names no pool (pools: {})",
                    c->default_pool, fmt::join(names, ", ")));
  }
  return Status::Ok();
}

std::string DescribeGatewayConfig(const GatewayConfig& c) {
  std::string out;
  out += fmt::format("  listen = {}:{}\n", c.host, c.port);
  out += fmt::format("  api-keys = {}\n", c.api_keys.empty() ? "none" : "***");
  out += fmt::format("  max-body-bytes = {}\n", c.max_body_bytes);
  out += fmt::format("  shutdown-grace = {}s\n", c.shutdown_grace_s);
  for (const PoolSpec& p : c.pools) {
    std::vector<std::string> models;
    for (const ModelRoute& m : p.models) models.push_back(m.name);
    out += fmt::format(
        "  pool {}: policy {}, models [{}], max-in-flight {}, timeouts "
        "connect {} first-byte {} idle {}, deadline {}, retries {} (budget "
        "{:.0f}% min {}/s), hedge {}, probes {} every {}\n",
        p.name, PolicyName(p.policy),
        models.empty() ? std::string("discovered")
                       : fmt::format("{}", fmt::join(models, ", ")),
        p.max_in_flight, FormatDurationMs(p.connect_timeout_ms),
        FormatDurationMs(p.first_byte_timeout_ms),
        FormatDurationMs(p.idle_timeout_ms), FormatDurationMs(p.deadline_ms),
        p.retries, p.retry_budget.ratio * 100, p.retry_budget.min_per_s,
        p.hedge == HedgeMode::kOff   ? std::string("off")
        : p.hedge == HedgeMode::kP95 ? std::string("p95")
                                     : FormatDurationMs(p.hedge_after_ms),
        p.probe.path,
        p.probe.interval_ms > 0 ? FormatDurationMs(p.probe.interval_ms)
                                : std::string("never"));
    if (p.scrape.interval_ms > 0)
      out += fmt::format(
          "    scrape-metrics {} every {} (timeout {}, stale after {} "
          "intervals)\n",
          p.scrape.path, FormatDurationMs(p.scrape.interval_ms),
          FormatDurationMs(p.scrape.timeout_ms), p.scrape.stale_intervals);
    if (p.slow_start_ms > 0)
      out +=
          fmt::format("    slow-start {}\n", FormatDurationMs(p.slow_start_ms));
    for (const UpstreamSpec& u : p.upstreams) {
      out += fmt::format("    upstream {}: {} weight {} max-in-flight {}{}{}\n",
                         u.name, u.url, u.weight, u.max_in_flight,
                         u.api_key.empty() ? "" : " api-key ***",
                         u.scrape_interval_ms != p.scrape.interval_ms
                             ? " scrape-metrics " +
                                   (u.scrape_interval_ms > 0
                                        ? FormatDurationMs(u.scrape_interval_ms)
                                        : std::string("off"))
                             : std::string());
    }
  }
  if (c.cache.enabled) {
    std::vector<std::string> classes;
    for (const CacheClassSpec& k : c.cache.classes)
      classes.push_back(
          fmt::format("{} {}", k.name,
                      k.ttl_ms > 0 ? FormatDurationMs(k.ttl_ms) : "never"));
    out += fmt::format(
        "  cache: namespace {}, local {} bytes, classes [{}], {} rules, "
        "redis {}{}\n",
        c.cache.name_space, c.cache.max_bytes, fmt::join(classes, ", "),
        c.cache.rules.empty() ? std::string("default")
                              : std::to_string(c.cache.rules.size()),
        c.cache.redis_url.empty() ? std::string("off") : c.cache.redis_url,
        c.cache.warm_file.empty() ? "" : ", warm " + c.cache.warm_file);
  }
  if (!c.routing.models.empty()) {
    std::vector<std::string> classes;
    for (const RouteClassSpec& k : c.routing.classes)
      classes.push_back(fmt::format("{} -> {}", k.name, k.model));
    std::string escalate = "off";
    if (!c.routing.escalate_to.empty()) {
      escalate = c.routing.escalate_to;
      escalate += c.routing.escalate_stream_tokens > 0
                      ? fmt::format(" (streams: {} tokens held)",
                                    c.routing.escalate_stream_tokens)
                      : std::string(" (not streams)");
    }
    out += fmt::format("  routing: [{}] over [{}], escalate to {}\n",
                       fmt::join(c.routing.models, ", "),
                       fmt::join(classes, ", "), escalate);
  }
  return out;
}

}  // namespace redline::gateway
