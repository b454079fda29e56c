#include "gateway/cache_config.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>

#include "gateway/duration.h"
#include "gateway/text_match.h"

namespace redline::gateway {
namespace {

std::string Key(const YAML::Node& k) {
  std::string s = k.as<std::string>();
  std::replace(s.begin(), s.end(), '_', '-');
  return s;
}

struct Ctx {
  const std::string& where;
  Status Error(const YAML::Node& at, const std::string& key,
               std::string_view why) const {
    return Status::InvalidArgument(
        fmt::format("{}:{}: {}: {}", where, at.Mark().line + 1, key, why));
  }
  template <typename T>
  Status Get(const YAML::Node& v, const std::string& key, T* out) const {
    if (!v.IsScalar()) return Error(v, key, "must be a single value");
    try {
      *out = v.as<T>();
    } catch (const YAML::Exception&) {
      return Error(v, key, fmt::format("'{}' is not valid here", v.Scalar()));
    }
    return Status::Ok();
  }
  Status Ms(const YAML::Node& v, const std::string& key, int64_t* ms) const {
    std::string text;
    RL_RETURN_IF_ERROR(Get(v, key, &text));
    if (text == "0" || text == "never" || text == "off") {
      *ms = 0;
      return Status::Ok();
    }
    auto r = ParseDurationMs(text);
    if (!r.ok()) return Error(v, key, r.status().message());
    *ms = *r;
    return Status::Ok();
  }
  Status List(const YAML::Node& v, const std::string& key,
              std::vector<std::string>* out) const {
    out->clear();
    if (v.IsScalar()) {
      out->push_back(v.as<std::string>());
      return Status::Ok();
    }
    if (!v.IsSequence()) return Error(v, key, "must be a list");
    for (const auto& x : v) {
      std::string s;
      RL_RETURN_IF_ERROR(Get(x, key, &s));
      out->push_back(std::move(s));
    }
    return Status::Ok();
  }
};

}  // namespace

std::vector<CacheRuleSpec> DefaultCacheRules() {
  CacheRuleSpec r;
  r.cls = "time_sensitive";
  r.regex =
      "\\b(today|tonight|tomorrow|yesterday|now|right now|latest|current|"
      "currently|this (week|month|year)|price|prices|stock|weather|score|"
      "scores|news|breaking)\\b";
  return {r};
}

Status ParseCacheYaml(const YAML::Node& node, const std::string& where,
                      CacheConfig* c) {
  Ctx x{where};
  if (!node.IsMap()) return x.Error(node, "cache", "must be a mapping");
  c->enabled = true;
  for (const auto& kv : node) {
    const std::string k = Key(kv.first);
    const std::string path = "cache." + k;
    const YAML::Node& v = kv.second;
    Status s = Status::Ok();
    if (k == "enabled") {
      s = x.Get(v, path, &c->enabled);
    } else if (k == "namespace") {
      s = x.Get(v, path, &c->name_space);
    } else if (k == "max-bytes") {
      s = x.Get(v, path, &c->max_bytes);
    } else if (k == "max-entry-bytes") {
      s = x.Get(v, path, &c->max_entry_bytes);
    } else if (k == "deterministic-only") {
      s = x.Get(v, path, &c->deterministic_only);
    } else if (k == "models") {
      if (!v.IsMap())
        return x.Error(v, path,
                       "must map model names to {deterministic-only: BOOL}");
      for (const auto& mkv : v) {
        const std::string name = mkv.first.as<std::string>();
        const std::string at = path + "." + name;
        if (!mkv.second.IsMap())
          return x.Error(mkv.second, at, "must be a mapping");
        for (const auto& okv : mkv.second) {
          const std::string ok = Key(okv.first);
          if (ok != "deterministic-only")
            return x.Error(okv.first, at + "." + ok,
                           "unknown key (known: deterministic-only)");
          bool b = true;
          RL_RETURN_IF_ERROR(x.Get(okv.second, at + "." + ok, &b));
          c->model_deterministic_only[name] = b;
        }
      }
    } else if (k == "store-length") {
      s = x.Get(v, path, &c->store_length);
    } else if (k == "normalize-text") {
      s = x.Get(v, path, &c->normalize_text);
    } else if (k == "default-class") {
      s = x.Get(v, path, &c->default_class);
    } else if (k == "single-flight-wait") {
      s = x.Ms(v, path, &c->single_flight_wait_ms);
    } else if (k == "max-single-flight-waiters") {
      s = x.Get(v, path, &c->max_single_flight_waiters);
    } else if (k == "compress-above-bytes") {
      s = x.Get(v, path, &c->compress_above_bytes);
    } else if (k == "admin-key") {
      s = x.Get(v, path, &c->admin_key);
    } else if (k == "warm") {
      s = x.Get(v, path, &c->warm_file);
    } else if (k == "warm-concurrency") {
      s = x.Get(v, path, &c->warm_concurrency);
    } else if (k == "classes") {
      if (!v.IsMap()) return x.Error(v, path, "must map class names to TTLs");
      for (const auto& ckv : v) {
        CacheClassSpec spec;
        spec.name = ckv.first.as<std::string>();
        RL_RETURN_IF_ERROR(
            x.Ms(ckv.second, path + "." + spec.name, &spec.ttl_ms));
        auto it = std::find_if(
            c->classes.begin(), c->classes.end(),
            [&](const CacheClassSpec& e) { return e.name == spec.name; });
        if (it != c->classes.end()) {
          *it = spec;
        } else {
          c->classes.push_back(spec);
        }
      }
    } else if (k == "rules") {
      if (!v.IsSequence()) return x.Error(v, path, "must be a list of rules");
      c->rules.clear();
      for (size_t i = 0; i < v.size(); ++i) {
        const std::string at = fmt::format("{}[{}]", path, i);
        if (!v[i].IsMap()) return x.Error(v[i], at, "must be a mapping");
        CacheRuleSpec r;
        for (const auto& rkv : v[i]) {
          const std::string rk = Key(rkv.first);
          const std::string rp = at + "." + rk;
          if (rk == "class") {
            RL_RETURN_IF_ERROR(x.Get(rkv.second, rp, &r.cls));
          } else if (rk == "regex") {
            RL_RETURN_IF_ERROR(x.Get(rkv.second, rp, &r.regex));
            auto re = Regex::Compile(r.regex);
            if (!re.ok()) return x.Error(rkv.second, rp, re.status().message());
          } else if (rk == "keywords") {
            RL_RETURN_IF_ERROR(x.List(rkv.second, rp, &r.keywords));
          } else if (rk == "models" || rk == "model") {
            RL_RETURN_IF_ERROR(x.List(rkv.second, rp, &r.models));
          } else {
            return x.Error(rkv.first, rp,
                           "unknown key (known: class, regex, keywords, "
                           "models)");
          }
        }
        if (r.cls.empty()) return x.Error(v[i], at, "a rule needs a class");
        c->rules.push_back(std::move(r));
      }
    } else if (k == "redis") {
      if (v.IsScalar()) {
        s = x.Get(v, path, &c->redis_url);
      } else if (v.IsMap()) {
        for (const auto& rkv : v) {
          const std::string rk = Key(rkv.first);
          const std::string rp = path + "." + rk;
          if (rk == "url") {
            RL_RETURN_IF_ERROR(x.Get(rkv.second, rp, &c->redis_url));
          } else if (rk == "timeout") {
            RL_RETURN_IF_ERROR(x.Ms(rkv.second, rp, &c->redis_timeout_ms));
          } else if (rk == "connect-timeout") {
            RL_RETURN_IF_ERROR(
                x.Ms(rkv.second, rp, &c->redis_connect_timeout_ms));
          } else if (rk == "queue") {
            RL_RETURN_IF_ERROR(x.Get(rkv.second, rp, &c->redis_queue));
          } else if (rk == "purge-poll") {
            RL_RETURN_IF_ERROR(x.Ms(rkv.second, rp, &c->redis_purge_poll_ms));
          } else {
            return x.Error(rkv.first, rp,
                           "unknown key (known: url, timeout, "
                           "connect-timeout, queue, purge-poll)");
          }
        }
      } else {
        s = x.Error(v, path, "must be a URL or a mapping");
      }
    } else {
      return x.Error(kv.first, path,
                     "unknown key (known: enabled, namespace, max-bytes, "
                     "max-entry-bytes, deterministic-only, models, "
                     "store-length, "
                     "normalize-text, "
                     "default-class, classes, rules, single-flight-wait, "
                     "max-single-flight-waiters, redis, "
                     "compress-above-bytes, admin-key, warm, "
                     "warm-concurrency)");
    }
    RL_RETURN_IF_ERROR(s);
  }
  return ValidateCacheConfig(*c);
}

Status ParseRoutingYaml(const YAML::Node& node, const std::string& where,
                        RoutingConfig* r) {
  Ctx x{where};
  if (!node.IsMap()) return x.Error(node, "routing", "must be a mapping");
  for (const auto& kv : node) {
    const std::string k = Key(kv.first);
    const std::string path = "routing." + k;
    const YAML::Node& v = kv.second;
    if (k == "models" || k == "model") {
      RL_RETURN_IF_ERROR(x.List(v, path, &r->models));
    } else if (k == "pinned") {
      RL_RETURN_IF_ERROR(x.List(v, path, &r->pinned));
    } else if (k == "reasoning-markers") {
      RL_RETURN_IF_ERROR(x.List(v, path, &r->reasoning_markers));
    } else if (k == "step-markers") {
      RL_RETURN_IF_ERROR(x.List(v, path, &r->step_markers));
    } else if (k == "classes") {
      if (!v.IsSequence()) return x.Error(v, path, "must be a list");
      r->classes.clear();
      for (size_t i = 0; i < v.size(); ++i) {
        const std::string at = fmt::format("{}[{}]", path, i);
        if (!v[i].IsMap()) return x.Error(v[i], at, "must be a mapping");
        RouteClassSpec c;
        for (const auto& ckv : v[i]) {
          const std::string ck = Key(ckv.first);
          if (ck == "name") {
            RL_RETURN_IF_ERROR(x.Get(ckv.second, at + ".name", &c.name));
          } else if (ck == "model") {
            RL_RETURN_IF_ERROR(x.Get(ckv.second, at + ".model", &c.model));
          } else if (ck == "max-score") {
            RL_RETURN_IF_ERROR(
                x.Get(ckv.second, at + ".max-score", &c.max_score));
          } else {
            return x.Error(ckv.first, at + "." + ck,
                           "unknown key (known: name, model, max-score)");
          }
        }
        r->classes.push_back(std::move(c));
      }
    } else if (k == "weights") {
      if (!v.IsMap()) return x.Error(v, path, "must be a mapping");
      for (const auto& wkv : v) {
        const std::string wk = Key(wkv.first);
        double* d = wk == "tokens"        ? &r->weights.tokens
                    : wk == "code"        ? &r->weights.code
                    : wk == "reasoning"   ? &r->weights.reasoning
                    : wk == "multi-step"  ? &r->weights.multi_step
                    : wk == "turns"       ? &r->weights.turns
                    : wk == "tools"       ? &r->weights.tools
                    : wk == "tokens-full" ? &r->weights.tokens_full
                                          : nullptr;
        if (d == nullptr)
          return x.Error(wkv.first, path + "." + wk,
                         "unknown key (known: tokens, code, reasoning, "
                         "multi-step, turns, tools, tokens-full)");
        RL_RETURN_IF_ERROR(x.Get(wkv.second, path + "." + wk, d));
      }
    } else if (k == "escalate") {
      if (!v.IsMap()) return x.Error(v, path, "must be a mapping");
      for (const auto& ekv : v) {
        const std::string ek = Key(ekv.first);
        const std::string ep = path + "." + ek;
        if (ek == "to") {
          RL_RETURN_IF_ERROR(x.Get(ekv.second, ep, &r->escalate_to));
        } else if (ek == "min-mean-logprob") {
          RL_RETURN_IF_ERROR(x.Get(ekv.second, ep, &r->min_mean_logprob));
        } else if (ek == "on-length") {
          RL_RETURN_IF_ERROR(x.Get(ekv.second, ep, &r->escalate_on_length));
        } else if (ek == "refusal") {
          RL_RETURN_IF_ERROR(x.Get(ekv.second, ep, &r->refusal_regex));
        } else if (ek == "stream-tokens") {
          RL_RETURN_IF_ERROR(x.Get(ekv.second, ep, &r->escalate_stream_tokens));
          if (r->escalate_stream_tokens < 0 ||
              r->escalate_stream_tokens > kMaxEscalateStreamTokens)
            return x.Error(
                ekv.second, ep,
                fmt::format("must be in [0, {}]", kMaxEscalateStreamTokens));
        } else if (ek == "stream-bytes") {
          RL_RETURN_IF_ERROR(x.Get(ekv.second, ep, &r->escalate_stream_bytes));
          if (r->escalate_stream_bytes < 1 ||
              r->escalate_stream_bytes > kMaxEscalateStreamBytes)
            return x.Error(
                ekv.second, ep,
                fmt::format("must be in [1, {}]", kMaxEscalateStreamBytes));
        } else {
          return x.Error(ekv.first, ep,
                         "unknown key (known: to, min-mean-logprob, "
                         "on-length, refusal, stream-tokens, stream-bytes)");
        }
      }
    } else {
      return x.Error(kv.first, path,
                     "unknown key (known: models, classes, weights, "
                     "reasoning-markers, step-markers, pinned, escalate)");
    }
  }
  return ValidateRoutingConfig(*r);
}

Status ValidateCacheConfig(const CacheConfig& c) {
  if (c.max_bytes < 0) return Status::InvalidArgument("cache.max-bytes < 0");
  if (c.max_entry_bytes < 1)
    return Status::InvalidArgument("cache.max-entry-bytes must be >= 1");
  if (c.single_flight_wait_ms < 0 || c.single_flight_wait_ms > 600'000)
    return Status::InvalidArgument("cache.single-flight-wait: 0..600s");
  if (c.max_single_flight_waiters < 0 || c.max_single_flight_waiters > 100000)
    return Status::InvalidArgument(
        "cache.max-single-flight-waiters: 0..100000");
  if (c.redis_queue < 1 || c.redis_queue > 1'000'000)
    return Status::InvalidArgument("cache.redis.queue: 1..1000000");
  if (c.redis_timeout_ms < 1 || c.redis_connect_timeout_ms < 1)
    return Status::InvalidArgument("cache.redis timeouts must be >= 1ms");
  if (c.redis_purge_poll_ms != 0 &&
      (c.redis_purge_poll_ms < 10 || c.redis_purge_poll_ms > 3'600'000))
    return Status::InvalidArgument("cache.redis.purge-poll: off or 10ms..1h");
  if (c.warm_concurrency < 1 || c.warm_concurrency > 256)
    return Status::InvalidArgument("cache.warm-concurrency: 1..256");
  if (c.name_space.empty() || c.name_space.find(':') != std::string::npos)
    return Status::InvalidArgument(
        "cache.namespace must be non-empty without ':'");
  auto known = [&](const std::string& n) {
    return std::any_of(c.classes.begin(), c.classes.end(),
                       [&](const CacheClassSpec& s) { return s.name == n; });
  };
  for (const CacheClassSpec& s : c.classes) {
    if (s.name.empty() || s.name.find(':') != std::string::npos)
      return Status::InvalidArgument(
          "cache.classes: a name is empty or has ':'");
    if (s.ttl_ms < 0)
      return Status::InvalidArgument("cache.classes." + s.name + " < 0");
  }
  if (!known(c.default_class))
    return Status::InvalidArgument("cache.default-class '" + c.default_class +
                                   "' is not a class");
  for (const CacheRuleSpec& r : c.rules) {
    if (!known(r.cls))
      return Status::InvalidArgument("cache.rules: class '" + r.cls +
                                     "' is not a class");
    if (!r.regex.empty()) {
      auto re = Regex::Compile(r.regex);
      if (!re.ok())
        return Status::InvalidArgument("cache.rules: " + re.status().message());
    }
  }
  if (!c.redis_url.empty() && !c.redis_url.starts_with("redis://") &&
      !c.redis_url.starts_with("unix:"))
    return Status::InvalidArgument("cache.redis: '" + c.redis_url +
                                   "' is not redis://host:port or unix:/path");
  return Status::Ok();
}

Status ValidateRoutingConfig(const RoutingConfig& r) {
  if (r.models.empty()) return Status::Ok();
  if (r.classes.size() < 2)
    return Status::InvalidArgument(
        "routing.classes: at least two (e.g. light and full)");
  for (size_t i = 0; i < r.classes.size(); ++i) {
    const RouteClassSpec& c = r.classes[i];
    if (c.name.empty() || c.model.empty())
      return Status::InvalidArgument(
          fmt::format("routing.classes[{}]: name and model are required", i));
    if (i > 0 && !(c.max_score > r.classes[i - 1].max_score))
      return Status::InvalidArgument(fmt::format(
          "routing.classes[{}]: max-score must increase along the list", i));
  }
  if (!r.escalate_to.empty() && std::none_of(r.classes.begin(), r.classes.end(),
                                             [&](const RouteClassSpec& c) {
                                               return c.name == r.escalate_to;
                                             }))
    return Status::InvalidArgument("routing.escalate.to '" + r.escalate_to +
                                   "' is not a class");
  if (r.escalate_stream_tokens < 0 ||
      r.escalate_stream_tokens > kMaxEscalateStreamTokens ||
      r.escalate_stream_bytes < 1 ||
      r.escalate_stream_bytes > kMaxEscalateStreamBytes)
    return Status::InvalidArgument(
        fmt::format("routing.escalate: stream-tokens must be in [0, {}] and "
                    "stream-bytes in [1, {}]",
                    kMaxEscalateStreamTokens, kMaxEscalateStreamBytes));
  if (!r.refusal_regex.empty()) {
    auto re = Regex::Compile(r.refusal_regex);
    if (!re.ok())
      return Status::InvalidArgument("routing.escalate.refusal: " +
                                     re.status().message());
  }
  if (!(r.weights.tokens_full > 0))
    return Status::InvalidArgument("routing.weights.tokens-full must be > 0");
  return Status::Ok();
}

std::string NormalizeQuestion(std::string_view text) {
  std::string out;
  bool space = false;
  for (char ch : text) {
    const bool ws = ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
    if (ws) {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += (ch >= 'A' && ch <= 'Z') ? static_cast<char>(ch - 'A' + 'a') : ch;
  }
  while (!out.empty() &&
         std::string_view("?!.,;: ").find(out.back()) != std::string_view::npos)
    out.pop_back();
  return out;
}

}  // namespace redline::gateway
