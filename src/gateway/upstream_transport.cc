#include "gateway/upstream_transport.h"

#include <utility>

namespace redline::gateway {

struct UpstreamTransport::Lane final : http::ResponseHandler {
  Lane(UpstreamTransport* t, const http::ClientOptions& options)
      : owner(t), client(std::make_unique<http::Client>(t->loop_, options)) {}
  // The client first: its destructor completes a call in flight through
  // OnComplete, which must find this lane's fields still alive.
  ~Lane() override {
    cancelled = true;
    client.reset();
  }

  void OnHeaders(const http::ResponseHead& head, int64_t t_ns) override {
    if (sink != nullptr) sink->OnCallHeaders(head, t_ns);
  }
  void OnBody(std::string_view data, int64_t t_ns) override {
    if (sink != nullptr) sink->OnCallBody(data, t_ns);
  }
  void OnComplete(const http::TransportResult& result, int64_t t_ns) override {
    if (cancelled) return;
    CallSink* s = sink;
    sink = nullptr;
    // The lane leaves the busy set before the sink runs and becomes idle
    // only after, so calls the sink starts never land on a client that is
    // still inside its own callback.
    std::unique_ptr<Lane> self = owner->Finished(this);
    if (s != nullptr) s->OnCallComplete(result, t_ns);
    if (self) self->owner->Park(std::move(self));
  }

  UpstreamTransport* owner;
  std::unique_ptr<http::Client> client;
  CallSink* sink = nullptr;
  CallId id = 0;
  bool cancelled = false;
};

UpstreamTransport::UpstreamTransport(http::EventLoop& loop, http::Origin origin,
                                     int64_t connect_timeout_ms,
                                     size_t max_idle_lanes)
    : loop_(loop), origin_(std::move(origin)), max_idle_lanes_(max_idle_lanes) {
  options_.connect_timeout_ms = connect_timeout_ms;
  options_.max_connections_per_origin = 1;
  options_.capture_headers = true;  // Retry-After
}

UpstreamTransport::~UpstreamTransport() {
  for (auto& [id, lane] : busy_) {
    lane->sink = nullptr;
    lane->cancelled = true;
  }
  busy_.clear();
  idle_.clear();
}

UpstreamTransport::CallId UpstreamTransport::Start(http::ClientRequest request,
                                                   CallSink* sink) {
  std::unique_ptr<Lane> lane;
  if (!idle_.empty()) {
    lane = std::move(idle_.back());
    idle_.pop_back();
  } else {
    lane = std::make_unique<Lane>(this, options_);
  }
  const CallId id = next_id_++;
  lane->id = id;
  lane->sink = sink;
  Lane* raw = lane.get();
  busy_.emplace(id, std::move(lane));
  raw->client->Send(origin_, std::move(request), raw);
  return id;
}

void UpstreamTransport::Cancel(CallId id) {
  auto it = busy_.find(id);
  if (it == busy_.end()) return;
  std::shared_ptr<Lane> lane(std::move(it->second));
  busy_.erase(it);
  lane->sink = nullptr;
  lane->cancelled = true;
  // Destroying the client may run inside one of its own callbacks (a sink
  // cancelling its call from OnCallBody), so it happens from the loop.
  loop_.Post([lane] {});
}

std::unique_ptr<UpstreamTransport::Lane> UpstreamTransport::Finished(
    Lane* lane) {
  auto it = busy_.find(lane->id);
  if (it == busy_.end()) return nullptr;
  std::unique_ptr<Lane> owned = std::move(it->second);
  busy_.erase(it);
  return owned;
}

void UpstreamTransport::Park(std::unique_ptr<Lane> owned) {
  if (idle_.size() < max_idle_lanes_) {
    idle_.push_back(std::move(owned));
  } else {
    // Over the idle bound; not destroyed here (we are in its callback).
    std::shared_ptr<Lane> doomed(std::move(owned));
    doomed->cancelled = true;
    loop_.Post([doomed] {});
  }
}

}  // namespace redline::gateway
