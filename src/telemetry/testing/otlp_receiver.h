// OtlpReceiver (tests only): an OTLP/HTTP JSON trace receiver on loopback
// (port 0, its own thread) that validates every POST /v1/traces body field
// by field against the OTLP JSON mapping and keeps the spans it got.
//
// Validation covers what a collector would reject or misread: the
// resourceSpans/scopeSpans/spans nesting, hex ids of the right length
// (lowercase, not all zero), integer kinds in 1..5, nanosecond times as
// decimal strings with end >= start, typed attribute values (intValue as a
// decimal string), status codes. Each problem is recorded in errors().
//
// Thread-safety: accessors lock; safe while the receiver runs.
#ifndef REDLINE_TELEMETRY_TESTING_OTLP_RECEIVER_H_
#define REDLINE_TELEMETRY_TESTING_OTLP_RECEIVER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace redline::telemetry::testing {

struct ReceivedSpan {
  std::string service_name;
  std::string trace_id;
  std::string span_id;
  std::string parent_span_id;  // empty for a root
  std::string name;
  int kind = 0;
  int64_t start_unix_ns = 0;
  int64_t end_unix_ns = 0;
  // Attribute values rendered as text ("42", "0.5", "true", "stop").
  std::map<std::string, std::string> attributes;
  int status_code = 0;
};

class OtlpReceiver {
 public:
  // `status`: what every POST is answered with (500 to test failures).
  explicit OtlpReceiver(int status = 200);
  ~OtlpReceiver();

  std::string endpoint() const;  // http://127.0.0.1:PORT/v1/traces
  std::vector<ReceivedSpan> spans() const;
  std::vector<std::string> errors() const;
  int64_t posts() const;
  // Waits until at least `n` spans arrived or `timeout_ms` passed.
  bool WaitForSpans(size_t n, int64_t timeout_ms) const;

  struct State;

 private:
  std::shared_ptr<State> state_;
  std::thread thread_;
};

// Validates one OTLP JSON body; appends spans and problems.
void ValidateOtlpJson(const std::string& body, std::vector<ReceivedSpan>* spans,
                      std::vector<std::string>* errors);

}  // namespace redline::telemetry::testing

#endif  // REDLINE_TELEMETRY_TESTING_OTLP_RECEIVER_H_
