#include "gateway/config_yaml.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <sstream>

#include "gateway/duration.h"

namespace redline::gateway {
namespace {

// Parsing state for one file: where errors point.
class Reader {
 public:
  explicit Reader(std::string path) : path_(std::move(path)) {}

  Status Error(const YAML::Node& at, const std::string& key,
               std::string_view why) const {
    return Status::InvalidArgument(fmt::format("--config {}:{}: {}: {}", path_,
                                               at.Mark().line + 1, key, why));
  }

  static std::string Normalize(std::string key) {
    std::replace(key.begin(), key.end(), '_', '-');
    return key;
  }

  template <typename T>
  Status Scalar(const YAML::Node& v, const std::string& key, T* out) const {
    if (!v.IsScalar()) return Error(v, key, "must be a single value");
    try {
      *out = v.as<T>();
    } catch (const YAML::Exception&) {
      return Error(v, key,
                   fmt::format("'{}' is not a valid {}", v.Scalar(),
                               std::is_same_v<T, std::string> ? "string"
                               : std::is_same_v<T, double>    ? "number"
                               : std::is_same_v<T, bool>      ? "boolean"
                                                              : "integer"));
    }
    return Status::Ok();
  }

  Status Duration(const YAML::Node& v, const std::string& key,
                  int64_t* out_ms) const {
    std::string text;
    RL_RETURN_IF_ERROR(Scalar(v, key, &text));
    auto ms = ParseDurationMs(text);
    if (!ms.ok()) return Error(v, key, ms.status().message());
    *out_ms = *ms;
    return Status::Ok();
  }

  // A duration, or off/false/0.
  Status DurationOrOff(const YAML::Node& v, const std::string& key,
                       int64_t* out_ms) const {
    if (v.IsScalar() && (v.Scalar() == "off" || v.Scalar() == "false")) {
      *out_ms = 0;
      return Status::Ok();
    }
    return Duration(v, key, out_ms);
  }

  // Calls fn(normalized key, value node, key path) for each member of a
  // mapping; `where` prefixes the key path.
  Status Members(
      const YAML::Node& map, const std::string& where,
      const std::function<Status(const std::string&, const YAML::Node&,
                                 const YAML::Node&, const std::string&)>& fn)
      const {
    if (!map.IsMap()) return Error(map, where, "must be a mapping");
    for (const auto& kv : map) {
      const std::string key = Normalize(kv.first.as<std::string>());
      RL_RETURN_IF_ERROR(fn(key, kv.first, kv.second,
                            where.empty() ? key : where + "." + key));
    }
    return Status::Ok();
  }

  Status Unknown(const YAML::Node& at, const std::string& key,
                 std::string_view known) const {
    return Error(at, key, fmt::format("unknown key (known: {})", known));
  }

  Status ModelList(const YAML::Node& v, const std::string& where,
                   std::vector<ModelRoute>* out) const {
    if (!v.IsSequence()) return Error(v, where, "must be a list of models");
    for (size_t i = 0; i < v.size(); ++i) {
      const YAML::Node item = v[i];
      const std::string at = fmt::format("{}[{}]", where, i);
      ModelRoute m;
      if (item.IsScalar()) {
        m.name = item.as<std::string>();
      } else {
        RL_RETURN_IF_ERROR(Members(
            item, at,
            [&](const std::string& k, const YAML::Node& kn, const YAML::Node& x,
                const std::string& path) -> Status {
              if (k == "name") return Scalar(x, path, &m.name);
              if (k == "upstream-model")
                return Scalar(x, path, &m.upstream_model);
              if (k == "aliases") {
                if (x.IsScalar()) {
                  m.aliases.push_back(x.as<std::string>());
                  return Status::Ok();
                }
                if (!x.IsSequence())
                  return Error(x, path, "must be a list of names");
                for (const auto& a : x) {
                  std::string s;
                  RL_RETURN_IF_ERROR(Scalar(a, path, &s));
                  m.aliases.push_back(std::move(s));
                }
                return Status::Ok();
              }
              return Unknown(kn, path, "name, aliases, upstream-model");
            }));
      }
      if (m.name.empty()) return Error(item, at, "a model needs a name");
      out->push_back(std::move(m));
    }
    return Status::Ok();
  }

