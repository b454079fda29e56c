#include "bench/testing/fake_openai_server.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <future>
#include <optional>

#include "api/error.h"
#include "api/models.h"
#include "api/request.h"
#include "api/response.h"
#include "api/server_timing.h"
#include "bench/units.h"
#include "http/sse.h"

namespace redline::bench::testing {

namespace {

// An error body's fields as the fake server sends them.
api::ApiError FakeError(std::string message, std::string type,
                        std::string code) {
  api::ApiError e;
  e.message = std::move(message);
  e.type = std::move(type);
  e.code = std::move(code);
  return e;
}

constexpr int64_t kUs = 1000;

// KV positions the fake server pretends to hold, for kv_cache_usage_perc.
constexpr double kFakeKvPositions = 2048;

// A Prometheus histogram in seconds (loop thread only).
struct FakeHistogram {
  std::vector<double> bounds;
  std::vector<uint64_t> counts;  // per bucket, +Inf last
  double sum = 0;
  uint64_t count = 0;

  explicit FakeHistogram(std::vector<double> b)
      : bounds(std::move(b)), counts(bounds.size() + 1, 0) {}
  void Observe(double v) {
    size_t i = 0;
    while (i < bounds.size() && v > bounds[i]) ++i;
    counts[i]++;
    sum += v;
    count++;
  }
  std::string Render(const std::string& name, const std::string& labels) const {
    std::string out = fmt::format("# TYPE {} histogram\n", name);
    uint64_t cum = 0;
    for (size_t i = 0; i <= bounds.size(); ++i) {
      cum += counts[i];
      out += fmt::format(
          "{}_bucket{{{},le=\"{}\"}} {}\n", name, labels,
          i < bounds.size() ? fmt::format("{}", bounds[i]) : "+Inf", cum);
    }
    out += fmt::format("{}_sum{{{}}} {}\n{}_count{{{}}} {}\n", name, labels,
                       sum, name, labels, count);
    return out;
  }
};

}  // namespace

struct FakeOpenAiServer::Metrics {
  double prompt_tokens = 0;
  double generation_tokens = 0;
  FakeHistogram ttft{{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15,
                      0.2, 0.25, 0.3, 0.4, 0.5, 0.75, 1, 2, 5, 10}};
  FakeHistogram e2e{{0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06,
                     0.08,  0.1,    0.15,  0.2,  0.25, 0.3,  0.4,
                     0.5,   0.75,   1,     2,    5,    10}};
};

Result<FakePlan> FakePlan::Parse(std::string_view text, const FakePlan& base) {
  FakePlan p = base;
  while (!text.empty()) {
    size_t semi = text.find(';');
    std::string_view item = Trim(text.substr(0, semi));
    text = semi == std::string_view::npos ? std::string_view()
                                          : text.substr(semi + 1);
    if (item.empty()) continue;
    size_t eq = item.find('=');
    if (eq == std::string_view::npos)
      return Status::InvalidArgument("plan item needs key=value: " +
                                     std::string(item));
    std::string_view key = Trim(item.substr(0, eq)),
                     value = Trim(item.substr(eq + 1));
    auto dur = [&](int64_t* out) -> Status {
      RL_ASSIGN_OR_RETURN(int64_t ns, ParseDurationNs(value));
      *out = ns / 1000;
      return Status::Ok();
    };
    auto num = [&](int* out) -> Status {
      RL_ASSIGN_OR_RETURN(double v, ParseNumber(value));
      *out = static_cast<int>(v);
      return Status::Ok();
    };
    auto flag = [&](bool* out) {
      *out = value == "1" || value == "true";
      return Status::Ok();
    };
    Status st;
    if (key == "ttft") {
      st = dur(&p.ttft_us);
    } else if (key == "gap") {
      st = dur(&p.gap_us);
    } else if (key == "ping") {
      st = dur(&p.ping_us);
    } else if (key == "tokens") {
      st = num(&p.tokens);
    } else if (key == "reasoning") {
      st = num(&p.reasoning);
    } else if (key == "tokens_per_chunk") {
      st = num(&p.tokens_per_chunk);
    } else if (key == "status") {
      st = num(&p.status);
    } else if (key == "disconnect_after") {
      st = num(&p.disconnect_after);
    } else if (key == "error_after") {
      st = num(&p.error_after);
    } else if (key == "bad_json_after") {
      st = num(&p.bad_json_after);
    } else if (key == "stall_after") {
      st = num(&p.stall_after);
    } else if (key == "no_done") {
      st = flag(&p.no_done);
    } else if (key == "no_finish") {
      st = flag(&p.no_finish);
    } else if (key == "usage") {
      st = flag(&p.usage);
    } else if (key == "drop") {
      st = flag(&p.drop_before_headers);
    } else if (key == "unaccounted") {
      st = dur(&p.unaccounted_us);
    } else if (key == "gateway") {
      st = dur(&p.gateway_us);
    } else if (key == "timings") {
      st = flag(&p.timings);
    } else if (key == "prefill_per_token") {
      auto ns = ParseDurationNs(value);
      st = ns.ok() ? Status::Ok() : ns.status();
      if (ns.ok()) p.prefill_ns_per_token = *ns;
    } else if (key == "gap_growth") {
      auto v = ParseNumber(value);
      st = v.ok() ? Status::Ok() : v.status();
      if (v.ok()) p.gap_growth = *v;
    } else {
      return Status::InvalidArgument("unknown plan key '" + std::string(key) +
                                     "'");
    }
    RL_RETURN_IF_ERROR(st);
  }
  return p;
}

// One streamed response in progress (loop thread only).
struct FakeOpenAiServer::Stream
    : std::enable_shared_from_this<FakeOpenAiServer::Stream> {
  FakeOpenAiServer* server = nullptr;
  std::shared_ptr<http::ResponseWriter> writer;
  std::unique_ptr<http::Timer> timer;
  FakePlan plan;
  api::ApiKind kind = api::ApiKind::kChat;
  api::ResponseIdentity id;
  bool include_usage = false;
  int64_t t0_ns = 0;
  int64_t t_received_ns = 0;
  int next = 0;  // next chunk index
  int64_t last_write_ns = 0;
  size_t truth = SIZE_MAX;  // index into truths_, SIZE_MAX when not recorded
  int prompt_tokens = 0;
  int64_t end_ns = 0;  // planned end of service (ChunkTime of the last)
  int64_t first_write_ns = 0, last_chunk_ns = 0;  // content/reasoning chunks

  // The true breakdown so far (ms), as sent and recorded.
  api::ServerTimings Timings(int64_t now_ns) const {
    api::ServerTimings t;
    const int64_t first = first_write_ns != 0
                              ? first_write_ns
                              : std::min(now_ns, t0_ns + plan.ttft_us * kUs);
    const int64_t last = last_chunk_ns != 0 ? last_chunk_ns : now_ns;
    t.queue_ms =
        static_cast<double>(t0_ns - t_received_ns -
                            (plan.unaccounted_us + plan.gateway_us) * kUs) /
        1e6;
    t.prefill_ms =
        static_cast<double>(std::max<int64_t>(0, first - t0_ns)) / 1e6;
    t.ttft_ms = static_cast<double>(first - t_received_ns) / 1e6;
    t.decode_ms = static_cast<double>(std::max<int64_t>(0, last - first)) / 1e6;
    t.e2e_ms = static_cast<double>(now_ns - t_received_ns) / 1e6;
    return t;
  }

  void RecordTimings(const api::ServerTimings& t) {
    if (truth == SIZE_MAX) return;
    std::lock_guard<std::mutex> lock(server->mu_);
    server->truths_[truth].queue_ms = t.queue_ms;
    server->truths_[truth].prefill_ms = t.prefill_ms;
    server->truths_[truth].decode_ms = t.decode_ms;
  }

  int total() const { return plan.reasoning + plan.tokens; }

  // The server owns every Stream in progress (streams_); timer callbacks
  // hold weak pointers, so a stopped server leaves no cycles behind.
  void Done() { server->streams_.erase(this); }
  int64_t ChunkTime(int j) const {
    return t0_ns + (plan.ttft_us + static_cast<int64_t>(j) * plan.gap_us) * kUs;
  }

  void Write(std::string data) {
    last_write_ns = http::NowNs();
    writer->Write(std::move(data));
  }

  void RecordChunk(int64_t t) {
    if (FakeOpenAiServer::Metrics* m = server->metrics_.get()) {
      if (next == 0)
        m->ttft.Observe(static_cast<double>(t - t_received_ns) / 1e9);
      m->generation_tokens += plan.tokens_per_chunk;
    }
    if (truth == SIZE_MAX) return;
    std::lock_guard<std::mutex> lock(server->mu_);
    server->truths_[truth].chunk_write_ns.push_back(t);
  }

  void RecordDone(int64_t t, int64_t tokens) {
    FakeOpenAiServer::Metrics* m = server->metrics_.get();
    if (m != nullptr && tokens > 0)
      m->e2e.Observe(static_cast<double>(t - t_received_ns) / 1e9);
    if (truth == SIZE_MAX) return;
    std::lock_guard<std::mutex> lock(server->mu_);
    server->truths_[truth].t_done_ns = t;
    server->truths_[truth].completion_tokens = tokens;
  }

  void Arm() {
    if (writer->peer_closed()) {
      Done();
      return;
    }
    if (next >= total() && total() > 0) {
      // The trailer (finish, usage, [DONE]) follows the last chunk at once.
      Step();
      return;
    }
    const int64_t due = ChunkTime(next);
    std::weak_ptr<Stream> weak = weak_from_this();
    if (plan.ping_us > 0) {
      const int64_t ping_at = last_write_ns + plan.ping_us * kUs;
      if (ping_at < due) {
        timer->ExpireAt(ping_at, [weak] {
          if (auto self = weak.lock()) {
            self->Write(http::SseComment("ping"));
            self->Arm();
          }
        });
        return;
      }
    }
    timer->ExpireAt(due, [weak] {
      if (auto self = weak.lock()) self->Step();
    });
  }

  void Step() {
    if (writer->peer_closed()) {
      Done();
      return;
    }
    const int j = next;
    if (j == plan.disconnect_after) {
      writer->Abort();
      Done();
      return;
    }
    if (j == plan.stall_after)
      return;  // keep the connection open, send nothing
    if (j == plan.error_after) {
      Write(http::SseData(api::BuildErrorBody(
          FakeError("injected failure", "server_error", "500"))));
      writer->End();
      RecordDone(http::NowNs(), 0);
      Done();
      return;
    }
    if (j == plan.bad_json_after) Write("data: {\"choices\": [ oops\n\n");
    if (j < total()) {
      api::ChunkChoice f;
      const std::string word = fmt::format(" w{}", j);
      if (j < plan.reasoning) {
        f.reasoning = word;
        if (kind == api::ApiKind::kCompletions) f.text = word;
      } else {
        f.text = word;
      }
      const int64_t t = http::NowNs();
      Write(http::SseData(api::BuildChunk(kind, id, {f})));
      if (first_write_ns == 0) first_write_ns = t;
      last_chunk_ns = t;
      RecordChunk(t);
      next++;
      Arm();
      return;
    }
    // After the last chunk: finish, usage, [DONE].
    const int64_t tokens =
        static_cast<int64_t>(total()) * plan.tokens_per_chunk;
    if (!plan.no_finish) {
      api::ChunkChoice f;
      f.finish_reason = "stop";
      if (plan.timings) {
        const api::ServerTimings t = Timings(http::NowNs());
        Write(http::SseData(api::BuildChunk(kind, id, {f}, nullptr, &t)));
        RecordTimings(t);
      } else {
        Write(http::SseData(api::BuildChunk(kind, id, {f})));
      }
    }
    if (include_usage && plan.usage) {
      api::Usage u;
      u.prompt_tokens = prompt_tokens;
      u.completion_tokens = tokens;
      Write(http::SseData(api::BuildChunk(kind, id, {}, &u)));
    }
    if (!plan.no_done) Write(http::SseData("[DONE]"));
    writer->End();
    RecordDone(http::NowNs(), tokens);
    Done();
  }
};

FakeOpenAiServer::FakeOpenAiServer(FakeServerOptions options)
    : options_(std::move(options)) {
  if (!options_.metrics_prefix.empty()) metrics_ = std::make_unique<Metrics>();
}

FakeOpenAiServer::~FakeOpenAiServer() { Stop(); }

Result<uint16_t> FakeOpenAiServer::Start(uint16_t port) {
  http::ServerOptions so;
  so.port = port;
  so.tls_cert_file = options_.tls_cert_file;
  so.tls_key_file = options_.tls_key_file;
  so.reuse_port = options_.reuse_port;
  server_ = std::make_unique<http::Server>(
      loop_, so,
      [this](http::ServerRequest&& r, std::shared_ptr<http::ResponseWriter> w) {
        Handle(std::move(r), std::move(w));
      });
  RL_ASSIGN_OR_RETURN(port_, server_->Start());
  keepalive_ = std::make_unique<http::Timer>(loop_);
  thread_ = std::thread([this] { loop_.Run(); });
  return port_;
}

void FakeOpenAiServer::Stop() {
  if (!thread_.joinable()) return;
  std::promise<void> stopped;
  loop_.Post([this, &stopped] {
    server_->Stop();
    streams_.clear();  // cancels their timers
    keepalive_.reset();
    stopped.set_value();
  });
  stopped.get_future().wait();
  loop_.Stop();
  thread_.join();
}

std::string FakeOpenAiServer::BaseUrl() const {
  const bool tls = !options_.tls_cert_file.empty();
  return fmt::format("{}://127.0.0.1:{}/v1", tls ? "https" : "http", port_);
}

std::vector<FakeTruth> FakeOpenAiServer::Truths() const {
  std::lock_guard<std::mutex> lock(mu_);
  return truths_;
}

uint64_t FakeOpenAiServer::requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return truths_.size();
}

