#include "telemetry/tracer_metrics.h"

#include <string>

namespace redline::telemetry {

void AddTracerMetrics(Registry& registry, std::string_view prefix,
                      const Tracer* tracer) {
  const std::string p(prefix);
  Counter& exported =
      registry
          .AddCounter(p + "trace_spans_exported_total",
                      "Spans accepted by the OTLP collector or written to "
                      "the trace file")
          .Labels({});
  CounterFamily& dropped = registry.AddCounter(
      p + "trace_spans_dropped_total",
      "Spans dropped: the export queue was full (queue) or the collector "
      "failed or timed out (export)",
      {"reason"});
  Counter& dropped_queue = dropped.Labels({"queue"});
  Counter& dropped_export = dropped.Labels({"export"});
  Counter& failures = registry
                          .AddCounter(p + "trace_export_failures_total",
                                      "Failed OTLP export requests")
                          .Labels({});
  registry.AddCollector(
      [=, &exported, &dropped_queue, &dropped_export, &failures] {
        const TracerStats s = tracer->stats();
        exported.SetTotal(static_cast<double>(s.spans_exported));
        dropped_queue.SetTotal(static_cast<double>(s.spans_dropped_queue));
        dropped_export.SetTotal(static_cast<double>(s.spans_dropped_export));
        failures.SetTotal(static_cast<double>(s.export_failures));
      });
}

}  // namespace redline::telemetry
