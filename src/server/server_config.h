// ServerConfig: every setting of `redline serve`, declared once.
//
// VisitServerFlags lists each field exactly once with its flag names, help
// text and kind; the CLI builds its options (and so `--help` and the config
// file keys) from that list, and DescribeConfig prints the effective
// configuration from the same list, so flags, config file and log never
// disagree.
//
// Several models: `-m` (and `-a`) repeat, or the YAML config file has a
// `models:` list (see ParseModelsYaml). FinalizeConfig turns either into
// `models`, one ModelSpec per model, each inheriting the global engine
// flags it does not set itself.
//
// Ownership: plain value. Thread-safety: thread-compatible.
#ifndef REDLINE_SERVER_SERVER_CONFIG_H_
#define REDLINE_SERVER_SERVER_CONFIG_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace redline::server {

// One served model. Zero/empty fields inherit the global flag of the same
// name when FinalizeConfig runs.
struct ModelSpec {
  std::string path;
  // Name clients use in "model" and that /v1/models lists. Empty: the file
  // name without directory and ".gguf".
  std::string name;
  std::vector<std::string> aliases;  // more names that route here
  std::string chat_template_file;
  std::string chat_template_name;
  // Compute threads of this model's pool. 0: an even share of --threads
  // (or of the physical cores), at least 1.
  int threads = 0;
  int64_t ctx_tokens = 0;
  int parallel = 0;
  int64_t batch_tokens = 0;
  std::string kv_type;
  // Draft model (GGUF) for speculative decoding of this model; empty:
  // --draft-model (which may be empty too: prompt lookup, if speculative).
  std::string draft_model;
};

// Applied to a request field that the request does not set (llama.cpp's
// server defaults).
struct SamplingDefaults {
  double temperature = 0.8;
  int64_t top_k = 40;
  double top_p = 0.95;
  double min_p = 0.05;
  double repetition_penalty = 1.0;
  int64_t seed = -1;  // -1: a random seed per request
};

struct ServerConfig {
  // --- Model ---
  // GGUF files (-m, repeatable) and their names (-a, repeatable, in the
  // same order; missing ones default to the file name).
  std::vector<std::string> model_paths;
  std::vector<std::string> model_aliases;
  // Filled by FinalizeConfig (or by the config file's models: list).
  std::vector<ModelSpec> models;
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
  // Budgets of one connection, in seconds (0: off). Header: from accept
  // (or the first byte of a later request) to a complete header block;
  // body: from then to the whole body; idle: between keep-alive requests;
  // write: a response write that makes no progress. Like nginx's
  // client_header_timeout, client_body_timeout and keepalive_timeout.
  double header_timeout_s = 10;
  double body_timeout_s = 30;
  double idle_timeout_s = 60;
  double write_timeout_s = 30;
  // Open connections; beyond it new ones get 503 at once. 0: the
  // descriptor limit minus a reserve.
  int64_t max_connections = 0;
  std::vector<std::string> api_keys;  // empty: no authentication
  std::string api_key_file;           // one key per line, added to api_keys

  // --- Engine ---
  int threads = 0;         // 0: physical cores
  int64_t ctx_tokens = 0;  // context per slot; 0: min(training context, 4096)
  int parallel = 4;        // slots decoded together
  std::string kv_type = "f16";  // KV cache element type: "f16" or "f32"
  // Tokens per forward step (decode + prefill chunks).
  int64_t batch_tokens = 256;
  int max_queued_requests = 64;
  // Bound on prompt tokens waiting for a slot. Sized as TTFT budget x
  // prefill rate (docs/SERVING.md, admission): 32k tokens is ~3 s of
  // prefill at ~10k tok/s for a small model; set it from `redline
  // bench-model` for yours.
  int64_t max_queued_tokens = 32768;
  bool no_prefix_cache = false;
  // Prompt-lookup speculative decoding for every request that does not send
  // "speculative": false (docs/SERVER.md); at most draft_max tokens
  // verified per sequence per step.
  bool speculative = false;
  int draft_max = 8;
  // Drafts from this small model (same vocabulary, checked at load) instead
  // of prompt lookup; implies speculative. Applies to every model without a
  // draft_model of its own in the config file's models: list.
  std::string draft_model;
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
  // Budget of one chat-template render: a conversation (or a template)
  // that would take longer or hold more is refused with 400.
  int64_t template_time_budget_ms = 100;
  int64_t template_memory_budget_mb = 64;
  SamplingDefaults sampling;

