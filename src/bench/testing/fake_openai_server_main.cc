// fake_openai_server: runs the deterministic fake OpenAI server in the
// foreground (for manual runs and side-by-side load tool comparisons).
//   fake_openai_server --port 8000 --plan "ttft=100ms;gap=20ms;tokens=32"
//       [--threads 4] [--startup-delay-ms 500] [--slots 8]
// --slots N: the slot model (FakeServerOptions::slots), one thread only.
// --metrics-prefix P: a server's /metrics set under prefix P ("vllm:",
// "redline_"; FakeServerOptions::metrics_prefix).
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/testing/fake_openai_server.h"

namespace {
volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }
}  // namespace

int main(int argc, char** argv) {
  uint16_t port = 8000;
  int threads = 1;
  int slots = 0;
  std::string plan;
  std::string metrics_prefix;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--port") == 0 && i + 1 < argc) {
      port = static_cast<uint16_t>(std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--startup-delay-ms") == 0 &&
               i + 1 < argc) {
      // Simulates a server that loads for a while before it listens.
      std::this_thread::sleep_for(
          std::chrono::milliseconds(std::atoi(argv[++i])));
    } else if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--slots") == 0 && i + 1 < argc) {
      slots = std::max(0, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--plan") == 0 && i + 1 < argc) {
      plan = argv[++i];
    } else if (std::strcmp(argv[i], "--metrics-prefix") == 0 && i + 1 < argc) {
      metrics_prefix = argv[++i];
    } else {
      std::fprintf(
          stderr,
          "usage: fake_openai_server [--port N] [--threads N] [--slots N] "
          "[--metrics-prefix P] [--plan 'ttft=100ms;gap=20ms;tokens=32']\n");
      return 2;
    }
  }
  redline::bench::testing::FakeServerOptions options;
  options.record_truth = false;
  options.slots = slots;
  options.metrics_prefix = metrics_prefix;
  // Slots are per server: several threads would multiply them.
  if (slots > 0) threads = 1;
  if (!plan.empty()) {
    auto p =
        redline::bench::testing::FakePlan::Parse(plan, options.default_plan);
    if (!p.ok()) {
      std::fprintf(stderr, "%s\n", p.status().ToString().c_str());
      return 2;
    }
    options.default_plan = *p;
  }
  // One server (loop thread) per --threads, all on the same port.
  options.reuse_port = threads > 1;
  std::vector<std::unique_ptr<redline::bench::testing::FakeOpenAiServer>>
      servers;
  for (int t = 0; t < threads; ++t) {
    servers.push_back(
        std::make_unique<redline::bench::testing::FakeOpenAiServer>(options));
    auto bound = servers.back()->Start(port);
    if (!bound.ok()) {
      std::fprintf(stderr, "%s\n", bound.status().ToString().c_str());
      return 1;
    }
    port = *bound;
  }
  std::printf("listening on %s (%d thread%s)\n", servers[0]->BaseUrl().c_str(),
              threads, threads == 1 ? "" : "s");
  std::fflush(stdout);
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  for (auto& s : servers) s->Stop();
  return 0;
}
