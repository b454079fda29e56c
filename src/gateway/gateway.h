// Gateway: `redline gateway` as a library — one OpenAI-compatible front
// door for pools of upstream model servers (redline serve, llama.cpp's
// server, vLLM, ...): requests route by "model" to a pool, and within it by
// the pool's policy; failures before the first byte are retried elsewhere
// within a budget; upstreams are probed and ejected when they fail;
// /metrics shows all of it. docs/GATEWAY.md describes the behaviour.
//
// Threads: one event-loop thread runs the HTTP listener, every upstream
// call, the probes and all per-request state (no locks on the request
// path). The loop does no work that grows with a request beyond one JSON
// parse of its body (bounded by --max-body-bytes) and one copy per attempt;
// responses are passed through piece by piece. With the response cache or
// routing on, a second parse builds the cache key and the route score, and
// answers that may be stored are copied once into the cache; Redis I/O
// runs on the cache's own worker thread (redis_tier.h), never on the loop.
//
// Ownership: owns the loop, the listener, the pools and their connections.
// Destroying it stops everything at once; Shutdown() + Wait() drains first.
//
// Thread-safety: Start, Wait and the destructor from one controlling
// thread; Shutdown and port() from any thread.
#ifndef REDLINE_GATEWAY_GATEWAY_H_
#define REDLINE_GATEWAY_GATEWAY_H_

#include <cstdint>
#include <memory>

#include "base/result.h"
#include "gateway/gateway_config.h"

namespace redline::gateway {

class Gateway {
 public:
  // `config` must have passed FinalizeGatewayConfig.
  explicit Gateway(GatewayConfig config);
  ~Gateway();
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  // Binds the listener (and writes the port file), starts the loop thread
  // and the probes. Returns the bound port. Errors: InvalidArgument (bad
  // host), IoError (port in use, port file). Call once.
  Result<uint16_t> Start();

  // Graceful stop: /readyz turns 503, new requests get 503, requests in
  // flight may finish for shutdown_grace_s; then the rest end (503, or an
  // in-stream error) and the listener closes. Idempotent; any thread (not a
  // signal handler).
  void Shutdown();

  // Blocks until stopped; returns the process exit status (0).
  int Wait();

  uint16_t port() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace redline::gateway

#endif  // REDLINE_GATEWAY_GATEWAY_H_
