#include "bench/runner.h"

#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <deque>
#include <memory>
#include <optional>

#include "api/error.h"
#include "api/request.h"
#include "api/response.h"
#include "api/server_timing.h"
#include "base/check.h"
#include "base/logging.h"
#include "bench/abort.h"
#include "bench/histogram.h"
#include "bench/metrics.h"
#include "bench/route_stats.h"
#include "http/event_loop.h"
#include "http/sse.h"
#include "http/url.h"
#include "telemetry/trace_context.h"

namespace redline::bench {

namespace {

constexpr int64_t kNsPerSec = 1'000'000'000;
constexpr size_t kErrorBodyLimit = 2048;
// Response bytes kept of an exchange --debug-requests records.
constexpr size_t kDebugBodyLimit = 65536;

// Open-loop sends are timed in two stages. The arrival timer fires up to
// kMaxEarlyWakeNs before the due time: that margin absorbs the wake-up
// latency of a sleeping thread (tens to hundreds of microseconds in a VM)
// and the socket handlers asio queues ahead of a timer that expires in the
// same epoll batch. The rest of the wait is a poll: a posted task re-checks
// the clock after each non-blocking pass over the sockets, so responses are
// still read on time while the send waits for its exact instant. The margin
// is at most a quarter of the gap since the previous arrival, which bounds
// the polling to 25 % of a CPU at any rate.
//
// Polling only pays while the thread has a CPU to itself. On a contended CPU
// the scheduler preempts a thread that keeps running, and the send then
// waits for another task's whole time slice (milliseconds) instead of
// microseconds. An involuntary context switch of the loop thread is the
// sign: after one, arrivals are timed by the timer alone for
// kPollBackoffNs.
constexpr int64_t kMaxEarlyWakeNs = 200'000;
constexpr int64_t kPollBackoffNs = 1'000'000'000;

// Abort-on-fail thresholds are checked when a measured request finishes, at
// most every kAbortCheckIntervalNs or kAbortCheckRequests requests (a check
// costs a histogram pass per threshold, kept off most completions), and at
// each progress tick.
constexpr int64_t kAbortCheckIntervalNs = 10'000'000;
constexpr int64_t kAbortCheckRequests = 16;

// struct sched_attr (SCHED_ATTR_SIZE_VER0), declared here because
// <linux/sched/types.h> clashes with glibc's <sched.h>.
struct SchedAttr {
  uint32_t size;
  uint32_t sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime;
  uint64_t sched_deadline;
  uint64_t sched_period;
};

// Time slice requested for the loop thread under the fair scheduler. Since
// Linux 6.12 (EEVDF) an ordinary thread may ask for a slice of 0.1..100 ms
// (no privilege needed; older kernels ignore the field for SCHED_OTHER). A
// short slice gives the thread an early virtual deadline, so when it wakes
// for a due send it preempts a CPU-bound task at once instead of waiting for
// that task's slice to run out: that wait (about 1-4 ms on a busy machine)
// was the dispatch-delay tail of a normal-priority run.
constexpr uint64_t kLoopSliceNs = 100'000;

// Requests kLoopSliceNs for the calling thread while alive; restores the
// previous slice on destruction. A no-op where the kernel refuses.
class ShortSlice {
 public:
  ShortSlice() {
    if (syscall(SYS_sched_getattr, 0, &old_, sizeof(old_), 0) != 0 ||
        old_.sched_policy != SCHED_OTHER)
      return;
    SchedAttr attr = old_;
    attr.size = sizeof(attr);
    attr.sched_runtime = kLoopSliceNs;
    active_ = syscall(SYS_sched_setattr, 0, &attr, 0) == 0;
  }
  ~ShortSlice() {
    if (!active_) return;
    old_.size = sizeof(old_);
    syscall(SYS_sched_setattr, 0, &old_, 0);
  }
  ShortSlice(const ShortSlice&) = delete;
  ShortSlice& operator=(const ShortSlice&) = delete;

 private:
  SchedAttr old_{};
  bool active_ = false;
};

// Involuntary context switches of the calling thread so far.
int64_t InvoluntarySwitches() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return u.ru_nivcsw;
}

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

class Runner;

// One request in flight: parses the response as it arrives and fills the
// record. Reused across requests (the runner keeps a free list).
class Exchange final : public http::ResponseHandler {
 public:
  explicit Exchange(Runner* runner) : runner_(runner) {}

  void Reset(size_t record_index, UserState* user, bool stream,
             bool keep_text) {
    record_ = record_index;
    user_ = user;
    stream_ = stream;
    keep_text_ = keep_text;
    status_ = 0;
    is_2xx_ = false;
    sse_ok_ = true;
    parse_error_ = false;
    error_event_ = false;
    done_ = false;
    finish_ = false;
    chunks_ = 0;
    usage_.reset();
    body_.clear();
    text_.clear();
    error_detail_.clear();
    raw_.clear();
    debug_ = false;
    timing_header_.clear();
    timings_.reset();
    sse_.Reset();
  }
  // Marks this exchange for --debug-requests: the request is kept as sent.
  void SetDebug(const http::ClientRequest& request) {
    debug_ = true;
    debug_method_ = request.method;
    debug_target_ = request.target;
    debug_request_ = request.body;
  }
  bool debug() const { return debug_; }
  // The start of the response body as received (SSE framing included).
  const std::string& raw() const { return raw_; }
  const std::string& debug_method() const { return debug_method_; }
  const std::string& debug_target() const { return debug_target_; }
  const std::string& debug_request() const { return debug_request_; }

