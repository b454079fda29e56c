// redline serve: the OpenAI-compatible server (src/server). This file only
// turns flags (or a config file) into a ServerConfig, runs the server and
// maps SIGTERM/SIGINT to a graceful shutdown.
#include <fmt/format.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>
#include <type_traits>

#include "base/logging.h"
#include "cli/command_registry.h"
#include "server/server.h"
#include "server/server_config.h"

namespace redline::cli {
namespace {

int RunServe(server::ServerConfig config) {
  // A server's log is read after the fact: every line carries its time.
  SetLogTimestamps(true);
  if (Status s = server::FinalizeConfig(&config); !s.ok()) {
    fmt::print(stderr, "serve: {}\n", s.message());
    return 2;
  }
  for (const server::ModelSpec& m : config.models) {
    if (!std::filesystem::exists(m.path)) {
      fmt::print(stderr, "serve: model file not found: {}\n", m.path);
      return 2;
    }
  }
  if (config.host != "127.0.0.1" && config.host != "::1" &&
      config.host != "localhost" && config.api_keys.empty()) {
    RL_LOG(kWarning,
           "serve: listening on {} without --api-key: anyone who can reach it "
           "can use the model",
           config.host);
  }
  RL_LOG(kInfo, "serve: configuration\n{}", server::DescribeConfig(config));

  // Signals: block SIGTERM/SIGINT in every thread (the ones started below
  // inherit the mask) and take them synchronously on a thread of our own,
  // where calling Shutdown() is safe (a handler could not lock or post).
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGUSR1);  // our own wake-up of the signal thread at exit
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  // Ignore SIGPIPE: a client that disconnects must not kill the server.
  signal(SIGPIPE, SIG_IGN);

  server::InferenceServer srv(config);
  auto port = srv.Start();
  if (!port.ok()) {
    fmt::print(stderr, "serve: {}\n", port.status().ToString());
    return 1;
  }
  std::atomic<bool> exiting{false};
  std::thread signals([&srv, &exiting, set] {
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
        RL_LOG(kInfo,
               "serve: {} received; draining (send it again to stop now)",
               sig == SIGTERM ? "SIGTERM" : "SIGINT");
        srv.Shutdown();
      } else if (now - first_signal < std::chrono::seconds(1)) {
        // The same signal delivered twice (to the process and its group,
        // as `timeout` does): not a request to hurry.
        continue;
      } else {
        RL_LOG(kWarning, "serve: second signal; exiting now");
        std::_Exit(130);
      }
    }
  });
  const int code = srv.Wait();
  // Wake the signal thread so it can be joined.
  exiting.store(true);
  pthread_kill(signals.native_handle(), SIGUSR1);
  signals.join();
  RL_LOG(kInfo, "serve: stopped");
  return code;
}

// CLI11 reads config files only for the top-level app, so the
// subcommand's --config is applied here, after the command line was parsed:
// each `key = value` sets the option of that long name unless the command
// line already gave it (command-line flags win). Keys may also sit in a
// [serve] section. Unknown keys are an error (fail fast on misconfiguration).
//
// A file ending in .yaml or .yml is read as YAML instead: the same keys, plus
// a `models:` list with per-model settings (server::ParseConfigYaml).
Status ApplyConfigFile(CLI::App& sub, server::ServerConfig* config) {
  CLI::Option* config_opt = sub.get_config_ptr();
  if (config_opt == nullptr || config_opt->count() == 0) return Status::Ok();
  const std::string path = config_opt->as<std::string>();
  std::vector<CLI::ConfigItem> items;
  if (path.ends_with(".yaml") || path.ends_with(".yml")) {
    std::vector<std::pair<std::string, std::vector<std::string>>> flags;
    std::vector<server::ModelSpec> models;
    RL_RETURN_IF_ERROR(server::ParseConfigYaml(path, &models, &flags));
    for (auto& [key, values] : flags) {
      CLI::ConfigItem item;
      item.name = key;
      item.inputs = std::move(values);
      items.push_back(std::move(item));
    }
    if (!models.empty()) {
      if (!config->model_paths.empty())
        return Status::InvalidArgument(
            "--config " + path +
            ": give the models either with -m or under models:, not both");
      config->models = std::move(models);
    }
  } else {
    try {
      items = sub.get_config_formatter()->from_file(path);
    } catch (const CLI::Error& e) {
      return Status::InvalidArgument("--config " + path + ": " + e.what());
    }
  }
  for (const CLI::ConfigItem& item : items) {
    if (item.name == "++" || item.name == "--") continue;  // section markers
    if (!item.parents.empty() &&
        !(item.parents.size() == 1 && item.parents[0] == "serve")) {
      return Status::InvalidArgument("--config " + path +
                                     ": unknown section for '" +
                                     item.fullname() + "'");
    }
    CLI::Option* opt = sub.get_option_no_throw("--" + item.name);
    if (opt == nullptr || opt == config_opt || item.name == "help") {
      return Status::InvalidArgument("--config " + path + ": unknown key '" +
                                     item.name + "'");
    }
    if (opt->count() > 0) continue;  // given on the command line
    try {
      opt->add_result(item.inputs);
      opt->run_callback();
    } catch (const CLI::Error& e) {
      return Status::InvalidArgument("--config " + path + ": " + item.name +
                                     ": " + e.what());
    }
  }
  return Status::Ok();
}

void Setup(CLI::App& sub, int* exit_code) {
  auto config = std::make_shared<server::ServerConfig>();
  sub.set_config(
      "--config", "",
      "Read flags from this file (TOML/INI: one 'key = value' per line, key = "
      "the long flag name, e.g. port = 8080, api-key = [\"k1\", \"k2\"]; or "
      "YAML (.yaml/.yml) with the same keys and a models: list, see "
      "docs/SERVER.md); command-line flags win",
      false);
  server::VisitServerFlags(
      *config, [&sub](auto& field, std::string_view names,
                      std::string_view help, server::FlagKind kind) {
        using T = std::decay_t<decltype(field)>;
        CLI::Option* opt = nullptr;
        if constexpr (std::is_same_v<T, bool>) {
          opt = sub.add_flag(std::string(names), field, std::string(help));
        } else {
          opt = sub.add_option(std::string(names), field, std::string(help));
          if (kind != server::FlagKind::kSecret) opt->capture_default_str();
        }
        if (kind == server::FlagKind::kRequired) opt->required();
      });
  CLI::App* app = &sub;
  sub.callback([config, exit_code, app] {
    if (Status s = ApplyConfigFile(*app, config.get()); !s.ok()) {
      fmt::print(stderr, "serve: {}\n", s.message());
      *exit_code = 2;
      return;
    }
    *exit_code = RunServe(*config);
  });
}

}  // namespace

RL_REGISTER_COMMAND(serve,
                    "Serve a GGUF model over an OpenAI-compatible HTTP API",
                    Setup);

}  // namespace redline::cli
