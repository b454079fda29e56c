#include "telemetry/tracer.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <span>

#include "base/json_escape.h"
#include "http/client.h"
#include "http/event_loop.h"
#include "http/url.h"

namespace redline::telemetry {

// Where kept traces go. Export runs on the tracer's thread only.
struct Tracer::Sink {
  virtual ~Sink() = default;
  // Returns the number of spans delivered; failures are described in *error.
  virtual int64_t Export(const std::vector<std::vector<SpanRecord>>& traces,
                         std::string* error) = 0;
  virtual void Close() {}
};

namespace {

// POSTs OTLP JSON batches with one keep-alive client on a private loop.
class OtlpSink : public Tracer::Sink {
 public:
  OtlpSink(http::ParsedUrl url, const TracerOptions& o)
      : url_(std::move(url)), o_(o) {
    http::ClientOptions co;
    co.connect_timeout_ms = o.export_timeout_ms;
    co.max_connections_per_origin = 1;
    client_ = std::make_unique<http::Client>(loop_, co);
  }

  int64_t Export(const std::vector<std::vector<SpanRecord>>& traces,
                 std::string* error) override {
    std::vector<SpanRecord> batch;
    int64_t delivered = 0;
    auto send = [&] {
      if (batch.empty()) return;
      if (Post(EncodeOtlpJson(o_.resource, batch), error))
        delivered += static_cast<int64_t>(batch.size());
      batch.clear();
    };
    for (const std::vector<SpanRecord>& t : traces) {
      for (const SpanRecord& s : t) {
        batch.push_back(s);
        if (batch.size() >= o_.max_batch_spans) send();
      }
    }
    send();
    return delivered;
  }

 private:
  struct Handler : http::ResponseHandler {
    http::EventLoop* loop = nullptr;
    int status = 0;
    std::string body;
    http::TransportResult result;
    void OnHeaders(const http::ResponseHead& h, int64_t) override {
      status = h.status;
    }
    void OnBody(std::string_view data, int64_t) override {
      if (body.size() < 4096) body.append(data.substr(0, 4096 - body.size()));
    }
    void OnComplete(const http::TransportResult& r, int64_t) override {
      result = r;
      loop->Stop();
    }
  };

  bool Post(std::string body, std::string* error) {
    Handler h;
    h.loop = &loop_;
    http::ClientRequest req;
    req.method = "POST";
    req.target = url_.target;
    req.headers.push_back({"Content-Type", "application/json"});
    for (const auto& [k, v] : o_.otlp_headers) req.headers.push_back({k, v});
    req.body = std::move(body);
    req.total_timeout_ms = o_.export_timeout_ms;
    client_->Send(url_.origin, std::move(req), &h);
    loop_.Restart();
    loop_.Run();
    if (h.result.error != http::TransportError::kNone) {
      *error =
          fmt::format("POST {}: {}", url_.origin.ToString() + url_.target,
                      h.result.detail.empty() ? "no answer" : h.result.detail);
      return false;
    }
    if (h.status < 200 || h.status >= 300) {
      *error = fmt::format("POST {}: HTTP {} {}",
                           url_.origin.ToString() + url_.target, h.status,
                           h.body.substr(0, 200));
      return false;
    }
    return true;
  }

  http::ParsedUrl url_;
  const TracerOptions& o_;
  http::EventLoop loop_;
  std::unique_ptr<http::Client> client_;
};

// Appends trace events to a file in the JSON Array Format, which viewers
// load even when the process died before the closing bracket.
class FileSink : public Tracer::Sink {
 public:
  FileSink(std::FILE* f, const TracerOptions& o) : f_(f), o_(o) {
    std::fputs("[\n", f_);
    bytes_ = 2;
  }
  ~FileSink() override { Close(); }

