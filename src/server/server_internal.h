// Internal to src/server: the state behind InferenceServer, shared by
// server.cc (lifecycle, routes, probes) and exchange.cc (one inference
// request from admission to the last byte). Not a public header.
//
// Threading rule: every member marked "loop" is touched only on the event
// loop thread; "loader" members are written by the loader thread before it
// posts OnLoaded to the loop and never written again; atomics are shared.
#ifndef REDLINE_SERVER_SERVER_INTERNAL_H_
#define REDLINE_SERVER_SERVER_INTERNAL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/thread_pool.h"
#include "engine/engine.h"
#include "http/event_loop.h"
#include "http/server.h"
#include "model/arch/model.h"
#include "server/api_error.h"
#include "server/chat_prompt.h"
#include "server/inference_request.h"
#include "server/openai_response.h"
#include "server/server.h"
#include "server/server_metrics.h"
#include "server/startup.h"
#include "telemetry/metrics.h"

namespace redline::server {

class Exchange;

struct InferenceServer::Impl {
  explicit Impl(ServerConfig c);

  // ---- lifecycle (server.cc) ----
  void LoaderMain();
  bool WarmUp(std::string* error);
  void OnLoaded();                     // loop
  void OnLoadFailed(std::string why);  // loop
  void BeginDrain();                   // loop
  void CheckDrain();                   // loop
  void FinalStop(int exit_code);       // loop
  void Tick();                         // loop
  void RefreshMetrics();               // loop (collector)

  // ---- routing (server.cc) ----
  void Handle(http::ServerRequest&& request,
              std::shared_ptr<http::ResponseWriter> writer);
  void Route(http::ServerRequest& request,
             const std::shared_ptr<http::ResponseWriter>& writer);
  bool Authorized(const http::ServerRequest& request) const;
  void Reply(Endpoint endpoint, const http::ServerRequest& request,
             http::ResponseWriter& writer, int status, std::string body,
             std::vector<http::Header> extra = {},
             std::string_view content_type = "application/json");
  void ReplyError(Endpoint endpoint, const http::ServerRequest& request,
                  http::ResponseWriter& writer, const ApiError& error);
  // 503 while not serving inference (loading, warming, draining, failed).
  ApiError NotServingError() const;
  // 429 when a request needing `slots` slots would wait longer than
  // --queue-budget for them; nullopt to admit.
  std::optional<ApiError> QueueBudgetError(int slots) const;

  void HandleHealth(const http::ServerRequest& request,
                    http::ResponseWriter& writer);
  void HandleStartupz(const http::ServerRequest& request,
                      http::ResponseWriter& writer);
  void HandleModels(const http::ServerRequest& request,
                    http::ResponseWriter& writer);
  void HandleTokenize(const http::ServerRequest& request,
                      http::ResponseWriter& writer);
  void HandleDetokenize(const http::ServerRequest& request,
                        http::ResponseWriter& writer);
  void HandleMetrics(const http::ServerRequest& request,
                     http::ResponseWriter& writer);

  // ---- inference (exchange.cc) ----
  void HandleInference(api::ApiKind kind, http::ServerRequest& request,
                       const std::shared_ptr<http::ResponseWriter>& writer);
  // Called by an Exchange when its response is complete (loop).
  void ExchangeDone(uint64_t id);

  // ---- configuration, shared state ----
  ServerConfig config;
  const std::string model_name;
  StartupTracker startup;
  telemetry::Registry registry;
  ServerMetrics metrics;
  const int64_t tick_interval_ns;
  const int64_t ping_interval_ns;

  // ---- loader (written before OnLoaded is posted) ----
  std::unique_ptr<model::Model> model;
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<engine::Engine> engine;
  std::unique_ptr<ChatPrompt> chat;
  int64_t n_ctx = 0;
  std::atomic<engine::Engine*> engine_for_stats{nullptr};

  // ---- loop ----
  http::EventLoop loop;
  std::unique_ptr<http::Server> http;
  std::unique_ptr<http::Timer> tick_timer;
  bool serving = false;  // engine ready and admitting
  bool loader_done = false;
  bool draining = false;
  bool engine_stopped = false;
  bool stopping = false;
  int64_t drain_deadline_ns = 0;
  bool next_is_cold = true;
  // Exponential average of recent requests' service time (admission to
  // finish), for the --queue-budget estimate; 0 until one finished.
  double service_ema_s = 0;
  uint64_t next_exchange_id = 1;
  std::unordered_map<uint64_t, std::shared_ptr<Exchange>> active;
  std::unique_ptr<http::Timer> final_timer;

  // ---- threads and exit ----
  uint16_t port = 0;
  std::thread loop_thread;
  std::thread loader_thread;
  std::atomic<bool> shutdown_requested{false};
  std::mutex exit_mu;
  std::condition_variable exit_cv;
  bool loop_exited = false;  // guarded by exit_mu
  int exit_code = 0;         // written on the loop before it exits
};

// A wake-up shared between the engine thread (which sets it and posts) and
// the loop (which clears it before draining), so a burst of tokens costs one
// post.
struct Wakeup {
  std::atomic<bool> posted{false};
};

// One inference request (chat or completions, n choices) from admission to
// the last byte. Lives in Impl::active while in flight; loop thread only.
class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  struct Choice {
    std::shared_ptr<engine::RequestStream> stream;
    std::string text;  // non-streaming: all text so far
    std::vector<model::SampleLogprobs>
        logprobs;  // non-streaming: all logprobs so far
    model::FinishReason finish = model::FinishReason::kNone;
    bool done = false;  // final event received
    int64_t completion_tokens = 0;
    int64_t cached_tokens = 0;
    int64_t prompt_tokens = 0;
    int64_t last_content_ns = 0;
    engine::RequestTimings timings;
  };

  Exchange(InferenceServer::Impl& server, uint64_t id, api::ApiKind kind,
           std::shared_ptr<http::ResponseWriter> w, std::string request_id);

  // After the streams are submitted: sends the SSE head (streaming) and
  // drains events already queued.
  void Begin();
  // Pops every queued event of every choice and writes what they produce.
  void Drain();
  // The client went away: cancel every choice (each then ends with a
  // kCancelled event, which completes the exchange).
  void OnPeerClosed();
  // Sends an SSE comment if the stream has been silent for `interval_ns`.
  void MaybePing(int64_t now_ns, int64_t interval_ns);
  void CancelAll();

  InferenceServer::Impl& server;
  const uint64_t id;
  const api::ApiKind kind;
  std::shared_ptr<http::ResponseWriter> writer;
  std::string request_id;  // X-Request-Id echo ("" when absent)
  ResponseIds ids;
  bool stream = false;
  bool include_usage = false;
  bool continuous_usage = false;
  bool with_logprobs = false;
  StartKind start = StartKind::kWarm;
  int64_t arrival_ns = 0;
  int64_t prompt_tokens = 0;
  std::vector<Choice> choices;
  std::shared_ptr<Wakeup> wakeup = std::make_shared<Wakeup>();

 private:
  void OnEvent(size_t index, engine::RequestEvent& event, std::string* out);
  void OnError(size_t index, const Status& status, std::string* out);
  void Complete();
  void RecordSuccess(int64_t now_ns);

  bool headers_sent_ = false;
  bool peer_gone_ = false;
  bool failed_ = false;  // an error has been answered (or the peer left)
  bool completed_ = false;
  ErrorClass error_class_ = ErrorClass::kInternal;
  int64_t first_content_ns_ = 0;
  int64_t last_write_ns_ = 0;
};

}  // namespace redline::server

#endif  // REDLINE_SERVER_SERVER_INTERNAL_H_
