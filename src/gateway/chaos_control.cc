#include "gateway/chaos_control.h"

#include <fmt/format.h>

#include <future>

namespace redline::gateway {

ChaosControl::ChaosControl(ChaosProxy& proxy, std::string host, uint16_t port)
    : proxy_(proxy), host_(std::move(host)), port_(port) {}

ChaosControl::~ChaosControl() { Stop(); }

Result<uint16_t> ChaosControl::Start() {
  http::ServerOptions o;
  o.host = host_ == "localhost" ? "127.0.0.1" : host_;
  o.port = port_;
  o.max_request_bytes = 64 * 1024;
  server_ = std::make_unique<http::Server>(
      loop_, o,
      [this](http::ServerRequest&& r, std::shared_ptr<http::ResponseWriter> w) {
        Handle(std::move(r), std::move(w));
      });
  RL_ASSIGN_OR_RETURN(port_, server_->Start());
  thread_ = std::thread([this] { loop_.Run(); });
  return port_;
}

void ChaosControl::Stop() {
  if (!thread_.joinable()) return;
  std::promise<void> stopped;
  loop_.Post([this, &stopped] {
    server_->Stop();
    stopped.set_value();
  });
  stopped.get_future().wait();
  loop_.Stop();
  thread_.join();
}

void ChaosControl::Handle(http::ServerRequest&& r,
                          std::shared_ptr<http::ResponseWriter> w) {
  const std::string_view path = r.Path();
  const std::vector<http::Header> text = {{"Content-Type", "text/plain"}};
  if (path == "/faults") {
    if (r.method == "GET") {
      w->Respond(200, text, DescribeFaults(proxy_.faults()) + "\n");
      return;
    }
    if (r.method == "PUT" || r.method == "POST") {
      auto f = ParseFaults(r.body);
      if (!f.ok()) {
        w->Respond(400, text, f.status().message() + "\n");
        return;
      }
      proxy_.SetFaults(*f);
      w->Respond(200, text, DescribeFaults(*f) + "\n");
      return;
    }
    if (r.method == "DELETE") {
      proxy_.SetFaults(Faults());
      w->Respond(200, text, "clear\n");
      return;
    }
    w->Respond(405, text, "GET, PUT, POST or DELETE\n");
    return;
  }
  if (path == "/stats" && r.method == "GET") {
    const ChaosStats s = proxy_.stats();
    w->Respond(
        200, {{"Content-Type", "application/json"}},
        fmt::format("{{\"connections\":{},\"open\":{},\"bytes_up\":{},"
                    "\"bytes_down\":{},\"resets\":{}}}",
                    s.connections, s.open, s.bytes_up, s.bytes_down, s.resets));
    return;
  }
  w->Respond(404, text, "routes: GET/PUT/DELETE /faults, GET /stats\n");
}

}  // namespace redline::gateway
