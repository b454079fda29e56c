#include "telemetry/trace_context.h"

#include <chrono>
#include <random>
#include <thread>

namespace redline::telemetry {
namespace {

constexpr char kHex[] = "0123456789abcdef";

template <size_t N>
std::string ToHex(const std::array<uint8_t, N>& bytes) {
  std::string out(2 * N, '0');
  for (size_t i = 0; i < N; ++i) {
    out[2 * i] = kHex[bytes[i] >> 4];
    out[2 * i + 1] = kHex[bytes[i] & 15];
  }
  return out;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // uppercase is invalid in traceparent
}

template <size_t N>
bool FromHex(std::string_view s, std::array<uint8_t, N>* out) {
  if (s.size() != 2 * N) return false;
  for (size_t i = 0; i < N; ++i) {
    const int hi = HexValue(s[2 * i]), lo = HexValue(s[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    (*out)[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

template <size_t N>
bool AnyNonZero(const std::array<uint8_t, N>& bytes) {
  for (uint8_t b : bytes)
    if (b != 0) return true;
  return false;
}

// Ids need uniqueness, not secrecy: a per-thread 64-bit generator seeded
// from the OS once is enough and costs nanoseconds per id.
std::mt19937_64& Generator() {
  thread_local std::mt19937_64 gen([] {
    std::random_device rd;
    const uint64_t t = static_cast<uint64_t>(
        std::chrono::steady_clock::now().time_since_epoch().count());
    const uint64_t tid =
        std::hash<std::thread::id>{}(std::this_thread::get_id());
    return (static_cast<uint64_t>(rd()) << 32 ^ rd()) ^ t ^ (tid << 17);
  }());
  return gen;
}

template <size_t N>
void Fill(std::array<uint8_t, N>* bytes) {
  do {
    for (size_t i = 0; i < N; i += 8) {
      uint64_t v = Generator()();
      for (size_t j = 0; j < 8 && i + j < N; ++j) {
        (*bytes)[i + j] = static_cast<uint8_t>(v);
        v >>= 8;
      }
    }
  } while (!AnyNonZero(*bytes));
}

}  // namespace

bool TraceId::valid() const { return AnyNonZero(bytes); }
std::string TraceId::Hex() const { return ToHex(bytes); }
uint64_t TraceId::Low64() const {
  uint64_t v = 0;
  for (size_t i = 8; i < 16; ++i) v = v << 8 | bytes[i];
  return v;
}
bool SpanId::valid() const { return AnyNonZero(bytes); }
std::string SpanId::Hex() const { return ToHex(bytes); }

std::optional<TraceContext> ParseTraceparent(std::string_view header,
                                             std::string_view tracestate) {
  // Surrounding optional whitespace is allowed by HTTP; nothing else is.
  while (!header.empty() && (header.front() == ' ' || header.front() == '\t'))
    header.remove_prefix(1);
  while (!header.empty() && (header.back() == ' ' || header.back() == '\t'))
    header.remove_suffix(1);
  if (header.size() < 55) return std::nullopt;
  std::array<uint8_t, 1> version{};
  if (!FromHex(header.substr(0, 2), &version) || version[0] == 0xff)
    return std::nullopt;
  if (version[0] == 0 && header.size() != 55) return std::nullopt;
  if (header.size() > 55 && header[55] != '-') return std::nullopt;
  if (header[2] != '-' || header[35] != '-' || header[52] != '-')
    return std::nullopt;
  TraceContext ctx;
  std::array<uint8_t, 1> flags{};
  if (!FromHex(header.substr(3, 32), &ctx.trace_id.bytes) ||
      !FromHex(header.substr(36, 16), &ctx.parent_span_id.bytes) ||
      !FromHex(header.substr(53, 2), &flags))
    return std::nullopt;
  if (!ctx.trace_id.valid() || !ctx.parent_span_id.valid()) return std::nullopt;
  ctx.sampled = (flags[0] & 1) != 0;
  if (tracestate.size() <= kMaxTracestateBytes)
    ctx.tracestate = std::string(tracestate);
  return ctx;
}

std::string FormatTraceparent(const TraceId& trace, const SpanId& span,
                              bool sampled) {
  std::string out = "00-";
  out += trace.Hex();
  out += '-';
  out += span.Hex();
  out += sampled ? "-01" : "-00";
  return out;
}

bool SampledByRatio(const TraceId& id, double ratio) {
  if (!(ratio > 0)) return false;
  if (ratio >= 1) return true;
  // 2^64 * ratio, compared in long double to keep the low bits honest.
  const long double bound =
      static_cast<long double>(ratio) * 18446744073709551616.0L;
  return static_cast<long double>(id.Low64()) < bound;
}

TraceId NewTraceId() {
  TraceId id;
  Fill(&id.bytes);
  return id;
}

SpanId NewSpanId() {
  SpanId id;
  Fill(&id.bytes);
  return id;
}

}  // namespace redline::telemetry