  void OnSent(int64_t t_ns) override;
  void OnHeaders(const http::ResponseHead& head, int64_t t_ns) override;
  void OnBody(std::string_view data, int64_t t_ns) override;
  void OnComplete(const http::TransportResult& result, int64_t t_ns) override;

  UserState* user() const { return user_; }
  const std::string& text() const { return text_; }

 private:
  RequestRecord& Rec();
  void OnEvent(const http::SseEvent& e, int64_t t_ns);

  Runner* runner_;
  size_t record_ = 0;
  UserState* user_ = nullptr;
  bool stream_ = true;
  bool keep_text_ = false;
  int status_ = 0;
  bool is_2xx_ = false;
  bool sse_ok_ = true;  // Content-Type is text/event-stream
  bool parse_error_ = false;
  bool error_event_ = false;
  bool done_ = false;
  bool finish_ = false;
  int64_t chunks_ = 0;
  std::optional<api::Usage> usage_;
  std::string body_;  // non-streamed body, or the start of an error body
  std::string text_;  // content text (multi-turn only)
  std::string error_detail_;
  // First bytes of the body whatever the status, for the error samples and
  // --debug-requests; bounded by kErrorBodyLimit (kDebugBodyLimit if debug_).
  std::string raw_;
  bool debug_ = false;
  std::string debug_method_, debug_target_, debug_request_;
  http::SseParser sse_;
  api::StreamChunk chunk_;
  // The Server-Timing header as received ("" when none).
  std::string timing_header_;
  // `timings` of the final chunk or of the body.
  std::optional<api::ServerTimings> timings_;
};

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) {
      return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
    };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

// Fills the record's server breakdown: the body's or final chunk's
// `timings` first (what a streaming answer can carry), then the
// Server-Timing header, which is also where a gateway adds its own share.
void ApplyServerTiming(const std::optional<api::ServerTimings>& timings,
                       std::string_view header, RequestRecord& r) {
  if (timings) {
    r.server_queue_ms = timings->queue_ms;
    r.server_prefill_ms = timings->prefill_ms;
    r.server_decode_ms = timings->decode_ms;
    r.server_e2e_ms = timings->e2e_ms;
    if (timings->gateway_ms >= 0) r.gateway_ms = timings->gateway_ms;
  }
  if (header.empty()) return;
  const std::vector<api::TimingEntry> entries = api::ParseServerTiming(header);
  auto take = [&](std::string_view name, double* out) {
    const double v = api::TimingOf(entries, name);
    if (v >= 0 && *out < 0) *out = v;
  };
  take("queue", &r.server_queue_ms);
  take("prefill", &r.server_prefill_ms);
  take("decode", &r.server_decode_ms);
  take("e2e", &r.server_e2e_ms);
  // The header's gateway share wins over the final chunk's: a gateway's
  // cache replays a stored chunk, whose timings are the original request's.
  if (const double g = api::TimingOf(entries, "gateway"); g >= 0)
    r.gateway_ms = g;
}

class Runner {
 public:
  Runner(const RunConfig& config, Workload& workload)
      : cfg_(config),
        workload_(workload),
        client_(
            std::make_unique<http::Client>(loop_, ClientOptionsFrom(config))),
        tick_timer_(loop_),
        arrival_timer_(loop_) {}

  Result<RunResult> Run();

  // Called by Exchange.
  RequestRecord& Record(size_t i) { return records_[i]; }
  void OnSent() { sent_++; }
  void Finished(Exchange* ex, size_t record_index);
  bool keep_text_for_all() const { return false; }

 private:
  static http::ClientOptions ClientOptionsFrom(const RunConfig& c) {
    http::ClientOptions o;
    o.connect_timeout_ms = c.connect_timeout_ms;
    o.max_connections_per_origin = c.max_connections;
    o.tls_verify = c.tls_verify;
    o.tls_ca_file = c.tls_ca_file;
    // Server-Timing (docs/OBSERVABILITY.md) and the route header
    // (per-route latency in the report); no other header is kept.
    o.capture_headers = true;
    o.capture_only = {"server-timing", std::string(kRouteHeader)};
    return o;
  }

  Status RunCold();
  void StartLoad();
  void ScheduleArrivals();
  void OnArrivalTimer();
  void PollArrival();
  void Arrive(int64_t t_sched);
  void StartUser(size_t u, int64_t t_ready);
  void Dispatch(int64_t t_sched, Phase phase, UserState* user, bool from_pool);
  Phase PhaseFor(int64_t t_sched);
  void Tick();
  void CheckAbort(int64_t now);
  void MaybeFinish();
  void Report(bool final);

