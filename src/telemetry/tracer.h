// Tracer: decides which finished request traces to keep and exports them
// from its own thread, over OTLP/HTTP JSON and/or to a trace-event file.
//
//   auto tracer = Tracer::Create(options);          // at start-up
//   RequestTrace t = (*tracer)->StartTrace(ctx, "chat", SpanKind::kServer);
//   ...                                             // add spans
//   (*tracer)->Finish(std::move(t));                // never blocks on I/O
//
// Keeping: a trace is exported when its head decision says sampled (the
// caller's flag, or trace-id-ratio sampling at `sample_ratio` for a new
// trace), or when it ended in an error (keep_errors), or when its root
// lasted at least keep_slower_than_ms — so the rare slow or failed request
// is always there to look at, whatever the ratio.
//
// Budgets: Finish() moves the spans into a queue bounded by
// max_queued_spans under a mutex held for the move only; when the queue is
// full the trace is dropped and counted. The export thread sends batches of
// at most max_batch_spans with a total timeout of export_timeout_ms, so a
// collector that is down, slow or a blackhole costs the request path
// nothing: its spans are dropped and counted (stats()). The trace file is
// bounded by max_file_bytes.
//
// Thread-safety: StartTrace, Finish, stats are thread-safe. The destructor
// flushes what is queued (within export_timeout_ms per batch) and joins.
#ifndef REDLINE_TELEMETRY_TRACER_H_
#define REDLINE_TELEMETRY_TRACER_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/result.h"
#include "telemetry/request_trace.h"
#include "telemetry/span_json.h"

namespace redline::telemetry {

struct TracerOptions {
  ResourceInfo resource;
  double sample_ratio = 1.0;        // [0, 1], for new traces
  double keep_slower_than_ms = -1;  // < 0: off
  bool keep_errors = true;
  std::string otlp_endpoint;  // the traces URL (.../v1/traces); "" for none
  std::vector<std::pair<std::string, std::string>> otlp_headers;
  std::string trace_file;  // trace-event JSON path; "" for none
  size_t max_queued_spans = 16384;
  size_t max_batch_spans = 512;
  int64_t flush_interval_ms = 1000;
  int64_t export_timeout_ms = 2000;
  int64_t max_file_bytes = int64_t{256} << 20;
};

// Applies the standard OpenTelemetry environment variables to `options`:
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (used as is) or
// OTEL_EXPORTER_OTLP_ENDPOINT (+ "/v1/traces"), OTEL_EXPORTER_OTLP_HEADERS
// ("k=v,k2=v2"), OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER (always_on,
// always_off, traceidratio, parentbased_*) and OTEL_TRACES_SAMPLER_ARG.
// Invalid values are ignored, as the specification asks; each is described
// in the returned warnings. `getenv` is injectable for tests.
std::vector<std::string> ApplyOtelEnvironment(
    TracerOptions* options, const char* (*getenv_fn)(const char*) = nullptr);

// True when `options` export anywhere (an endpoint or a file).
inline bool TracingEnabled(const TracerOptions& o) {
  return !o.otlp_endpoint.empty() || !o.trace_file.empty();
}

struct TracerStats {
  int64_t traces_finished = 0;
  int64_t traces_kept = 0;
  int64_t spans_exported = 0;        // accepted by the collector or written
  int64_t spans_dropped_queue = 0;   // queue full
  int64_t spans_dropped_export = 0;  // the collector failed or timed out
  int64_t export_failures = 0;       // failed POSTs
  std::string last_export_error;
};

class Tracer {
 public:
  // Checks the endpoint URL and opens the trace file (truncating it).
  static Result<std::unique_ptr<Tracer>> Create(TracerOptions options);
  ~Tracer();
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  RequestTrace StartTrace(const std::optional<TraceContext>& parent,
                          std::string name, SpanKind kind,
                          int64_t start_unix_ns = UnixNowNs()) const;
  // Ends (if the caller did not) and keeps or drops the trace. True when
  // kept and queued for export.
  bool Finish(RequestTrace trace);
  // Waits until everything queued so far was handed to the exporters (or
  // `timeout_ms` passed). For tests and shutdown.
  void Flush(int64_t timeout_ms);

  TracerStats stats() const;
  const TracerOptions& options() const { return options_; }

  struct Sink;  // defined in the .cc file

 private:
  explicit Tracer(TracerOptions options);
  void Loop();

  const TracerOptions options_;
  std::vector<std::unique_ptr<Sink>> sinks_;
  mutable std::mutex mu_;
  std::condition_variable cv_;                 // work or stop
  std::condition_variable idle_cv_;            // queue drained
  std::deque<std::vector<SpanRecord>> queue_;  // one entry per trace
  size_t queued_spans_ = 0;
  bool exporting_ = false;
  bool stop_ = false;
  TracerStats stats_;
  std::thread thread_;
};

}  // namespace redline::telemetry

#endif  // REDLINE_TELEMETRY_TRACER_H_
