// ServerConfig: every setting of `redline serve`, declared once.
//
// VisitServerFlags lists each field exactly once with its flag names, help
// text and kind; the CLI builds its options (and so `--help` and the config
// file keys) from that list, and DescribeConfig prints the effective
// configuration from the same list, so flags, config file and log never
// disagree (style.md, practice 14).
//
// Ownership: plain value. Thread-safety: thread-compatible.
#ifndef REDLINE_SERVER_SERVER_CONFIG_H_
#define REDLINE_SERVER_SERVER_CONFIG_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace redline::server {

struct ServerConfig {
  // --- Model ---
  std::string model_path;
  // Name clients use in "model" and that /v1/models lists. Empty: the file
  // name without directory and ".gguf".
  std::string model_alias;
  // Jinja chat template to use instead of the model's tokenizer.chat_template.
  std::string chat_template_file;
  // Built-in template by family name (chatml, llama3, ...) instead of the
  // model's own.
  std::string chat_template_name;
  bool mlock = false;
  // Read weights from the file's pages, not copies (model/arch/repack.h).
  bool no_repack = false;
  bool no_warmup = false;

  // --- Network ---
  // Loopback by default: exposing a model is an explicit decision.
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: the OS picks (see port_file)
  // When set, the bound port is written here once listening (for scripts
  // and tests that use port 0).
  std::string port_file;
  // Largest request body accepted; larger ones get 413. 8 MiB holds a
  // 128k-token prompt as text (~4 bytes/token) with room to spare.
  int64_t max_body_bytes = 8 << 20;
  std::vector<std::string> api_keys;  // empty: no authentication
  std::string api_key_file;           // one key per line, added to api_keys

  // --- Engine ---
  int threads = 0;         // 0: physical cores
  int64_t ctx_tokens = 0;  // context per slot; 0: min(training context, 4096)
  int parallel = 4;        // slots decoded together
  std::string kv_type = "f16";  // KV cache element type: "f16" or "f32"
  int64_t batch_tokens =
      256;  // tokens per forward step (decode + prefill chunks)
  int max_queued_requests = 64;
  // Bound on prompt tokens waiting for a slot. Sized as TTFT budget x
  // prefill rate (serving.md §5): 32k tokens is ~3 s of prefill at ~10k
  // tok/s for a small model; set it from `redline bench-model` for yours.
  int64_t max_queued_tokens = 32768;
  bool no_prefix_cache = false;
  // Admission by expected wait: a request whose estimated time to a slot
  // (recent service time x its queue position / slots) exceeds this is
  // refused with 429 at once, so admitted requests keep their latency under
  // overload instead of queueing past the SLO. 0 disables (count and token
  // bounds still apply). 2 s leaves ~1 s of a 3 s TTFT line for prefill.
  double queue_budget_s = 2.0;

  // --- Requests ---
  // Deadline from arrival; 0 disables. Non-streaming requests past it get
  // 504, streams an error event.
  double request_timeout_s = 600;
  // An SSE comment line is sent when a stream has been silent this long
  // (long prefill, queueing). Below the 60 s idle limits of common proxies.
  double sse_ping_interval_s = 10;
  // On SIGTERM: stop admitting, let in-flight requests finish for this
  // long, then cancel the rest.
  double shutdown_grace_s = 30;
  // Upper bound on "n" (further bounded by --parallel).
  int max_n = 8;

  // --- Metrics ---
  // Prefix of Redline's own metric names. The default "redline_" passes
  // `promtool check metrics`, whose lint reserves ':' for recording rules;
  // "redline:" mirrors vLLM's "vllm:" exactly (docs/METRICS.md).
  std::string metrics_prefix = "redline_";

  // --- Not flags: for tests ---
  // Sleeps this long at each load-progress report, so tests can watch
  // /startupz progress rise.
  int load_step_delay_ms_for_test = 0;
  // When false, a failed load keeps the server up (phase "failed") instead
  // of exiting with status 1.
  bool exit_on_load_failure = true;
};

// How a field is exposed.
enum class FlagKind {
  kOption,    // takes a value
  kRequired,  // takes a value and must be given
  kSecret,    // takes a value; DescribeConfig masks it
};