std::string FakeOpenAiServer::SlotGauges() const {
  if (options_.slots <= 0) return "";
  const int64_t now = http::NowNs();
  int64_t waiting = 0, running = 0;
  for (const auto& [ptr, stream] : streams_)
    (stream->t0_ns > now ? waiting : running)++;
  return fmt::format(
      "# TYPE fake_num_requests_waiting gauge\nfake_num_requests_waiting {}\n"
      "# TYPE fake_num_requests_running gauge\nfake_num_requests_running {}\n",
      waiting, running);
}

std::string FakeOpenAiServer::ServerExposition() const {
  const std::string& p = options_.metrics_prefix;
  const int64_t now = http::NowNs();
  int64_t waiting = 0, running = 0;
  double held = 0;
  for (const auto& [ptr, stream] : streams_) {
    if (stream->t0_ns > now) {
      waiting++;
    } else {
      running++;
      held += stream->prompt_tokens + stream->next;
    }
  }
  const std::string model = "model_name=\"fake\"";
  std::string out;
  out += fmt::format(
      "# TYPE {0}num_requests_running gauge\n"
      "{0}num_requests_running{{{1}}} {2}\n",
      p, model, running);
  out += fmt::format(
      "# TYPE {0}num_requests_waiting gauge\n"
      "{0}num_requests_waiting{{{1}}} {2}\n",
      p, model, waiting);
  out += fmt::format(
      "# TYPE {0}kv_cache_usage_perc gauge\n"
      "{0}kv_cache_usage_perc{{{1}}} {2}\n",
      p, model, std::min(1.0, held / kFakeKvPositions));
  out += fmt::format(
      "# TYPE {0}cache_config_info gauge\n"
      "{0}cache_config_info{{{1},block_size=\"1\",num_blocks=\"{2}\"}} 1\n",
      p, model, kFakeKvPositions);
  out += fmt::format(
      "# TYPE {0}prompt_tokens_total counter\n"
      "{0}prompt_tokens_total{{{1}}} {2}\n",
      p, model, metrics_->prompt_tokens);
  out += fmt::format(
      "# TYPE {0}generation_tokens_total counter\n"
      "{0}generation_tokens_total{{{1}}} {2}\n",
      p, model, metrics_->generation_tokens);
  out += metrics_->ttft.Render(p + "time_to_first_token_seconds",
                               model + ",start=\"warm\"");
  out += metrics_->e2e.Render(p + "e2e_request_latency_seconds",
                              model + ",start=\"warm\"");
  // The process's own figures (in a test: the test binary's).
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const double cpu_s =
      static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
      static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  out += fmt::format(
      "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total "
      "{}\n",
      cpu_s);
  long pages = 0, resident = 0;
  if (std::ifstream statm("/proc/self/statm"); statm >> pages >> resident) {
    out += fmt::format(
        "# TYPE process_resident_memory_bytes gauge\n"
        "process_resident_memory_bytes {}\n",
        static_cast<double>(resident) *
            static_cast<double>(sysconf(_SC_PAGESIZE)));
  }
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  out += fmt::format("# TYPE process_max_fds gauge\nprocess_max_fds {}\n",
                     static_cast<double>(rl.rlim_cur));
  return out;
}

