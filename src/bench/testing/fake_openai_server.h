// FakeOpenAiServer: a deterministic OpenAI-compatible server for bench tests
// (built only with the tests). Every request's behaviour is set by a plan:
// the server default, overridden per request by the "X-Fake-Plan" header
// ("ttft=120ms;gap=20ms;tokens=16;status=200") or by a plan function.
//
// It records the truth of each response (when the request was parsed and
// when each content/reasoning chunk was written), so tests can compare what
// bench measured with what actually happened.
//
// Chunks follow docs/SERVING.md#streaming: role chunk (content ""), content
// chunks (one token each unless tokens_per_chunk > 1), finish chunk, usage
// chunk when the request asked for include_usage, then data: [DONE]. The
// schedule is absolute from request arrival: chunk j (0-based) is written at
// t_received + ttft + j * gap.
//
// Threading: runs its own EventLoop on a background thread. Start/Stop from
// one thread; Truths() is safe from any thread.
#ifndef REDLINE_BENCH_TESTING_FAKE_OPENAI_SERVER_H_
#define REDLINE_BENCH_TESTING_FAKE_OPENAI_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "http/event_loop.h"
#include "http/server.h"

namespace redline::bench::testing {

struct FakePlan {
  // Request parsed -> first content/reasoning chunk.
  int64_t ttft_us = 0;
  // Between chunks.
  int64_t gap_us = 0;
  // Content chunks.
  int tokens = 4;
  // Reasoning chunks before the content.
  int reasoning = 0;
  // usage.completion_tokens = (tokens + reasoning) * this.
  int tokens_per_chunk = 1;
  // Non-2xx: an OpenAI error body, no stream.
  int status = 200;
  // >= 0: close the connection after this many chunks.
  int disconnect_after = -1;
  // >= 0: send an in-stream error after this many chunks, then end.
  int error_after = -1;
  // >= 0: send a malformed chunk after this many chunks.
  int bad_json_after = -1;
  // >= 0: stop sending (keep the connection) after this many chunks.
  int stall_after = -1;
  // End the stream without data: [DONE]
  bool no_done = false;
  // No finish_reason chunk.
  bool no_finish = false;
  // Honour stream_options.include_usage.
  bool usage = true;
  // > 0: SSE comment every ping_us while waiting.
  int64_t ping_us = 0;
  // Close the connection without answering.
  bool drop_before_headers = false;
  // Prefill cost per prompt token (prompt tokens = prompt characters / 4),
  // added to ttft: a prefill-bound server.
  int64_t prefill_ns_per_token = 0;
  // Decode slows with concurrency: the gap becomes
  // gap x (1 + gap_growth x (requests in service at admission - 1)),
  // counted when the request starts service (a decode-bound server).
  double gap_growth = 0;
  // Send the breakdown: `timings` in the finish chunk (streaming) or the
  // Server-Timing header and body `timings` (non-streaming), with the true
  // queue (arrival -> service start), prefill (service start -> first chunk
  // written), decode (first -> last chunk written) and e2e.
  bool timings = true;
  // Time the server spends before its schedule starts that it leaves out of
  // its timings (a slow proxy, parsing, the wire): bench sees it as
  // network.
  int64_t unaccounted_us = 0;
  // Like unaccounted, but reported as a gateway's own share
  // (`gateway;dur` appended to Server-Timing, as a gateway in front would;
  // headers go out first, so only on non-streaming answers).
  int64_t gateway_us = 0;

