// The gateway's HTTP routes: the same route table, auth and error bodies as
// redline serve (docs/SERVER.md), with completions forwarded to a pool.
#include <fmt/format.h>

#include <algorithm>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <set>

#include "api/access.h"
#include "api/models.h"
#include "api/request.h"
#include "base/logging.h"
#include "gateway/gateway_internal.h"
#include "gateway/routing_key.h"

namespace redline::gateway {
namespace {

namespace json = boost::json;

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

// Hop-by-hop headers (RFC 9110 7.6.1), the ones the transport sets, and
// the gateway's own credentials never go upstream. Accept-Encoding is
// dropped so answers come uncompressed and SSE can be cut at events.
bool Forwardable(std::string_view name) {
  static constexpr std::string_view kDropped[] = {"host",
                                                  "content-length",
                                                  "transfer-encoding",
                                                  "connection",
                                                  "keep-alive",
                                                  "proxy-connection",
                                                  "proxy-authorization",
                                                  "te",
                                                  "trailer",
                                                  "upgrade",
                                                  "expect",
                                                  "authorization",
                                                  "x-api-key",
                                                  "accept-encoding"};
  for (std::string_view d : kDropped)
    if (EqualsIgnoreCase(name, d)) return false;
  // The gateway's own controls (x-redline-route, x-redline-cache-*).
  return !(name.size() >= 10 &&
           EqualsIgnoreCase(name.substr(0, 10), "x-redline-"));
}

}  // namespace

Gateway::Impl::RouteInfo Gateway::Impl::Classify(std::string_view path) {
  if (path == "/v1/chat/completions" || path == "/chat/completions")
    return {Endpoint::kChat, true, true};
  if (path == "/v1/completions" || path == "/completions")
    return {Endpoint::kCompletions, true, true};
  if (path == "/v1/models" || path == "/models" ||
      path.starts_with("/v1/models/") || path.starts_with("/models/"))
    return {Endpoint::kModels, false, true};
  if (path == "/health" || path == "/v1/health")
    return {Endpoint::kHealth, false, false};
  if (path == "/livez") return {Endpoint::kLivez, false, false};
  if (path == "/readyz") return {Endpoint::kReadyz, false, false};
  if (path == "/metrics") return {Endpoint::kMetrics, false, false};
  // Checks its own key (cache.admin-key or the API keys).
  if (path == "/admin/cache/purge") return {Endpoint::kAdminPurge, true, false};
  return {Endpoint::kOther, false, false};
}

std::optional<api::ApiError> Gateway::Impl::Refusal(
    const http::ServerRequest& head, const RouteInfo& info) const {
  return api::RouteRefusal(
      head.method, head.Path(),
      {info.endpoint != Endpoint::kOther, info.is_post, info.needs_key},
      !info.needs_key || Authorized(head));
}

std::optional<http::EarlyResponse> Gateway::Impl::EarlyAnswer(
    const http::ServerRequest& head) {
  const RouteInfo info = Classify(head.Path());
  std::optional<api::ApiError> e = Refusal(head, info);
  if (!e) return std::nullopt;
  // Refused before the body is read: an unauthenticated client cannot make
  // the gateway hold its body.
  metrics.CountResponse("", e->http_status);
  http::EarlyResponse r;
  r.status = e->http_status;
  r.headers.push_back({"Content-Type", "application/json"});
  if (e->http_status == 401)
    r.headers.push_back({"WWW-Authenticate", "Bearer"});
  r.body = api::BuildErrorBody(*e);
  return r;
}

void Gateway::Impl::Handle(http::ServerRequest&& request,
                           std::shared_ptr<http::ResponseWriter> writer) {
  // Handlers never throw; a stray exception becomes a 500, not a dead
  // gateway.
  try {
    Route(request, writer);
  } catch (const std::exception& e) {
    RL_LOG(kError, "gateway: {} {}: internal error: {}", request.method,
           request.target, e.what());
    ReplyError(request, *writer, api::ApiError::Internal("internal error"));
  }
}

void Gateway::Impl::Route(http::ServerRequest& request,
                          const std::shared_ptr<http::ResponseWriter>& w) {
  const std::string_view path = request.Path();
  const RouteInfo info = Classify(path);
  if (std::optional<api::ApiError> e = Refusal(request, info)) {
    ReplyError(request, *w, *e);
    return;
  }
  switch (info.endpoint) {
    case Endpoint::kChat:
      HandleInference(api::ApiKind::kChat, request, w);
      return;
    case Endpoint::kCompletions:
      HandleInference(api::ApiKind::kCompletions, request, w);
      return;
    case Endpoint::kModels: {
      std::string_view id = path.substr(path.starts_with("/v1/") ? 3 : 0);
      id = id.size() > 8 ? id.substr(8) : std::string_view();  // "/models/"
      HandleModels(request, *w, id);
      return;
    }
    case Endpoint::kHealth:
      HandleReadyz(request, *w, true);
      return;
    case Endpoint::kLivez:
      Reply(request, *w, 200, R"({"status":"alive"})");
      return;
    case Endpoint::kReadyz:
      HandleReadyz(request, *w, false);
      return;
    case Endpoint::kMetrics:
      Reply(request, *w, 200, metrics.registry().RenderText(), {},
            "text/plain; version=0.0.4; charset=utf-8");
      return;
    case Endpoint::kAdminPurge:
      HandlePurge(request, w);
      return;
    case Endpoint::kOther:
      return;
  }
}

void Gateway::Impl::HandleInference(
    api::ApiKind kind, http::ServerRequest& request,
    const std::shared_ptr<http::ResponseWriter>& writer) {
  if (draining || stopped) {
    ReplyError(request, *writer,
               api::ApiError::Unavailable("the gateway is shutting down"));
    return;
  }
  // The one JSON parse of the body the loop does: it validates the request
  // exactly as redline serve would and tells the model and stream flag; the
  // parsed object is kept for the cache key, the overrides and rewrites.
  std::string param;
  boost::json::object body;
  auto parsed = api::ParseRequest(request.body, kind, &param, &body);
  if (!parsed.ok()) {
    api::ApiError e = api::ApiErrorFromStatus(parsed.status());
    e.param = param;
    ReplyError(request, *writer, e);
    return;
  }
  Dispatch(kind, request, writer, std::move(*parsed), std::move(body));
}

std::optional<Gateway::Impl::ModelTarget> Gateway::Impl::FindModel(
    std::string_view name, api::ApiError* error) {
  if (name.empty() && default_pool != nullptr)
    return ModelTarget{default_pool, nullptr};
  if (auto it = model_routes.find(std::string(name)); it != model_routes.end())
    return it->second;
  for (auto& p : pools) {
    if (!p->spec().models.empty()) continue;
    for (const auto& u : p->upstreams())
      if (std::find(u->models.begin(), u->models.end(), name) !=
          u->models.end())
        return ModelTarget{p.get(), nullptr};
  }
  if (wildcard_pool != nullptr) return ModelTarget{wildcard_pool, nullptr};
  std::vector<std::string> served;
  for (const api::ModelCard& c : ModelCards()) {
    if (served.size() == 32) {
      served.push_back("...");
      break;
    }
    served.push_back("'" + c.id + "'");
  }
  *error = api::ApiError::NotFound(
      fmt::format("The model '{}' does not exist; this gateway serves {}",
                  name.substr(0, 256),
                  served.empty() ? std::string("no models yet (none "
                                               "discovered from the upstreams)")
                                 : fmt::format("{}", fmt::join(served, ", "))),
      "model", "model_not_found");
  return std::nullopt;
}

std::vector<api::ModelCard> Gateway::Impl::ModelCards() const {
  std::vector<api::ModelCard> cards;
  std::set<std::string> seen;
  for (const auto& p : pools) {
    if (!p->spec().models.empty()) {
      for (const ModelRoute& m : p->spec().models) {
        if (m.name == "*" || !seen.insert(m.name).second) continue;
        api::ModelCard c;
        c.id = m.name;
        c.created = started_unix_s;
        for (const std::string& a : m.aliases)
          if (a != "*") c.aliases.push_back(a);
        cards.push_back(std::move(c));
      }
      continue;
    }
    for (const std::string& m : p->DiscoveredModels()) {
      if (!seen.insert(m).second) continue;
      api::ModelCard c;
      c.id = m;
      c.created = started_unix_s;
      cards.push_back(std::move(c));
    }
  }
  return cards;
}

void Gateway::Impl::HandleModels(const http::ServerRequest& request,
                                 http::ResponseWriter& writer,
                                 std::string_view id) {
  std::vector<api::ModelCard> cards = ModelCards();
  if (id.empty()) {
    Reply(request, writer, 200, api::BuildModelList(cards));
    return;
  }
  for (const api::ModelCard& c : cards) {
    if (c.id == id ||
        std::find(c.aliases.begin(), c.aliases.end(), id) != c.aliases.end()) {
      Reply(request, writer, 200, api::BuildModel(c));
      return;
    }
  }
  api::ApiError e;
  FindModel(id, &e);
  if (e.http_status != 404)
    e = api::ApiError::NotFound(
        fmt::format("The model '{}' does not exist", id.substr(0, 256)),
        "model", "model_not_found");
  ReplyError(request, writer, e);
}

void Gateway::Impl::HandleReadyz(const http::ServerRequest& request,
                                 http::ResponseWriter& writer,
                                 bool llama_cpp_shape) {
  const int64_t now = http::NowNs();
  json::object pools_json;
  bool ready = !draining && !stopped;
  std::vector<std::string> down;
  for (const auto& p : pools) {
    const int n = p->RoutableCount(now);
    json::object o;
    o["routable"] = n;
    o["upstreams"] = p->upstreams().size();
    pools_json[p->name()] = std::move(o);
    if (n == 0) {
      ready = false;
      down.push_back(p->name());
    }
  }
  if (warming) ready = false;
  if (llama_cpp_shape) {
    if (ready) {
      Reply(request, writer, 200, R"({"status":"ok"})");
    } else {
      Reply(request, writer, 503,
            api::BuildNumericCodeErrorBody(api::ApiError::Unavailable(
                draining ? "Gateway is shutting down"
                         : "No upstream available")));
    }
    return;
  }
  if (warming) ready = false;
  json::object o;
  o["status"] = ready      ? "ready"
                : draining ? "draining"
                : warming  ? "warming"
                           : "not ready";
  if (warming)
    o["warm"] = json::object{{"done", warm_done}, {"total", warm_lines.size()}};
  o["pools"] = std::move(pools_json);
  Reply(request, writer, ready ? 200 : 503, json::serialize(o));
}

bool Gateway::Impl::Authorized(const http::ServerRequest& request) const {
  return api::ApiKeyAccepted(request.HeaderValue("X-Api-Key"),
                             request.HeaderValue("Authorization"),
                             config.api_keys);
}

std::vector<http::Header> Gateway::Impl::ForwardHeaders(
    const http::ServerRequest& request) const {
  std::vector<http::Header> out;
  bool content_type = false;
  std::string forwarded_for;
  for (const http::Header& h : request.headers) {
    if (!Forwardable(h.name)) continue;
    if (EqualsIgnoreCase(h.name, "x-forwarded-for")) {
      forwarded_for = h.value;
      continue;
    }
    content_type |= EqualsIgnoreCase(h.name, "content-type");
    out.push_back(h);
  }
  if (!content_type) out.push_back({"Content-Type", "application/json"});
  if (!request.remote_address.empty()) {
    out.push_back({"X-Forwarded-For",
                   forwarded_for.empty()
                       ? request.remote_address
                       : forwarded_for + ", " + request.remote_address});
  }
  return out;
}

void Gateway::Impl::Reply(const http::ServerRequest& request,
                          http::ResponseWriter& writer, int status,
                          std::string body, std::vector<http::Header> extra,
                          std::string_view content_type) {
  extra.push_back({"Content-Type", std::string(content_type)});
  if (std::string_view rid = request.HeaderValue("X-Request-Id");
      !rid.empty() && rid.size() <= 256)
    extra.push_back({"X-Request-Id", std::string(rid)});
  writer.Respond(status, std::move(extra), std::move(body));
}

void Gateway::Impl::ReplyError(const http::ServerRequest& request,
                               http::ResponseWriter& writer,
                               const api::ApiError& error) {
  std::vector<http::Header> extra;
  if (error.retry_after_s > 0)
    extra.push_back({"Retry-After", std::to_string(error.retry_after_s)});
  if (error.http_status == 401) extra.push_back({"WWW-Authenticate", "Bearer"});
  if (error.http_status >= 500 && error.http_status != 503)
    RL_LOG(kError, "gateway: {} {} -> {}: {}", request.method, request.Path(),
           error.http_status, error.message);
  metrics.CountResponse("", error.http_status);
  Reply(request, writer, error.http_status, api::BuildErrorBody(error),
        std::move(extra));
}

}  // namespace redline::gateway