std::string FakeOpenAiServer::ExtraMetrics() const {
  return options_.extra_metrics ? options_.extra_metrics() : std::string();
}

std::string FakeOpenAiServer::KvGauge() const {
  if (options_.kv_capacity_tokens <= 0) return "";
  const int64_t now = http::NowNs();
  int64_t held = 0;
  for (const auto& [ptr, stream] : streams_) {
    if (stream->t0_ns <= now)
      held +=
          stream->prompt_tokens + stream->plan.reasoning + stream->plan.tokens;
  }
  const double usage =
      std::min(1.0, static_cast<double>(held) /
                        static_cast<double>(options_.kv_capacity_tokens));
  return fmt::format(
      "# TYPE fake_kv_cache_usage_perc gauge\nfake_kv_cache_usage_perc {}\n",
      usage);
}

void FakeOpenAiServer::Handle(http::ServerRequest&& request,
                              std::shared_ptr<http::ResponseWriter> writer) {
  const std::string_view path = request.Path();
  if (request.method == "GET") {
    if (path == "/v1/models") {
      api::ModelCard card;
      card.id = "fake";
      writer->Respond(200, {{"Content-Type", "application/json"}},
                      api::BuildModelList({card}));
    } else if (path == "/health" || path == "/readyz") {
      writer->Respond(200, {{"Content-Type", "application/json"}},
                      "{\"status\":\"ok\"}");
    } else if (path == "/metrics" && metrics_) {
      writer->Respond(200, {{"Content-Type", "text/plain; version=0.0.4"}},
                      ServerExposition() + ExtraMetrics());
    } else if (path == "/metrics") {
      const uint64_t n = next_index_;
      writer->Respond(
          200, {{"Content-Type", "text/plain; version=0.0.4"}},
          fmt::format(
              "# TYPE fake_requests_total counter\nfake_requests_total {}\n"
              "# TYPE fake_queue_depth "
              "gauge\nfake_queue_depth{{model=\"fake\"}} {}\n{}{}{}",
              n, n % 7, KvGauge(), SlotGauges(), ExtraMetrics()));
    } else {
      writer->Respond(404, {{"Content-Type", "application/json"}},
                      api::BuildErrorBody(FakeError(
                          "no route", "invalid_request_error", "404")));
    }
    return;
  }
  const uint64_t index = next_index_++;
  FakePlan plan = options_.default_plan;
  if (std::string_view h = request.HeaderValue("X-Fake-Plan"); !h.empty()) {
    // Header values override the default plan key by key.
    auto parsed = FakePlan::Parse(h, options_.default_plan);
    if (!parsed.ok()) {
      writer->Respond(
          400, {{"Content-Type", "application/json"}},
          api::BuildErrorBody(FakeError(parsed.status().message(),
                                        "invalid_request_error", "400")));
      return;
    }
    plan = *parsed;
  }
  if (options_.plan_fn) plan = options_.plan_fn(index, request, plan);

  const bool chat = path.find("chat/completions") != std::string_view::npos;
  const bool completions =
      !chat && path.find("completions") != std::string_view::npos;
  if (!chat && !completions) {
    writer->Respond(404, {{"Content-Type", "application/json"}},
                    api::BuildErrorBody(
                        FakeError("no route", "invalid_request_error", "404")));
    return;
  }
  const api::ApiKind kind =
      chat ? api::ApiKind::kChat : api::ApiKind::kCompletions;
  auto parsed = api::ParseRequest(request.body, kind);
  if (!parsed.ok()) {
    writer->Respond(
        400, {{"Content-Type", "application/json"}},
        api::BuildErrorBody(FakeError(parsed.status().message(),
                                      "invalid_request_error", "400")));
    return;
  }

  auto s = std::make_shared<Stream>();
  s->server = this;
  s->writer = writer;
  s->plan = plan;
  s->kind = kind;
  s->id = {fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", index),
           parsed->model.empty() ? "fake" : parsed->model, 1700000000};
  s->include_usage = parsed->include_usage;
  s->t0_ns = request.t_received_ns;
  s->t_received_ns = request.t_received_ns;
  size_t prompt_chars = 0;
  for (const auto& m : parsed->messages) prompt_chars += m.content.size();
  prompt_chars += parsed->prompt.size();
  s->prompt_tokens = static_cast<int>(prompt_chars / 4);
  // Prefill cost of the prompt, on top of the plan's fixed ttft.
  s->plan.ttft_us += static_cast<int64_t>(s->prompt_tokens) *
                     s->plan.prefill_ns_per_token / kUs;
  auto service_ns = [&] {
    return (s->plan.ttft_us + static_cast<int64_t>(std::max(
                                  0, s->plan.reasoning + s->plan.tokens - 1)) *
                                  s->plan.gap_us) *
           kUs;
  };
  if (options_.slots > 0) {
    // First come first served on the slot that frees first.
    if (slot_free_ns_.empty())
      slot_free_ns_.assign(static_cast<size_t>(options_.slots), 0);
    auto slot = std::min_element(slot_free_ns_.begin(), slot_free_ns_.end());
    s->t0_ns = std::max(request.t_received_ns, *slot);
  }
  s->t0_ns += (s->plan.unaccounted_us + s->plan.gateway_us) * kUs;
  if (s->plan.gap_growth > 0) {
    // Requests in service when this one starts, itself included.
    int64_t running = 1;
    for (const auto& [ptr, other] : streams_)
      running += other->t0_ns <= s->t0_ns && s->t0_ns < other->end_ns;
    s->plan.gap_us = static_cast<int64_t>(
        static_cast<double>(s->plan.gap_us) *
        (1 + s->plan.gap_growth * static_cast<double>(running - 1)));
  }
  s->end_ns = s->t0_ns + service_ns();
  if (options_.slots > 0)
    *std::min_element(slot_free_ns_.begin(), slot_free_ns_.end()) = s->end_ns;
  s->last_write_ns = request.t_received_ns;
  if (metrics_) metrics_->prompt_tokens += s->prompt_tokens;
  if (options_.record_truth) {
    std::lock_guard<std::mutex> lock(mu_);
    FakeTruth t;
    t.index = index;
    t.t_received_ns = request.t_received_ns;
    t.path = std::string(path);
    t.body = request.body;
    t.traceparent = std::string(request.HeaderValue("traceparent"));
    t.prompt_tokens = s->prompt_tokens;
    s->truth = truths_.size();
    truths_.push_back(std::move(t));
  }

  if (plan.drop_before_headers) {
    writer->Abort();
    return;
  }
  s->timer = std::make_unique<http::Timer>(loop_);
  streams_[s.get()] = s;
  std::weak_ptr<Stream> weak = s;
  if (plan.status < 200 || plan.status > 299) {
    auto respond = [weak] {
      auto self = weak.lock();
      if (!self) return;
      self->writer->Respond(
          self->plan.status, {{"Content-Type", "application/json"}},
          api::BuildErrorBody(FakeError("injected status", "server_error",
                                        std::to_string(self->plan.status))));
      self->RecordDone(http::NowNs(), 0);
      self->Done();
    };
    if (plan.ttft_us > 0) {
      s->timer->ExpireAt(s->ChunkTime(0), respond);
    } else {
      respond();
    }
    return;
  }
  if (!parsed->stream) {
    auto respond = [weak] {
      auto self = weak.lock();
      if (!self) return;
      const int n = self->total();
      std::string content;
      for (int j = 0; j < n; ++j) content += fmt::format(" w{}", j);
      api::Usage u;
      u.prompt_tokens = self->prompt_tokens;
      u.completion_tokens =
          static_cast<int64_t>(n) * self->plan.tokens_per_chunk;
      api::FinalChoice choice;
      choice.text = std::move(content);
      choice.finish_reason = "stop";
      std::vector<http::Header> headers = {
          {"Content-Type", "application/json"}};
      std::optional<api::ServerTimings> t;
      if (self->plan.timings) {
        t = self->Timings(http::NowNs());
        std::string timing = api::FormatServerTiming(*t);
        if (self->plan.gateway_us > 0)
          timing = api::AppendServerTiming(
              timing, "gateway",
              static_cast<double>(self->plan.gateway_us) / 1000);
        headers.push_back({"Server-Timing", std::move(timing)});
        self->RecordTimings(*t);
      }
      self->writer->Respond(200, headers,
                            api::BuildResponse(self->kind, self->id, {choice},
                                               u, t ? &*t : nullptr));
      self->RecordDone(http::NowNs(), u.completion_tokens);
      self->Done();
    };
    const int64_t due = s->ChunkTime(std::max(0, s->total() - 1));
    if (due <= http::NowNs()) {
      respond();
    } else {
      s->timer->ExpireAt(due, respond);
    }
    return;
  }
  writer->BeginStream(200, {{"Content-Type", "text/event-stream"},
                            {"Cache-Control", "no-cache"},
                            {"X-Accel-Buffering", "no"}});
  if (kind == api::ApiKind::kChat) {
    api::ChunkChoice role;
    role.role = true;
    s->Write(http::SseData(api::BuildChunk(kind, s->id, {role})));
  }
  s->Arm();
}

}  // namespace redline::bench::testing