  Status Upstream(const YAML::Node& item, const std::string& at,
                  UpstreamSpec* u) const {
    u->line = item.Mark().line + 1;
    if (item.IsScalar()) return Scalar(item, at, &u->url);
    RL_RETURN_IF_ERROR(Members(
        item, at,
        [&](const std::string& k, const YAML::Node& kn, const YAML::Node& x,
            const std::string& path) -> Status {
          if (k == "url") return Scalar(x, path, &u->url);
          if (k == "name") return Scalar(x, path, &u->name);
          if (k == "weight") {
            RL_RETURN_IF_ERROR(Scalar(x, path, &u->weight));
            if (!(u->weight > 0) || u->weight > 1000)
              return Error(x, path, "must be in (0, 1000]");
            return Status::Ok();
          }
          if (k == "max-in-flight") {
            RL_RETURN_IF_ERROR(Scalar(x, path, &u->max_in_flight));
            if (u->max_in_flight < 1)
              return Error(x, path, "must be at least 1");
            return Status::Ok();
          }
          if (k == "connect-timeout")
            return Duration(x, path, &u->connect_timeout_ms);
          if (k == "first-byte-timeout")
            return Duration(x, path, &u->first_byte_timeout_ms);
          if (k == "idle-timeout")
            return Duration(x, path, &u->idle_timeout_ms);
          if (k == "api-key") return Scalar(x, path, &u->api_key);
          if (k == "scrape-metrics")
            return DurationOrOff(x, path, &u->scrape_interval_ms);
          return Unknown(kn, path,
                         "url, name, weight, max-in-flight, connect-timeout, "
                         "first-byte-timeout, idle-timeout, api-key, "
                         "scrape-metrics");
        }));
    if (u->url.empty()) return Error(item, at, "an upstream needs a url");
    return Status::Ok();
  }

  Status Pool(const YAML::Node& item, const std::string& at,
              PoolSpec* p) const {
    p->line = item.Mark().line + 1;
    return Members(
        item, at,
        [&](const std::string& k, const YAML::Node& kn, const YAML::Node& x,
            const std::string& path) -> Status {
          if (k == "name") return Scalar(x, path, &p->name);
          if (k == "models") return ModelList(x, path, &p->models);
          if (k == "upstreams") {
            if (!x.IsSequence())
              return Error(x, path, "must be a list of upstreams");
            for (size_t i = 0; i < x.size(); ++i) {
              UpstreamSpec u;
              RL_RETURN_IF_ERROR(
                  Upstream(x[i], fmt::format("{}[{}]", path, i), &u));
              p->upstreams.push_back(std::move(u));
            }
            return Status::Ok();
          }
          if (k == "policy") {
            std::string name;
            RL_RETURN_IF_ERROR(Scalar(x, path, &name));
            auto kind = ParsePolicyKind(name);
            if (!kind.ok()) return Error(x, path, kind.status().message());
            p->policy = *kind;
            return Status::Ok();
          }
          if (k == "max-in-flight") {
            RL_RETURN_IF_ERROR(Scalar(x, path, &p->max_in_flight));
            if (p->max_in_flight < 1)
              return Error(x, path, "must be at least 1");
            return Status::Ok();
          }
          if (k == "connect-timeout")
            return Duration(x, path, &p->connect_timeout_ms);
          if (k == "first-byte-timeout")
            return Duration(x, path, &p->first_byte_timeout_ms);
          if (k == "idle-timeout")
            return Duration(x, path, &p->idle_timeout_ms);
          if (k == "deadline") return Duration(x, path, &p->deadline_ms);
          if (k == "retries") {
            RL_RETURN_IF_ERROR(Scalar(x, path, &p->retries));
            if (p->retries < 0 || p->retries > 10)
              return Error(x, path, "must be in 0..10");
            return Status::Ok();
          }
          if (k == "max-response-bytes") {
            RL_RETURN_IF_ERROR(Scalar(x, path, &p->max_response_bytes));
            if (p->max_response_bytes < 4096)
              return Error(x, path, "must be at least 4096");
            return Status::Ok();
          }
          if (k == "hedge-after") {
            std::string text;
            RL_RETURN_IF_ERROR(Scalar(x, path, &text));
            if (text == "off" || text == "false" || text == "0") {
              p->hedge = HedgeMode::kOff;
            } else if (text == "p95") {
              p->hedge = HedgeMode::kP95;
            } else {
              auto ms = ParseDurationMs(text);
              if (!ms.ok())
                return Error(x, path, ms.status().message() + ", p95 or off");
              p->hedge = HedgeMode::kFixed;
              p->hedge_after_ms = *ms;
            }
            return Status::Ok();
          }
          if (k == "retry-budget") return RetryBudgetSection(x, path, p);
          if (k == "health") return HealthSection(x, path, p);
          if (k == "outlier") return OutlierSection(x, path, p);
          if (k == "affinity") return AffinitySection(x, path, p);
          if (k == "scrape-metrics") return ScrapeSection(x, path, p);
          if (k == "slow-start")
            return DurationOrOff(x, path, &p->slow_start_ms);
          return Unknown(
              kn, path,
              "name, models, upstreams, policy, max-in-flight, "
              "connect-timeout, first-byte-timeout, idle-timeout, deadline, "
              "retries, retry-budget, hedge-after, health, outlier, affinity, "
              "max-response-bytes, scrape-metrics, slow-start");
        });
  }