  const RunConfig& cfg_;
  Workload& workload_;
  http::EventLoop loop_;
  // Destroyed explicitly at the end of Run() while everything its handlers
  // touch is still alive (it cancels requests still in flight).
  std::unique_ptr<http::Client> client_;
  http::Origin origin_;
  std::vector<http::Header> common_headers_;
  http::Timer tick_timer_;
  http::Timer arrival_timer_;
  RunResult result_;
  // Records live in a deque while the run is going (no reallocation copies,
  // stable references); they move into result_.records at the end.
  std::deque<RequestRecord> records_;

  std::vector<std::unique_ptr<Exchange>> exchanges_;
  std::vector<Exchange*> free_exchanges_;
  // Closed loop users / open loop sessions.
  std::vector<std::unique_ptr<UserState>> users_;
  // Open loop: sessions not in flight.
  std::vector<UserState*> idle_sessions_;
  // Closed loop, one per user.
  std::vector<std::unique_ptr<http::Timer>> user_timers_;
  std::unique_ptr<ArrivalPlan> plan_;
  std::optional<int64_t> next_offset_;
  // t_sched of the previous arrival.
  int64_t last_arrival_ns_ = 0;
  // Of the loop thread, at the last check.
  int64_t involuntary_switches_ = 0;
  // Early wake + polling back off until then.
  int64_t poll_allowed_after_ns_ = 0;
  // A PollArrival task is queued.
  bool arrival_polling_ = false;
  // Open loop arrivals behind the cap.
  std::deque<int64_t> waiting_;

  int64_t start_ns_ = 0;
  // No new requests scheduled at or after this (0: none).
  int64_t load_end_ns_ = 0;
  int64_t hard_deadline_ns_ = 0;
  int64_t in_flight_ = 0;
  int64_t sent_ = 0;
  int64_t done_ = 0, ok_ = 0, failed_ = 0;
  int64_t measure_dispatched_ = 0;
  int64_t warmup_dispatched_ = 0;
  bool arrivals_over_ = false;
  bool cold_running_ = false;
  bool finished_ = false;
  bool shutting_down_ = false;
  int64_t last_tick_ns_ = 0, last_tick_sent_ = 0, last_tick_done_ = 0;
  Histogram live_ttft_, live_e2e_;
  // Null without abort-on-fail thresholds.
  std::unique_ptr<AbortMonitor> abort_;
  // t_sched of the first measured request.
  int64_t measure_start_ns_ = 0;
  int64_t debug_taken_ = 0;  // exchanges marked for --debug-requests
  std::array<bool, kNumErrorClasses> error_seen_{};
  int64_t next_abort_check_ns_ = 0;
  int64_t finished_since_abort_check_ = 0;
  friend class Exchange;
};

RequestRecord& Exchange::Rec() { return runner_->Record(record_); }

void Exchange::OnSent(int64_t t_ns) {
  RequestRecord& r = Rec();
  if (r.t_send_ns == 0) runner_->OnSent();
  r.t_send_ns = t_ns;  // a transparent retry on a fresh connection re-stamps
}

void Exchange::OnHeaders(const http::ResponseHead& head, int64_t) {
  status_ = head.status;
  for (const http::Header& h : head.headers) {
    if (EqualsIgnoreCase(h.name, "server-timing")) {
      // Several Server-Timing fields are one list (RFC 9110 5.3).
      if (!timing_header_.empty()) timing_header_ += ", ";
      timing_header_ += h.value;
    } else if (EqualsIgnoreCase(h.name, kRouteHeader)) {
      Rec().route = h.value;
    }
  }
  is_2xx_ = status_ >= 200 && status_ <= 299;
  if (stream_ && is_2xx_ &&
      head.content_type.find("text/event-stream") == std::string::npos)
    sse_ok_ = false;
}

void Exchange::OnBody(std::string_view data, int64_t t_ns) {
  const size_t raw_limit = debug_ ? kDebugBodyLimit : kErrorBodyLimit;
  if (raw_.size() < raw_limit)
    raw_.append(data.substr(0, raw_limit - raw_.size()));
  if (!is_2xx_) {
    if (body_.size() < kErrorBodyLimit)
      body_.append(data.substr(0, kErrorBodyLimit - body_.size()));
    return;
  }
  if (stream_ && sse_ok_) {
    sse_.Feed(data, [&](const http::SseEvent& e) { OnEvent(e, t_ns); });
  } else {
    body_.append(data);
  }
}

void Exchange::OnEvent(const http::SseEvent& e, int64_t t_ns) {
  if (e.kind == http::SseEvent::Kind::kComment || done_)
    return;  // pings; anything after [DONE]
  RequestRecord& r = Rec();
  if (e.data == "[DONE]") {
    done_ = true;
    r.t_end_ns = t_ns;
    return;
  }
  if (e.event_type == "error") {
    error_event_ = true;
    if (error_detail_.empty())
      error_detail_ = "error event: " + std::string(e.data.substr(0, 200));
    return;
  }
  Status st = api::ParseStreamChunk(e.data, &chunk_);
  if (!st.ok()) {
    parse_error_ = true;
    if (error_detail_.empty()) error_detail_ = st.message();
    return;
  }
  if (chunk_.error) {
    error_event_ = true;
    if (error_detail_.empty())
      error_detail_ = "in-stream error: " + chunk_.error->message;
  }
  const bool has_content = !chunk_.content.empty();
  if (has_content || !chunk_.reasoning.empty()) {
    if (r.chunk_ns.empty()) r.t_first_ns = t_ns;
    r.chunk_ns.push_back(t_ns);
    r.t_last_ns = t_ns;
    chunks_++;
    if (keep_text_) text_ += chunk_.content;
  }
  if (has_content && r.t_first_output_ns == 0) r.t_first_output_ns = t_ns;
  if (chunk_.has_finish) finish_ = true;
  if (chunk_.usage) usage_ = chunk_.usage;
  if (chunk_.timings) timings_ = chunk_.timings;
}

