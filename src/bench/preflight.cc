#include "bench/preflight.h"

#include <fmt/format.h>

#include <string>

#include "api/models.h"
#include "http/client.h"
#include "http/event_loop.h"
#include "http/url.h"

namespace redline::bench {
namespace {

// The first bytes of a body, printable, for an error message.
std::string Excerpt(std::string_view body) {
  std::string out;
  for (char c : body.substr(0, 80)) out += (c >= 32 && c < 127) ? c : ' ';
  return out;
}

}  // namespace

Status Preflight(const RunConfig& config, int64_t timeout_ms) {
  const std::string& base = config.base_url;
  for (std::string_view tail : {"/chat/completions", "/completions"}) {
    if (std::string_view(base).ends_with(tail)) {
      return Status::InvalidArgument(fmt::format(
          "--url {} names an endpoint; give the API base instead (--url {})",
          base, base.substr(0, base.size() - tail.size())));
    }
  }
  auto url = http::ParseUrl(base + "/models");
  if (!url.ok()) return url.status();

  struct Handler : http::ResponseHandler {
    http::EventLoop* loop = nullptr;
    http::ResponseHead head;
    std::string body;
    http::TransportResult result;
    void OnHeaders(const http::ResponseHead& h, int64_t) override { head = h; }
    void OnBody(std::string_view data, int64_t) override {
      if (body.size() < (1 << 20)) body.append(data);
    }
    void OnComplete(const http::TransportResult& r, int64_t) override {
      result = r;
      loop->Stop();
    }
  } handler;
  http::EventLoop loop;
  http::ClientOptions opts;
  opts.connect_timeout_ms = timeout_ms;
  opts.tls_verify = config.tls_verify;
  opts.tls_ca_file = config.tls_ca_file;
  http::Client client(loop, opts);
  handler.loop = &loop;
  http::ClientRequest req;
  req.method = "GET";
  req.target = url->target;
  req.total_timeout_ms = timeout_ms;
  req.headers = config.headers;
  if (!config.api_key.empty())
    req.headers.push_back({"Authorization", "Bearer " + config.api_key});
  client.Send(url->origin, std::move(req), &handler);
  loop.Run();

  const std::string where = "GET " + base + "/models";
  if (handler.result.error != http::TransportError::kNone) {
    return Status::Unavailable(fmt::format(
        "{}: the target is not reachable ({}); is the server running?", where,
        handler.result.detail.empty() ? "no answer" : handler.result.detail));
  }
  const int status = handler.head.status;
  if (status == 401 || status == 403) {
    return Status::Unavailable(
        fmt::format("{} answered {}: the server wants an API key (--api-key or "
                    "OPENAI_API_KEY)",
                    where, status));
  }
  // A server without /models answers 404, with a JSON error if it speaks
  // the API; a 404 page in HTML is a web server, not an OpenAI endpoint.
  const size_t first = handler.body.find_first_not_of(" \t\r\n");
  const bool json_like = first == std::string::npos ||
                         handler.body[first] == '{' ||
                         handler.body[first] == '[';
  if ((status >= 200 && status <= 299 &&
       !api::ParseModelIds(handler.body).ok()) ||
      (status == 404 && !json_like)) {
    return Status::InvalidArgument(fmt::format(
        "{} answered {} ({}) that is not an OpenAI models list: '{}'; is --url "
        "the API base of an OpenAI-compatible server (e.g. "
        "http://host:port/v1)?",
        where, status,
        handler.head.content_type.empty() ? "no content type"
                                          : handler.head.content_type,
        Excerpt(handler.body)));
  }
  return Status::Ok();
}

}  // namespace redline::bench
