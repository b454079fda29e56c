// ChaosControl: the small HTTP control endpoint of `redline chaos`, to
// switch faults during a run:
//
//   GET    /faults          the faults in force ("latency=500ms;jitter=20ms")
//   PUT    /faults  FAULTS  replace them (POST too); 400 names a bad fault
//   DELETE /faults          clear them
//   GET    /stats           {"connections", "open", "bytes_up", "bytes_down", "resets"}
//
// Threading: its own event-loop thread; the proxy's setters are
// thread-safe. Ownership: borrows the proxy, which must outlive it.
#ifndef REDLINE_GATEWAY_CHAOS_CONTROL_H_
#define REDLINE_GATEWAY_CHAOS_CONTROL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "base/result.h"
#include "gateway/chaos_proxy.h"
#include "http/event_loop.h"
#include "http/server.h"

namespace redline::gateway {

class ChaosControl {
 public:
  ChaosControl(ChaosProxy& proxy, std::string host, uint16_t port);
  ~ChaosControl();
  ChaosControl(const ChaosControl&) = delete;
  ChaosControl& operator=(const ChaosControl&) = delete;

  Result<uint16_t> Start();
  void Stop();

 private:
  void Handle(http::ServerRequest&& request,
              std::shared_ptr<http::ResponseWriter> writer);

  ChaosProxy& proxy_;
  std::string host_;
  uint16_t port_;
  http::EventLoop loop_;
  std::unique_ptr<http::Server> server_;
  std::thread thread_;
};

}  // namespace redline::gateway

#endif  // REDLINE_GATEWAY_CHAOS_CONTROL_H_