// Calls visitor(field, names, help, kind) for each flag, in --help order.
// `names` is CLI11 syntax ("-m,--model"); the long name (without dashes) is
// the config-file key. bool fields are switches.
template <typename Visitor>
void VisitServerFlags(ServerConfig& c, Visitor&& v) {
  v(c.model_path, "-m,--model", "GGUF model file to serve",
    FlagKind::kRequired);
  v(c.model_alias, "-a,--alias",
    "Model name served in /v1/models and accepted in \"model\" (default: file "
    "name)",
    FlagKind::kOption);
  v(c.chat_template_file, "--chat-template-file",
    "Jinja chat template to use instead of the model's own", FlagKind::kOption);
  v(c.chat_template_name, "--chat-template",
    "Built-in chat template to use instead of the model's own: chatml, llama3, "
    "llama2, mistral, phi3, gemma",
    FlagKind::kOption);
  v(c.mlock, "--mlock", "Pin the weights in RAM (never swapped out)",
    FlagKind::kOption);
  v(c.no_repack, "--no-repack",
    "Read weights from the file's pages instead of copying them at load into "
    "huge pages (Q8_0/Q4_0 as packed panels on AVX-512 VNNI CPUs): faster "
    "load, slower decode and prefill",
    FlagKind::kOption);
  v(c.no_warmup, "--no-warmup",
    "Skip the warm-up generation before /readyz says ready", FlagKind::kOption);
  v(c.host, "--host",
    "Address to listen on (127.0.0.1: this machine only; 0.0.0.0: every "
    "interface)",
    FlagKind::kOption);
  v(c.port, "--port", "TCP port (0: any free port; see --port-file)",
    FlagKind::kOption);
  v(c.port_file, "--port-file",
    "Write the bound port to this file once listening", FlagKind::kOption);
  v(c.max_body_bytes, "--max-body-bytes",
    "Largest request body accepted; larger ones get 413", FlagKind::kOption);
  v(c.api_keys, "--api-key",
    "API key clients must send (Authorization: Bearer KEY or X-Api-Key: KEY); "
    "repeatable",
    FlagKind::kSecret);
  v(c.api_key_file, "--api-key-file",
    "File with one API key per line (added to --api-key)", FlagKind::kOption);
  v(c.threads, "-t,--threads", "Compute threads (0: physical cores)",
    FlagKind::kOption);
  v(c.ctx_tokens, "-c,--ctx",
    "Context per slot in tokens, prompt + output (0: min(model's, 4096))",
    FlagKind::kOption);
  v(c.kv_type, "--kv-type",
    "KV cache element type: f16 (half the memory; llama.cpp's default "
    "arithmetic) or f32 (exact)",
    FlagKind::kOption);
  v(c.parallel, "--parallel",
    "Slots: sequences decoded together (continuous batching)",
    FlagKind::kOption);
  v(c.batch_tokens, "-b,--batch",
    "Tokens per forward step (one per decoding stream, then prompt chunks)",
    FlagKind::kOption);
  v(c.max_queued_requests, "--max-queued-requests",
    "Requests allowed to wait for a slot; beyond it 429 with Retry-After",
    FlagKind::kOption);
  v(c.max_queued_tokens, "--max-queued-tokens",
    "Prompt tokens allowed to wait for a slot; beyond it 429 (set to TTFT "
    "budget x prefill tok/s)",
    FlagKind::kOption);
  v(c.queue_budget_s, "--queue-budget",
    "Refuse (429) a request whose estimated wait for a slot exceeds this many "
    "seconds; 0: off",
    FlagKind::kOption);
  v(c.no_prefix_cache, "--no-prefix-cache",
    "Do not reuse the KV of a cached prompt prefix", FlagKind::kOption);
  v(c.request_timeout_s, "--request-timeout",
    "Seconds from arrival until a request is abandoned (504, or an error event "
    "in a stream); 0: none",
    FlagKind::kOption);
  v(c.sse_ping_interval_s, "--sse-ping-interval",
    "Seconds of silence after which a stream gets an SSE comment line "
    "(keep-alive)",
    FlagKind::kOption);
  v(c.shutdown_grace_s, "--shutdown-grace",
    "Seconds in-flight requests may finish after SIGTERM before they are "
    "cancelled",
    FlagKind::kOption);
  v(c.max_n, "--max-n",
    "Largest \"n\" (choices per request) accepted; also at most --parallel",
    FlagKind::kOption);
  v(c.metrics_prefix, "--metrics-prefix",
    "Prefix of metric names: \"redline_\" (default; passes promtool) or "
    "\"redline:\" (vLLM style, which promtool's lint rejects)",
    FlagKind::kOption);
}

// Checks ranges (ports, counts, intervals) and reads --api-key-file into
// api_keys. Errors: InvalidArgument naming the flag, IoError for the key
// file.
Status FinalizeConfig(ServerConfig* config);

// One "name = value" line per flag (keys masked), for the start-up log.
std::string DescribeConfig(ServerConfig config);

// The served model name: alias, else the file name without ".gguf".
std::string ServedModelName(const ServerConfig& config);

}  // namespace redline::server

#endif  // REDLINE_SERVER_SERVER_CONFIG_H_
