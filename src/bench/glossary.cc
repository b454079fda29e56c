#include "bench/glossary.h"

namespace redline::bench {

const std::vector<std::pair<std::string_view, std::string_view>>&
GlossaryEntries() {
  // Times run from t_send (the first request byte written) unless the name
  // ends in _sched; "chunk" is one streamed SSE event.
  static const std::vector<std::pair<std::string_view, std::string_view>>
      kEntries = {
          {"ttft",
           "time to first token: request sent to the first chunk with "
           "non-empty text or reasoning text (includes queueing and prefill)"},
          {"ttfo",
           "time to first output: as ttft, counting only answer text, not "
           "reasoning; equals ttft for models that do not reason"},
          {"ttft_sched",
           "ttft measured from when the request should have been sent "
           "(t_sched), so a late client cannot hide the wait"},
          {"e2e",
           "end-to-end latency: request sent to its last content chunk (the "
           "last body byte when not streaming)"},
          {"e2e_stream",
           "request sent to the end of the stream ([DONE] or close), finish "
           "and usage chunks included"},
          {"e2e_sched", "e2e measured from t_sched (the planned send time)"},
          {"tpot",
           "time per output token: (e2e - ttft) / (N - 1) per request with N "
           ">= 2 output tokens; the decode pace one user sees"},
          {"ntpot",
           "normalized time per output token: e2e / N per request; includes "
           "ttft, so it is not tpot"},
          {"itl",
           "inter-token latency: every gap between consecutive content "
           "chunks, pooled over all successful requests (one sample per "
           "chunk)"},
          {"dispatch_delay",
           "t_send - t_sched: how late the client sent; its p99 bounds the "
           "run's validity"},
          {"error-adjusted",
           "a latency view where every failed request counts as +infinity; "
           "verdicts use it"},
          {"success", "a latency view over successful requests only"},
          {"errors",
           "failed requests / attempted, all error classes (connect, "
           "timeout, http_429, http_4xx, http_5xx, abort, parse)"},
          {"connect", "error class: the connection could not be opened"},
          {"timeout",
           "error class: the request, stream-idle or connect timeout fired"},
          {"http_429", "error class: the server refused with 429 (overloaded)"},
          {"http_4xx", "error class: another 4xx status"},
          {"http_5xx", "error class: a 5xx status"},
          {"abort",
           "error class: the stream ended early (connection closed, "
           "in-stream error)"},
          {"parse",
           "error class: a 2xx answer bench could not read (malformed JSON "
           "or SSE, no [DONE])"},
          {"offered", "arrivals the plan scheduled / measurement window"},
          {"sent", "requests actually sent / measurement window"},
          {"completed", "successful requests / measurement window"},
          {"goodput",
           "successful requests per second that met every per-request SLO"},
          {"good_fraction", "good requests / attempted requests"},
          {"concurrency", "time-weighted mean of requests in flight"},
          {"in flight", "requests sent and not yet finished"},
          {"output tok/s",
           "output tokens of successful requests / measurement window"},
          {"offered_rps", "as offered, in requests per second"},
          {"completed_rps", "as completed, in requests per second"},
          {"achieved_send_rps", "as sent, in requests per second"},
          {"output_tps", "as output tok/s"},
          {"peak_output_tps", "output tokens of the busiest whole second"},
          {"token_goodput",
           "output tokens per second of the requests that met every SLO"},
          {"CI",
           "confidence interval of a percentile: order-statistic bounds at "
           "the search's confidence (--confidence, 95 % by default)"},
          {"tail", "capacity step: its last arrival to its last completion"},
          {"drain",
           "capacity step: the wait for an idle server before it (with "
           "--scrape)"},
          {"running",
           "server: requests in a slot, prefilling or decoding "
           "(num_requests_running)"},
          {"waiting",
           "server: requests queued for a slot (num_requests_waiting)"},
          {"kv_cache",
           "server: KV-cache positions held / capacity (kv_cache_usage_perc)"},
          {"prompt tok/s",
           "server: rate of prompt_tokens_total between scrapes"},
          {"generation tok/s",
           "server: rate of generation_tokens_total between scrapes"},
          {"server ttft/e2e",
           "server side, from arrival (request parsed); p50/p99 interpolated "
           "in the histogram buckets added between two scrapes"},
          {"cpu",
           "server: rate of process_cpu_seconds_total; 100% = one core busy"},
          {"rss", "server: resident memory (process_resident_memory_bytes)"},
      };
  return kEntries;
}

std::string_view GlossaryDefinition(std::string_view term) {
  for (const auto& [k, v] : GlossaryEntries()) {
    if (k == term) return v;
  }
  return {};
}

}  // namespace redline::bench
