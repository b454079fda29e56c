#include "server/server_config.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <type_traits>

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
  if (c->model_path.empty())
    return Status::InvalidArgument("--model is required");
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
  if (!(c->queue_budget_s >= 0))
    return Status::InvalidArgument("--queue-budget must be >= 0");
  if (!(c->request_timeout_s >= 0))
    return Status::InvalidArgument("--request-timeout must be >= 0");
  if (!(c->sse_ping_interval_s > 0))
    return Status::InvalidArgument("--sse-ping-interval must be > 0");
  if (!(c->shutdown_grace_s >= 0))
    return Status::InvalidArgument("--shutdown-grace must be >= 0");
  if (c->max_n < 1) return Status::InvalidArgument("--max-n must be >= 1");
  if (c->kv_type != "f16" && c->kv_type != "f32") {
    return Status::InvalidArgument("--kv-type must be \"f16\" or \"f32\"");
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
                  : fmt::format("{}", field.size());
    } else if constexpr (std::is_same_v<T, std::string>) {
      value = kind == FlagKind::kSecret && !field.empty() ? "***"
                                                          : "\"" + field + "\"";
    } else {
      value = fmt::format("{}", field);
    }
    out += fmt::format("  {} = {}\n", LongName(names), value);
  });
  return out;
}

std::string ServedModelName(const ServerConfig& config) {
  if (!config.model_alias.empty()) return config.model_alias;
  std::string name = config.model_path;
  const size_t slash = name.find_last_of('/');
  if (slash != std::string::npos) name = name.substr(slash + 1);
  if (name.size() > 5 && name.ends_with(".gguf")) name.resize(name.size() - 5);
  return name.empty() ? "model" : name;
}

}  // namespace redline::server
