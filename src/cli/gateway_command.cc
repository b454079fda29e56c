// redline gateway: one OpenAI-compatible endpoint in front of pools of
// model servers (src/gateway, docs/GATEWAY.md). This file only turns flags
// (or a YAML config file) into a GatewayConfig, runs the gateway and maps
// SIGTERM/SIGINT to a graceful shutdown, as `redline serve` does.
#include <fmt/format.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <type_traits>

#include "base/logging.h"
#include "cli/command_registry.h"
#include "gateway/config_yaml.h"
#include "gateway/gateway.h"
#include "gateway/gateway_config.h"

namespace redline::cli {
namespace {

int RunGateway(gateway::GatewayConfig config) {
  // A server's log is read after the fact: every line carries its time.
  SetLogTimestamps(true);
  if (Status s = gateway::FinalizeGatewayConfig(&config); !s.ok()) {
    fmt::print(stderr, "gateway: {}\n", s.message());
    return 2;
  }
  if (config.host != "127.0.0.1" && config.host != "::1" &&
      config.host != "localhost" && config.api_keys.empty()) {
    RL_LOG(kWarning,
           "gateway: listening on {} without --api-key: anyone who can reach "
           "it can use the upstreams",
           config.host);
  }
  RL_LOG(kInfo, "gateway: configuration\n{}",
         gateway::DescribeGatewayConfig(config));

  // Signals are taken synchronously on a thread of our own (see serve).
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  gateway::Gateway gw(config);
  auto port = gw.Start();
  if (!port.ok()) {
    fmt::print(stderr, "gateway: {}\n", port.status().ToString());
    return 1;
  }
  std::atomic<bool> exiting{false};
  std::thread signals([&gw, &exiting, set] {
    int count = 0;
    std::chrono::steady_clock::time_point first_signal;
    for (;;) {
      int sig = 0;
      if (sigwait(&set, &sig) != 0) continue;
      if (sig == SIGUSR1) {
        if (exiting.load()) return;
        continue;
      }
      const auto now = std::chrono::steady_clock::now();
      if (++count == 1) {
        first_signal = now;
        RL_LOG(kInfo, "gateway: {} received; draining",
               sig == SIGTERM ? "SIGTERM" : "SIGINT");
        gw.Shutdown();
      } else if (now - first_signal < std::chrono::seconds(1)) {
        continue;  // the same signal to the process and its group
      } else {
        RL_LOG(kWarning, "gateway: second signal; exiting now");
        std::_Exit(130);
      }
    }
  });
  const int code = gw.Wait();
  exiting.store(true);
  pthread_kill(signals.native_handle(), SIGUSR1);
  signals.join();
  RL_LOG(kInfo, "gateway: stopped");
  return code;
}

// The YAML file's top-level keys set the flags of the same long name unless
// the command line gave them; `pools:` sets the pools. Unknown keys are an
// error naming the line.
Status ApplyConfigFile(CLI::App& sub, gateway::GatewayConfig* config) {
  CLI::Option* config_opt = sub.get_config_ptr();
  if (config_opt == nullptr || config_opt->count() == 0) return Status::Ok();
  const std::string path = config_opt->as<std::string>();
  config->config_path = path;
  std::vector<gateway::FlagItem> flags;
  const gateway::CacheConfig cli_cache = config->cache;
  RL_RETURN_IF_ERROR(gateway::ParseGatewayYaml(
      path, &config->pools, &flags, &config->cache, &config->routing));
  // The cache flags share fields with the cache: section; the command line
  // wins there too.
  auto given = [&sub](const char* name) {
    const CLI::Option* o = sub.get_option_no_throw(name);
    return o != nullptr && o->count() > 0;
  };
  if (given("--cache")) config->cache.enabled = cli_cache.enabled;
  if (given("--redis")) config->cache.redis_url = cli_cache.redis_url;
  if (given("--cache-namespace"))
    config->cache.name_space = cli_cache.name_space;
  if (given("--warm")) config->cache.warm_file = cli_cache.warm_file;
  for (const gateway::FlagItem& item : flags) {
    const std::string where =
        fmt::format("--config {}:{}: {}", path, item.line, item.key);
    CLI::Option* opt = sub.get_option_no_throw("--" + item.key);
    if (opt == nullptr || opt == config_opt || item.key == "help")
      return Status::InvalidArgument(
          where + ": unknown key (flag names without dashes, or pools)");
    if (opt->count() > 0) continue;  // given on the command line
    try {
      opt->add_result(item.values);
      opt->run_callback();
    } catch (const CLI::Error& e) {
      return Status::InvalidArgument(where + ": " + e.what());
    }
  }
  return Status::Ok();
}

void Setup(CLI::App& sub, int* exit_code) {
  auto config = std::make_shared<gateway::GatewayConfig>();
  sub.set_config("--config", "",
                 "YAML file: the flags' long names as keys (port: 8088, "
                 "api-key: [k1]) and a pools: list with models, upstreams, "
                 "policy, timeouts, retries, hedging, health; see "
                 "docs/GATEWAY.md. Command-line flags win",
                 false);
  gateway::VisitGatewayFlags(
      *config, [&sub](auto& field, std::string_view names,
                      std::string_view help, gateway::GatewayFlagKind kind) {
        using T = std::decay_t<decltype(field)>;
        CLI::Option* opt = nullptr;
        if constexpr (std::is_same_v<T, bool>) {
          opt = sub.add_flag(std::string(names), field, std::string(help));
        } else {
          opt = sub.add_option(std::string(names), field, std::string(help));
          if (kind != gateway::GatewayFlagKind::kSecret)
            opt->capture_default_str();
        }
      });
  sub.footer(
      "Example: redline gateway --upstream http://127.0.0.1:8081 --upstream "
      "http://127.0.0.1:8082 --port 8088\n"
      "Per-pool settings (policy, max-in-flight, connect/first-byte/idle "
      "timeouts, deadline, retries, retry-budget, hedge-after, health, "
      "outlier, affinity, scrape-metrics, slow-start) live in the YAML "
      "--config; docs/GATEWAY.md lists every key.");
  CLI::App* app = &sub;
  sub.callback([config, exit_code, app] {
    if (Status s = ApplyConfigFile(*app, config.get()); !s.ok()) {
      fmt::print(stderr, "gateway: {}\n", s.message());
      *exit_code = 2;
      return;
    }
    *exit_code = RunGateway(*config);
  });
}

}  // namespace

RL_REGISTER_COMMAND(gateway,
                    "Route OpenAI requests across pools of model servers "
                    "(load- and prefix-aware, with failover)",
                    Setup);

}  // namespace redline::cli
