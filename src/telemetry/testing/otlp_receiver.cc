#include "telemetry/testing/otlp_receiver.h"

#include <fmt/format.h>

#include <boost/json.hpp>
#include <chrono>
#include <condition_variable>

#include "http/event_loop.h"
#include "http/server.h"

namespace redline::telemetry::testing {
namespace json = boost::json;

struct OtlpReceiver::State {
  mutable std::mutex mu;
  mutable std::condition_variable cv;
  std::vector<ReceivedSpan> spans;
  std::vector<std::string> errors;
  int64_t posts = 0;
  uint16_t port = 0;
  bool ready = false;
  http::EventLoop loop;
  std::unique_ptr<http::Server> server;
};

namespace {

bool IsHex(const std::string& s, size_t len) {
  if (s.size() != len) return false;
  bool nonzero = false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    if (c != '0') nonzero = true;
  }
  return nonzero;
}

bool DecimalString(const json::value* v, int64_t* out) {
  if (v == nullptr || !v->is_string()) return false;
  const json::string& s = v->as_string();
  if (s.empty() || s.size() > 19) return false;
  int64_t n = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + (c - '0');
  }
  *out = n;
  return true;
}

std::string ValueText(const json::object& value, const std::string& key,
                      std::vector<std::string>* errors) {
  if (value.size() != 1) {
    errors->push_back(fmt::format("attribute {}: value needs one field", key));
    return {};
  }
  const auto& [kind, v] = *value.begin();
  if (kind == "stringValue" && v.is_string()) return std::string(v.as_string());
  if (kind == "intValue") {
    int64_t n = 0;
    // Negative numbers are valid ints; accept a leading minus.
    if (v.is_string() && !v.as_string().empty() && v.as_string()[0] == '-')
      return std::string(v.as_string());
    if (DecimalString(&v, &n)) return std::to_string(n);
    errors->push_back(
        fmt::format("attribute {}: intValue must be a decimal string", key));
    return {};
  }
  if (kind == "doubleValue" && v.is_number())
    return fmt::format("{}", v.to_number<double>());
  if (kind == "boolValue" && v.is_bool()) return v.as_bool() ? "true" : "false";
  errors->push_back(
      fmt::format("attribute {}: bad value kind {}", key, std::string(kind)));
  return {};
}

void ReadAttributes(const json::value* attrs,
                    std::map<std::string, std::string>* out,
                    std::vector<std::string>* errors) {
  if (attrs == nullptr) return;
  if (!attrs->is_array()) {
    errors->push_back("attributes must be an array");
    return;
  }
  for (const json::value& a : attrs->as_array()) {
    const json::object* o = a.if_object();
    const json::value* k = o != nullptr ? o->if_contains("key") : nullptr;
    const json::value* v = o != nullptr ? o->if_contains("value") : nullptr;
    if (k == nullptr || !k->is_string() || v == nullptr || !v->is_object()) {
      errors->push_back("attribute needs a string key and an object value");
      continue;
    }
    const std::string key(k->as_string());
    (*out)[key] = ValueText(v->as_object(), key, errors);
  }
}

}  // namespace

