#include "telemetry/span_json.h"

#include <fmt/format.h>

#include <cmath>

#include "base/json_escape.h"

namespace redline::telemetry {
namespace {

void AppendNumber(std::string* out, double v) {
  // JSON has no NaN/Inf; OTLP receivers reject them.
  if (!std::isfinite(v)) v = 0;
  fmt::format_to(std::back_inserter(*out), "{}", v);
}

void AppendOtlpValue(std::string* out, const AttributeValue& v) {
  if (const auto* s = std::get_if<std::string>(&v)) {
    *out += "{\"stringValue\":";
    *out += JsonQuote(*s);
    *out += '}';
  } else if (const auto* i = std::get_if<int64_t>(&v)) {
    fmt::format_to(std::back_inserter(*out), "{{\"intValue\":\"{}\"}}", *i);
  } else if (const auto* d = std::get_if<double>(&v)) {
    *out += "{\"doubleValue\":";
    AppendNumber(out, *d);
    *out += '}';
  } else {
    *out +=
        std::get<bool>(v) ? "{\"boolValue\":true}" : "{\"boolValue\":false}";
  }
}

void AppendOtlpAttributes(std::string* out,
                          const std::vector<Attribute>& attrs) {
  *out += '[';
  for (size_t i = 0; i < attrs.size(); ++i) {
    if (i > 0) *out += ',';
    *out += "{\"key\":";
    *out += JsonQuote(attrs[i].key);
    *out += ",\"value\":";
    AppendOtlpValue(out, attrs[i].value);
    *out += '}';
  }
  *out += ']';
}

void AppendEventArg(std::string* out, const AttributeValue& v) {
  if (const auto* s = std::get_if<std::string>(&v)) {
    *out += JsonQuote(*s);
  } else if (const auto* i = std::get_if<int64_t>(&v)) {
    fmt::format_to(std::back_inserter(*out), "{}", *i);
  } else if (const auto* d = std::get_if<double>(&v)) {
    AppendNumber(out, *d);
  } else {
    *out += std::get<bool>(v) ? "true" : "false";
  }
}

}  // namespace

std::string EncodeOtlpJson(const ResourceInfo& resource,
                           std::span<const SpanRecord> spans) {
  std::string out;
  out.reserve(256 + spans.size() * 384);
  out += "{\"resourceSpans\":[{\"resource\":{\"attributes\":";
  std::vector<Attribute> res{{"service.name", resource.service_name}};
  if (!resource.service_version.empty())
    res.push_back({"service.version", resource.service_version});
  AppendOtlpAttributes(&out, res);
  out += "},\"scopeSpans\":[{\"scope\":{\"name\":";
  out += JsonQuote(resource.scope_name);
  if (!resource.service_version.empty()) {
    out += ",\"version\":";
    out += JsonQuote(resource.service_version);
  }
  out += "},\"spans\":[";
  for (size_t i = 0; i < spans.size(); ++i) {
    const SpanRecord& s = spans[i];
    if (i > 0) out += ',';
    fmt::format_to(std::back_inserter(out),
                   "{{\"traceId\":\"{}\",\"spanId\":\"{}\"", s.trace_id.Hex(),
                   s.span_id.Hex());
    if (s.parent_span_id.valid())
      fmt::format_to(std::back_inserter(out), ",\"parentSpanId\":\"{}\"",
                     s.parent_span_id.Hex());
    out += ",\"name\":";
    out += JsonQuote(s.name);
    fmt::format_to(std::back_inserter(out),
                   ",\"kind\":{},\"startTimeUnixNano\":\"{}\","
                   "\"endTimeUnixNano\":\"{}\",\"attributes\":",
                   static_cast<int>(s.kind), s.start_unix_ns, s.end_unix_ns);
    AppendOtlpAttributes(&out, s.attributes);
    if (s.error) {
      out += ",\"status\":{\"code\":2,\"message\":";
      out += JsonQuote(s.status_message);
      out += '}';
    }
    out += '}';
  }
  out += "]}]}]}";
  return out;
}

std::string EncodeTraceEvents(std::span<const SpanRecord> spans, int64_t lane) {
  std::string out;
  out.reserve(spans.size() * 256);
  for (const SpanRecord& s : spans) {
    out += "{\"name\":";
    out += JsonQuote(s.name);
    fmt::format_to(std::back_inserter(out),
                   ",\"cat\":\"redline\",\"ph\":\"X\",\"ts\":{:.3f},"
                   "\"dur\":{:.3f},\"pid\":1,\"tid\":{},\"args\":{{",
                   static_cast<double>(s.start_unix_ns) / 1e3,
                   static_cast<double>(s.end_unix_ns - s.start_unix_ns) / 1e3,
                   lane);
    bool first = true;
    auto sep = [&] {
      if (!first) out += ',';
      first = false;
    };
    if (s.trace_id.valid()) {
      sep();
      fmt::format_to(std::back_inserter(out),
                     "\"trace_id\":\"{}\",\"span_id\":\"{}\"", s.trace_id.Hex(),
                     s.span_id.Hex());
    }
    if (s.parent_span_id.valid()) {
      sep();
      fmt::format_to(std::back_inserter(out), "\"parent_span_id\":\"{}\"",
                     s.parent_span_id.Hex());
    }
    if (s.error) {
      sep();
      out += "\"error\":";
      out += JsonQuote(s.status_message);
    }
    for (const Attribute& a : s.attributes) {
      sep();
      out += JsonQuote(a.key);
      out += ':';
      AppendEventArg(&out, a.value);
    }
    out += "}},\n";
  }
  return out;
}

}  // namespace redline::telemetry
