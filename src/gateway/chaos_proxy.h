// ChaosProxy: a TCP fault proxy (what `redline chaos` runs): it listens on
// one address, forwards every connection to a target, and injects the
// faults of fault_spec.h into the bytes — in user space, as toxiproxy does,
// because a container kernel usually offers no netem.
//
// Faults can change at any moment (SetFaults, from the control endpoint or
// a schedule): latency and bandwidth apply to bytes read after the change;
// reset and blackhole also hit connections already open; refuse closes the
// listener until cleared (the port is bound again).
//
// Threading: one thread of its own runs a poll() loop over every socket;
// SetFaults/faults/stats are safe from any thread. Bounds: at most
// max_connections connections (more are reset at once) and
// max_buffered_bytes waiting per direction per connection (beyond it the
// proxy stops reading that side: TCP back-pressure).
#ifndef REDLINE_GATEWAY_CHAOS_PROXY_H_
#define REDLINE_GATEWAY_CHAOS_PROXY_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"
#include "gateway/fault_spec.h"

namespace redline::gateway {

struct ChaosOptions {
  std::string listen_host = "127.0.0.1";
  uint16_t listen_port = 0;  // 0: any free port
  std::string target_host = "127.0.0.1";
  uint16_t target_port = 0;
  size_t max_connections = 1024;
  size_t max_buffered_bytes = 1 << 20;
  // Applied at Start() + at_ms, in order.
  std::vector<FaultStep> schedule;
  uint64_t seed = 1;
};

struct ChaosStats {
  uint64_t connections = 0;  // accepted
  int64_t open = 0;
  uint64_t bytes_up = 0;    // towards the target
  uint64_t bytes_down = 0;  // from the target
  uint64_t resets = 0;      // connections reset by a fault
};

class ChaosProxy {
 public:
  explicit ChaosProxy(ChaosOptions options);
  ~ChaosProxy();
  ChaosProxy(const ChaosProxy&) = delete;
  ChaosProxy& operator=(const ChaosProxy&) = delete;

  // Resolves the target, binds the listener and starts the thread. Returns
  // the bound port.
  Result<uint16_t> Start();
  void Stop();

  void SetFaults(const Faults& faults);
  Faults faults() const;
  ChaosStats stats() const;
  uint16_t port() const { return port_; }

  struct Loop;

 private:
  ChaosOptions options_;
  uint16_t port_ = 0;
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
};

}  // namespace redline::gateway

#endif  // REDLINE_GATEWAY_CHAOS_PROXY_H_
