// redline chaos: a TCP fault proxy in front of any address (src/gateway/
// chaos_proxy.h, docs/GATEWAY.md "Fault injection"): latency, jitter,
// bandwidth, drop after N bytes, reset, blackhole, refuse — from a
// schedule (--fault) or switched live through a control endpoint.
#include <fmt/format.h>
#include <signal.h>

#include <fstream>

#include "base/logging.h"
#include "cli/command_registry.h"
#include "gateway/chaos_control.h"
#include "gateway/chaos_proxy.h"
#include "gateway/fault_spec.h"

namespace redline::cli {
namespace {

struct ChaosFlags {
  std::string listen = "127.0.0.1:0";
  std::string target;
  std::string port_file;
  std::string control;
  std::string control_port_file;
  std::vector<std::string> faults;
};

// "host:port" -> parts; Status names the flag.
Status SplitHostPort(const std::string& flag, const std::string& text,
                     std::string* host, uint16_t* port) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return Status::InvalidArgument(flag + " must be HOST:PORT, got '" + text +
                                   "'");
  *host = text.substr(0, colon);
  const int p = std::atoi(text.c_str() + colon + 1);
  if (p < 0 || p > 65535 || text.substr(colon + 1).empty())
    return Status::InvalidArgument(flag + ": bad port in '" + text + "'");
  *port = static_cast<uint16_t>(p);
  return Status::Ok();
}

Status WritePort(const std::string& path, uint16_t port) {
  if (path.empty()) return Status::Ok();
  std::ofstream out(path + ".tmp");
  out << port << "\n";
  out.close();
  if (!out || std::rename((path + ".tmp").c_str(), path.c_str()) != 0)
    return Status::IoError("cannot write " + path);
  return Status::Ok();
}

int RunChaos(const ChaosFlags& flags) {
  gateway::ChaosOptions o;
  if (Status s = SplitHostPort("--listen", flags.listen, &o.listen_host,
                               &o.listen_port);
      !s.ok()) {
    fmt::print(stderr, "chaos: {}\n", s.message());
    return 2;
  }
  if (Status s = SplitHostPort("--target", flags.target, &o.target_host,
                               &o.target_port);
      !s.ok()) {
    fmt::print(stderr, "chaos: {}\n", s.message());
    return 2;
  }
  for (const std::string& f : flags.faults) {
    auto steps = gateway::ParseFaultSchedule(f);
    if (!steps.ok()) {
      fmt::print(stderr, "chaos: {}\n", steps.status().message());
      return 2;
    }
    o.schedule.insert(o.schedule.end(), steps->begin(), steps->end());
  }
  std::stable_sort(
      o.schedule.begin(), o.schedule.end(),
      [](const gateway::FaultStep& a, const gateway::FaultStep& b) {
        return a.at_ms < b.at_ms;
      });
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  gateway::ChaosProxy proxy(o);
  auto port = proxy.Start();
  if (!port.ok()) {
    fmt::print(stderr, "chaos: {}\n", port.status().message());
    return 1;
  }
  if (Status s = WritePort(flags.port_file, *port); !s.ok()) {
    fmt::print(stderr, "chaos: {}\n", s.message());
    return 1;
  }
  std::unique_ptr<gateway::ChaosControl> control;
  if (!flags.control.empty()) {
    std::string host;
    uint16_t cport = 0;
    if (Status s = SplitHostPort("--control", flags.control, &host, &cport);
        !s.ok()) {
      fmt::print(stderr, "chaos: {}\n", s.message());
      return 2;
    }
    control = std::make_unique<gateway::ChaosControl>(proxy, host, cport);
    auto bound = control->Start();
    if (!bound.ok()) {
      fmt::print(stderr, "chaos: --control: {}\n", bound.status().message());
      return 1;
    }
    if (Status s = WritePort(flags.control_port_file, *bound); !s.ok()) {
      fmt::print(stderr, "chaos: {}\n", s.message());
      return 1;
    }
    RL_LOG(kInfo, "chaos: control on http://{}:{}/faults", host, *bound);
  }
  RL_LOG(kInfo, "chaos: {}:{} -> {}:{} ({} scheduled step{})", o.listen_host,
         *port, o.target_host, o.target_port, o.schedule.size(),
         o.schedule.size() == 1 ? "" : "s");
  int sig = 0;
  sigwait(&set, &sig);
  if (control) control->Stop();
  proxy.Stop();
  return 0;
}

void Setup(CLI::App& sub, int* exit_code) {
  auto flags = std::make_shared<ChaosFlags>();
  sub.add_option("--listen", flags->listen,
                 "Address to accept on (HOST:PORT; port 0: any free)")
      ->capture_default_str();
  sub.add_option("--target", flags->target, "Address to forward to (HOST:PORT)")
      ->required();
  sub.add_option("--port-file", flags->port_file,
                 "Write the bound listen port to this file");
  sub.add_option("--control", flags->control,
                 "Serve the control endpoint here (HOST:PORT): GET/PUT/DELETE "
                 "/faults, GET /stats");
  sub.add_option("--control-port-file", flags->control_port_file,
                 "Write the bound control port to this file");
  sub.add_option(
      "--fault", flags->faults,
      "Fault schedule, repeatable: TIME:FAULTS steps joined by ',' (e.g. "
      "10s:latency=500ms,20s:reset,30s:clear); a step without TIME applies at "
      "once. FAULTS: latency=D, latency-up=D, jitter=D, bandwidth=BYTES/s, "
      "drop-after=BYTES, reset, blackhole, refuse, clear, joined by ';'");
  sub.callback([flags, exit_code] { *exit_code = RunChaos(*flags); });
}

}  // namespace

RL_REGISTER_COMMAND(chaos,
                    "TCP fault proxy: latency, bandwidth, drops, resets, "
                    "blackholes and refusals in front of any address",
                    Setup);

}  // namespace redline::cli
