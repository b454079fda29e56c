// The tracer's own counters in a metrics registry, so a collector that is
// down or too slow shows up on /metrics rather than only in a log:
//
//   {prefix}trace_spans_exported_total
//   {prefix}trace_spans_dropped_total{reason="queue"|"export"}
//   {prefix}trace_export_failures_total
//
// Ownership: `tracer` is borrowed and must outlive the registry's last
// render. Thread-safety: as Registry (values are copied from
// Tracer::stats() at each render).
#ifndef REDLINE_TELEMETRY_TRACER_METRICS_H_
#define REDLINE_TELEMETRY_TRACER_METRICS_H_

#include <string_view>

#include "telemetry/metrics.h"
#include "telemetry/tracer.h"

namespace redline::telemetry {

void AddTracerMetrics(Registry& registry, std::string_view prefix,
                      const Tracer* tracer);

}  // namespace redline::telemetry

#endif  // REDLINE_TELEMETRY_TRACER_METRICS_H_
