// redline profile: the stage table of a model's load, prefill and decode
// (engine/model_profile.h), optionally with a timeline file.
#include <fmt/format.h>

#include <chrono>
#include <fstream>

#include "cli/command_registry.h"
#include "engine/model_profile.h"
#include "telemetry/span.h"
#include "telemetry/span_json.h"

namespace redline::cli {
namespace {

struct ProfileFlags {
  std::string model;
  int threads = 0;
  int64_t prompt_tokens = 128;
  int64_t decode_tokens = 32;
  int64_t batch_tokens = 256;
  std::string kv_type = "f16";
  std::string format = "text";
  std::string json_file;
  std::string trace_file;
  bool no_repack = false;
  bool no_bandwidth = false;
};

// The recorded stages as trace events on one row (prefill, then decode, in
// time order), one event per stage per layer, the layer in args.
bool WriteTimeline(const engine::ModelProfileResult& r,
                   const std::string& path) {
  const int64_t unix_now = telemetry::UnixNowNs();
  const int64_t steady_now =
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::steady_clock::now().time_since_epoch())
          .count();
  const int64_t offset = unix_now - steady_now;
  std::vector<telemetry::SpanRecord> spans;
  spans.reserve(r.events.size());
  for (const model::ForwardEvent& e : r.events) {
    telemetry::SpanRecord s;
    s.name = std::string(model::ForwardStageName(e.stage));
    s.start_unix_ns = e.start_ns + offset;
    s.end_unix_ns = e.start_ns + e.dur_ns + offset;
    if (e.layer >= 0) s.attributes.push_back({"layer", int64_t{e.layer}});
    spans.push_back(std::move(s));
  }
  std::ofstream out(path, std::ios::binary);
  out << "[\n"
      << telemetry::EncodeTraceEvents(spans, 1)
      << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,"
         "\"args\":{\"name\":\"redline profile\"}}\n]\n";
  return static_cast<bool>(out);
}

int RunProfile(const ProfileFlags& f) {
  auto kv_type = model::ParseKvType(f.kv_type);
  if (!kv_type.ok()) {
    fmt::print(stderr, "profile: {}\n", kv_type.status().ToString());
    return 2;
  }
  engine::ModelProfileOptions o;
  o.prompt_tokens = f.prompt_tokens;
  o.decode_tokens = f.decode_tokens;
  o.threads = f.threads;
  o.batch_tokens = f.batch_tokens;
  o.repack = !f.no_repack;
  o.measure_bandwidth = !f.no_bandwidth;
  o.kv_type = *kv_type;
  o.record_events = !f.trace_file.empty();
  auto r = engine::RunModelProfile(f.model, o);
  if (!r.ok()) {
    fmt::print(stderr, "profile: {}\n", r.status().ToString());
    return 1;
  }
  fmt::print("{}", f.format == "json" ? r->ToJson() : r->ToText());
  if (!f.json_file.empty()) {
    std::ofstream out(f.json_file);
    out << r->ToJson();
    if (!out) {
      fmt::print(stderr, "profile: cannot write {}\n", f.json_file);
      return 1;
    }
  }
  if (!f.trace_file.empty()) {
    if (!WriteTimeline(*r, f.trace_file)) {
      fmt::print(stderr, "profile: cannot write {}\n", f.trace_file);
      return 1;
    }
    fmt::print(stderr,
               "profile: timeline of {} stage events in {} (open in "
               "ui.perfetto.dev or chrome://tracing){}\n",
               r->events.size(), f.trace_file,
               r->events_dropped > 0
                   ? fmt::format("; {} events beyond the bound were dropped",
                                 r->events_dropped)
                   : std::string());
  }
  return 0;
}

void Setup(CLI::App& sub, int* exit_code) {
  auto f = std::make_shared<ProfileFlags>();
  sub.add_option("-m,--model", f->model, "GGUF model file")->required();
  sub.add_option("-t,--threads", f->threads,
                 "Threads (default: physical cores)");
  sub.add_option("--prefill,--n-prompt", f->prompt_tokens,
                 "Prompt tokens to prefill")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  sub.add_option("-n,--max-tokens,--n-predict", f->decode_tokens,
                 "Tokens to decode")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  sub.add_option("-b,--batch-size,--batch", f->batch_tokens,
                 "Tokens per forward step")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16))
      ->capture_default_str();
  sub.add_option("--kv-type", f->kv_type,
                 "KV cache element type: f16, q8_0 or f32")
      ->capture_default_str();
  sub.add_option("--format", f->format, "Output: text (table) or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  sub.add_option("--json", f->json_file, "Also write the JSON to this file");
  sub.add_option("--trace-file", f->trace_file,
                 "Write every stage of every step as a trace-event timeline "
                 "(Perfetto, chrome://tracing)");
  sub.add_flag("--no-repack", f->no_repack,
               "Read weights from the file's pages (no huge-page copy)");
  sub.add_flag("--no-bandwidth", f->no_bandwidth,
               "Skip the bandwidth measurement (no roofline column)");
  sub.callback([f, exit_code] { *exit_code = RunProfile(*f); });
}

}  // namespace

RL_REGISTER_COMMAND(profile,
                    "Time a model's load, prefill and decode stage by stage "
                    "against the machine's roofline",
                    Setup);

}  // namespace redline::cli