void Exchange::OnComplete(const http::TransportResult& result, int64_t t_ns) {
  RequestRecord& r = Rec();
  if (stream_ && is_2xx_ && sse_ok_ && !done_) {
    sse_.Finish([&](const http::SseEvent& e) { OnEvent(e, t_ns); });
  }
  if (r.t_end_ns == 0 || !done_) r.t_end_ns = t_ns;
  r.http_status = status_;
  r.done_seen = done_;
  r.finish_seen = finish_;

  AttemptFacts f;
  f.streaming = stream_;
  f.status = status_;
  switch (result.error) {
    case http::TransportError::kNone:
      break;
    case http::TransportError::kConnect:
    case http::TransportError::kWrite:
      f.connect_failed = true;
      break;
    case http::TransportError::kTimeoutTotal:
      f.timeout = TimeoutKind::kTotal;
      break;
    case http::TransportError::kTimeoutIdle:
      f.timeout = TimeoutKind::kIdle;
      break;
    case http::TransportError::kProtocol:
      f.parse_error = true;
      f.closed_early = false;
      if (status_ == 0)
        // Unparseable status line: a parse failure, not an abort.
        f.status = 200;
      break;
    case http::TransportError::kClosedBeforeResponse:
    case http::TransportError::kClosedMidResponse:
    case http::TransportError::kCancelled:
      f.closed_early = true;
      break;
  }
  if (result.error != http::TransportError::kNone) {
    error_detail_ = std::string(http::TransportErrorName(result.error)) +
                    (result.detail.empty() ? "" : ": " + result.detail);
  }
  f.error_event = error_event_;
  f.done_seen = done_;
  f.finish_seen = finish_;
  f.parse_error = f.parse_error || parse_error_;
  if (is_2xx_ && stream_ && !sse_ok_) {
    f.parse_error = true;
    // Not an SSE stream at all: a parse failure, not an abort.
    f.done_seen = true;
    f.finish_seen = true;
    error_detail_ = "expected text/event-stream";
  }
  if (is_2xx_ && !stream_ && result.error == http::TransportError::kNone) {
    auto parsed = api::ParseResponse(body_);
    if (!parsed.ok()) {
      f.parse_error = true;
      error_detail_ = parsed.status().message();
    } else if (parsed->error) {
      f.parse_error = true;
      error_detail_ = "error object in a 2xx body: " + parsed->error->message;
    } else {
      if (parsed->usage) usage_ = parsed->usage;
      if (parsed->timings) timings_ = parsed->timings;
      if (keep_text_) text_ = parsed->content;
    }
  }
  r.timeout = f.timeout;
  r.error = Classify(f);
  if (!r.ok() && !is_2xx_ && status_ != 0) {
    if (auto e = api::ParseErrorBody(body_)) {
      error_detail_ = e->message;
    } else if (error_detail_.empty()) {
      error_detail_ = body_.substr(0, 200);
    }
  }
  r.error_detail = r.ok() ? std::string() : error_detail_;
  ApplyServerTiming(timings_, timing_header_, r);

  // Token count (docs/METRICS.md#token-counts): server usage, else one token
  // per content chunk.
  if (usage_) {
    if (usage_->completion_tokens >= 0) {
      r.usage_completion_tokens = usage_->completion_tokens;
      r.output_tokens = usage_->completion_tokens;
      r.token_source = TokenSource::kUsage;
    }
    r.prompt_tokens = usage_->prompt_tokens;
    r.cached_tokens = usage_->cached_tokens;
  }
  if (r.token_source == TokenSource::kNone && stream_ && chunks_ > 0) {
    r.output_tokens = chunks_;
    r.token_source = TokenSource::kChunks;
  }
  runner_->Finished(this, record_);
}

Phase Runner::PhaseFor(int64_t t_sched) {
  if (cfg_.warmup_ns > 0 && t_sched < start_ns_ + cfg_.warmup_ns)
    return Phase::kWarmup;
  if (cfg_.warmup_requests > 0 && warmup_dispatched_ < cfg_.warmup_requests)
    return Phase::kWarmup;
  return Phase::kMeasure;
}