void ValidateOtlpJson(const std::string& body, std::vector<ReceivedSpan>* spans,
                      std::vector<std::string>* errors) {
  boost::system::error_code ec;
  json::value root = json::parse(body, ec);
  if (ec || !root.is_object()) {
    errors->push_back("body is not a JSON object");
    return;
  }
  const json::value* rs = root.as_object().if_contains("resourceSpans");
  if (rs == nullptr || !rs->is_array()) {
    errors->push_back("resourceSpans must be an array");
    return;
  }
  for (const json::value& r : rs->as_array()) {
    std::map<std::string, std::string> resource;
    const json::value* res =
        r.is_object() ? r.as_object().if_contains("resource") : nullptr;
    if (res != nullptr && res->is_object())
      ReadAttributes(res->as_object().if_contains("attributes"), &resource,
                     errors);
    if (!resource.contains("service.name"))
      errors->push_back("resource has no service.name");
    const json::value* ss =
        r.is_object() ? r.as_object().if_contains("scopeSpans") : nullptr;
    if (ss == nullptr || !ss->is_array()) {
      errors->push_back("scopeSpans must be an array");
      continue;
    }
    for (const json::value& scope : ss->as_array()) {
      const json::value* list =
          scope.is_object() ? scope.as_object().if_contains("spans") : nullptr;
      if (list == nullptr || !list->is_array()) {
        errors->push_back("spans must be an array");
        continue;
      }
      for (const json::value& sv : list->as_array()) {
        const json::object* s = sv.if_object();
        if (s == nullptr) {
          errors->push_back("span is not an object");
          continue;
        }
        ReceivedSpan out;
        out.service_name = resource["service.name"];
        auto str = [&](const char* k) -> std::string {
          const json::value* v = s->if_contains(k);
          return v != nullptr && v->is_string() ? std::string(v->as_string())
                                                : std::string();
        };
        out.trace_id = str("traceId");
        out.span_id = str("spanId");
        out.parent_span_id = str("parentSpanId");
        out.name = str("name");
        if (!IsHex(out.trace_id, 32))
          errors->push_back("traceId must be 32 lowercase hex digits");
        if (!IsHex(out.span_id, 16))
          errors->push_back("spanId must be 16 lowercase hex digits");
        if (!out.parent_span_id.empty() && !IsHex(out.parent_span_id, 16))
          errors->push_back("parentSpanId must be 16 lowercase hex digits");
        if (out.name.empty()) errors->push_back("span without a name");
        const json::value* kind = s->if_contains("kind");
        if (kind == nullptr || !kind->is_int64() || kind->as_int64() < 1 ||
            kind->as_int64() > 5)
          errors->push_back("kind must be an integer 1..5");
        else
          out.kind = static_cast<int>(kind->as_int64());
        if (!DecimalString(s->if_contains("startTimeUnixNano"),
                           &out.start_unix_ns) ||
            !DecimalString(s->if_contains("endTimeUnixNano"), &out.end_unix_ns))
          errors->push_back("times must be decimal strings of nanoseconds");
        else if (out.end_unix_ns < out.start_unix_ns)
          errors->push_back("span ends before it starts");
        ReadAttributes(s->if_contains("attributes"), &out.attributes, errors);
        if (const json::value* st = s->if_contains("status")) {
          const json::value* code =
              st->is_object() ? st->as_object().if_contains("code") : nullptr;
          if (code == nullptr || !code->is_int64() || code->as_int64() < 0 ||
              code->as_int64() > 2)
            errors->push_back("status.code must be 0, 1 or 2");
          else
            out.status_code = static_cast<int>(code->as_int64());
        }
        spans->push_back(std::move(out));
      }
    }
  }
}

OtlpReceiver::OtlpReceiver(int status) : state_(std::make_shared<State>()) {
  thread_ = std::thread([st = state_, status] {
    http::ServerOptions opts;
    // The handler holds the state by raw pointer: the loop's pending
    // operations (kept by the state's own loop) hold the handler, and a
    // shared_ptr there would keep the state alive forever. The state
    // outlives the server (reset in the destructor).
    st->server = std::make_unique<http::Server>(
        st->loop, opts,
        [st = st.get(), status](http::ServerRequest&& req,
                                std::shared_ptr<http::ResponseWriter> writer) {
          {
            std::lock_guard<std::mutex> lock(st->mu);
            ++st->posts;
            if (req.method != "POST" || req.Path() != "/v1/traces")
              st->errors.push_back("request is not POST /v1/traces");
            if (req.HeaderValue("Content-Type") != "application/json")
              st->errors.push_back("Content-Type is not application/json");
            ValidateOtlpJson(req.body, &st->spans, &st->errors);
          }
          st->cv.notify_all();
          writer->Respond(status, {{"Content-Type", "application/json"}}, "{}");
        });
    auto port = st->server->Start();
    {
      std::lock_guard<std::mutex> lock(st->mu);
      st->port = port.ok() ? *port : 0;
      st->ready = true;
    }
    st->cv.notify_all();
    st->loop.Run();
    st->server->Stop();
  });
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->cv.wait(lock, [this] { return state_->ready; });
}

OtlpReceiver::~OtlpReceiver() {
  state_->loop.Stop();
  thread_.join();
  state_->server.reset();
}

std::string OtlpReceiver::endpoint() const {
  return fmt::format("http://127.0.0.1:{}/v1/traces", state_->port);
}

std::vector<ReceivedSpan> OtlpReceiver::spans() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->spans;
}

std::vector<std::string> OtlpReceiver::errors() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->errors;
}

int64_t OtlpReceiver::posts() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->posts;
}

bool OtlpReceiver::WaitForSpans(size_t n, int64_t timeout_ms) const {
  std::unique_lock<std::mutex> lock(state_->mu);
  return state_->cv.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                             [&] { return state_->spans.size() >= n; });
}

}  // namespace redline::telemetry::testing