  int64_t Export(const std::vector<std::vector<SpanRecord>>& traces,
                 std::string* error) override {
    int64_t delivered = 0;
    for (const std::vector<SpanRecord>& t : traces) {
      std::string events = EncodeTraceEvents(t, ++lane_);
      if (bytes_ + static_cast<int64_t>(events.size()) > o_.max_file_bytes) {
        *error = fmt::format("trace file reached its bound of {} bytes",
                             o_.max_file_bytes);
        continue;
      }
      if (std::fwrite(events.data(), 1, events.size(), f_) != events.size()) {
        *error = "trace file write failed";
        continue;
      }
      bytes_ += static_cast<int64_t>(events.size());
      delivered += static_cast<int64_t>(t.size());
    }
    std::fflush(f_);
    return delivered;
  }

  void Close() override {
    if (f_ == nullptr) return;
    // The closing metadata event names the process and ends the array.
    std::string meta =
        "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,"
        "\"args\":{\"name\":" +
        JsonQuote(o_.resource.service_name) + "}}\n]\n";
    std::fwrite(meta.data(), 1, meta.size(), f_);
    std::fclose(f_);
    f_ = nullptr;
  }

 private:
  std::FILE* f_;
  const TracerOptions& o_;
  int64_t bytes_ = 0;
  int64_t lane_ = 0;
};

std::vector<std::pair<std::string, std::string>> ParseHeaderList(
    std::string_view s) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!s.empty()) {
    const size_t comma = s.find(',');
    std::string_view item = s.substr(0, comma);
    s = comma == std::string_view::npos ? std::string_view()
                                        : s.substr(comma + 1);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    auto trim = [](std::string_view v) {
      while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
      while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
      return std::string(v);
    };
    out.emplace_back(trim(item.substr(0, eq)), trim(item.substr(eq + 1)));
  }
  return out;
}

}  // namespace

std::vector<std::string> ApplyOtelEnvironment(
    TracerOptions* o, const char* (*getenv_fn)(const char*)) {
  auto get = [getenv_fn](const char* name) -> std::string {
    const char* v = getenv_fn != nullptr ? getenv_fn(name) : std::getenv(name);
    return v == nullptr ? std::string() : std::string(v);
  };
  std::vector<std::string> warnings;
  if (std::string v = get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); !v.empty()) {
    o->otlp_endpoint = v;
  } else if (std::string base = get("OTEL_EXPORTER_OTLP_ENDPOINT");
             !base.empty()) {
    while (!base.empty() && base.back() == '/') base.pop_back();
    o->otlp_endpoint = base + "/v1/traces";
  }
  if (std::string v = get("OTEL_EXPORTER_OTLP_HEADERS"); !v.empty())
    o->otlp_headers = ParseHeaderList(v);
  if (std::string v = get("OTEL_SERVICE_NAME"); !v.empty())
    o->resource.service_name = v;
  const std::string sampler = get("OTEL_TRACES_SAMPLER");
  if (sampler == "always_on" || sampler == "parentbased_always_on") {
    o->sample_ratio = 1.0;
  } else if (sampler == "always_off" || sampler == "parentbased_always_off") {
    o->sample_ratio = 0.0;
  } else if (!sampler.empty() && sampler != "traceidratio" &&
             sampler != "parentbased_traceidratio") {
    warnings.push_back(fmt::format(
        "OTEL_TRACES_SAMPLER={} is not supported; ignored", sampler));
  }
  if (std::string v = get("OTEL_TRACES_SAMPLER_ARG");
      !v.empty() &&
      (sampler.empty() || sampler.find("ratio") != std::string::npos)) {
    char* end = nullptr;
    const double r = std::strtod(v.c_str(), &end);
    if (end == v.c_str() || *end != '\0' || !(r >= 0 && r <= 1)) {
      warnings.push_back(fmt::format(
          "OTEL_TRACES_SAMPLER_ARG={} is not a ratio in [0, 1]; ignored", v));
    } else {
      o->sample_ratio = r;
    }
  }
  return warnings;
}