  Status RetryBudgetSection(const YAML::Node& x, const std::string& where,
                            PoolSpec* p) const {
    return Members(
        x, where,
        [&](const std::string& k, const YAML::Node& kn, const YAML::Node& v,
            const std::string& path) -> Status {
          if (k == "ratio") {
            RL_RETURN_IF_ERROR(Scalar(v, path, &p->retry_budget.ratio));
            if (p->retry_budget.ratio < 0 || p->retry_budget.ratio > 10)
              return Error(v, path, "must be in 0..10");
            return Status::Ok();
          }
          if (k == "min-per-second") {
            RL_RETURN_IF_ERROR(Scalar(v, path, &p->retry_budget.min_per_s));
            if (p->retry_budget.min_per_s < 0)
              return Error(v, path, "must be >= 0");
            return Status::Ok();
          }
          if (k == "window") {
            RL_RETURN_IF_ERROR(Duration(v, path, &p->retry_budget.window_ms));
            if (p->retry_budget.window_ms < 100)
              return Error(v, path, "must be at least 100ms");
            return Status::Ok();
          }
          return Unknown(kn, path, "ratio, min-per-second, window");
        });
  }

  // `scrape-metrics: 1s` (or off), or a mapping.
  Status ScrapeSection(const YAML::Node& x, const std::string& where,
                       PoolSpec* p) const {
    if (x.IsScalar()) return DurationOrOff(x, where, &p->scrape.interval_ms);
    return Members(
        x, where,
        [&](const std::string& k, const YAML::Node& kn, const YAML::Node& v,
            const std::string& path) -> Status {
          if (k == "interval")
            return DurationOrOff(v, path, &p->scrape.interval_ms);
          if (k == "timeout") return Duration(v, path, &p->scrape.timeout_ms);
          if (k == "stale-intervals") {
            RL_RETURN_IF_ERROR(Scalar(v, path, &p->scrape.stale_intervals));
            if (p->scrape.stale_intervals < 1 ||
                p->scrape.stale_intervals > 1000)
              return Error(v, path, "must be in 1..1000");
            return Status::Ok();
          }
          if (k == "path") {
            RL_RETURN_IF_ERROR(Scalar(v, path, &p->scrape.path));
            if (!p->scrape.path.starts_with("/"))
              return Error(v, path, "must start with /");
            return Status::Ok();
          }
          return Unknown(kn, path, "interval, timeout, stale-intervals, path");
        });
  }

  Status HealthSection(const YAML::Node& x, const std::string& where,
                       PoolSpec* p) const {
    return Members(
        x, where,
        [&](const std::string& k, const YAML::Node& kn, const YAML::Node& v,
            const std::string& path) -> Status {
          if (k == "path") {
            RL_RETURN_IF_ERROR(Scalar(v, path, &p->probe.path));
            if (!p->probe.path.starts_with("/"))
              return Error(v, path, "must start with /");
            return Status::Ok();
          }
          if (k == "interval") return Duration(v, path, &p->probe.interval_ms);
          if (k == "timeout") return Duration(v, path, &p->probe.timeout_ms);
          if (k == "healthy-threshold") {
            RL_RETURN_IF_ERROR(Scalar(v, path, &p->health.healthy_threshold));
            if (p->health.healthy_threshold < 1)
              return Error(v, path, "must be at least 1");
            return Status::Ok();
          }
          if (k == "unhealthy-threshold") {
            RL_RETURN_IF_ERROR(Scalar(v, path, &p->health.unhealthy_threshold));
            if (p->health.unhealthy_threshold < 1)
              return Error(v, path, "must be at least 1");
            return Status::Ok();
          }
          return Unknown(kn, path,
                         "path, interval, timeout, healthy-threshold, "
                         "unhealthy-threshold");
        });
  }

  Status OutlierSection(const YAML::Node& x, const std::string& where,
                        PoolSpec* p) const {
    return Members(x, where,
                   [&](const std::string& k, const YAML::Node& kn,
                       const YAML::Node& v, const std::string& path) -> Status {
                     if (k == "consecutive-failures") {
                       RL_RETURN_IF_ERROR(
                           Scalar(v, path, &p->health.consecutive_failures));
                       if (p->health.consecutive_failures < 0)
                         return Error(v, path, "must be >= 0 (0: off)");
                       return Status::Ok();
                     }
                     if (k == "base-ejection")
                       return Duration(v, path, &p->health.base_ejection_ms);
                     if (k == "max-ejection")
                       return Duration(v, path, &p->health.max_ejection_ms);
                     return Unknown(
                         kn, path,
                         "consecutive-failures, base-ejection, max-ejection");
                   });
  }