void Runner::Dispatch(int64_t t_sched, Phase phase, UserState* user,
                      bool from_pool) {
  (void)from_pool;
  if (phase == Phase::kMeasure) {
    measure_dispatched_++;
    if (measure_start_ns_ == 0) measure_start_ns_ = t_sched;
  }
  if (phase == Phase::kWarmup) warmup_dispatched_++;
  PreparedRequest prep = workload_.Prepare(*user);
  const size_t index = records_.size();
  RequestRecord& r = records_.emplace_back();
  r.id = index;
  r.task = prep.task;
  r.turn = prep.turn;
  r.session = prep.session;
  r.phase = phase;
  r.streamed = prep.stream;
  r.t_sched_ns = t_sched;
  r.input_tokens_planned = prep.input_tokens_planned;
  for (const http::Header& h : common_headers_) prep.http.headers.push_back(h);
  if (cfg_.send_traceparent) {
    // One new trace per request, sampled, so that a server that honours the
    // caller's flag keeps it: "open the trace of your p99 request".
    const auto given =
        std::find_if(prep.http.headers.begin(), prep.http.headers.end(),
                     [](const http::Header& h) {
                       return EqualsIgnoreCase(h.name, "traceparent");
                     });
    if (given == prep.http.headers.end()) {
      const telemetry::TraceId trace = telemetry::NewTraceId();
      prep.http.headers.push_back(
          {"traceparent",
           telemetry::FormatTraceparent(trace, telemetry::NewSpanId(), true)});
      r.trace_id = trace.Hex();
    } else if (auto ctx = telemetry::ParseTraceparent(given->value)) {
      r.trace_id = ctx->trace_id.Hex();
    }
  }
  prep.http.total_timeout_ms = cfg_.request_timeout_ms;
  prep.http.idle_timeout_ms = cfg_.idle_timeout_ms;

  Exchange* ex;
  if (!free_exchanges_.empty()) {
    ex = free_exchanges_.back();
    free_exchanges_.pop_back();
  } else {
    exchanges_.push_back(std::make_unique<Exchange>(this));
    ex = exchanges_.back().get();
  }
  ex->Reset(index, user, prep.stream, prep.keep_text);
  if (debug_taken_ < cfg_.debug_requests) {
    ++debug_taken_;
    ex->SetDebug(prep.http);
  }
  in_flight_++;
  client_->Send(origin_, std::move(prep.http), ex);
}

void Runner::Finished(Exchange* ex, size_t record_index) {
  RequestRecord& r = records_[record_index];
  if (shutting_down_ && result_.abort) {
    // Cancelled by the abort: no outcome, so out of the statistics.
    if (result_.open_loop)
      (r.phase == Phase::kMeasure ? result_.planned_measure
                                  : result_.planned_warmup)--;
    r.phase = Phase::kCooldown;
    result_.abort->cancelled++;
  }
  in_flight_--;
  done_++;
  (r.ok() ? ok_ : failed_)++;
  if (!r.ok() && !error_seen_[static_cast<size_t>(r.error)]) {
    error_seen_[static_cast<size_t>(r.error)] = true;
    result_.first_errors.push_back({r.error, r.id, r.http_status,
                                    r.FailureLabel(), r.error_detail,
                                    ex->raw().substr(0, kErrorBodyLimit)});
  }
  if (ex->debug()) {
    result_.debug_exchanges.push_back(
        {r.id, ex->debug_method(), ex->debug_target(), ex->debug_request(),
         r.http_status, std::string(ErrorClassKey(r.error)), r.error_detail,
         ex->raw()});
  }
  UserState* user = ex->user();
  workload_.OnResponse(*user, r.ok(), ex->text());
  if (r.ok() && r.phase == Phase::kMeasure) {
    RequestLatencies lat = ComputeLatencies(r);
    if (lat.ttft_us) live_ttft_.Record(*lat.ttft_us);
    if (lat.e2e_us) live_e2e_.Record(*lat.e2e_us);
  }
  free_exchanges_.push_back(ex);
  const int64_t now = r.t_end_ns;
  result_.end_ns = std::max(result_.end_ns, now);
  if (abort_ && r.phase == Phase::kMeasure) {
    abort_->Add(r);
    if (++finished_since_abort_check_ >= kAbortCheckRequests ||
        now >= next_abort_check_ns_)
      CheckAbort(now);
  }

  if (cold_running_) {
    loop_.Stop();
    return;
  }
  if (shutting_down_) return;
  if (cfg_.mode == RunConfig::Mode::kOpen) {
    idle_sessions_.push_back(user);
    if (!waiting_.empty() &&
        (cfg_.max_in_flight == 0 || in_flight_ < cfg_.max_in_flight)) {
      const int64_t t_sched = waiting_.front();
      waiting_.pop_front();
      UserState* s = idle_sessions_.back();
      idle_sessions_.pop_back();
      Dispatch(t_sched, PhaseFor(t_sched), s, true);
    }
  } else {
    // Closed loop: think, then the next request of this user.
    const int64_t think = cfg_.think.SampleNs(user->rng);
    StartUser(static_cast<size_t>(user->user), http::NowNs() + think);
  }
  MaybeFinish();
}