  // Parses "ttft=120ms;gap=20ms;tokens=16;status=503;no_done=1" (durations
  // need a unit; also prefill_per_token=200us, gap_growth=0.5, timings=0,
  // unaccounted=50ms, gateway=5ms)
  // on top of `base`. Unknown keys are errors.
  static Result<FakePlan> Parse(std::string_view text, const FakePlan& base);
};

struct FakeTruth {
  uint64_t index = 0;
  int64_t t_received_ns = 0;
  // Content and reasoning chunks, in order.
  std::vector<int64_t> chunk_write_ns;
  // [DONE] (or the full body) written.
  int64_t t_done_ns = 0;
  int64_t completion_tokens = 0;
  std::string path;
  // The request body.
  std::string body;
  // The traceparent header as received ("" when none).
  std::string traceparent;
  // What the server sent as its breakdown (ms; -1 when it sent none).
  double queue_ms = -1, prefill_ms = -1, decode_ms = -1;
  int prompt_tokens = 0;
};

struct FakeServerOptions {
  FakePlan default_plan;
  // Optional per-request plan (after the header): (request index, request).
  std::function<FakePlan(uint64_t index, const http::ServerRequest& request,
                         const FakePlan& base)>
      plan_fn;
  std::string tls_cert_file, tls_key_file;
  bool record_truth = true;
  bool reuse_port = false;  // several servers (threads) on one port
  // > 0: a service model with this many slots. A request's whole timeline
  // (ttft + (chunks - 1) x gap, its service time) starts when a slot is
  // free, first come first served; until then it waits. The slots are kept
  // on a virtual schedule (a slot frees at start + service time, however
  // late the loop wakes), so with a fixed plan the server is an exact
  // G/D/c queue whose capacity is slots / service time. /metrics then
  // reports fake_num_requests_waiting and fake_num_requests_running.
  int slots = 0;
  // > 0: /metrics reports fake_kv_cache_usage_perc, the prompt and output
  // tokens of the requests in service over this capacity (at most 1). The
  // cache does not gate admission; it is a signal for the bench's
  // bottleneck finder. 0: no KV gauge.
  int64_t kv_capacity_tokens = 0;
  // Routes answered besides the completions: GET /health and /readyz (200),
  // GET /metrics (a few Prometheus series).
  // Non-empty ("redline_", "vllm:"): /metrics exports a server's set under
  // this prefix instead, true to what the fake server did: requests
  // running and waiting, KV usage, prompt and generation token counters,
  // TTFT and E2E histograms (seconds, model_name and start labels), the
  // process's CPU and RSS, and two series that never change
  // (cache_config_info, process_max_fds).
  std::string metrics_prefix;
  // Optional: lines appended to every /metrics answer (called on the loop
  // thread), e.g. a load report the test controls.
  std::function<std::string()> extra_metrics;
};

class FakeOpenAiServer {
 public:
  explicit FakeOpenAiServer(FakeServerOptions options);
  ~FakeOpenAiServer();

  // Binds 127.0.0.1:`port` (0: any) and starts the loop thread.
  Result<uint16_t> Start(uint16_t port = 0);
  void Stop();

  uint16_t port() const { return port_; }
  // "http://127.0.0.1:<port>/v1" (https with TLS).
  std::string BaseUrl() const;
  std::vector<FakeTruth> Truths() const;
  uint64_t requests() const;

 private:
  struct Stream;
  struct Metrics;
  // Prometheus lines of the slot model (loop thread).
  std::string SlotGauges() const;
  // The metrics_prefix exposition (loop thread).
  std::string ServerExposition() const;
  // The KV usage line (loop thread); "" without kv_capacity_tokens.
  std::string KvGauge() const;
  // options_.extra_metrics() ("" without it).
  std::string ExtraMetrics() const;
  void Handle(http::ServerRequest&& request,
              std::shared_ptr<http::ResponseWriter> writer);

  FakeServerOptions options_;
  http::EventLoop loop_;
  std::unique_ptr<http::Server> server_;
  std::thread thread_;
  uint16_t port_ = 0;
  mutable std::mutex mu_;
  std::vector<FakeTruth> truths_;
  // Loop thread only.
  uint64_t next_index_ = 0;
  // Loop thread only.
  std::unordered_map<Stream*, std::shared_ptr<Stream>> streams_;
  std::unique_ptr<http::Timer> keepalive_;
  // Loop thread only: when each slot is next free (options_.slots > 0).
  std::vector<int64_t> slot_free_ns_;
  // Loop thread only: the metrics_prefix counters and histograms.
  std::unique_ptr<Metrics> metrics_;
};

}  // namespace redline::bench::testing

#endif  // REDLINE_BENCH_TESTING_FAKE_OPENAI_SERVER_H_
