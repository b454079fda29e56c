#include "server/server_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <type_traits>

#include "base/thread_pool.h"
#include "model/arch/kv_cache.h"
#include "model/chat/chat_template.h"

namespace redline::server {
namespace {

std::string LongName(std::string_view names) {
  const size_t pos = names.rfind("--");
  return std::string(pos == std::string_view::npos ? names
                                                   : names.substr(pos + 2));
}

std::string Trim(std::string s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return {};
  const auto last = s.find_last_not_of(" \t\r\n");
  return s.substr(first, last - first + 1);
}

}  // namespace

Status FinalizeConfig(ServerConfig* c) {
  if (c->models.empty()) {
    if (c->model_paths.empty())
      return Status::InvalidArgument(
          "--model is required (a GGUF file; repeat -m for several models, or "
          "list them under models: in a YAML --config)");
    if (c->model_aliases.size() > c->model_paths.size())
      return Status::InvalidArgument(fmt::format(
          "--alias is given {} times but --model only {}: give one alias per "
          "model, in the same order",
          c->model_aliases.size(), c->model_paths.size()));
    for (size_t i = 0; i < c->model_paths.size(); ++i) {
      ModelSpec m;
      m.path = c->model_paths[i];
      if (i < c->model_aliases.size()) m.name = c->model_aliases[i];
      c->models.push_back(std::move(m));
    }
  }
  if (c->port < 0 || c->port > 65535)
    return Status::InvalidArgument("--port must be in [0, 65535]");
  if (c->parallel < 1 || c->parallel > 256)
    return Status::InvalidArgument("--parallel must be in [1, 256]");
  if (c->ctx_tokens != 0 && c->ctx_tokens < 16)
    return Status::InvalidArgument("--ctx must be 0 or >= 16");
  if (c->batch_tokens < 1)
    return Status::InvalidArgument("--batch must be >= 1");
  if (c->threads < 0) return Status::InvalidArgument("--threads must be >= 0");
  if (c->max_queued_requests < 0)
    return Status::InvalidArgument("--max-queued-requests must be >= 0");
  if (c->max_queued_tokens < 0)
    return Status::InvalidArgument("--max-queued-tokens must be >= 0");
  if (c->max_body_bytes < 1024)
    return Status::InvalidArgument("--max-body-bytes must be >= 1024");
  for (const auto& [name, value] :
       {std::pair<const char*, double>{"--header-timeout", c->header_timeout_s},
        {"--body-timeout", c->body_timeout_s},
        {"--idle-timeout", c->idle_timeout_s},
        {"--write-timeout", c->write_timeout_s}}) {
    if (!(value >= 0))
      return Status::InvalidArgument(fmt::format("{} must be >= 0", name));
  }
  if (c->max_connections < 0)
    return Status::InvalidArgument("--max-connections must be >= 0");
  if (!(c->queue_budget_s >= 0))
    return Status::InvalidArgument("--queue-budget must be >= 0");
  if (c->draft_max < 1 || c->draft_max > 64)
    return Status::InvalidArgument("--draft-max must be in [1, 64]");
  if (c->trace_sample != -1 && !(c->trace_sample >= 0 && c->trace_sample <= 1))
    return Status::InvalidArgument("--trace-sample must be in [0, 1]");
  if (!(c->request_timeout_s >= 0))
    return Status::InvalidArgument("--request-timeout must be >= 0");
  if (!(c->sse_ping_interval_s > 0))
    return Status::InvalidArgument("--sse-ping-interval must be > 0");
  if (!(c->shutdown_grace_s >= 0))
    return Status::InvalidArgument("--shutdown-grace must be >= 0");
  if (c->max_n < 1) return Status::InvalidArgument("--max-n must be >= 1");
  if (auto kv = model::ParseKvType(c->kv_type); !kv.ok()) {
    return Status::InvalidArgument("--kv-type: " + kv.status().message());
  }
  if (c->metrics_prefix != "redline:" && c->metrics_prefix != "redline_") {
    return Status::InvalidArgument(
        "--metrics-prefix must be \"redline:\" or \"redline_\"");
  }
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
  for (const std::string& k : c->api_keys) {
    if (k.empty())
      return Status::InvalidArgument("--api-key must not be empty");
  }
  if (c->template_time_budget_ms < 1)
    return Status::InvalidArgument("--template-time-budget must be >= 1");
  if (c->template_memory_budget_mb < 1)
    return Status::InvalidArgument("--template-memory-budget must be >= 1");
  if (!(c->sampling.temperature >= 0))
    return Status::InvalidArgument("--temp must be >= 0");
  if (!(c->sampling.top_p > 0 && c->sampling.top_p <= 1))
    return Status::InvalidArgument("--top-p must be in (0, 1]");
  if (!(c->sampling.min_p >= 0 && c->sampling.min_p <= 1))
    return Status::InvalidArgument("--min-p must be in [0, 1]");
  if (c->sampling.top_k < -1)
    return Status::InvalidArgument("--top-k must be >= -1");
  if (!(c->sampling.repetition_penalty > 0))
    return Status::InvalidArgument("--repeat-penalty must be > 0");
  if (c->sampling.seed < -1)
    return Status::InvalidArgument("--seed must be >= -1");

  // Each model inherits what it does not set; the thread budget is split
  // evenly between the models without a count of their own.
  const int total_threads = c->threads > 0 ? c->threads : PhysicalCoreCount();
  int explicit_threads = 0, shared = 0;
  for (const ModelSpec& m : c->models) {
    if (m.threads > 0) {
      explicit_threads += m.threads;
    } else {
      ++shared;
    }
  }
  const int share =
      shared > 0 ? std::max(1, (total_threads - explicit_threads) / shared) : 0;
  std::vector<std::string> names;
  for (ModelSpec& m : c->models) {
    if (m.path.empty())
      return Status::InvalidArgument("every model needs a path (-m FILE)");
    if (m.name.empty()) m.name = DefaultModelName(m.path);
    if (m.threads <= 0) m.threads = share;
    if (m.ctx_tokens == 0) m.ctx_tokens = c->ctx_tokens;
    if (m.parallel == 0) m.parallel = c->parallel;
    if (m.batch_tokens == 0) m.batch_tokens = c->batch_tokens;
    if (m.kv_type.empty()) m.kv_type = c->kv_type;
    if (m.draft_model.empty()) m.draft_model = c->draft_model;
    if (m.chat_template_file.empty() && m.chat_template_name.empty()) {
      m.chat_template_file = c->chat_template_file;
      m.chat_template_name = c->chat_template_name;
    }
    // --chat-template takes a built-in name or a Jinja file, as in `run`
    // and `chat-template`.
    if (!m.chat_template_name.empty() &&
        !model::chat::BuiltinChatTemplate(m.chat_template_name).ok() &&
        std::filesystem::is_regular_file(m.chat_template_name)) {
      m.chat_template_file = std::move(m.chat_template_name);
      m.chat_template_name.clear();
    }
    const std::string where = "model '" + m.name + "'";
    if (m.parallel < 1 || m.parallel > 256)
      return Status::InvalidArgument(where + ": parallel must be in [1, 256]");
    if (m.ctx_tokens != 0 && m.ctx_tokens < 16)
      return Status::InvalidArgument(where + ": ctx must be 0 or >= 16");
    if (m.batch_tokens < 1)
      return Status::InvalidArgument(where + ": batch must be >= 1");
    if (auto kv = model::ParseKvType(m.kv_type); !kv.ok())
      return Status::InvalidArgument(where +
                                     ": kv-type: " + kv.status().message());
    names.push_back(m.name);
    for (const std::string& a : m.aliases) names.push_back(a);
  }
  std::sort(names.begin(), names.end());
  for (size_t i = 1; i < names.size(); ++i) {
    if (names[i] == names[i - 1])
      return Status::InvalidArgument(
          fmt::format("two models are served as '{}': give each its own "
                      "--alias",
                      names[i]));
  }
  return Status::Ok();
}

std::string DescribeConfig(ServerConfig config) {
  std::string out;
  VisitServerFlags(config, [&](auto& field, std::string_view names,
                               std::string_view, FlagKind kind) {
    using T = std::decay_t<decltype(field)>;
    std::string value;
    if constexpr (std::is_same_v<T, std::vector<std::string>>) {
      value = kind == FlagKind::kSecret
                  ? fmt::format("[{} key(s)]", field.size())
                  : fmt::format("[{}]", fmt::join(field, ", "));
    } else if constexpr (std::is_same_v<T, std::string>) {
      value = kind == FlagKind::kSecret && !field.empty() ? "***"
                                                          : "\"" + field + "\"";
    } else {
      value = fmt::format("{}", field);
    }
    out += fmt::format("  {} = {}\n", LongName(names), value);
  });
  for (const ModelSpec& m : config.models) {
    out += fmt::format(
        "  model {}: {} (threads {}, ctx {}, parallel {}, batch {}, kv "
        "{}{}{})\n",
        m.name, m.path, m.threads, m.ctx_tokens, m.parallel, m.batch_tokens,
        m.kv_type,
        m.draft_model.empty() ? std::string()
                              : fmt::format(", draft model {}", m.draft_model),
        m.aliases.empty()
            ? std::string()
            : fmt::format(", aliases {}", fmt::join(m.aliases, ",")));
  }
  return out;
}

std::string DefaultModelName(std::string_view path) {
  std::string name(path);
  const size_t slash = name.find_last_of('/');
  if (slash != std::string::npos) name = name.substr(slash + 1);
  if (name.size() > 5 && name.ends_with(".gguf")) name.resize(name.size() - 5);
  return name.empty() ? "model" : name;
}

Status ParseConfigYaml(
    const std::string& path, std::vector<ModelSpec>* models,
    std::vector<std::pair<std::string, std::vector<std::string>>>* flags) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(
        fmt::format("--config {}: {}", path, e.what()));
  }
  if (!root.IsMap())
    return Status::InvalidArgument(
        "--config " + path + ": the file must be a mapping of flag names");
  auto where = [&](const YAML::Node& n, const std::string& key) {
    return fmt::format("--config {}:{}: {}", path, n.Mark().line + 1, key);
  };
  try {
    for (const auto& kv : root) {
      const std::string key = kv.first.as<std::string>();
      const YAML::Node& v = kv.second;
      if (key != "models") {
        std::vector<std::string> values;
        if (v.IsSequence()) {
          for (const auto& x : v) values.push_back(x.as<std::string>());
        } else if (v.IsScalar()) {
          values.push_back(v.as<std::string>());
        } else {
          return Status::InvalidArgument(where(v, key) +
                                         " must be a value or a list");
        }
        flags->emplace_back(key, std::move(values));
        continue;
      }
      if (!v.IsSequence())
        return Status::InvalidArgument(where(v, key) +
                                       " must be a list of models");
      for (const auto& item : v) {
        if (!item.IsMap())
          return Status::InvalidArgument(where(item, "models") +
                                         " items must be mappings");
        ModelSpec m;
        for (const auto& f : item) {
          const std::string k = f.first.as<std::string>();
          const YAML::Node& x = f.second;
          if (k == "path" || k == "model") {
            m.path = x.as<std::string>();
          } else if (k == "name" || k == "alias") {
            m.name = x.as<std::string>();
          } else if (k == "aliases") {
            for (const auto& a : x) m.aliases.push_back(a.as<std::string>());
          } else if (k == "ctx" || k == "ctx-size") {
            m.ctx_tokens = x.as<int64_t>();
          } else if (k == "parallel") {
            m.parallel = x.as<int>();
          } else if (k == "threads") {
            m.threads = x.as<int>();
          } else if (k == "batch") {
            m.batch_tokens = x.as<int64_t>();
          } else if (k == "kv-type") {
            m.kv_type = x.as<std::string>();
          } else if (k == "chat-template") {
            m.chat_template_name = x.as<std::string>();
          } else if (k == "chat-template-file") {
            m.chat_template_file = x.as<std::string>();
          } else if (k == "draft-model") {
            m.draft_model = x.as<std::string>();
          } else {
            return Status::InvalidArgument(
                where(f.first, "models." + k) +
                ": unknown key (path, name, aliases, ctx, parallel, threads, "
                "batch, kv-type, chat-template, chat-template-file, "
                "draft-model)");
          }
        }
        if (m.path.empty())
          return Status::InvalidArgument(where(item, "models") +
                                         ": a model needs a path");
        models->push_back(std::move(m));
      }
    }
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(
        fmt::format("--config {}:{}: {}", path, e.mark.line + 1, e.msg));
  }
  return Status::Ok();
}

}  // namespace redline::server