  // --- Tracing (docs/OBSERVABILITY.md) ---
  // OTLP/HTTP JSON traces URL (".../v1/traces"); empty: the standard
  // OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT.
  std::string otlp_endpoint;
  // Chrome/Perfetto trace-event JSON written as requests finish.
  std::string trace_file;
  // Head sampling of new traces in [0, 1]; -1: OTEL_TRACES_SAMPLER_ARG or 1.
  double trace_sample = -1;
  // Traces of requests at least this slow (and failed ones) are kept
  // whatever the sampling; -1: off.
  double trace_slow_ms = -1;

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
  v(c.model_paths, "-m,--model",
    "GGUF model file to serve; repeat for several models (requests route by "
    "\"model\")",
    FlagKind::kOption);
  v(c.model_aliases, "-a,--alias",
    "Model name served in /v1/models and accepted in \"model\" (default: file "
    "name); repeat in -m order",
    FlagKind::kOption);
  v(c.chat_template_file, "--chat-template-file",
    "Jinja chat template to use instead of the model's own", FlagKind::kOption);
  v(c.chat_template_name, "--chat-template",
    "Chat template to use instead of the model's own: a built-in name "
    "(chatml, llama3, llama2, mistral, phi3, gemma) or a Jinja file",
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
  v(c.header_timeout_s, "--header-timeout",
    "Seconds a client may take to send a request's headers (then 408)",
    FlagKind::kOption);
  v(c.body_timeout_s, "--body-timeout",
    "Seconds a client may take to send a request's body, in all (then 408)",
    FlagKind::kOption);
  v(c.idle_timeout_s, "--idle-timeout",
    "Seconds a keep-alive connection may sit idle between requests",
    FlagKind::kOption);
  v(c.write_timeout_s, "--write-timeout",
    "Seconds a response write may make no progress before the connection is "
    "closed (and generation cancelled)",
    FlagKind::kOption);
  v(c.max_connections, "--max-connections",
    "Open connections; more get 503 at once (0: the descriptor limit minus a "
    "reserve)",
    FlagKind::kOption);
  v(c.api_keys, "--api-key",
    "API key clients must send (Authorization: Bearer KEY or X-Api-Key: KEY); "
    "repeatable",
    FlagKind::kSecret);
  v(c.api_key_file, "--api-key-file",
    "File with one API key per line (added to --api-key)", FlagKind::kOption);
  v(c.threads, "-t,--threads",
    "Compute threads in all (0: physical cores), split evenly between the "
    "models that do not set their own",
    FlagKind::kOption);
  // The canonical (config-file) name is the last long name of each flag.
  v(c.ctx_tokens, "-c,--ctx-size,--max-model-len,--ctx",
    "Context per slot in tokens, prompt + output (0: min(model's, 4096))",
    FlagKind::kOption);
  v(c.kv_type, "--kv-type",
    "KV cache element type: f16 (half the memory of f32), q8_0 (about half "
    "of f16; heads of a multiple of 32) or f32 (exact values)",
    FlagKind::kOption);
  v(c.parallel, "--parallel",
    "Slots: sequences decoded together (continuous batching); llama.cpp's "
    "-np works too",
    FlagKind::kOption);
  v(c.batch_tokens, "-b,--batch-size,--batch",
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
  v(c.template_time_budget_ms, "--template-time-budget",
    "Milliseconds one chat-template render may take; longer ones get 400",
    FlagKind::kOption);
  v(c.template_memory_budget_mb, "--template-memory-budget",
    "MiB one chat-template render may hold; more gets 400", FlagKind::kOption);
  v(c.sampling.temperature, "--temperature,--temp",
    "Temperature for requests that send none (0: greedy)", FlagKind::kOption);
  v(c.sampling.top_k, "--top-k", "top_k for requests that send none (0: off)",
    FlagKind::kOption);
  v(c.sampling.top_p, "--top-p", "top_p for requests that send none (1: off)",
    FlagKind::kOption);
  v(c.sampling.min_p, "--min-p", "min_p for requests that send none (0: off)",
    FlagKind::kOption);
  v(c.sampling.repetition_penalty, "--repeat-penalty",
    "repetition_penalty for requests that send none (1: off)",
    FlagKind::kOption);
  v(c.sampling.seed, "-s,--seed",
    "Sampling seed for requests that send none (-1: random per request)",
    FlagKind::kOption);
  v(c.speculative, "--speculative,--lookup",
    "Prompt-lookup speculative decoding (same output; faster when answers "
    "repeat their input); requests opt out with \"speculative\": false",
    FlagKind::kOption);
  v(c.draft_model, "--model-draft,--draft-model",
    "Speculative decoding with drafts from this small GGUF model (same "
    "vocabulary as the model, checked at load; implies --speculative)",
    FlagKind::kOption);
  v(c.draft_max, "--draft-max",
    "Most draft tokens verified per sequence per step with --speculative "
    "or --draft-model",
    FlagKind::kOption);
  v(c.otlp_endpoint, "--otlp-endpoint",
    "Export request traces over OTLP/HTTP JSON to this URL (.../v1/traces; "
    "default: OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces when set)",
    FlagKind::kOption);
  v(c.trace_file, "--trace-file",
    "Write request traces as Chrome/Perfetto trace-event JSON to this file",
    FlagKind::kOption);
  v(c.trace_sample, "--trace-sample",
    "Share of new traces kept, 0..1 (default: OTEL_TRACES_SAMPLER_ARG, else "
    "1); failed and --trace-slow-ms requests are always kept",
    FlagKind::kOption);
  v(c.trace_slow_ms, "--trace-slow-ms",
    "Always keep the traces of requests at least this slow (-1: off)",
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

// The name a model file is served under by default: the file name without
// directory and ".gguf".
std::string DefaultModelName(std::string_view path);

// Reads the `models:` list of a YAML config file into *models (each item:
// path, name (or alias), aliases, ctx, parallel, threads, batch, kv-type,
// chat-template, chat-template-file) and every other top-level key into
// *flags as (long flag name, values). Errors name the file, line and key.
Status ParseConfigYaml(
    const std::string& path, std::vector<ModelSpec>* models,
    std::vector<std::pair<std::string, std::vector<std::string>>>* flags);

}  // namespace redline::server

#endif  // REDLINE_SERVER_SERVER_CONFIG_H_
