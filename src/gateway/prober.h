// Prober: active health checks and model discovery for every upstream.
//
// Each pool with a probe interval GETs its probe path (/readyz by default)
// on every upstream once per interval: 200 passes, anything else (or no
// answer within the probe timeout) fails; a 404 switches that upstream to
// /health for good (llama.cpp and vLLM answer /health, not /readyz) and
// probes again at once. Pools that list no models learn them from each
// upstream's /v1/models (api::ParseModelIds), fetched after its first
// passing probe and every 30 s after (every 5 s until it answers, when the
// pool has no probes).
//
// Threading: loop thread only. Ownership: borrows the pools (which must
// outlive it); owns its http::Client and the in-flight probe handlers.
// Bounds: one probe and one model fetch per upstream at a time, 1 MiB per
// answer body.
#ifndef REDLINE_GATEWAY_PROBER_H_
#define REDLINE_GATEWAY_PROBER_H_

#include <memory>
#include <unordered_map>
#include <vector>

#include "gateway/pool.h"
#include "http/client.h"
#include "http/event_loop.h"

namespace redline::gateway {

class Prober {
 public:
  Prober(http::EventLoop& loop, std::vector<Pool*> pools);
  ~Prober();
  Prober(const Prober&) = delete;
  Prober& operator=(const Prober&) = delete;

  // Probes every upstream now, then on each pool's interval.
  void Start();

 private:
  struct Call;
  void Tick(size_t pool);
  void Probe(Pool& pool, Upstream& u);
  void FetchModels(Pool& pool, Upstream& u);
  void OnProbeDone(Pool& pool, Upstream& u, int status, bool transport_ok);
  void OnModelsDone(Pool& pool, Upstream& u, int status,
                    const std::string& body);
  void Forget(Call* call);

  http::EventLoop& loop_;
  std::vector<Pool*> pools_;
  std::unique_ptr<http::Client> client_;
  std::vector<std::unique_ptr<http::Timer>> timers_;
  std::unordered_map<Call*, std::unique_ptr<Call>> calls_;
};

}  // namespace redline::gateway

#endif  // REDLINE_GATEWAY_PROBER_H_
