// InferenceServer: `redline serve` as a library — an OpenAI-compatible HTTP
// server over one or more models (requests route by "model"), with probes,
// metrics, admission control, deadlines, cancellation on disconnect and
// graceful shutdown. docs/SERVER.md describes the behaviour on the wire,
// docs/SERVING.md the conventions it follows.
//
// Threads:
//   * the event-loop thread runs every HTTP handler, owns all per-request
//     state (no locks on the request path) and writes every byte;
//   * the loader thread loads each model in turn, builds its engine and runs
//     its warm-up, hands it to the loop and exits after the last;
//   * each model's engine has its owner thread (engine/engine.h) that runs
//     the batched steps and pushes events; its notifier only posts a wake-up
//     to the loop, where an InferenceSession (session.h) drains them.
// HTTP is served from Start() on: /livez answers at once, /startupz reports
// the load, inference routes answer 503 until the warm-up is done.
//
// Ownership: the server owns the loop, the HTTP listener, and every model
// with its thread pool and engine. Destroying it stops everything at once (in-flight
// requests are cancelled); call Shutdown() + Wait() for a graceful stop.
//
// Thread-safety: Start, Wait and the destructor from one controlling
// thread; Shutdown, port() and startup() from any thread.
#ifndef REDLINE_SERVER_SERVER_H_
#define REDLINE_SERVER_SERVER_H_

#include <cstdint>
#include <memory>

#include "base/result.h"
#include "engine/engine.h"
#include "server/server_config.h"
#include "server/startup.h"

namespace redline::server {

class InferenceServer {
 public:
  // `config` must have passed FinalizeConfig.
  explicit InferenceServer(ServerConfig config);
  ~InferenceServer();
  InferenceServer(const InferenceServer&) = delete;
  InferenceServer& operator=(const InferenceServer&) = delete;

  // Checks every model file's header and KV-cache size, binds the
  // listener, starts the loop thread and the background load. Returns the
  // bound port. Errors: InvalidArgument (bad file, bad host),
  // ResourceExhausted (the KV caches do not fit in memory), IoError (port in
  // use, port file not writable). Call once.
  Result<uint16_t> Start();

  // Graceful shutdown: /readyz turns 503 ("draining") and new inference
  // requests get 503; in-flight ones may finish for shutdown_grace_s, then
  // the rest are cancelled (streams get an error event) and the listener
  // closes. Idempotent; safe from any thread (not from a signal handler).
  void Shutdown();

  // Blocks until the server has stopped. Returns the process exit status:
  // 0 after Shutdown, 1 when the model failed to load (with
  // exit_on_load_failure).
  int Wait();

  uint16_t port() const;
  StartupSnapshot startup() const;
  // Engine counters of model `model` (configuration order; zeros until its
  // engine exists). For tests and logs.
  engine::EngineStats engine_stats(size_t model = 0) const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace redline::server

#endif  // REDLINE_SERVER_SERVER_H_