void Runner::StartUser(size_t u, int64_t t_ready) {
  UserState* user = users_[u].get();
  if (finished_ || (cfg_.stop_flag && cfg_.stop_flag->load())) return;
  if (load_end_ns_ != 0 && t_ready >= load_end_ns_) return;
  const Phase phase = PhaseFor(t_ready);
  if (phase == Phase::kMeasure && cfg_.max_requests >= 0 &&
      measure_dispatched_ >= cfg_.max_requests)
    return;
  const int64_t now = http::NowNs();
  if (t_ready <= now) {
    Dispatch(t_ready, phase, user, false);
    return;
  }
  // One timer per user (a user waits for at most one thing at a time); the
  // closure re-checks the phase and limits at fire time.
  user_timers_[u]->ExpireAt(t_ready, [this, u, t_ready] {
    UserState* us = users_[u].get();
    if (finished_ || (cfg_.stop_flag && cfg_.stop_flag->load())) {
      MaybeFinish();
      return;
    }
    const Phase ph = PhaseFor(t_ready);
    if (ph == Phase::kMeasure && cfg_.max_requests >= 0 &&
        measure_dispatched_ >= cfg_.max_requests) {
      MaybeFinish();
      return;
    }
    Dispatch(t_ready, ph, us, false);
  });
}

void Runner::OnArrivalTimer() {
  // Dispatch every arrival that is due (several per wake at high rates); the
  // clock is read again after each send so a slow send does not hide the
  // next one.
  while (next_offset_ && start_ns_ + *next_offset_ <= http::NowNs()) {
    const int64_t t_sched = start_ns_ + *next_offset_;
    last_arrival_ns_ = t_sched;
    Arrive(t_sched);
    next_offset_ = plan_ ? plan_->Next() : std::nullopt;
    if (arrivals_over_) next_offset_.reset();
  }
  ScheduleArrivals();
}

void Runner::ScheduleArrivals() {
  if (cfg_.stop_flag && cfg_.stop_flag->load()) next_offset_.reset();
  if (!next_offset_) {
    arrivals_over_ = true;
    MaybeFinish();
    return;
  }
  const int64_t due = start_ns_ + *next_offset_;
  const int64_t now = http::NowNs();
  if (const int64_t switches = InvoluntarySwitches();
      switches != involuntary_switches_) {
    involuntary_switches_ = switches;
    poll_allowed_after_ns_ = now + kPollBackoffNs;
  }
  const int64_t early = now < poll_allowed_after_ns_
                            ? 0
                            : std::clamp<int64_t>((due - last_arrival_ns_) / 4,
                                                  0, kMaxEarlyWakeNs);
  if (due - now <= early) {
    PollArrival();
    return;
  }
  arrival_timer_.ExpireAt(due - early, [this] { OnArrivalTimer(); });
}

void Runner::PollArrival() {
  if (arrival_polling_) return;
  arrival_polling_ = true;
  loop_.Post([this] {
    arrival_polling_ = false;
    if (finished_ || !next_offset_)
      return;  // stopped meanwhile (Tick cleared the plan)
    if (start_ns_ + *next_offset_ <= http::NowNs()) {
      OnArrivalTimer();
    } else {
      PollArrival();
    }
  });
}

void Runner::Arrive(int64_t t_sched) {
  const Phase phase = PhaseFor(t_sched);
  if (phase == Phase::kMeasure) {
    if (cfg_.max_requests >= 0 &&
        result_.planned_measure >= cfg_.max_requests) {
      arrivals_over_ = true;
      return;
    }
    result_.planned_measure++;
  } else {
    result_.planned_warmup++;
  }
  if (cfg_.max_in_flight > 0 && in_flight_ >= cfg_.max_in_flight) {
    waiting_.push_back(t_sched);
    return;
  }
  UserState* s;
  if (!idle_sessions_.empty()) {
    s = idle_sessions_.back();
    idle_sessions_.pop_back();
  } else {
    users_.push_back(std::make_unique<UserState>());
    s = users_.back().get();
    s->user = static_cast<int64_t>(users_.size() - 1);
    s->rng.seed(cfg_.seed * 1'000'003 + static_cast<uint64_t>(s->user));
  }
  Dispatch(t_sched, phase, s, true);
}

void Runner::MaybeFinish() {
  if (finished_) return;
  bool load_over;
  if (cfg_.mode == RunConfig::Mode::kOpen) {
    load_over = arrivals_over_ && waiting_.empty();
  } else {
    const int64_t now = http::NowNs();
    load_over =
        (load_end_ns_ != 0 && now >= load_end_ns_) ||
        (cfg_.max_requests >= 0 && measure_dispatched_ >= cfg_.max_requests) ||
        (cfg_.stop_flag && cfg_.stop_flag->load());
  }
  if (load_over && in_flight_ == 0) {
    finished_ = true;
    loop_.Stop();
  }
}

void Runner::Report(bool final) {
  if (!cfg_.on_progress) return;
  const int64_t now = http::NowNs();
  Progress p;
  p.elapsed_s = static_cast<double>(now - start_ns_) / 1e9;
  p.phase = PhaseFor(now);
  p.sent = sent_;
  p.done = done_;
  p.ok = ok_;
  p.failed = failed_;
  p.in_flight = in_flight_;
  p.waiting = static_cast<int64_t>(waiting_.size());
  const double dt = static_cast<double>(now - last_tick_ns_) / 1e9;
  if (dt > 0) {
    p.send_rps = static_cast<double>(sent_ - last_tick_sent_) / dt;
    p.done_rps = static_cast<double>(done_ - last_tick_done_) / dt;
  }
  if (!live_ttft_.empty()) {
    p.ttft_p50_us = live_ttft_.ValueAtPercentile(50);
    p.ttft_p99_us = live_ttft_.ValueAtPercentile(99);
  }
  if (!live_e2e_.empty()) {
    p.e2e_p50_us = live_e2e_.ValueAtPercentile(50);
    p.e2e_p99_us = live_e2e_.ValueAtPercentile(99);
  }
  p.final = final;
  last_tick_ns_ = now;
  last_tick_sent_ = sent_;
  last_tick_done_ = done_;
  cfg_.on_progress(p);
}