Result<std::unique_ptr<Tracer>> Tracer::Create(TracerOptions options) {
  if (!(options.sample_ratio >= 0 && options.sample_ratio <= 1))
    return Status::InvalidArgument(fmt::format(
        "trace sample ratio {} is not in [0, 1]", options.sample_ratio));
  if (options.max_batch_spans == 0) options.max_batch_spans = 1;
  std::unique_ptr<Tracer> t(new Tracer(std::move(options)));
  const TracerOptions& o = t->options_;
  if (!o.otlp_endpoint.empty()) {
    auto url = http::ParseUrl(o.otlp_endpoint);
    if (!url.ok())
      return Status::InvalidArgument(fmt::format(
          "OTLP endpoint {}: {}", o.otlp_endpoint, url.status().message()));
    t->sinks_.push_back(std::make_unique<OtlpSink>(std::move(*url), o));
  }
  if (!o.trace_file.empty()) {
    std::FILE* f = std::fopen(o.trace_file.c_str(), "wb");
    if (f == nullptr)
      return Status::InvalidArgument(
          fmt::format("cannot write trace file {}", o.trace_file));
    t->sinks_.push_back(std::make_unique<FileSink>(f, o));
  }
  t->thread_ = std::thread([p = t.get()] { p->Loop(); });
  return t;
}

Tracer::Tracer(TracerOptions options) : options_(std::move(options)) {}

Tracer::~Tracer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (auto& s : sinks_) s->Close();
}

RequestTrace Tracer::StartTrace(const std::optional<TraceContext>& parent,
                                std::string name, SpanKind kind,
                                int64_t start_unix_ns) const {
  return RequestTrace(parent, std::move(name), kind, start_unix_ns,
                      options_.sample_ratio);
}

bool Tracer::Finish(RequestTrace trace) {
  if (!trace.ended()) trace.End(UnixNowNs(), false, "");
  const bool keep = trace.sampled() ||
                    (options_.keep_errors && trace.error()) ||
                    (options_.keep_slower_than_ms >= 0 &&
                     trace.duration_ms() >= options_.keep_slower_than_ms);
  std::vector<SpanRecord> spans;
  if (keep) spans = trace.TakeSpans();
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.traces_finished;
    if (keep) {
      ++stats_.traces_kept;
      if (sinks_.empty()) {
        // Nowhere to send: kept but not exported (tests of the decision).
      } else if (queued_spans_ + spans.size() > options_.max_queued_spans) {
        stats_.spans_dropped_queue += static_cast<int64_t>(spans.size());
      } else {
        queued_spans_ += spans.size();
        queue_.push_back(std::move(spans));
        wake = queued_spans_ >= options_.max_batch_spans;
      }
    }
  }
  if (wake) cv_.notify_one();
  return keep;
}

void Tracer::Flush(int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.notify_one();
  idle_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                    [this] { return queue_.empty() && !exporting_; });
}

TracerStats Tracer::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void Tracer::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait_for(
        lock, std::chrono::milliseconds(options_.flush_interval_ms),
        [this] { return stop_ || queued_spans_ >= options_.max_batch_spans; });
    if (queue_.empty()) {
      idle_cv_.notify_all();
      if (stop_) return;
      continue;
    }
    std::vector<std::vector<SpanRecord>> traces;
    traces.reserve(queue_.size());
    while (!queue_.empty()) {
      traces.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    int64_t n = 0;
    for (const auto& t : traces) n += static_cast<int64_t>(t.size());
    queued_spans_ = 0;
    exporting_ = true;
    lock.unlock();
    int64_t worst_delivered = n;
    std::string error;
    for (auto& sink : sinks_) {
      std::string e;
      const int64_t delivered = sink->Export(traces, &e);
      worst_delivered = std::min(worst_delivered, delivered);
      if (!e.empty()) error = std::move(e);
    }
    lock.lock();
    exporting_ = false;
    stats_.spans_exported += worst_delivered;
    stats_.spans_dropped_export += n - worst_delivered;
    if (!error.empty()) {
      ++stats_.export_failures;
      stats_.last_export_error = std::move(error);
    }
    if (queue_.empty()) idle_cv_.notify_all();
  }
}

}  // namespace redline::telemetry