  Status AffinitySection(const YAML::Node& x, const std::string& where,
                         PoolSpec* p) const {
    return Members(
        x, where,
        [&](const std::string& k, const YAML::Node& kn, const YAML::Node& v,
            const std::string& path) -> Status {
          if (k == "prefix-bytes") {
            RL_RETURN_IF_ERROR(Scalar(v, path, &p->affinity_prefix_bytes));
            if (p->affinity_prefix_bytes < 1 ||
                p->affinity_prefix_bytes > (1 << 20))
              return Error(v, path, "must be in 1..1048576");
            return Status::Ok();
          }
          if (k == "load-factor") {
            RL_RETURN_IF_ERROR(Scalar(v, path, &p->affinity.load_factor));
            if (!(p->affinity.load_factor >= 1) ||
                p->affinity.load_factor > 100)
              return Error(v, path, "must be in 1..100");
            return Status::Ok();
          }
          if (k == "virtual-nodes") {
            RL_RETURN_IF_ERROR(Scalar(v, path, &p->affinity.virtual_nodes));
            if (p->affinity.virtual_nodes < 1 ||
                p->affinity.virtual_nodes > 10000)
              return Error(v, path, "must be in 1..10000");
            return Status::Ok();
          }
          if (k == "max-sessions") {
            RL_RETURN_IF_ERROR(Scalar(v, path, &p->affinity.max_sessions));
            if (p->affinity.max_sessions < 0 ||
                p->affinity.max_sessions > 10'000'000)
              return Error(v, path, "must be in 0..10000000");
            return Status::Ok();
          }
          return Unknown(
              kn, path,
              "prefix-bytes, load-factor, virtual-nodes, max-sessions");
        });
  }

  Status Root(const YAML::Node& root, std::vector<PoolSpec>* pools,
              std::vector<FlagItem>* flags, CacheConfig* cache,
              RoutingConfig* routing) const {
    if (!root.IsMap())
      return Status::InvalidArgument(
          "--config " + path_ +
          ": the file must be a mapping (flag names and pools:)");
    for (const auto& kv : root) {
      const std::string key = Normalize(kv.first.as<std::string>());
      const YAML::Node& v = kv.second;
      if (key == "pools") {
        if (!v.IsSequence()) return Error(v, key, "must be a list of pools");
        for (size_t i = 0; i < v.size(); ++i) {
          PoolSpec p;
          RL_RETURN_IF_ERROR(Pool(v[i], fmt::format("pools[{}]", i), &p));
          pools->push_back(std::move(p));
        }
        continue;
      }
      if (key == "cache" && v.IsMap() && cache != nullptr) {
        RL_RETURN_IF_ERROR(ParseCacheYaml(v, "--config " + path_, cache));
        continue;
      }
      if (key == "routing" && routing != nullptr) {
        RL_RETURN_IF_ERROR(ParseRoutingYaml(v, "--config " + path_, routing));
        continue;
      }
      FlagItem item;
      item.key = key;
      item.line = kv.first.Mark().line + 1;
      if (v.IsSequence()) {
        for (const auto& x : v) {
          std::string s;
          RL_RETURN_IF_ERROR(Scalar(x, key, &s));
          item.values.push_back(std::move(s));
        }
      } else if (v.IsScalar()) {
        item.values.push_back(v.as<std::string>());
      } else {
        return Error(v, key, "must be a value or a list");
      }
      flags->push_back(std::move(item));
    }
    return Status::Ok();
  }

 private:
  std::string path_;
};

}  // namespace

Status ParseGatewayYamlText(const std::string& text, const std::string& path,
                            std::vector<PoolSpec>* pools,
                            std::vector<FlagItem>* flags, CacheConfig* cache,
                            RoutingConfig* routing) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(
        fmt::format("--config {}:{}: {}", path, e.mark.line + 1, e.msg));
  }
  try {
    return Reader(path).Root(root, pools, flags, cache, routing);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(
        fmt::format("--config {}:{}: {}", path, e.mark.line + 1, e.msg));
  }
}

Status ParseGatewayYaml(const std::string& path, std::vector<PoolSpec>* pools,
                        std::vector<FlagItem>* flags, CacheConfig* cache,
                        RoutingConfig* routing) {
  std::ifstream in(path);
  if (!in) return Status::IoError("--config " + path + ": cannot read");
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseGatewayYamlText(ss.str(), path, pools, flags, cache, routing);
}

}  // namespace redline::gateway