void Runner::CheckAbort(int64_t now) {
  if (!abort_ || result_.abort || finished_ || measure_start_ns_ == 0) return;
  next_abort_check_ns_ = now + kAbortCheckIntervalNs;
  finished_since_abort_check_ = 0;
  std::optional<AbortDecision> d = abort_->Check(now - measure_start_ns_);
  if (!d) return;
  AbortInfo info;
  info.threshold = d->threshold;
  info.reason = d->reason;
  info.certain = d->certain;
  info.at_s = static_cast<double>(now - start_ns_) / 1e9;
  result_.abort = std::move(info);
  // Arrivals still queued behind the cap were planned but never attempted.
  for (const int64_t t_sched : waiting_) {
    (PhaseFor(t_sched) == Phase::kMeasure ? result_.planned_measure
                                          : result_.planned_warmup)--;
  }
  waiting_.clear();
  arrivals_over_ = true;
  next_offset_.reset();
  arrival_timer_.Cancel();
  // Stop now: requests in flight are cancelled when Run() tears the client
  // down, and Finished() moves them to the cooldown phase.
  finished_ = true;
  loop_.Stop();
}

void Runner::Tick() {
  const int64_t now = http::NowNs();
  if (cfg_.on_tick) cfg_.on_tick(*client_, now);
  CheckAbort(now);
  if (finished_) return;
  Report(false);
  if (cfg_.stop_flag && cfg_.stop_flag->load()) {
    if (!result_.interrupted) {
      result_.interrupted = true;
      result_.stop_reason = "interrupted";
    }
    arrivals_over_ = true;
    waiting_.clear();
    next_offset_.reset();
    arrival_timer_.Cancel();
    // Give in-flight requests a short grace, then stop.
    if (hard_deadline_ns_ == 0 || hard_deadline_ns_ > now + 2 * kNsPerSec)
      hard_deadline_ns_ = now + 2 * kNsPerSec;
  }
  if (hard_deadline_ns_ != 0 && now >= hard_deadline_ns_) {
    if (!result_.interrupted) {
      result_.interrupted = true;
      result_.stop_reason =
          "hard deadline (requests still in flight past the run end plus the "
          "request timeout)";
    }
    finished_ = true;
    loop_.Stop();
    return;
  }
  MaybeFinish();
  if (!finished_)
    tick_timer_.ExpireAt(now + cfg_.progress_interval_ns, [this] { Tick(); });
}

Status Runner::RunCold() {
  if (cfg_.cold_requests <= 0) return Status::Ok();
  UserState cold_user;
  cold_user.user = -1;
  cold_user.rng.seed(cfg_.seed ^ 0xc01d);
  int connect_failures = 0;
  cold_running_ = true;
  for (int i = 0; i < cfg_.cold_requests; ++i) {
    Dispatch(http::NowNs(), Phase::kCold, &cold_user, false);
    loop_.Restart();
    loop_.Run();
    const RequestRecord& r = records_.back();
    if (r.error == ErrorClass::kConnect) connect_failures++;
  }
  cold_running_ = false;
  if (connect_failures == cfg_.cold_requests) {
    return Status::Unavailable("target unreachable: " +
                               records_.back().error_detail);
  }
  return Status::Ok();
}

void Runner::StartLoad() {
  start_ns_ = http::NowNs();
  last_tick_ns_ = start_ns_;
  result_.start_ns = start_ns_;
  if (cfg_.on_load_start) cfg_.on_load_start(start_ns_);
  abort_ = std::make_unique<AbortMonitor>(cfg_.thresholds, cfg_.max_requests);
  if (abort_->empty()) abort_.reset();
  const int64_t timeline =
      cfg_.duration_ns > 0 ? cfg_.warmup_ns + cfg_.duration_ns : 0;
  if (cfg_.mode == RunConfig::Mode::kOpen) {
    std::vector<Stage> stages = cfg_.stages;
    if (stages.empty())
      stages.push_back({timeline, cfg_.rate_rps, cfg_.rate_rps});
    int64_t total = 0;
    for (const Stage& s : stages) total += s.duration_ns;
    load_end_ns_ = total > 0 ? start_ns_ + total : 0;
    plan_ = std::make_unique<ArrivalPlan>(cfg_.arrival, cfg_.burstiness,
                                          std::move(stages), cfg_.seed);
    next_offset_ = plan_->Next();
    last_arrival_ns_ = start_ns_;
    involuntary_switches_ = InvoluntarySwitches();
    ScheduleArrivals();
  } else {
    load_end_ns_ = timeline > 0 ? start_ns_ + timeline : 0;
    for (int u = 0; u < cfg_.users; ++u) {
      auto s = std::make_unique<UserState>();
      s->user = u;
      s->rng.seed(cfg_.seed * 1'000'003 + static_cast<uint64_t>(u));
      users_.push_back(std::move(s));
      user_timers_.push_back(std::make_unique<http::Timer>(loop_));
    }
    for (int u = 0; u < cfg_.users; ++u) {
      const int64_t offset =
          cfg_.users > 1 ? cfg_.ramp_up_ns * u / cfg_.users : 0;
      StartUser(static_cast<size_t>(u), start_ns_ + offset);
    }
  }
  if (load_end_ns_ != 0) {
    const int64_t grace = cfg_.request_timeout_ms > 0
                              ? cfg_.request_timeout_ms * 1'000'000
                              : 600 * kNsPerSec;
    hard_deadline_ns_ = load_end_ns_ + grace + 5 * kNsPerSec;
  }
  tick_timer_.ExpireAt(start_ns_ + cfg_.progress_interval_ns,
                       [this] { Tick(); });
}

Result<RunResult> Runner::Run() {
  auto url = http::ParseUrl(cfg_.base_url);
  if (!url.ok()) return url.status();
  origin_ = url->origin;
  if (!cfg_.api_key.empty())
    common_headers_.push_back({"Authorization", "Bearer " + cfg_.api_key});
  for (const auto& h : cfg_.headers) common_headers_.push_back(h);
  if (cfg_.mode == RunConfig::Mode::kClosed && cfg_.users < 1)
    return Status::InvalidArgument("users must be >= 1");
  if (cfg_.mode == RunConfig::Mode::kOpen && cfg_.stages.empty() &&
      cfg_.rate_rps <= 0) {
    return Status::InvalidArgument("rate must be > 0");
  }
  if (cfg_.duration_ns <= 0 && cfg_.max_requests < 0 && cfg_.stages.empty()) {
    return Status::InvalidArgument("give a duration or a request count");
  }
  result_.open_loop = cfg_.mode == RunConfig::Mode::kOpen;
  const double cpu0 = CpuSeconds();
  const int64_t wall0 = http::NowNs();
  // Linux delays timer wake-ups by up to the thread's timer slack (50 us by
  // default) to batch them; the arrival schedule needs them on time.
  const int old_slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0);
  struct RestoreSlack {
    int slack;
    ~RestoreSlack() {
      if (slack > 0) prctl(PR_SET_TIMERSLACK, slack, 0, 0, 0);
    }
  } restore{old_slack};
  struct RestorePolicy {
    bool active = false;
    int policy = SCHED_OTHER;
    sched_param param{};
    ~RestorePolicy() {
      if (active) pthread_setschedparam(pthread_self(), policy, &param);
    }
  } restore_policy;
  if (cfg_.realtime) {
    pthread_getschedparam(pthread_self(), &restore_policy.policy,
                          &restore_policy.param);
    sched_param rt{};
    rt.sched_priority = 1;
    if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &rt) == 0) {
      restore_policy.active = true;
    } else {
      result_.notes.push_back(
          "--realtime: SCHED_FIFO not permitted (needs CAP_SYS_NICE); running "
          "at normal priority");
    }
  }
  std::optional<ShortSlice> short_slice;
  if (!restore_policy.active) short_slice.emplace();

  RL_RETURN_IF_ERROR(RunCold());
  if (cfg_.stop_flag && cfg_.stop_flag->load()) {
    result_.interrupted = true;
    result_.stop_reason = "interrupted";
    for (RequestRecord& r : records_) result_.records.push_back(std::move(r));
    return std::move(result_);
  }
  loop_.Restart();
  StartLoad();
  MaybeFinish();
  if (!finished_) loop_.Run();
  if (cfg_.stop_flag && cfg_.stop_flag->load() && !result_.interrupted) {
    result_.interrupted = true;
    result_.stop_reason = "interrupted";
  }
  if (cfg_.on_progress) Report(true);
  tick_timer_.Cancel();
  arrival_timer_.Cancel();
  result_.cpu_seconds = CpuSeconds() - cpu0;
  result_.wall_seconds = static_cast<double>(http::NowNs() - wall0) / 1e9;
  result_.connections_opened = client_->stats().connections_opened;
  shutting_down_ = true;
  // Cancels what is still in flight (interrupted or aborted runs only).
  client_.reset();
  result_.records.reserve(records_.size());
  for (RequestRecord& r : records_) result_.records.push_back(std::move(r));
  records_.clear();
  return std::move(result_);
}

}  // namespace

std::string NormalizeBaseUrl(const std::string& url) {
  auto parsed = http::ParseUrl(url);
  if (!parsed.ok()) return url;
  std::string out = url;
  while (!out.empty() && out.back() == '/') out.pop_back();
  if (parsed->target == "/") out += "/v1";
  return out;
}

Result<RunResult> RunLoad(const RunConfig& config, Workload& workload) {
  // The Runner owns an EventLoop and a Client; requests still in flight
  // when it returns are cancelled by the Client's destructor.
  auto runner = std::make_unique<Runner>(config, workload);
  return runner->Run();
}

}  // namespace redline::bench
